"""Exact offsets for lifetime problems by canonical branch and bound (after MiniMalloc).

The decision question: can every buffer (a size over a fixed time interval) get an offset so
that buffers live at the same time never share bytes and nothing ends above ``capacity``?

Why the search is complete. Take any solution and keep moving some buffer to a lower
feasible offset until none can move: the result is *canonical*. Sorted by (offset, rank), a
canonical solution places each buffer exactly at ``h(b)``, the highest top among the earlier
buffers live with it (lower would collide or it could move). So the search builds solutions
in that order: the next buffer goes at its current ``h`` and comes no earlier in (offset,
rank) than the last one placed. Every canonical solution is one path of the search.

What prunes it -- the ideas of Moffitt, "MiniMalloc" (ASPLOS 2023), re-derived here:

- sections: time is cut at every lifetime end point; in each section the bytes not yet
  placed must fit between the section's *floor* and the capacity. The floor is the top of the
  last buffer placed there, raised to the lowest ``h`` of the unplaced buffers there and to
  the last offset placed (offsets only grow along a path). On the hard instances the
  capacity equals the max-live bound, so most sections have no slack at all;
- the staircase (ours, a release-time bound): an unplaced buffer goes no lower than its
  ``h``, so in each section, for every height t, the buffers with ``h`` >= t must fit
  between t and the capacity -- exact for one section taken alone;
- dominance: a buffer may not go at or above the height where some unplaced buffer would
  end if placed now -- that buffer could then move below it, so the solution would not be
  canonical;
- hatless pruning: when the buffer just tried overlaps no unplaced buffer and failed, every
  other choice at that node fails too (MiniMalloc's);
- twins (ours): buffers with the same lifetime stacked right on each other can swap places
  with nothing else changing, so a buffer never rests right on a twin of a later rank;
- a portfolio: the tie order among buffers at the same ``h`` comes from a preordering
  (MiniMalloc's keys), recomputed for every part found by dynamic decomposition, since
  its T key (the bytes in the buffer's busiest section) counts only bytes still unplaced;
  the twin rule keeps the static rank (twins share T, so their order never changes);
  complete searches under several preorderings and limited discrepancy searches that find
  solutions a few early deviations from the preferred order run in lanes, one a core
  (worker processes), each lane a round robin under a node allowance that doubles each
  round, each search resuming where it stopped (see ``LANES`` and ``search_offsets``).

The kernel is resumable: it runs at most ``node_budget`` nodes and keeps all its state in
arrays, so the Python driver can stop on a wall-clock limit between slices.
``search_offsets_reference`` is the same search as plain recursive Python: the test oracle
(both return the same offsets after the same number of placements).
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing import connection

import numpy as np
from numba import njit

from npusim.errors import ConfigError

FOUND, EXHAUSTED, BUDGET, GROW, LIMITED = 0, 1, 2, 3, 4
INF = np.iinfo(np.int64).max
#: static preorderings of the portfolio, MiniMalloc's defaults (letters: T = most bytes live in
#: the buffer's busiest section, W = lifetime, C = sections spanned, A = area = size x
#: lifetime; each descending), plus TCA, which solves instances the others do not
PREORDERINGS = ("WAT", "TAW", "TWA", "TCA")
#: the portfolio: lanes of (preordering, discrepancy limit to start with or -1 for the
#: complete search, weight = turns per round), one core each (see ``search_offsets``).
#: From the placements each search needed alone at capacity = max-live on MiniMalloc's 11
#: challenging instances (A-K, ../shared/reference/minimalloc; D and J unsolved by all):
#: complete TWA solves 6 of the 9 others (A 18k, E 510k, F 121k, G 68k, I 20k, K 13k), more
#: than any other search, and E needs 510k (TCA: 523k) -- at ~230k placements a second, more
#: than the time given to the bound when it shares a core with 7 others. So it has a lane
#: of its own, which also makes it the fastest infeasibility proof. The rest share the
#: other: complete TCA (F 1.8k, H 1.9k) and TAW (B 30k, C 266) weigh twice the discrepancy
#: searches (G: TCA 18k, H: TAW 7.5k, I: TWA 803); WAT solves nothing the T-first orders do
#: not solve faster (A, C, K), so it comes last, kept for instances unlike these.
LANES = (
    (("TWA", -1, 1),),
    (("TCA", -1, 2), ("TAW", -1, 2), ("TCA", 1, 1), ("TWA", 1, 1), ("TAW", 1, 1), ("WAT", -1, 1), ("WAT", 1, 1)),
)
#: a lane runs slices of about this many wall seconds (at the pace of its last slice; from
#: 4k to 300k placements a second on MiniMalloc's instances) and at most ``SLICE``
#: placements, then the driver looks at the clock and the other lanes again
SLICE_SECONDS = 0.02
SLICE = 10_000
#: wall seconds the lanes take turns in this process before worker processes are forked
#: (forking two costs ~20 ms): most searches end sooner
HEAD_START = 0.05


class _Instance:
    """Sections, their members and time-overlap lists (CSR) of a lifetime problem, with the
    buffers renumbered by a preordering (rank r is buffer ``order[r]``)."""

    def __init__(self, first, last, sizes, preordering: str) -> None:
        first = np.asarray(first, dtype=np.int64)
        ends = np.asarray(last, dtype=np.int64) + 1
        sizes = np.asarray(sizes, dtype=np.int64)
        points = np.unique(np.concatenate([first, ends]))
        sec_lo = np.searchsorted(points, first).astype(np.int64)
        sec_hi = np.searchsorted(points, ends).astype(np.int64)  # exclusive
        n_sections = max(len(points) - 1, 0)
        delta = np.zeros(n_sections + 1, dtype=np.int64)
        np.add.at(delta, sec_lo, sizes)
        np.add.at(delta, sec_hi, -sizes)
        section_bytes = np.cumsum(delta)[:n_sections]
        busiest = np.array([section_bytes[lo:hi].max(initial=0) for lo, hi in zip(sec_lo, sec_hi)], dtype=np.int64)
        keys = {"T": busiest, "W": ends - first, "C": sec_hi - sec_lo, "A": sizes * (ends - first)}
        # lexsort: last key is primary; descending by negation; ties by buffer index
        self.order = np.lexsort([np.arange(len(sizes))] + [-keys[c] for c in reversed(preordering)])
        # T changes as buffers are placed (MiniMalloc recomputes it for every sub-partition
        # from the bytes still unplaced), the other keys do not: ``pre_key`` ranks the keys
        # before T (equal keys, equal rank), ``by_post`` lists ranks by the keys after it
        # (then the buffer index), so a sub-partition sorts by (pre_key, -T now, by_post)
        at = preordering.find("T")
        before, after = (preordering, "") if at < 0 else (preordering[:at], preordering[at + 1:])
        prefix = np.stack([keys[c][self.order] for c in before]) if before else np.zeros((1, len(sizes)), np.int64)
        changes = np.any(prefix[:, 1:] != prefix[:, :-1], axis=0) if len(sizes) > 1 else np.zeros(0, bool)
        self.pre_key = np.concatenate([[0], np.cumsum(changes)]).astype(np.int64)[:len(sizes)]
        if at < 0:  # no T: the ranking never changes
            self.pre_key = np.arange(len(sizes), dtype=np.int64)
        self.by_post = np.lexsort([self.order] + [-keys[c][self.order] for c in reversed(after)]).astype(np.int64)
        self.sizes = sizes[self.order]
        self.sec_lo, self.sec_hi = sec_lo[self.order], sec_hi[self.order]
        self.n_sections, self.section_bytes = n_sections, section_bytes
        n = len(sizes)
        # members of each section (CSR), by rank
        members: list[list[int]] = [[] for _ in range(n_sections)]
        for r in range(n):
            for s in range(self.sec_lo[r], self.sec_hi[r]):
                members[s].append(r)
        self.mem_start = np.zeros(n_sections + 1, dtype=np.int64)
        self.mem_start[1:] = np.cumsum([len(m) for m in members])
        self.members = np.array([r for m in members for r in m], dtype=np.int64)
        # overlap lists: two buffers overlap when their section ranges intersect
        by_start = np.argsort(self.sec_lo, kind="stable")
        rows: list[list[int]] = [[] for _ in range(n)]
        for pos, i in enumerate(by_start):
            for j in by_start[pos + 1:]:
                if self.sec_lo[j] >= self.sec_hi[i]:
                    break
                rows[i].append(int(j))
                rows[int(j)].append(int(i))
        self.adj_start = np.zeros(n + 1, dtype=np.int64)
        self.adj_start[1:] = np.cumsum([len(r) for r in rows])
        self.adj = np.array([j for r in rows for j in r], dtype=np.int64)
        # twins: buffers of the same lifetime (so the same sections), later ranks only
        group: dict[tuple[int, int], list[int]] = {}
        for r in range(n):
            if self.sizes[r] > 0:
                group.setdefault((int(self.sec_lo[r]), int(self.sec_hi[r])), []).append(r)
        later = [[z for z in group.get((int(self.sec_lo[r]), int(self.sec_hi[r])), []) if z > r]
                 if self.sizes[r] > 0 else [] for r in range(n)]
        self.twin_start = np.zeros(n + 1, dtype=np.int64)
        self.twin_start[1:] = np.cumsum([len(t) for t in later])
        self.twin = np.array([z for t in later for z in t], dtype=np.int64)


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
def _search_kernel(sizes, sec_lo, sec_hi, adj_start, adj, mem_start, members, twin_start, twin, capacity, placed,
                   offset, h, floor, rem, cuts, path, hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops,
                   stamp_of, affected, scratch, lw, ltrail, lmark, redo, frames, state, node_budget, prio, ptrail,
                   pre_key, by_post, keys, picked):
    """Resume the search for at most ``node_budget`` placements.

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


class CanonicalSearch:
    """One decision search (fixed capacity, one preordering), resumable in budget slices.

    Dynamic decomposition (MiniMalloc's): when no unplaced buffer crosses the boundary between
    two sections any more, the buffers on either side are independent problems, solved one
    after the other; a failure on one side never re-searches the other.
    """

    def __init__(self, inst: _Instance, capacity: int, discrepancies: int = -1) -> None:
        n, n_sections = len(inst.sizes), inst.n_sections
        self.inst, self.capacity = inst, int(capacity)
        self.placed = np.zeros(n, dtype=np.bool_)
        self.offset = np.zeros(n, dtype=np.int64)
        self.h = np.zeros(n, dtype=np.int64)
        self.floor = np.zeros(n_sections, dtype=np.int64)
        self.rem = inst.section_bytes.copy()
        self.path = np.zeros(n + 1, dtype=np.int64)
        self.hmark = np.zeros(n + 1, dtype=np.int64)
        self.fmark = np.zeros(n + 1, dtype=np.int64)
        self.trail_hi = np.zeros(max(len(inst.adj), 1), dtype=np.int64)
        self.trail_hv = np.zeros_like(self.trail_hi)
        room = 4 * (n_sections + 1) + int((inst.sec_hi - inst.sec_lo).sum())
        self.trail_fi = np.zeros(room, dtype=np.int64)
        self.trail_fv = np.zeros(room, dtype=np.int64)
        # h-trail length, floor-trail length, stamp, highest top placed, low-trail length,
        # priority-trail length
        self.tops = np.zeros(6, dtype=np.int64)
        # each buffer's priority in the partition searched (set by _rank_part), old ones trailed
        self.prio = np.arange(n, dtype=np.int64)
        self.ptrail = np.zeros((4 * n + 4, 2), dtype=np.int64)
        self.keys = np.zeros(max(n, 1), dtype=np.int64)
        self.picked = np.zeros(max(n, 1), dtype=np.int64)
        # each section's lowest h among unplaced buffers (all 0 at first) and a buffer there
        self.lw = np.zeros((2, n_sections), dtype=np.int64)
        self.lw[1] = -1
        for r in range(n - 1, -1, -1):
            if inst.sizes[r] > 0:
                self.lw[1, inst.sec_lo[r]:inst.sec_hi[r]] = r
        self.ltrail = np.zeros((room, 3), dtype=np.int64)  # a section at most once a placement
        self.lmark = np.zeros((n + 1, 2), dtype=np.int64)
        self.redo = np.zeros((2, n_sections), dtype=np.int64)
        self.stamp_of = np.zeros(n_sections, dtype=np.int64)
        self.affected = np.zeros(n_sections, dtype=np.int64)
        self.scratch = np.zeros(max(n, 1), dtype=np.int64)
        # cuts[s]: unplaced buffers crossing the boundary between sections s and s + 1
        self.cuts = np.zeros(max(n_sections - 1, 0), dtype=np.int64)
        for lo, hi in zip(inst.sec_lo, inst.sec_hi):
            self.cuts[lo:hi - 1] += 1
        # each placement adds at most two frames; the root is a PARTS frame over everything
        self.frames = np.zeros((2 * n + 4, 13), dtype=np.int64)
        self.frames[0, :3] = (PARTS, 0, n_sections)
        # frames, depth, pending result, placements, discrepancy limit (-1: none), limit hit
        self.state = np.array([1, 0, NONE, 0, discrepancies, 0], dtype=np.int64)
        # a section holding more than the capacity makes the search pointless
        self.status = EXHAUSTED if n_sections and self.rem.max() > capacity else BUDGET

    @property
    def nodes(self) -> int:
        return int(self.state[3])

    def run(self, node_budget: int) -> int:
        """Search at most ``node_budget`` more placements; FOUND, EXHAUSTED (no offsets
        exist), LIMITED (none within the discrepancy limit) or BUDGET."""
        i = self.inst
        goal = self.nodes + node_budget
        while self.status == BUDGET and self.nodes < goal:
            code = int(_search_kernel(i.sizes, i.sec_lo, i.sec_hi, i.adj_start, i.adj, i.mem_start, i.members,
                                      i.twin_start, i.twin,
                                      self.capacity, self.placed, self.offset, self.h, self.floor, self.rem,
                                      self.cuts, self.path, self.hmark, self.fmark, self.trail_hi, self.trail_hv,
                                      self.trail_fi, self.trail_fv, self.tops, self.stamp_of, self.affected,
                                      self.scratch, self.lw, self.ltrail, self.lmark, self.redo,
                                      self.frames,
                                      self.state, goal - self.nodes, self.prio, self.ptrail, i.pre_key,
                                      i.by_post, self.keys, self.picked))
            if code == GROW:  # a trail is full: double the floor and low trails and carry on
                self.trail_fi = np.concatenate([self.trail_fi, np.zeros_like(self.trail_fi)])
                self.trail_fv = np.concatenate([self.trail_fv, np.zeros_like(self.trail_fv)])
                self.ltrail = np.concatenate([self.ltrail, np.zeros_like(self.ltrail)])
                self.ptrail = np.concatenate([self.ptrail, np.zeros_like(self.ptrail)])
            elif code != BUDGET:
                self.status = code
        return self.status

    def offsets(self) -> np.ndarray:
        """Offsets by original buffer index (0 for empty buffers)."""
        out = np.zeros(len(self.offset), dtype=np.int64)
        out[self.inst.order] = np.where(self.inst.sizes > 0, self.offset, 0)
        return out


class _Lane:
    """Searches sharing one core: a weighted round robin under a node allowance that doubles
    every round (MiniMalloc's), each search resuming where its last turn stopped rather than
    starting again (the same tree would only be walked twice); a discrepancy search that
    tried every path within its limit makes way for one allowing a deviation more.

    ``run`` may stop anywhere, even mid-turn, and carry on later: the placements after which
    a lane finds (or proves) never depend on how its work was sliced."""

    def __init__(self, instances: dict[str, _Instance], capacity: int, entries) -> None:
        """``entries``: (preordering, discrepancy limit or -1, weight), as in ``LANES``;
        ``instances``: the ``_Instance`` of each preordering."""
        self.capacity = capacity
        self.searches = [CanonicalSearch(instances[p], capacity, d) for p, d, _ in entries]
        self.weights = [w for _, _, w in entries]
        self.turn = 2 * max(len(self.searches[0].placed), 1)
        self.k, self.goal = 0, self.turn * self.weights[0]  # whose turn, until which placement
        self.replaced = 0  # placements of discrepancy searches replaced by wider ones
        self.status = self.searches[0].status  # EXHAUSTED already if a section is over capacity
        self.decided: CanonicalSearch | None = None

    @property
    def nodes(self) -> int:
        return self.replaced + sum(search.nodes for search in self.searches)

    def run(self, node_budget: int) -> int:
        """At most ``node_budget`` more placements; FOUND, EXHAUSTED or BUDGET."""
        stop = self.nodes + node_budget
        while self.status == BUDGET and self.nodes < stop:
            search = self.searches[self.k]
            if search.nodes >= self.goal:  # its turn is over: the next one's, a new round after the last
                self.k = (self.k + 1) % len(self.searches)
                if self.k == 0:
                    self.turn *= 2
                self.goal = self.searches[self.k].nodes + self.turn * self.weights[self.k]
                continue
            status = search.run(min(self.goal - search.nodes, stop - self.nodes))
            if status in (FOUND, EXHAUSTED):  # complete under any preordering: EXHAUSTED is a proof
                self.status, self.decided = status, search
            elif status == LIMITED:
                self.replaced += search.nodes
                self.searches[self.k] = CanonicalSearch(search.inst, self.capacity, int(search.state[4]) + 1)
                self.goal = self.turn * self.weights[self.k]
        return self.status


def _drive(lanes: list[_Lane], ids: list[int], budget: int, deadline: float, first_wins: bool,
           shared=None) -> tuple[int, int, int, bool]:
    """Run ``lanes`` (portfolio indices ``ids``) a slice at a time, the least advanced first:
    ``(status, placements of the deciding lane, its index, settled)``, or ``(BUDGET, most
    placements of a lane, -1, settled)`` when none decided. ``settled``: the answer is
    final, not cut short by the deadline (so the lanes may carry on elsewhere).

    With ``first_wins`` (wall-clock mode) the first find ends it. Otherwise the winner must
    not depend on timing: it is the find after the fewest placements of its lane, ties to
    the lower index, so the other lanes go on until they have spent as many (a lane that has
    not found by then can only find later). ``shared`` holds the best such count found by
    any worker process. A proof of infeasibility ends it at once: no lane can find then."""
    best = min(((lane.nodes, g) for g, lane in zip(ids, lanes) if lane.status == FOUND), default=(INF, -1))
    size = dict.fromkeys(ids, min(SLICE, 256))  # each lane's next slice
    settled = False
    while time.perf_counter() < deadline:
        bar = min(budget, best[0], shared.value if shared is not None else INF)
        ready = [(lane.nodes, g, lane) for g, lane in zip(ids, lanes) if lane.status == BUDGET and lane.nodes < bar]
        if not ready:
            settled = True
            break
        nodes, g, lane = min(ready, key=lambda entry: entry[:2])
        started = time.perf_counter()
        status = lane.run(min(size[g], budget - nodes))
        pace = (lane.nodes - nodes) / max(time.perf_counter() - started, 1e-6)
        size[g] = max(min(SLICE, 64), min(SLICE, int(pace * SLICE_SECONDS)))
        if status == EXHAUSTED or (status == FOUND and first_wins):
            return status, lane.nodes, g, True
        if status == FOUND:
            best = min(best, (lane.nodes, g))
            if shared is not None:
                with shared.get_lock():
                    shared.value = min(shared.value, lane.nodes)
    if best[1] >= 0:
        return FOUND, best[0], best[1], settled
    return BUDGET, max(lane.nodes for lane in lanes), -1, settled


def _worker(lanes, ids, budget, deadline, first_wins, shared, conn) -> None:
    """A worker process's share of the lanes (``_drive``); sends back its decision and the
    offsets found, or the error that stopped it."""
    try:
        status, nodes, g, _ = _drive(lanes, ids, budget, deadline, first_wins, shared)
        offsets = lanes[ids.index(g)].decided.offsets() if status == FOUND else None
        conn.send((status, nodes, g, offsets))
    except BaseException as error:  # noqa: BLE001 -- reported to the parent, which raises it
        conn.send(("error", f"{type(error).__name__}: {error}", -1, None))


def _drive_in_processes(lanes: list[_Lane], workers: int, budget: int, deadline: float,
                        first_wins: bool) -> tuple[int, int, int, np.ndarray | None]:
    """``_drive`` with lane ``g`` in worker process ``g % workers``, forked (so the compiled
    kernels and every array are inherited, nothing is pickled but the answer):
    ``(status, placements, lane, offsets)`` by the same rule as ``_drive`` over all lanes.
    Workers still running when the answer is known are terminated."""
    ctx = multiprocessing.get_context("fork")
    # the fewest lane placements after which a lane found (so far: during the head start)
    shared = ctx.Value("q", min((lane.nodes for lane in lanes if lane.status == FOUND), default=INF))
    procs, pipes = [], []
    for w in range(workers):
        ids = list(range(w, len(lanes), workers))
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=([lanes[g] for g in ids], ids, budget, deadline, first_wins,
                                                 shared, send), daemon=True)
        proc.start()
        send.close()
        procs.append(proc)
        pipes.append(receive)
    answers = []
    try:
        while pipes:
            # a worker looks at the clock between slices (tens of milliseconds); waiting
            # a second past the deadline is only for a worker that cannot answer
            ready = connection.wait(pipes, timeout=max(deadline - time.perf_counter(), 0) + 1.0)
            if not ready:
                break
            for pipe in ready:
                pipes.remove(pipe)
                try:
                    answer = pipe.recv()
                except EOFError:
                    answer = ("error", "the worker process ended without an answer", -1, None)
                if answer[0] == "error":
                    raise RuntimeError(f"canonical search worker failed: {answer[1]}")
                if answer[0] == EXHAUSTED or (answer[0] == FOUND and first_wins):
                    return answer
                answers.append(answer)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
    found = [a for a in answers if a[0] == FOUND]
    if found:
        return min(found, key=lambda a: (a[1], a[2]))
    return BUDGET, max([a[1] for a in answers], default=budget), -1, None


def search_offsets(first, last, sizes, capacity: int, *, time_limit: float = 10.0, node_limit: int | None = None,
                   workers: int = 2, lanes=LANES) -> tuple[np.ndarray | None, str, int]:
    """Offsets with every buffer below ``capacity``: ``(offsets, "found", nodes)``, or
    ``(None, "infeasible", nodes)`` when the search proved there are none, or
    ``(None, "timed_out", nodes)``; ``nodes``: the placements of the lane that decided (of
    the busiest lane when none did), so about the wall time of one core.

    The portfolio (``LANES``): complete searches under several preorderings and limited
    discrepancy searches (Harvey and Ginsberg), which first try every path leaving the
    preferred order once, then twice, and so on. A depth-first search never revisits its
    first choices before exhausting everything below them; the discrepancy search finds
    solutions a few early deviations away, but proves nothing. Each lane is a round robin of
    some of them (``_Lane``); the lanes run in ``workers`` processes (lane ``g`` in the
    ``g % workers``-th), or side by side in this one when ``workers`` is 1. They first take
    turns here for ``HEAD_START`` seconds: most searches end sooner than a fork would.

    ``node_limit`` (placements per lane) makes the answer deterministic, the same for any
    number of workers: the find after the fewest placements of its lane wins, ties to the
    earlier lane (``_drive``); ``time_limit`` (wall seconds) is then only a guard, as for
    CP-SAT in ``planners.schedule.solver``. Without it, the first lane to decide wins."""
    if workers < 1:
        raise ConfigError(f"search_offsets: workers must be at least 1, got {workers}")
    orders = dict.fromkeys(p for lane in lanes for p, _, _ in lane)
    instances = {p: _cached_instance(first, last, sizes, p) for p in orders}
    running = [_Lane(instances, int(capacity), entries) for entries in lanes]
    if running[0].status == EXHAUSTED:  # a section holds more than the capacity
        return None, "infeasible", 0
    deadline = time.perf_counter() + time_limit
    budget = node_limit if node_limit is not None else 1 << 62
    first_wins = node_limit is None
    ids = list(range(len(running)))
    workers = min(workers, len(running))
    if multiprocessing.current_process().daemon:  # a daemonic process may not start children
        workers = 1
    head_start = deadline if workers == 1 else min(deadline, time.perf_counter() + HEAD_START)
    status, nodes, g, settled = _drive(running, ids, budget, head_start, first_wins)
    offsets = running[g].decided.offsets() if status == FOUND else None
    if not settled and workers > 1 and time.perf_counter() < deadline:
        status, nodes, g, offsets = _drive_in_processes(running, workers, budget, deadline, first_wins)
    return offsets, {FOUND: "found", EXHAUSTED: "infeasible"}.get(status, "timed_out"), int(nodes)


_INSTANCES: dict[tuple, _Instance] = {}


def _cached_instance(first, last, sizes, preordering: str) -> _Instance:
    """``_Instance`` (read-only once built), kept for the next capacity tried on the same
    buffers: on hundreds of buffers, building the overlap lists costs as much as a search
    of a tenth of a second."""
    key = tuple(np.asarray(v, dtype=np.int64).tobytes() for v in (first, last, sizes)) + (preordering,)
    if key not in _INSTANCES:
        if len(_INSTANCES) >= 16:
            _INSTANCES.clear()
        _INSTANCES[key] = _Instance(first, last, sizes, preordering)
    return _INSTANCES[key]


def search_offsets_reference(first, last, sizes, capacity: int, preordering: str = PREORDERINGS[0], *,
                             with_nodes: bool = False, discrepancies: int = -1):
    """The same search (one preordering, no budget) in plain Python, recomputing everything
    from the placed buffers at each step: the Numba kernels' oracle. The offsets (None if
    there are none); with ``with_nodes``, also the placements tried, which equal the kernel's
    when both walk the same tree (same inferences and order)."""
    inst = _Instance(first, last, sizes, preordering)
    n, S = len(inst.sizes), inst.n_sections
    size = [int(s) for s in inst.sizes]
    lo_of, hi_of = [int(v) for v in inst.sec_lo], [int(v) for v in inst.sec_hi]
    if S and max(int(v) for v in inst.section_bytes) > capacity:
        return (None, 0) if with_nodes else None
    post = {int(r): k for k, r in enumerate(inst.by_post)}  # a buffer's place in by_post
    offset: dict[int, int] = {}  # placed buffer -> offset
    last_in: dict[int, int] = {}  # section -> top of the buffer placed there last
    nodes = 0

    def overlaps(a, b):
        return lo_of[a] < hi_of[b] and lo_of[b] < hi_of[a]

    def h(r):
        return max((offset[c] + size[c] for c in offset if overlaps(r, c)), default=0)

    def unplaced(lo, hi):
        return [r for r in range(n) if r not in offset and size[r] > 0 and lo_of[r] >= lo and hi_of[r] <= hi]

    def on_later_twin(r, y):
        return any(z > r and (lo_of[z], hi_of[z]) == (lo_of[r], hi_of[r]) and offset[z] + size[z] == y
                   for z in offset)

    def floor_of(s):
        waiting = [r for r in unplaced(0, S) if lo_of[r] <= s < hi_of[r]]
        return max([last_in.get(s, 0)] + [min(h(r) for r in waiting)] if waiting else [last_in.get(s, 0)])

    def fits(lo, hi, y):
        for s in range(lo, hi):
            waiting = [r for r in unplaced(0, S) if lo_of[r] <= s < hi_of[r]]
            if waiting:
                base = max(floor_of(s), y)
                if base + sum(size[r] for r in waiting) > capacity:
                    return False
                # the staircase: buffers that cannot start below t fit between t and the capacity
                for t in {h(r) for r in waiting if h(r) > base}:
                    if t + sum(size[r] for r in waiting if h(r) >= t) > capacity:
                        return False
        return True

    def solve_parts(lo, hi, spent):
        cut = [lo] + [s + 1 for s in range(lo, hi - 1)
                      if not any(lo_of[r] <= s and s + 1 < hi_of[r] for r in unplaced(0, S))] + [hi]
        before = set(offset)
        for a, b in zip(cut, cut[1:]):
            if not search(a, b, -1, -1, spent, rank_part(a, b)):
                for r in set(offset) - before:
                    del offset[r]
                restore()
                return False
        return True

    def rank_part(lo, hi):
        # MiniMalloc's order recomputed for the part: T from the bytes still unplaced
        left = [sum(size[r] for r in unplaced(0, S) if lo_of[r] <= s < hi_of[r]) for s in range(S)]
        todo = sorted(unplaced(lo, hi), key=lambda r: (int(inst.pre_key[r]), -max(left[lo_of[r]:hi_of[r]]),
                                                       post[r]))
        return {r: p for p, r in enumerate(todo)}

    def restore():
        last_in.clear()
        for r in sorted(offset, key=lambda r: (offset[r], r)):
            for s in range(lo_of[r], hi_of[r]):
                last_in[s] = max(last_in.get(s, 0), offset[r] + size[r])

    def search(lo, hi, last_off, last_r, spent, prio):
        nonlocal nodes
        todo = unplaced(lo, hi)
        if not todo:
            return True
        min_height = min(h(r) + size[r] for r in todo)
        fitted = 0
        for hr, _, r in sorted((h(r), prio[r], r) for r in todo):
            if hr < last_off or (hr == last_off and prio[r] < prio.get(last_r, -1)) or hr >= min_height or \
                    hr + size[r] > capacity:
                continue
            if on_later_twin(r, hr):  # twins stacked right on each other: earlier rank below
                continue
            hat = any(c != r and c not in offset and size[c] > 0 and overlaps(r, c) for c in range(n))
            offset[r] = hr
            nodes += 1
            restore()
            if fits(lo, hi, hr):
                split = any(not any(lo_of[q] <= s and s + 1 < hi_of[q] for q in unplaced(0, S))
                            for s in range(max(lo, lo_of[r]), min(hi, hi_of[r]) - 1))
                cost = spent + (1 if fitted else 0)  # a discrepancy: not the first choice that fits
                if 0 <= discrepancies < cost:
                    del offset[r]
                    restore()
                    return False
                fitted += 1
                if (solve_parts(lo, hi, cost) if split else search(lo, hi, hr, r, cost, prio)):
                    return True
            del offset[r]
            restore()
            if not hat:  # nothing unplaced overlaps r: no other choice here can do better
                return False
        return False

    out = None
    if solve_parts(0, S, 0):
        out = np.zeros(n, dtype=np.int64)
        out[inst.order] = [offset.get(r, 0) for r in range(n)]
    return (out, nodes) if with_nodes else out
