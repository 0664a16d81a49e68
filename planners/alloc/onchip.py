"""The on-chip allocation stage: one offset assignment for a whole schedule, no eviction.

Every tensor stays resident from its first to its last use in the plan's order (lifetimes
from ``npusim.graph.analysis``); inputs and weights are loaded at their first use (cause
``compulsory``), graph outputs written back right after they are produced (``writeback``).
Which tensors may share addresses: lifetime overlap for one stream; for several streams, the
unsafe pairs of the multi-stream safety analysis (``npusim.plan.safety``, MindSpore paper
Section 3). Offsets come from any algorithm on the generic ``OffsetProblem``.

If the footprint exceeds the budget the stage raises ``PlanningError`` "does not fit: needs N
bytes, budget M", so a pipeline with a spill stage can be used instead.
"""

from __future__ import annotations

import numpy as np

from npusim.errors import PlanningError
from npusim.graph.analysis import aligned, default_order, lifetimes
from npusim.plan.model import Residency, Transfer
from npusim.plan.safety import METHODS, safety_relation
from planners.alloc import naive, shared_objects, tflite
from npusim.util.lazy_import import lazy_import
from planners.alloc import mindspore
from planners.alloc.exact import exact_offsets
from planners.alloc.prefetch import PREFETCH_OPTIONS, hoist_loads, prefetch_depth
from planners.alloc.problem import MatrixConflicts, OffsetProblem, OffsetResult
from planners.schedule.solver import SolverOptions, solver_options
from npusim.planner_options import Option

mindspore_kernels = lazy_import("planners.alloc.mindspore.kernels")  # Numba: loaded when a MindSpore allocator runs


def graph_problem(graph, order, streams=None, alignment: int = 1, safety_method: str = "alg2"):
    """(problem, tensor id of each item): the tensors some op touches, sizes aligned.

    With more than one distinct stream the conflicts are the multi-stream unsafe pairs;
    lifetimes in ``order`` are kept either way (for the sorts and the lifetime bound).
    """
    life = lifetimes(graph, order)
    items = np.flatnonzero(life.first >= 0)
    sizes = aligned(graph.arrays.tensor_size[items], alignment)
    conflicts = None
    if streams is not None and len(set(int(s) for s in streams)) > 1:
        relation = safety_relation(graph, order, streams, safety_method)
        conflicts = MatrixConflicts(relation.restrict(items))
    problem = OffsetProblem(sizes=sizes, first=life.first[items], last=life.last[items], conflicts=conflicts,
                            alignment=alignment, names=tuple(graph.tensors[t].name for t in items))
    return problem, items


BASELINES = {
    "naive": naive.naive,
    "tflite-arena": tflite.tflite_arena,
    "tflm-greedy": tflite.tflm_greedy,
    "so-size": shared_objects.greedy_by_size,
    "so-breadth": shared_objects.greedy_by_breadth,
    "so-size-improved": shared_objects.greedy_by_size_improved,
}


def _solver(name: str):
    """The offset algorithm of a registered planner name."""
    if name in BASELINES:
        return BASELINES[name]
    family, _, opts = name.partition(":")
    if family in ("mindspore-so", "mindspore-mo") and opts:
        sort, _, fitter = opts.partition(",")
        algo = "single_object" if family == "mindspore-so" else "many_objects"  # looked up when it runs
        return lambda problem: getattr(mindspore_kernels, algo)(problem, sort, fitter)
    if name == "exact-offsets":
        return exact_offsets
    raise PlanningError(f"no offset algorithm is named {name!r}")


class OnChipAllocator:
    """A pipeline ``alloc`` stage placing every tensor once for its whole lifetime."""

    stage = "alloc"
    reads = ("graph", "order", "streams", "capacity", "alignment", "options", "prefetch_depth", "tiling", "hw")
    writes = ("order", "residencies", "transfers", "objective", "bound", "status")

    def __init__(self, name: str, description: str):
        self.name = name
        self.description = description
        self._solve = _solver(name)
        self.options = (*PREFETCH_OPTIONS, Option("safety", "choice", "alg2", "how the safety relation of "
                                                  "several streams is computed (npusim.plan.safety)", choices=METHODS))
        if name == "exact-offsets":
            self.options += solver_options(time_limit=10.0)

    def run(self, ctx) -> None:
        graph = ctx.graph
        order = ctx.order if ctx.order is not None else default_order(graph)
        streams = ctx.streams if ctx.streams is not None else [0] * graph.n_ops
        problem, items = graph_problem(graph, order, streams, ctx.alignment,
                                       ctx.options["safety"])
        if self.name == "exact-offsets":
            opts = SolverOptions.from_options(ctx.options)
            result = self._solve(problem, time_limit=opts.time_limit, workers=opts.workers, seed=opts.seed,
                                 deterministic=opts.deterministic, max_variables=opts.max_variables,
                                 max_constraints=opts.max_constraints, wall_guard=opts.wall_guard)
        else:
            result = self._solve(problem)
        if result.total > ctx.capacity:
            several = len(set(streams)) > 1
            if ctx.tiling:  # a larger budget makes larger tiles, which need more again
                more = "a larger budget makes larger tiles (that need more)"
            elif result.total <= ctx.hw.scratchpad.size:
                more = f"raise the budget to {result.total:,} B"
            else:
                more = f"model a scratchpad of that size (--set scratchpad.size={result.total}B)"
            raise PlanningError(
                f"{self.name}: does not fit: needs {result.total:,} B, budget {ctx.capacity:,} B (lifetime bound "
                f"{result.bound:,} B); it keeps every tensor on chip for its whole lifetime and never spills: "
                f"{more}{' (or use fewer streams)' if several else ''}, or use "
                f"{'one stream with ' if several else ''}the arena allocator, which spills: "
                f"{'tile+' if ctx.tiling else ''}default+arena+belady")
        ctx.order = list(order)
        residencies, transfers = residencies_and_transfers(graph, order, problem, items, result)
        ctx.residencies, ctx.transfers = hoist_loads(graph, residencies, transfers,
                                                     prefetch_depth(ctx), ctx.capacity, streams)
        ctx.objective = float(result.total)
        ctx.bound = float(result.bound)
        ctx.status = result.status


def residencies_and_transfers(graph, order, problem: OffsetProblem, items, result: OffsetResult):
    residencies = [Residency(first=int(problem.first[k]), last=int(problem.last[k]), offset=int(result.offsets[k]),
                             tensor=t, size=int(problem.sizes[k]))
                   for k, t in enumerate(items.tolist())]
    return residencies, lifetime_transfers(graph, order, residencies)


def lifetime_transfers(graph, order, residencies) -> list[Transfer]:
    """The transfers of a plan that keeps each tensor resident over its whole lifetime (one
    residency each): inputs and weights loaded at their first use (``compulsory``), graph
    outputs written back right after they are produced (``writeback``); on a tiled graph, a
    tile other tiles read back from DRAM (``Graph.dram_sources``) stored right after it is
    produced (``spill``) and a read view of such tiles loaded at its first use
    (``retrieve``), as the arena allocator does."""
    transfers = []
    step_of = {op: s for s, op in enumerate(order)}  # not order.index() per output: O(n^2) on 50k ops
    through_dram = graph.dram_sources
    for res in residencies:
        tensor = graph.tensors[res.tensor]
        if tensor.in_dram_initially:
            transfers.append(Transfer(step=res.first, kind="load", tensor=res.tensor, cause="compulsory",
                                      size=tensor.size))
        elif tensor.sources:
            transfers.append(Transfer(step=res.first, kind="load", tensor=res.tensor, cause="retrieve",
                                      size=tensor.size))
        if tensor.kind == "output" or res.tensor in through_dram:
            cause = "writeback" if tensor.kind == "output" else "spill"
            transfers.append(Transfer(step=step_of[tensor.producer], kind="store", tensor=res.tensor, cause=cause,
                                      size=tensor.size))
    return transfers


def planners() -> list[OnChipAllocator]:
    """Every on-chip allocation stage, for ``planners.register``."""
    found = [
        OnChipAllocator("naive", "no reuse: every tensor its own addresses (upper reference)"),
        OnChipAllocator("tflite-arena", "TFLite arena order: largest first, ties by first use, best fit"),
        OnChipAllocator("tflm-greedy", "TFLite-Micro greedy: largest first, first fit"),
        OnChipAllocator("so-size", "Shared Objects, greedy by size (Pisarchyk & Lee 2020)"),
        OnChipAllocator("so-breadth", "Shared Objects, greedy by breadth (Pisarchyk & Lee 2020)"),
        OnChipAllocator("so-size-improved", "Shared Objects, greedy by size with distance priority"),
        OnChipAllocator("exact-offsets", "CP-SAT offsets seeded by the best heuristic (time_limit option)"),
    ]
    order = {"breadth": "by breadth", "size": "by size", "source": "by first use",
             "unsafe": "by unsafe-pair count"}  # the MindSpore paper's sort keys
    for family, label in (("mindspore-so", "Single Object"), ("mindspore-mo", "Many Objects")):
        for sort in mindspore.SORTS:
            for fitter in mindspore.FITS:
                found.append(OnChipAllocator(f"{family}:{sort},{fitter}",
                                             f"MindSpore {label}, greedy {order[sort]}, {fitter} (multi-stream safe)"))
    return found
