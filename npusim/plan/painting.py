"""The scratchpad's address space as disjoint segments, each owned by the residency painted
over it last: painting a new residency reports whose bytes it covers (its previous occupants).
Used by lowering (which residencies a new one must wait for) and by the race check."""

from __future__ import annotations

import bisect


class AddressPainter:
    def __init__(self) -> None:
        self._starts: list[int] = []  # sorted segment starts
        self._segments: dict[int, tuple[int, int]] = {}  # start -> (end, owner)

    def paint(self, lo: int, hi: int, owner: int) -> set[int]:
        """Give [lo, hi) to ``owner``; returns the owners of the bytes it covered before. An
        empty range covers nothing and changes nothing."""
        if hi <= lo:
            return set()
        starts, segments = self._starts, self._segments
        k = bisect.bisect_right(starts, lo) - 1
        if k < 0 or segments[starts[k]][0] <= lo:
            k += 1
        found, pieces = set(), []
        while k < len(starts) and starts[k] < hi:
            start = starts[k]
            end, previous = segments.pop(start)
            starts.pop(k)
            found.add(previous)
            if start < lo:
                pieces.append((start, lo, previous))
            if end > hi:
                pieces.append((hi, end, previous))
        for a, b, who in pieces + [(lo, hi, owner)]:
            bisect.insort(starts, a)
            segments[a] = (b, who)
        return found
