"""The workload graph: ops and tensors with shapes, sizes and MACs.

``Graph`` is a value: built once (by the ONNX importer, the trace loader or a generator),
then only read. Ids are positions: ``graph.tensors[t.id] is t`` and ``graph.ops[o.id] is o``.
The op list order is the model's definition order, the "default" schedule.

Hot analyses use the numpy views built lazily by ``Graph.arrays`` (sizes, CSR lists of
op inputs/outputs), not the Python objects.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
import functools
import itertools
import math
import operator
from functools import cached_property

import numpy as np

from npusim.errors import TraceError
from npusim.graph.ops.shapes import INT, INTS
from npusim.util.fast_init import twin_constructor

TENSOR_KINDS = ("input", "weight", "activation", "output")
#: Kinds of tensors that start in DRAM (``Tensor.in_dram_initially``).
DRAM_KINDS = ("input", "weight")
assert TENSOR_KINDS[:len(DRAM_KINDS)] == DRAM_KINDS  # ``_tensor_columns_hold`` relies on it
#: Kinds of tensors only tiled graphs have (``npusim.graph.tiling``): the partial sums of a
#: reduction chained in a core's accumulators, which take no scratchpad or DRAM bytes.
TILED_KINDS = ("accumulator",)



def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a contiguous row-major tensor (memoised by shape: every tile's view
    asks for its base's)."""
    return _row_major_strides(shape) if type(shape) is tuple else _row_major_strides.__wrapped__(shape)


@functools.lru_cache(maxsize=65536)
def _row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for dim in reversed(shape):
        strides.append(acc)
        acc *= dim
    return tuple(reversed(strides))


@dataclass(frozen=True, slots=True)
class View:
    """A strided view of a base tensor (in elements): what a tile is.

    ``base`` names the tensor of the untiled graph whose DRAM copy the view addresses;
    element (i0, i1, ...) of the view is element ``offset + sum(i_k * strides[k])`` of the base.
    """

    base: str
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Tensor:
    """A tensor: a contiguous row-major buffer of ``elements * itemsize`` bytes.

    ``kind``: ``input`` (graph data input, starts in DRAM), ``weight`` (parameter or constant,
    starts in DRAM), ``activation`` (intermediate), ``output`` (graph output: must reach DRAM).

    Tiled graphs add views (``view`` set): a *written* view is produced by a tile op; a *read*
    view of an activation has no producer and lists in ``sources`` the tensors whose stores
    put its bytes in DRAM, so it can be loaded only after them.
    """

    id: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    itemsize: int
    kind: str
    producer: int | None = None
    consumers: tuple[int, ...] = ()
    view: View | None = None
    sources: tuple[int, ...] = ()

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def size(self) -> int:
        """Bytes in the scratchpad or DRAM (none for partial sums held in a core's accumulators)."""
        return 0 if self.kind == "accumulator" else math.prod(self.shape) * self.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Row-major strides in elements."""
        return row_major_strides(self.shape)

    @property
    def in_dram_initially(self) -> bool:
        return self.kind in DRAM_KINDS


@dataclass(frozen=True, slots=True)
class ConvLoops:
    """A 1-D or 2-D convolution's loop nest, as an unrolled array maps it (``npusim.hw.mapping``;
    ZigZag's layer dimensions): batch ``b``, groups ``g``, output channels ``k`` and input
    channels ``c`` per group, output rows and columns ``oy``/``ox``, kernel ``fy``/``fx``, strides,
    dilations, and the input's rows and columns ``iy``/``ix``."""

    b: int
    g: int
    k: int
    c: int
    oy: int
    ox: int
    fy: int
    fx: int
    sy: int = 1
    sx: int = 1
    dy: int = 1
    dx: int = 1
    iy: int = 0
    ix: int = 0


def conv_loops(attrs: dict, x: tuple, w: tuple, y: tuple) -> ConvLoops | None:
    """The loop nest of a Conv with input ``x`` (N, C, [H,] W), weights ``w`` and output ``y``
    shapes (None for other ranks, inconsistent shapes or attributes of the wrong type: the
    graph is built before the trace contract judges its attributes, which then says what is
    wrong)."""
    if not (len(x) == len(w) == len(y) and len(x) in (3, 4)) or not all(isinstance(d, int) for d in (*x, *w, *y)):
        return None
    if INT(attrs.get("group", 1)) or any(INTS(attrs[name]) for name in ("strides", "dilations") if name in attrs):
        return None
    group = int(attrs.get("group", 1) or 1)
    strides = list(attrs.get("strides") or [1] * (len(x) - 2))
    dilations = list(attrs.get("dilations") or [1] * (len(x) - 2))
    if len(x) == 3:  # 1-D: one row
        x, w, y = (*x[:2], 1, x[2]), (*w[:2], 1, w[2]), (*y[:2], 1, y[2])
        strides, dilations = [1, *strides], [1, *dilations]
    if group < 1 or y[1] % group or len(strides) != 2 or len(dilations) != 2:
        return None
    return ConvLoops(b=x[0], g=group, k=y[1] // group, c=w[1], oy=y[2], ox=y[3], fy=w[2], fx=w[3],
                     sy=int(strides[0]), sx=int(strides[1]), dy=int(dilations[0]), dx=int(dilations[1]),
                     iy=x[2], ix=x[3])


@dataclass(frozen=True, slots=True)
class Gemm:
    """The (batched) GEMM an op maps to on a PE array: ``batch`` independent M×K·K×N products.

    For a convolution (implicit GEMM, as SCALE-Sim maps it): M = output pixels, N = output
    channels per group, K = kernel window × input channels per group, batch = groups (a batch
    of N > 1 images folds into M). ``loops``: a convolution's own loop nest, for an array that
    unrolls its dimensions (``cores.unroll``); not part of the GEMM's identity.
    """

    m: int
    n: int
    k: int
    batch: int = 1
    loops: ConvLoops | None = field(default=None, compare=False)

    @property
    def macs(self) -> int:
        return self.batch * self.m * self.n * self.k


@dataclass(frozen=True, slots=True)
class Op:
    """An operator. ``inputs``/``outputs`` are tensor ids in ONNX argument order."""

    id: int
    name: str
    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    attrs: dict = field(default_factory=dict, compare=False, hash=False)
    macs: int = 0
    vector_ops: int = 0
    gemm: Gemm | None = None

    @property
    def tensors(self) -> tuple[int, ...]:
        """Distinct tensors the op touches, inputs first (an input repeated is listed once)."""
        return tuple(dict.fromkeys(self.inputs + self.outputs))


@dataclass(frozen=True)
class GraphArrays:
    """Numpy views of a graph for hot loops."""

    tensor_size: np.ndarray  # int64[n_tensors]
    tensor_kind: np.ndarray  # int8[n_tensors], index into TENSOR_KINDS
    producer: np.ndarray  # int64[n_tensors], -1 for none
    op_tensor_ptr: np.ndarray  # int64[n_ops+1], CSR into op_tensor_idx
    op_tensor_idx: np.ndarray  # int64[...], distinct tensors of each op (inputs then outputs)
    op_input_ptr: np.ndarray
    op_input_idx: np.ndarray  # distinct inputs of each op
    op_output_ptr: np.ndarray
    op_output_idx: np.ndarray
    source_ptr: np.ndarray  # int64[n_tensors+1], CSR into source_idx
    source_idx: np.ndarray  # the sources of each tensor (Tensor.sources), in order

    def sources_of(self, tensors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(how many sources each of ``tensors`` has, all their sources one tensor after the
        other): ``Tensor.sources`` of many tensors at once."""
        start, counts = self.source_ptr[tensors], np.diff(self.source_ptr)[tensors]
        total = int(counts.sum())
        if not total:
            return counts, self.source_idx[:0]
        # positions start[j] .. start[j] + counts[j] - 1 of each tensor j, one after the other
        offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        return counts, self.source_idx[np.repeat(start, counts) + offsets]


@dataclass(frozen=True)
class Graph:
    name: str
    tensors: tuple[Tensor, ...]
    ops: tuple[Op, ...]
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        check_graph(self)

    @property
    def n_ops(self) -> int:
        return len(self.ops)

    @property
    def n_tensors(self) -> int:
        return len(self.tensors)

    @cached_property
    def tensor_by_name(self) -> Mapping[str, Tensor]:
        return _by_name(self.tensors)

    @cached_property
    def op_by_name(self) -> Mapping[str, Op]:
        return _by_name(self.ops)

    def tensor(self, key: int | str) -> Tensor:
        return self.tensors[key] if isinstance(key, int) else self.tensor_by_name[key]

    def op(self, key: int | str) -> Op:
        return self.ops[key] if isinstance(key, int) else self.op_by_name[key]

    @cached_property
    def dram_sources(self) -> frozenset[int]:
        """Tensors some read view is loaded from: they must be stored once produced."""
        sources = getattr(self.tensors, "sources", None)  # the column of a tiled graph's
        if sources is not None:
            return frozenset(sources)
        return frozenset(s for t in self.tensors for s in t.sources)

    def bytes_of(self, kinds: tuple[str, ...]) -> int:
        return sum(t.size for t in self.tensors if t.kind in kinds)

    @cached_property
    def arrays(self) -> GraphArrays:
        ops, tensors = self.ops, self.tensors
        if hasattr(ops, "input_ptr") and hasattr(tensors, "sizes"):  # columns (npusim.graph.columns)
            i_ptr, i_all = ops.column("input_ptr").copy(), ops.column("inputs")
            o_ptr, o_idx = ops.column("output_ptr").copy(), ops.column("outputs")
            tensor_size, tensor_kind = tensors.sizes(), tensors.column("kind").copy()
            producer = tensors.column("producer").copy()
            s_ptr, s_idx = tensors.column("source_ptr"), tensors.column("sources")
        else:
            kinds = {k: i for i, k in enumerate(TENSOR_KINDS + TILED_KINDS)}
            inputs, outputs = [o.inputs for o in ops], [o.outputs for o in ops]
            i_ptr, i_all = _csr(list(map(len, inputs)), itertools.chain.from_iterable(inputs))
            o_ptr, o_idx = _csr(list(map(len, outputs)), itertools.chain.from_iterable(outputs))
            tensor_size = np.array([0 if t.kind == "accumulator" else math.prod(t.shape) * t.itemsize  # Tensor.size
                                    for t in tensors], dtype=np.int64)
            tensor_kind = np.array([kinds[t.kind] for t in tensors], dtype=np.int8)
            producer = np.array([-1 if t.producer is None else t.producer for t in tensors], dtype=np.int64)
            sources = [t.sources for t in tensors]
            s_ptr, s_idx = _csr(list(map(len, sources)), itertools.chain.from_iterable(sources))
        # each op's inputs then outputs (Op.tensors before its repeats go), placed by array:
        # input j of op k at i_ptr[k] + o_ptr[k] + j, output j at i_ptr[k + 1] + o_ptr[k] + j
        t_ptr = i_ptr + o_ptr
        t_all = np.empty(int(t_ptr[-1]), dtype=np.int64)
        t_all[np.arange(len(i_all)) + np.repeat(o_ptr[:-1], np.diff(i_ptr))] = i_all
        t_all[np.arange(len(o_idx)) + np.repeat(i_ptr[1:], np.diff(o_ptr))] = o_idx
        n_t = len(tensors)
        t_ptr, t_idx = distinct_csr(t_ptr, t_all, n_t)
        i_ptr, i_idx = distinct_csr(i_ptr, i_all, n_t)
        return GraphArrays(
            tensor_size=tensor_size, tensor_kind=tensor_kind, producer=producer,
            op_tensor_ptr=t_ptr, op_tensor_idx=t_idx,
            op_input_ptr=i_ptr, op_input_idx=i_idx,
            op_output_ptr=o_ptr, op_output_idx=o_idx, source_ptr=s_ptr, source_idx=s_idx,
        )


class _ByName(Mapping):
    """Name -> record of a graph stored as columns: a dict of names to ids, the record made
    when asked (``Graph.tensor_by_name``, ``Graph.op_by_name``)."""

    def __init__(self, records) -> None:
        self.records = records
        self.ids = {name: i for i, name in enumerate(records.names)}

    def __getitem__(self, name):
        return self.records[self.ids[name]]

    def __contains__(self, name) -> bool:
        try:
            return name in self.ids
        except TypeError:  # (a dict's answer to an unhashable key)
            return False

    def __iter__(self):
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def _by_name(records) -> Mapping:
    """``{record.name: record}`` of a graph's tensors or ops (``_ByName`` for columns)."""
    if hasattr(records, "names"):
        return _ByName(records)
    return {r.name: r for r in records}


def record_fields(records, *names: str) -> list[list]:
    """Each named field of every record of a graph's tensors or ops, as a list in id order:
    read from the columns of a tiled graph (``npusim.graph.columns``) without making its
    records, else from each record."""
    field_lists = getattr(records, "field_lists", None)
    if field_lists is not None:
        return field_lists(names)
    return [list(map(operator.attrgetter(name), records)) for name in names]


def record_name(records, i: int) -> str:
    """The name of record i of a graph's tensors or ops (without making it, from columns)."""
    names = getattr(records, "names", None)
    return names[i] if names is not None else records[i].name


def tensor_fields(graph: "Graph", *names: str) -> list[list]:
    """``record_fields`` of the graph's tensors."""
    return record_fields(graph.tensors, *names)


def op_fields(graph: "Graph", *names: str) -> list[list]:
    """``record_fields`` of the graph's ops."""
    return record_fields(graph.ops, *names)


def op_attributes(graph: "Graph"):
    """A function giving op i's attributes (``Op.attrs``), from columns without making the op."""
    return _field_getter(graph.ops, "attributes", "attrs")


def tensor_view_getter(graph: "Graph"):
    """A function giving tensor t's view (``Tensor.view``), from columns without making the tensor."""
    return _field_getter(graph.tensors, "view_at", "view")


def _field_getter(records, column_method: str, field_name: str):
    """The columns' ``column_method`` (record i's field without making the record), else a
    function reading ``field_name`` of record i."""
    method = getattr(records, column_method, None)
    if method is not None:
        return method
    return lambda i: getattr(records[i], field_name)


def op_origins(graph: "Graph") -> list[str]:
    """Per op, the name of the op it stands for: a tile's ``attrs['tile_of']``, else its own."""
    ops = graph.ops
    origins = getattr(ops, "origins", None)
    if origins is not None:
        return origins()
    return [op.attrs.get("tile_of", op.name) if op.attrs else op.name for op in ops]


def buffer_names(graph: "Graph") -> list[str]:
    """Per tensor, the DRAM buffer a DMA of it reads or writes: its view's base, else its own
    name (``npusim.plan.dram.buffer_of`` of every tensor)."""
    tensors = graph.tensors
    buffers = getattr(tensors, "buffers", None)
    if buffers is not None:
        return buffers()
    return [t.name if t.view is None else t.view.base for t in tensors]


def _csr(lengths: list[int], entries) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, idx) of lists given by their lengths and their entries one after the other."""
    ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(lengths)
    return ptr, np.fromiter(entries, dtype=np.int64, count=int(ptr[-1]))


def distinct_csr(ptr: np.ndarray, idx: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """The CSR lists (ptr, idx) of ints in [0, bound) with each list's repeats removed, its
    entries in the order they first appear in it (``dict.fromkeys``), for all lists at once:
    the entries keyed by (list, entry), the first of each key kept (``np.unique``'s first
    occurrences), in their order. ``ptr`` is updated in place."""
    owner = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    _, first = np.unique(owner * bound + idx, return_index=True)
    if len(first) == len(idx):  # nothing repeated in any list
        return ptr, idx
    first.sort()
    ptr[1:] = np.cumsum(np.bincount(owner[first], minlength=len(ptr) - 1))
    return ptr, idx[first]


#: ``Tensor(...)`` and ``Op(...)`` with every field given, in order, made faster
#: (``npusim.util.fast_init.twin_constructor``): a tiled graph has 100,000s of them
#: (``graph_from_ids``).
_new_tensor = twin_constructor(Tensor)
_new_op = twin_constructor(Op)


def check_graph(graph: Graph) -> None:
    """Reject graphs that break the Graph contract, naming the op or tensor at fault.

    Written for speed (a tiled graph has 100,000s of tensors and ops, and is checked when
    built): one pass over the tensors and one over the ops, in that order, each test in turn;
    cycles are looked for only when some op reads what a later op makes (``_check_acyclic``)."""
    where = f"graph {graph.name!r}"
    tensors, ops = graph.tensors, graph.ops
    n_t = len(tensors)
    _check_tensors(graph, where)
    in_order = True  # every op after the producers it depends on (then no cycle is possible)
    for i, o in enumerate(ops):
        if o.id != i:
            raise TraceError(f"{where}: op {o.name!r} has id {o.id}, expected {i} (its position)")
        if not o.outputs:
            raise TraceError(f"{where}: op {o.name!r} has no outputs")
        for t in o.inputs + o.outputs:
            if not 0 <= t < n_t:
                raise TraceError(f"{where}: op {o.name!r} names tensor {t}, which does not exist")
        for t in o.outputs:
            if tensors[t].producer != i:
                raise TraceError(
                    f"{where}: op {o.name!r} outputs tensor {tensors[t].name!r} "
                    f"whose producer is {tensors[t].producer}"
                )
        for t in o.inputs:
            tensor = tensors[t]
            if i not in tensor.consumers:
                raise TraceError(
                    f"{where}: op {o.name!r} reads tensor {tensor.name!r} "
                    "but is not among its consumers"
                )
            if in_order:
                p = tensor.producer
                if p is not None and p >= i:
                    in_order = False
                for src in tensor.sources:
                    if tensors[src].producer >= i:
                        in_order = False
    if not in_order:
        _check_acyclic(graph, where)


def _check_tensors(graph: Graph, where: str) -> None:
    """``check_graph``'s pass over the tensors, each in turn (``_check_tensor``)."""
    tensors = graph.tensors
    n_t, n_o = len(tensors), len(graph.ops)
    tiled = bool(graph.meta.get("tiled_from"))
    for i, t in enumerate(tensors):
        _check_tensor(t, i, where, tiled, n_t, n_o, tensors)


def _check_tensor(t: Tensor, i: int, where: str, tiled: bool, n_t: int, n_o: int, tensors) -> None:
    """The Graph contract's tests of tensor ``t`` at position ``i`` (``check_graph``)."""
    kind, producer = t.kind, t.producer
    if t.id != i:
        raise TraceError(f"{where}: tensor {t.name!r} has id {t.id}, expected {i} (its position)")
    if kind not in TENSOR_KINDS and not (kind in TILED_KINDS and tiled):
        raise TraceError(f"{where}: tensor {t.name!r} has kind {kind!r}, expected one of {TENSOR_KINDS}")
    for d in t.shape:
        if not isinstance(d, int) or d <= 0:
            raise TraceError(
                f"{where}: tensor {t.name!r} has shape {list(t.shape)}, expected positive integer dims"
            )
    if t.itemsize <= 0:
        raise TraceError(f"{where}: tensor {t.name!r} has itemsize {t.itemsize}, expected > 0")
    if producer is not None:
        if not 0 <= producer < n_o:
            raise TraceError(f"{where}: tensor {t.name!r} names producer op {producer}, which does not exist")
        if kind in DRAM_KINDS:  # t.in_dram_initially
            raise TraceError(f"{where}: {kind} tensor {t.name!r} cannot have a producer op")
        if t.sources:
            raise TraceError(f"{where}: tensor {t.name!r} has both a producer op and DRAM sources")
    elif kind in ("activation", "output") and not t.sources:
        raise TraceError(f"{where}: {kind} tensor {t.name!r} has no producer op")
    for src in t.sources:
        if not 0 <= src < n_t or tensors[src].producer is None:
            raise TraceError(f"{where}: tensor {t.name!r} lists source {src}, which is not a produced tensor")


def _check_acyclic(graph: Graph, where: str) -> None:
    """Kahn's algorithm; TraceError naming an op on a cycle if there is one."""
    n_o = len(graph.ops)
    indegree = [0] * n_o
    preds = op_predecessors(graph)
    succs: list[set[int]] = [set() for _ in range(n_o)]
    for o, ps in enumerate(preds):
        indegree[o] = len(ps)
        for p in ps:
            succs[p].add(o)
    ready = [o for o in range(n_o) if indegree[o] == 0]
    seen = 0
    while ready:
        op = ready.pop()
        seen += 1
        for c in succs[op]:
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    if seen != n_o:
        stuck = next(graph.ops[i].name for i in range(n_o) if indegree[i] > 0)
        raise TraceError(f"{where}: the graph has a cycle through op {stuck!r}")


def op_predecessors(graph: Graph) -> list[set[int]]:
    """Ops each op must follow: producers of its inputs, and, for inputs that are read views,
    the producers of their sources (the data reaches it through DRAM)."""
    preds = []
    for o in graph.ops:
        ps = set()
        for t in o.inputs:
            tensor = graph.tensors[t]
            if tensor.producer is not None:
                ps.add(tensor.producer)
            for src in tensor.sources:
                ps.add(graph.tensors[src].producer)
        ps.discard(None)
        preds.append(ps)
    return preds


def build_graph(name: str, tensors: list[dict], ops: list[dict], meta: dict | None = None) -> Graph:
    """Build a Graph from plain records, deriving producers and consumers.

    ``tensors``: dicts with name, shape, dtype, itemsize, kind.
    ``ops``: dicts with name, kind, inputs, outputs (tensor names), attrs, macs, vector_ops, gemm.
    It checks references and cycles only: records a user builds go through
    ``npusim.graph_from_records`` (the trace contract, as a file is held to).
    """
    index = _name_index(name, tensors)

    def lookup(owner, tname):
        if tname not in index:
            raise TraceError(f"graph {name!r}: {owner!r} names unknown tensor {tname!r}")
        return index[tname]

    producer: dict[int, int] = {}
    consumers: list[list[int]] = [[] for _ in tensors]
    built_ops = []
    for oi, o in enumerate(ops):
        ins = tuple(lookup(o["name"], t) for t in o["inputs"])
        outs = tuple(lookup(o["name"], t) for t in o["outputs"])
        for t in outs:
            if t in producer:
                raise TraceError(
                    f"graph {name!r}: tensor {tensors[t]['name']!r} is produced by both "
                    f"{ops[producer[t]]['name']!r} and {o['name']!r}"
                )
            producer[t] = oi
        for t in dict.fromkeys(ins):
            consumers[t].append(oi)
        gemm = o.get("gemm")
        gemm = Gemm(**gemm) if isinstance(gemm, dict) else gemm
        attrs = dict(o.get("attrs", {}))
        if gemm is not None and gemm.loops is None and o["kind"] == "Conv" and len(ins) >= 2 and outs:
            gemm = _with_conv_loops(gemm, attrs, tuple(tensors[ins[0]]["shape"]), tuple(tensors[ins[1]]["shape"]),
                                    tuple(tensors[outs[0]]["shape"]))
        built_ops.append(Op(
            id=oi, name=o["name"], kind=o["kind"], inputs=ins, outputs=outs,
            attrs=attrs, macs=int(o.get("macs", 0)),
            vector_ops=int(o.get("vector_ops", 0)),
            gemm=gemm,
        ))
    built_tensors = tuple(
        Tensor(
            id=i, name=t["name"], shape=tuple(t["shape"]), dtype=t["dtype"],
            itemsize=int(t["itemsize"]), kind=t["kind"], producer=producer.get(i),
            consumers=tuple(consumers[i]), view=_view_of(t),
            sources=tuple(lookup(t["name"], s) for s in t.get("sources", ())),
        )
        for i, t in enumerate(tensors)
    )
    return Graph(name=name, tensors=built_tensors, ops=tuple(built_ops), meta=dict(meta or {}))


def graph_from_ids(name: str, tensors: list[tuple], ops, meta: dict | None = None) -> Graph:
    """``build_graph`` for records that refer to tensors by id (their position in ``tensors``),
    as a builder that numbers tensors as it makes them has them (the tiled expansion,
    ``npusim.graph.tiling``): no lookups by name, and tensors and ops built straight from tuples.

    ``tensors``: tuples ``(name, shape, dtype, itemsize, kind, view, sources)``, the shape a
    tuple of ints and the sources ids. ``ops``: tuples ``(name, kind, inputs, outputs, attrs,
    macs, vector_ops, gemm)``, inputs and outputs ids, gemm a Gemm or None; the graph keeps
    each attrs dict as given (the caller makes one per op). Or the ``OpColumnsBuilder`` those
    records were appended to (the tiled expansion's, ``npusim.graph.columns``), which the
    graph takes over.

    The graph is checked as ``check_graph`` does, less what this construction makes true
    whatever the records: ids are positions, every op has the ids of its outputs' producer
    and of its inputs' consumers, each output has one producer (tested here), and every id
    an op names is a tensor's (tested here, with the op's having an output). The tensors are
    checked in full (``_check_tensors``), and the order as ``check_graph`` checks it, by tensor
    rather than by reference (``_check_order``)."""
    names = [t[0] for t in tensors]
    if len(set(names)) != len(names):
        _name_index(name, [{"name": n} for n in names])  # raises, naming the first one used twice
    n_t = len(tensors)
    links = _links_by_columns(ops, tensors, n_t) if hasattr(ops, "build") else None
    if links is None:  # records (or a builder's whose columns failed a test: the loop names the fault)
        producer, consumers, ops = _links_by_records(name, names, tensors,
                                                     ops.records() if hasattr(ops, "build") else ops, n_t)
    else:
        producer, consumers = links
    graph = _graph_of_records(name, tensors, ops, producer, consumers, dict(meta or {}))
    where = f"graph {name!r}"
    if not _tensor_columns_hold(tensors, producer, bool((meta or {}).get("tiled_from"))):
        _check_tensors(graph, where)  # raises, naming the first tensor at fault
    _check_order(graph, where)
    return graph


def _links_by_records(name: str, names: list[str], tensors: list[tuple], ops: list[tuple], n_t: int):
    """(each tensor's producer, the consumer rows, the op records with each Conv's loop nest)
    of ``graph_from_ids``'s records, testing each op's ids (TraceError naming the first at
    fault)."""
    producer: list[int | None] = [None] * n_t
    read_tensor, read_by = array("q"), array("q")  # (tensor, op) of each op's distinct inputs: the consumer rows
    looped_records = []  # (op, its record with its Conv's loop nest)
    for oi, (op_name, kind, ins, outs, attrs, macs, vector_ops, gemm) in enumerate(ops):
        ins, outs = tuple(ins), tuple(outs)
        if not outs:
            raise TraceError(f"graph {name!r}: op {op_name!r} has no outputs")
        for t in outs:
            if not 0 <= t < n_t:
                raise TraceError(f"graph {name!r}: op {op_name!r} names tensor {t}, which does not exist")
            if producer[t] is not None:
                raise TraceError(f"graph {name!r}: tensor {names[t]!r} is produced by both "
                                 f"{ops[producer[t]][0]!r} and {op_name!r}")
            producer[t] = oi
        for t in ins:
            if not 0 <= t < n_t:
                raise TraceError(f"graph {name!r}: op {op_name!r} names tensor {t}, which does not exist")
        distinct = ins if len(ins) < 2 or len(set(ins)) == len(ins) else tuple(dict.fromkeys(ins))  # (read once)
        read_tensor.extend(distinct)
        read_by.extend(itertools.repeat(oi, len(distinct)))
        if gemm is not None and gemm.loops is None and kind == "Conv" and len(ins) >= 2:
            looped = _with_conv_loops(gemm, attrs if type(attrs) is dict else attrs.as_dict(), tensors[ins[0]][1],
                                      tensors[ins[1]][1], tensors[outs[0]][1])
            if looped is not gemm:
                looped_records.append((oi, (op_name, kind, ins, outs, attrs, macs, vector_ops, looped)))
    if looped_records:  # (into a copy: the caller's list stays as given)
        ops = list(ops)
        for oi, record in looped_records:
            ops[oi] = record
    return producer, _consumer_rows(np.frombuffer(read_tensor, np.int64), np.frombuffer(read_by, np.int64), n_t), ops


def _links_by_columns(builder, tensors: list[tuple], n_t: int):
    """``_links_by_records`` of an ``OpColumnsBuilder``, by array: (the producers as an array,
    -1 for none; the consumer rows), each Conv given its loop nest in the builder. None when a
    test fails (an op without outputs, an id out of range, a tensor produced twice) or the
    builder holds records: the loop over the records then names the fault."""
    if builder.overflow is not None:
        return None
    input_ptr, inputs = np.frombuffer(builder.input_ptr, np.int64), np.frombuffer(builder.inputs, np.int64)
    output_ptr, outputs = np.frombuffer(builder.output_ptr, np.int64), np.frombuffer(builder.outputs, np.int64)
    n_o, per_op = len(builder), np.diff(output_ptr)
    if (per_op <= 0).any() or any(len(ids) and (ids.min() < 0 or ids.max() >= n_t) for ids in (inputs, outputs)):
        return None
    if len(outputs) and np.bincount(outputs, minlength=n_t).max() > 1:
        return None
    producer = np.full(n_t, -1, np.int64)
    producer[outputs] = np.repeat(np.arange(n_o, dtype=np.int64), per_op)
    owner = np.repeat(np.arange(n_o, dtype=np.int64), np.diff(input_ptr))
    _, first = np.unique(owner * max(n_t, 1) + inputs, return_index=True)  # each op's distinct inputs
    first.sort()
    consumers = _consumer_rows(inputs[first], owner[first], n_t)
    if "Conv" in builder.kinds:
        gemm_of, gemms = builder.gemm, builder.gemms
        for oi in np.flatnonzero(np.frombuffer(builder.kind, np.int32) == builder.kinds.index("Conv")).tolist():
            if gemm_of[oi] < 0 or gemms[gemm_of[oi]].loops is not None:
                continue  # (a tile's Gemm has its loop nest: no record made)
            _, _, ins, outs, attrs, _, _, gemm = builder.record(oi)
            if len(ins) >= 2:
                looped = _with_conv_loops(gemm, attrs, tensors[ins[0]][1], tensors[ins[1]][1], tensors[outs[0]][1])
                if looped is not gemm:
                    builder.set_gemm(oi, looped)
    return producer, consumers


def _consumer_rows(tensor: np.ndarray, op: np.ndarray, n_t: int) -> tuple[array, array]:
    """The consumers of each tensor as compressed rows (ptr, ops), each row ascending, from
    the (tensor, op) pairs of every op's distinct inputs listed op by op."""
    ptr = np.zeros(n_t + 1, np.int64)
    np.cumsum(np.bincount(tensor, minlength=n_t), out=ptr[1:])
    by_tensor = op[np.argsort(tensor, kind="stable")]  # (stable: ops ascending)
    return array("q", ptr.tobytes()), array("q", by_tensor.tobytes())


def _graph_of_records(name: str, tensors: list[tuple], ops: list[tuple], producer: list,
                      consumers: tuple[array, array], meta: dict) -> Graph:
    """The graph of ``graph_from_ids``'s records (``consumers``: rows, ``_consumer_rows``): its
    tensors and ops as columns (``npusim.graph.columns``), or as objects when a record fits no
    column."""
    from npusim.graph.columns import OpColumns, TensorColumns, row_tuples  # lazy: columns imports model
    tensor_columns = TensorColumns.of_records(tensors, producer, consumers)
    op_columns = None if tensor_columns is None else ops.build() if hasattr(ops, "build") else OpColumns.of_records(ops)
    if op_columns is not None:
        return _unchecked_graph(name, tensor_columns, op_columns, meta)
    if hasattr(ops, "build"):
        ops = ops.records()
    if isinstance(producer, np.ndarray):
        producer = [None if p < 0 else p for p in producer.tolist()]
    built_tensors = tuple(
        _new_tensor(i, t_name, shape, dtype, itemsize, kind, producer[i], readers, view, tuple(sources))
        for i, ((t_name, shape, dtype, itemsize, kind, view, sources), readers)
        in enumerate(zip(tensors, row_tuples(*consumers))))
    built_ops = tuple(_new_op(oi, op_name, kind, tuple(ins), tuple(outs),
                              attrs if type(attrs) is dict else attrs.as_dict(), int(macs), int(vector_ops), gemm)
                      for oi, (op_name, kind, ins, outs, attrs, macs, vector_ops, gemm) in enumerate(ops))
    return _unchecked_graph(name, built_tensors, built_ops, meta)


#: A tensor kind's code in ``_tensor_columns_hold`` (the kinds a Graph allows, then the tiled ones).
_KIND_CODES = {kind: code for code, kind in enumerate(TENSOR_KINDS + TILED_KINDS)}


def _tensor_columns_hold(records: list[tuple], producer: list, tiled: bool) -> bool:
    """Whether the tensors of ``graph_from_ids``'s ``records`` with these producers pass
    ``_check_tensor`` (their ids are their positions and their producers ops: that function
    makes them so), tested column by column: the distinct kinds, shapes and item sizes, then
    the producer, kind and sources of every tensor as arrays. False for any doubt; the caller
    then runs ``_check_tensors`` for its message."""
    allowed = TENSOR_KINDS + TILED_KINDS if tiled else TENSOR_KINDS
    n = len(records)
    kinds, sources = operator.itemgetter(4), operator.itemgetter(6)
    try:
        if (not set(map(kinds, records)) <= set(allowed)
                or not all(size > 0 for size in set(map(operator.itemgetter(3), records)))):
            return False
        if not all(isinstance(d, int) and d > 0 for shape in set(map(operator.itemgetter(1), records))
                   for d in shape):
            return False
        code = np.fromiter(map(_KIND_CODES.__getitem__, map(kinds, records)), np.int8, n)
    except (TypeError, ValueError):  # an unhashable or unordered field: the checks one by one say
        return False
    produced = (producer >= 0 if isinstance(producer, np.ndarray)
                else np.fromiter(map(operator.is_not, producer, itertools.repeat(None)), bool, n))
    has_sources = np.fromiter(map(bool, map(sources, records)), bool, n)
    in_dram = code < len(DRAM_KINDS)  # TENSOR_KINDS begins with DRAM_KINDS
    made_on_chip = (code == _KIND_CODES["activation"]) | (code == _KIND_CODES["output"])
    if (produced & (in_dram | has_sources)).any() or (~produced & made_on_chip & ~has_sources).any():
        return False
    listed = np.fromiter(itertools.chain.from_iterable(map(sources, records)), np.int64)
    return not len(listed) or bool((listed >= 0).all() and (listed < n).all() and produced[listed].all())


def _unchecked_graph(name: str, tensors: tuple, ops: tuple, meta: dict) -> Graph:
    """``Graph(name, tensors, ops, meta)`` without its ``check_graph``, for a builder that
    checks what its construction does not make true itself (``graph_from_ids``). The fields
    are set as the frozen dataclass's own ``__init__`` sets them."""
    graph = object.__new__(Graph)
    for field_name, value in (("name", name), ("tensors", tensors), ("ops", ops), ("meta", meta)):
        object.__setattr__(graph, field_name, value)
    return graph


def _check_order(graph: Graph, where: str) -> None:
    """``check_graph``'s test of the order, by tensor: every op comes after the producers it
    depends on when each tensor's producer, and the producers of its sources, come before
    its first consumer (the earliest of the ops that read it); else the graph must have no
    cycle (``_check_acyclic``). Needs the tensors checked (sources are produced tensors)."""
    tensors = graph.tensors
    if hasattr(tensors, "consumer_ptr"):  # columns (npusim.graph.columns): by array
        if not _order_holds_by_columns(tensors):
            _check_acyclic(graph, where)
        return
    for t in tensors:
        if not t.consumers:
            continue
        first = min(t.consumers)
        if t.producer is not None and t.producer >= first:
            return _check_acyclic(graph, where)
        for src in t.sources:
            if tensors[src].producer >= first:
                return _check_acyclic(graph, where)


def _order_holds_by_columns(tensors) -> bool:
    """``_check_order``'s test over tensor columns: each consumed tensor's producer, and the
    producers of its sources, come before its first consumer (consumer rows ascend: lowest
    first)."""
    ptr, consumers, producer = tensors.column("consumer_ptr"), tensors.column("consumers"), tensors.column("producer")
    read = np.flatnonzero(np.diff(ptr) > 0)
    first = np.full(len(producer), np.iinfo(np.int64).max)
    first[read] = consumers[ptr[read]]
    if (producer[read] >= first[read]).any():
        return False
    source_ptr, sources = tensors.column("source_ptr"), tensors.column("sources")
    owner = np.repeat(np.arange(len(producer)), np.diff(source_ptr))
    return not (producer[sources] >= first[owner]).any()


def _name_index(name: str, tensors: list[dict]) -> dict[str, int]:
    """Tensor name -> position; TraceError for a name used twice."""
    index = {}
    for i, t in enumerate(tensors):
        if t["name"] in index:
            raise TraceError(f"graph {name!r}: tensor name {t['name']!r} is used twice")
        index[t["name"]] = i
    return index


def _with_conv_loops(gemm: Gemm, attrs: dict, x: tuple, w: tuple, y: tuple) -> Gemm:
    """A Conv's Gemm with its loop nest, from its input, weight and output shapes, when they
    agree with the Gemm (else the Gemm as it is)."""
    loops = conv_loops(attrs, x, w, y)
    if loops is not None and loops.b * loops.oy * loops.ox == gemm.m and loops.k == gemm.n \
            and loops.c * loops.fy * loops.fx == gemm.k and loops.g == gemm.batch:
        return Gemm(gemm.m, gemm.n, gemm.k, gemm.batch, loops)
    return gemm


def _view_of(t: dict) -> View | None:
    v = t.get("view")
    if v is None or isinstance(v, View):
        return v
    return View(base=v["base"], offset=int(v["offset"]), shape=tuple(v["shape"]), strides=tuple(v["strides"]))
