"""Lower bounds on the minimum peak of any order, from windows of nodes solved exactly.

The working-set bound (``MemoryProblem.lower_bound``: the bytes one node needs while it runs)
ignores everything else live at the time, so it sits far below the optimum on graphs whose
peak is a crowd of branches (NASNet's stem cells: 5294 KiB against an optimum of 6443 KiB).

A window bound takes a set ``W`` of nodes and asks, for every buffer, at which of them *every*
order of the whole graph must hold it: at a node ``u`` of ``W`` that runs after the buffer
exists for sure (``u`` is its producer or a descendant of it, any node when it is live at the
start, a descendant of one of its readers when it has no producer) and before it can be freed
(``u`` is an ancestor of one of its readers, or any node when it is live at the end). These
nodes are the buffer's *witnesses*. The relaxed problem runs ``W`` alone, each buffer live from
its producer (or first witness) to its last witness. In any order of the whole graph, at any
step of a node of ``W`` between a buffer's first and last witness, the first has run (so the
buffer exists) and the last has not (so a reader is still to come): the buffer is live there
too. So each step of ``W`` costs at least as much in the whole order as in the relaxed one,
and the relaxed problem's minimum peak, found exactly (Zhong's optimum-preserving fusion, then
the DP, or Zhong's ILP when the DP would need too many states), is a lower bound on the whole
graph's; so is CP-SAT's proven bound when its time runs out first.

Which windows: intervals of a good order around its peak step (an interval of an order is
convex: no path leaves and re-enters it, so its inner precedences are all kept), grown by
half until the DP's state count or the time allowance runs out, or the bound reaches the order's
peak (then the order is proved optimal).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from planners.schedule.dp import DPLimitError, min_peak_schedule
from planners.schedule.greedy import best_heuristic_order
from planners.schedule.problem import MemoryProblem
from planners.schedule.zhong.budget import Budget
from planners.schedule.zhong.fusion import fuse
from planners.schedule.solver import SolverOptions
from planners.schedule.zhong.ilp import solve_schedule_ilp

#: DP states one window may use (NASNet's proof needs 240 000: about 8 s of the Python DP)
DEFAULT_WINDOW_STATES = 60_000
#: the first window: this many nodes either side of the peak step
FIRST_RADIUS = 8


@dataclass(frozen=True)
class WindowBound:
    value: int  # bytes: no order of the problem peaks lower
    window: tuple[int, ...]  # the nodes of the window that gave it (empty: the working set)
    windows_tried: int


def relaxed_problem(problem: MemoryProblem, window) -> MemoryProblem:
    """``window``'s nodes run alone, each buffer live only where every order of the whole
    problem holds it (see the module docstring); local node i is ``window[i]``."""
    p = problem
    nodes = list(window)
    local = {v: i for i, v in enumerate(nodes)}
    in_window = sum(1 << v for v in nodes)
    anc, desc = p.ancestor_masks(), p.descendant_masks()
    everyone = (1 << p.n) - 1
    sizes, producer, consumers, starts, ends = [], [], [], [], []
    reads: list[list[int]] = [[] for _ in nodes]
    for b in range(p.n_buffers):
        made = p.producer[b]
        if p.live_at_start[b]:
            exists = everyone
        elif made >= 0:
            exists = desc[made] | 1 << made
        else:  # no producer: it appears at its first reader
            exists = 0
            for c in p.consumers[b]:
                exists |= desc[c] | 1 << c
        needed = everyone if p.live_at_end[b] else 0
        for c in p.consumers[b]:
            needed |= anc[c] | 1 << c
        witnesses = exists & needed & in_window
        inside_made = made in local
        if not witnesses and not inside_made:
            continue  # no step of the window is sure to hold it
        k = len(sizes)
        sizes.append(p.sizes[b])
        producer.append(local[made] if inside_made else -1)
        readers = tuple(local[u] for u in nodes if witnesses >> u & 1 and u != made)
        consumers.append(readers)
        for r in readers:
            reads[r].append(k)
        starts.append(p.live_at_start[b])
        ends.append(p.live_at_end[b] and inside_made)
    outputs: list[list[int]] = [[] for _ in nodes]
    for k, m in enumerate(producer):
        if m >= 0:
            outputs[m].append(k)
    return MemoryProblem(
        sizes=tuple(sizes), producer=tuple(producer), consumers=tuple(consumers),
        node_inputs=tuple(tuple(r) for r in reads), node_outputs=tuple(tuple(o) for o in outputs),
        extra=tuple(p.extra[v] for v in nodes), members=tuple(p.members[v] for v in nodes),
        live_at_start=tuple(starts), live_at_end=tuple(ends),
        names=tuple(p.names[v] for v in nodes) if p.names else ())


def window_peak(problem: MemoryProblem, window, *, upper: int | None = None,
                max_states: int = DEFAULT_WINDOW_STATES, deadline: float | None = None,
                ilp_budget: Budget | None = None, use_dp: bool = True) -> tuple[int, str]:
    """A lower bound for ``problem`` from ``window``'s relaxed problem, and how it was found:
    ``"dp"`` or ``"ilp"`` (that problem's exact minimum peak) or ``"ilp-bound"`` (CP-SAT's
    proven bound when its budget ran out first).

    The DP goes first (``use_dp``), pruned by ``upper``, the peak of an order of the whole
    problem (the relaxed optimum is never above it). When it needs more than ``max_states``
    states, Zhong's ILP (``planners.schedule.zhong.ilp``) takes the relaxed problem under
    ``ilp_budget`` if given: it scales to wider windows (backward passes) than the DP.
    Raises ``DPLimitError`` when the DP stops (states or ``deadline``) and no ILP may run."""
    relaxed = fuse(relaxed_problem(problem, window)).problem
    if use_dp:
        try:
            return min_peak_schedule(relaxed, upper_bound=upper, max_ops=relaxed.n, max_states=max_states,
                                     deadline=deadline).peak, "dp"
        except DPLimitError:
            if ilp_budget is None:
                raise
    if ilp_budget is None or ilp_budget.remaining() <= 0 or (deadline is not None and time.perf_counter() > deadline):
        raise DPLimitError("window bound: no time left for the ILP")
    hint, _ = best_heuristic_order(relaxed)
    result = solve_schedule_ilp(relaxed, hint, ilp_budget.opts, budget=ilp_budget)
    return result.bound, "ilp" if result.status == "optimal" else "ilp-bound"


def window_lower_bound(problem: MemoryProblem, order: list[int], *, max_states: int = DEFAULT_WINDOW_STATES,
                       deadline: float | None = None, ilp: SolverOptions | None = None) -> WindowBound:
    """The best of the working-set bound and window bounds around ``order``'s peak step,
    windows growing by half until the bound meets ``order``'s peak, a window needs more than
    ``max_states`` DP states and no ILP may take over (``ilp``: CP-SAT's options, its time
    limit for all windows together, counted from the first window the DP gives up; with
    deterministic limits that is CP-SAT's deterministic time, so the answer repeats), the
    ILP stops short of a window's optimum, or the wall clock passes ``deadline``
    (``time.perf_counter()`` seconds, checked by the DP once a level)."""
    best = WindowBound(problem.lower_bound(), (), 0)
    profile = problem.profile(order)
    if not profile:
        return best
    upper = max(profile)
    at = profile.index(upper)
    radius, tried, use_dp, ilp_budget = FIRST_RADIUS, 0, True, None
    while best.value < upper and (deadline is None or time.perf_counter() < deadline):
        window = tuple(order[max(0, at - radius):at + radius + 1])
        try:
            if use_dp:
                value, how = window_peak(problem, window, upper=upper, max_states=max_states, deadline=deadline)
            else:  # one window gets a third of the ILPs' time: a window it cannot close wastes no more
                part = ilp_budget.slice(ilp.time_limit / 3)
                value, how = window_peak(problem, window, deadline=deadline, ilp_budget=part, use_dp=False)
                ilp_budget.charge(part.deterministic_used)
        except DPLimitError:
            if not use_dp or ilp is None:
                break  # the DP outgrew its states (larger windows would too) or its time
            use_dp, ilp_budget = False, Budget(ilp)  # this window again, with the ILP
            continue
        except DPLimitError:
            break  # the DP outgrew its states (larger windows would too) or its time
        tried += 1
        if value > best.value:
            best = WindowBound(value, window, tried)
        if len(window) == problem.n or how == "ilp-bound":
            break  # a larger window would be harder still for the ILP
        radius += radius // 2  # gently: the DP's states grow steeply with the window
    return WindowBound(best.value, best.window, tried)
