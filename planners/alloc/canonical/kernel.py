"""The canonical search's Numba kernels: one resumable branch-and-bound over arrays (see
``planners.alloc.canonical.search`` for the search and its pruning rules;
``planners.alloc.canonical.reference`` is the same search in plain Python, the oracle the
tests compare these kernels with)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from planners.alloc.canonical.instance import BUDGET, EXHAUSTED, FOUND, GROW, INF, LIMITED  # noqa: F401


class KernelInstance(NamedTuple):
    """The fixed arrays of one search (``canonical_instance.SearchInstance``), by name: the
    kernel takes them as one typed bundle, so no call can pass two int64 arrays swapped."""

    sizes: np.ndarray  # int64[n]: buffer sizes, by rank
    sec_lo: np.ndarray  # int64[n]: first section of each buffer
    sec_hi: np.ndarray  # int64[n]: one past its last section
    adj_start: np.ndarray  # int64[n + 1]: CSR starts of the time-overlap lists
    adj: np.ndarray  # int64: the buffers each buffer overlaps in time
    mem_start: np.ndarray  # int64[sections + 1]: CSR starts of the section member lists
    members: np.ndarray  # int64: the buffers live in each section
    twin_start: np.ndarray  # int64[n + 1]: CSR starts of each buffer's later twins
    twin: np.ndarray  # int64: later buffers with the same size and lifetime
    pre_key: np.ndarray  # int64[n]: rank of the preordering keys before T
    by_post: np.ndarray  # int64[n]: ranks by the keys after T


class KernelState(NamedTuple):
    """The mutable arrays of a search in progress (``canonical_search.CanonicalSearch``)."""

    placed: np.ndarray
    offset: np.ndarray
    h: np.ndarray
    floor: np.ndarray
    rem: np.ndarray
    cuts: np.ndarray
    path: np.ndarray
    hmark: np.ndarray
    fmark: np.ndarray
    trail_hi: np.ndarray
    trail_hv: np.ndarray
    trail_fi: np.ndarray
    trail_fv: np.ndarray
    tops: np.ndarray
    stamp_of: np.ndarray
    affected: np.ndarray
    scratch: np.ndarray
    lw: np.ndarray
    ltrail: np.ndarray
    lmark: np.ndarray
    redo: np.ndarray
    frames: np.ndarray
    state: np.ndarray
    prio: np.ndarray
    ptrail: np.ndarray
    keys: np.ndarray
    picked: np.ndarray


@njit(cache=True)
def _on_later_twin(r, y, twin_start, twin, placed, offset, sizes):
    """True if ``r`` at ``y`` would rest right on a placed twin of a later rank. Twins stacked
    one right on the other can swap places without changing anything else (the solution
    stays canonical), so only the order with the earlier rank below is searched."""
    for k in range(twin_start[r], twin_start[r + 1]):
        z = twin[k]
        if placed[z] and offset[z] + sizes[z] == y:
            return True
    return False


@njit(cache=True)
def _next_candidate(sizes, sec_lo, sec_hi, placed, h, capacity, lo, hi, last_off, last_r, tried_h, tried_r,
                    twin_start, twin, offset, prio):
    """The next buffer to try in the partition of sections [lo, hi): lowest (h, priority)
    after the one tried last, in canonical position, below the dominance height, not on a
    later twin; -1 if none. ``prio`` orders the partition's buffers (``_rank_part``)."""
    n = sizes.shape[0]
    min_height = INF
    for r in range(n):
        if not placed[r] and sizes[r] > 0 and sec_lo[r] >= lo and sec_hi[r] <= hi and h[r] + sizes[r] < min_height:
            min_height = h[r] + sizes[r]
    best = -1
    last_p = prio[last_r] if last_r >= 0 else -1
    tried_p = prio[tried_r] if tried_r >= 0 else -1
    for r in range(n):
        if placed[r] or sizes[r] == 0 or sec_lo[r] < lo or sec_hi[r] > hi:
            continue
        hr = h[r]
        pr = prio[r]
        if hr < last_off or (hr == last_off and pr < last_p) or hr >= min_height or hr + sizes[r] > capacity:
            continue
        if tried_r >= 0 and (hr < tried_h or (hr == tried_h and pr <= tried_p)):
            continue
        if (best < 0 or hr < h[best] or (hr == h[best] and pr < prio[best])) and not _on_later_twin(
                r, hr, twin_start, twin, placed, offset, sizes):
            best = r
    return best


@njit(cache=True)
def _rank_part(lo, hi, sizes, sec_lo, sec_hi, placed, rem, pre_key, by_post, prio, ptrail, tops, keys, picked):
    """Order the unplaced buffers of sections [lo, hi) for the search of that partition:
    by (``pre_key``, bytes still unplaced in the buffer's busiest section, descending,
    ``by_post``), recording the old priorities on ``ptrail`` from ``tops[5]``."""
    m = 0
    for k in range(by_post.shape[0]):
        r = by_post[k]
        if not placed[r] and sizes[r] > 0 and sec_lo[r] >= lo and sec_hi[r] <= hi:
            busiest = 0
            for s in range(sec_lo[r], sec_hi[r]):
                if rem[s] > busiest:
                    busiest = rem[s]
            picked[m] = r
            keys[m] = -busiest
            m += 1
    # two stable sorts: by T, then by the keys before it
    by_t = np.argsort(keys[:m], kind="mergesort")
    for j in range(m):
        keys[j] = pre_key[picked[by_t[j]]]
    by_pre = np.argsort(keys[:m], kind="mergesort")
    t = tops[5]
    for j in range(m):
        r = picked[by_t[by_pre[j]]]
        ptrail[t, 0], ptrail[t, 1] = r, prio[r]
        t += 1
        prio[r] = j
    tops[5] = t


@njit(cache=True)
def _unrank_to(mark, prio, ptrail, tops):
    """Restore the priorities recorded on ``ptrail`` above ``mark``."""
    t = tops[5]
    while t > mark:
        t -= 1
        prio[ptrail[t, 0]] = ptrail[t, 1]
    tops[5] = t


@njit(cache=True)
def _place(b, depth, sizes, sec_lo, sec_hi, adj_start, adj, mem_start, members, capacity, lo, hi, placed, offset,
           h, floor, rem, hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops, stamp_of, affected, scratch,
           lw, ltrail, lmark, redo):
    """Put ``b`` at ``h[b]``: raise the floors of its sections and the ``h`` of the buffers it
    overlaps (recorded on the trails from ``tops`` = [h-trail length, floor-trail length,
    stamp, highest top placed, low-trail length]); then True if every section of [lo, hi)
    can still hold its unplaced bytes.

    ``lw`` holds each section's lowest ``h`` among its unplaced buffers and one buffer at
    that height: only when that buffer is placed or raised can the lowest ``h`` change (the
    others only rise), so only then are the section's buffers scanned again."""
    th, tf, stamp, tl = tops[0], tops[1], tops[2] + 1, tops[4]
    hmark[depth], fmark[depth] = th, tf
    lmark[depth, 0], lmark[depth, 1] = tl, tops[3]
    y = h[b]
    top = y + sizes[b]
    if top > tops[3]:
        tops[3] = top
    placed[b] = True
    offset[b] = y
    n_affected = 0
    n_redo = 0
    for s in range(sec_lo[b], sec_hi[b]):
        trail_fi[tf] = s
        trail_fv[tf] = floor[s]
        tf += 1
        floor[s] = top
        rem[s] -= sizes[b]
        stamp_of[s] = stamp
        affected[n_affected] = s
        n_affected += 1
        if lw[1, s] == b:
            redo[1, s] = stamp
            redo[0, n_redo] = s
            n_redo += 1
    for k in range(adj_start[b], adj_start[b + 1]):
        c = adj[k]
        if placed[c] or h[c] >= top:
            continue
        trail_hi[th] = c
        trail_hv[th] = h[c]
        th += 1
        h[c] = top
        for s in range(sec_lo[c], sec_hi[c]):
            if stamp_of[s] != stamp:
                stamp_of[s] = stamp
                affected[n_affected] = s
                n_affected += 1
            if lw[1, s] == c and redo[1, s] != stamp:
                redo[1, s] = stamp
                redo[0, n_redo] = s
                n_redo += 1
    for a in range(n_redo):
        s = redo[0, a]
        low, who = INF, -1
        for k in range(mem_start[s], mem_start[s + 1]):
            r = members[k]
            if not placed[r] and sizes[r] > 0 and h[r] < low:
                low, who = h[r], r
        ltrail[tl, 0], ltrail[tl, 1], ltrail[tl, 2] = s, lw[0, s], lw[1, s]
        tl += 1
        lw[0, s], lw[1, s] = low, who
    # a section's floor is at least the lowest place any of its unplaced buffers can go
    for a in range(n_affected):
        s = affected[a]
        if lw[1, s] >= 0 and floor[s] < lw[0, s]:
            trail_fi[tf] = s
            trail_fv[tf] = floor[s]
            tf += 1
            floor[s] = lw[0, s]
    tops[0], tops[1], tops[2], tops[4] = th, tf, stamp, tl
    for s in range(lo, hi):
        if rem[s] > 0:
            base = floor[s] if floor[s] > y else y
            if base + rem[s] > capacity:
                return False
    # the staircase: sections whose buffers changed (elsewhere nothing above ``y`` changed
    # since an ancestor checked them); no ``h`` exceeds the highest top placed, so a section
    # with room for all its bytes above that cannot fail it
    for a in range(n_affected):
        s = affected[a]
        if rem[s] > 0 and tops[3] + rem[s] > capacity and not _staircase_fits(
                s, y, sizes, placed, h, floor, mem_start, members, capacity, scratch):
            return False
    return True


@njit(cache=True)
def _staircase_fits(s, y, sizes, placed, h, floor, mem_start, members, capacity, scratch):
    """Release-time bound of section ``s``: each unplaced buffer goes no lower than its ``h``
    (nor the floor, nor ``y``), so for every height t the buffers that cannot start below t
    must fit between t and the capacity."""
    base = floor[s] if floor[s] > y else y
    m = 0
    for k in range(mem_start[s], mem_start[s + 1]):
        r = members[k]
        if not placed[r] and sizes[r] > 0 and h[r] > base:
            # insertion sort, highest h first
            v = h[r]
            j = m
            while j > 0 and h[scratch[j - 1]] < v:
                scratch[j] = scratch[j - 1]
                j -= 1
            scratch[j] = r
            m += 1
    need = 0
    for j in range(m):
        r = scratch[j]
        need += sizes[r]
        if h[r] + need > capacity:
            return False
    return True


@njit(cache=True)
def _undo(b, depth, sizes, sec_lo, sec_hi, placed, h, floor, rem, hmark, fmark, trail_hi, trail_hv,
          trail_fi, trail_fv, tops, lw, ltrail, lmark):
    """Take ``b`` (placed at ``depth``) back out, restoring what ``_place`` changed."""
    tl = tops[4]
    while tl > lmark[depth, 0]:
        tl -= 1
        s = ltrail[tl, 0]
        lw[0, s], lw[1, s] = ltrail[tl, 1], ltrail[tl, 2]
    tops[4], tops[3] = tl, lmark[depth, 1]
    tf, th = tops[1], tops[0]
    while tf > fmark[depth]:
        tf -= 1
        floor[trail_fi[tf]] = trail_fv[tf]
    while th > hmark[depth]:
        th -= 1
        h[trail_hi[th]] = trail_hv[th]
    for s in range(sec_lo[b], sec_hi[b]):
        rem[s] += sizes[b]
    placed[b] = False
    tops[0], tops[1] = th, tf


@njit(cache=True)
def _any_unplaced(sizes, sec_lo, sec_hi, placed, lo, hi):
    for r in range(sizes.shape[0]):
        if not placed[r] and sizes[r] > 0 and sec_lo[r] >= lo and sec_hi[r] <= hi:
            return True
    return False


PARTS, SEARCH = 0, 1
NONE, SUCCESS, FAIL = 0, 1, 2


@njit(cache=True)
def _undo_to(mark, depth, path, cuts, sizes, sec_lo, sec_hi, placed, h, floor, rem, hmark, fmark, trail_hi,
             trail_hv, trail_fi, trail_fv, tops, lw, ltrail, lmark):
    """Take back every placement at depth >= ``mark``; returns the new depth."""
    while depth > mark:
        depth -= 1
        b = path[depth]
        for s in range(sec_lo[b], sec_hi[b] - 1):
            cuts[s] += 1
        _undo(b, depth, sizes, sec_lo, sec_hi, placed, h, floor, rem, hmark, fmark, trail_hi, trail_hv,
              trail_fi, trail_fv, tops, lw, ltrail, lmark)
    return depth


@njit(cache=True)
def _push_search(frames, top, lo, hi, last_off, last_r, spent):
    """Push a SEARCH frame over sections [lo, hi) after (last_off, last_r)."""
    frames[top, 0], frames[top, 1], frames[top, 2] = SEARCH, lo, hi
    frames[top, 3], frames[top, 4], frames[top, 5], frames[top, 6] = last_off, last_r, -1, -1
    frames[top, 10], frames[top, 11] = spent, 0


@njit(cache=True)
def _search_kernel(inst, st, capacity, node_budget):
    """Resume the search of ``inst`` (a ``KernelInstance``) from ``st`` (a ``KernelState``)
    for at most ``node_budget`` placements.

    The recursion lives in ``frames`` (one row per frame: kind, lo, hi, last_off, last_r,
    tried_h, tried_r, mark, part_end, hat, discrepancies spent on the way here, choices that
    fit so far, priority-trail mark). A PARTS frame solves its sections part by part, split
    at boundaries no unplaced buffer crosses, ordering the buffers of each part afresh
    (``_rank_part``; the old order comes back when it returns); a SEARCH frame tries
    candidates in (h, priority) order, each followed by a child frame for the rest.
    ``state`` = [frame count, depth, pending result, placements, discrepancy limit (-1:
    none), limit hit]. Returns FOUND, EXHAUSTED, LIMITED (exhausted, but the discrepancy
    limit cut some paths), BUDGET or GROW (a trail is full; nothing lost).
    """
    sizes, sec_lo, sec_hi, adj_start, adj, mem_start, members, twin_start, twin, pre_key, by_post = inst
    (placed, offset, h, floor, rem, cuts, path, hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops, stamp_of,
     affected, scratch, lw, ltrail, lmark, redo, frames, state, prio, ptrail, keys, picked) = st
    n_sections = floor.shape[0]
    top, depth, ret, limit = state[0], state[1], state[2], state[4]
    done = 0
    while True:
        if top == 0:
            code = FOUND if ret == SUCCESS else (LIMITED if state[5] else EXHAUSTED)
            break
        f = top - 1
        kind, lo, hi = frames[f, 0], frames[f, 1], frames[f, 2]
        if kind == PARTS:
            if ret == FAIL:  # a part has no solution: neither has this partition
                depth = _undo_to(frames[f, 7], depth, path, cuts, sizes, sec_lo, sec_hi, placed, h, floor, rem,
                                 hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops, lw, ltrail, lmark)
                _unrank_to(frames[f, 12], prio, ptrail, tops)
                top -= 1
                continue
            if ret == NONE:
                frames[f, 7] = depth
                frames[f, 8] = lo
                frames[f, 12] = tops[5]
            a = frames[f, 8]
            if a >= hi:
                _unrank_to(frames[f, 12], prio, ptrail, tops)
                top -= 1
                ret = SUCCESS
                continue
            if tops[5] + sizes.shape[0] > ptrail.shape[0]:
                code = GROW
                break
            end = hi
            for s in range(a, hi - 1):
                if cuts[s] == 0:
                    end = s + 1
                    break
            frames[f, 8] = end
            _rank_part(a, end, sizes, sec_lo, sec_hi, placed, rem, pre_key, by_post, prio, ptrail, tops, keys, picked)
            _push_search(frames, top, a, end, -1, -1, frames[f, 10])
            top += 1
            ret = NONE
            continue
        # a SEARCH frame
        if ret == SUCCESS:
            top -= 1
            continue
        if ret == FAIL:  # the child found nothing: take this frame's candidate back
            depth = _undo_to(frames[f, 7], depth, path, cuts, sizes, sec_lo, sec_hi, placed, h, floor, rem,
                             hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops, lw, ltrail, lmark)
            if frames[f, 9] == 0:  # hatless candidate: no other choice here can do better
                top -= 1
                continue
            ret = NONE
        if done >= node_budget:
            code = BUDGET
            break
        b = _next_candidate(sizes, sec_lo, sec_hi, placed, h, capacity, lo, hi, frames[f, 3], frames[f, 4],
                            frames[f, 5], frames[f, 6], twin_start, twin, offset, prio)
        if b < 0:
            top -= 1
            ret = FAIL if _any_unplaced(sizes, sec_lo, sec_hi, placed, lo, hi) else SUCCESS
            continue
        if tops[1] + (sec_hi[b] - sec_lo[b]) + n_sections > trail_fi.shape[0] or \
                tops[4] + n_sections > ltrail.shape[0]:
            code = GROW
            break
        done += 1
        y = h[b]
        frames[f, 5], frames[f, 6], frames[f, 7] = y, b, depth
        fits = _place(b, depth, sizes, sec_lo, sec_hi, adj_start, adj, mem_start, members, capacity, lo, hi,
                      placed, offset, h, floor, rem, hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops,
                      stamp_of, affected, scratch, lw, ltrail, lmark, redo)
        # hatless (no unplaced buffer overlaps it): if it fails here, it fails anywhere
        frames[f, 9] = 0
        for k in range(adj_start[b], adj_start[b + 1]):
            if not placed[adj[k]] and sizes[adj[k]] > 0:
                frames[f, 9] = 1
                break
        path[depth] = b
        depth += 1
        split = False
        for s in range(sec_lo[b], sec_hi[b] - 1):
            cuts[s] -= 1
            if cuts[s] == 0 and lo <= s < hi - 1:
                split = True
        if not fits:
            depth = _undo_to(frames[f, 7], depth, path, cuts, sizes, sec_lo, sec_hi, placed, h, floor, rem,
                             hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops, lw, ltrail, lmark)
            if frames[f, 9] == 0:
                top -= 1
                ret = FAIL
            continue
        # limited discrepancy: every choice here after the first that fits costs one
        spent = frames[f, 10] + (1 if frames[f, 11] > 0 else 0)
        if limit >= 0 and spent > limit:
            depth = _undo_to(frames[f, 7], depth, path, cuts, sizes, sec_lo, sec_hi, placed, h, floor, rem,
                             hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops, lw, ltrail, lmark)
            state[5] = 1
            top -= 1
            ret = FAIL
            continue
        frames[f, 11] += 1
        if split:
            frames[top, 0], frames[top, 1], frames[top, 2] = PARTS, lo, hi
            frames[top, 10] = spent
        else:
            _push_search(frames, top, lo, hi, y, b, spent)
        top += 1
        ret = NONE
    state[0], state[1], state[2], state[3] = top, depth, ret, state[3] + done
    return code
