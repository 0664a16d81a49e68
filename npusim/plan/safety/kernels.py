"""The Numba kernels of the multi-stream safety relation (``npusim.plan.safety``): MindSpore's
Algorithm 1 (Ancestor Tensors) and 1_opt on ancestor bitsets, and Algorithm 2 (Stream Graph
Safety: Ancestor Streams Reuse with Valid Ancestor, then Same Stream Reuse) on the per-stream
tables, with the pair-by-pair form of Algorithm 2 the tests compare the fast one with. Each is
checked against its pure-Python ``py_func`` and the plain references in ``safety_reference``."""

from __future__ import annotations

import numba
import numpy as np

from npusim.kernels.bitsets import set_bit, test_bit


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
def _first_safe(x, lo, hi, same_stream, order, t_between, t_end, t_stream, t_start, t_prod, ds_ptr, ds_stream,
                ds_end, anc_streams, max_anc):
    """The first position in ``order[lo:hi]`` (tensors of one stream by StartTime) whose tensor
    y may share addresses with x, which runs first: Algorithm 3's test (x of an ancestor stream
    of y's) or, ``same_stream``, Algorithm 5's (y starts after x); ``hi`` if none. Either test
    only gets truer as y starts later (MaxAncId grows along a stream), so a binary search finds
    it."""
    while lo < hi:
        mid = (lo + hi) // 2
        y = order[mid]
        if t_between[x]:
            safe = _valid_ancestor(x, y, t_stream, t_start, t_prod, ds_ptr, ds_stream, ds_end,
                                   anc_streams, max_anc)
        elif same_stream:
            safe = t_end[x] < t_start[y]
        else:
            safe = t_end[x] <= max_anc[t_prod[y], t_stream[x]]
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
def _stream_suffix_masks(n_streams, t_start, t_between, st_ptr, st_idx):
    """Each stream's tensors by StartTime (``order``), the word span [w_lo, w_hi) they cover and
    their suffix bitsets: row k of stream s, at ``mask_ptr[s] + k * span``, holds the tensors at
    positions k.. of s (``masks``; ``masks_nb``: only those not between streams)."""
    one = np.uint64(1)
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
    return order, w_lo, w_hi, mask_ptr, masks, masks_nb


@numba.njit(cache=True)
def _ancestor_streams_reuse(unsafe, order, w_lo, w_hi, mask_ptr, masks, t_prod, t_stream, t_start,
                            t_between, t_end, ds_ptr, ds_stream, ds_end, st_ptr, st_idx, anc_streams, max_anc):
    """Algorithm 3: Ancestor Streams Reuse, in place on ``unsafe``. Row t2 loses the suffix of s1
    from its first safe position k(t2); row t1 (position p of s1) loses the t2 of s2 with
    k(t2) <= p, gathered in a running bitset over s2's words as p grows."""
    n_streams = anc_streams.shape[0]
    one = np.uint64(1)
    first_safe = np.empty(st_ptr[n_streams] + 1, dtype=np.int64)
    by_k_ptr = np.empty(st_ptr[n_streams] + 2, dtype=np.int64)
    by_k = np.empty(st_ptr[n_streams] + 1, dtype=np.int64)
    running = np.zeros(unsafe.shape[1], dtype=np.uint64)
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
                k = _first_safe(t2, a1, b1, False, order, t_between, t_end, t_stream, t_start, t_prod,
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


@numba.njit(cache=True)
def _same_stream_first_safe(x, i, a, m, order, t_between, t_end, t_stream, t_start, t_prod, ds_ptr,
                            ds_stream, ds_end, anc_streams, max_anc):
    """For x at position i of a stream whose tensors are ``order[a:a + m]`` by StartTime: the first
    position of a y that starts after x and that x may share with (Algorithm 5's test); ``m`` if
    none. Both are binary searches."""
    lo, hi = i + 1, m  # the first position starting after x
    while lo < hi:
        mid = (lo + hi) // 2
        if t_start[order[a + mid]] > t_start[x]:
            hi = mid
        else:
            lo = mid + 1
    return _first_safe(x, a + lo, a + m, True, order, t_between, t_end, t_stream, t_start, t_prod, ds_ptr,
                       ds_stream, ds_end, anc_streams, max_anc) - a


@numba.njit(cache=True)
def _between_stream_pairs(unsafe, a, m, order, t_stream, t_start, t_between, t_prod, ds_ptr, ds_stream,
                          ds_end, anc_streams, max_anc):
    """Algorithm 5 for two tensors of one stream that are both between streams, pair by pair:
    either may be the valid ancestor of the other."""
    one = np.uint64(1)
    for i in range(m):
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


@numba.njit(cache=True)
def _same_stream_reuse(unsafe, order, w_lo, w_hi, mask_ptr, masks, masks_nb, t_prod, t_stream, t_start,
                       t_between, t_end, ds_ptr, ds_stream, ds_end, st_ptr, st_idx, anc_streams, max_anc):
    """Algorithm 5: Same Stream Reuse, in place on ``unsafe``, for x and y of one stream with
    StartTime[x] < StartTime[y] (equal starts stay unsafe). If x is not between streams the pair
    is safe iff EndTime[x] < StartTime[y]; if x is but y is not, iff x is a valid ancestor of y:
    both hold from some position of the stream on, so row x loses a suffix (``first``), and row
    y the x whose suffix has begun (running bitsets; ``run_nb`` only for y not between). Pairs
    of two between-stream tensors are tested one by one (``_between_stream_pairs``)."""
    n_streams = anc_streams.shape[0]
    words = unsafe.shape[1]
    one = np.uint64(1)
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
            lo = _same_stream_first_safe(x, i, a, m, order, t_between, t_end, t_stream, t_start, t_prod,
                                         ds_ptr, ds_stream, ds_end, anc_streams, max_anc)
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
        _between_stream_pairs(unsafe, a, m, order, t_stream, t_start, t_between, t_prod, ds_ptr, ds_stream,
                              ds_end, anc_streams, max_anc)


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
    loses a precomputed suffix bitset of s1 (``_stream_suffix_masks``, a few words), and each
    row of s1 a growing bitset of s2's tensors. Same bits as ``stream_graph_unsafe_pairwise``
    (the tests compare them).
    """
    unsafe = _all_used_pairs(n_tensors, t_prod)
    order, w_lo, w_hi, mask_ptr, masks, masks_nb = _stream_suffix_masks(anc_streams.shape[0], t_start,
                                                                         t_between, st_ptr, st_idx)
    _ancestor_streams_reuse(unsafe, order, w_lo, w_hi, mask_ptr, masks, t_prod, t_stream, t_start, t_between,
                            t_end, ds_ptr, ds_stream, ds_end, st_ptr, st_idx, anc_streams, max_anc)
    _same_stream_reuse(unsafe, order, w_lo, w_hi, mask_ptr, masks, masks_nb, t_prod, t_stream, t_start,
                       t_between, t_end, ds_ptr, ds_stream, ds_end, st_ptr, st_idx, anc_streams, max_anc)
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


# --------------------------------------------------------------------------------------------
# The validator's check: unsafe pairs that share addresses
# --------------------------------------------------------------------------------------------

_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * 0x03F79D71B4CB0A89 % (1 << 64)) >> 58] = _i


@numba.njit(cache=True)
def unsafe_shared_addresses(bits, tensor, offset, size, res_ptr, res_idx):
    """Pairs (r, q) of residencies (indices into ``tensor``/``offset``/``size``) of two
    different tensors that the relation ``bits`` calls unsafe and whose address ranges
    ``[offset, offset + size)`` meet; ``res_idx[res_ptr[t]:res_ptr[t + 1]]`` are the
    residencies of tensor t. Each pair once, with tensor[r] < tensor[q].

    Walks the set bits of each residency's row above its own tensor, a word at a time: the
    work is the rows' words (n²/64 for n tensors) plus the unsafe pairs, where a sweep over the
    pairs sharing addresses is quadratic in the residencies whenever the allocator reuses
    addresses well (``unsafe_shared_addresses_reference`` is that definition in Python)."""
    n_t, words = bits.shape[0], bits.shape[1]
    cap = 64
    pa = np.empty(cap, dtype=np.int64)
    pb = np.empty(cap, dtype=np.int64)
    cnt = 0
    one = np.uint64(1)
    for r in range(len(tensor)):
        t = tensor[r]
        if size[r] <= 0 or t < 0 or t >= n_t:
            continue
        lo_r, hi_r = offset[r], offset[r] + size[r]
        for w in range(t >> 6, words):
            x = bits[t, w]
            if w == t >> 6:  # only tensors above t: each pair once
                b = t & 63
                x = np.uint64(0) if b == 63 else x & ~((one << np.uint64(b + 1)) - one)
            while x != np.uint64(0):
                low = x & (~x + one)
                j = w * 64 + _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
                x ^= low
                if j >= n_t:
                    continue
                for e in range(res_ptr[j], res_ptr[j + 1]):
                    q = res_idx[e]
                    if size[q] > 0 and offset[q] < hi_r and lo_r < offset[q] + size[q]:
                        if cnt == cap:
                            cap *= 2
                            grown_a = np.empty(cap, dtype=np.int64)
                            grown_b = np.empty(cap, dtype=np.int64)
                            grown_a[:cnt] = pa[:cnt]
                            grown_b[:cnt] = pb[:cnt]
                            pa, pb = grown_a, grown_b
                        pa[cnt] = r
                        pb[cnt] = q
                        cnt += 1
    return pa[:cnt], pb[:cnt]


@numba.njit(cache=True)
def restrict_bits(bits, items, out):
    """Fill ``out`` (zeros, len(items) rows) with the relation ``bits`` over ``items`` only
    (row/column k = tensor items[k]): the set bits of each item's row, a word at a time,
    mapped to their positions (``restrict_reference`` unpacks the rows instead: the same bits)."""
    n_t = bits.shape[0]
    pos = np.full(n_t, -1, dtype=np.int64)
    for k in range(len(items)):
        pos[items[k]] = k
    one = np.uint64(1)
    for k in range(len(items)):
        t = items[k]
        for w in range(bits.shape[1]):
            x = bits[t, w]
            while x != np.uint64(0):
                low = x & (~x + one)
                j = w * 64 + _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
                x ^= low
                if j < n_t and pos[j] >= 0:
                    p = pos[j]
                    out[k, p >> 6] |= one << np.uint64(p & 63)
    return out
