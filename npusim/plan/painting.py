"""The scratchpad's address space as disjoint segments, each owned by the residency painted
over it last: painting a new residency reports whose bytes it covers (its previous occupants).
Used by lowering (which residencies a new one must wait for) and by the race check."""

from __future__ import annotations

import bisect


class AddressPainter:
    """Segments as three parallel lists sorted by address (disjoint, so their starts and
    their ends are both sorted): a paint finds the segments it touches by two bisections and
    replaces them with one slice assignment per list (the segments it cuts keep their pieces
    outside the new range), with no Python loop over the segments."""

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
        if first < len(ends) and starts[first] == lo and ends[first] == hi:  # exactly one segment: reuse of a slot
            previous, owners[first] = owners[first], owner
            return {previous}
        stop = bisect.bisect_left(starts, hi, first)  # past the last segment starting before hi
        if first == stop:  # nothing painted there yet
            starts.insert(first, lo)
            ends.insert(first, hi)
            owners.insert(first, owner)
            return set()
        found = set(owners[first:stop])
        new_starts, new_ends, new_owners = [lo], [hi], [owner]
        if starts[first] < lo:  # the first segment keeps its part below lo
            new_starts.insert(0, starts[first])
            new_ends.insert(0, lo)
            new_owners.insert(0, owners[first])
        if ends[stop - 1] > hi:  # the last one keeps its part from hi
            new_starts.append(hi)
            new_ends.append(ends[stop - 1])
            new_owners.append(owners[stop - 1])
        starts[first:stop], ends[first:stop], owners[first:stop] = new_starts, new_ends, new_owners
        return found
