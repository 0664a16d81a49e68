"""An address space with best-fit placement among the gaps between live blocks.

This is TensorFlow Lite's ``SimpleMemoryArena`` policy: a new block goes into the smallest
gap (between live blocks, or after the last one) that holds it, the lowest such gap on ties.

The live blocks are kept as two parallel lists sorted by offset: their offsets and their ends
rounded up to the alignment. A gap then starts at the largest rounded end so far (rounding up
is monotone, so the rounded maximum is the maximum of the rounded ends), and a scan for the
best gap is one pass over two lists with no arithmetic beyond a subtraction per block.
``steps_fitting`` runs the online allocator's look-ahead (several rounds of frees and best-fit
placements) on plain copies of those lists, without building a second arena.
"""

from __future__ import annotations

import bisect


class BestFitArena:
    def __init__(self, capacity: int, alignment: int = 1) -> None:
        self.capacity = capacity
        self.alignment = alignment
        self._offsets: list[int] = []  # sorted offsets of live blocks
        self._ends: list[int] = []  # their ends rounded up to the alignment, in the same order
        self._blocks: dict[int, tuple[int, int]] = {}  # offset -> (size, owner)
        self._offset_of: dict[int, int] = {}  # owner -> offset, in placement order
        self._empty: dict[int, int] = {}  # owners of no bytes -> offset
        self.used = 0  # bytes of the live blocks

    def _align(self, x: int) -> int:
        return -(-x // self.alignment) * self.alignment

    def find(self, size: int) -> int | None:
        """Best-fit offset for ``size`` bytes, or None if no gap holds it (0 for no bytes)."""
        if size <= 0:
            return 0
        found = _best_fit(self._offsets, self._ends, self.capacity, size)
        return None if found is None else found[1]

    def largest_gap(self) -> int:
        """Bytes of the largest gap (0 when full)."""
        largest, cursor = 0, 0
        for off, end in zip(self._offsets, self._ends):
            if off - cursor > largest:
                largest = off - cursor
            if end > cursor:
                cursor = end
        return max(largest, self.capacity - cursor)

    def gaps(self) -> list[tuple[int, int]]:
        """The free ranges ``(start, end)`` between live blocks, lowest first, starts aligned."""
        found, cursor = [], 0
        for off, end in zip(self._offsets, self._ends):
            if off > cursor:
                found.append((cursor, off))
            if end > cursor:
                cursor = end
        if self.capacity > cursor:
            found.append((cursor, self.capacity))
        return found

    def copy(self) -> "BestFitArena":
        other = BestFitArena(self.capacity, self.alignment)
        other._offsets = list(self._offsets)
        other._ends = list(self._ends)
        other._blocks = dict(self._blocks)
        other._offset_of = dict(self._offset_of)
        other._empty = dict(self._empty)
        other.used = self.used
        return other

    def fits_without(self, size: int, removable: set[int]) -> bool:
        """Whether some gap would hold ``size`` bytes if the blocks of ``removable`` were freed."""
        cursor = 0
        for off, end in zip(self._offsets, self._ends):
            if self._blocks[off][1] in removable:
                continue
            if off - cursor >= size:
                return True
            if end > cursor:
                cursor = end
        return self.capacity - cursor >= size

    def largest_gaps_without(self, removable) -> tuple[int, int]:
        """Bytes of the largest and second largest gaps (0 if none) if the blocks of
        ``removable`` were freed."""
        first = second = cursor = 0
        blocks = self._blocks
        for off, end in zip(self._offsets, self._ends):
            if blocks[off][1] in removable:
                continue
            gap = off - cursor
            if gap > second:
                first, second = (gap, first) if gap > first else (first, gap)
            if end > cursor:
                cursor = end
        gap = self.capacity - cursor
        if gap > second:
            first, second = (gap, first) if gap > first else (first, gap)
        return first, second

    def place(self, owner: int, offset: int, size: int) -> None:
        if size <= 0:  # takes no address range: kept apart, so it never shares a key with a block
            self._empty[owner] = offset
            return
        i = bisect.bisect_left(self._offsets, offset)
        self._offsets.insert(i, offset)
        self._ends.insert(i, self._align(offset + size))
        self._blocks[offset] = (size, owner)
        self._offset_of[owner] = offset
        self.used += size

    def allocate(self, owner: int, size: int) -> int | None:
        offset = self.find(size)
        if offset is not None:
            self.place(owner, offset, size)
        return offset

    def free(self, owner: int) -> int:
        """Free ``owner``'s block; returns its offset."""
        offset = self._empty.pop(owner, None)
        if offset is not None:
            return offset
        offset = self._offset_of.pop(owner)
        self.used -= self._blocks.pop(offset)[0]
        i = bisect.bisect_left(self._offsets, offset)
        del self._offsets[i]
        del self._ends[i]
        return offset

    def offset_of(self, owner: int) -> int:
        return self._empty[owner] if owner in self._empty else self._offset_of[owner]

    def size_of(self, owner: int) -> int:
        """Bytes of ``owner``'s block (0 for an owner of no bytes)."""
        return 0 if owner in self._empty else self._blocks[self._offset_of[owner]][0]

    def owners(self) -> list[int]:
        """Owners of address ranges (not those of no bytes: evicting them frees nothing)."""
        return list(self._offset_of)

    def steps_fitting(self, owner: int, offset: int, size: int, steps) -> int:
        """How many of ``steps`` fit in turn on a copy of this arena with ``owner`` placed at
        ``offset`` first; nothing here changes.

        ``steps``: per step, ``(new, freed)``: the owners freed before the step (placed here
        or earlier in the sequence) and the ``(owner, size)`` blocks then placed by best fit.
        A step fits when every block of it finds a gap; the count stops at the first that
        does not. It is ``copy``, ``place``, ``free`` and ``allocate`` in sequence, run on
        plain lists (this is the hot loop of the allocator's placement look-ahead)."""
        offsets, ends, capacity, align = list(self._offsets), list(self._ends), self.capacity, self.alignment
        where = dict(self._offset_of)  # owner -> offset of its block; absent: no bytes
        if size > 0:
            i = bisect.bisect_left(offsets, offset)
            offsets.insert(i, offset)
            ends.insert(i, -(-(offset + size) // align) * align)
            where[owner] = offset
        for n, (new, freed) in enumerate(steps):
            for x in freed:
                at = where.pop(x, None)
                if at is not None:
                    i = bisect.bisect_left(offsets, at)
                    del offsets[i]
                    del ends[i]
            for x, nbytes in new:
                if nbytes <= 0:
                    continue
                found = _best_fit(offsets, ends, capacity, nbytes)
                if found is None:
                    return n
                i, at = found
                offsets.insert(i, at)
                ends.insert(i, -(-(at + nbytes) // align) * align)
                where[x] = at
        return len(steps)


def _best_fit(offsets: list[int], ends: list[int], capacity: int, size: int) -> tuple[int, int] | None:
    """``(index, start)`` of the smallest gap of at least ``size`` bytes (the lowest on ties),
    or None: ``start`` is where the block goes, ``index`` where it goes in the lists.
    ``offsets``/``ends``: the live blocks sorted by offset, ends rounded up to the alignment."""
    best, best_gap = None, capacity + 1
    cursor = 0
    for i, off in enumerate(offsets):
        gap = off - cursor
        if size <= gap < best_gap:
            if gap == size:  # nothing fits tighter, and later gaps are higher
                return i, cursor
            best, best_gap = (i, cursor), gap
        end = ends[i]
        if end > cursor:
            cursor = end
    gap = capacity - cursor
    if size <= gap < best_gap:
        best = (len(offsets), cursor)
    return best
