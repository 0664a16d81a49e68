"""OLLA's tensor-location ILP for a fixed order (Steiner et al., §3.3, §4.4, §4.5: eq. 6–8, 15,
Function 5), in CP-SAT.

With the order fixed every tensor's lifetime [first, last] is known, so eq. 6 only keeps the
pairs that are live together (which also subsumes the precedence pruning of §4.2: pairs that
cannot coexist get no variables). For such a pair, exactly one of a_ij ("i below j",
eq. 7a: A_i + S_i <= A_j) and b_ij ("i above j", eq. 7b: A_j + S_j <= A_i) holds; CP-SAT
takes the implications directly instead of the big-M form. (8) every tensor ends below
``peak_mem``; (15) minimise it. Addresses are multiples of the alignment.

Function 5 (``pyramid``) pre-places a nest of long-lived tensors at increasing addresses
(the longest-lived first, then the longest one inside its lifetime, and so on), as the paper
does for activations saved for the backward pass; the ILP places the rest. If that does not
reach zero fragmentation, the solve is repeated without pre-placement with the time left
(with deterministic limits, half the limit: the same call takes the same steps under any load).

Beyond the paper: the ILP is warm-started from the better of first fit and the best offset
heuristic (``planners.alloc.exact.best_heuristic``: Single/Many Objects, TFLite's arena), and
when that heuristic already reaches max live the answer is optimal without a solve. If
fragmentation remains after the ILP, the canonical branch and bound of
``planners.alloc.canonical.search`` gets the time left to reach max live exactly (it often
does in well under a second where CP-SAT stalls a few percent above).

Fragmentation = (arena − max live bytes) / arena; max live is a lower bound of any arena.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from planners.schedule.cp import add_hints, cp_model

from npusim.util.lazy_import import lazy_import

from planners.alloc.exact import NODES_PER_SECOND, best_heuristic
from planners.alloc.problem import OffsetProblem
from planners.schedule.solver import (SolverOptions, check_model_size, has_solution, make_solver,
                                      note_guard, status_name, wall_deadline)

canonical_search = lazy_import("planners.alloc.canonical.search")  # Numba: loaded when first used


@dataclass(frozen=True)
class Blocks:
    """Tensors to place: size (aligned) and lifetime [first, last] in steps."""

    ids: tuple[int, ...]
    size: tuple[int, ...]
    first: tuple[int, ...]
    last: tuple[int, ...]

    def overlapping_pairs(self) -> list[tuple[int, int]]:
        order = sorted(range(len(self.ids)), key=lambda i: (self.first[i], i))
        pairs, active = [], []
        for i in order:
            active = [j for j in active if self.last[j] >= self.first[i]]
            pairs.extend((j, i) for j in active)
            active.append(i)
        return pairs

    def max_live(self) -> int:
        if not self.ids:
            return 0
        n = max(self.last) + 2
        delta = [0] * n
        for s, f, la in zip(self.size, self.first, self.last):
            delta[f] += s
            delta[la + 1] -= s
        best = acc = 0
        for d in delta:
            acc += d
            best = max(best, acc)
        return best


@dataclass(frozen=True)
class AddressResult:
    offsets: dict  # tensor id -> offset
    arena: int
    max_live: int
    status: str
    bound: int
    seconds: float
    preplaced: int

    @property
    def fragmentation(self) -> float:
        return (self.arena - self.max_live) / self.arena if self.arena else 0.0


def pyramid(blocks: Blocks) -> dict[int, int]:
    """Function 5 (PreAllocateAddresses): index -> offset for a nest of long-lived tensors."""
    min_start, max_end, base = 0, math.inf, 0
    placed: dict[int, int] = {}
    while max_end > min_start:
        best, best_duration = None, 0
        for i in range(len(blocks.ids)):
            if blocks.first[i] < min_start or blocks.last[i] > max_end or i in placed:
                continue
            duration = blocks.last[i] - blocks.first[i]
            if duration > best_duration:
                best, best_duration = i, duration
        if best is None:
            break
        placed[best] = base
        base += blocks.size[best]
        min_start, max_end = blocks.first[best], blocks.last[best]
    return placed


def first_fit(blocks: Blocks, fixed: dict[int, int], align: int) -> dict[int, int]:
    """Warm start: biggest first, lowest aligned offset clear of the live-together blocks."""
    neighbours: dict[int, list[int]] = {i: [] for i in range(len(blocks.ids))}
    for i, j in blocks.overlapping_pairs():
        neighbours[i].append(j)
        neighbours[j].append(i)
    offsets = dict(fixed)
    for i in sorted(range(len(blocks.ids)), key=lambda i: (-blocks.size[i], blocks.first[i], i)):
        if i in offsets:
            continue
        taken = sorted((offsets[j], offsets[j] + blocks.size[j]) for j in neighbours[i] if j in offsets)
        at = 0
        for lo, hi in taken:
            if at + blocks.size[i] <= lo:
                break
            at = max(at, -(-hi // align) * align)
        offsets[i] = at
    return offsets


def best_heuristic_offsets(blocks: Blocks, fixed: dict[int, int], align: int,
                           deadline: float | None = None) -> dict[int, int]:
    """index -> offset of the best offset heuristic, with ``fixed`` pinned (no further
    heuristic starts past ``deadline``: ``planners.alloc.exact.best_heuristic``)."""
    if not blocks.ids:
        return {}
    problem = OffsetProblem(sizes=np.array(blocks.size, dtype=np.int64), first=np.array(blocks.first),
                            last=np.array(blocks.last), alignment=align, pinned=fixed)
    return {i: int(off) for i, off in enumerate(best_heuristic(problem, deadline).offsets)}


def _arena(blocks: Blocks, offsets: dict[int, int]) -> int:
    return max((offsets[i] + blocks.size[i] for i in range(len(blocks.ids))), default=0)


def _time_left(opts: SolverOptions, start: float) -> float:
    """Seconds left for the next stage: wall seconds, or with deterministic limits a fixed
    half of the limit (so that the same call takes the same steps under any load)."""
    if opts.deterministic:
        return opts.time_limit / 2
    return opts.time_limit - (time.perf_counter() - start)


def solve_addresses(blocks: Blocks, align: int, opts: SolverOptions, preplace: bool = True) -> AddressResult:
    """Eq. (15) for fixed lifetimes; retries without Function 5 if fragmentation remains."""
    start = time.perf_counter()
    wall_deadline = None if opts.deterministic else start + opts.time_limit
    heuristic = best_heuristic_offsets(blocks, {}, align, wall_deadline)
    if _arena(blocks, heuristic) == blocks.max_live():  # max live is a lower bound: optimal
        return AddressResult({blocks.ids[i]: off for i, off in heuristic.items()}, blocks.max_live(),
                             blocks.max_live(), "optimal", blocks.max_live(), time.perf_counter() - start, 0)
    if not opts.deterministic and _time_left(opts, start) <= 0:
        # wall-clock limit spent on the order and the heuristics: no model is built (issue 21:
        # the time limit covers model building), the heuristic stands
        return AddressResult({blocks.ids[i]: off for i, off in heuristic.items()}, _arena(blocks, heuristic),
                             blocks.max_live(), "timed_out", blocks.max_live(), time.perf_counter() - start, 0)
    result = _solve(blocks, align, opts, pyramid(blocks) if preplace else {})
    left = _time_left(opts, start)
    if preplace and result.arena > result.max_live and left > 0.5:
        again = _solve(blocks, align, opts.with_limit(left), {})
        if again.arena < result.arena or (again.arena == result.arena and again.status == "optimal"):
            result = again
    left = _time_left(opts, start)
    if result.arena > result.max_live and left > 0.2:
        # deterministic runs count placements (the wall clock only guards), as exact offsets do
        nodes = int(left * NODES_PER_SECOND) if opts.deterministic else None
        offsets, found, _ = canonical_search.search_offsets(blocks.first, blocks.last, blocks.size, result.max_live,
                                           time_limit=opts.wall_seconds(left) if nodes else left,
                                           node_limit=nodes,
                                           workers=opts.workers)
        if found == "found":
            result = AddressResult({blocks.ids[i]: int(offsets[i]) for i in range(len(blocks.ids))}, result.max_live,
                                   result.max_live, "optimal", result.max_live, result.seconds, 0)
    status, bound = result.status, result.bound
    if result.arena == result.max_live:
        status, bound = "optimal", result.arena  # max live bytes is a lower bound
    elif status == "optimal" and result.preplaced:
        status, bound = "feasible", result.max_live  # optimal only given the pre-placement
    return AddressResult(result.offsets, result.arena, result.max_live, status, bound,
                         time.perf_counter() - start, result.preplaced)


def _solve(blocks: Blocks, align: int, opts: SolverOptions, fixed: dict[int, int]) -> AddressResult:
    start = time.perf_counter()
    n = len(blocks.ids)
    max_live = blocks.max_live()
    hint = min((first_fit(blocks, fixed, align),
                best_heuristic_offsets(blocks, fixed, align, None if opts.deterministic else start + opts.time_limit)),
               key=lambda h: _arena(blocks, h))
    hint_arena = _arena(blocks, hint)
    unit = align
    size = [-(-s // unit) for s in blocks.size]
    top = -(-hint_arena // unit)
    m = cp_model.CpModel()
    A = [m.NewIntVar(0, max(0, top - size[i]), f"A{i}") for i in range(n)]
    for i, off in fixed.items():
        m.Add(A[i] == off // unit)
    peak = m.NewIntVar(-(-max_live // unit), max(top, -(-max_live // unit)), "peak_mem")
    for i in range(n):
        m.Add(A[i] + size[i] <= peak)  # (8)
    # building counts against the limit (issue 21): O(pairs) constraints, looked at every 1024
    deadline = wall_deadline(opts, start)
    hints = []
    for k, (i, j) in enumerate(blocks.overlapping_pairs()):
        if k % 1024 == 0 and deadline is not None and time.perf_counter() > deadline:
            if opts.deterministic:
                note_guard(f"building the address model after {time.perf_counter() - start:.1f} s")
            return AddressResult({blocks.ids[i]: hint[i] for i in range(n)}, hint_arena, max_live,
                                 "timed_out", max_live, time.perf_counter() - start, len(fixed))
        if i in fixed and j in fixed:
            continue
        below = m.NewBoolVar(f"a{i}_{j}")  # (6): live together -> a_ij + b_ij = 1
        m.Add(A[i] + size[i] <= A[j]).OnlyEnforceIf(below)  # (7a)
        m.Add(A[j] + size[j] <= A[i]).OnlyEnforceIf(below.Not())  # (7b)
        hints.append((below, hint[i] < hint[j]))
    add_hints(m, hints + [(A[i], hint[i] // unit) for i in range(n)])
    m.Minimize(peak)
    check_model_size(m, opts, "olla (address ILP)", "a heuristic allocator such as 'tflite-arena' or 'so-size-improved'")
    solver = make_solver(opts, started=start)
    code = solver.Solve(m)
    seconds = time.perf_counter() - start
    if not has_solution(code):
        return AddressResult({blocks.ids[i]: hint[i] for i in range(n)}, hint_arena, max_live,
                             "timed_out", max_live, seconds, len(fixed))
    offsets = {blocks.ids[i]: solver.Value(A[i]) * unit for i in range(n)}
    arena = solver.Value(peak) * unit
    bound = max(max_live, int(solver.BestObjectiveBound()) * unit)
    return AddressResult(offsets, arena, max_live, status_name(code), min(bound, arena), seconds, len(fixed))
