"""Exact minimum-peak scheduling by dynamic programming over sets of executed nodes.

The ground truth every other scheduler is checked against (SERENITY, Ahn et al. 2020, §3):
the state is the set X of nodes already run (a down-set of the DAG, kept as a bitmask); the
bytes live between two steps depend on X alone, so the best peak of reaching X is

    best(X ∪ {v}) = min over ready v of max(best(X), footprint of running v after X)

computed level by level (|X| = 0, 1, ..., n) and memoised on X. An upper bound (the peak of a
heuristic order) prunes states that cannot beat it. The number of down-sets grows
exponentially with the width of the graph, so the solver refuses graphs above ``max_ops``
nodes or searches above ``max_states`` states with a clear error instead of running for ever.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from npusim.errors import InternalError, PlanningError
from npusim.planner_options import Option
from planners.schedule.greedy import best_heuristic_order
from planners.schedule.op_level import op_graph, set_order
from planners.schedule.problem import MemoryProblem

DEFAULT_MAX_OPS = 25
DEFAULT_MAX_STATES = 2_000_000


class DPLimitError(PlanningError):
    """The DP needed more states than allowed (the graph is too wide for it) or ran past
    its deadline."""


class _Stepper:
    """Footprint bookkeeping of running one node after a set of executed nodes."""

    def __init__(self, problem: MemoryProblem):
        p = problem
        self.problem = p
        self.pred_mask = [sum(1 << u for u in preds) for preds in p.predecessors()]
        self.consumer_mask = [sum(1 << c for c in cs) for cs in p.consumers]
        self.start = sum(s for s, live in zip(p.sizes, p.live_at_start) if live)
        # Source-less buffers that are not live at the start appear at their first consumer.
        self.late_inputs = [tuple(b for b in ins if p.producer[b] < 0 and not p.live_at_start[b])
                            for ins in p.node_inputs]
        self.out_bytes = [sum(p.sizes[b] for b in outs) for outs in p.node_outputs]
        self.successors = [[] for _ in range(p.n)]
        for w, preds in enumerate(p.predecessors()):
            for u in preds:
                self.successors[u].append(w)
        #: the nodes ready before any ran (no predecessor), as a bitmask
        self.first_ready = sum(1 << v for v in range(p.n) if self.pred_mask[v] == 0)
        # What ``run`` reads of node v, gathered once: (consumers mask, bytes) of its late
        # inputs and of its inputs not live at the end (an input read twice is there twice, as
        # it is in ``node_inputs``), and the bytes of its outputs nobody reads.
        size, consumers_of = p.sizes, self.consumer_mask
        self.late = [tuple((consumers_of[b], size[b]) for b in late) for late in self.late_inputs]
        self.frees = [tuple((consumers_of[b], size[b]) for b in ins if not p.live_at_end[b]) for ins in p.node_inputs]
        self.dead_out = [sum(size[b] for b in outs if not p.live_at_end[b] and not p.consumers[b])
                         for outs in p.node_outputs]

    def ready(self, done: int) -> list[int]:
        return [v for v in range(self.problem.n)
                if not done >> v & 1 and self.pred_mask[v] & ~done == 0]

    def ready_after(self, done: int, ready: int, v: int) -> int:
        """The ready bitmask once ``v`` (ready after ``done``, whose ready bitmask is
        ``ready``) has run: ``v`` leaves it, and only ``v``'s successors can join — what
        ``ready(done | 1 << v)`` gives, without looking at every node."""
        after = done | 1 << v
        ready &= ~(1 << v)
        for w in self.successors[v]:
            if self.pred_mask[w] & ~after == 0:
                ready |= 1 << w
        return ready

    def run(self, done: int, live: int, v: int) -> tuple[int, int]:
        """(footprint of the step running v, bytes live after it): its late inputs not loaded
        yet appear, its outputs are made; after it, the inputs it read last and the outputs
        nobody reads are freed (what is live at the end aside)."""
        extra = self.problem.extra[v]
        step = live + self.out_bytes[v] + extra
        for consumers, nbytes in self.late[v]:
            if consumers & done == 0:
                step += nbytes
        left = ~(done | 1 << v)
        freed = self.dead_out[v]
        for consumers, nbytes in self.frees[v]:
            if consumers & left == 0:
                freed += nbytes
        return step, step - extra - freed


def _bits(mask: int):
    """The set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(frozen=True)
class DPResult:
    order: list[int]
    peak: int
    states: int


def min_peak_schedule(problem: MemoryProblem, *, upper_bound: int | None = None,
                      max_ops: int = DEFAULT_MAX_OPS, max_states: int = DEFAULT_MAX_STATES,
                      deadline: float | None = None) -> DPResult:
    """An order of ``problem``'s nodes with the smallest possible peak, and that peak.

    ``upper_bound``: the peak of a known order; states whose peak exceeds it are pruned (the
    result is still exact, as long as the bound is achievable). ``deadline``
    (``time.perf_counter()`` seconds, checked once a level) raises ``DPLimitError``."""
    n = problem.n
    if n > max_ops:
        raise PlanningError(
            f"dp: the exact scheduler refuses a graph of {n} nodes (max_ops = {max_ops}); its "
            "state space grows as 2^n. Use 'zhong' or 'greedy-mem', or raise max_ops.")
    if n == 0:
        return DPResult([], 0, 1)
    stepper = _Stepper(problem)
    # done-set -> (best peak so far, bytes live, ready nodes as a bitmask)
    level = {0: (0, stepper.start, stepper.first_ready)}
    parent: dict[int, tuple[int, int]] = {}
    states = 1
    for _ in range(n):
        nxt: dict[int, tuple[int, int, int]] = {}
        for done, (best, live, ready) in level.items():
            for v in _bits(ready):  # in increasing v: the first of equal peaks wins, as it must
                step, after = stepper.run(done, live, v)
                peak = max(best, step)
                if upper_bound is not None and peak > upper_bound:
                    continue
                key = done | 1 << v
                if key not in nxt:
                    nxt[key] = (peak, after, stepper.ready_after(done, ready, v))
                    parent[key] = (done, v)
                elif peak < nxt[key][0]:
                    nxt[key] = (peak, after, nxt[key][2])  # the same set: the same ready nodes
                    parent[key] = (done, v)
        states += len(nxt)
        if states > max_states:
            raise DPLimitError(
                f"dp: more than {max_states} states for a graph of {n} nodes (it is too wide); "
                "use 'zhong' or 'greedy-mem', or raise max_states.")
        if deadline is not None and time.perf_counter() > deadline:
            raise DPLimitError(f"dp: out of time after {states} states on a graph of {n} nodes")
        if not nxt:
            raise PlanningError(f"dp: no order reaches the upper bound {upper_bound} B (it was not achievable)")
        level = nxt
    (full, (peak, _, _)), = level.items()
    order = []
    while full:
        full, v = parent[full]
        order.append(v)
    return DPResult(order[::-1], peak, states)


def downset_transients(problem: MemoryProblem, max_states: int = DEFAULT_MAX_STATES) -> dict[int, int]:
    """Bytes live after every reachable set of executed nodes (every down-set), by bitmask.

    Used by the fusion legality test (Zhong et al., Theorem IV.2): the smallest value over
    the proper down-sets is the lowest "transient footprint" any internal order can reach."""
    stepper = _Stepper(problem)
    seen = {0: stepper.start}
    frontier = [0]
    while frontier:
        nxt = []
        for done in frontier:
            live = seen[done]
            for v in stepper.ready(done):
                key = done | 1 << v
                if key not in seen:
                    seen[key] = stepper.run(done, live, v)[1]
                    nxt.append(key)
        if len(seen) > max_states:
            raise InternalError(f"more than {max_states} down-sets")
        frontier = nxt
    return seen


class DynamicProgramming:
    name = "dp"
    stage = "schedule"
    description = "exact minimum-peak order by DP over executed-op sets (graphs up to ~25 ops)"
    reads = ("graph", "untiled", "alignment", "options")
    writes = ("order", "scope", "status", "objective", "bound")
    options = (
        Option("max_ops", "int", DEFAULT_MAX_OPS, "refuse a graph with more ops (the DP is exponential)",
               unit="ops", minimum=1),
        Option("max_states", "int", DEFAULT_MAX_STATES, "refuse when the DP holds more executed-op sets",
               minimum=1),
    )

    def run(self, ctx) -> None:
        problem = MemoryProblem.from_graph(op_graph(ctx), ctx.alignment)
        max_ops, max_states = ctx.options["max_ops"], ctx.options["max_states"]
        if problem.n > max_ops:  # fail before computing anything
            min_peak_schedule(problem, max_ops=max_ops)
        _, bound = best_heuristic_order(problem)
        result = min_peak_schedule(problem, upper_bound=bound, max_ops=max_ops, max_states=max_states)
        set_order(ctx, problem.expand(result.order), "minimum peak")
        ctx.status = "optimal"
        ctx.objective = float(result.peak)
        ctx.bound = float(result.peak)
