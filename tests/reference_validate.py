"""The plan validator as it was before its fast paths (npusim.plan.validate at cf11d03), kept
verbatim as a readable reference for ``tests/test_validate_reference.py``: an address sweep
over the live residencies, an index array per tile view, every message formatted up front.
Do not import it from npusim; do not speed it up.

``validate(plan, graph)`` re-derives everything from the plan and the graph, trusting no
planner, and returns *every* violation found (an empty list means the plan is valid):

==================  ==========================================================================
kind                meaning
==================  ==========================================================================
order               ``order`` is not a topological permutation of the ops
streams             the stream list does not cover every op, or a stream is negative
range               a residency or transfer names a step outside the order
size                a residency is smaller than its tensor
capacity            a residency starts below offset 0 or reaches past the scratchpad capacity
alignment           a residency's offset is not a multiple of the alignment
overlap             two residencies that coexist in time share addresses
double_residency    two residencies of one tensor hold the same step (one copy at a time)
empty_residency     a residency that is never filled (neither produced nor loaded into)
not_resident        an op's input or output has no residency at the op's step
not_ready           an op reads a residency before its data arrives
load_without_copy   a load of data that does not exist in DRAM (not an input/weight, never stored;
                    for a tile read from DRAM: one of its source tiles not stored before)
transfer_residency  a transfer whose tensor has no residency at its step
duplicate_transfer  a residency loaded more than once, or a tensor stored twice at one step
cause               a transfer's cause does not match what it does
not_written_back    a graph output never reaches DRAM
tiling              the tiles of an op do not write its output exactly once, or a tile's input
                    views miss part of what it reads (halos included)
dram                a DRAM layout (``plan.dram``, keyed by buffer: ``npusim.plan.dram``) names
                    no buffer of the graph, has a negative offset, or misses a buffer some
                    transfer moves (whether live DRAM data is overwritten is checked by the
                    simulator's DRAM tracker, ``npusim.sim.dram_memory``)
fusion              a fused chain (``plan.fusion``) names an op that is not a GEMM-like op or
                    not an element-wise epilogue, or fuses away a tensor another op reads
                    (``npusim.graph.fusion``); nothing else is checked then
==================  ==========================================================================

Several streams: steps of different streams do not order ops in time, so residencies on
different streams can coexist even if their steps do not overlap; the overlap check then also
keeps apart every unsafe pair of the multi-stream safety relation (``npusim.plan.safety``,
MindSpore paper Section 3).

Each kind has a check function of its own (``_check_<kind>``, or the function whose docstring
names it); ``validate`` runs them item by item in a fixed order, so the same plan always gets
the same violations in the same order.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from npusim.errors import InternalError, PlanError
from npusim.graph.analysis import check_order, step_of
from npusim.graph.model import Graph
from npusim.graph.regions import RESHAPE_LIKE, input_boxes, input_steps
from npusim.plan.dram import buffer_of, known_buffers
from npusim.plan.model import Plan
from npusim.plan.bound import BindError, as_bound


@dataclass(frozen=True)
class Violation:
    kind: str
    message: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


def validate(plan: Plan, graph: Graph | None = None) -> list[Violation]:
    """Every rule the plan breaks (``graph``: only for a plan not bound to its graph yet)."""
    found: list[Violation] = []

    def report(kind: str, message: str) -> None:
        found.append(Violation(kind, message))

    try:
        plan = as_bound(plan, graph)
    except BindError as exc:  # the graph the plan refers to cannot be built
        for problem in exc.problems:
            report(exc.kind, problem)
        return found
    graph = plan.bound_graph
    if plan.tiling:
        check_tiling(plan.base_graph, graph, report)
    if not _check_order(plan, graph, report):
        return found  # steps are meaningless without a valid order
    _check_streams(plan, graph, report)
    name = lambda t: graph.tensors[t].name  # noqa: E731
    for tr in plan.transfers:  # size: a transfer moves its tensor's bytes
        if 0 <= tr.tensor < graph.n_tensors and tr.size != graph.tensors[tr.tensor].size:
            report("size", f"{tr.kind} of {name(tr.tensor)!r} at step {tr.step}: size {tr.size} B, expected its "
                           f"tensor's {graph.tensors[tr.tensor].size} B")
    residencies = [r for r in plan.residencies if _known_tensor(r.tensor, graph, "residency", report)]
    by_tensor = _check_residencies(plan, graph, residencies, name, report)
    _check_overlaps(residencies, name, report, plan, graph)
    _check_one_copy(by_tensor, name, report)
    loads, stores = _transfers_by_tensor(plan, graph, name, report)
    residency_at = ResidencyIndex(by_tensor)
    fill = _check_filled(plan, graph, by_tensor, loads, name, report)
    _check_operands(plan, graph, residency_at, fill, name, report)
    first_store = {t: min(tr.step for tr in trs) for t, trs in stores.items() if trs}
    for t, trs in loads.items():
        _check_loads(graph.tensors[t], trs, first_store, residency_at, name, report)
    for t, trs in stores.items():
        _check_stores(graph.tensors[t], trs, residency_at, fill, name, report)
    _check_written_back(graph, stores, report)
    if plan.dram:
        _check_dram(plan, graph, report)
    return found


# Each check below reports one kind of violation (``report(kind, message)``); ``validate`` runs
# them in a fixed order, item by item where one item can break several rules.

def _check_one_copy(by_tensor: dict, name, report) -> None:
    """double_residency: a tensor has one copy on chip at a time, so two of its residencies
    never hold one step (else a load, a read or a store of it names no single residency: the
    validator and the lowering could pick different ones, the simulator then finds a race)."""
    for t, rs in by_tensor.items():
        if len(rs) < 2:
            continue
        ordered = sorted((r for r in rs if r.first <= r.last), key=lambda r: (r.first, r.last))
        # sorted by first step, some two coexist only if two neighbours do
        pair = next(((a, b) for a, b in zip(ordered, ordered[1:]) if a.last >= b.first), None)
        if pair is not None:
            a, b = pair
            report("double_residency",
                   f"tensor {name(t)!r} has two residencies at step {b.first}: steps {a.first}..{a.last} at "
                   f"offset {a.offset} and steps {b.first}..{b.last} at offset {b.offset}; expected one copy at a time")


def _check_order(plan: Plan, graph: Graph, report) -> bool:
    """order: the plan's order is a topological permutation of the ops."""
    try:
        check_order(graph, list(plan.order))
    except PlanError as exc:
        report("order", str(exc))
        return False
    return True


def _check_streams(plan: Plan, graph: Graph, report) -> None:
    """streams: one stream >= 0 per op."""
    if len(plan.streams) != graph.n_ops:
        report("streams", f"streams lists {len(plan.streams)} entries; expected a stream >= 0 for "
                          f"each of the {graph.n_ops} ops")
    for op, s in zip(graph.ops, plan.streams):
        if s < 0:
            report("streams", f"op {op.name!r}: stream {s} is negative, expected >= 0")


def _check_residencies(plan: Plan, graph: Graph, residencies, name, report) -> dict[int, list]:
    """range, size, capacity and alignment of each residency, in plan order; returns the
    residencies within the plan's steps by tensor."""
    by_tensor = defaultdict(list)
    for r in residencies:
        where = f"residency of {name(r.tensor)!r} at [{r.offset}, {r.offset + r.size}) steps {r.first}..{r.last}"
        if not _check_residency_range(r, plan.n_steps, where, report):
            continue
        _check_size(r, graph.tensors[r.tensor].size, where, report)
        _check_capacity(r, plan.capacity, where, report)
        _check_alignment(r, plan.alignment, where, report)
        by_tensor[r.tensor].append(r)
    return by_tensor


def _check_residency_range(r, n: int, where: str, report) -> bool:
    """range: a residency's steps lie within the order."""
    if not (0 <= r.first <= r.last < n):
        report("range", f"{where}: steps must satisfy 0 <= first <= last < {n}")
        return False
    return True


def _check_size(r, tensor_size: int, where: str, report) -> None:
    """size: a residency holds its whole tensor."""
    if r.size < tensor_size:
        report("size", f"{where}: size {r.size} < tensor size {tensor_size}")


def _check_capacity(r, capacity: int, where: str, report) -> None:
    """capacity: a residency lies within the scratchpad."""
    if r.offset < 0:
        report("capacity", f"{where}: offset {r.offset} < 0, before the start of the scratchpad")
    if r.offset + r.size > capacity:
        report("capacity", f"{where}: ends at {r.offset + r.size} > capacity {capacity}")


def _check_alignment(r, alignment: int, where: str, report) -> None:
    """alignment: a residency starts at a multiple of the alignment."""
    if r.offset % alignment:
        report("alignment", f"{where}: offset {r.offset} is not a multiple of {alignment}")


def _transfers_by_tensor(plan: Plan, graph: Graph, name, report) -> tuple[dict, dict]:
    """Loads and stores by tensor, leaving out (and reporting) transfers of an unknown tensor
    (range), of another kind (cause) or outside the plan's steps (range)."""
    loads, stores = defaultdict(list), defaultdict(list)
    for tr in plan.transfers:
        if not _known_tensor(tr.tensor, graph, tr.kind, report):
            continue
        if tr.kind not in ("load", "store"):
            report("cause", f"transfer of {name(tr.tensor)!r} at step {tr.step}: kind {tr.kind!r}, expected load or store")
            continue
        if not 0 <= tr.step < plan.n_steps:
            report("range", f"{tr.kind} of {name(tr.tensor)!r} at step {tr.step}: outside 0..{plan.n_steps - 1}")
            continue
        if graph.tensors[tr.tensor].kind == "accumulator":
            report("cause", f"{tr.kind} of {name(tr.tensor)!r} at step {tr.step}: partial sums held in a core's "
                            "accumulators cannot be moved by DMA")
            continue
        (loads if tr.kind == "load" else stores)[tr.tensor].append(tr)
    return loads, stores


class ResidencyIndex:
    """``index(t, s)``: the residency of tensor ``t`` that holds step ``s`` (the first such in
    plan order), or None. A tensor whose residencies are disjoint in steps (every valid plan's)
    is searched by bisection, so a weight loaded by thousands of tiles costs no scan per read;
    overlapping ones (an invalid plan) are scanned in plan order."""

    def __init__(self, by_tensor: dict[int, list]):
        self.by_tensor = by_tensor
        self.sorted: dict[int, tuple[list[int], list]] = {}
        for t, rs in by_tensor.items():
            ordered = sorted(rs, key=lambda r: r.first)
            if all(a.last < b.first for a, b in zip(ordered, ordered[1:])):
                self.sorted[t] = ([r.first for r in ordered], ordered)

    def __call__(self, t: int, s: int):
        found = self.sorted.get(t)
        if found is None:
            return next((r for r in self.by_tensor.get(t, ()) if r.first <= s <= r.last), None)
        firsts, ordered = found
        i = bisect.bisect_right(firsts, s) - 1
        return ordered[i] if i >= 0 and ordered[i].last >= s else None


def _check_filled(plan: Plan, graph: Graph, by_tensor, loads, name, report) -> dict:
    """empty_residency: every residency is filled, by its producer or a load within it.
    Returns residency -> the step its data is valid from."""
    step = step_of(list(plan.order))
    fill = {}
    for t, rs in by_tensor.items():
        tensor = graph.tensors[t]
        p = None if tensor.producer is None else int(step[tensor.producer])
        load_steps = sorted(tr.step for tr in loads.get(t, ()))
        for r in rs:
            i = bisect.bisect_left(load_steps, r.first)  # the first load within the residency, if any
            candidates = [load_steps[i]] if i < len(load_steps) and load_steps[i] <= r.last else []
            if p is not None and r.first <= p <= r.last:
                candidates.append(p)
            if candidates:
                fill[r] = min(candidates)
            elif r.first <= r.last:
                report("empty_residency",
                       f"residency of {name(t)!r} at offset {r.offset}, steps {r.first}..{r.last}: "
                       "never filled (not produced or loaded within it)")
    return fill


def _check_operands(plan: Plan, graph: Graph, residency_at, fill, name, report) -> None:
    """not_resident, not_ready: at its step, an op's inputs are resident and filled, and its
    outputs have a residency."""
    for s, op_id in enumerate(plan.order):
        op = graph.ops[op_id]
        for t in dict.fromkeys(op.inputs):
            r = residency_at(t, s)
            if r is None:
                report("not_resident", f"op {op.name!r} at step {s}: input {name(t)!r} is not resident")
            else:
                _check_ready(r, fill, s, f"op {op.name!r} at step {s}: input {name(t)!r}", report)
        for t in op.outputs:
            if residency_at(t, s) is None:
                report("not_resident", f"op {op.name!r} at step {s}: output {name(t)!r} has no residency")


def _check_ready(r, fill, s: int, what: str, report) -> None:
    """not_ready: a residency read at step ``s`` is filled by then."""
    if r in fill and fill[r] > s:
        report("not_ready", f"{what} arrives only at step {fill[r]}")


def _check_loads(tensor, trs, first_store, residency_at, name, report) -> None:
    """duplicate_transfer (one load per residency), then for each load: transfer_residency,
    load_without_copy and cause."""
    if not trs:
        return
    _check_one_load_per_residency(tensor, trs, residency_at, name, report)
    first_load = min(tr.step for tr in trs)
    for tr in trs:
        where = f"load of {name(tensor.id)!r} at step {tr.step}"
        if residency_at(tensor.id, tr.step) is None:
            report("transfer_residency", f"{where}: the tensor has no residency to load into")
        _check_cause(tr, _load_cause(tensor, tr, first_load, first_store, where, name, report), where, report)


def _check_one_load_per_residency(tensor, trs, residency_at, name, report) -> None:
    """duplicate_transfer: a residency is filled once; a second load into it writes the same
    bytes again, racing with the first and with the ops reading them."""
    into = defaultdict(list)
    for tr in trs:
        into[residency_at(tensor.id, tr.step)].append(tr.step)
    for r, steps in into.items():
        if r is not None and len(steps) > 1:
            report("duplicate_transfer", f"{name(tensor.id)!r} is loaded {len(steps)} times (steps "
                                         f"{', '.join(map(str, sorted(steps)))}) into its residency at offset "
                                         f"{r.offset}, steps {r.first}..{r.last}; expected one load per residency")


def _load_cause(tensor, tr, first_load: int, first_store: dict, where: str, name, report) -> str:
    """load_without_copy: a load reads data that is in DRAM (an input or weight, or stored
    before; a tile read from DRAM: every tile it is read from stored before; ``first_store``:
    tensor -> the step of its first store). Returns the cause the load should give."""
    if tensor.in_dram_initially:
        return "compulsory" if tr.step == first_load else "retrieve"
    if tensor.sources:
        for src in tensor.sources:
            if not first_store.get(src, tr.step) < tr.step:
                report("load_without_copy", f"{where}: its source {name(src)!r} was not stored to DRAM before")
    elif not first_store.get(tensor.id, tr.step) < tr.step:
        report("load_without_copy", f"{where}: {name(tensor.id)!r} was never stored to DRAM before")
    return "retrieve"


def _check_cause(tr, expected: str, where: str, report) -> None:
    """cause: a transfer gives the cause of what it does."""
    if tr.cause != expected:
        report("cause", f"{where}: cause {tr.cause!r}, expected {expected!r}")


def _check_stores(tensor, trs, residency_at, fill, name, report) -> None:
    """duplicate_transfer (one store per step), then for each store: transfer_residency or
    not_ready, and cause."""
    twice = sorted(step for step, count in Counter(tr.step for tr in trs).items() if count > 1)
    if twice:
        report("duplicate_transfer", f"{name(tensor.id)!r} is stored more than once at step(s) "
                                     f"{', '.join(map(str, twice))}; expected one store per step")
    for tr in trs:
        where = f"store of {name(tensor.id)!r} at step {tr.step}"
        r = residency_at(tensor.id, tr.step)
        if r is None:
            report("transfer_residency", f"{where}: the tensor is not resident to store from")
        else:
            _check_ready(r, fill, tr.step, f"{where}: the data", report)
        expected = {"output": "writeback", "activation": "spill"}.get(tensor.kind)
        if expected is None:
            report("cause", f"{where}: {tensor.kind} tensors are already in DRAM")
        else:
            _check_cause(tr, expected, where, report)


def _check_written_back(graph: Graph, stores, report) -> None:
    """not_written_back: every graph output reaches DRAM."""
    for tensor in graph.tensors:
        if tensor.kind == "output" and not any(tr.cause == "writeback" for tr in stores.get(tensor.id, ())):
            report("not_written_back", f"graph output {tensor.name!r} is never written back to DRAM")


def _check_dram(plan: Plan, graph: Graph, report) -> None:
    known = known_buffers(graph)
    for buffer, offset in sorted(plan.dram.items()):
        if buffer not in known:
            report("dram", f"dram[{buffer!r}]: no tensor or tile base of graph {graph.name!r} has that name")
        elif not isinstance(offset, int) or offset < 0:
            report("dram", f"dram[{buffer!r}]: offset {offset!r}, expected an integer >= 0")
    missing = {}  # buffer -> first transfer moving it
    for tr in plan.transfers:
        if 0 <= tr.tensor < graph.n_tensors:
            buffer = buffer_of(graph.tensors[tr.tensor])
            if buffer not in plan.dram:
                missing.setdefault(buffer, tr)
    for buffer, tr in missing.items():
        report("dram", f"{tr.kind} of {graph.tensors[tr.tensor].name!r} at step {tr.step}: its DRAM buffer "
                       f"{buffer!r} has no offset in the plan's DRAM layout")


def check_tiling(untiled: Graph, tiled: Graph, report) -> None:
    """Tiles of each op write every element of its output exactly once, and each tile's
    input views contain what it reads (halos included)."""
    tiles: dict[str, list] = defaultdict(list)
    for op in tiled.ops:
        if "tile_of" in op.attrs:
            tiles[op.attrs["tile_of"]].append(op)
    for name, ops in tiles.items():
        original = untiled.op_by_name[name]
        out = untiled.tensors[original.outputs[0]]
        count = np.zeros(out.elements, dtype=np.uint16)
        steps = input_steps(original, untiled)
        for op in ops:
            written = tiled.tensors[op.outputs[0]]
            if written.view is None:
                continue  # a partial sum, not yet part of the output
            count[_elements_of(written.view)] += 1
            k = op.attrs.get("k")
            box = tuple(tuple(r) for r in op.attrs["box"])
            needed = [] if len(box) == 1 and written.view.shape == (box[0][1] - box[0][0],) and original.kind in RESHAPE_LIKE \
                else input_boxes(original, untiled, box, tuple(k) if k else None, True)
            for t, region, step in zip(original.inputs, needed, steps):
                if region is None:
                    continue
                if not _covered(tiled, op, untiled.tensors[t], region, step):
                    report("tiling", f"tile {op.name!r} of {name!r} reads {untiled.tensors[t].name!r} over "
                                     f"{[list(r) for r in region]} but none of its inputs covers that region")
        if count.min(initial=1) != 1 or count.max(initial=1) != 1:
            missing, twice = int((count == 0).sum()), int((count > 1).sum())
            report("tiling", f"tiles of {name!r} write {out.name!r} with {missing} elements missing and {twice} "
                             "written more than once")


def _elements_of(view) -> np.ndarray:
    index = np.full((1,), view.offset, dtype=np.int64)
    for n, s in zip(view.shape, view.strides):
        index = (index[:, None] + np.arange(n, dtype=np.int64) * s).ravel()
    return index


def _read_elements(shape, region, steps) -> np.ndarray:
    """Row-major indices of the elements of ``region`` of a ``shape`` tensor read every
    ``steps``-th along each dimension."""
    index = np.zeros((1,), dtype=np.int64)
    for n, (a, b), g in zip(shape, region, steps):
        index = (index[:, None] * n + np.arange(a, b, g, dtype=np.int64)).ravel()
    return index


def _covered(tiled: Graph, op, base, region, steps=None) -> bool:
    """Whether an input of tile ``op`` holds every element of ``base`` the tile reads in
    ``region`` (every ``steps``-th along each dimension): a box view containing the box, or
    a strided view holding each element read."""
    strides = base.strides
    for t in op.inputs:
        tensor = tiled.tensors[t]
        if tensor.view is None:
            if tensor.name == base.name:
                return True
            continue
        v = tensor.view
        if v.base != base.name:
            continue
        if v.strides != strides:
            if steps is not None and np.isin(_read_elements(base.shape, region, steps), _elements_of(v)).all():
                return True
            continue
        starts, rest = [], v.offset
        for s in strides:
            starts.append(rest // s)
            rest %= s
        if all(a >= s0 and b <= s0 + n for (a, b), s0, n in zip(region, starts, v.shape)):
            return True
    return False


def _known_tensor(t, graph: Graph, what: str, report) -> bool:
    if isinstance(t, int) and 0 <= t < graph.n_tensors:
        return True
    report("range", f"{what} names tensor id {t!r}, but the graph has tensors 0..{graph.n_tensors - 1}")
    return False


def _check_overlaps(residencies, name, report, plan=None, graph=None) -> None:
    """Two residencies sharing addresses must never coexist.

    One stream: they coexist when their steps overlap (a sweep by first step). Several
    streams: steps no longer order ops of different streams, so two residencies also conflict
    when their tensors are an unsafe pair of the multi-stream safety relation
    (``npusim.plan.safety``, MindSpore paper Section 3), even if their steps do not overlap.
    """
    streams = list(plan.streams) if plan is not None else []
    multi = (graph is not None and len(set(streams)) > 1 and len(streams) == graph.n_ops
             and min(streams) >= 0)
    if not multi:
        active: list = []
        for r in sorted(residencies):
            if r.first > r.last or r.size <= 0:
                continue
            active = [a for a in active if a.last >= r.first]
            for a in active:
                if a.offset < r.offset + r.size and r.offset < a.offset + a.size:
                    report("overlap",
                           f"{name(a.tensor)!r} [{a.offset}, {a.offset + a.size}) steps {a.first}..{a.last} "
                           f"overlaps {name(r.tensor)!r} [{r.offset}, {r.offset + r.size}) steps {r.first}..{r.last}")
            active.append(r)
        return
    from npusim.plan.safety import safety_relation  # lazy: Numba, for multi-stream plans only
    from npusim.plan.safety.kernels import unsafe_shared_addresses  # lazy: Numba, as above

    relation = safety_relation(graph, list(plan.order), streams)
    # In the order of a sweep by address, (offset, first, tensor): a pair is reported when its
    # later residency is reached, against the earlier ones in that order. The pairs are found
    # without the sweep, which would visit every pair sharing addresses (quadratic in the
    # residencies when the allocator reuses addresses well): those whose steps overlap by a
    # sweep by first step (the live ones), the unsafe ones from the relation's rows.
    ranked = sorted((r for r in residencies if r.first <= r.last), key=lambda r: (r.offset, r.first, r.tensor))
    found: dict[tuple[int, int], bool] = {}
    active: list = []
    for k in sorted(range(len(ranked)), key=lambda k: (ranked[k].first, k)):
        r = ranked[k]
        active = [a for a in active if ranked[a].last >= r.first]
        if r.size <= 0:
            continue
        for a in active:
            other = ranked[a]
            if other.offset < r.offset + r.size and r.offset < other.offset + other.size:
                found[(min(a, k), max(a, k))] = True
        active.append(k)
    n_tensors = relation.bits.shape[0]
    tensor = np.array([r.tensor for r in ranked], dtype=np.int64)
    offset = np.array([r.offset for r in ranked], dtype=np.int64)
    size = np.array([r.size for r in ranked], dtype=np.int64)
    known = (tensor >= 0) & (tensor < n_tensors)
    by_tensor = np.argsort(np.where(known, tensor, n_tensors), kind="stable")
    by_tensor = by_tensor[known[by_tensor]]
    res_ptr = np.zeros(n_tensors + 1, dtype=np.int64)
    np.cumsum(np.bincount(tensor[known], minlength=n_tensors), out=res_ptr[1:])
    for r, q in zip(*unsafe_shared_addresses(relation.bits, tensor, offset, size, res_ptr, by_tensor)):
        pair = (min(int(r), int(q)), max(int(r), int(q)))
        found.setdefault(pair, False)
    for (a, k), steps_overlap in sorted(found.items(), key=lambda item: (item[0][1], item[0][0])):
        a_, r = ranked[a], ranked[k]
        why = "" if steps_overlap else " (an unsafe pair: they may coexist on different streams)"
        report("overlap",
               f"{name(a_.tensor)!r} [{a_.offset}, {a_.offset + a_.size}) steps {a_.first}..{a_.last} "
               f"overlaps {name(r.tensor)!r} [{r.offset}, {r.offset + r.size}) steps {r.first}..{r.last}{why}")


def require_valid(plan: Plan, graph: Graph | None = None, source: str = "plan", *, planned: bool = False) -> None:
    """Raise PlanError listing every violation (at most 20 shown) unless the plan is valid;
    InternalError for a plan a planner just made (``planned``): that is the planner's bug."""
    found = validate(plan, graph)
    if found:
        shown = "\n  ".join(str(v) for v in found[:20])
        more = f"\n  ... and {len(found) - 20} more" if len(found) > 20 else ""
        error = InternalError if planned else PlanError
        raise error(f"{source}: {len(found)} violation(s){' (a planner bug: please report it)' if planned else ''}:"
                    f"\n  {shown}{more}")
