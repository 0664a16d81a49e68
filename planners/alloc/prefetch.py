"""Loads ahead of their consumers, as far as a finished plan's memory allows.

Planners that place a tensor at the step an op first needs it — COSMA's model, OLLA, the
whole-schedule offset assignments — load it right before that op, so the op waits for the
DMA. ``hoist_loads`` starts each load (and its residency) up to ``depth`` steps earlier: at
the earliest step from which

- DRAM has the data: an input or weight always; a spilled tensor after the step of its
  store; a read view of tiles after the stores of the tiles it reads;
- the tensor's previous residency (if it had one) has ended; and
- some addresses are free for the residency's whole new life (no other residency there in
  any of its steps): its own addresses if they are, else the best-fitting free range.

Only the residencies that start with a load move, and only to free space, so the plan stays
valid (the validator checks it again) and its bytes do not change; the DMA just runs while
earlier ops compute. The ``arena`` allocator reserves such space while it allocates
(``prefetch_depth``); this is the same for plans made whole. Single-stream plans only: on
several streams an earlier residency changes which pairs the safety relation must separate.
"""

from __future__ import annotations

from dataclasses import replace

from npusim.plan.model import Residency, Transfer
from npusim.planner_options import Option

#: Lookahead of prefetching, in ops, when the option ``prefetch_depth`` is not given and no
#: earlier stage set one (the tile stage sets ``ctx.prefetch_depth`` to
#: ``planners.tiling.tiler.PREFETCH_DEPTH``, 4): none. Without tiling, at the papers' budgets
#: (M_R, M_P), reservations shift best-fit placements and can fragment the arena (fcn_resnet50
#: with RPO at M_P: +86 MB of spills at depth 1), so there it is opt-in.
PREFETCH_DEPTH = 0
#: Steps per bucket of the index of residencies by step.
BUCKET = 32

#: The options of every allocator that prefetches (``prefetch_depth``).
PREFETCH_OPTIONS = (
    Option("prefetch_depth", "int", None, "ops ahead whose loads are reserved while allocating "
           "(default: 4 after the tile stage, else 0)", unit="ops", minimum=0),
    Option("double_buffer", "bool", True, "false turns prefetching off (depth 0)"),
)


def prefetch_depth(ctx) -> int:
    """How many ops ahead loads are reserved: option ``prefetch_depth``, else what an earlier
    stage set (``ctx.prefetch_depth``), else ``PREFETCH_DEPTH``; ``double_buffer=false``
    turns it off (0)."""
    if not ctx.options["double_buffer"]:
        return 0
    if ctx.options["prefetch_depth"] is not None:
        return ctx.options["prefetch_depth"]
    return PREFETCH_DEPTH if ctx.prefetch_depth is None else ctx.prefetch_depth


def hoist_loads(graph, residencies: list[Residency], transfers: list[Transfer], depth: int, capacity: int,
                streams=None) -> tuple[list[Residency], list[Transfer]]:
    """(residencies, transfers) with loads up to ``depth`` steps earlier (see the module)."""
    if depth <= 0 or not residencies or (streams is not None and len(set(streams)) > 1):
        return residencies, transfers
    residencies, transfers = list(residencies), list(transfers)
    index = _StepIndex(residencies)
    stored_at: dict[int, list[int]] = {}
    for tr in transfers:
        if tr.kind == "store":
            stored_at.setdefault(tr.tensor, []).append(tr.step)
    starting = {(r.tensor, r.first): i for i, r in enumerate(residencies)}
    ends_of: dict[int, list[int]] = {}  # tensor -> last steps of its residencies
    for r in residencies:
        ends_of.setdefault(r.tensor, []).append(r.last)
    loads = sorted((tr.step, k) for k, tr in enumerate(transfers)
                   if tr.kind == "load" and tr.step > 0 and (tr.tensor, tr.step) in starting)
    for step, k in loads:
        i = starting[(transfers[k].tensor, step)]
        res = residencies[i]
        earliest = max(0, step - depth, _ready_step(graph, res.tensor, step, stored_at),
                       *(last + 1 for last in ends_of[res.tensor] if last < step))  # one residency of a tensor at a time
        for first in range(earliest, step):
            offset = _free_range(index.overlapping(first, res.last, i), res, capacity)
            if offset is not None:
                residencies[i] = replace(res, first=first, offset=offset)
                index.add(i, first, step - 1)
                transfers[k] = replace(transfers[k], step=first)
                break
    return residencies, transfers


class _StepIndex:
    """Residency ids by bucket of ``BUCKET`` steps, for 'who is there in steps a..b'."""

    def __init__(self, residencies: list[Residency]):
        self.residencies = residencies
        self.buckets: dict[int, set[int]] = {}
        for i, r in enumerate(residencies):
            self.add(i, r.first, r.last)

    def add(self, i: int, first: int, last: int) -> None:
        for b in range(first // BUCKET, last // BUCKET + 1):
            self.buckets.setdefault(b, set()).add(i)

    def overlapping(self, first: int, last: int, skip: int) -> list[Residency]:
        found = set()
        for b in range(first // BUCKET, last // BUCKET + 1):
            found |= self.buckets.get(b, set())
        found.discard(skip)
        return [r for j in found for r in (self.residencies[j],) if r.first <= last and r.last >= first]


def _ready_step(graph, tensor: int, step: int, stored_at: dict) -> int:
    """The first step a load of ``tensor`` needed at ``step`` may happen at."""
    t = graph.tensors[tensor]
    if t.in_dram_initially:
        return 0
    ready = 0
    for source in t.sources or (tensor,):
        before = [k for k in stored_at.get(source, ()) if k < step]
        if not before:  # no store before the load: it stays where it is
            return step
        ready = max(ready, max(before) + 1)  # a store at k happens after op k
    return ready


def _free_range(others: list[Residency], res: Residency, capacity: int) -> int | None:
    """An offset where ``res.size`` bytes are free of ``others``: its own if free, else best fit."""
    taken = sorted((r.offset, r.offset + r.size) for r in others)
    gaps, cursor = [], 0
    for lo, hi in taken + [(capacity, capacity)]:
        if lo - cursor >= res.size:
            gaps.append((cursor, lo))
        cursor = max(cursor, hi)
    if any(lo <= res.offset and res.offset + res.size <= hi for lo, hi in gaps):
        return res.offset
    fitting = [(hi - lo, lo) for lo, hi in gaps]
    return min(fitting)[1] if fitting else None
