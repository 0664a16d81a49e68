"""Stream assignment: which command queue runs each op (``Plan.streams``).

Ops of one stream run in plan order; ops of different streams wait only for their data, so
independent branches overlap on a multi-core NPU. Stream ids are folded onto the hardware's
``streams`` queues (modulo), which keeps every stream's order a sub-order of the plan's.

- ``streams-rr``: round-robin over branches. Walking the order, an op continues the stream of
  a predecessor whose stream's last op it is (a chain stays on one queue); any other op starts
  a branch on the next stream in turn.
- ``streams-category`` (MindSpore paper, Section 5.1): ops fall in categories (here: PE-array
  GEMMs and vector work); a stream holds ops of one category only, up to ``stream_capacity``
  ops (option, default 64); walking the order per category, a new stream opens when the
  current one is full.

Multi-stream plans need a stream-aware allocator (``mindspore-so``/``mindspore-mo``, which use
the safety relation of Section 3); the validator checks them against that relation.
"""

from __future__ import annotations

from npusim.graph.analysis import predecessors
from npusim.graph.generators import assign_streams
from npusim.planner_options import Option


def _fold(streams: list[int], n: int) -> list[int]:
    return [s % max(n, 1) for s in streams]


class RoundRobinStreams:
    name = "streams-rr"
    stage = "streams"
    description = "each branch of the graph on the next stream in turn (chains stay on one stream)"
    reads = ("graph", "order", "hw")
    writes = ("order", "streams")

    def run(self, ctx) -> None:
        graph, order = ctx.graph, ctx.order or list(range(ctx.graph.n_ops))
        preds = predecessors(graph)
        streams = [0] * graph.n_ops
        last_of: dict[int, int] = {}  # stream -> its last op so far
        next_stream = 0
        for op in order:
            chained = next((streams[p] for p in preds[op] if last_of.get(streams[p]) == p), None)
            if chained is None:
                chained = next_stream
                next_stream += 1
            streams[op] = chained
            last_of[chained] = op
        ctx.order = order
        ctx.streams = _fold(streams, ctx.hw.streams)


class CategoryStreams:
    name = "streams-category"
    stage = "streams"
    description = "MindSpore: one op category per stream, a new stream when one is full"
    reads = ("graph", "order", "hw", "options")
    writes = ("order", "streams")
    options = (Option("stream_capacity", "int", 64, "ops one stream takes before a new one opens", unit="ops",
                      minimum=1),)

    def run(self, ctx) -> None:
        order = ctx.order or list(range(ctx.graph.n_ops))
        capacity = ctx.options["stream_capacity"]
        ctx.order = order
        ctx.streams = _fold(assign_streams(ctx.graph, order, capacity), ctx.hw.streams)
