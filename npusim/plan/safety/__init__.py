"""Multi-stream safety: which pairs of tensors may never share scratchpad addresses.

MindSpore paper (Lamprou et al., MLSys 2023), Section 3 and Appendices A-B. Ops are assigned
to streams; ops of one stream run in the plan's order, ops of different streams only wait for
their data. Two tensors form a *safe pair* (Definition 3) when no execution needs both at
once; every other pair is *unsafe* and must get disjoint addresses.

Graph model (Section 3): nodes are ops, arcs carry tensors from producer to consumers; for
each stream, an arc (i, i+1) between consecutive ops of the stream is added when none exists
("in-stream arcs", a zero-size tensor in the paper; here just an extra arc). Two npusim
specifics, both sound for the lowering in ``npusim.plan.lower``:

- a graph input or weight has no producer: it is loaded by DMA for its first consumer (in the
  plan's order), which is taken as its producing node, and it stays a destination too;
- a tensor with no consumer (a graph output written back after its producer runs) has its
  producer as its only destination, so it is live at least while it is written.

Three algorithms give the same unsafe set (Theorems 1 and 2; tested on random DAGs):

- ``algorithm1``: Ancestor Tensors (Algorithm 1): {t1, t2} is safe iff every consumer of one
  has a path to the producer of the other. Ancestor-node sets are uint64 bitsets.
- ``algorithm1_opt``: 1_opt, the same test on MaxNodes[t] (the last destination of t in each
  destination stream) instead of all destinations.
- ``algorithm2``: Stream Graph Safety (Algorithm 2 = Ancestor Streams Reuse, Algorithm 3, with
  Valid Ancestor, Algorithm 4, then Same Stream Reuse, Algorithm 5), on local orders,
  EndTime/StartTime and MaxAncId, without node bitsets. Pairs are cleared a stream at a
  time (a binary search along the stream, then suffix bitsets), not one by one;
  ``stream_graph_unsafe_pairwise`` is the pair-by-pair form the tests compare it with.

The kernels of the three are in ``npusim.plan.safety.kernels``, the plain-Python references
the tests compare them with in ``npusim.plan.safety.reference``. The relation lives in the
core (with the Plan, not with the planners) because it is part of the Plan contract: the
validator checks every multi-stream plan against it, and the stream-aware allocators place
by it.

The result is a ``SafetyRelation``: a symmetric uint64 bit matrix over the graph's tensors
(tensors no op touches are safe with everything).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from npusim.errors import PlanError
from npusim.graph.analysis import check_order
from npusim.graph.model import Graph
from npusim.util.lazy_import import lazy_import

# Numba kernels, loaded when a multi-stream plan first needs them
kernels = lazy_import("npusim.plan.safety.kernels")
bitsets = lazy_import("npusim.kernels.bitsets")

METHODS = ("alg1", "alg1_opt", "alg2")


@dataclass(frozen=True)
class SafetyInputs:
    """The stream DAG as index arrays (built once by ``prepare``)."""

    n_nodes: int
    n_tensors: int
    n_streams: int
    parent_ptr: np.ndarray  # CSR parents of each node, in-stream arcs included
    parent_idx: np.ndarray
    topo: np.ndarray  # the plan's order (topological for the augmented DAG)
    node_stream: np.ndarray  # stream index (dense 0..n_streams-1) of each node
    local: np.ndarray  # 1-based position of each node within its stream (StartTime of a node)
    prod: np.ndarray  # producing node of each tensor (-1: no op touches it)
    dest_ptr: np.ndarray  # CSR DestNodes of each tensor
    dest_idx: np.ndarray
    max_ptr: np.ndarray  # CSR MaxNodes of each tensor (one per destination stream)
    max_idx: np.ndarray


def csr(lists) -> tuple[np.ndarray, np.ndarray]:
    """Lists of ints as CSR arrays: ``idx[ptr[i]:ptr[i + 1]]`` is ``lists[i]``."""
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    idx = np.fromiter((v for x in lists for v in x), dtype=np.int64, count=int(ptr[-1]))
    return ptr, idx


def prepare(graph: Graph, order, streams) -> SafetyInputs:
    """Index arrays for the safety kernels. ``streams[op]`` is the stream of each op."""
    order = [int(o) for o in order]
    check_order(graph, order)
    if len(streams) != graph.n_ops:
        raise PlanError(f"streams lists {len(streams)} entries; expected one per op ({graph.n_ops})")
    if any(s < 0 for s in streams):
        raise PlanError(f"streams must be >= 0, got {min(streams)}")
    stream_ids = sorted(set(int(s) for s in streams))
    dense = {s: i for i, s in enumerate(stream_ids)}
    node_stream = np.array([dense[int(s)] for s in streams], dtype=np.int64)
    step = np.empty(graph.n_ops, dtype=np.int64)
    step[np.array(order, dtype=np.int64)] = np.arange(graph.n_ops)

    parents = [set() for _ in range(graph.n_ops)]
    for op in graph.ops:
        for t in op.inputs:
            p = graph.tensors[t].producer
            if p is not None:
                parents[op.id].add(p)
    local = np.zeros(graph.n_ops, dtype=np.int64)
    last_in_stream: dict[int, int] = {}
    counter: dict[int, int] = {}
    for op in order:
        s = int(node_stream[op])
        counter[s] = counter.get(s, 0) + 1
        local[op] = counter[s]
        if s in last_in_stream:
            parents[op].add(last_in_stream[s])  # in-stream arc (i, i+1)
        last_in_stream[s] = op
    parent_ptr, parent_idx = csr([sorted(p) for p in parents])

    prod = np.full(graph.n_tensors, -1, dtype=np.int64)
    dests, maxnodes = [], []
    for t in graph.tensors:
        consumers = sorted(set(t.consumers), key=lambda c: step[c])
        if t.producer is not None:
            prod[t.id] = t.producer
        elif consumers:
            prod[t.id] = consumers[0]  # loaded for its first consumer
        d = consumers if consumers else ([t.producer] if t.producer is not None else [])
        dests.append(d)
        last_of_stream: dict[int, int] = {}
        for c in d:
            s = int(node_stream[c])
            if s not in last_of_stream or local[c] > local[last_of_stream[s]]:
                last_of_stream[s] = c
        maxnodes.append(sorted(last_of_stream.values()))
    dest_ptr, dest_idx = csr(dests)
    max_ptr, max_idx = csr(maxnodes)
    return SafetyInputs(graph.n_ops, graph.n_tensors, len(stream_ids), parent_ptr, parent_idx,
                        np.array(order, dtype=np.int64), node_stream, local, prod,
                        dest_ptr, dest_idx, max_ptr, max_idx)


def stream_tables(inputs: SafetyInputs, kernel=None) -> dict:
    """The per-tensor and per-stream tables Algorithm 2 works on (paper Section 3.2)."""
    max_anc = kernels.max_ancestor_ids(inputs.parent_ptr, inputs.parent_idx, inputs.topo, inputs.node_stream,
                               inputs.local, inputs.n_streams)
    (anc_streams, t_stream, t_start, t_between, t_end, ds_ptr, ds_stream, ds_end, st_ptr,
     st_idx) = (kernel or kernels.stream_tables_kernel)(inputs.node_stream, inputs.local, inputs.prod, inputs.dest_ptr,
                                                 inputs.dest_idx, max_anc, inputs.n_streams)
    return dict(t_prod=inputs.prod, t_stream=t_stream, t_start=t_start, t_between=t_between, t_end=t_end,
                ds_ptr=ds_ptr, ds_stream=ds_stream, ds_end=ds_end, st_ptr=st_ptr, st_idx=st_idx,
                anc_streams=anc_streams, max_anc=max_anc)


def run_algorithm2(inputs: SafetyInputs, kernel=None) -> np.ndarray:
    tb = stream_tables(inputs)
    kernel = kernel or kernels.stream_graph_unsafe
    return kernel(inputs.n_tensors, tb["t_prod"], tb["t_stream"], tb["t_start"], tb["t_between"], tb["t_end"],
                  tb["ds_ptr"], tb["ds_stream"], tb["ds_end"], tb["st_ptr"], tb["st_idx"],
                  tb["anc_streams"], tb["max_anc"])


def run_algorithm1(inputs: SafetyInputs, optimized: bool, kernel=None) -> np.ndarray:
    anc = bitsets.ancestor_bitsets(inputs.parent_ptr, inputs.parent_idx, inputs.topo, inputs.n_nodes)
    ptr, idx = (inputs.max_ptr, inputs.max_idx) if optimized else (inputs.dest_ptr, inputs.dest_idx)
    return (kernel or kernels.ancestor_tensors_unsafe)(inputs.prod, ptr, idx, anc)


# --------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class SafetyRelation:
    """Unsafe pairs over a graph's tensors, as a symmetric bit matrix (rows of uint64 words)."""

    bits: np.ndarray
    method: str

    @property
    def n(self) -> int:
        return self.bits.shape[0]

    def unsafe(self, t1: int, t2: int) -> bool:
        return bool((int(self.bits[t1, t2 >> 6]) >> (t2 & 63)) & 1)

    def count(self) -> int:
        """Number of unordered unsafe pairs."""
        return int(np.unpackbits(self.bits.view(np.uint8)).sum()) // 2

    def pairs(self) -> set[tuple[int, int]]:
        out = set()
        for i in range(self.n):
            row = np.unpackbits(self.bits[i].view(np.uint8), bitorder="little")[: self.n]
            out.update((i, int(j)) for j in np.flatnonzero(row) if j > i)
        return out

    def restrict(self, items) -> np.ndarray:
        """The bit matrix over ``items`` only (row/column k = tensor items[k]); ``items``
        distinct. A kernel walks the set bits of the items' rows (``restrict_bits``; its
        reference, unpacking every row, is ``npusim.plan.safety.reference.restrict_reference``)."""
        items = np.asarray(items, dtype=np.int64)
        out = np.zeros((len(items), bitsets.n_words(len(items))), dtype=np.uint64)
        return kernels.restrict_bits(self.bits, items, out)


#: The last relation computed: (graph weakref, order, streams, method) -> relation. A plan's
#: allocator and then the validator ask for the same one (n²/64 words for n tensors).
_LAST: list = []


def safety_relation(graph: Graph, order, streams, method: str = "alg2") -> SafetyRelation:
    """The unsafe pairs of ``graph`` run in ``order`` with op -> stream map ``streams``; the
    last one is kept and returned again for the same graph object, order, streams and method."""
    if method not in METHODS:
        raise PlanError(f"safety method {method!r}: expected one of {METHODS}")
    key = (tuple(int(o) for o in order), tuple(int(s) for s in streams), method)
    if _LAST and _LAST[0][0]() is graph and _LAST[0][1] == key:
        return _LAST[0][2]
    inputs = prepare(graph, order, streams)
    if method == "alg2":
        bits = run_algorithm2(inputs)
    else:
        bits = run_algorithm1(inputs, optimized=(method == "alg1_opt"))
    bits.flags.writeable = False  # shared by whoever asks for it again
    relation = SafetyRelation(bits=bits, method=method)
    _LAST[:] = [(weakref.ref(graph), key, relation)]
    return relation
