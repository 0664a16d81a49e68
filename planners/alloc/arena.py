"""The online arena allocator with eviction (the baseline of the COSMA paper).

It walks the schedule step by step, as a runtime would. For the op at step ``s`` it makes
every input and output resident: inputs not on chip are loaded, outputs allocated, each by
best fit (``BestFitArena``). When a block does not fit, the pipeline's replacement policy
(``belady``, ``lru``) ranks the resident tensors the op does not use, and they are evicted in
that order until it fits; a victim whose data exists only on chip and is needed later is
spilled (stored) first. Graph outputs are written back right after they are produced.
Tensors are freed after their last use.

Timing conventions (see ``npusim.plan.model``): a load at step s happens before op s; a store
at step s after op s. A victim evicted while preparing step s is stored at step s-1 and its
residency ends at s-1.

If the op's own tensors are fragmented so that even with everything else evicted a block
does not fit, the op's resident inputs are evicted too and everything is placed afresh; this
always succeeds because the budget is at least M_R (checked up front).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from npusim.errors import PlanningError
from npusim.graph.analysis import aligned, min_required, step_of
from npusim.plan.model import Residency, Transfer
from planners.alloc.best_fit import BestFitArena


class UseTimes:
    """Steps at which each tensor is read or written, for replacement policies."""

    def __init__(self, graph, order):
        self.size = [t.size for t in graph.tensors]
        self.steps: dict[int, list[int]] = defaultdict(list)
        for s, op in enumerate(order):
            for t in graph.ops[op].tensors:
                self.steps[t].append(s)
        self.last_access = [-1] * graph.n_tensors

    def next_use(self, t: int, step: int) -> float:
        """First use strictly after ``step`` (infinity if none)."""
        for s in self.steps[t]:
            if s > step:
                return s
        return float("inf")

    def last_use(self, t: int) -> int:
        return self.steps[t][-1]


def check_budget(graph, capacity: int, alignment: int) -> None:
    need, op = min_required(graph, alignment)
    if capacity < need:
        o = graph.ops[op]
        parts = ", ".join(f"{graph.tensors[t].name} {graph.tensors[t].size} B" for t in o.tensors)
        raise PlanningError(
            f"budget {capacity} B is below M_R = {need} B, the working set of op {o.name!r} "
            f"({parts}; sizes rounded up to {alignment} B); without tiling no plan fits. "
            f"Use a budget >= {need} B."
        )


class ArenaAllocator:
    name = "arena"
    stage = "alloc"
    description = "online best-fit arena (TFLite style) that evicts by the pipeline's spill policy"

    def run(self, ctx) -> None:
        graph, order = ctx.graph, ctx.order
        check_budget(graph, ctx.capacity, ctx.alignment)
        policy = ctx.spill_policy
        state = _ArenaRun(graph, order, ctx.capacity, ctx.alignment, policy)
        for s, op in enumerate(order):
            state.step(s, graph.ops[op])
        ctx.residencies, ctx.transfers = state.residencies, state.transfers
        offchip = sum(t.size for t in state.transfers if t.cause in ("spill", "retrieve"))
        ctx.objective = float(offchip)


class _ArenaRun:
    def __init__(self, graph, order, capacity, alignment, policy):
        self.graph = graph
        self.policy = policy
        self.arena = BestFitArena(capacity, alignment)
        self.alloc_size = [int(x) for x in aligned(graph.arrays.tensor_size, alignment)]
        self.uses = UseTimes(graph, order)
        self.resident_since: dict[int, int] = {}  # tensor -> first step of its open residency
        self.in_dram = {t.id for t in graph.tensors if t.in_dram_initially}
        self.loaded_once: set[int] = set()
        self.residencies: list[Residency] = []
        self.transfers: list[Transfer] = []

    # -- bookkeeping -------------------------------------------------------------------------
    def _open(self, t: int, offset: int, s: int) -> None:
        self.resident_since[t] = s

    def _close(self, t: int, last: int) -> None:
        first = self.resident_since.pop(t)
        offset = self.arena.offset_of(t)
        self.arena.free(t)
        self.residencies.append(Residency(first=first, last=last, offset=offset, tensor=t,
                                          size=self.alloc_size[t]))

    def _evict(self, t: int, s: int) -> None:
        """Evict ``t`` before step s: spill it at s-1 if DRAM has no copy and it is needed later."""
        if t not in self.in_dram and self.uses.next_use(t, s - 1) != float("inf"):
            self.transfers.append(Transfer(step=s - 1, kind="store", tensor=t, cause="spill",
                                           size=self.graph.tensors[t].size))
            self.in_dram.add(t)
        self._close(t, s - 1)

    def _victims(self, pinned: set[int], s: int) -> list[int]:
        candidates = [t for t in self.arena.owners() if t not in pinned]
        if not candidates:
            return []
        if self.policy is None:
            raise PlanningError(
                f"op {self.graph.ops[self.current_op].name!r} at step {s} does not fit in the "
                f"{self.arena.capacity} B budget without evicting; add a spill policy "
                "(e.g. '+belady' or '+lru') to the pipeline"
            )
        return self.policy.rank(candidates, s, self.uses)

    def _make_room(self, t: int, pinned: set[int], s: int) -> int | None:
        offset = self.arena.find(self.alloc_size[t])
        victims = iter(self._victims(pinned, s)) if offset is None else iter(())
        while offset is None:
            victim = next(victims, None)
            if victim is None:
                return None
            self._evict(victim, s)
            offset = self.arena.find(self.alloc_size[t])
        return offset

    # -- one step ----------------------------------------------------------------------------
    def step(self, s: int, op) -> None:
        self.current_op = op.id
        needed = list(op.tensors)
        pinned = set(needed)
        missing = [t for t in needed if t not in self.resident_since]
        placements = {}
        for t in missing:
            offset = self._make_room(t, pinned, s)
            if offset is None:  # fragmented by the op's own tensors: start the op afresh
                return self._restart_op(s, op, needed)
            self.arena.place(t, offset, self.alloc_size[t])
            self._open(t, offset, s)
            placements[t] = offset
        for t in missing:
            if t in op.inputs:
                self._load(t, s)
        self._finish(s, op, needed)

    def _restart_op(self, s: int, op, needed: list[int]) -> None:
        for t in list(self.arena.owners()):
            self._evict(t, s) if self.resident_since.get(t, s) < s else self._drop_new(t)
        for t in needed:
            offset = self.arena.allocate(t, self.alloc_size[t])
            assert offset is not None, "budget >= M_R guarantees an empty arena holds one op"
            self._open(t, offset, s)
            if t in op.inputs:
                self._load(t, s)
        self._finish(s, op, needed)

    def _drop_new(self, t: int) -> None:
        """Undo a placement made in this step (nothing was transferred yet)."""
        self.resident_since.pop(t)
        self.arena.free(t)

    def _load(self, t: int, s: int) -> None:
        tensor = self.graph.tensors[t]
        if t not in self.in_dram:
            raise PlanningError(f"internal: {tensor.name!r} must be loaded at step {s} but DRAM has no copy")
        cause = "compulsory" if tensor.in_dram_initially and t not in self.loaded_once else "retrieve"
        self.loaded_once.add(t)
        self.transfers.append(Transfer(step=s, kind="load", tensor=t, cause=cause, size=tensor.size))

    def _finish(self, s: int, op, needed: list[int]) -> None:
        for t in needed:
            self.uses.last_access[t] = s
        for t in op.outputs:
            if self.graph.tensors[t].kind == "output":
                self.transfers.append(Transfer(step=s, kind="store", tensor=t, cause="writeback",
                                               size=self.graph.tensors[t].size))
                self.in_dram.add(t)
        for t in needed:
            if self.uses.last_use(t) <= s:
                self._close(t, s)
