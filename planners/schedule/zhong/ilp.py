"""Zhong et al.'s scheduling ILP (§IV-A, eq. 1–6) with topology-aware pruning (eq. 7–10), in CP-SAT.

Variables (Table I): ``O[i, j]`` node i runs at step j; ``T[b, j]`` buffer b is in memory at
step j; ``mem`` the peak. Constraints:

- (1) one node per step; (2) every node once;
- (3) a node runs only when its inputs are in memory: O[i, j] <= T[b, j] for b in IN_i
  (and its outputs are, too: the stable footprint counts them at the producer's step);
- (4) a buffer is in memory only if it was at j-1 or its producer runs at j;
  (5) nothing but the INPUT buffers (``live_at_start``) is in memory before step 0.
  A buffer without producer (a weight read by several nodes) may appear once, at a step
  where one of its readers runs, so it is counted from its first use as in
  ``npusim.graph.analysis``;
- (6) Σ_b S_b·T[b, j] + Σ_k ES_k·O[k, j] <= mem for every step j (one node per step, so
  the per-k constraints of the paper collapse into one sum).

Pruning: (7)/(9) a node cannot run before |anc(i)| or after |V|-1-|des(i)| (0-based steps),
so O outside that window is not created; (8)/(10) a buffer cannot be in memory before its
producer's earliest step nor after its last reader's latest step, so T is not created there.
``prune=False`` creates the full O(n²) model (ablation, tests).

Sizes are divided by their greatest common divisor so CP-SAT sees small coefficients.

Time: the solve gets what is left of a ``Budget`` (``budget``) once its model is built, so
with wall-clock limits (``deterministic=false``) building the model counts too; with no
budget left the warm start is returned as ``timed_out``, never as ``optimal``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from planners.schedule.cp import add_hints, cp_model

from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import SolverOptions, check_model_size, has_solution, make_solver, status_name
from planners.schedule.zhong.budget import Budget


@dataclass(frozen=True)
class ScheduleResult:
    order: list[int]
    peak: int
    status: str
    bound: int
    seconds: float
    variables: int


def step_windows(problem: MemoryProblem) -> tuple[list[int], list[int]]:
    """Earliest and latest step of every node: |anc| and n-1-|des| (eq. 7, 9)."""
    n = problem.n
    asap = [bin(m).count("1") for m in problem.ancestor_masks()]
    alap = [n - 1 - bin(m).count("1") for m in problem.descendant_masks()]
    return asap, alap


def solve_schedule_ilp(problem: MemoryProblem, hint: list[int], opts: SolverOptions,
                       prune: bool = True, budget: Budget | None = None, floor: int = 0) -> ScheduleResult:
    """Minimum-peak order of ``problem`` (warm-started from ``hint``, a valid order), within
    ``budget`` (default: ``opts.time_limit`` from now).

    ``floor``: peaks at or below it are all as good (the objective is max(peak, floor)), so
    the solve ends as soon as it reaches it. For a whole graph, a lower bound on its peak
    (then nothing is lost); for a part, the whole graph's bound (the part need not go lower)."""
    start = time.perf_counter()
    budget = budget or Budget(opts, start)
    n, p = problem.n, problem
    hint_peak = p.peak(hint)
    if n <= 1 or hint_peak <= floor:
        return ScheduleResult(list(hint), hint_peak, "optimal", min(hint_peak, floor) if n > 1 else hint_peak,
                              0.0, 0)
    scale = math.gcd(*p.sizes, *[abs(e) for e in p.extra]) or 1
    if prune:
        asap, alap = step_windows(p)
    else:
        asap, alap = [0] * n, [n - 1] * n

    m = cp_model.CpModel()
    O = _node_steps(m, n, asap, alap)
    T = _buffers_in_memory(m, p, O, asap, alap)
    _inputs_and_outputs_in_memory(m, p, O, T)
    lb = -(-max(p.lower_bound(), floor) // scale)
    mem = m.NewIntVar(min(lb, hint_peak // scale), hint_peak // scale, "mem")
    _peak_at_most(m, p, O, T, mem, scale)
    m.Minimize(mem)
    _hint(m, p, O, T, hint)

    check_model_size(m, opts, "zhong (schedule ILP)", "'greedy-mem', or zhong with more partitions")
    n_vars = len(O) + len(T)
    if budget.remaining() <= 0:  # building the model used up the time
        return ScheduleResult(list(hint), hint_peak, "timed_out", p.lower_bound(), time.perf_counter() - start,
                              n_vars)
    solver = make_solver(budget.solver_options(), deadline=budget.deadline())
    code = solver.Solve(m)
    budget.charge(solver.deterministic_time)
    seconds = time.perf_counter() - start
    if not has_solution(code):
        return ScheduleResult(list(hint), hint_peak, "timed_out", p.lower_bound(), seconds, n_vars)
    order = sorted(range(n), key=lambda v: next(j for j in range(asap[v], alap[v] + 1) if solver.Value(O[v, j])))
    peak = p.peak(order)
    bound = int(solver.BestObjectiveBound()) * scale
    if peak > hint_peak:  # cannot happen when mem is exact; kept as a guard
        order, peak = list(hint), hint_peak
    return ScheduleResult(order, peak, status_name(code), min(bound, peak), seconds, n_vars)


def _node_steps(m, n: int, asap: list[int], alap: list[int]) -> dict:
    """``O[v, j]`` within each node's window, with (1) one node per step and (2) every node once."""
    O = {(v, j): m.NewBoolVar(f"O{v}_{j}") for v in range(n) for j in range(asap[v], alap[v] + 1)}
    for j in range(n):  # (1)
        m.AddExactlyOne([O[v, j] for v in range(n) if (v, j) in O])
    for v in range(n):  # (2)
        m.AddExactlyOne([O[v, j] for j in range(asap[v], alap[v] + 1)])
    return O


def _buffer_window(p: MemoryProblem, b: int, asap: list[int], alap: list[int]) -> tuple[int, int]:
    """The steps buffer b can be in memory at (eq. 8, 10)."""
    readers, prod = p.consumers[b], p.producer[b]
    if p.live_at_start[b]:
        lo = 0
    elif prod >= 0:
        lo = asap[prod]
    else:
        lo = min(asap[c] for c in readers)
    if p.live_at_end[b]:
        hi = p.n - 1
    else:
        hi = max([alap[c] for c in readers] + ([alap[prod]] if prod >= 0 else []))
    return lo, hi


def _buffers_in_memory(m, p: MemoryProblem, O: dict, asap: list[int], alap: list[int]) -> dict:
    """``T[b, j]`` within each buffer's window, with (4) and (5)."""
    T = {}
    for b in range(p.n_buffers):
        readers = p.consumers[b]
        prod = p.producer[b]
        lo, hi = _buffer_window(p, b, asap, alap)
        first_use = []
        for j in range(lo, hi + 1):
            T[b, j] = m.NewBoolVar(f"T{b}_{j}")
            before = T.get((b, j - 1))
            if p.live_at_start[b]:
                if before is not None:
                    m.AddImplication(T[b, j], before)  # (4) with T[b, -1] = 1 (5)
            elif prod >= 0:  # (4), (5): T[b, j] <= T[b, j-1] + O[prod, j]
                terms = [x for x in (before, O.get((prod, j))) if x is not None]
                m.Add(T[b, j] <= sum(terms)) if terms else m.Add(T[b, j] == 0)
            else:  # a weight read by several nodes: brought in once, when one of them runs
                f = m.NewBoolVar(f"F{b}_{j}")
                first_use.append(f)
                readers_now = [O[c, j] for c in readers if (c, j) in O]
                m.Add(f <= sum(readers_now)) if readers_now else m.Add(f == 0)
                m.Add(T[b, j] <= (before if before is not None else 0) + f)
        if first_use:
            m.Add(sum(first_use) <= 1)
        if p.live_at_end[b]:
            m.Add(T[b, p.n - 1] == 1)
    return T


def _inputs_and_outputs_in_memory(m, p: MemoryProblem, O: dict, T: dict) -> None:
    """(3): a node runs only when its inputs and outputs are in memory."""
    for (v, j), o in O.items():
        for b in p.node_inputs[v] + p.node_outputs[v]:
            t = T.get((b, j))
            if t is None:
                m.Add(o == 0)
            else:
                m.AddImplication(o, t)


def _peak_at_most(m, p: MemoryProblem, O: dict, T: dict, mem, scale: int) -> None:
    """(6): the footprint of every step, in units of ``scale`` bytes, is at most ``mem``."""
    size = [s // scale for s in p.sizes]
    extra = [e // scale for e in p.extra]
    for j in range(p.n):
        load = [size[b] * t for (b, jj), t in T.items() if jj == j]
        load += [extra[v] * O[v, j] for v in range(p.n) if (v, j) in O and extra[v]]
        m.Add(sum(load) <= mem)


def _hint(m, p: MemoryProblem, O: dict, T: dict, hint: list[int]) -> None:
    """Warm start from the heuristic order."""
    step = {v: s for s, v in enumerate(hint)}
    first, last = p.lifetimes(hint)
    add_hints(m, [(o, step[v] == j) for (v, j), o in O.items()]
              + [(t, first[b] <= j <= last[b]) for (b, j), t in T.items()])
