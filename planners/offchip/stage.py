"""The ``offchip`` stage: a DRAM layout for the plan the earlier stages made.

The arena (every buffer but the weights: inputs, outputs, spilled tensors, tiled feature
maps) starts at address 0 and is laid out by the stage's algorithm; the weights follow it,
back to back, in a region of their own (they live for the whole run). Offsets and sizes are
rounded up to the DRAM burst. The result is ``ctx.dram`` (buffer name -> offset,
``npusim.plan.dram``), which the lowering turns into DMA addresses and the simulator's DRAM
tracker checks.
"""

from __future__ import annotations

from npusim.errors import PlanningError
from planners.offchip.collision import align_up
from npusim.plan.layout import DramLayout
from planners.offchip import baselines, taa
from planners.offchip.lifetimes import dram_buffers
from npusim.planner_options import Option


class OffchipPlanner:
    stage = "offchip"
    reads = ("graph", "untiled", "order", "streams", "residencies", "transfers", "hw", "options")
    writes = ("dram",)

    def __init__(self, name: str, description: str, solve, options=()):
        self.name = name
        self.description = description
        self.options = tuple(options)
        self._solve = solve

    def run(self, ctx) -> None:
        if ctx.transfers is None or ctx.residencies is None:
            raise PlanningError(f"{self.name}: the off-chip stage needs the transfers of an allocation stage "
                                "(add e.g. '+arena+belady')")
        order = ctx.order if ctx.order is not None else list(range(ctx.graph.n_ops))
        alignment = max(int(ctx.hw.dma.burst_bytes), 1)
        layout = DramLayout(ctx.untiled if ctx.untiled is not None else ctx.graph, ctx.hw.dram.layout)
        buffers = dram_buffers(ctx.graph, order, ctx.transfers, ctx.streams, ctx.untiled, alignment, layout)
        arena = [b for b in buffers if not b.weight]
        result = self._solve(arena, alignment, ctx.options)
        dram = dict(result.offsets)
        cursor = align_up(result.total, alignment)
        for b in buffers:
            if b.weight:
                dram[b.name] = cursor
                cursor += b.size
        ctx.dram = dram


def planners() -> list[OffchipPlanner]:
    return [
        OffchipPlanner("taa", "off-chip: Tile-Aware Allocator, reuses a dead tile's DRAM while its tensor lives "
                              "(option taa_sort=size|lifetime|peers|best, default size)",
                       lambda bufs, align, opts: taa.taa(bufs, align, opts["taa_sort"]),
                       [Option("taa_sort", "choice", "size", "order in which TAA places DRAM buffers "
                               "(best: try each, keep the smallest arena)", choices=(*taa.SORTS, "best"))]),
        OffchipPlanner("offchip-naive", "off-chip: no reuse, every DRAM buffer its own addresses",
                       lambda bufs, align, opts: baselines.naive(bufs, align)),
        OffchipPlanner("offchip-so", "off-chip: best of the three Shared Objects strategies, whole tensors",
                       lambda bufs, align, opts: baselines.shared_objects_best(bufs, align)),
        OffchipPlanner("offchip-offsets", "off-chip: generic offset assignment (largest first, best fit), whole tensors",
                       lambda bufs, align, opts: baselines.offsets(bufs, align)),
    ]
