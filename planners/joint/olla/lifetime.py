"""OLLA's tensor-lifetime ILP (Steiner et al., §3.2, §4.1, §4.3, §4.4: eq. 1–5, 10–14,
Functions 3–4), in CP-SAT.

Variables: ``C[v, t]`` node v runs at timestep t, creating all its output tensors (eq. 5 ties
the siblings' C variables together; here they are one variable); ``P[e, t]`` tensor e is
preserved in memory at t. Constraints:

- (1) P[e, t] + C[e, t] <= 1;  (2) P[e, t] <= P[e, t-1] + C[e, t-1];  (3) Σ_t C[e, t] = 1;
- (4) C[e, t] <= P[f, t] for every input f of e's source (inputs are created earlier);
- (13) Σ_e (C[e, t] + P[e, t])·S_e <= peak for every t; (14) minimise peak.

We execute one op per timestep (the NPU runs a single stream here), so Σ_v C[v, t] = 1 is
added, and the spans use the sequential bounds ASAP(v) = |anc(v)|, ALAP(v) = n-1-|des(v)|
(at least the paper's longest-path levels, so tighter and still exact):

- (10) C[v, t] = 0 outside SPAN(v) = [ASAP(v), ALAP(v)];
- (11) P[e, t] = 0 outside MUL(e) = [ASAP(src e), max ALAP(sinks e)];
- (12) P[e, t] = 1 inside PRES(e) = [ALAP(src e)+1, max ASAP(sinks e)].

A weight read by several ops is "created" (brought in) at one timestep where a reader runs,
then preserved: its lifetime starts at its first use as in ``npusim.graph.analysis``.

Early weight updates (§4.3, Functions 3–4): ``control_edges`` finds, for each SGD update
node, an anchor that runs early (high reverse level) but has a higher forward level (so no
cycle); the zero-byte edge update -> anchor makes the solver run updates early.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from planners.schedule.cp import add_hints, cp_model

from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import (SolverOptions, check_model_size, has_solution, make_solver, note_guard,
                                      status_name, wall_deadline)
from planners.schedule.zhong.ilp import ScheduleResult, step_windows


# -- Functions 3 and 4: early weight updates -------------------------------------------------
def levels(problem: MemoryProblem) -> tuple[list[int], list[int]]:
    """Forward level (longest path from a source) and backward level (longest path to a sink)."""
    preds, succ = problem.predecessors(), problem.successors()
    topo = problem.topological_order()
    fwd = [0] * problem.n
    for v in topo:
        fwd[v] = max((fwd[u] + 1 for u in preds[v]), default=0)
    bwd = [0] * problem.n
    for v in reversed(topo):
        bwd[v] = max((bwd[s] + 1 for s in succ[v]), default=0)
    return fwd, bwd


def control_edges(problem: MemoryProblem, update_nodes: list[int]) -> list[tuple[int, int]]:
    """(update node, anchor) pairs per Function 3 (EnforceEarlyWeightUpdates)."""
    fwd, bwd = levels(problem)
    preds, succ = problem.predecessors(), problem.successors()
    edges = []
    for v in update_nodes:
        min_fwd = fwd[v]
        visited: dict[int, tuple[int | None, int]] = {}

        def find_candidate(u: int) -> tuple[int | None, int]:  # Function 4
            if u in visited:
                return visited[u]
            visited[u] = (None, -1)  # guards re-entry
            best_level, best = -1, None
            for snk in succ[u]:
                if bwd[snk] <= best_level:
                    continue
                if fwd[snk] <= min_fwd:
                    cand, level = find_candidate(snk)
                    if level > best_level:
                        best_level, best = level, cand
                else:
                    best_level, best = bwd[snk], snk
            visited[u] = (best, best_level)
            return best, best_level

        starts = {v}
        best_anchor, best_level = None, -1
        while best_anchor is None and starts:
            starts = {p for s in starts for p in preds[s]}
            for src in sorted(starts):
                cand, level = find_candidate(src)
                if level > best_level:
                    best_level, best_anchor = level, cand
        if best_anchor is not None and best_anchor != v:
            edges.append((v, best_anchor))
    return edges


def with_control_edges(problem: MemoryProblem, edges: list[tuple[int, int]]) -> MemoryProblem:
    """The problem with a zero-byte buffer for every control edge (src -> dst)."""
    if not edges:
        return problem
    base = problem.n_buffers
    outputs = [list(x) for x in problem.node_outputs]
    inputs = [list(x) for x in problem.node_inputs]
    for i, (src, dst) in enumerate(edges):
        outputs[src].append(base + i)
        inputs[dst].append(base + i)
    k = len(edges)
    return replace(problem,
                   sizes=problem.sizes + (0,) * k,
                   producer=problem.producer + tuple(s for s, _ in edges),
                   consumers=problem.consumers + tuple((d,) for _, d in edges),
                   node_inputs=tuple(map(tuple, inputs)), node_outputs=tuple(map(tuple, outputs)),
                   live_at_start=problem.live_at_start + (False,) * k,
                   live_at_end=problem.live_at_end + (False,) * k)


# -- the lifetime ILP (14) ---------------------------------------------------------------
class ModelOutOfTime(Exception):
    """Building the lifetime model passed its deadline (``build_lifetime_model``)."""


def _check(deadline: float | None, k: int) -> None:
    """Every 1024th call (``k``), raise ModelOutOfTime once the clock is past ``deadline``."""
    if deadline is not None and k % 1024 == 0 and time.perf_counter() > deadline:
        raise ModelOutOfTime()


def build_deadline(opts: SolverOptions, start: float) -> float | None:
    """When building the model must stop: the time limit from ``start`` with wall-clock limits;
    with deterministic ones (CP-SAT's work units, which building does not use) the wall guard
    (``planners.schedule.solver.wall_deadline``; None without one)."""
    return wall_deadline(opts, start)


@dataclass
class LifetimeModel:
    model: cp_model.CpModel
    C: dict
    P: dict
    live: dict  # (e, t) -> list of literals whose sum is 1 when e is in memory at t
    windows: tuple
    scale: int


def build_lifetime_model(problem: MemoryProblem, scale: int | None = None,
                         deadline: float | None = None) -> LifetimeModel:
    """The model (eq. 1-5, 10-12). It has about n x span variables (1,500 ops: 770,000, 20 s to
    build): past ``deadline`` (``time.perf_counter()`` seconds) it raises ModelOutOfTime, so
    that building counts against the time limit (issue 21)."""
    p, n = problem, problem.n
    asap, alap = step_windows(p)
    m = cp_model.CpModel()
    C = {}
    for v in range(n):  # (10)
        _check(deadline, v)
        C.update({(v, t): m.NewBoolVar(f"C{v}_{t}") for t in range(asap[v], alap[v] + 1)})
    for v in range(n):
        _check(deadline, v)
        m.AddExactlyOne([C[v, t] for t in range(asap[v], alap[v] + 1)])  # (3)
    for t in range(n):  # one op per timestep (sequential execution)
        _check(deadline, t)
        m.AddExactlyOne([C[v, t] for v in range(n) if (v, t) in C])
    P, live = {}, {}
    for e in range(p.n_buffers):
        _check(deadline, e)
        src, sinks = p.producer[e], p.consumers[e]
        if src >= 0:
            lo = asap[src]
            hi = max([alap[s] for s in sinks] + [alap[src]])
            pres = range(alap[src] + 1, max([asap[s] for s in sinks], default=-1) + 1)
            created = lambda t, src=src: C.get((src, t))  # noqa: E731
        else:  # a weight read by several ops: brought in once, at one of its readers' steps
            lo = min(asap[s] for s in sinks)
            hi = max(alap[s] for s in sinks)
            pres = range(0)
            bring = {t: m.NewBoolVar(f"B{e}_{t}") for t in range(lo, hi + 1)}
            m.Add(sum(bring.values()) == 1)
            for t, b in bring.items():
                m.Add(b <= sum(C[s, t] for s in sinks if (s, t) in C))
            created = bring.get
        for t in range(lo, hi + 1):  # (11)
            P[e, t] = m.NewBoolVar(f"P{e}_{t}")
            c = created(t)
            if c is not None:
                m.Add(P[e, t] + c <= 1)  # (1)
            prev = [x for x in (P.get((e, t - 1)), created(t - 1)) if x is not None]
            m.Add(P[e, t] <= sum(prev)) if prev else m.Add(P[e, t] == 0)  # (2)
            if t in pres:
                m.Add(P[e, t] == 1)  # (12)
            live[e, t] = [P[e, t]] + ([c] if c is not None else [])
    for k, ((v, t), c) in enumerate(C.items()):  # (4): inputs preserved (or, for weights, brought in now)
        _check(deadline, k)
        for f in p.node_inputs[v]:
            lits = live.get((f, t)) if p.producer[f] < 0 else [P[f, t]] if (f, t) in P else None
            if not lits:
                m.Add(c == 0)
            else:
                m.Add(c <= sum(lits))
    if scale is None:
        scale = math.gcd(*p.sizes, *p.extra) or 1
    return LifetimeModel(m, C, P, live, (asap, alap), scale)


def add_peak(lm: LifetimeModel, problem: MemoryProblem, upper: int, deadline: float | None = None) -> cp_model.IntVar:
    """(13): the bytes in memory at every timestep are at most ``peak`` (ModelOutOfTime past
    ``deadline``)."""
    p, s = problem, lm.scale
    peak = lm.model.NewIntVar(0, upper // s, "peak_mem_no_frag")
    by_step: dict[int, list] = {}
    for (e, t), lits in lm.live.items():
        if p.sizes[e]:
            by_step.setdefault(t, []).extend((p.sizes[e] // s) * x for x in lits)
    for (v, t), c in lm.C.items():
        if p.extra[v]:
            by_step.setdefault(t, []).append((p.extra[v] // s) * c)
    for k, terms in enumerate(by_step.values()):
        _check(deadline, k * 64)  # each a long sum: look at the clock every 16th step
        lm.model.Add(sum(terms) <= peak)
    return peak


def hint_order(lm: LifetimeModel, problem: MemoryProblem, order: list[int], deadline: float | None = None) -> None:
    step = {v: t for t, v in enumerate(order)}
    first, last = problem.lifetimes(order)

    def pairs():
        for k, ((v, t), c) in enumerate(lm.C.items()):
            _check(deadline, k)
            yield c, step[v] == t
        for k, ((e, t), x) in enumerate(lm.P.items()):
            _check(deadline, k)
            yield x, first[e] < t <= last[e]

    add_hints(lm.model, pairs())


def decode_order(lm: LifetimeModel, solver, n: int) -> list[int]:
    """Function 1 (GenerateExecutionSequence): nodes by the timestep that creates their outputs."""
    asap, alap = lm.windows
    return sorted(range(n), key=lambda v: next(t for t in range(asap[v], alap[v] + 1) if solver.Value(lm.C[v, t])))


def solve_lifetimes(problem: MemoryProblem, hint: list[int], opts: SolverOptions) -> ScheduleResult:
    """Eq. (14): the order with the smallest peak assuming no fragmentation."""
    start = time.perf_counter()
    hint_peak = problem.peak(hint)
    if problem.n <= 1:
        return ScheduleResult(list(hint), hint_peak, "optimal", hint_peak, 0.0, 0)
    # Building the model is part of the time limit (issue 21: 1,500 ops took 30 s to build
    # whatever the limit): past it, the warm start stands, as when CP-SAT runs out of time.
    deadline = build_deadline(opts, start)
    try:
        lm = build_lifetime_model(problem, deadline=deadline)
        peak = add_peak(lm, problem, hint_peak, deadline)
        lm.model.Add(peak * lm.scale >= min(problem.lower_bound(), hint_peak))
        lm.model.Minimize(peak)
        hint_order(lm, problem, hint, deadline)
    except ModelOutOfTime:
        if opts.deterministic:
            note_guard(f"building the lifetime model of {problem.n} nodes after {time.perf_counter() - start:.1f} s")
        return ScheduleResult(list(hint), hint_peak, "timed_out", problem.lower_bound(),
                              time.perf_counter() - start, 0)
    check_model_size(lm.model, opts, "olla-order", "'greedy-mem' or 'zhong' (partitioned)")
    solver = make_solver(opts, started=start)
    code = solver.Solve(lm.model)
    seconds = time.perf_counter() - start
    n_vars = len(lm.C) + len(lm.P)
    if not has_solution(code):
        return ScheduleResult(list(hint), hint_peak, "timed_out", problem.lower_bound(), seconds, n_vars)
    order = decode_order(lm, solver, problem.n)
    got = problem.peak(order)
    bound = int(solver.BestObjectiveBound()) * lm.scale
    if got > hint_peak:
        order, got = list(hint), hint_peak
    return ScheduleResult(order, got, status_name(code), min(bound, got), seconds, n_vars)
