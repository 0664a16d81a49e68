"""A plan bound to the graphs it refers to: made once, by planning or by ``bind``.

A plan's steps, tensors and residencies index a graph that may not be the one a user holds:
with fusion, the graph with its epilogues fused (``npusim.graph.fusion.fuse`` under
``plan.fusion``); with tiling, that graph's tiled expansion (``npusim.graph.tiling.expand``
under ``plan.tiling``). A ``BoundPlan`` is a ``Plan`` that carries them:

- ``bound_graph``: what the plan indexes (fused and tiled as it says);
- ``base_graph``: the given graph with the plan's fusion, which its tiling refers to;
- ``given_graph``: the graph as given to the planner or to ``bind``.

Planning has these graphs in hand and returns them bound (``npusim.registry.make_plan``); a
plan read from a file is bound once on load (``npusim.plan.io.load_plan``). ``bind`` is the
only place that fuses or expands a graph for a plan: the validator, lowering, plan files,
plots and the LLM run take the bound plan and never rebuild or re-match a graph. A
``BoundPlan`` compares and serialises as its plan; ``dataclasses.replace`` on it (a hand edit
of a residency, say) keeps its graphs, which is what a check of the edited plan needs. An edit
of what the graphs are built from (``graph``, ``fusion``, ``tiling``) makes the binding stale:
``as_bound`` then binds the edited plan again from the graph as given, so the validator sees
(and reports) the edited fusion or tiling, never the old graphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from npusim.errors import PlanError
from npusim.graph.fusion import fuse, fusion_problems
from npusim.graph.model import Graph
from npusim.graph.tiling import expand, tiled_name
from npusim.plan.model import Plan


@dataclass(frozen=True, eq=False)  # equality is the plan's (Plan.__eq__)
class BoundPlan(Plan):
    bound_graph: Graph | None = field(default=None, compare=False, repr=False)
    base_graph: Graph | None = field(default=None, compare=False, repr=False)
    given_graph: Graph | None = field(default=None, compare=False, repr=False)

    #: What the graphs were built from (name, fusion, tiling), to tell a stale binding.
    bound_from: tuple | None = field(default=None, compare=False, repr=False)

    @property
    def stale(self) -> bool:
        """True when the plan's graph name, fusion or tiling changed since it was bound."""
        return self.bound_graph is None or self.bound_from != _recipe(self)

    @property
    def unbound(self) -> Plan:
        """The plan alone (what a plan file holds)."""
        return Plan(**{f.name: getattr(self, f.name) for f in fields(Plan)})


class BindError(PlanError):
    """Why a plan cannot be bound to a graph: ``kind`` is the validator's violation kind
    (``fusion``: a chain that cannot be fused; ``order``: the plan is for another graph), and
    ``problems`` every such problem."""

    def __init__(self, kind: str, problems: list[str]):
        super().__init__("; ".join(problems))
        self.kind, self.problems = kind, problems


def bind(plan: Plan, graph: Graph) -> BoundPlan:
    """``plan`` with the graphs it refers to, built from ``graph`` (the graph it was made for,
    as given: unfused, untiled). A plan already bound to ``graph`` is returned as is.

    Raises ``BindError`` when the plan's fusion cannot be applied to ``graph`` or its graph
    name is neither ``graph``'s (fused) name nor its tiled one."""
    if isinstance(plan, BoundPlan) and plan.given_graph is graph and not plan.stale:
        return plan
    base, bound = plan_graphs(graph, plan.fusion, plan.tiling, plan.graph)
    return bound_to(plan, bound, base, graph)


def fused_graph(graph: Graph, fusion: dict) -> Graph:
    """``graph`` with ``fusion`` applied (``BindError`` if a chain cannot be fused)."""
    problems = fusion_problems(graph, fusion) if fusion else []
    if problems:
        raise BindError("fusion", problems)
    return fuse(graph, fusion) if fusion else graph


def plan_graphs(graph: Graph, fusion: dict, tiling: dict, name: str, base: Graph | None = None) -> tuple[Graph, Graph]:
    """(base, bound) graphs of a plan for ``graph`` with this fusion and tiling whose steps
    index the graph called ``name`` (``base``: the fused graph when the caller has built it)."""
    require_plan_of(name, graph)
    base = fused_graph(graph, fusion) if base is None else base
    if name == base.name:
        return base, base
    if name == tiled_name(base.name) and tiling:
        return base, expand(base, tiling)
    if name == tiled_name(base.name):
        raise BindError("order", [f"plan is for the tiled graph {name!r} but its field 'tiling' is empty"])
    _not_this_graph(name, graph, f" (whose plans name {base.name!r} or {tiled_name(base.name)!r})"
                    if base.name != graph.name else "")


def require_plan_of(name: str, graph: Graph) -> None:
    """``BindError`` unless a plan naming graph ``name`` can be for ``graph`` (as given: its
    name, or it fused or tiled): checked before the plan's fusion, whose problems with another
    model's ops would say less."""
    if not (name == graph.name or isinstance(name, str) and name.startswith(graph.name + "@")):
        _not_this_graph(name, graph, "")


def _not_this_graph(name: str, graph: Graph, known: str):
    raise BindError("order", [f"plan is for graph {name!r}, not {graph.name!r}{known}: plan this graph again "
                              f"(npusim plan), or give the graph the plan was made for"])


def bound_to(plan: Plan, bound: Graph, base: Graph, given: Graph) -> BoundPlan:
    """``plan`` carrying graphs its maker already has (planning: no rebuild)."""
    values = {f.name: getattr(plan, f.name) for f in fields(Plan)}
    return BoundPlan(**values, bound_graph=bound, base_graph=base, given_graph=given, bound_from=_recipe(plan))


def _recipe(plan: Plan) -> tuple:
    return plan.graph, repr(sorted(plan.fusion.items())), repr(sorted(plan.tiling.items()))


def as_bound(plan: Plan, graph: Graph | None) -> BoundPlan:
    """``plan`` bound: itself if it is, else ``bind(plan, graph)`` (a hand-made plan)."""
    if isinstance(plan, BoundPlan) and not plan.stale and (graph is None or plan.given_graph is graph):
        return plan
    if graph is None and isinstance(plan, BoundPlan) and plan.given_graph is not None:
        graph = plan.given_graph  # an edited fusion or tiling: bind again from the graph as given
    if graph is None:
        raise PlanError("a plan that is not bound to its graph needs the graph it was made for")
    return bind(plan, graph)
