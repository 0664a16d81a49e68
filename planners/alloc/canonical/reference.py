"""The canonical search in plain recursive Python: the oracle of its Numba kernels (both return
the same offsets after the same number of placements; ``planners.alloc.canonical.search``)."""

from __future__ import annotations

import numpy as np

from planners.alloc.canonical.instance import PREORDERINGS, SearchInstance


def search_offsets_reference(first, last, sizes, capacity: int, preordering: str = PREORDERINGS[0], *,
                             with_nodes: bool = False, discrepancies: int = -1):
    """The same search (one preordering, no budget) in plain Python, recomputing everything
    from the placed buffers at each step: the Numba kernels' oracle. The offsets (None if
    there are none); with ``with_nodes``, also the placements tried, which equal the kernel's
    when both walk the same tree (same inferences and order)."""
    inst = SearchInstance(first, last, sizes, preordering)
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
