"""The tagged scratchpad: which residency holds every byte range, and whether it is valid.

It does not store data, only ownership. A write into a range still owned by another live
residency, or a read of a range that does not hold the expected, filled residency, raises
``SimulationError`` naming the command, both tensors, the step and the addresses. This is how
a plan that is unsafe under some interleaving of streams is caught.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from npusim.errors import SimulationError


@dataclass
class _Block:
    start: int
    end: int
    residency: int
    tensor: str
    valid: bool = False


class TaggedScratchpad:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._starts: list[int] = []
        self._blocks: dict[int, _Block] = {}  # start -> block (blocks never overlap)
        self._start_of: dict[int, int] = {}  # residency -> start
        self.used = 0
        self.peak = 0

    def _overlapping(self, start: int, end: int) -> list[_Block]:
        i = bisect.bisect_right(self._starts, start) - 1
        i = max(i, 0)
        found = []
        while i < len(self._starts) and self._starts[i] < end:
            b = self._blocks[self._starts[i]]
            if b.end > start:
                found.append(b)
            i += 1
        return found

    def claim(self, residency: int, tensor: str, start: int, size: int, who) -> None:
        """``who`` starts writing ``tensor`` into [start, start+size): the range must be free.

        ``who`` names the command in an error; it may be a callable, called only then.
        """
        end = start + size
        if residency in self._start_of or size <= 0:
            return  # a later write into its own residency (e.g. a second producer pass), or no bytes
        overlapping = self._overlapping(start, end)
        if end > self.capacity or overlapping:
            who = who() if callable(who) else who
        if end > self.capacity:
            raise SimulationError(f"{who}: writes {tensor!r} to [{start}, {end}) past the scratchpad capacity {self.capacity}")
        for b in overlapping:
            raise SimulationError(
                f"{who}: writes {tensor!r} to [{start}, {end}) which overlaps live tensor "
                f"{b.tensor!r} at [{b.start}, {b.end}): an overwrite of live data"
            )
        bisect.insort(self._starts, start)
        self._blocks[start] = _Block(start, end, residency, tensor)
        self._start_of[residency] = start
        self.used += size
        self.peak = max(self.peak, self.used)

    def fill(self, residency: int) -> None:
        start = self._start_of.get(residency)
        if start is not None:  # a residency of no bytes (partial sums in a core's accumulators) has no block
            self._blocks[start].valid = True

    def check_read(self, residency: int, tensor: str, start: int, size: int, who) -> None:
        if size <= 0:
            return
        end = start + size
        block = self._blocks.get(self._start_of.get(residency, -1))
        if block is None or not block.valid:
            who = who() if callable(who) else who
            holders = self._overlapping(start, end)
            held = ", ".join(f"{b.tensor!r} at [{b.start}, {b.end})" + ("" if b.valid else " (not yet filled)")
                             for b in holders) or "nothing"
            raise SimulationError(f"{who}: reads {tensor!r} at [{start}, {end}) but the range holds {held}")

    def release(self, residency: int) -> None:
        start = self._start_of.pop(residency, None)
        if start is None:
            return
        block = self._blocks.pop(start)
        self._starts.pop(bisect.bisect_left(self._starts, start))
        self.used -= block.end - block.start
