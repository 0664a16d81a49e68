"""The independent plan validator.

``validate(plan, graph)`` re-derives everything from the plan and the graph, trusting no
planner, and returns *every* violation found (an empty list means the plan is valid):

==================  ==========================================================================
kind                meaning
==================  ==========================================================================
order               ``order`` is not a topological permutation of the ops
streams             the stream list does not cover every op, or a stream is negative
range               a residency or transfer names a step outside the order
size                a residency is smaller than its tensor, or a transfer moves other than its
                    tensor's bytes (the reports' off-chip bytes and DRAM energy are its sizes)
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
import functools
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import attrgetter

import numpy as np

from npusim.errors import InternalError, PlanError
from npusim.graph.analysis import check_order, step_of
from npusim.graph.model import (
    DRAM_KINDS, TENSOR_KINDS, TILED_KINDS, Graph, op_attributes, op_fields, op_origins, record_name, tensor_view_getter,
)
from npusim.graph.regions import RESHAPE_LIKE, box_rule, input_steps
from npusim.plan.dram import buffer_of, known_buffers
from npusim.plan.model import CAUSES, TRANSFER_KINDS, Plan
from npusim.plan.records import ResidencyTable, TransferTable
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
    _check_transfer_sizes(plan, graph, report)
    name = lambda t: graph.tensors[t].name  # noqa: E731
    n_tensors = graph.n_tensors
    columns = _sound_columns(plan, graph)  # every residency breaks none of the rules by residency, or None
    if _nothing_else_to_report(plan, graph, columns):  # only overlaps and the DRAM layout are left to check
        _check_overlaps(plan.residencies, name, report, plan, graph, columns)
        if plan.dram:
            _check_dram(plan, graph, report)
        return found
    if columns is not None:
        residencies = list(plan.residencies)
        by_tensor = _by_tensor(residencies, columns)
    else:
        residencies = [r for r in plan.residencies if _known_tensor(r.tensor, n_tensors, "residency", report)]
        by_tensor = _check_residencies(plan, graph, residencies, name, report)
    _check_overlaps(residencies, name, report, plan, graph, columns)
    residency_at = ResidencyIndex(by_tensor)
    _check_one_copy(residency_at, name, report)
    loads, stores = _transfers_by_tensor(plan, graph, name, report)
    load_columns = _load_columns(plan, graph)  # the loads as arrays if no transfer was reported or left out
    fill, table = _filled_fast(plan, graph, residencies, columns, load_columns)
    if fill is None:
        fill = _check_filled(plan, graph, by_tensor, loads, name, report)
        table = _ResidencyTable.of(residency_at, fill, plan.n_steps)  # for the array checks run first
    _check_operands(plan, graph, residency_at, fill, table, name, report)
    first_store = {t: min(tr.step for tr in trs) for t, trs in stores.items() if trs}
    if not _loads_hold(graph, loads, first_store, table, load_columns):  # else nothing to report
        for t, trs in loads.items():
            _check_loads(graph.tensors[t], trs, first_store, residency_at, name, report)
    for t, trs in stores.items():
        _check_stores(graph.tensors[t], trs, residency_at, fill, name, report)
    _check_written_back(graph, stores, report)
    if plan.dram:
        _check_dram(plan, graph, report)
    return found


def _nothing_else_to_report(plan: Plan, graph: Graph, columns) -> bool:
    """Whether the checks of residencies and transfers but overlaps and the DRAM layout find
    nothing, seen as array work over a table's columns (no object per residency or transfer):
    every residency is sound (``columns``) and filled, one copy of a tensor at a time (else
    ``_ResidencyTable.of_columns`` declines), every transfer kept with nothing to report
    (``_load_columns``), and the operands, loads, stores and write-backs hold. False when
    anything fails or the plan has no tables: ``validate``'s loops then report."""
    trs = plan.transfers
    if columns is None or not isinstance(trs, TransferTable):
        return False
    load_columns = _load_columns(plan, graph)
    filled = _fill_steps(plan, graph, columns, load_columns)
    if filled is None:
        return False
    table = _ResidencyTable.of_columns(columns, filled, plan.n_steps)
    if table is None or not _operands_hold(plan, graph, table):
        return False
    store = trs.column("kind") == TRANSFER_KINDS.index("store")
    stored, store_step = trs.column("tensor")[store], trs.column("step")[store]
    first_store = np.full(graph.n_tensors, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_store, stored, store_step)
    has_store = np.flatnonzero(first_store != np.iinfo(np.int64).max)
    loaded = np.zeros(graph.n_tensors, dtype=bool)  # (not np.unique: it imports numpy.ma)
    loaded[load_columns[0]] = True
    loads = dict.fromkeys(np.flatnonzero(loaded).tolist())  # ``_loads_hold`` asks which tensors are loaded
    return (_loads_hold(graph, loads, dict(zip(has_store.tolist(), first_store[has_store].tolist())), table,
                        load_columns)
            and _stores_hold(graph, table, stored, store_step, trs.column("cause")[store]))


def _stores_hold(graph: Graph, table: _ResidencyTable, tensor: np.ndarray, step: np.ndarray,
                 cause: np.ndarray) -> bool:
    """``_check_stores`` and ``_check_written_back`` find nothing, seen as array work: one store
    of a tensor per step, each from a residency holding its step and filled by then, with the
    cause its tensor's kind gives, and every graph output written back."""
    kinds = TENSOR_KINDS + TILED_KINDS
    expected = np.array([CAUSES.index(STORE_CAUSE[k]) if k in STORE_CAUSE else -1 for k in kinds], dtype=np.int8)
    tensor_kind = graph.arrays.tensor_kind
    if (cause != expected[tensor_kind[tensor]]).any():
        return False
    key = np.sort(tensor * max(int(step.max(initial=0)) + 1, 1) + step)
    if (key[1:] == key[:-1]).any():
        return False
    held, found = table.find(tensor, step)
    if not held or (table.filled[found] > step).any():
        return False
    written_back = np.zeros(graph.n_tensors, dtype=bool)
    written_back[tensor[cause == CAUSES.index("writeback")]] = True
    return bool(written_back[tensor_kind == kinds.index("output")].all())


# Each check below reports one kind of violation (``report(kind, message)``); ``validate`` runs
# them in a fixed order, item by item where one item can break several rules.

def _check_one_copy(residency_at: ResidencyIndex, name, report) -> None:
    """double_residency: a tensor has one copy on chip at a time, so two of its residencies
    never hold one step (else a load, a read or a store of it names no single residency: the
    validator and the lowering could pick different ones, the simulator then finds a race).
    Only the tensors ``residency_at`` did not find disjoint (neither one residency nor sorted
    ones) are looked at again."""
    for t, rs in residency_at.by_tensor.items():
        if t in residency_at.only or t in residency_at.sorted:
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
    if _is_topological(graph, list(plan.order)):
        return True
    try:  # check_order names the first problem
        check_order(graph, list(plan.order))
    except PlanError as exc:
        report("order", str(exc))
        return False
    return True


def _is_topological(graph: Graph, order: list) -> bool:
    """Whether ``check_order`` accepts ``order``, by the same tests (a permutation of the ops;
    every input produced, or every tile it is read from produced, at an earlier step) as array
    work over the graph's input lists (``Graph.arrays``); when False, ``check_order`` names the
    problem."""
    if sorted(order) != list(range(graph.n_ops)):
        return False
    arrays = graph.arrays
    step = step_of(order)
    reader = np.repeat(np.arange(graph.n_ops), np.diff(arrays.op_input_ptr))  # op of each (distinct) input
    producer = arrays.producer[arrays.op_input_idx]
    made = producer >= 0
    if (step[producer[made]] >= step[reader[made]]).any():
        return False
    # an input no op produces (a graph input, a weight) may be read from tiles (its sources),
    # each produced at an earlier step
    counts, sources = arrays.sources_of(arrays.op_input_idx[~made])
    source_producer = arrays.producer[sources]
    return bool((source_producer >= 0).all()
                and (step[source_producer] < np.repeat(step[reader[~made]], counts)).all())


def _check_transfer_sizes(plan: Plan, graph: Graph, report) -> None:
    """size: a transfer moves its tensor's bytes, as a plan file's transfers do (its reader sets
    them): what the reports count as off-chip bytes and charge DRAM energy for. Array work over
    the transfers' columns (a tiled plan's are hundreds of thousands)."""
    trs = plan.transfers
    if isinstance(trs, TransferTable):
        tensor, size = trs.column("tensor"), trs.column("size")
    else:
        tensor = np.array([tr.tensor for tr in trs], dtype=np.int64)
        size = np.array([tr.size for tr in trs], dtype=np.int64)
    expected = graph.arrays.tensor_size
    known = (tensor >= 0) & (tensor < len(expected))  # (an unknown tensor is reported by range)
    wrong = np.flatnonzero(known & (size != expected[np.where(known, tensor, 0)]))
    for i in wrong.tolist():
        tr = trs[i]
        report("size", f"{tr.kind} of {graph.tensors[tr.tensor].name!r} at step {tr.step}: size {tr.size} B, "
                       f"expected its tensor's {graph.tensors[tr.tensor].size} B")


def _check_streams(plan: Plan, graph: Graph, report) -> None:
    """streams: one stream >= 0 per op."""
    if len(plan.streams) != graph.n_ops:
        report("streams", f"streams lists {len(plan.streams)} entries; expected a stream >= 0 for "
                          f"each of the {graph.n_ops} ops")
    for o, s in zip(range(graph.n_ops), plan.streams):
        if s < 0:
            report("streams", f"op {graph.ops[o].name!r}: stream {s} is negative, expected >= 0")


def _check_residencies(plan: Plan, graph: Graph, residencies, name, report) -> dict[int, list]:
    """range, size, capacity and alignment of each residency, in plan order; returns the
    residencies within the plan's steps by tensor."""
    by_tensor = defaultdict(list)
    n, capacity, alignment, tensors = plan.n_steps, plan.capacity, plan.alignment, graph.tensors
    for r in residencies:
        tensor_size = tensors[r.tensor].size
        if (0 <= r.first <= r.last < n and r.size >= tensor_size and r.offset >= 0
                and r.offset + r.size <= capacity and not r.offset % alignment):
            by_tensor[r.tensor].append(r)  # breaks none of the rules below: no message to write
            continue
        where = f"residency of {name(r.tensor)!r} at [{r.offset}, {r.offset + r.size}) steps {r.first}..{r.last}"
        if not _check_residency_range(r, n, where, report):
            continue
        _check_size(r, tensor_size, where, report)
        _check_capacity(r, capacity, where, report)
        _check_alignment(r, alignment, where, report)
        by_tensor[r.tensor].append(r)
    return by_tensor


FIELDS = ("first", "last", "offset", "tensor", "size")  # the columns of ``_sound_columns``


def _sound_columns(plan: Plan, graph: Graph) -> np.ndarray | None:
    """The plan's residencies as int64 columns (rows ``FIELDS``, in plan order) when every one
    names a known tensor and breaks none of the rules ``_check_residencies`` checks (range,
    size, capacity, alignment), seen as array work; None otherwise (or when a field is not a
    plain ``int`` or is too large for int64 arithmetic): the loops then check and report."""
    rs = plan.residencies
    if not rs:
        return None
    if isinstance(rs, ResidencyTable):  # plain ints within int64 (npusim.plan.records)
        columns = np.stack([rs.column(field) for field in FIELDS])
    else:
        columns = []
        for field in FIELDS:
            values = list(map(attrgetter(field), rs))
            if set(map(type, values)) != {int}:
                return None
            try:
                columns.append(np.fromiter(values, np.int64, len(values)))
            except OverflowError:  # past int64
                return None
        columns = np.stack(columns)
    if columns.min() <= -(1 << 62) or columns.max() >= 1 << 62:  # offset + size must not wrap
        return None
    first, last, offset, tensor, size = columns
    if not ((tensor >= 0).all() and (tensor < graph.n_tensors).all()):
        return None
    sound = ((first >= 0) & (first <= last) & (last < plan.n_steps) & (size >= graph.arrays.tensor_size[tensor])
             & (offset >= 0) & (offset + size <= plan.capacity) & (offset % plan.alignment == 0))
    return columns if sound.all() else None


def _by_tensor(residencies: list, columns: np.ndarray) -> dict[int, list]:
    """``_check_residencies``'s result for residencies that break none of its rules: by tensor,
    in plan order."""
    by_tensor = defaultdict(list)
    for t, r in zip(columns[3].tolist(), residencies):
        by_tensor[t].append(r)
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
    n_steps, n_tensors, tensors = plan.n_steps, graph.n_tensors, graph.tensors
    for tr in plan.transfers:
        if not _known_tensor(tr.tensor, n_tensors, tr.kind, report):
            continue
        if tr.kind not in ("load", "store"):
            report("cause", f"transfer of {name(tr.tensor)!r} at step {tr.step}: kind {tr.kind!r}, expected load or store")
            continue
        if not 0 <= tr.step < n_steps:
            report("range", f"{tr.kind} of {name(tr.tensor)!r} at step {tr.step}: outside 0..{n_steps - 1}")
            continue
        if tensors[tr.tensor].kind == "accumulator":
            report("cause", f"{tr.kind} of {name(tr.tensor)!r} at step {tr.step}: partial sums held in a core's "
                            "accumulators cannot be moved by DMA")
            continue
        (loads if tr.kind == "load" else stores)[tr.tensor].append(tr)
    return loads, stores


class ResidencyIndex:
    """``index(t, s)``: the residency of tensor ``t`` that holds step ``s`` (the first such in
    plan order), or None. A tensor whose residencies are disjoint in steps (every valid plan's)
    is searched by bisection, so a weight loaded by thousands of tiles costs no scan per read;
    overlapping ones (an invalid plan) are scanned in plan order. A tensor with one residency
    (most) is answered by comparing steps."""

    def __init__(self, by_tensor: dict[int, list]):
        self.by_tensor = by_tensor
        self.only: dict[int, object] = {}  # tensor -> its one residency
        self.sorted: dict[int, tuple[list[int], list]] = {}
        for t, rs in by_tensor.items():
            if len(rs) == 1:
                self.only[t] = rs[0]
                continue
            ordered = sorted(rs, key=attrgetter("first"))
            if all(a.last < b.first for a, b in zip(ordered, ordered[1:])):
                self.sorted[t] = ([r.first for r in ordered], ordered)

    def __call__(self, t: int, s: int):
        r = self.only.get(t)
        if r is not None:
            return r if r.first <= s <= r.last else None
        found = self.sorted.get(t)
        if found is None:
            return next((r for r in self.by_tensor.get(t, ()) if r.first <= s <= r.last), None)
        firsts, ordered = found
        i = bisect.bisect_right(firsts, s) - 1
        return ordered[i] if i >= 0 and ordered[i].last >= s else None


KIND_CODE = {"load": 0, "store": 1}  # a transfer's kind in ``_load_columns``; other kinds -1
CAUSE_CODE = {"retrieve": 0, "compulsory": 1}  # a load's cause in ``_load_columns``; other causes -1
ACCUMULATOR = (TENSOR_KINDS + TILED_KINDS).index("accumulator")  # its code in ``GraphArrays.tensor_kind``


def _load_columns(plan: Plan, graph: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(tensor, step, cause code ``CAUSE_CODE``) of each of the plan's loads, in plan order, when
    ``_transfers_by_tensor`` reports nothing and keeps every transfer: each names a known
    tensor (a plain ``int``), is a load or a store at a step (a plain ``int``) within the
    plan's, of a tensor not held in accumulators. None otherwise, or with no loads."""
    trs = plan.transfers
    if isinstance(trs, TransferTable):
        return _table_load_columns(plan, graph, trs)
    tensor, step = list(map(attrgetter("tensor"), trs)), list(map(attrgetter("step"), trs))
    if (not trs or set(map(type, tensor)) != {int} or set(map(type, step)) != {int}
            or not (0 <= min(tensor) and max(tensor) < graph.n_tensors and 0 <= min(step) and max(step) < plan.n_steps)):
        return None
    try:  # a kind or cause that cannot be a dict key is no load or store, no known cause
        kind = np.fromiter(map(KIND_CODE.get, map(attrgetter("kind"), trs), repeat(-1)), np.int8, len(trs))
        load = kind == 0
        n_loads = int(load.sum())
        cause = np.fromiter(map(CAUSE_CODE.get, map(attrgetter("cause"), compress(trs, load.tolist())), repeat(-1)),
                            np.int8, n_loads)
    except TypeError:
        return None
    tensor = np.array(tensor, dtype=np.int64)
    if (kind < 0).any() or (graph.arrays.tensor_kind[tensor] == ACCUMULATOR).any() or not n_loads:
        return None
    return tensor[load], np.array(step, dtype=np.int64)[load], cause


#: ``CAUSE_CODE`` of each cause by its code in a TransferTable (``npusim.plan.records``)
_TABLE_CAUSE_CODE = np.array([CAUSE_CODE.get(cause, -1) for cause in CAUSES], dtype=np.int8)


def _table_load_columns(plan: Plan, graph: Graph, trs: TransferTable):
    """``_load_columns`` of a TransferTable: its kinds are loads and stores, its fields ints."""
    tensor, step = trs.column("tensor"), trs.column("step")
    if not len(trs) or not (0 <= tensor.min() and tensor.max() < graph.n_tensors and 0 <= step.min() and step.max() < plan.n_steps):
        return None
    load = trs.column("kind") == TRANSFER_KINDS.index("load")
    if (graph.arrays.tensor_kind[tensor] == ACCUMULATOR).any() or not load.any():
        return None
    return tensor[load], step[load], _TABLE_CAUSE_CODE[trs.column("cause")[load]]


def _filled_fast(plan: Plan, graph: Graph, residencies: list, columns, load_columns) -> tuple[dict | None, object]:
    """``_check_filled``'s fill map and ``_ResidencyTable.of``'s table, as array work over the
    residency ``columns`` (``_sound_columns``, every residency in plan order), when every
    residency is filled: from the first load of its tensor within its steps, or its
    producer's step if earlier and within them. (None, None) when there are no columns or a
    residency is never filled (or no ``load_columns``: ``_load_columns``): ``_check_filled`` then
    reports it."""
    filled = _fill_steps(plan, graph, columns, load_columns)
    if filled is None:
        return None, None
    fill = dict(zip(map(id, residencies), filled.tolist()))
    return fill, _ResidencyTable.of_columns(columns, filled, plan.n_steps)


def _fill_steps(plan: Plan, graph: Graph, columns, load_columns) -> np.ndarray | None:
    """The step each residency is filled from (``_filled_fast``), or None."""
    if columns is None or load_columns is None:
        return None
    first, last, _, tensor, _ = columns
    n = plan.n_steps
    load_key = np.sort(load_columns[0] * n + load_columns[1])
    i = np.searchsorted(load_key, tensor * n + first, side="left")  # the first load at or after ``first``
    load_at = np.append(load_key, np.iinfo(np.int64).max)[i] - tensor * n
    filled = np.where(load_at <= last, load_at, -1)  # a load within the residency (same tensor: step < n)
    step = step_of(list(plan.order))
    producer = graph.arrays.producer[tensor]
    made = np.where(producer >= 0, step[np.maximum(producer, 0)], -1)
    by_producer = (producer >= 0) & (first <= made) & (made <= last) & ((filled < 0) | (made < filled))
    filled = np.where(by_producer, made, filled)
    return None if (filled < 0).any() else filled


def _check_filled(plan: Plan, graph: Graph, by_tensor, loads, name, report) -> dict:
    """empty_residency: every residency is filled, by its producer or a load within it.
    Returns ``id(residency)`` -> the step its data is valid from (keyed by the object, which
    ``ResidencyIndex`` returns: a Residency hashes all its fields, a cost per lookup)."""
    step, tensors, fill = step_of(list(plan.order)).tolist(), graph.tensors, {}
    for t, rs in by_tensor.items():
        producer = tensors[t].producer
        p = None if producer is None else step[producer]
        trs = loads.get(t)
        load_steps = [] if not trs else [trs[0].step] if len(trs) == 1 else sorted(tr.step for tr in trs)
        for r in rs:
            first, last = r.first, r.last
            i = bisect.bisect_left(load_steps, first) if load_steps else 0  # the first load within the residency, if any
            filled = load_steps[i] if i < len(load_steps) and load_steps[i] <= last else None
            if p is not None and first <= p <= last and (filled is None or p < filled):
                filled = p
            if filled is not None:
                fill[id(r)] = filled
            elif first <= last:
                report("empty_residency",
                       f"residency of {name(t)!r} at offset {r.offset}, steps {r.first}..{r.last}: "
                       "never filled (not produced or loaded within it)")
    return fill


def _check_operands(plan: Plan, graph: Graph, residency_at, fill, table, name, report) -> None:
    """not_resident, not_ready: at its step, an op's inputs are resident and filled, and its
    outputs have a residency."""
    if _operands_hold(plan, graph, table):
        return  # nothing to report (the loop below names each violation)
    ops, only = graph.ops, residency_at.only
    for s, op_id in enumerate(plan.order):
        op = ops[op_id]
        for t in dict.fromkeys(op.inputs) if len(op.inputs) > 1 else op.inputs:
            r = only.get(t)  # a tensor's one residency is tested here: cheaper than a call per input
            if r is None or not r.first <= s <= r.last:
                r = residency_at(t, s)
            if r is None:
                report("not_resident", f"op {op.name!r} at step {s}: input {name(t)!r} is not resident")
            elif (late := _arrives_after(r, fill, s)) is not None:
                report("not_ready", f"op {op.name!r} at step {s}: input {name(t)!r} arrives only at step {late}")
        for t in op.outputs:
            r = only.get(t)
            if (r is None or not r.first <= s <= r.last) and residency_at(t, s) is None:
                report("not_resident", f"op {op.name!r} at step {s}: output {name(t)!r} has no residency")


class _ResidencyTable:
    """The residencies of ``ResidencyIndex`` as arrays sorted by (tensor, first step), to
    answer many (tensor, step) lookups at once (``find``), with the step each is filled from
    (``fill``; -1 if never). Made (``of``) only when each tensor's residencies are disjoint in
    steps (every valid plan's), where the holder of a step is unique."""

    def __init__(self, residencies: list, tensor: np.ndarray, fill, n_steps: int) -> None:
        self.first = np.fromiter(map(attrgetter("first"), residencies), np.int64, len(residencies))
        self.last = np.fromiter(map(attrgetter("last"), residencies), np.int64, len(residencies))
        self.tensor, self.n_steps = tensor, n_steps
        self.filled = np.fromiter((fill.get(id(r), -1) for r in residencies), np.int64, len(residencies))
        self.by_start = np.lexsort((self.first, tensor))
        self.key = tensor[self.by_start] * n_steps + self.first[self.by_start]

    @classmethod
    def of(cls, residency_at, fill, n_steps: int) -> "_ResidencyTable | None":
        by_tensor = residency_at.by_tensor
        if len(residency_at.only) + len(residency_at.sorted) != len(by_tensor):
            return None
        residencies = list(chain.from_iterable(by_tensor.values()))
        if not residencies:
            return None
        tensor = np.repeat(np.fromiter(by_tensor, np.int64, len(by_tensor)),
                           np.fromiter(map(len, by_tensor.values()), np.int64, len(by_tensor)))
        table = cls(residencies, tensor, fill, n_steps)
        if table.first.min() < 0 or table.last.max() >= n_steps:
            return None
        return table

    @classmethod
    def of_columns(cls, columns: np.ndarray, filled: np.ndarray, n_steps: int) -> "_ResidencyTable | None":
        """``of`` for residencies given as ``_sound_columns`` (all of them within the steps)
        and the step each is filled from: None unless each tensor's residencies are disjoint
        in steps."""
        first, last, _, tensor, _ = columns
        table = cls.__new__(cls)
        table.first, table.last, table.tensor, table.n_steps, table.filled = first, last, tensor, n_steps, filled
        table.by_start = np.lexsort((first, tensor))
        table.key = tensor[table.by_start] * n_steps + first[table.by_start]
        same = tensor[table.by_start[1:]] == tensor[table.by_start[:-1]]
        if (same & (last[table.by_start[:-1]] >= first[table.by_start[1:]])).any():
            return None
        return table

    def find(self, t: np.ndarray, s: np.ndarray) -> tuple[bool, np.ndarray]:
        """(whether every tensor ``t[i]`` has a residency holding step ``s[i]``, the index of each)."""
        i = np.searchsorted(self.key, t * self.n_steps + s, side="right") - 1
        found = self.by_start[np.maximum(i, 0)]
        return bool(((i >= 0) & (self.tensor[found] == t) & (self.last[found] >= s)).all()), found


def _operands_hold(plan: Plan, graph: Graph, table: _ResidencyTable | None) -> bool:
    """``_check_operands`` finds nothing, seen as array work: each (op, distinct input) and
    (op, output) finds the residency of its tensor holding its step (``table``), and an
    input's is filled by then. False when anything fails or there is no table: the loop then
    reports."""
    if table is None:
        return False
    arrays, step = graph.arrays, step_of(list(plan.order))

    def tensors_and_steps(ptr, idx) -> tuple[np.ndarray, np.ndarray]:
        return idx, step[np.repeat(np.arange(graph.n_ops), np.diff(ptr))]

    t, s = tensors_and_steps(arrays.op_input_ptr, arrays.op_input_idx)
    held, found = table.find(t, s)
    if not held or (table.filled[found] > s).any():
        return False
    return table.find(*tensors_and_steps(arrays.op_output_ptr, arrays.op_output_idx))[0]


def _loads_hold(graph: Graph, loads: dict, first_store: dict, table: _ResidencyTable | None,
                load_columns=None) -> bool:
    """``_check_loads`` finds nothing, seen as array work: every load fills a residency of its
    tensor (``table``), one load per residency, what it reads is in DRAM by then (a tensor in
    DRAM from the start, or stored before, or every tile it is read from stored before), and
    its cause is the one ``_load_cause`` expects. False when anything fails or there is no
    table: the loop then reports. ``load_columns``: the loads as arrays (``_load_columns``), if
    made; else read from ``loads``."""
    if table is None or not loads:
        return table is not None
    if load_columns is None:
        trs = list(chain.from_iterable(loads.values()))
        t = np.fromiter(map(attrgetter("tensor"), trs), np.int64, len(trs))
        s = np.fromiter(map(attrgetter("step"), trs), np.int64, len(trs))
        cause = np.fromiter((CAUSE_CODE.get(tr.cause, -1) if isinstance(tr.cause, str) else -1 for tr in trs),
                            np.int8, len(trs))
    else:
        t, s, cause = load_columns
    held, found = table.find(t, s)
    filled_by = np.sort(found)  # (not np.unique: it imports numpy.ma, ~10 ms, on its first call)
    if not held or (filled_by[1:] == filled_by[:-1]).any():
        return False
    arrays = graph.arrays
    initially = np.zeros(graph.n_tensors, dtype=bool)
    loaded = np.fromiter(loads, np.int64, len(loads))
    initially[loaded[arrays.tensor_kind[loaded] < len(DRAM_KINDS)]] = True  # Tensor.in_dram_initially
    first_load = np.full(graph.n_tensors, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_load, t, s)
    compulsory = initially[t] & (s == first_load[t])
    if (cause != compulsory).any():  # the cause _load_cause expects: compulsory (1) or retrieve (0)
        return False
    stored = np.full(graph.n_tensors, np.iinfo(np.int64).max, dtype=np.int64)  # first store's step
    if first_store:
        stored[np.fromiter(first_store, np.int64, len(first_store))] = np.fromiter(first_store.values(), np.int64,
                                                                                   len(first_store))
    later = ~initially[t]
    # what a load reads from DRAM: its sources, or itself if it has none
    counts, read = arrays.sources_of(t[later])
    at = np.repeat(s[later], counts)
    itself = counts == 0
    read, at = np.concatenate([read, t[later][itself]]), np.concatenate([at, s[later][itself]])
    return bool((stored[read] < at).all())


def _arrives_after(r, fill, s: int) -> int | None:
    """not_ready: the step a residency read at step ``s`` is filled at, if later than ``s``."""
    filled = fill.get(id(r))
    return filled if filled is not None and filled > s else None


def _check_loads(tensor, trs, first_store, residency_at, name, report) -> None:
    """duplicate_transfer (one load per residency), then for each load: transfer_residency,
    load_without_copy and cause."""
    if not trs:
        return
    into = [residency_at(tensor.id, tr.step) for tr in trs]
    if len(trs) > 1:
        _check_one_load_per_residency(tensor, trs, into, name, report)
    first_load = min(tr.step for tr in trs)
    for tr, r in zip(trs, into):
        expected, not_in_dram = _load_cause(tensor, tr, first_load, first_store, name)
        if r is not None and not not_in_dram and tr.cause == expected:
            continue  # nothing to report: no message to write
        where = f"load of {name(tensor.id)!r} at step {tr.step}"
        if r is None:
            report("transfer_residency", f"{where}: the tensor has no residency to load into")
        for problem in not_in_dram:
            report("load_without_copy", f"{where}: {problem}")
        _check_cause(tr, expected, where, report)


def _check_one_load_per_residency(tensor, trs, into, name, report) -> None:
    """duplicate_transfer: a residency is filled once; a second load into it writes the same
    bytes again, racing with the first and with the ops reading them (``into``: the residency
    each load fills, or None)."""
    steps_into: dict[int, tuple] = {}  # id(residency) -> (residency, steps of the loads into it)
    for tr, r in zip(trs, into):
        if r is not None:
            steps_into.setdefault(id(r), (r, []))[1].append(tr.step)
    for r, steps in steps_into.values():
        if len(steps) > 1:
            report("duplicate_transfer", f"{name(tensor.id)!r} is loaded {len(steps)} times (steps "
                                         f"{', '.join(map(str, sorted(steps)))}) into its residency at offset "
                                         f"{r.offset}, steps {r.first}..{r.last}; expected one load per residency")


def _load_cause(tensor, tr, first_load: int, first_store: dict, name) -> tuple[str, list[str]]:
    """load_without_copy: a load reads data that is in DRAM (an input or weight, or stored
    before; a tile read from DRAM: every tile it is read from stored before; ``first_store``:
    tensor -> the step of its first store). Returns the cause the load should give, and what
    it reads that is not in DRAM (as the end of a message)."""
    if tensor.in_dram_initially:
        return ("compulsory" if tr.step == first_load else "retrieve"), []
    if tensor.sources:
        return "retrieve", [f"its source {name(src)!r} was not stored to DRAM before"
                            for src in tensor.sources if not first_store.get(src, tr.step) < tr.step]
    if not first_store.get(tensor.id, tr.step) < tr.step:
        return "retrieve", [f"{name(tensor.id)!r} was never stored to DRAM before"]
    return "retrieve", []


def _check_cause(tr, expected: str, where: str, report) -> None:
    """cause: a transfer gives the cause of what it does."""
    if tr.cause != expected:
        report("cause", f"{where}: cause {tr.cause!r}, expected {expected!r}")


STORE_CAUSE = {"output": "writeback", "activation": "spill"}  # tensor kind -> why it is stored; others are in DRAM


def _check_stores(tensor, trs, residency_at, fill, name, report) -> None:
    """duplicate_transfer (one store per step), then for each store: transfer_residency or
    not_ready, and cause."""
    twice = sorted(step for step, count in Counter(tr.step for tr in trs).items() if count > 1) if len(trs) > 1 else []
    if twice:
        report("duplicate_transfer", f"{name(tensor.id)!r} is stored more than once at step(s) "
                                     f"{', '.join(map(str, twice))}; expected one store per step")
    expected = STORE_CAUSE.get(tensor.kind)
    for tr in trs:
        r = residency_at(tensor.id, tr.step)
        late = None if r is None else _arrives_after(r, fill, tr.step)
        if r is not None and late is None and expected is not None and tr.cause == expected:
            continue  # nothing to report: no message to write
        where = f"store of {name(tensor.id)!r} at step {tr.step}"
        if r is None:
            report("transfer_residency", f"{where}: the tensor is not resident to store from")
        elif late is not None:
            report("not_ready", f"{where}: the data arrives only at step {late}")
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
    attrs_of = op_attributes(tiled)  # (read from columns: no Op made per tile, npusim.graph.columns)
    op_names, op_inputs, op_outputs = op_fields(tiled, "name", "inputs", "outputs")
    for o, origin in enumerate(op_origins(tiled)):
        if origin != op_names[o] or "tile_of" in attrs_of(o):
            tiles[origin].append(o)
    view_of = functools.lru_cache(maxsize=None)(tensor_view_getter(tiled))  # (a view is probed per base read)
    for name, ops in tiles.items():
        original = untiled.op_by_name[name]
        out = untiled.tensors[original.outputs[0]]
        out_strides = out.strides
        steps = input_steps(original, untiled)
        bases = [untiled.tensors[t] for t in original.inputs]
        base_strides = [base.strides for base in bases]
        views = []
        boxes_of = None  # the op's ``input_boxes`` as a function of the tile (``box_rule``), made once
        for o in ops:
            written = view_of(op_outputs[o][0])
            if written is None:
                continue  # a partial sum, not yet part of the output
            views.append(written)
            attrs = attrs_of(o)
            k = attrs.get("k")
            box = tuple(tuple(r) for r in attrs["box"])
            if len(box) == 1 and written.shape == (box[0][1] - box[0][0],) and original.kind in RESHAPE_LIKE:
                needed = []
            else:
                if boxes_of is None:
                    boxes_of = box_rule(original, untiled)
                needed = boxes_of(box, tuple(k) if k else None, True)
            for base, strides, region, step in zip(bases, base_strides, needed, steps):
                if region is None:
                    continue
                if not _covered(tiled, op_inputs[o], base, region, step, strides, view_of):
                    report("tiling", f"tile {op_names[o]!r} of {name!r} reads {base.name!r} over "
                                     f"{[list(r) for r in region]} but none of its inputs covers that region")
        if _grid_of_boxes(views, out.shape, out_strides):
            continue  # every element written once, seen without counting them
        count = np.zeros(out.elements, dtype=np.uint16)
        for view in views:
            _count_elements(count, view, out.shape, out_strides)
        if count.min(initial=1) != 1 or count.max(initial=1) != 1:
            missing, twice = int((count == 0).sum()), int((count > 1).sum())
            report("tiling", f"tiles of {name!r} write {out.name!r} with {missing} elements missing and {twice} "
                             "written more than once")


def _grid_of_boxes(views, shape, strides) -> bool:
    """``_grid_of_boxes_by_views`` as array work over the views' offsets and shapes, when
    there are views, the tensor has dimensions of positive strides and every view has its
    strides (else, or past int64, by the views one at a time)."""
    rank, strides = len(shape), tuple(strides)
    if not views or not rank or min(strides) <= 0 or any(tuple(v.strides) != strides or len(v.shape) != rank
                                                          for v in views):
        return _grid_of_boxes_by_views(views, shape, strides)
    try:
        rest = np.fromiter(map(attrgetter("offset"), views), np.int64, len(views))
        extent = np.array([v.shape for v in views], dtype=np.int64).reshape(len(views), rank)
        dims = np.array(shape, dtype=np.int64)
    except OverflowError:
        return _grid_of_boxes_by_views(views, shape, strides)
    start = np.empty_like(extent)
    for d, s in enumerate(strides):  # _box_of for every view at once
        start[:, d], rest = np.divmod(rest, s)
    stop = start + extent
    if rest.any() or (start < 0).any() or (stop > dims).any():
        return False  # a view that is no box within the tensor
    cells = 1
    for d, n in enumerate(shape):  # the distinct ranges along d split [0, n) into consecutive pieces
        by_range = np.lexsort((stop[:, d], start[:, d]))
        a, b = start[by_range, d], stop[by_range, d]
        new = np.ones(len(a), dtype=bool)
        new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
        a, b = a[new], b[new]
        if a[0] != 0 or b[-1] != n or (b <= a).any() or (a[1:] != b[:-1]).any():
            return False
        cells *= len(a)
    if len(views) != cells:
        return False
    rows = np.concatenate([start, stop], axis=1)
    rows = rows[np.lexsort(rows.T[::-1])]
    return bool((rows[1:] != rows[:-1]).any(axis=1).all())  # the boxes are distinct


def _grid_of_boxes_by_views(views, shape, strides) -> bool:
    """Whether ``views`` write every element of a row-major ``shape`` tensor (of those
    ``strides``) exactly once, seen from their boxes alone: True when each view is a box
    (``_box_of``), the boxes are distinct, along each dimension their ranges split [0, n) into
    consecutive pieces, and there are as many boxes as those pieces make cells: the boxes are
    then exactly the cells of that grid. False when any of this fails (the caller then counts
    the elements, which names what is missing or written twice)."""
    boxes = []
    for view in views:
        box = _box_of(view, shape, strides)
        if box is None:
            return False
        boxes.append(tuple((b.start, b.stop) for b in box))
    cells = 1
    for d, n in enumerate(shape):
        end = 0
        for a, b in sorted({box[d] for box in boxes}):
            if a != end or b <= a:
                return False
            end = b
        if end != n:
            return False
        cells *= len({box[d] for box in boxes})
    return len(boxes) == cells and len(set(boxes)) == cells


def _count_elements(count: np.ndarray, view, shape, strides) -> None:
    """Add one to ``count`` (one entry per element of a row-major ``shape`` tensor of those
    ``strides``) at every element of ``view``: a box within the tensor (a tile's usual view) as
    a slice of ``count`` seen in ``shape``, with no index array; any other view by its element
    indices. Both add one per element of the view."""
    box = _box_of(view, shape, strides)
    if box is None:
        count[_elements_of(view)] += 1
    else:
        count.reshape(shape)[box] += 1


def _box_of(view, shape, strides) -> tuple[slice, ...] | None:
    """The slices of ``view`` in a row-major ``shape`` tensor of those ``strides``, if it is a
    box lying within it; else None."""
    if tuple(view.strides) != tuple(strides) or len(view.shape) != len(shape):
        return None
    box, rest = [], view.offset
    for s, n, dim in zip(strides, view.shape, shape):
        if s <= 0:  # an empty tensor's
            return None
        start, rest = divmod(rest, s)
        if not (0 <= start and start + n <= dim):
            return None
        box.append(slice(start, start + n))
    return tuple(box) if rest == 0 else None


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


def _covered(tiled: Graph, inputs: tuple[int, ...], base, region, steps=None, strides=None, view_of=None) -> bool:
    """Whether one of a tile's ``inputs`` holds every element of ``base`` the tile reads in
    ``region`` (every ``steps``-th along each dimension): a box view containing the box, or
    a strided view holding each element read. ``strides``: ``base.strides``, if known;
    ``view_of``: the tiled graph's ``tensor_view_getter``, if the caller has one."""
    strides = base.strides if strides is None else strides
    view_of = tensor_view_getter(tiled) if view_of is None else view_of
    for t in inputs:
        v = view_of(t)
        if v is None:
            if record_name(tiled.tensors, t) == base.name:
                return True
            continue
        if v.base != base.name:
            continue
        if v.strides != strides:
            if steps is not None and _stepped_view_holds(v, base.shape, strides, region, steps):
                return True
            continue
        if _box_holds(v, strides, region):
            return True
    return False


def _stepped_view_holds(v, shape, strides, region, steps) -> bool:
    """Whether the strided view ``v`` of a row-major ``shape`` base (of those ``strides``)
    holds every element of ``region`` read every ``steps``-th along each dimension.

    A view whose stride along each dimension is a multiple of the base's (every ``step``-th
    element from ``start``, as the tiler makes them) holds a set of elements that is the
    product of one arithmetic range per dimension, as the read is: it holds the read if along
    every dimension its range holds the read's, which is arithmetic (first, last, and the
    read's step a multiple of the view's), or if the read is empty. Any other view is tested
    element by element (``np.isin``), as it was for all of them: sorting both index arrays
    took a third of the CPU of a run of r2plus1d_18."""
    holds = _stepped_ranges_hold(v, shape, strides, region, steps)
    if holds is None:
        return bool(np.isin(_read_elements(shape, region, steps), _elements_of(v)).all())
    return holds


def _stepped_ranges_hold(v, shape, strides, region, steps) -> bool | None:
    """``_stepped_view_holds`` by ranges; None when ``v`` is no product of ranges within the
    base (a stride not a positive multiple of the base's, or a range past a dimension)."""
    if not (len(v.shape) == len(v.strides) == len(shape) == len(region) == len(steps)):
        return None
    ranges, rest = [], v.offset  # (start, step, count) of the view along each dimension
    for s, view_stride, n, dim in zip(strides, v.strides, v.shape, shape):
        if s <= 0 or view_stride <= 0 or view_stride % s or n <= 0:
            return None
        start, rest = divmod(rest, s)
        step = view_stride // s
        if start + (n - 1) * step >= dim:
            return None
        ranges.append((start, step, n))
    if rest:
        return None
    if any(a >= b for a, b in region):
        return True  # an empty read
    for (start, step, n), (a, b), g in zip(ranges, region, steps):
        last = a + (b - 1 - a) // g * g
        if a < start or last > start + (n - 1) * step or (a - start) % step or (last > a and g % step):
            return False
    return True


def _box_holds(v, strides, region) -> bool:
    """Whether the box view ``v`` (of a base of those row-major ``strides``) contains ``region``."""
    rest = v.offset
    for s, n, (a, b) in zip(strides, v.shape, region):
        start, rest = divmod(rest, s)
        if a < start or b > start + n:
            return False
    return True


def _known_tensor(t, n_tensors: int, what: str, report) -> bool:
    if isinstance(t, int) and 0 <= t < n_tensors:
        return True
    report("range", f"{what} names tensor id {t!r}, but the graph has tensors 0..{n_tensors - 1}")
    return False


def _check_overlaps(residencies, name, report, plan=None, graph=None, columns=None) -> None:
    """Two residencies sharing addresses must never coexist.

    One stream: they coexist when their steps overlap (the pairs a sweep by first step would
    compare, tested as array work: ``_coexisting_pairs``), reported in that sweep's order. Several
    streams: steps no longer order ops of different streams, so two residencies also conflict
    when their tensors are an unsafe pair of the multi-stream safety relation
    (``npusim.plan.safety``, MindSpore paper Section 3), even if their steps do not overlap.
    """
    streams = list(plan.streams) if plan is not None else []
    multi = (graph is not None and len(set(streams)) > 1 and len(streams) == graph.n_ops
             and min(streams) >= 0)
    if not multi:
        if columns is not None and _rows_sorted(columns):  # ``residencies`` is the plan's, in order
            keep = np.flatnonzero(columns[4] > 0)  # (first <= last holds for all: sound columns)
            live = _Picked(residencies, keep.tolist())  # (a table makes only the residencies reported)
            earlier, later = _coexisting_pairs(live, columns[[0, 1, 2, 4]][:, keep].T)
        else:
            live = [r for r in sorted(residencies) if r.first <= r.last and r.size > 0]
            earlier, later = _coexisting_pairs(live)
        for a, r in zip(earlier.tolist(), later.tolist()):
            a, r = live[a], live[r]
            report("overlap",
                   f"{name(a.tensor)!r} [{a.offset}, {a.offset + a.size}) steps {a.first}..{a.last} "
                   f"overlaps {name(r.tensor)!r} [{r.offset}, {r.offset + r.size}) steps {r.first}..{r.last}")
        return
    from npusim.plan.safety import safety_relation  # lazy: Numba, for multi-stream plans only
    from npusim.plan.safety.kernels import unsafe_shared_addresses  # lazy: Numba, as above

    relation = safety_relation(graph, list(plan.order), streams)
    # In the order of a sweep by address, (offset, first, tensor): a pair is reported when its
    # later residency is reached, against the earlier ones in that order. The pairs are found
    # without the sweep, which would visit every pair sharing addresses (quadratic in the
    # residencies when the allocator reuses addresses well): those whose steps overlap
    # (``_coexisting_pairs``), the unsafe ones from the relation's rows.
    ranked = sorted((r for r in residencies if r.first <= r.last), key=lambda r: (r.offset, r.first, r.tensor))
    found: dict[tuple[int, int], bool] = {}
    live = [k for k in sorted(range(len(ranked)), key=lambda k: (ranked[k].first, k)) if ranked[k].size > 0]
    earlier, later = _coexisting_pairs([ranked[k] for k in live])
    live = np.array(live, dtype=np.int64)
    for a, k in zip(live[earlier].tolist(), live[later].tolist()):
        found[(min(a, k), max(a, k))] = True
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


class _Picked:
    """``picked[k]`` is ``items[rows[k]]``."""

    __slots__ = ("items", "rows")

    def __init__(self, items, rows: list[int]) -> None:
        self.items, self.rows = items, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, k: int):
        return self.items[self.rows[k]]


def _rows_sorted(columns: np.ndarray) -> bool:
    """Whether the residencies of these columns (``_sound_columns``: rows in the order of
    ``Residency``'s fields) are in ascending order, as ``sorted`` would put them: each pair of
    neighbours compared field by field, as the dataclass compares them."""
    a, b = columns[:, :-1], columns[:, 1:]
    less, equal = np.zeros(a.shape[1], dtype=bool), np.ones(a.shape[1], dtype=bool)
    for field in range(columns.shape[0]):
        less |= equal & (a[field] < b[field])
        equal &= a[field] == b[field]
    return bool((less | equal).all())


def _coexisting_pairs(live: list, fields: np.ndarray | None = None,
                      block: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (a, r), a < r, of ``live`` (residencies sorted by first step, none empty)
    that coexist: their steps overlap (``live[a].last >= live[r].first``) and so do their
    addresses; by r, then a (the order of a sweep by first step comparing each residency with
    the earlier ones still live).

    Every pair whose steps overlap is tested, as by that sweep, but as array work: the
    residencies whose steps overlap ``live[a]``'s after it are a run ``a + 1 .. end[a] - 1``
    (sorted by first step), listed ``block`` pairs at a time to bound the memory. Per pair
    only ``r`` is indexed; ``a``'s addresses are repeated over its run, and ``a`` itself is
    made for the pairs that overlap (none in a valid plan)."""
    if fields is None:  # else given: (first, last, offset, size) of each of ``live``
        fields = _exact_ints(list(chain.from_iterable(map(attrgetter("first", "last", "offset", "size"), live))))
        fields = fields.reshape(-1, 4)
    first, last, lo = fields[:, 0], fields[:, 1], fields[:, 2]
    hi = lo + fields[:, 3]
    lo, hi = _narrowed(lo), _narrowed(hi)
    after = np.maximum(np.searchsorted(first, last, side="right") - np.arange(len(live)) - 1, 0)
    total = np.cumsum(after)
    cuts = np.searchsorted(total, np.arange(block, int(total[-1]) if len(total) else 0, block), side="right")
    earlier, later = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for start, stop in zip([0, *cuts.tolist()], [*cuts.tolist(), len(live)]):
        counts = after[start:stop]
        # r = a + 1 + (its place in a's run): 1, 2, ... over the slice, less where a's run starts
        r = np.arange(1, int(counts.sum()) + 1, dtype=np.int64)
        r += np.repeat(np.arange(start, stop) - (np.cumsum(counts) - counts), counts)
        overlap = np.flatnonzero((np.repeat(lo[start:stop], counts) < hi[r]) & (lo[r] < np.repeat(hi[start:stop], counts)))
        if len(overlap):
            earlier.append(np.repeat(np.arange(start, stop), counts)[overlap])
            later.append(r[overlap])
    earlier, later = np.concatenate(earlier), np.concatenate(later)
    by_later = np.lexsort((earlier, later))
    return earlier[by_later], later[by_later]


def _narrowed(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 when every one fits (the addresses of a scratchpad below 2 GiB),
    else as they are: the pair tests of ``_coexisting_pairs`` then move half the bytes
    (4 million pairs on a Llama-3.2-1B decode step)."""
    if values.dtype == np.int64 and len(values) and -(1 << 31) <= values.min() and values.max() < 1 << 31:
        return values.astype(np.int32)
    return values


def _exact_ints(values: list) -> np.ndarray:
    """``values`` as an int64 array, or as an array of Python ints when one is too large for
    int64 arithmetic (a plan may say anything: offsets of 2**64 are reported, not wrapped)."""
    if not values or -(1 << 62) < min(values) and max(values) < 1 << 62:
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=object)


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
