"""Schedules on tiled graphs: the schedulers order the ops, each op's tiles follow it.

After the tile stage the pipeline's graph is the tiled expansion: one op per tile, and tiles
that read a tensor other tiles wrote read it back from DRAM (a read view listing its
``sources``). A scheduler working on that graph directly would have to know those DRAM
dependencies, would see thousands of nodes (too many for Zhong's or OLLA's ILPs) and could
interleave the tiles of different ops, which breaks double buffering.

So every schedule stage orders the graph as given (``ctx.untiled``, the op-level problem its
algorithm was written for, with its guarantees: Zhong's or the DP's optimum, OLLA's bound),
and the tiles of each op then run together in their tiling order. The order is topological
for the tiled graph because every tile of an op depends only on ops before it in the op
order. ``scope`` says which problem the status and bound refer to.
"""

from __future__ import annotations

from npusim.graph.model import Graph, op_origins, record_fields


def is_tiled(ctx) -> bool:
    return ctx.untiled is not None and ctx.graph is not ctx.untiled


def op_graph(ctx) -> Graph:
    """The graph a scheduler orders: the op-level graph, whether or not it was tiled."""
    return ctx.untiled if is_tiled(ctx) else ctx.graph


def tiles_of_ops(tiled: Graph, untiled: Graph) -> list[list[int]]:
    """For each op of ``untiled``, the ops of ``tiled`` that stand for it, in tiling order
    (an untiled op keeps its name; a tile names its op in ``attrs['tile_of']``)."""
    members: list[list[int]] = [[] for _ in range(untiled.n_ops)]
    ids = {name: i for i, name in enumerate(record_fields(untiled.ops, "name")[0])}
    for o, origin in enumerate(op_origins(tiled)):
        members[ids[origin]].append(o)
    return members


def set_order(ctx, op_order: list[int], claim: str | None = None) -> None:
    """Set ``ctx.order`` from an order of the op-level graph, expanding tiled ops to their
    tiles. ``claim`` names what the scheduler's status and bound are about (``peak``), for
    schedulers that claim anything: it becomes the plan's ``scope``, so that an "optimal"
    order is not read as an optimal plan (the spills a later stage chooses are not claimed)."""
    if not is_tiled(ctx):
        ctx.order = list(op_order)
        if claim:
            ctx.scope = f"{claim} of the schedule ({ctx.graph.n_ops} ops)"
        return
    members = tiles_of_ops(ctx.graph, ctx.untiled)
    ctx.order = [tile for op in op_order for tile in members[op]]
    if claim:
        ctx.scope = (f"{claim} of the op-level schedule ({ctx.untiled.n_ops} ops); "
                     f"the {ctx.graph.n_ops} tiled ops follow their op in tiling order")
