"""COSMA (Li, Gupta, Malik): operator order, scratchpad addresses and tensor replacement in
one ILP that minimises non-compulsory off-chip bytes (spills + retrieves, eq. 12).

Four joint planners:

- ``cosma``: the full ILP with schedule freedom (time-indexed: op v runs at one step of its
  ASAP/ALAP window, the paper's C variables), warm-started from the cheapest online solution
  over the default, reverse-post and memory-greedy orders (``cosma.warm``). A graph whose
  model would exceed ``max_cells`` (tensor, step) cells is not built: ``cosma`` refuses
  with a PlanningError naming the size and the limit (suggesting ``cosma-dnc``, a scheme
  heuristic, or a higher ``max_cells``), so a big graph never exhausts memory. With
  ``fallback=dnc`` it runs ``cosma-dnc`` instead (status ``feasible``, bound 0) and records
  that in the plan's ``meta.stats["fallback"]`` (a deterministic solve with the guard off is
  kept, so a ``cosma-dnc`` of the same graph and options after it solves nothing:
  ``planners.joint.cosma.memo``);
- ``cosma-fs``: allocation and replacement for a fixed schedule (eq. 16–17): the pipeline's
  schedule stage (``zhong+cosma-fs``) or the default order. A fixed-order model above
  ``max_cells`` (a tiled graph: tens of thousands of tiles) is solved in parts of that
  order cut where the fewest bytes cross (status ``feasible``), as ``cosma-dnc`` does;
- ``cosma-mpmf``: the minimum-peak-footprint schedule first (eq. 13–15, computed by the
  ``zhong`` scheduler — exact on graphs its ILP takes whole, partitioned otherwise), then
  the FS ILP for it;
- ``cosma-dnc``: divide and conquer with automatic break nodes (``cosma.dnc``).

Options (``--option``): ``time_limit`` (s, 60), ``workers`` (2), ``seed``, ``params``
(default true: weights are placed too; false: activations only, weights streamed through a
parameter buffer at the top of the scratchpad), ``overlap`` (``nooverlap2d`` | ``bigm``),
``max_cells`` (20000), ``fallback`` (``none``: refuse a model above ``max_cells``; ``dnc``:
divide and conquer it), ``part_ops`` (DnC part size, 40).

Status: ``optimal`` when CP-SAT proved the model optimal (for ``cosma-fs``/``cosma-mpmf``:
optimal for that schedule); ``feasible`` for narrowed windows or DnC; ``timed_out`` with the
solver's bound (``ctx.bound``) when the time limit stopped a solve; if the solver finds
nothing better, the warm start is returned.

The package: this module (the four planners and their registration), ``problem`` (one part
of a graph and the state of its tensors), ``overlap`` (op windows and the pairs that can
coexist), ``model`` (the CP-SAT model of a part), ``warm`` (the online warm start), ``dnc``
(break nodes and solving part by part) and ``plan`` (from part solutions to a Plan).
"""

from __future__ import annotations

import time

from npusim.errors import PlanningError
from npusim.graph.analysis import min_required
from npusim.graph.model import Graph
from planners.alloc.prefetch import PREFETCH_OPTIONS, hoist_loads, prefetch_depth
from planners.joint.cosma import memo
from planners.joint.cosma.dnc import (DEFAULT_MAX_CELLS, DEFAULT_PART_OPS, SequenceResult, choose_cuts,
                                      crossing_bytes, solve_sequence)
from planners.joint.cosma.model import DEFAULT_OVERLAP, OVERLAP_ENCODINGS
from planners.joint.cosma.overlap import analyse
from planners.joint.cosma.plan import assemble, weight_region
from planners.joint.cosma.problem import make_part, planned_tensors
from npusim.planner_options import Option
from planners.schedule.greedy import best_heuristic_order, greedy_order, reverse_post_order
from planners.schedule.op_level import is_tiled, tiles_of_ops
from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import SolverOptions, solver_options
from planners.schedule.zhong.planner import ZHONG_OPTIONS, zhong_schedule


#: ``fallback`` option of ``cosma``: what to do with a model above ``max_cells``.
FALLBACKS = ("none", "dnc")

#: What every COSMA planner reads besides the solver's and prefetching's options.
COSMA_OPTIONS = (
    Option("params", "bool", True, "place weights too (false: activations only, weights streamed through a "
           "parameter buffer at the top of the scratchpad)"),
    Option("overlap", "choice", DEFAULT_OVERLAP, "how the model keeps coexisting tensors apart",
           choices=OVERLAP_ENCODINGS),
    Option("max_cells", "int", DEFAULT_MAX_CELLS, "largest exact model, in (tensor, step) cells", minimum=1),
)
PART_OPS = Option("part_ops", "int", DEFAULT_PART_OPS, "ops per part of divide and conquer", unit="ops", minimum=2)
FALLBACK = Option("fallback", "choice", "none", "a model above max_cells: refuse (none) or divide and conquer it "
                  "(dnc)", choices=FALLBACKS)


def activation_budget(graph: Graph, capacity: int, align: int, params: bool) -> tuple[int, int]:
    """(bytes for the ILP's tensors, start of the parameter buffer) of a budget."""
    if params:
        return capacity, capacity
    region = weight_region(graph, align)
    act = capacity - region
    act_graph_need = max((sum(int(-(-graph.tensors[t].size // align) * align) for t in op.tensors
                              if graph.tensors[t].kind != "weight") for op in graph.ops), default=0)
    if act < act_graph_need:
        raise PlanningError(
            f"cosma (params=false): budget {capacity} B leaves {act} B for activations after the "
            f"{region} B parameter buffer, below the {act_graph_need} B one op's activations need")
    return act, act


def candidate_orders(graph: Graph, align: int) -> list[list[int]]:
    problem = MemoryProblem.from_graph(graph, align)
    orders = [list(range(graph.n_ops)), problem.expand(reverse_post_order(problem)),
              problem.expand(best_heuristic_order(problem)[0]), problem.expand(greedy_order(problem))]
    return [o for i, o in enumerate(orders) if o not in orders[:i]]


def op_level_orders(ctx, orders_of) -> list[list[int]]:
    """``orders_of(graph)``: orders of a graph's ops. On a tiled graph they are computed on the
    op-level graph and each op's tiles follow it in tiling order (``planners.schedule.op_level``):
    an order of tiles must respect their DRAM dependencies, which the memory heuristics
    (``MemoryProblem``) do not see."""
    if not is_tiled(ctx):
        return orders_of(ctx.graph)
    members = tiles_of_ops(ctx.graph, ctx.untiled)
    return [[tile for op in order for tile in members[op]] for order in orders_of(ctx.untiled)]


def mpmf_order(graph: Graph, align: int, options: dict) -> list[int]:
    problem = MemoryProblem.from_graph(graph, align)
    return problem.expand(zhong_schedule(problem, options)["order"])


class _CosmaBase:
    stage = "joint"
    reads = ("graph", "untiled", "order", "capacity", "alignment", "options", "prefetch_depth", "progress")
    writes = ("order", "residencies", "transfers", "status", "objective", "bound", "scope", "stats")
    options = (*solver_options(), *PREFETCH_OPTIONS, *COSMA_OPTIONS)

    def run(self, ctx) -> None:
        graph, align = ctx.graph, ctx.alignment
        need, op = min_required(graph, align)
        if ctx.capacity < need:
            raise PlanningError(f"{self.name}: budget {ctx.capacity} B is below M_R = {need} B, the working set "
                                f"of op {graph.ops[op].name!r}; use a budget >= {need} B")
        params, overlap = ctx.options["params"], ctx.options["overlap"]
        opts = SolverOptions.from_options(ctx.options)
        cap, weight_base = activation_budget(graph, ctx.capacity, align, params)
        result = self.solve(ctx, graph, cap, align, params, opts, overlap)
        order, residencies, transfers = assemble(graph, result.solved, align, params=params, weight_base=weight_base)
        # the model loads at a reader's step (the paper's): run loads ahead into free space
        residencies, transfers = hoist_loads(graph, residencies, transfers, prefetch_depth(ctx),
                                             ctx.capacity)
        ctx.order, ctx.residencies, ctx.transfers = order, residencies, transfers
        ctx.status = result.status
        ctx.objective = float(result.objective)
        ctx.bound = float(result.bound)
        ctx.scope = self.scope(result)  # replaces a scheduler's claim: the status is now COSMA's
        ctx.stats = result.stats

    #: what the status refers to beyond the spill + retrieve bytes (e.g. an order fixed before)
    problem = ""

    def scope(self, result: SequenceResult) -> str:
        """Which problem the status and bound are about, when not COSMA's whole one: the
        planner's ``problem`` and, for a plan stitched from parts, how many there were and
        how many stopped at their share of the time limit. Empty when nothing beyond the
        compulsory bytes moves (optimal outright)."""
        if result.objective == 0:
            return ""
        said = [self.problem] if self.problem else []
        parts = result.stats.get("part_statuses", [])
        if len(parts) > 1:
            stopped = parts.count("timed_out")
            said.append(f"{len(parts)} parts solved one after another and stitched"
                        + (f", {stopped} stopped at their share of the time limit" if stopped else ""))
        return "spill + retrieve bytes " + "; ".join(said) if said else ""

    def solve(self, ctx, graph, cap, align, params, opts, overlap) -> SequenceResult:
        raise NotImplementedError


class Cosma(_CosmaBase):
    name = "cosma"
    description = "COSMA ILP: order, addresses and replacement minimising spill + retrieve bytes"
    options = (*_CosmaBase.options, FALLBACK, PART_OPS)

    def solve(self, ctx, graph, cap, align, params, opts, overlap):
        max_cells, fallback = ctx.options["max_cells"], ctx.options["fallback"]
        part = make_part(graph, list(range(graph.n_ops)), cap, align, params)
        cells = analyse(part).cells()
        if cells > max_cells:  # too big for one exact model: refuse, unless asked to divide and conquer
            if fallback != "dnc":
                raise PlanningError(
                    f"cosma: the exact model of {graph.name!r} would have {cells:,} (tensor, step) cells, above "
                    f"the limit max_cells = {max_cells:,}; use 'cosma-dnc' (divide and conquer) or a scheme "
                    f"heuristic such as 'default+arena+belady', raise the limit with --option max_cells=N, "
                    f"or let cosma divide and conquer it with --option fallback=dnc")
            result = CosmaDivideAndConquer().solve(ctx, graph, cap, align, params, opts, overlap)
            result.stats["fallback"] = (f"cosma-dnc: the model had {cells} (tensor, step) cells, above "
                                        f"max_cells={max_cells}")
            return result
        orders = op_level_orders(ctx, lambda g: candidate_orders(g, align))
        return solve_sequence(graph, [orders[0]], cap, align, params, opts, overlap=overlap,
                              max_cells=max_cells, extra_orders=orders[1:])


class CosmaFixedSchedule(_CosmaBase):
    name = "cosma-fs"
    decides = ("streams", "spill", "alloc")  # the order comes from the pipeline's schedule stage
    description = "COSMA-FS: optimal addresses and replacement for the pipeline's schedule (eq. 16-17)"
    problem = "for the schedule given to it"

    def solve(self, ctx, graph, cap, align, params, opts, overlap):
        order = list(ctx.order) if ctx.order is not None else list(range(graph.n_ops))
        return solve_fixed_order(ctx, graph, order, cap, align, params, opts, overlap, self.name)


class CosmaMPMF(_CosmaBase):
    name = "cosma-mpmf"
    description = "COSMA-MPMF: minimum-peak schedule (zhong), then COSMA-FS for it"
    options = (*_CosmaBase.options, *ZHONG_OPTIONS)
    problem = "for its minimum-peak schedule"

    def solve(self, ctx, graph, cap, align, params, opts, overlap):
        start = time.perf_counter()
        order = op_level_orders(ctx, lambda g: [mpmf_order(g, align, dict(ctx.options, time_limit=opts.time_limit / 2))])[0]
        # deterministic time: a fixed half for each solve; wall time: what is left
        left = opts.with_limit(opts.time_limit / 2 if opts.deterministic
                               else opts.time_limit - (time.perf_counter() - start))
        return solve_fixed_order(ctx, graph, order, cap, align, params, left, overlap, self.name)


def solve_fixed_order(ctx, graph: Graph, order: list[int], cap: int, align: int, params: bool,
                      opts: SolverOptions, overlap: str, planner: str) -> SequenceResult:
    """The FS ILP for ``order``: one model, or parts of the order when one model would exceed
    ``max_cells`` (tensor, step) cells. Parts hold about ``max_cells`` cells each and end where
    the fewest live bytes cross (``choose_cuts``), so a tiled graph's 20 k-step order never
    builds a model of millions of variables (gigabytes inside CP-SAT)."""
    max_cells = ctx.options["max_cells"]
    whole = make_part(graph, order, cap, align, params)
    cells = analyse(whole, list(range(whole.steps)), fixed=True).cells()
    if cells <= max_cells:
        return solve_sequence(graph, [order], cap, align, params, opts, fixed=True, overlap=overlap)
    part_ops = max(2, len(order) * max_cells // cells)
    cut = crossing_bytes(graph, order, set(planned_tensors(graph, params)))
    ends = choose_cuts(cut, len(order), part_ops)
    segments = [order[a:b] for a, b in zip([0] + ends[:-1], ends)]
    result = solve_sequence(graph, segments, cap, align, params, opts, fixed=True, overlap=overlap)
    result.stats["split"] = (f"{planner}: the fixed-order model had {cells:,} (tensor, step) cells, above "
                             f"max_cells={max_cells:,}: solved in {len(segments)} parts")
    return result


class CosmaDivideAndConquer(_CosmaBase):
    name = "cosma-dnc"
    description = "COSMA divide and conquer: automatic break nodes, exact parts, stitched"
    options = (*_CosmaBase.options, PART_OPS)
    problem = "with ops kept within their parts"

    def solve(self, ctx, graph, cap, align, params, opts, overlap):
        # cosma's fallback runs this very solve: kept, when deterministic, for a second ask
        key = memo.memo_key(ctx, graph, opts, cap, align, params, overlap, ctx.options["part_ops"],
                            ctx.options["max_cells"])
        return memo.solved(key, lambda: self._solve(ctx, graph, cap, align, params, opts, overlap))

    def _solve(self, ctx, graph, cap, align, params, opts, overlap):
        start = time.perf_counter()
        part_ops = ctx.options["part_ops"]
        order = list(ctx.order) if ctx.order is not None else op_level_orders(
            ctx, lambda g: [best_order_for_dnc(g, align)])[0]
        if not opts.deterministic:  # wall time: the parts get what the order left
            opts = opts.with_limit(max(opts.time_limit - (time.perf_counter() - start), 0.0))
        cut = crossing_bytes(graph, order, set(planned_tensors(graph, params)))
        ends = choose_cuts(cut, len(order), part_ops)
        segments = [order[a:b] for a, b in zip([0] + ends[:-1], ends)]
        max_cells = ctx.options["max_cells"]
        result = solve_sequence(graph, segments, cap, align, params, opts, overlap=overlap, max_cells=max_cells)
        result.stats["break_nodes"] = [graph.ops[order[e - 1]].name for e in ends[:-1]]
        return result


def best_order_for_dnc(graph: Graph, align: int) -> list[int]:
    """The order parts are cut from: the lowest-peak of the cheap heuristics."""
    problem = MemoryProblem.from_graph(graph, align)
    return problem.expand(best_heuristic_order(problem)[0])


def cosma_planners() -> list:
    return [Cosma(), CosmaFixedSchedule(), CosmaMPMF(), CosmaDivideAndConquer()]
