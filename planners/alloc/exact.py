"""Exact offset assignment with CP-SAT (beyond the MindSpore paper).

Model: each item's lifetime is a fixed interval on the time axis and its offset a variable;
items that may conflict get disjoint address ranges: ``NoOverlap2D`` over (time, address)
rectangles for lifetime conflicts, or one disjunction per unsafe pair for an explicit set.
Contiguous blocks are equalities, pinned items fixed. The objective is the peak
``max(offset + size)``, bounded below by the lifetime bound (or the clique bound) and above
by the best heuristic, whose offsets are the solver's hint.

Lifetime problems without contiguous blocks or pinned items go first through the canonical
branch and bound of ``planners.alloc.canonical.search`` (MiniMalloc's ideas) at the lower
bound: when it finds offsets there, they are optimal without CP-SAT; when it proves a
capacity infeasible, the bound rises (by the gcd of the sizes: every peak worth trying is a
multiple of it). If the bound is not settled, capacities between it and the best peak are
bisected. CP-SAT then gets what is left of the time limit, hinted with the best offsets.

Always: a time limit, 2 workers by default (CP-SAT's threads; the canonical search's
processes, one lane of its portfolio each), and an honest status: ``optimal`` when CP-SAT
proves it, ``timed_out`` when the limit stops it (the best offsets found so far, which may be
the heuristic's, with the proven bound), never ``optimal`` for a timed-out answer. A model
above the ``max_variables`` / ``max_constraints`` options is refused (``check_model_size``).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from npusim.util.lazy_import import lazy_import
from planners.alloc import mindspore
from planners.schedule.cp import add_hints, cp_model

from planners.alloc import tflite
from planners.alloc.bounds import best_bound
from planners.alloc.problem import OffsetProblem, OffsetResult, check_assignment, make_result
from planners.schedule.solver import (DEFAULT_MAX_CONSTRAINTS, DEFAULT_MAX_VARIABLES, WALL_GUARD, SolverOptions,
                                      check_model_size, make_solver, wall_deadline)

# Numba kernels, loaded when an exact allocation first runs
mindspore_kernels = lazy_import("planners.alloc.mindspore.kernels")
canonical_search = lazy_import("planners.alloc.canonical.search")


def best_heuristic(problem: OffsetProblem, deadline: float | None = None) -> OffsetResult:
    """The smallest footprint among Single/Many Objects (every sort and fit) and TFLite's arena.

    ``deadline`` (``time.perf_counter()`` seconds; wall-clock limits only, so that
    deterministic runs stay deterministic): past it no further heuristic starts -- TFLite's
    arena always runs -- so that the portfolio (17 runs, O(n^2) each) counts against the
    caller's time limit (issue 21)."""
    results = [tflite.tflite_arena(problem)]
    for algo in (mindspore_kernels.single_object, mindspore_kernels.many_objects):
        for sort in mindspore.SORTS:
            if sort in ("breadth", "source") and not problem.has_lifetimes:
                continue
            for fitter in mindspore.FITS:
                if deadline is not None and time.perf_counter() > deadline:
                    break
                results.append(algo(problem, sort, fitter))
    return min(results, key=lambda r: (r.total, r.algorithm))


#: the share of the time limit the canonical search may use before CP-SAT takes over
SEARCH_SHARE = 0.85
#: deterministic runs give each lane of the canonical search this many placements per second
#: of time limit, wall time being only a guard: about a lane's pace on this 2-core machine
#: (measured on MiniMalloc's instances: 120k-230k a second on E, from a loaded to an idle
#: core, but 40k-60k on D and J, whose placements cost more). With 100k, deterministic
#: runs missed E's solution at the bound (510k placements) by a few hundred placements
NODES_PER_SECOND = 150_000


#: the share of the search's time spent at the lower bound before bisecting above it: 0.6
#: (was 0.35), measured on MiniMalloc's instances (benchmarks/bench_minimalloc.py, 10 s)
#: with a load average of 2-3 from other jobs on this 2-core machine. E is found at the
#: bound only after 510k placements of the canonical search's first lane: 2.2 s on an idle
#: core, 4.3 s under that load. D and J are never settled at the bound; their bisection
#: ends at 1.0457 and 1.0466 with 0.35, 0.5 or 0.6, except that D ends at 1.0685 when the
#: load slows its probe at 1.061 (as it did once with 0.6, and with 0.7)
BOUND_SHARE = 0.6
#: a bisection probe gets half the time left, and none is started with less than this share
MIN_PROBE_SHARE = 0.03


def capacity_step(problem: OffsetProblem) -> int:
    """Every footprint worth trying is a multiple of this: moving each item down until it
    rests on another (or on 0) never raises the peak, and leaves every offset, so the
    peak, a sum of sizes. So the gcd of the sizes (a multiple of the alignment) steps
    capacities, and a capacity proved infeasible raises the bound to the next multiple."""
    sizes = problem.sizes[problem.sizes > 0]
    return int(np.gcd.reduce(sizes)) if len(sizes) else problem.alignment


def _search_capacities(problem: OffsetProblem, lower: int, upper: int, seconds: float, opts: SolverOptions):
    """Offsets from the canonical search (or None) and the lower bound it proved.

    First the bound itself, for ``BOUND_SHARE`` of the time (raising it each time a
    capacity is proved infeasible); then bisection between the highest capacity not yet
    settled and the best peak found: a probe that finds offsets lowers the top end to their
    peak, one that proves infeasibility raises the bound, one that runs out of time only
    moves the bottom end (nothing proved)."""
    step = capacity_step(problem)
    # the budget: placements when deterministic (wall time a guard), else wall seconds
    total = seconds * NODES_PER_SECOND if opts.deterministic else seconds
    spent = 0.0

    def search(capacity: int, allowance: float):
        nonlocal spent
        if allowance <= 0:
            return None, "timed_out"
        if opts.deterministic:
            offsets, status, nodes = canonical_search.search_offsets(problem.first, problem.last, problem.sizes, capacity,
                                                    node_limit=max(int(allowance), 1),
                                                    time_limit=opts.wall_seconds(seconds), workers=opts.workers)
            spent += nodes
        else:
            started = time.perf_counter()
            offsets, status, _ = canonical_search.search_offsets(problem.first, problem.last, problem.sizes, capacity,
                                                time_limit=allowance, workers=opts.workers)
            spent += time.perf_counter() - started
        return offsets, status

    def peak(offsets) -> int:
        return int((offsets + problem.sizes).max(initial=0))

    lower = -(-lower // step) * step
    best = None
    while lower < upper:
        offsets, status = search(lower, total * BOUND_SHARE - spent)
        if status == "found":
            return offsets, lower
        if status != "infeasible":
            break
        lower += step  # proved: nothing fits in the capacity tried
    unsettled = lower  # capacities at or below this one: no offsets found (yet)
    while upper - unsettled > step and total - spent > total * MIN_PROBE_SHARE:
        capacity = (unsettled + upper) // 2 // step * step
        if capacity <= unsettled:
            capacity = unsettled + step
        offsets, status = search(capacity, (total - spent) / 2)
        if status == "found":
            best, upper = offsets, peak(offsets)
        elif status == "infeasible":
            lower = unsettled = capacity + step
        else:
            unsettled = capacity
    return best, lower


def exact_offsets(problem: OffsetProblem, *, time_limit: float = 10.0, workers: int = 2,
                  seed: int = 0, hint: OffsetResult | None = None, deterministic: bool = True,
                  max_variables: int = DEFAULT_MAX_VARIABLES,
                  max_constraints: int = DEFAULT_MAX_CONSTRAINTS, wall_guard: float = WALL_GUARD) -> OffsetResult:
    start = time.perf_counter()
    call = SolverOptions(time_limit, workers, seed, deterministic, max_variables, max_constraints, wall_guard)
    call = replace(call, deadline=wall_deadline(call, start))  # one guard for every solve of the call
    hint = hint or best_heuristic(problem, None if deterministic else start + time_limit)
    bound = best_bound(problem, opts=call.with_limit(min(2.0, time_limit / 4)))
    lower, upper = bound.value, int(hint.total)
    if problem.n == 0 or lower >= upper:
        return make_result(problem, hint.offsets, "exact-offsets", bound=lower, status="optimal",
                           seconds=time.perf_counter() - start)
    if problem.has_lifetimes and problem.conflicts is None and not problem.blocks and not problem.pinned:
        found, lower = _search_capacities(problem, lower, upper, time_limit * SEARCH_SHARE,
                                        call)
        if found is not None:
            total = int((found + problem.sizes).max(initial=0))
            if total <= lower:
                return make_result(problem, found, "exact-offsets", bound=lower, status="optimal",
                                   seconds=time.perf_counter() - start)
            if total < upper:
                hint = make_result(problem, found, hint.algorithm, bound=lower, status=hint.status)
                upper = total
    sizes = [int(s) for s in problem.sizes]
    align = problem.alignment
    model = cp_model.CpModel()
    # offsets in units of the alignment (sizes are multiples of it)
    slots = [model.NewIntVar(0, (upper - sizes[i]) // align, f"y{i}") for i in range(problem.n)]
    ys = [slots[i] * align for i in range(problem.n)]
    y_iv = [model.NewIntervalVar(slots[i], sizes[i] // align, slots[i] + sizes[i] // align, f"yi{i}")
            for i in range(problem.n)]
    if problem.conflicts is None:
        x_iv = [model.NewFixedSizeIntervalVar(int(problem.first[i]), int(problem.last[i] - problem.first[i] + 1),
                                              f"x{i}") for i in range(problem.n)]
        live = [i for i in range(problem.n) if sizes[i] > 0]
        model.AddNoOverlap2D([x_iv[i] for i in live], [y_iv[i] for i in live])
    else:
        for i, j in problem.conflicts.pairs().tolist():
            if sizes[i] and sizes[j]:
                below = model.NewBoolVar(f"b{i}_{j}")
                model.Add(ys[i] + sizes[i] <= ys[j]).OnlyEnforceIf(below)
                model.Add(ys[j] + sizes[j] <= ys[i]).OnlyEnforceIf(below.Not())
    for block in problem.blocks:
        for a, b in zip(block, block[1:]):
            model.Add(ys[b] == ys[a] + sizes[a])
    for t, off in problem.pinned.items():
        model.Add(ys[t] == off)
    peak = model.NewIntVar(-(-lower // align), upper // align, "peak")
    for i in range(problem.n):
        model.Add(peak * align >= ys[i] + sizes[i])
    model.Minimize(peak)
    add_hints(model, ((slots[i], int(hint.offsets[i]) // align) for i in range(problem.n)))
    left = time_limit * (1 - SEARCH_SHARE) if deterministic else time_limit - (time.perf_counter() - start)
    opts = replace(call, time_limit=max(0.1, left))
    check_model_size(model, opts, "exact-offsets", "a heuristic allocator such as 'tflite-arena' or 'so-size-improved'")
    solver = make_solver(opts)
    status = solver.Solve(model)
    offsets, status_name = hint.offsets, "timed_out"
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = np.array([solver.Value(v) * align for v in slots], dtype=np.int64)
        if not check_assignment(problem, found) and found.max(initial=0) >= 0:
            total = int((found + problem.sizes).max(initial=0))
            if total <= hint.total:
                offsets = found
        status_name = "optimal" if status == cp_model.OPTIMAL else "timed_out"
        lower = max(lower, int(solver.BestObjectiveBound()) * align)
    result = make_result(problem, offsets, "exact-offsets", bound=lower, status=status_name,
                         seconds=time.perf_counter() - start)
    if status_name == "optimal" and result.total > lower:
        # CP-SAT proved the optimum equals its objective; report it as the bound too
        result = make_result(problem, offsets, "exact-offsets", bound=result.total, status="optimal",
                             seconds=result.seconds)
    return result
