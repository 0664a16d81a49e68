"""A lifetime problem as the canonical search reads it (``planners.alloc.canonical.search``):
time cut into sections at every lifetime end point, the buffers of each section, the buffers
each one overlaps in time and its twins (same lifetime), with the buffers renumbered by a
preordering; and the status codes the search and its kernels share."""

from __future__ import annotations

import numpy as np

FOUND, EXHAUSTED, BUDGET, GROW, LIMITED = 0, 1, 2, 3, 4
INF = np.iinfo(np.int64).max
#: static preorderings of the portfolio, MiniMalloc's defaults (letters: T = most bytes live in
#: the buffer's busiest section, W = lifetime, C = sections spanned, A = area = size x
#: lifetime; each descending), plus TCA, which solves instances the others do not
PREORDERINGS = ("WAT", "TAW", "TWA", "TCA")


class SearchInstance:
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
