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

The result is a ``SafetyRelation``: a symmetric uint64 bit matrix over the graph's tensors
(tensors no op touches are safe with everything).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from npusim.errors import PlanError
from npusim.graph.analysis import check_order, lifetimes
from npusim.graph.model import Graph
from npusim.kernels.bitsets import ancestor_bitsets, n_words, set_bit, test_bit

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


def _csr(lists) -> tuple[np.ndarray, np.ndarray]:
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
    parent_ptr, parent_idx = _csr([sorted(p) for p in parents])

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
    dest_ptr, dest_idx = _csr(dests)
    max_ptr, max_idx = _csr(maxnodes)
    return SafetyInputs(graph.n_ops, graph.n_tensors, len(stream_ids), parent_ptr, parent_idx,
                        np.array(order, dtype=np.int64), node_stream, local, prod,
                        dest_ptr, dest_idx, max_ptr, max_idx)


# --------------------------------------------------------------------------------------------
# Algorithm 1 and 1_opt
# --------------------------------------------------------------------------------------------

@numba.njit(cache=True)
def _all_in(anc, node, set_ptr, set_idx, t):
    for e in range(set_ptr[t], set_ptr[t + 1]):
        if not test_bit(anc, node, set_idx[e]):
            return False
    return True


@numba.njit(cache=True)
def ancestor_tensors_unsafe(prod, set_ptr, set_idx, anc):
    """Algorithm 1 (with DestNodes) or 1_opt (with MaxNodes): the unsafe bit matrix.

    {t1, t2} is safe iff set[t1] ⊆ AncNodes[prod t2] or set[t2] ⊆ AncNodes[prod t1].
    """
    n = len(prod)
    unsafe = np.zeros((n, max(1, (n + 63) // 64)), dtype=np.uint64)
    for t1 in range(n):
        if prod[t1] < 0:
            continue
        for t2 in range(t1 + 1, n):
            if prod[t2] < 0:
                continue
            if _all_in(anc, prod[t2], set_ptr, set_idx, t1):
                continue
            if _all_in(anc, prod[t1], set_ptr, set_idx, t2):
                continue
            set_bit(unsafe, t1, t2)
            set_bit(unsafe, t2, t1)
    return unsafe


# --------------------------------------------------------------------------------------------
# Algorithm 2 (3, 4, 5)
# --------------------------------------------------------------------------------------------

@numba.njit(cache=True)
def max_ancestor_ids(parent_ptr, parent_idx, topo, node_stream, local, n_streams):
    """MaxAnc[n][s]: the largest local order of a node of stream s with a path to n (0: none)."""
    n = len(node_stream)
    max_anc = np.zeros((n, n_streams), dtype=np.int64)
    for k in range(len(topo)):
        v = topo[k]
        for e in range(parent_ptr[v], parent_ptr[v + 1]):
            p = parent_idx[e]
            for s in range(n_streams):
                if max_anc[p, s] > max_anc[v, s]:
                    max_anc[v, s] = max_anc[p, s]
            if local[p] > max_anc[v, node_stream[p]]:
                max_anc[v, node_stream[p]] = local[p]
    return max_anc


@numba.njit(cache=True)
def _valid_ancestor(t2, t1, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end, anc_streams, max_anc):
    """Algorithm 4: every destination of t2 has a path to the producer of t1 (Lemma 1)."""
    s1 = t_stream[t1]
    for e in range(ds_ptr[t2], ds_ptr[t2 + 1]):
        s = ds_stream[e]
        if s == s1:
            if ds_end[e] >= t_start[t1]:
                return False
        elif anc_streams[s1, s]:
            if ds_end[e] > max_anc[t_prod[t1], s]:
                return False
        else:  # DestStreams[t2] is not a subset of AncStreams[s1] ∪ {s1}
            return False
    return True


@numba.njit(cache=True)
def _first_safe(t2, s2, lo, hi, order, t_between, t_end, t_stream, t_start, t_prod, ds_ptr, ds_stream,
                ds_end, anc_streams, max_anc):
    """The first position in ``order[lo:hi]`` (tensors of one stream by StartTime) whose tensor
    t1 has t2 as a safe ancestor (Algorithm 3's test); ``hi`` if none. The test only gets truer
    as t1 starts later (MaxAncId grows along a stream), so a binary search finds it."""
    while lo < hi:
        mid = (lo + hi) // 2
        t1 = order[mid]
        if not t_between[t2]:
            safe = t_end[t2] <= max_anc[t_prod[t1], s2]
        else:
            safe = _valid_ancestor(t2, t1, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end,
                                   anc_streams, max_anc)
        if safe:
            hi = mid
        else:
            lo = mid + 1
    return lo


@numba.njit(cache=True)
def _all_used_pairs(n_tensors, t_prod):
    """Algorithm 2's start, U <- every pair of used (produced) tensors: one row, copied."""
    words = max(1, (n_tensors + 63) // 64)
    unsafe = np.zeros((n_tensors, words), dtype=np.uint64)
    used = np.zeros(words, dtype=np.uint64)
    for t in range(n_tensors):
        if t_prod[t] >= 0:
            used[t >> 6] |= np.uint64(1) << np.uint64(t & 63)
    for t1 in range(n_tensors):
        if t_prod[t1] >= 0:
            unsafe[t1] = used
            unsafe[t1, t1 >> 6] &= ~(np.uint64(1) << np.uint64(t1 & 63))
    return unsafe


@numba.njit(cache=True)
def stream_graph_unsafe(n_tensors, t_prod, t_stream, t_start, t_between, t_end,
                        ds_ptr, ds_stream, ds_end, st_ptr, st_idx, anc_streams, max_anc):
    """Algorithm 2: start from all pairs unsafe; Algorithm 3 then Algorithm 5 remove safe ones.

    ``t_end``: EndTime of tensors that are not between streams; ``ds_*``: per tensor, its
    destination streams with EndTime[t][s]; ``st_*``: tensors produced in each stream.

    Algorithms 3 and 5 run a stream at a time rather than a pair at a time: every test they
    make only gets truer as the other tensor starts later in its stream (MaxAncId grows along
    a stream), so for t2 in s2 and a stream s1 with s2 in AncStreams[s1], the tensors of s1
    that t2 may share with are those from some position of s1 on (``_first_safe``): row t2
    loses a precomputed suffix bitset of s1 (a few words), and each row of s1 a growing bitset
    of s2's tensors. Same bits as ``stream_graph_unsafe_pairwise`` (the tests compare them).
    """
    unsafe = _all_used_pairs(n_tensors, t_prod)
    words = unsafe.shape[1]
    n_streams = anc_streams.shape[0]
    one = np.uint64(1)
    # each stream's tensors by StartTime, the word span they cover, and the suffix bitsets
    order = np.empty(len(st_idx), dtype=np.int64)
    w_lo = np.zeros(n_streams, dtype=np.int64)
    w_hi = np.zeros(n_streams, dtype=np.int64)
    mask_ptr = np.zeros(n_streams + 1, dtype=np.int64)  # stream s: (count + 1) rows of span words
    for s in range(n_streams):
        a, b = st_ptr[s], st_ptr[s + 1]
        if b > a:
            keys = t_start[st_idx[a:b]]
            order[a:b] = st_idx[a:b][np.argsort(keys, kind="mergesort")]
            w_lo[s] = st_idx[a:b].min() >> 6
            w_hi[s] = (st_idx[a:b].max() >> 6) + 1
        mask_ptr[s + 1] = mask_ptr[s] + (b - a + 1) * (w_hi[s] - w_lo[s])
    masks = np.zeros(mask_ptr[n_streams], dtype=np.uint64)
    masks_nb = np.zeros(mask_ptr[n_streams], dtype=np.uint64)  # the same, tensors not between streams
    for s in range(n_streams):
        a, b = st_ptr[s], st_ptr[s + 1]
        span = w_hi[s] - w_lo[s]
        base = mask_ptr[s]
        for k in range(b - a - 1, -1, -1):  # row k = positions k.. of the stream: row k+1 plus one
            row, nxt = base + k * span, base + (k + 1) * span
            for w in range(span):
                masks[row + w] = masks[nxt + w]
            for w in range(span):
                masks_nb[row + w] = masks_nb[nxt + w]
            t = order[a + k]
            masks[row + (t >> 6) - w_lo[s]] |= one << np.uint64(t & 63)
            if not t_between[t]:
                masks_nb[row + (t >> 6) - w_lo[s]] |= one << np.uint64(t & 63)
    # Algorithm 3: Ancestor Streams Reuse. Row t2 loses the suffix of s1 from its first safe
    # position k(t2); row t1 (position p of s1) loses the t2 of s2 with k(t2) <= p, gathered
    # in a running bitset over s2's words as p grows.
    first_safe = np.empty(st_ptr[n_streams] + 1, dtype=np.int64)
    by_k_ptr = np.empty(st_ptr[n_streams] + 2, dtype=np.int64)
    by_k = np.empty(st_ptr[n_streams] + 1, dtype=np.int64)
    running = np.zeros(words, dtype=np.uint64)
    for s1 in range(n_streams):
        a1, b1 = st_ptr[s1], st_ptr[s1 + 1]
        m1 = b1 - a1
        span1 = w_hi[s1] - w_lo[s1]
        for s2 in range(n_streams):
            if not anc_streams[s1, s2]:
                continue
            a2, b2 = st_ptr[s2], st_ptr[s2 + 1]
            m2 = b2 - a2
            by_k_ptr[:m1 + 2] = 0
            for a in range(a2, b2):
                t2 = st_idx[a]
                k = _first_safe(t2, s2, a1, b1, order, t_between, t_end, t_stream, t_start, t_prod,
                                ds_ptr, ds_stream, ds_end, anc_streams, max_anc) - a1
                first_safe[a - a2] = k
                by_k_ptr[k + 1] += 1
                if k == m1:
                    continue
                row = mask_ptr[s1] + k * span1
                for w in range(span1):
                    unsafe[t2, w_lo[s1] + w] &= ~masks[row + w]
            for k in range(m1 + 1):  # counting sort of s2's tensors by k(t2)
                by_k_ptr[k + 1] += by_k_ptr[k]
            for i in range(m2):
                k = first_safe[i]
                by_k[by_k_ptr[k]] = st_idx[a2 + i]
                by_k_ptr[k] += 1
            # by_k_ptr[k] is now the end of bucket k
            running[w_lo[s2]:w_hi[s2]] = 0
            q = 0
            for p in range(m1):
                while q < by_k_ptr[p]:
                    t2 = by_k[q]
                    running[t2 >> 6] |= one << np.uint64(t2 & 63)
                    q += 1
                if q == 0:
                    continue
                t1 = order[a1 + p]
                for w in range(w_lo[s2], w_hi[s2]):
                    unsafe[t1, w] &= ~running[w]
    # Algorithm 5: Same Stream Reuse, for x and y of one stream with StartTime[x] < StartTime[y]
    # (equal starts stay unsafe). If x is not between streams the pair is safe iff
    # EndTime[x] < StartTime[y]; if x is but y is not, iff x is a valid ancestor of y: both
    # hold from some position of the stream on, so row x loses a suffix (``first``), and row y
    # the x whose suffix has begun (running bitsets; ``run_nb`` only for y not between). Pairs
    # of two between-stream tensors are tested one by one.
    first = np.empty(len(st_idx) + 1, dtype=np.int64)
    by_k_ptr5 = np.empty(len(st_idx) + 2, dtype=np.int64)
    by_k5 = np.empty(len(st_idx) + 1, dtype=np.int64)
    run_all = np.zeros(words, dtype=np.uint64)
    run_nb = np.zeros(words, dtype=np.uint64)
    for s in range(n_streams):
        a, b = st_ptr[s], st_ptr[s + 1]
        m = b - a
        span = w_hi[s] - w_lo[s]
        by_k_ptr5[:m + 2] = 0
        for i in range(m):
            x = order[a + i]
            lo, hi = i + 1, m  # the first position starting after x
            while lo < hi:
                mid = (lo + hi) // 2
                if t_start[order[a + mid]] > t_start[x]:
                    hi = mid
                else:
                    lo = mid + 1
            hi = m
            while lo < hi:  # then the first safe one
                mid = (lo + hi) // 2
                y = order[a + mid]
                if not t_between[x]:
                    safe = t_end[x] < t_start[y]
                else:
                    safe = _valid_ancestor(x, y, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end,
                                           anc_streams, max_anc)
                if safe:
                    hi = mid
                else:
                    lo = mid + 1
            first[i] = lo
            by_k_ptr5[lo + 1] += 1
            if lo < m:
                row = mask_ptr[s] + lo * span
                for w in range(span):
                    unsafe[x, w_lo[s] + w] &= ~(masks_nb[row + w] if t_between[x] else masks[row + w])
        for k in range(m + 1):
            by_k_ptr5[k + 1] += by_k_ptr5[k]
        for i in range(m):
            by_k5[by_k_ptr5[first[i]]] = order[a + i]
            by_k_ptr5[first[i]] += 1
        run_all[w_lo[s]:w_hi[s]] = 0
        run_nb[w_lo[s]:w_hi[s]] = 0
        q = 0
        for p in range(m):
            while q < by_k_ptr5[p]:
                x = by_k5[q]
                if t_between[x]:
                    run_nb[x >> 6] |= one << np.uint64(x & 63)
                else:
                    run_all[x >> 6] |= one << np.uint64(x & 63)
                q += 1
            if q == 0:
                continue
            y = order[a + p]
            if t_between[y]:
                for w in range(w_lo[s], w_hi[s]):
                    unsafe[y, w] &= ~run_all[w]
            else:
                for w in range(w_lo[s], w_hi[s]):
                    unsafe[y, w] &= ~(run_all[w] | run_nb[w])
        for i in range(m):  # two tensors between streams: either may be the valid ancestor
            x = order[a + i]
            if not t_between[x]:
                continue
            for k in range(i + 1, m):
                y = order[a + k]
                if not t_between[y] or t_start[y] == t_start[x]:
                    continue
                if (_valid_ancestor(x, y, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end, anc_streams, max_anc)
                        or _valid_ancestor(y, x, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end,
                                           anc_streams, max_anc)):
                    unsafe[x, y >> 6] &= ~(one << np.uint64(y & 63))
                    unsafe[y, x >> 6] &= ~(one << np.uint64(x & 63))
    return unsafe


@numba.njit(cache=True)
def stream_graph_unsafe_pairwise(n_tensors, t_prod, t_stream, t_start, t_between, t_end,
                        ds_ptr, ds_stream, ds_end, st_ptr, st_idx, anc_streams, max_anc):
    """Algorithm 2 pair by pair, as the paper writes it (``stream_graph_unsafe`` gives the same
    bits faster; the tests compare them). Algorithm 3 then Algorithm 5 remove safe pairs.

    ``t_end``: EndTime of tensors that are not between streams; ``ds_*``: per tensor, its
    destination streams with EndTime[t][s]; ``st_*``: tensors produced in each stream.
    """
    unsafe = _all_used_pairs(n_tensors, t_prod)
    n_streams = anc_streams.shape[0]
    one = np.uint64(1)
    # Algorithm 3: Ancestor Streams Reuse
    for s1 in range(n_streams):
        for s2 in range(n_streams):
            if not anc_streams[s1, s2]:
                continue
            for a in range(st_ptr[s2], st_ptr[s2 + 1]):
                t2 = st_idx[a]
                for b in range(st_ptr[s1], st_ptr[s1 + 1]):
                    t1 = st_idx[b]
                    if not t_between[t2]:
                        safe = t_end[t2] <= max_anc[t_prod[t1], s2]
                    else:
                        safe = _valid_ancestor(t2, t1, t_stream, t_start, t_prod, ds_ptr, ds_stream,
                                               ds_end, anc_streams, max_anc)
                    if safe:
                        unsafe[t1, t2 >> 6] &= ~(one << np.uint64(t2 & 63))
                        unsafe[t2, t1 >> 6] &= ~(one << np.uint64(t1 & 63))
    # Algorithm 5: Same Stream Reuse
    for s in range(n_streams):
        for a in range(st_ptr[s], st_ptr[s + 1]):
            t1 = st_idx[a]
            for b in range(a + 1, st_ptr[s + 1]):
                t2 = st_idx[b]
                if t_start[t1] == t_start[t2]:
                    continue
                safe = False
                if t_between[t1] and t_between[t2]:
                    safe = (_valid_ancestor(t1, t2, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end,
                                            anc_streams, max_anc)
                            or _valid_ancestor(t2, t1, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end,
                                               anc_streams, max_anc))
                elif t_between[t1]:
                    safe = t_start[t1] > t_end[t2] or (
                        t_start[t1] < t_start[t2]
                        and _valid_ancestor(t1, t2, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end,
                                            anc_streams, max_anc))
                elif t_between[t2]:
                    safe = t_start[t2] > t_end[t1] or (
                        t_start[t2] < t_start[t1]
                        and _valid_ancestor(t2, t1, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end,
                                            anc_streams, max_anc))
                else:
                    safe = t_end[t1] < t_start[t2] or t_end[t2] < t_start[t1]
                if safe:
                    unsafe[t1, t2 >> 6] &= ~(one << np.uint64(t2 & 63))
                    unsafe[t2, t1 >> 6] &= ~(one << np.uint64(t1 & 63))
    return unsafe


@numba.njit(cache=True)
def stream_tables_kernel(node_stream, local, prod, dest_ptr, dest_idx, max_anc, n_streams):
    """The per-tensor tables of Algorithm 2 in one pass (``stream_tables_reference`` in Python).

    Returns anc_streams, t_stream, t_start, t_between, t_end, ds_ptr, ds_stream, ds_end,
    st_ptr, st_idx (see ``stream_tables``)."""
    S = n_streams
    anc_streams = np.zeros((S, S), dtype=np.bool_)
    for v in range(len(node_stream)):
        s1 = node_stream[v]
        for s2 in range(S):
            if max_anc[v, s2] > 0 and s2 != s1:
                anc_streams[s1, s2] = True
    nt = len(prod)
    t_stream = np.full(nt, -1, dtype=np.int64)
    t_start = np.zeros(nt, dtype=np.int64)
    t_between = np.zeros(nt, dtype=np.bool_)
    t_end = np.zeros(nt, dtype=np.int64)
    ds_ptr = np.zeros(nt + 1, dtype=np.int64)
    ds_stream = np.empty(len(dest_idx), dtype=np.int64)
    ds_end = np.empty(len(dest_idx), dtype=np.int64)
    end_of = np.zeros(S, dtype=np.int64)  # EndTime[t][s] of the tensor being built (0: none)
    m = 0
    for t in range(nt):
        start = m
        for e in range(dest_ptr[t], dest_ptr[t + 1]):
            c = dest_idx[e]
            s = node_stream[c]
            if end_of[s] == 0:  # a new destination stream: insert, keeping streams increasing
                k = m
                while k > start and ds_stream[k - 1] > s:
                    ds_stream[k] = ds_stream[k - 1]
                    k -= 1
                ds_stream[k] = s
                m += 1
            if local[c] > end_of[s]:
                end_of[s] = local[c]
        ds_ptr[t + 1] = m
        if prod[t] >= 0:
            t_stream[t] = node_stream[prod[t]]
            t_start[t] = local[prod[t]]
        for k in range(start, m):
            s = ds_stream[k]
            ds_end[k] = end_of[s]
            if prod[t] >= 0:
                if s == t_stream[t]:
                    t_end[t] = end_of[s]
                else:
                    t_between[t] = True
            end_of[s] = 0
    st_ptr = np.zeros(S + 1, dtype=np.int64)
    for t in range(nt):
        if prod[t] >= 0:
            st_ptr[t_stream[t] + 1] += 1
    for s in range(S):
        st_ptr[s + 1] += st_ptr[s]
    st_idx = np.empty(st_ptr[S], dtype=np.int64)
    fill = st_ptr[:S].copy()
    for t in range(nt):
        if prod[t] >= 0:
            st_idx[fill[t_stream[t]]] = t
            fill[t_stream[t]] += 1
    return (anc_streams, t_stream, t_start, t_between, t_end, ds_ptr, ds_stream[:m].copy(),
            ds_end[:m].copy(), st_ptr, st_idx)


def stream_tables(inputs: SafetyInputs, kernel=None) -> dict:
    """The per-tensor and per-stream tables Algorithm 2 works on (paper Section 3.2)."""
    max_anc = max_ancestor_ids(inputs.parent_ptr, inputs.parent_idx, inputs.topo, inputs.node_stream,
                               inputs.local, inputs.n_streams)
    (anc_streams, t_stream, t_start, t_between, t_end, ds_ptr, ds_stream, ds_end, st_ptr,
     st_idx) = (kernel or stream_tables_kernel)(inputs.node_stream, inputs.local, inputs.prod, inputs.dest_ptr,
                                                 inputs.dest_idx, max_anc, inputs.n_streams)
    return dict(t_prod=inputs.prod, t_stream=t_stream, t_start=t_start, t_between=t_between, t_end=t_end,
                ds_ptr=ds_ptr, ds_stream=ds_stream, ds_end=ds_end, st_ptr=st_ptr, st_idx=st_idx,
                anc_streams=anc_streams, max_anc=max_anc)


def run_algorithm2(inputs: SafetyInputs, kernel=None) -> np.ndarray:
    tb = stream_tables(inputs)
    kernel = kernel or stream_graph_unsafe
    return kernel(inputs.n_tensors, tb["t_prod"], tb["t_stream"], tb["t_start"], tb["t_between"], tb["t_end"],
                  tb["ds_ptr"], tb["ds_stream"], tb["ds_end"], tb["st_ptr"], tb["st_idx"],
                  tb["anc_streams"], tb["max_anc"])


def run_algorithm1(inputs: SafetyInputs, optimized: bool, kernel=None) -> np.ndarray:
    anc = ancestor_bitsets(inputs.parent_ptr, inputs.parent_idx, inputs.topo, inputs.n_nodes)
    ptr, idx = (inputs.max_ptr, inputs.max_idx) if optimized else (inputs.dest_ptr, inputs.dest_idx)
    return (kernel or ancestor_tensors_unsafe)(inputs.prod, ptr, idx, anc)


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
        """The bit matrix over ``items`` only (row/column k = tensor items[k])."""
        items = np.asarray(items, dtype=np.int64)
        m = len(items)
        out = np.zeros((m, n_words(m)), dtype=np.uint64)
        for lo in range(0, m, 1024):
            rows = np.unpackbits(self.bits[items[lo:lo + 1024]].view(np.uint8), axis=1,
                                 bitorder="little")[:, : self.n]
            sub = rows[:, items]
            packed = np.packbits(sub, axis=1, bitorder="little")
            pad = out.shape[1] * 8 - packed.shape[1]
            if pad:
                packed = np.pad(packed, ((0, 0), (0, pad)))
            out[lo:lo + 1024] = np.ascontiguousarray(packed).view(np.uint64)
        return out


def safety_relation(graph: Graph, order, streams, method: str = "alg2") -> SafetyRelation:
    """The unsafe pairs of ``graph`` run in ``order`` with op -> stream map ``streams``."""
    if method not in METHODS:
        raise PlanError(f"safety method {method!r}: expected one of {METHODS}")
    inputs = prepare(graph, order, streams)
    if method == "alg2":
        bits = run_algorithm2(inputs)
    else:
        bits = run_algorithm1(inputs, optimized=(method == "alg1_opt"))
    return SafetyRelation(bits=bits, method=method)


# --------------------------------------------------------------------------------------------
# Pure-Python references (used by the tests)
# --------------------------------------------------------------------------------------------

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
    st_ptr, st_idx = _csr(st_lists)
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
