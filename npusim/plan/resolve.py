"""Which graph a plan's steps and tensors refer to.

A plan without tiling refers to the graph it was made for. A tiled plan refers to that
graph's tiled expansion (``npusim.graph.tiling.expand`` under ``plan.tiling``), which is
rebuilt here deterministically, so validator, lowering, simulator and plan files all accept
the untiled graph and agree on the tiles.
"""

from __future__ import annotations

from npusim.errors import PlanError
from npusim.graph.model import Graph
from npusim.graph.tiling import expand_cached, tiled_name


def graph_for_plan(plan_graph: str, tiling: dict, graph: Graph) -> Graph:
    if plan_graph == graph.name:
        return graph
    if tiling and plan_graph == tiled_name(graph.name):
        return expand_cached(graph, tiling)
    if plan_graph == tiled_name(graph.name):
        raise PlanError(f"plan is for the tiled graph {plan_graph!r} but its field 'tiling' is empty")
    raise PlanError(f"plan is for graph {plan_graph!r}, not {graph.name!r}")
