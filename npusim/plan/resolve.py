"""Which graph a plan's steps and tensors refer to.

A plan without fusion or tiling refers to the graph it was made for. A fused plan refers to
that graph with its epilogues fused (``npusim.graph.fusion.fuse`` under ``plan.fusion``), a
tiled plan to the (fused) graph's tiled expansion (``npusim.graph.tiling.expand`` under
``plan.tiling``); both are rebuilt here deterministically, so validator, lowering, simulator
and plan files all accept the graph as given and agree on the fused ops and the tiles.
"""

from __future__ import annotations

from npusim.errors import PlanError
from npusim.graph.fusion import fuse_cached
from npusim.graph.model import Graph
from npusim.graph.tiling import expand_cached, tiled_name


def base_graph(fusion: dict | None, graph: Graph) -> Graph:
    """The graph a plan's tiling refers to: ``graph`` with ``fusion`` applied (PlanError if
    a chain cannot be fused)."""
    return fuse_cached(graph, fusion) if fusion else graph


def graph_for_plan(plan_graph: str, tiling: dict, graph: Graph, fusion: dict | None = None) -> Graph:
    graph = base_graph(fusion, graph)
    if plan_graph == graph.name:
        return graph
    if tiling and plan_graph == tiled_name(graph.name):
        return expand_cached(graph, tiling)
    if plan_graph == tiled_name(graph.name):
        raise PlanError(f"plan is for the tiled graph {plan_graph!r} but its field 'tiling' is empty")
    raise PlanError(f"plan is for graph {plan_graph!r}, not {graph.name!r}")
