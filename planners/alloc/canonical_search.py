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
- dominance: a buffer may not go at or above the height where some unplaced buffer would
  end if placed now -- that buffer could then move below it, so the solution would not be
  canonical;
- hatless pruning: when the buffer just tried overlaps no unplaced buffer and failed, every
  other choice at that node fails too (MiniMalloc's);
- restarts: the rank of a buffer (the tie order) comes from a static preordering; several
  preorderings take turns under a node limit that doubles each round.

The kernel is resumable: it runs at most ``node_budget`` nodes and keeps all its state in
arrays, so the Python driver can stop on a wall-clock limit between slices.
``search_offsets_reference`` is the same search as plain recursive Python: the test oracle
(both return the same offsets).
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

FOUND, EXHAUSTED, BUDGET, GROW = 0, 1, 2, 3
INF = np.iinfo(np.int64).max
#: static preorderings tried in turn, MiniMalloc's defaults (letters: T = most bytes live in
#: the buffer's busiest section, W = lifetime, C = sections spanned, A = area = size x
#: lifetime; each descending), plus TCA, which solves instances the others do not
PREORDERINGS = ("WAT", "TAW", "TWA", "TCA")


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


@njit(cache=True)
def _next_candidate(sizes, sec_lo, sec_hi, placed, h, capacity, lo, hi, last_off, last_r, tried_h, tried_r):
    """The next buffer to try in the partition of sections [lo, hi): lowest (h, rank) after
    the one tried last, in canonical position, below the dominance height; -1 if none."""
    n = sizes.shape[0]
    min_height = INF
    for r in range(n):
        if not placed[r] and sizes[r] > 0 and sec_lo[r] >= lo and sec_hi[r] <= hi and h[r] + sizes[r] < min_height:
            min_height = h[r] + sizes[r]
    best = -1
    for r in range(n):
        if placed[r] or sizes[r] == 0 or sec_lo[r] < lo or sec_hi[r] > hi:
            continue
        hr = h[r]
        if hr < last_off or (hr == last_off and r < last_r) or hr >= min_height or hr + sizes[r] > capacity:
            continue
        if tried_r >= 0 and (hr < tried_h or (hr == tried_h and r <= tried_r)):
            continue
        if best < 0 or hr < h[best] or (hr == h[best] and r < best):
            best = r
    return best


@njit(cache=True)
def _place(b, depth, sizes, sec_lo, sec_hi, adj_start, adj, mem_start, members, capacity, lo, hi, placed, offset,
           h, floor, rem, hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops, stamp_of, affected):
    """Put ``b`` at ``h[b]``: raise the floors of its sections and the ``h`` of the buffers it
    overlaps (recorded on the trails from ``tops`` = [h-trail length, floor-trail length,
    stamp]); then True if every section of [lo, hi) can still hold its unplaced bytes."""
    n_sections = floor.shape[0]
    th, tf, stamp = tops[0], tops[1], tops[2] + 1
    hmark[depth], fmark[depth] = th, tf
    y = h[b]
    top = y + sizes[b]
    placed[b] = True
    offset[b] = y
    n_affected = 0
    for s in range(sec_lo[b], sec_hi[b]):
        trail_fi[tf] = s
        trail_fv[tf] = floor[s]
        tf += 1
        floor[s] = top
        rem[s] -= sizes[b]
        stamp_of[s] = stamp
        affected[n_affected] = s
        n_affected += 1
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
    # a section's floor is at least the lowest place any of its unplaced buffers can go
    for a in range(n_affected):
        s = affected[a]
        low = INF
        for k in range(mem_start[s], mem_start[s + 1]):
            r = members[k]
            if not placed[r] and sizes[r] > 0 and h[r] < low:
                low = h[r]
        if low != INF and floor[s] < low:
            trail_fi[tf] = s
            trail_fv[tf] = floor[s]
            tf += 1
            floor[s] = low
    tops[0], tops[1], tops[2] = th, tf, stamp
    for s in range(lo, hi):
        if rem[s] > 0:
            base = floor[s] if floor[s] > y else y
            if base + rem[s] > capacity:
                return False
    return True


@njit(cache=True)
def _undo(b, depth, sizes, sec_lo, sec_hi, placed, h, floor, rem, hmark, fmark, trail_hi, trail_hv,
          trail_fi, trail_fv, tops):
    """Take ``b`` (placed at ``depth``) back out, restoring what ``_place`` changed."""
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
def _zero_cut_inside(cuts, a, b):
    """True if some boundary s in [a, b) has no unplaced buffer crossing it."""
    for s in range(a, b):
        if cuts[s] == 0:
            return True
    return False


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
             trail_hv, trail_fi, trail_fv, tops):
    """Take back every placement at depth >= ``mark``; returns the new depth."""
    while depth > mark:
        depth -= 1
        b = path[depth]
        for s in range(sec_lo[b], sec_hi[b] - 1):
            cuts[s] += 1
        _undo(b, depth, sizes, sec_lo, sec_hi, placed, h, floor, rem, hmark, fmark, trail_hi, trail_hv,
              trail_fi, trail_fv, tops)
    return depth


@njit(cache=True)
def _search_kernel(sizes, sec_lo, sec_hi, adj_start, adj, mem_start, members, capacity, placed, offset, h,
                   floor, rem, cuts, path, hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops, stamp_of,
                   affected, frames, state, node_budget):
    """Resume the search for at most ``node_budget`` placements.

    The recursion lives in ``frames`` (one row per frame: kind, lo, hi, last_off, last_r,
    tried_h, tried_r, mark, part_end, hat). A PARTS frame solves its sections part by part, split at
    boundaries no unplaced buffer crosses; a SEARCH frame tries candidates in (h, rank) order,
    each followed by a child frame for the rest. ``state`` = [frame count, depth, pending
    result, placements]. Returns FOUND, EXHAUSTED, BUDGET or GROW (trail full; nothing lost).
    """
    n_sections = floor.shape[0]
    top, depth, ret = state[0], state[1], state[2]
    done = 0
    while True:
        if top == 0:
            code = FOUND if ret == SUCCESS else EXHAUSTED
            break
        f = top - 1
        kind, lo, hi = frames[f, 0], frames[f, 1], frames[f, 2]
        if kind == PARTS:
            if ret == FAIL:  # a part has no solution: neither has this partition
                depth = _undo_to(frames[f, 7], depth, path, cuts, sizes, sec_lo, sec_hi, placed, h, floor, rem,
                                 hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops)
                top -= 1
                continue
            if ret == NONE:
                frames[f, 7] = depth
                frames[f, 8] = lo
            a = frames[f, 8]
            if a >= hi:
                top -= 1
                ret = SUCCESS
                continue
            end = hi
            for s in range(a, hi - 1):
                if cuts[s] == 0:
                    end = s + 1
                    break
            frames[f, 8] = end
            frames[top, 0], frames[top, 1], frames[top, 2] = SEARCH, a, end
            frames[top, 3], frames[top, 4], frames[top, 5], frames[top, 6] = -1, -1, -1, -1
            top += 1
            ret = NONE
            continue
        # a SEARCH frame
        if ret == SUCCESS:
            top -= 1
            continue
        if ret == FAIL:  # the child found nothing: take this frame's candidate back
            depth = _undo_to(frames[f, 7], depth, path, cuts, sizes, sec_lo, sec_hi, placed, h, floor, rem,
                             hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops)
            if frames[f, 9] == 0:  # hatless candidate: no other choice here can do better
                top -= 1
                continue
            ret = NONE
        if done >= node_budget:
            code = BUDGET
            break
        b = _next_candidate(sizes, sec_lo, sec_hi, placed, h, capacity, lo, hi, frames[f, 3], frames[f, 4],
                            frames[f, 5], frames[f, 6])
        if b < 0:
            top -= 1
            ret = FAIL if _any_unplaced(sizes, sec_lo, sec_hi, placed, lo, hi) else SUCCESS
            continue
        if tops[1] + (sec_hi[b] - sec_lo[b]) + n_sections > trail_fi.shape[0]:
            code = GROW
            break
        done += 1
        y = h[b]
        frames[f, 5], frames[f, 6], frames[f, 7] = y, b, depth
        fits = _place(b, depth, sizes, sec_lo, sec_hi, adj_start, adj, mem_start, members, capacity, lo, hi,
                      placed, offset, h, floor, rem, hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops,
                      stamp_of, affected)
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
                             hmark, fmark, trail_hi, trail_hv, trail_fi, trail_fv, tops)
            if frames[f, 9] == 0:
                top -= 1
                ret = FAIL
            continue
        if split:
            frames[top, 0], frames[top, 1], frames[top, 2] = PARTS, lo, hi
        else:
            frames[top, 0], frames[top, 1], frames[top, 2] = SEARCH, lo, hi
            frames[top, 3], frames[top, 4], frames[top, 5], frames[top, 6] = y, b, -1, -1
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

    def __init__(self, inst: _Instance, capacity: int) -> None:
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
        self.tops = np.zeros(3, dtype=np.int64)  # h-trail length, floor-trail length, stamp
        self.stamp_of = np.zeros(n_sections, dtype=np.int64)
        self.affected = np.zeros(n_sections, dtype=np.int64)
        # cuts[s]: unplaced buffers crossing the boundary between sections s and s + 1
        self.cuts = np.zeros(max(n_sections - 1, 0), dtype=np.int64)
        for lo, hi in zip(inst.sec_lo, inst.sec_hi):
            self.cuts[lo:hi - 1] += 1
        # each placement adds at most two frames; the root is a PARTS frame over everything
        self.frames = np.zeros((2 * n + 4, 10), dtype=np.int64)
        self.frames[0, :3] = (PARTS, 0, n_sections)
        self.state = np.array([1, 0, NONE, 0], dtype=np.int64)  # frames, depth, pending result, placements
        # a section holding more than the capacity makes the search pointless
        self.status = EXHAUSTED if n_sections and self.rem.max() > capacity else BUDGET

    @property
    def nodes(self) -> int:
        return int(self.state[3])

    def run(self, node_budget: int) -> int:
        """Search at most ``node_budget`` more placements; FOUND, EXHAUSTED or BUDGET."""
        i = self.inst
        goal = self.nodes + node_budget
        while self.status == BUDGET and self.nodes < goal:
            code = int(_search_kernel(i.sizes, i.sec_lo, i.sec_hi, i.adj_start, i.adj, i.mem_start, i.members,
                                      self.capacity, self.placed, self.offset, self.h, self.floor, self.rem,
                                      self.cuts, self.path, self.hmark, self.fmark, self.trail_hi, self.trail_hv,
                                      self.trail_fi, self.trail_fv, self.tops, self.stamp_of, self.affected,
                                      self.frames, self.state, goal - self.nodes))
            if code == GROW:  # the floor trail is full: double it and carry on
                self.trail_fi = np.concatenate([self.trail_fi, np.zeros_like(self.trail_fi)])
                self.trail_fv = np.concatenate([self.trail_fv, np.zeros_like(self.trail_fv)])
            elif code != BUDGET:
                self.status = code
        return self.status

    def offsets(self) -> np.ndarray:
        """Offsets by original buffer index (0 for empty buffers)."""
        out = np.zeros(len(self.offset), dtype=np.int64)
        out[self.inst.order] = np.where(self.inst.sizes > 0, self.offset, 0)
        return out


def search_offsets(first, last, sizes, capacity: int, *, time_limit: float = 10.0, node_limit: int | None = None,
                   preorderings: tuple[str, ...] = PREORDERINGS) -> tuple[np.ndarray | None, str, int]:
    """Offsets with every buffer below ``capacity``: ``(offsets, "found", nodes)``, or
    ``(None, "infeasible", nodes)`` when the search proved there are none, or
    ``(None, "timed_out", nodes)``. Preorderings take turns under a doubling node limit
    (a restart each round, as MiniMalloc does).

    ``node_limit`` (placements in total) makes the answer deterministic; ``time_limit`` (wall
    seconds) is then only a guard, as for CP-SAT in ``planners.schedule.solver``."""
    instances = [_Instance(first, last, sizes, p) for p in preorderings]
    deadline = time.perf_counter() + time_limit
    budget = node_limit if node_limit is not None else 1 << 62
    limit, nodes = max(len(sizes), 1), 0
    while True:
        limit *= 2
        for inst in instances:
            search = CanonicalSearch(inst, capacity)
            while search.nodes < limit:
                status = search.run(min(50_000, limit - search.nodes, max(budget - nodes - search.nodes, 0)))
                if status == FOUND:
                    return search.offsets(), "found", nodes + search.nodes
                if status == EXHAUSTED:  # complete under any preordering: no solution exists
                    return None, "infeasible", nodes + search.nodes
                if nodes + search.nodes >= budget or time.perf_counter() >= deadline:
                    return None, "timed_out", nodes + search.nodes
            nodes += search.nodes


def search_offsets_reference(first, last, sizes, capacity: int, preordering: str = PREORDERINGS[0]) -> np.ndarray | None:
    """The same search (one preordering, no budget) in plain Python, recomputing everything
    from the placed buffers at each step: the Numba kernels' oracle."""
    inst = _Instance(first, last, sizes, preordering)
    n, S = len(inst.sizes), inst.n_sections
    size = [int(s) for s in inst.sizes]
    lo_of, hi_of = [int(v) for v in inst.sec_lo], [int(v) for v in inst.sec_hi]
    if S and max(int(v) for v in inst.section_bytes) > capacity:
        return None
    offset: dict[int, int] = {}  # placed buffer -> offset
    last_in: dict[int, int] = {}  # section -> top of the buffer placed there last

    def overlaps(a, b):
        return lo_of[a] < hi_of[b] and lo_of[b] < hi_of[a]

    def h(r):
        return max((offset[c] + size[c] for c in offset if overlaps(r, c)), default=0)

    def unplaced(lo, hi):
        return [r for r in range(n) if r not in offset and size[r] > 0 and lo_of[r] >= lo and hi_of[r] <= hi]

    def fits(lo, hi, y):
        for s in range(lo, hi):
            waiting = [r for r in unplaced(0, S) if lo_of[r] <= s < hi_of[r]]
            if waiting:
                floor = max([last_in.get(s, 0), y] + [min(h(r) for r in waiting)])
                if floor + sum(size[r] for r in waiting) > capacity:
                    return False
        return True

    def solve_parts(lo, hi):
        cut = [lo] + [s + 1 for s in range(lo, hi - 1)
                      if not any(lo_of[r] <= s and s + 1 < hi_of[r] for r in unplaced(0, S))] + [hi]
        before = set(offset)
        for a, b in zip(cut, cut[1:]):
            if not search(a, b, -1, -1):
                for r in set(offset) - before:
                    del offset[r]
                restore()
                return False
        return True

    def restore():
        last_in.clear()
        for r in sorted(offset, key=lambda r: (offset[r], r)):
            for s in range(lo_of[r], hi_of[r]):
                last_in[s] = max(last_in.get(s, 0), offset[r] + size[r])

    def search(lo, hi, last_off, last_r):
        todo = unplaced(lo, hi)
        if not todo:
            return True
        min_height = min(h(r) + size[r] for r in todo)
        for hr, r in sorted((h(r), r) for r in todo):
            if hr < last_off or (hr == last_off and r < last_r) or hr >= min_height or hr + size[r] > capacity:
                continue
            hat = any(c != r and c not in offset and size[c] > 0 and overlaps(r, c) for c in range(n))
            offset[r] = hr
            restore()
            if fits(lo, hi, hr):
                split = any(not any(lo_of[q] <= s and s + 1 < hi_of[q] for q in unplaced(0, S))
                            for s in range(max(lo, lo_of[r]), min(hi, hi_of[r]) - 1))
                if (solve_parts(lo, hi) if split else search(lo, hi, hr, r)):
                    return True
            del offset[r]
            restore()
            if not hat:  # nothing unplaced overlaps r: no other choice here can do better
                return False
        return False

    if not solve_parts(0, S):
        return None
    out = np.zeros(n, dtype=np.int64)
    out[inst.order] = [offset.get(r, 0) for r in range(n)]
    return out
