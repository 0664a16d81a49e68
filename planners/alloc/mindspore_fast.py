"""Numba kernels of Single Object and Many Objects (the planners' hot path).

The same algorithms as ``planners.alloc.mindspore`` (Algorithms 6-13 of the MindSpore paper),
written on flat arrays: blocks as CSR lists in sorted order, conflicts as either inclusive
lifetimes or a uint64 bit matrix. The tests check every kernel against the readable
reference in ``mindspore.py`` (identical offsets on random problems, blocks and both fits).

Many Objects keeps each object's items in a linked list sorted by offset, so ``Avoid`` scans
only the object being tried and its intervals come out in order (no sort); this is where it
saves time over Single Object, which scans every placed item. With an explicit conflict
matrix, a one-item block (nearly every block) instead ANDs its conflict row with the
object's (or, for Single Object, the placed items') member bitset, and visits only the items
it conflicts with: 64 items a word, so graphs of thousands of tensors take milliseconds.
Single Object keeps its placed items sorted by offset (as TFLite's arena does), so the avoid
intervals of a one-item block come out in order and ``Merge`` needs no sort.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from planners.alloc.mindspore import FITS, SORTS, _check_options, sort_blocks
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


@numba.njit(cache=True, inline="always")
def _avoid_bits(item, members, sizes, offsets, bits, lo, hi):
    """Algorithm 8 for a one-item block on a conflict bit matrix: only the members (a bitset
    row) that conflict with ``item`` give intervals, found a word at a time. Returns the count
    (intervals unsorted)."""
    cnt = 0
    for w in range(members.shape[0]):
        x = bits[item, w] & members[w]
        j = w * 64
        while x != np.uint64(0):
            if x & np.uint64(1):
                lo[cnt] = offsets[j]
                hi[cnt] = offsets[j] + sizes[j]
                cnt += 1
            x >>= np.uint64(1)
            j += 1
    return cnt


@numba.njit(cache=True, inline="always")
def _add_member(members, t):
    members[t >> 6] |= np.uint64(1) << np.uint64(t & 63)


@numba.njit(cache=True)
def _merge_fit(lo, hi, cnt, head_size, block_size, obj_offset, obj_right, fitter, mlo, mhi, presorted):
    """Algorithms 9 and 10: merge the avoid intervals, scan the gaps, pick by the fitter.
    Returns the chosen offset or -1."""
    m = 0
    if cnt > 0:
        if presorted:  # lefts already increasing (Single Object scans items by offset)
            order = np.arange(cnt)
        else:
            order = np.argsort(lo[:cnt], kind="mergesort")
        mlo[0] = lo[order[0]]
        mhi[0] = hi[order[0]]
        m = 1
        for k in range(1, cnt):
            left, right = lo[order[k]], hi[order[k]]
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
    for k in range(n_placed):
        _add_member(placed_bits, placed[k])
    for b in range(len(blk_ptr) - 1):
        single = blk_ptr[b + 1] - blk_ptr[b] == 1
        if single and use_bits:
            cnt = _avoid_bits(blk_items[blk_ptr[b]], placed_bits, sizes, offsets, bits, lo, hi)
        else:
            cnt = 0
            for p in range(n_placed):
                cnt = _avoid_item(placed[p], blk_ptr, blk_items, b, sizes, offsets, use_bits, bits,
                                  first, last, 0, lo, hi, cnt)
        block_size = 0
        for k in range(blk_ptr[b], blk_ptr[b + 1]):
            block_size += sizes[blk_items[k]]
        start = _merge_fit(lo, hi, cnt, sizes[blk_items[blk_ptr[b]]], block_size, 0, INFINITY,
                           fitter, mlo, mhi, single and not use_bits)
        for k in range(blk_ptr[b], blk_ptr[b + 1]):
            t = blk_items[k]
            offsets[t] = start
            start += sizes[t]
            if use_bits:
                _add_member(placed_bits, t)
            n_placed = _insert_placed(placed, n_placed, t, offsets)
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
    """Algorithm 7 over sorted blocks; returns offsets."""
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
    n_obj = 0
    mem_end = np.int64(0)
    if len(pinned_items) > 0:
        obj_off[0] = 0
        for k in range(len(pinned_items)):
            t = pinned_items[k]
            offsets[t] = pinned_offsets[k]
            mem_end = max(mem_end, offsets[t] + sizes[t])
            _insert_by_offset(t, 0, obj_first, obj_last, next_item, offsets)
        obj_right[0] = mem_end
        n_obj = 1
    max_len = 1
    for b in range(n_blocks):
        max_len = max(max_len, blk_ptr[b + 1] - blk_ptr[b])
    lo = np.empty(n * max_len + 1, dtype=np.int64)
    hi = np.empty(n * max_len + 1, dtype=np.int64)
    mlo = np.empty(n * max_len + 1, dtype=np.int64)
    mhi = np.empty(n * max_len + 1, dtype=np.int64)
    # each object's items as a bitset too (grown as objects appear), for one-item blocks
    obj_bits = np.zeros((16 if use_bits else 1, bits.shape[1] if use_bits else 1), dtype=np.uint64)
    if use_bits and n_obj == 1:
        j = obj_first[0]
        while j >= 0:
            _add_member(obj_bits[0], j)
            j = next_item[j]
    for b in range(n_blocks):
        length = blk_ptr[b + 1] - blk_ptr[b]
        head_item = blk_items[blk_ptr[b]]
        block_size = 0
        for k in range(blk_ptr[b], blk_ptr[b + 1]):
            block_size += sizes[blk_items[k]]
        chosen, start = -1, np.int64(-1)
        for o in range(n_obj):
            h = obj_head[o]
            if h >= 0 and length == 1 and blk_ptr[h + 1] - blk_ptr[h] == 1:
                if _unsafe(head_item, blk_items[blk_ptr[h]], use_bits, bits, first, last):
                    continue
            if length == 1 and use_bits:
                cnt = _avoid_bits(head_item, obj_bits[o], sizes, offsets, bits, lo, hi)
            else:
                cnt = 0
                j = obj_first[o]
                while j >= 0:
                    cnt = _avoid_item(j, blk_ptr, blk_items, b, sizes, offsets, use_bits, bits,
                                      first, last, obj_off[o], lo, hi, cnt)
                    j = next_item[j]
            start = _merge_fit(lo, hi, cnt, sizes[head_item], block_size, obj_off[o], obj_right[o],
                               fitter, mlo, mhi, length == 1 and not use_bits)
            if start >= 0:
                chosen = o
                break
        if chosen < 0:
            chosen = n_obj
            n_obj += 1
            if use_bits and n_obj > obj_bits.shape[0]:
                grown = np.zeros((2 * obj_bits.shape[0], obj_bits.shape[1]), dtype=np.uint64)
                grown[:obj_bits.shape[0]] = obj_bits
                obj_bits = grown
            obj_off[chosen] = mem_end
            obj_right[chosen] = mem_end + block_size
            obj_head[chosen] = b
            start = mem_end
            mem_end += block_size
        for k in range(blk_ptr[b], blk_ptr[b + 1]):
            t = blk_items[k]
            offsets[t] = start
            start += sizes[t]
            if use_bits:
                _add_member(obj_bits[chosen], t)
            _insert_by_offset(t, chosen, obj_first, obj_last, next_item, offsets)
    return offsets


def kernel_inputs(problem: OffsetProblem, blocks) -> tuple:
    """Flat arrays for the kernels: sorted blocks (pinned items left out), sizes, conflicts."""
    pinned = problem.pinned
    blocks = [b for b in blocks if b[0] not in pinned]
    blk_ptr = np.zeros(len(blocks) + 1, dtype=np.int64)
    blk_ptr[1:] = np.cumsum([len(b) for b in blocks])
    blk_items = np.fromiter((t for b in blocks for t in b), dtype=np.int64, count=int(blk_ptr[-1]))
    if isinstance(problem.conflicts, MatrixConflicts):
        use_bits, bits = True, problem.conflicts.bits
        first = last = np.zeros(problem.n, dtype=np.int64)
    else:
        use_bits, bits = False, np.zeros((1, 1), dtype=np.uint64)
        first, last = problem.first, problem.last
    p_items = np.array(sorted(pinned), dtype=np.int64)
    p_offsets = np.array([pinned[t] for t in sorted(pinned)], dtype=np.int64)
    return (blk_ptr, blk_items, problem.sizes.astype(np.int64), use_bits, bits,
            np.asarray(first, np.int64), np.asarray(last, np.int64), p_items, p_offsets)


def _run(kernel, problem: OffsetProblem, sort: str, fitter: str, order, name: str) -> OffsetResult:
    start = time.perf_counter()
    _check_options(sort, fitter)
    blocks = order if order is not None else sort_blocks(problem, sort)
    (blk_ptr, blk_items, sizes, use_bits, bits, first, last, p_items, p_offsets) = kernel_inputs(problem, blocks)
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
