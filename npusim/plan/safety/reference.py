"""Plain-Python references of the multi-stream safety relation (``npusim.plan.safety``).

Slow and written for reading: the tests compare the Numba kernels of ``npusim.plan.safety``
and ``npusim.plan.safety.kernels`` with them.

- ``stream_tables_reference``: the per-tensor and per-stream tables of Algorithm 2, with dicts
  and lists;
- ``unsafe_pairs_reference``: the definition (Theorem 1) with Python sets;
- ``lifetime_overlap_pairs``: the single-stream relation the multi-stream one must contain.
"""

from __future__ import annotations

import numpy as np

from npusim.graph.analysis import lifetimes
from npusim.graph.model import Graph
from npusim.plan.safety import SafetyInputs, csr, prepare
from npusim.plan.safety.kernels import max_ancestor_ids

def stream_tables_reference(inputs: SafetyInputs) -> dict:
    """``stream_tables`` written with Python dicts and lists (the tests compare the two)."""
    nt, S = inputs.n_tensors, inputs.n_streams
    max_anc = max_ancestor_ids(inputs.parent_ptr, inputs.parent_idx, inputs.topo, inputs.node_stream,
                               inputs.local, S)
    anc_streams = np.zeros((S, S), dtype=np.bool_)  # anc_streams[s1, s2]: s2 ∈ AncStreams[s1]
    for s1 in range(S):
        nodes = np.flatnonzero(inputs.node_stream == s1)
        if nodes.size:
            anc_streams[s1] = (max_anc[nodes] > 0).any(axis=0)
        anc_streams[s1, s1] = False
    t_prod = inputs.prod
    used = t_prod >= 0
    t_stream = np.where(used, inputs.node_stream[np.maximum(t_prod, 0)], -1)
    t_start = np.where(used, inputs.local[np.maximum(t_prod, 0)], 0)
    t_between = np.zeros(nt, dtype=np.bool_)
    t_end = np.zeros(nt, dtype=np.int64)
    ds_lists = []
    for t in range(nt):
        ends: dict[int, int] = {}
        for e in range(inputs.dest_ptr[t], inputs.dest_ptr[t + 1]):
            c = int(inputs.dest_idx[e])
            s = int(inputs.node_stream[c])
            ends[s] = max(ends.get(s, 0), int(inputs.local[c]))
        ds_lists.append(sorted(ends.items()))
        if used[t]:
            t_between[t] = any(s != t_stream[t] for s in ends)
            t_end[t] = ends.get(int(t_stream[t]), 0)
    ds_ptr = np.zeros(nt + 1, dtype=np.int64)
    ds_ptr[1:] = np.cumsum([len(x) for x in ds_lists])
    ds_stream = np.array([s for x in ds_lists for s, _ in x], dtype=np.int64)
    ds_end = np.array([e for x in ds_lists for _, e in x], dtype=np.int64)
    st_lists = [[] for _ in range(S)]
    for t in np.flatnonzero(used):
        st_lists[int(t_stream[t])].append(int(t))
    st_ptr, st_idx = csr(st_lists)
    return dict(t_prod=t_prod, t_stream=t_stream, t_start=t_start, t_between=t_between, t_end=t_end,
                ds_ptr=ds_ptr, ds_stream=ds_stream, ds_end=ds_end, st_ptr=st_ptr, st_idx=st_idx,
                anc_streams=anc_streams, max_anc=max_anc)


def unsafe_pairs_reference(graph: Graph, order, streams) -> set[tuple[int, int]]:
    """Definition-level reference (Theorem 1) with Python sets: {t1, t2} is safe iff all
    destinations of one reach the producer of the other through the augmented DAG."""
    inputs = prepare(graph, order, streams)
    parents = [inputs.parent_idx[inputs.parent_ptr[v]:inputs.parent_ptr[v + 1]].tolist()
               for v in range(inputs.n_nodes)]
    anc: list[set[int]] = [set() for _ in range(inputs.n_nodes)]
    for v in inputs.topo.tolist():
        for p in parents[v]:
            anc[v] |= anc[p] | {p}
    dest = [set(inputs.dest_idx[inputs.dest_ptr[t]:inputs.dest_ptr[t + 1]].tolist())
            for t in range(inputs.n_tensors)]
    used = [t for t in range(inputs.n_tensors) if inputs.prod[t] >= 0]
    out = set()
    for a, t1 in enumerate(used):
        for t2 in used[a + 1:]:
            if dest[t1] <= anc[inputs.prod[t2]] or dest[t2] <= anc[inputs.prod[t1]]:
                continue
            out.add((t1, t2))
    return out


def lifetime_overlap_pairs(graph: Graph, order) -> set[tuple[int, int]]:
    """The single-stream relation: pairs whose inclusive lifetimes in ``order`` intersect."""
    life = lifetimes(graph, order)
    used = [t for t in range(graph.n_tensors) if life.first[t] >= 0]
    return {(a, b) for i, a in enumerate(used) for b in used[i + 1:]
            if life.first[a] <= life.last[b] and life.first[b] <= life.last[a]}


def unsafe_shared_addresses_reference(unsafe, tensor, offset, size) -> set[tuple[int, int]]:
    """``unsafe_shared_addresses`` by its definition: every pair of residencies of two
    different tensors, unsafe by ``unsafe(t1, t2)``, whose address ranges meet (sizes > 0);
    (r, q) with tensor[r] < tensor[q]."""
    found = set()
    for r in range(len(tensor)):
        for q in range(len(tensor)):
            if tensor[r] < tensor[q] and size[r] > 0 and size[q] > 0 and unsafe(int(tensor[r]), int(tensor[q])) \
                    and offset[r] < offset[q] + size[q] and offset[q] < offset[r] + size[r]:
                found.add((r, q))
    return found


def restrict_reference(relation, items) -> np.ndarray:
    """``SafetyRelation.restrict`` by unpacking the items' rows and packing their columns."""
    items = np.asarray(items, dtype=np.int64)
    m = len(items)
    out = np.zeros((m, max(1, -(-m // 64))), dtype=np.uint64)
    for lo in range(0, m, 1024):
        rows = np.unpackbits(relation.bits[items[lo:lo + 1024]].view(np.uint8), axis=1,
                             bitorder="little")[:, : relation.n]
        packed = np.packbits(rows[:, items], axis=1, bitorder="little")
        pad = out.shape[1] * 8 - packed.shape[1]
        if pad:
            packed = np.pad(packed, ((0, 0), (0, pad)))
        out[lo:lo + 1024] = np.ascontiguousarray(packed).view(np.uint64)
    return out
