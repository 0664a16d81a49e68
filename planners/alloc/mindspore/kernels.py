"""Numba kernels of Single Object and Many Objects (the planners' hot path).

The same algorithms as ``planners.alloc.mindspore`` (Algorithms 6-13 of the MindSpore paper),
written on flat arrays: blocks as CSR lists in sorted order, conflicts as either inclusive
lifetimes or a uint64 bit matrix. The tests check every kernel against the readable
reference in ``mindspore.py`` (identical offsets on random problems, blocks and both fits).

Many Objects keeps each object's items in a linked list sorted by offset, so ``Avoid`` scans
only the object being tried and its intervals come out in order (no sort); Single Object keeps
its placed items sorted by offset (as TFLite's arena does) for the same reason. With an
explicit conflict matrix, a one-item block (nearly every block) instead ANDs its conflict row
with the placed items' bitset and visits only the items it conflicts with: 64 items a word.
Single Object turns them into intervals at once; Many Objects hands each object it tries its
own share (an object too small for the block, or whose head block is unsafe with it, costs
nothing), so neither keeps its lists in offset order then, and short interval lists are
sorted in place. Blocks are sorted by ``numpy`` reductions (``sorted_block_arrays``), which
the tests check against ``sort_blocks``.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from npusim.errors import PlanningError
from planners.alloc.mindspore import FITS, SORTS, _check_options, breadths
from planners.alloc.problem import MatrixConflicts, OffsetProblem, OffsetResult, make_result

INFINITY = np.int64(1) << np.int64(62)
FIRST_FIT, BEST_FIT = 0, 1


@numba.njit(cache=True, inline="always")
def _unsafe(i, j, use_bits, bits, first, last):
    if i == j:
        return False
    if use_bits:
        return ((bits[i, j >> 6] >> np.uint64(j & 63)) & np.uint64(1)) == np.uint64(1)
    return first[i] <= last[j] and first[j] <= last[i]


@numba.njit(cache=True, inline="always")
def _avoid_item(j, blk_ptr, blk_items, b, sizes, offsets, use_bits, bits, first, last,
                obj_offset, lo, hi, cnt):
    """Algorithm 8 for one placed item ``j`` against block ``b``; returns the new count."""
    start_k, end_k = blk_ptr[b], blk_ptr[b + 1]
    if end_k - start_k == 1:
        if _unsafe(blk_items[start_k], j, use_bits, bits, first, last):
            lo[cnt] = offsets[j]
            hi[cnt] = offsets[j] + sizes[j]
            cnt += 1
        return cnt
    acc = 0
    for k in range(start_k, end_k):
        new = blk_items[k]
        if _unsafe(new, j, use_bits, bits, first, last):
            start = offsets[j] - sizes[new] + 1 - acc
            end = offsets[j] + sizes[j] - acc
            if start >= obj_offset:
                lo[cnt] = start
                hi[cnt] = end
                cnt += 1
            elif end > obj_offset:
                lo[cnt] = obj_offset
                hi[cnt] = end
                cnt += 1
        acc += sizes[new]
    return cnt


_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * 0x03F79D71B4CB0A89 % (1 << 64)) >> 58] = _i


@numba.njit(cache=True, inline="always")
def _conflicting(item, members, bits, out):
    """The members (a bitset row) unsafe with ``item``, in increasing order, into ``out``: a
    word at a time, one step per set bit (de Bruijn lowest-bit index). Returns the count."""
    cnt = 0
    one = np.uint64(1)
    for w in range(members.shape[0]):
        x = bits[item, w] & members[w]
        while x != np.uint64(0):
            low = x & (~x + one)
            out[cnt] = w * 64 + _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
            cnt += 1
            x ^= low
    return cnt


@numba.njit(cache=True, inline="always")
def _avoid_bits(item, members, sizes, offsets, bits, lo, hi, conf):
    """Algorithm 8 for a one-item block on a conflict bit matrix: only the members (a bitset
    row) that conflict with ``item`` give intervals. Returns the count (intervals unsorted)."""
    cnt = _conflicting(item, members, bits, conf)
    for k in range(cnt):
        j = conf[k]
        lo[k] = offsets[j]
        hi[k] = offsets[j] + sizes[j]
    return cnt


SMALL_SORT = 24  # up to this many intervals, sort in place (no argsort allocation)


@numba.njit(cache=True, inline="always")
def _sorted_small(lo, hi, cnt):
    """Sort ``lo/hi[:cnt]`` by left in place when short; returns whether they are now sorted
    (longer lists are left to ``_merge_fit``'s argsort). Merging ignores the order of ties."""
    if cnt > SMALL_SORT:
        return False
    for k in range(1, cnt):
        left, right = lo[k], hi[k]
        m = k
        while m > 0 and lo[m - 1] > left:
            lo[m] = lo[m - 1]
            hi[m] = hi[m - 1]
            m -= 1
        lo[m] = left
        hi[m] = right
    return True


@numba.njit(cache=True, inline="always")
def _add_member(members, t):
    members[t >> 6] |= np.uint64(1) << np.uint64(t & 63)


@numba.njit(cache=True)
def _live_index(first, last, n):
    """An empty index of placed items by lifetime (``_live_insert``, ``_live_query``): a
    segment tree over the steps whose nodes list the items whose lifetime covers them (each
    item in at most 2 log T canonical nodes), and per step the items starting there with a
    bitset of the steps where some do. Returns (base, leaves, node_head, pool_item, pool_next,
    start_head, start_next, start_bits, used): ``base`` is the first step, ``used`` a
    one-element counter of the pool."""
    base = np.int64(0)
    top = np.int64(0)
    if n > 0:
        base = first[:n].min()
        top = last[:n].max()
    steps = max(top - base + 1, 1)
    leaves = np.int64(1)
    depth = 1
    while leaves < steps:
        leaves *= 2
        depth += 1
    node_head = np.full(2 * leaves, -1, dtype=np.int64)
    pool = max(n, 1) * 2 * depth
    pool_item = np.empty(pool, dtype=np.int64)
    pool_next = np.empty(pool, dtype=np.int64)
    start_head = np.full(steps, -1, dtype=np.int64)
    start_next = np.full(max(n, 1), -1, dtype=np.int64)
    start_bits = np.zeros((steps + 63) // 64, dtype=np.uint64)
    used = np.zeros(1, dtype=np.int64)
    return base, leaves, node_head, pool_item, pool_next, start_head, start_next, start_bits, used


@numba.njit(cache=True, inline="always")
def _live_insert(t, first, last, base, leaves, node_head, pool_item, pool_next, start_head, start_next,
                 start_bits, used):
    """Add placed item ``t`` to the lifetime index (``_live_index``)."""
    lo = first[t] - base + leaves
    hi = last[t] - base + leaves + 1
    k = used[0]
    while lo < hi:
        if lo & 1:
            pool_item[k] = t
            pool_next[k] = node_head[lo]
            node_head[lo] = k
            k += 1
            lo += 1
        if hi & 1:
            hi -= 1
            pool_item[k] = t
            pool_next[k] = node_head[hi]
            node_head[hi] = k
            k += 1
        lo >>= 1
        hi >>= 1
    used[0] = k
    s = first[t] - base
    start_next[t] = start_head[s]
    start_head[s] = t
    start_bits[s >> 6] |= np.uint64(1) << np.uint64(s & 63)


@numba.njit(cache=True, inline="always")
def _live_query(f, l, base, leaves, node_head, pool_item, pool_next, start_head, start_next, start_bits, out):
    """The placed items whose lifetime meets steps ``[f, l]``, each once, into ``out``: those
    alive at ``f`` (the nodes on the path from leaf ``f`` to the root) and those starting in
    ``(f, l]`` (the set bits of the start bitset). Returns the count."""
    cnt = 0
    steps = start_head.shape[0]
    a = f - base
    if a < 0:
        a = np.int64(-1)
    elif a < leaves:
        node = a + leaves
        while node >= 1:
            k = node_head[node]
            while k >= 0:
                out[cnt] = pool_item[k]
                cnt += 1
                k = pool_next[k]
            node >>= 1
    b = min(l - base, steps - 1)
    s = a + 1
    one = np.uint64(1)
    while s <= b:
        w = s >> 6
        x = start_bits[w] >> np.uint64(s & 63)
        if x == np.uint64(0):
            s = (w + 1) * 64
            continue
        low = x & (~x + one)
        s += _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]
        if s > b:
            break
        j = start_head[s]
        while j >= 0:
            out[cnt] = j
            cnt += 1
            j = start_next[j]
        s += 1
    return cnt


@numba.njit(cache=True)
def _merge_fit(lo, hi, cnt, head_size, block_size, obj_offset, obj_right, fitter, mlo, mhi, presorted):
    """Algorithms 9 and 10: merge the avoid intervals, scan the gaps, pick by the fitter.
    Returns the chosen offset or -1. Sorts ``lo/hi[:cnt]`` in place unless ``presorted``."""
    m = 0
    if cnt > 0:
        if not presorted:  # sort lo/hi in place by left (mlo/mhi as scratch)
            order = np.argsort(lo[:cnt], kind="mergesort")
            for k in range(cnt):
                mlo[k] = lo[order[k]]
                mhi[k] = hi[order[k]]
            lo[:cnt] = mlo[:cnt]
            hi[:cnt] = mhi[:cnt]
        mlo[0] = lo[0]
        mhi[0] = hi[0]
        m = 1
        for k in range(1, cnt):
            left, right = lo[k], hi[k]
            if mhi[m - 1] < left:
                mlo[m] = left
                mhi[m] = right
                m += 1
            elif mhi[m - 1] < right:
                mhi[m - 1] = right
    best_lower, best_gap = np.int64(-1), np.int64(0)
    upper = obj_right
    for k in range(m, -1, -1):  # pop from the top (largest right end) down, then the object start
        lower = mhi[k - 1] if k > 0 else obj_offset
        if lower + head_size <= upper and lower + block_size <= obj_right:
            gap = upper - lower
            if best_lower < 0:
                better = True
            elif fitter == 0:
                better = lower < best_lower or (lower == best_lower and gap < best_gap)
            else:
                better = gap < best_gap or (gap == best_gap and lower < best_lower)
            if better:
                best_lower, best_gap = lower, gap
        if k > 0:
            upper = mlo[k - 1]
    return best_lower


@numba.njit(cache=True, inline="always")
def _insert_placed(placed, n_placed, t, offsets):
    """Insert item ``t`` into ``placed[:n_placed]``, kept sorted by offset (so Avoid lists a
    one-item block's intervals in order); returns the new count."""
    pos = n_placed
    while pos > 0 and offsets[placed[pos - 1]] > offsets[t]:
        placed[pos] = placed[pos - 1]
        pos -= 1
    placed[pos] = t
    return n_placed + 1


@numba.njit(cache=True)
def single_object_kernel(blk_ptr, blk_items, sizes, use_bits, bits, first, last, fitter,
                         pinned_items, pinned_offsets):
    """Algorithm 6 over blocks ``blk_ptr``/``blk_items`` (already sorted); returns offsets."""
    n = len(sizes)
    offsets = np.zeros(n, dtype=np.int64)
    placed = np.empty(n, dtype=np.int64)
    n_placed = 0
    for k in range(len(pinned_items)):
        t = pinned_items[k]
        offsets[t] = pinned_offsets[k]
        n_placed = _insert_placed(placed, n_placed, t, offsets)
    max_len = 1
    for b in range(len(blk_ptr) - 1):
        max_len = max(max_len, blk_ptr[b + 1] - blk_ptr[b])
    lo = np.empty(n * max_len + 1, dtype=np.int64)
    hi = np.empty(n * max_len + 1, dtype=np.int64)
    mlo = np.empty(n * max_len + 1, dtype=np.int64)
    mhi = np.empty(n * max_len + 1, dtype=np.int64)
    placed_bits = np.zeros(bits.shape[1] if use_bits else 1, dtype=np.uint64)
    conf = np.empty(n if use_bits else 1, dtype=np.int64)
    if use_bits:  # (without a bit matrix placed_bits has one word: ids >= 64 would overflow it)
        for k in range(n_placed):
            _add_member(placed_bits, placed[k])
    else:  # lifetimes: the placed items met by a block's lifetime come from an index
        (base, leaves, node_head, pool_item, pool_next, start_head, start_next, start_bits,
         used) = _live_index(first, last, n)
        for k in range(n_placed):
            _live_insert(placed[k], first, last, base, leaves, node_head, pool_item, pool_next, start_head,
                         start_next, start_bits, used)
        conf = np.empty(n, dtype=np.int64)
    for b in range(len(blk_ptr) - 1):
        single = blk_ptr[b + 1] - blk_ptr[b] == 1
        if single and use_bits:
            cnt = _avoid_bits(blk_items[blk_ptr[b]], placed_bits, sizes, offsets, bits, lo, hi, conf)
        elif not use_bits:
            f, l = first[blk_items[blk_ptr[b]]], last[blk_items[blk_ptr[b]]]
            for k in range(blk_ptr[b], blk_ptr[b + 1]):
                f = min(f, first[blk_items[k]])
                l = max(l, last[blk_items[k]])
            n_conf = _live_query(f, l, base, leaves, node_head, pool_item, pool_next, start_head, start_next,
                                 start_bits, conf)
            cnt = 0
            for q in range(n_conf):
                cnt = _avoid_item(conf[q], blk_ptr, blk_items, b, sizes, offsets, use_bits, bits,
                                  first, last, 0, lo, hi, cnt)
        else:
            cnt = 0
            for p in range(n_placed):
                cnt = _avoid_item(placed[p], blk_ptr, blk_items, b, sizes, offsets, use_bits, bits,
                                  first, last, 0, lo, hi, cnt)
        block_size = 0
        for k in range(blk_ptr[b], blk_ptr[b + 1]):
            block_size += sizes[blk_items[k]]
        presorted = single and _sorted_small(lo, hi, cnt)
        start = _merge_fit(lo, hi, cnt, sizes[blk_items[blk_ptr[b]]], block_size, 0, INFINITY,
                           fitter, mlo, mhi, presorted)
        for k in range(blk_ptr[b], blk_ptr[b + 1]):
            t = blk_items[k]
            offsets[t] = start
            start += sizes[t]
            if use_bits:  # one-item blocks use the bitset; the others sort their intervals
                _add_member(placed_bits, t)
                placed[n_placed] = t
                n_placed += 1
            else:
                _live_insert(t, first, last, base, leaves, node_head, pool_item, pool_next, start_head,
                             start_next, start_bits, used)
    return offsets


@numba.njit(cache=True, inline="always")
def _insert_by_offset(t, o, obj_first, obj_last, next_item, offsets):
    """Insert item ``t`` into object ``o``'s list, kept sorted by offset (ties: later last), so
    the avoid intervals of a one-item block come out in order and need no sort."""
    prev, j = -1, obj_first[o]
    while j >= 0 and offsets[j] <= offsets[t]:
        prev, j = j, next_item[j]
    next_item[t] = j
    if prev < 0:
        obj_first[o] = t
    else:
        next_item[prev] = t
    if j < 0:
        obj_last[o] = t


@numba.njit(cache=True)
def many_objects_kernel(blk_ptr, blk_items, sizes, use_bits, bits, first, last, fitter,
                        pinned_items, pinned_offsets):
    """Algorithm 7 over sorted blocks; returns offsets.

    With a conflict bit matrix, a one-item block finds its unsafe placed items once (one AND
    of its row with the placed items' bitset), then each object it tries gets only its own
    share of them (no per-object bitset scan), a short list sorted in place."""
    n = len(sizes)
    n_blocks = len(blk_ptr) - 1
    offsets = np.zeros(n, dtype=np.int64)
    # objects: offset, right end, head block, first/last item of the object's item list
    obj_off = np.empty(n_blocks + 1, dtype=np.int64)
    obj_right = np.empty(n_blocks + 1, dtype=np.int64)
    obj_head = np.full(n_blocks + 1, -1, dtype=np.int64)  # head block index (-1: pinned object)
    obj_first = np.full(n_blocks + 1, -1, dtype=np.int64)
    obj_last = np.full(n_blocks + 1, -1, dtype=np.int64)
    next_item = np.full(n, -1, dtype=np.int64)
    obj_of = np.full(n, -1, dtype=np.int64)  # object of each placed item
    placed_bits = np.zeros(bits.shape[1] if use_bits else 1, dtype=np.uint64)
    conf = np.empty(n if use_bits else 1, dtype=np.int64)
    n_obj = 0
    mem_end = np.int64(0)
    if len(pinned_items) > 0:
        obj_off[0] = 0
        for k in range(len(pinned_items)):
            t = pinned_items[k]
            offsets[t] = pinned_offsets[k]
            mem_end = max(mem_end, offsets[t] + sizes[t])
            _insert_by_offset(t, 0, obj_first, obj_last, next_item, offsets)
            obj_of[t] = 0
            if use_bits:
                _add_member(placed_bits, t)
        obj_right[0] = mem_end
        n_obj = 1
    if not use_bits:  # lifetimes: the placed items met by a block's lifetime come from an index
        (base, leaves, node_head, pool_item, pool_next, start_head, start_next, start_bits,
         used) = _live_index(first, last, n)
        for k in range(len(pinned_items)):
            _live_insert(pinned_items[k], first, last, base, leaves, node_head, pool_item, pool_next,
                         start_head, start_next, start_bits, used)
        conf = np.empty(n, dtype=np.int64)
    owner = np.empty(n, dtype=np.int64)  # the object of each met item, grouped
    max_len = 1
    for b in range(n_blocks):
        max_len = max(max_len, blk_ptr[b + 1] - blk_ptr[b])
    lo = np.empty(n * max_len + 1, dtype=np.int64)
    hi = np.empty(n * max_len + 1, dtype=np.int64)
    mlo = np.empty(n * max_len + 1, dtype=np.int64)
    mhi = np.empty(n * max_len + 1, dtype=np.int64)
    for b in range(n_blocks):
        length = blk_ptr[b + 1] - blk_ptr[b]
        head_item = blk_items[blk_ptr[b]]
        block_size = 0
        for k in range(blk_ptr[b], blk_ptr[b + 1]):
            block_size += sizes[blk_items[k]]
        by_bits = length == 1 and use_bits
        n_conf = _conflicting(head_item, placed_bits, bits, conf) if by_bits else 0
        if not use_bits:  # the placed items the block's lifetime meets, grouped by object
            f, l = first[head_item], last[head_item]
            for k in range(blk_ptr[b], blk_ptr[b + 1]):
                f = min(f, first[blk_items[k]])
                l = max(l, last[blk_items[k]])
            n_conf = _live_query(f, l, base, leaves, node_head, pool_item, pool_next, start_head, start_next,
                                 start_bits, conf)
            if n_conf > 1:
                for q in range(n_conf):
                    owner[q] = obj_of[conf[q]]
                grouped = np.argsort(owner[:n_conf], kind="mergesort")
                for q in range(n_conf):
                    lo[q] = conf[grouped[q]]  # lo as scratch
                for q in range(n_conf):
                    conf[q] = lo[q]
                    owner[q] = obj_of[conf[q]]
            elif n_conf == 1:
                owner[0] = obj_of[conf[0]]
        gp = 0
        chosen, start = -1, np.int64(-1)
        for o in range(n_obj):
            ge = gp
            if not use_bits:  # this object's met items: conf[gp:ge]
                while gp < n_conf and owner[gp] < o:
                    gp += 1
                ge = gp
                while ge < n_conf and owner[ge] == o:
                    ge += 1
            if block_size > obj_right[o] - obj_off[o]:  # cannot fit whatever the object holds
                continue
            h = obj_head[o]
            if h >= 0 and length == 1 and blk_ptr[h + 1] - blk_ptr[h] == 1:
                if _unsafe(head_item, blk_items[blk_ptr[h]], use_bits, bits, first, last):
                    continue
            cnt = 0
            if by_bits:  # this object's share of the unsafe items, by offset
                for q in range(n_conf):
                    j = conf[q]
                    if obj_of[j] == o:
                        lo[cnt] = offsets[j]
                        hi[cnt] = offsets[j] + sizes[j]
                        cnt += 1
            elif not use_bits:
                for q in range(gp, ge):
                    cnt = _avoid_item(conf[q], blk_ptr, blk_items, b, sizes, offsets, use_bits, bits,
                                      first, last, obj_off[o], lo, hi, cnt)
            else:
                j = obj_first[o]
                while j >= 0:
                    cnt = _avoid_item(j, blk_ptr, blk_items, b, sizes, offsets, use_bits, bits,
                                      first, last, obj_off[o], lo, hi, cnt)
                    j = next_item[j]
            if cnt == 0:  # nothing unsafe here: the object's start (it is large enough)
                chosen, start = o, obj_off[o]
                break
            presorted = length == 1 and _sorted_small(lo, hi, cnt)
            start = _merge_fit(lo, hi, cnt, sizes[head_item], block_size, obj_off[o], obj_right[o],
                               fitter, mlo, mhi, presorted)
            if start >= 0:
                chosen = o
                break
        if chosen < 0:
            chosen = n_obj
            n_obj += 1
            obj_off[chosen] = mem_end
            obj_right[chosen] = mem_end + block_size
            obj_head[chosen] = b
            start = mem_end
            mem_end += block_size
        for k in range(blk_ptr[b], blk_ptr[b + 1]):
            t = blk_items[k]
            offsets[t] = start
            start += sizes[t]
            obj_of[t] = chosen
            if use_bits:  # one-item blocks never walk the list: any order will do
                _add_member(placed_bits, t)
                next_item[t] = obj_first[chosen]
                obj_first[chosen] = t
            else:
                _live_insert(t, first, last, base, leaves, node_head, pool_item, pool_next, start_head,
                             start_next, start_bits, used)
    return offsets


def kernel_inputs(problem: OffsetProblem, blocks) -> tuple:
    """Flat arrays for the kernels: sorted blocks (pinned items left out), sizes, conflicts."""
    pinned = problem.pinned
    blocks = [b for b in blocks if b[0] not in pinned]
    blk_ptr = np.zeros(len(blocks) + 1, dtype=np.int64)
    blk_ptr[1:] = np.cumsum([len(b) for b in blocks])
    blk_items = np.fromiter((t for b in blocks for t in b), dtype=np.int64, count=int(blk_ptr[-1]))
    return kernel_arrays(problem, blk_ptr, blk_items)


def sorted_block_arrays(problem: OffsetProblem, sort: str) -> tuple[np.ndarray, np.ndarray]:
    """``sort_blocks`` (pinned blocks left out) as CSR arrays, with the keys computed per block by
    ``numpy`` reductions instead of a Python loop: the same order (keys, then head item), at a
    fraction of the per-call cost that dominated graphs of a few hundred tensors."""
    n = problem.n
    in_block = np.zeros(n, dtype=np.bool_)
    chained = [t for b in problem.blocks for t in b]
    in_block[chained] = True
    singles = np.flatnonzero(~in_block)
    items = np.concatenate([np.array(chained, dtype=np.int64), singles.astype(np.int64)])
    lengths = np.concatenate([np.array([len(b) for b in problem.blocks], dtype=np.int64),
                              np.ones(len(singles), dtype=np.int64)])
    ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    if len(lengths) == 0:
        return ptr, items
    starts = ptr[:-1]
    if sort == "size":
        keys = -np.add.reduceat(problem.sizes[items], starts)
    elif sort == "breadth":
        keys = -np.maximum.reduceat(breadths(problem)[items], starts)
    elif sort == "source":
        problem.require_lifetimes("the source sort")
        keys = np.minimum.reduceat(problem.first[items], starts)
    elif sort == "unsafe":
        keys = -np.add.reduceat(problem.relation.degrees()[items], starts)
    else:
        raise PlanningError(f"sort {sort!r}: expected one of {SORTS}")
    heads = items[starts]
    ranked = np.lexsort((heads, keys))
    if problem.pinned:
        pinned = np.array(sorted(problem.pinned), dtype=np.int64)
        ranked = ranked[~np.isin(heads[ranked], pinned)]
    out_len = lengths[ranked]
    out_ptr = np.zeros(len(ranked) + 1, dtype=np.int64)
    np.cumsum(out_len, out=out_ptr[1:])
    if np.all(lengths == 1):
        return out_ptr, items[ranked]
    out_items = np.concatenate([items[ptr[k]:ptr[k + 1]] for k in ranked]) if len(ranked) else items[:0]
    return out_ptr, out_items


def kernel_arrays(problem: OffsetProblem, blk_ptr: np.ndarray, blk_items: np.ndarray) -> tuple:
    """``kernel_inputs`` for blocks already given as sorted CSR arrays."""
    if isinstance(problem.conflicts, MatrixConflicts):
        use_bits, bits = True, problem.conflicts.bits
        first = last = np.zeros(problem.n, dtype=np.int64)
    else:
        use_bits, bits = False, np.zeros((1, 1), dtype=np.uint64)
        first, last = problem.first, problem.last
    pinned = problem.pinned
    p_items = np.array(sorted(pinned), dtype=np.int64)
    p_offsets = np.array([pinned[t] for t in sorted(pinned)], dtype=np.int64)
    return (blk_ptr, blk_items, np.asarray(problem.sizes, np.int64), use_bits, bits,
            np.asarray(first, np.int64), np.asarray(last, np.int64), p_items, p_offsets)


def _run(kernel, problem: OffsetProblem, sort: str, fitter: str, order, name: str) -> OffsetResult:
    start = time.perf_counter()
    _check_options(sort, fitter)
    if order is not None:
        args = kernel_inputs(problem, order)
    else:
        args = kernel_arrays(problem, *sorted_block_arrays(problem, sort))
    (blk_ptr, blk_items, sizes, use_bits, bits, first, last, p_items, p_offsets) = args
    offsets = kernel(blk_ptr, blk_items, sizes, use_bits, bits, first, last,
                     FIRST_FIT if fitter == "first-fit" else BEST_FIT, p_items, p_offsets)
    return make_result(problem, offsets, name, seconds=time.perf_counter() - start)


def single_object(problem: OffsetProblem, sort: str = "size", fitter: str = "first-fit",
                  order=None, name: str | None = None) -> OffsetResult:
    return _run(single_object_kernel, problem, sort, fitter, order, name or f"mindspore-so:{sort},{fitter}")


def many_objects(problem: OffsetProblem, sort: str = "size", fitter: str = "first-fit",
                 order=None, name: str | None = None) -> OffsetResult:
    return _run(many_objects_kernel, problem, sort, fitter, order, name or f"mindspore-mo:{sort},{fitter}")


__all__ = ["single_object", "many_objects", "single_object_kernel", "many_objects_kernel", "SORTS", "FITS"]
