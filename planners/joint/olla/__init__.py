"""OLLA (Steiner et al., "Optimizing the Lifetime and Location of Arrays"): order and addresses.

``olla_plan`` decides the op order and a scratchpad address for every tensor:

- small graphs (``joint_max_ops``, default 30 ops): the joint ILP (9) — lifetimes (eq. 1–5)
  and locations (eq. 6–8) at once, pairs pruned by lifetime spans (MUL, eq. 11) and by
  precedence (§4.2, Function 2's "is v1 in the transitive fan-in of v2", here the ancestor
  bitsets of the graph);
- otherwise the split of §4.4: the lifetime ILP (14) for the order (``olla_lifetime``), then
  the address ILP (15) for that order with pyramid pre-placement (``olla_address``).

On training graphs (ops of kind ``SGDUpdate``) the control edges of Functions 3–4 force weight
updates early. Each solve is warm-started from the best heuristic order / a first-fit
placement, gets its share of ``time_limit`` (60 s) with ``workers`` (2), and reports its
status; the plan's status is the weaker of the two.

The plan keeps every tensor resident over its whole lifetime at its address: inputs and
weights are loaded (compulsory) before their first use, graph outputs written back right after
they are produced. Fragmentation = (arena − max live bytes) / arena. If the arena exceeds the
budget, ``olla`` raises PlanningError: it does not spill.

Two planners: ``olla`` (stage ``joint``: order, residencies and transfers) and ``olla-order``
(stage ``schedule``: only the order of the lifetime ILP, to combine with any allocator).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from npusim.errors import PlanningError
from npusim.graph.analysis import aligned, lifetimes
from npusim.graph.model import Graph
from npusim.plan.model import Residency
from planners.alloc.onchip import lifetime_transfers
from planners.alloc.prefetch import PREFETCH_OPTIONS, hoist_loads, prefetch_depth
from planners.joint.olla.address import Blocks, first_fit, solve_addresses
from planners.joint.olla.lifetime import (build_lifetime_model, control_edges, decode_order,
                                          hint_order, solve_lifetimes, with_control_edges)
from planners.schedule.cp import add_hints
from planners.schedule.greedy import best_heuristic_order
from planners.schedule.op_level import is_tiled, op_graph, set_order
from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import (SolverOptions, check_model_size, has_solution, make_solver, solver_options,
                                      status_name)
from npusim.planner_options import Option, values

DEFAULT_JOINT_MAX_OPS = 30
#: What the lifetime ILP (the order) reads besides the solver options.
OLLA_ORDER_OPTIONS = (
    Option("early_updates", "bool", True, "control edges that run weight updates as early as possible (training "
           "graphs)"),
)
#: What the joint planner reads besides the order's and the solver's options.
OLLA_OPTIONS = (
    Option("joint_max_ops", "int", DEFAULT_JOINT_MAX_OPS, "graphs up to this many ops get the joint order + "
           "address ILP (0: never)", unit="ops", minimum=0),
    Option("preplace", "bool", True, "warm-start the address ILP from a first-fit placement"),
)
_RANK = {"optimal": 0, "feasible": 1, "heuristic": 2, "timed_out": 3}


@dataclass(frozen=True)
class OllaResult:
    order: list[int]
    offsets: dict  # tensor id -> scratchpad offset
    arena: int
    max_live: int
    status: str
    bound: int
    method: str  # "joint" or "split"
    control_edges: int
    seconds: float

    @property
    def fragmentation(self) -> float:
        return (self.arena - self.max_live) / self.arena if self.arena else 0.0


def weight_update_nodes(graph: Graph) -> list[int]:
    return [op.id for op in graph.ops if op.kind == "SGDUpdate"]


def olla_order(graph: Graph, align: int, options: dict) -> tuple[list[int], str, int, int]:
    """Order from the lifetime ILP (14): (order, status, bound, control edges added)."""
    opts = SolverOptions.from_options(options)
    problem = MemoryProblem.from_graph(graph, align)
    edges = []
    if values(options, OLLA_ORDER_OPTIONS, "olla")["early_updates"]:
        edges = control_edges(problem, weight_update_nodes(graph))
    constrained = with_control_edges(problem, edges)
    hint, _ = best_heuristic_order(constrained)
    result = solve_lifetimes(constrained, hint, opts)
    order = result.order
    free_hint, free_peak = best_heuristic_order(problem)
    if edges and free_peak < problem.peak(order):  # control edges are a heuristic: keep the better
        order = free_hint
    bound = result.bound if not edges else problem.lower_bound()
    return order, result.status if not edges else _weaker(result.status, "feasible"), bound, len(edges)


def _weaker(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


def tensor_blocks(graph: Graph, order: list[int], align: int) -> Blocks:
    life = lifetimes(graph, order)
    ids = [t.id for t in graph.tensors if life.first[t.id] >= 0]
    return Blocks(ids=tuple(ids), size=tuple(int(aligned(graph.tensors[t].size, align)) for t in ids),
                  first=tuple(int(life.first[t]) for t in ids), last=tuple(int(life.last[t]) for t in ids))


def olla_plan(graph: Graph, align: int, options: dict, order_of=None, capacity: int | None = None) -> OllaResult:
    """Order and addresses of ``graph``. ``order_of(options)`` -> (order, status, bound, control
    edges), when given, decides the order instead of the lifetime ILP on ``graph`` (for a
    tiled graph: the op-level order with each op's tiles after it)."""
    start = time.perf_counter()
    opts = SolverOptions.from_options(options)
    joint_max = values(options, OLLA_OPTIONS, "olla")["joint_max_ops"]
    if order_of is None and graph.n_ops <= joint_max:
        result = _joint(graph, align, opts)
        if result is not None:
            return result
    half = dict(options, time_limit=opts.time_limit / 2)
    order, order_status, _, n_edges = order_of(half) if order_of else olla_order(graph, align, half)
    blocks = tensor_blocks(graph, order, align)
    if capacity is not None and blocks.max_live() > capacity:  # no placement can fit: say so now
        raise PlanningError(_no_fit(None, blocks.max_live(), capacity, tiled=order_of is not None))
    # deterministic limits: a fixed half for the addresses, as for the order (the wall time the
    # order took would make the address solve's limit, and so the plan, depend on the load)
    left = opts.time_limit / 2 if opts.deterministic else opts.time_limit - (time.perf_counter() - start)
    addr = solve_addresses(blocks, align, opts.with_limit(left), values(options, OLLA_OPTIONS, "olla")["preplace"])
    status = _weaker(order_status, addr.status)
    if order_status != "optimal":
        status = _weaker(status, "feasible")
    return OllaResult(order, addr.offsets, addr.arena, addr.max_live, status, addr.bound, "split",
                      n_edges, time.perf_counter() - start)


def _joint(graph: Graph, align: int, opts: SolverOptions) -> OllaResult | None:
    """The joint ILP (9) on a small graph; None if CP-SAT finds no solution in time."""
    start = time.perf_counter()
    problem = MemoryProblem.from_graph(graph, align, fold_weights=False)
    tensor_of = [t.id for t in graph.tensors if not (t.producer is None and not t.consumers)]
    hint, hint_peak = best_heuristic_order(problem)
    hint_blocks = tensor_blocks(graph, hint, align)
    ff = first_fit(hint_blocks, {}, align)
    hint_off = {hint_blocks.ids[i]: off for i, off in ff.items()}
    top = max(hint_off[t] + int(aligned(graph.tensors[t].size, align)) for t in hint_off)
    lm = build_lifetime_model(problem, scale=align)
    m = lm.model
    unit = align
    size = [s // unit for s in problem.sizes]
    A = [m.NewIntVar(0, max(0, top // unit - size[e]), f"A{e}") for e in range(problem.n_buffers)]
    peak = m.NewIntVar(0, top // unit, "peak_mem")
    for e in range(problem.n_buffers):
        m.Add(A[e] + size[e] <= peak)  # (8)
    m.Add(peak * unit >= problem.lower_bound())
    anc = problem.ancestor_masks()
    spans = {}
    for (e, t) in lm.live:
        lo, hi = spans.get(e, (t, t))
        spans[e] = (min(lo, t), max(hi, t))

    def never_together(e1: int, e2: int) -> bool:  # §4.2: every sink of e1 precedes e2's source
        src = problem.producer[e2]
        sinks = problem.consumers[e1]
        return src >= 0 and bool(sinks) and all(anc[src] >> s & 1 for s in sinks)

    for e1 in range(problem.n_buffers):
        for e2 in range(e1 + 1, problem.n_buffers):
            (l1, h1), (l2, h2) = spans[e1], spans[e2]
            if h1 < l2 or h2 < l1 or never_together(e1, e2) or never_together(e2, e1):
                continue
            a, b = m.NewBoolVar(f"a{e1}_{e2}"), m.NewBoolVar(f"b{e1}_{e2}")
            m.Add(a + b <= 1)  # (6)
            for t in range(max(l1, l2), min(h1, h2) + 1):
                m.Add(a + b >= sum(lm.live[e1, t]) + sum(lm.live[e2, t]) - 1)
            m.Add(A[e1] + size[e1] <= A[e2]).OnlyEnforceIf(a)  # (7a)
            m.Add(A[e2] + size[e2] <= A[e1]).OnlyEnforceIf(b)  # (7b)
    m.Minimize(peak)
    hint_order(lm, problem, hint)
    add_hints(m, [(A[e], hint_off[tensor_of[e]] // unit) for e in range(problem.n_buffers)])
    check_model_size(m, opts, "olla (joint ILP)", "a smaller joint_max_ops (the split ILPs)")
    solver = make_solver(opts, started=start)
    code = solver.Solve(m)
    if not has_solution(code):
        return None
    order = decode_order(lm, solver, problem.n)
    blocks = tensor_blocks(graph, order, align)
    offsets = {tensor_of[e]: solver.Value(A[e]) * unit for e in range(problem.n_buffers)}
    arena = max((offsets[t] + s for t, s in zip(blocks.ids, blocks.size)), default=0)
    bound = max(int(solver.BestObjectiveBound()) * unit, problem.lower_bound())
    return OllaResult(order, offsets, arena, blocks.max_live(), status_name(code), min(bound, arena),
                      "joint", 0, time.perf_counter() - start)


def plan_parts(graph: Graph, order: list[int], offsets: dict, align: int):
    """Residencies and transfers: every tensor resident over its lifetime at its offset
    (transfers as every whole-lifetime allocator: ``planners.alloc.onchip.lifetime_transfers``)."""
    life = lifetimes(graph, order)
    residencies = [Residency(first=int(life.first[t.id]), last=int(life.last[t.id]), offset=int(offsets[t.id]),
                             tensor=t.id, size=int(aligned(t.size, align)))
                   for t in graph.tensors if life.first[t.id] >= 0]
    return residencies, lifetime_transfers(graph, order, residencies)


def _no_fit(arena: int | None, max_live: int, capacity: int, tiled: bool) -> str:
    """Why olla has no plan: its arena (or, before placing, its order's live bytes) over the budget."""
    need = (f"the arena needs {arena} B (max live {max_live} B, fragmentation {(arena - max_live) / arena:.1%})"
            if arena is not None else f"its order keeps {max_live} B live at the peak, so the arena needs at least that")
    return (f"olla: {need} but the budget is {capacity} B; olla keeps every tensor on chip and does not spill: "
            f"raise the budget or use a pipeline with a spill policy (e.g. '{'tile+' if tiled else ''}olla-order+arena+belady')")


class OllaJoint:
    name = "olla"
    stage = "joint"
    description = "OLLA: lifetime ILP for the order, address ILP for offsets (joint ILP on small graphs)"
    reads = ("graph", "untiled", "capacity", "alignment", "options", "prefetch_depth")
    writes = ("order", "scope", "residencies", "transfers", "status", "objective", "bound")
    options = (*solver_options(), *OLLA_ORDER_OPTIONS, *OLLA_OPTIONS, *PREFETCH_OPTIONS)

    def run(self, ctx) -> None:
        order_of = None
        if is_tiled(ctx):
            # The lifetime ILP orders the op-level graph; the address ILP places the tiles.
            def order_of(options):
                order, status, bound, edges = olla_order(ctx.untiled, ctx.alignment, options)
                set_order(ctx, order, "peak")
                return ctx.order, status, bound, edges
        result = olla_plan(ctx.graph, ctx.alignment, ctx.options, order_of, capacity=ctx.capacity)
        if result.arena > ctx.capacity:
            raise PlanningError(_no_fit(result.arena, result.max_live, ctx.capacity, tiled=order_of is not None))
        if order_of:
            ctx.scope = (f"arena of the tiled graph's {ctx.graph.n_ops} ops in the OLLA order of its "
                         f"{ctx.untiled.n_ops} ops, each op's tiles after it")
        ctx.order = result.order
        residencies, transfers = plan_parts(ctx.graph, result.order, result.offsets, ctx.alignment)
        ctx.residencies, ctx.transfers = hoist_loads(ctx.graph, residencies, transfers,
                                                     prefetch_depth(ctx), ctx.capacity)
        ctx.status = result.status
        ctx.objective = float(result.arena)
        ctx.bound = float(result.bound)


class OllaOrder:
    name = "olla-order"
    stage = "schedule"
    description = "OLLA's lifetime ILP (eq. 14) as a schedule stage: the order only"
    reads = ("graph", "untiled", "alignment", "options")
    writes = ("order", "scope", "status", "bound")
    options = (*solver_options(), *OLLA_ORDER_OPTIONS)

    def run(self, ctx) -> None:
        order, status, bound, _ = olla_order(op_graph(ctx), ctx.alignment, ctx.options)
        set_order(ctx, order, "peak")
        ctx.status = status
        ctx.bound = float(bound)
