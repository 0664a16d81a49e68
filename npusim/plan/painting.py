"""The scratchpad's address space as disjoint segments, each owned by the residency painted
over it last: painting a new residency reports whose bytes it covers (its previous occupants).
Used by lowering (which residencies a new one must wait for) and by the race check."""

from __future__ import annotations

import bisect


class AddressPainter:
    """Segments kept as three parallel lists sorted by start (segments are disjoint, so their
    ends are sorted too): a paint replaces the run of segments it overlaps with at most three
    (the uncovered head of the first, the new one, the uncovered tail of the last) in one
    slice assignment per list."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._owners: list[int] = []

    def paint(self, lo: int, hi: int, owner: int) -> set[int]:
        """Give [lo, hi) to ``owner``; returns the owners of the bytes it covered before. An
        empty range covers nothing and changes nothing."""
        if hi <= lo:
            return set()
        starts, ends, owners = self._starts, self._ends, self._owners
        first = bisect.bisect_right(ends, lo)  # the first segment ending after lo
        stop = bisect.bisect_left(starts, hi, first)  # past the last segment starting before hi
        if first == stop:  # covers nothing painted: a new segment in the gap
            starts.insert(first, lo)
            ends.insert(first, hi)
            owners.insert(first, owner)
            return set()
        if stop == first + 1 and starts[first] == lo and ends[first] == hi:
            # exactly one segment painted over (an allocator reusing a block: most paints)
            found = {owners[first]}
            owners[first] = owner
            return found
        found = set(owners[first:stop])
        new_starts, new_ends, new_owners = [lo], [hi], [owner]
        if starts[first] < lo:  # the head of the first segment stays its owner's
            new_starts.insert(0, starts[first])
            new_ends.insert(0, lo)
            new_owners.insert(0, owners[first])
        if ends[stop - 1] > hi:  # and the tail of the last one
            new_starts.append(hi)
            new_ends.append(ends[stop - 1])
            new_owners.append(owners[stop - 1])
        starts[first:stop] = new_starts
        ends[first:stop] = new_ends
        owners[first:stop] = new_owners
        return found

    def paint_each(self, los: list[int], his: list[int], owners: list[int]) -> tuple[list[int], list[int]]:
        """``paint(lo, hi, owner)`` of each range in turn: (how many previous owners each paint
        found, those owners one paint after the other, each paint's in no particular order).
        The loop of ``paint`` inlined, for a caller painting tens of thousands of ranges (the
        race check: a call and a set per paint were most of its time)."""
        starts, ends, mine = self._starts, self._ends, self._owners
        bisect_right, bisect_left = bisect.bisect_right, bisect.bisect_left
        counts, found = [], []
        count, extend = counts.append, found.extend
        for lo, hi, owner in zip(los, his, owners):
            if hi <= lo:
                count(0)
                continue
            first = bisect_right(ends, lo)
            stop = bisect_left(starts, hi, first)
            if stop == first + 1 and starts[first] == lo and ends[first] == hi:  # one segment, exactly
                found.append(mine[first])
                mine[first] = owner
                count(1)
            else:
                covered = self.paint(lo, hi, owner)
                extend(covered)
                count(len(covered))
        return counts, found
