"""An address space with best-fit placement among the gaps between live blocks.

This is TensorFlow Lite's ``SimpleMemoryArena`` policy: a new block goes into the smallest
gap (between live blocks, or after the last one) that holds it, the lowest such gap on ties.
"""

from __future__ import annotations

import bisect


class BestFitArena:
    def __init__(self, capacity: int, alignment: int = 1) -> None:
        self.capacity = capacity
        self.alignment = alignment
        self._offsets: list[int] = []  # sorted offsets of live blocks
        self._blocks: dict[int, tuple[int, int]] = {}  # offset -> (size, owner)
        self._offset_of: dict[int, int] = {}  # owner -> offset
        self._empty: dict[int, int] = {}  # owners of no bytes -> offset

    def _align(self, x: int) -> int:
        return -(-x // self.alignment) * self.alignment

    def find(self, size: int) -> int | None:
        """Best-fit offset for ``size`` bytes, or None if no gap holds it (0 for no bytes)."""
        if size <= 0:
            return 0
        best, best_gap = None, None
        cursor = 0
        for off in self._offsets + [self.capacity]:
            start = self._align(cursor)
            gap = off - start
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = start, gap
            if off < self.capacity:
                cursor = max(cursor, off + self._blocks[off][0])
        return best

    def gaps(self) -> list[tuple[int, int]]:
        """The free ranges ``(start, end)`` between live blocks, lowest first, starts aligned."""
        found, cursor = [], 0
        for off in self._offsets + [self.capacity]:
            start = self._align(cursor)
            if off > start:
                found.append((start, off))
            if off < self.capacity:
                cursor = max(cursor, off + self._blocks[off][0])
        return found

    def copy(self) -> "BestFitArena":
        other = BestFitArena(self.capacity, self.alignment)
        other._offsets = list(self._offsets)
        other._blocks = dict(self._blocks)
        other._offset_of = dict(self._offset_of)
        other._empty = dict(self._empty)
        return other

    def fits_without(self, size: int, removable: set[int]) -> bool:
        """Whether some gap would hold ``size`` bytes if the blocks of ``removable`` were freed."""
        cursor = 0
        for off in self._offsets + [self.capacity]:
            if off < self.capacity and self._blocks[off][1] in removable:
                continue
            if off - self._align(cursor) >= size:
                return True
            if off < self.capacity:
                cursor = max(cursor, off + self._blocks[off][0])
        return False

    def place(self, owner: int, offset: int, size: int) -> None:
        if size <= 0:  # takes no address range: kept apart, so it never shares a key with a block
            self._empty[owner] = offset
            return
        bisect.insort(self._offsets, offset)
        self._blocks[offset] = (size, owner)
        self._offset_of[owner] = offset

    def allocate(self, owner: int, size: int) -> int | None:
        offset = self.find(size)
        if offset is not None:
            self.place(owner, offset, size)
        return offset

    def free(self, owner: int) -> None:
        if self._empty.pop(owner, None) is not None:
            return
        offset = self._offset_of.pop(owner)
        del self._blocks[offset]
        self._offsets.pop(bisect.bisect_left(self._offsets, offset))

    def offset_of(self, owner: int) -> int:
        return self._empty[owner] if owner in self._empty else self._offset_of[owner]

    def owners(self) -> list[int]:
        """Owners of address ranges (not those of no bytes: evicting them frees nothing)."""
        return list(self._offset_of)
