"""An address space with best-fit placement among the gaps between live blocks.

This is TensorFlow Lite's ``SimpleMemoryArena`` policy: a new block goes into the smallest
gap (between live blocks, or after the last one) that holds it, the lowest such gap on ties.

The free gaps are kept as two parallel lists sorted by address, their starts and ends, so a
best-fit search scans the gaps (a few) rather than the live blocks (several per gap); a
placement splits the gap that holds it, a free merges the block with the gaps beside it. A
gap starts where the block below it ends, rounded up to the alignment, and ends at the next
block or at the capacity: a block is placed inside a gap (where ``find`` or ``gaps`` says),
so blocks never overlap, nor do their rounded ends reach past the next block. The live blocks
are kept by owner (a few at a time) and sorted by offset only for the questions about freeing
some of them. ``steps_fitting`` runs the online allocator's look-ahead (several rounds of frees and
best-fit placements) on plain copies of the gap lists, without building a second arena.
"""

from __future__ import annotations

import bisect


class BestFitArena:
    def __init__(self, capacity: int, alignment: int = 1) -> None:
        self.capacity = capacity
        self.alignment = alignment
        # owner -> (offset, rounded end) and owner -> bytes of its block, in placement order
        self._span: dict[int, tuple[int, int]] = {}
        self._size: dict[int, int] = {}
        self._gap_starts: list[int] = [0] if capacity > 0 else []  # the free gaps, sorted
        self._gap_ends: list[int] = [capacity] if capacity > 0 else []
        self._empty: dict[int, int] = {}  # owners of no bytes -> offset
        self.used = 0  # bytes of the live blocks
        self._largest: int | None = capacity if capacity > 0 else 0  # largest_gap, None when not known

    def find(self, size: int) -> int | None:
        """Best-fit offset for ``size`` bytes, or None if no gap holds it (0 for no bytes)."""
        if size <= 0:
            return 0
        if self._largest is not None and size > self._largest:
            return None
        # the smallest gap that holds it, the lowest on ties
        ends, best, best_gap = self._gap_ends, None, -1
        for j, start in enumerate(self._gap_starts):
            gap = ends[j] - start
            if gap >= size and (gap < best_gap or best_gap < 0):
                if gap == size:  # nothing fits tighter, and later gaps are higher
                    return start
                best, best_gap = start, gap
        return best

    def largest_gap(self) -> int:
        """Bytes of the largest gap (0 when full); kept through a free (the merged gap may only
        raise it) and through a placement in a gap smaller than it (the others are as they were)."""
        if self._largest is None:
            largest = 0
            for start, end in zip(self._gap_starts, self._gap_ends):  # a few gaps: a loop beats max(map(..))
                if end - start > largest:
                    largest = end - start
            self._largest = largest
        return self._largest

    def gaps(self) -> list[tuple[int, int]]:
        """The free ranges ``(start, end)`` between live blocks, lowest first, starts aligned."""
        return list(zip(self._gap_starts, self._gap_ends))

    def gap_ends_holding(self, size: int, skip: int) -> list[int]:
        """The low and high ends of every gap that holds ``size`` bytes, lowest gap first, but
        ``skip`` (the other offsets the allocator's look-ahead tries beside best fit)."""
        alignment, found = self.alignment, []
        for start, end in zip(self._gap_starts, self._gap_ends):
            if end - start >= size:
                top = (end - size) // alignment * alignment
                if start != skip:
                    found.append(start)
                if top != start and top != skip:
                    found.append(top)
        return found

    def copy(self) -> "BestFitArena":
        other = BestFitArena(self.capacity, self.alignment)
        other._span, other._size = dict(self._span), dict(self._size)
        other._gap_starts, other._gap_ends = list(self._gap_starts), list(self._gap_ends)
        other._empty = dict(self._empty)
        other.used = self.used
        other._largest = self._largest
        return other

    def _spans_by_offset(self, removable) -> list[tuple[int, int]]:
        """``(offset, rounded end)`` of the live blocks not in ``removable``, lowest first (the
        blocks are few: sorted when asked rather than kept sorted on every place and free)."""
        spans = [span for owner, span in self._span.items() if owner not in removable]
        spans.sort()
        return spans

    def fits_keeping(self, size: int, kept) -> bool:
        """Whether some gap would hold ``size`` bytes if only the blocks of ``kept`` (owners of
        address ranges, each once) stayed: for a caller that has the few blocks to keep at hand
        rather than the many to free."""
        spans = self._span
        cursor = 0
        for off, end in sorted([spans[owner] for owner in kept]):
            if off - cursor >= size:
                return True
            if end > cursor:
                cursor = end
        return self.capacity - cursor >= size

    def largest_gaps_without(self, removable) -> tuple[int, int]:
        """Bytes of the largest and second largest gaps (0 if none) if the blocks of
        ``removable`` were freed."""
        first = second = cursor = 0
        for off, end in self._spans_by_offset(removable):
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
        """Place ``owner``'s block of ``size`` bytes at ``offset``, inside a gap."""
        if size <= 0:  # takes no address range: kept apart, so it never shares a key with a block
            self._empty[owner] = offset
            return
        alignment, starts, ends = self.alignment, self._gap_starts, self._gap_ends
        end = -(-(offset + size) // alignment) * alignment
        j = bisect.bisect_right(starts, offset) - 1
        if j < 0 or offset + size > ends[j]:
            raise ValueError(f"{size} B at {offset} is not inside a gap")
        gap_end = ends[j]
        if gap_end - starts[j] == self._largest:
            self._largest = None
        if offset > starts[j]:  # _take, written out: a call per placement of the online allocator
            if end < gap_end:  # a gap is left on each side
                starts.insert(j + 1, end)
                ends.insert(j + 1, gap_end)
            ends[j] = offset
        elif end < gap_end:
            starts[j] = end
        else:
            del starts[j]
            del ends[j]
        self._span[owner] = (offset, end)
        self._size[owner] = size
        self.used += size

    def allocate(self, owner: int, size: int) -> int | None:
        offset = self.find(size)
        if offset is not None:
            self.place(owner, offset, size)
        return offset

    def free(self, owner: int) -> int:
        """Free ``owner``'s block; returns its offset. The block goes back to the gaps, merged
        with a gap ending at its start and one starting at its end; a gap never reaches past
        the capacity."""
        if self._empty and owner in self._empty:
            return self._empty.pop(owner)
        offset, end = self._span.pop(owner)
        self.used -= self._size.pop(owner)
        starts, ends = self._gap_starts, self._gap_ends
        i = _give(starts, ends, offset, end if end < self.capacity else self.capacity)
        if self._largest is not None and ends[i] - starts[i] > self._largest:  # i: the gap it is in now
            self._largest = ends[i] - starts[i]
        return offset

    def offset_of(self, owner: int) -> int:
        return self._empty[owner] if owner in self._empty else self._span[owner][0]

    def size_of(self, owner: int) -> int:
        """Bytes of ``owner``'s block (0 for an owner of no bytes)."""
        return 0 if owner in self._empty else self._size[owner]

    def owners(self) -> list[int]:
        """Owners of address ranges (not those of no bytes: evicting them frees nothing)."""
        return list(self._span)

    def steps_fitting(self, owner: int, offset: int, size: int, steps) -> int:
        """How many of ``steps`` fit in turn on a copy of this arena with ``owner`` placed at
        ``offset`` (inside a gap) first; nothing here changes.

        ``steps``: per step, ``(new, freed)``: the owners freed before the step (placed here
        or earlier in the sequence) and the ``(owner, size)`` blocks then placed by best fit.
        A step fits when every block of it finds a gap; the count stops at the first that
        does not. It is ``copy``, ``place``, ``free`` and ``allocate`` in sequence, run on
        copies of the gap lists (this is the hot loop of the allocator's placement look-ahead:
        ``find``'s search is written out in it, as calls it and free's were a third of it; the merge
        of a freed block is ``_give``, as in ``free``, a call measured at no cost on resnet50 at 64 KiB)."""
        starts, ends, capacity, align = list(self._gap_starts), list(self._gap_ends), self.capacity, self.alignment
        spans, placed = self._span, {}  # owner -> (offset, rounded end): this arena's, and placed here
        if size > 0:
            end = -(-(offset + size) // align) * align
            _take(starts, ends, bisect.bisect_right(starts, offset) - 1, offset, end)
            placed[owner] = (offset, end)
        fitted = 0
        for new, freed in steps:
            for x in freed:
                span = placed.pop(x, None) or spans.get(x)
                if span is None:  # no bytes
                    continue
                at, end = span
                _give(starts, ends, at, end if end < capacity else capacity)
            for x, nbytes in new:
                if nbytes <= 0:
                    continue
                j, best = -1, capacity + 1  # best fit, as find
                for k, start in enumerate(starts):
                    gap = ends[k] - start
                    if nbytes <= gap < best:
                        j, best = k, gap
                        if gap == nbytes:
                            break
                if j < 0:
                    return fitted
                at, end = starts[j], -(-(starts[j] + nbytes) // align) * align
                if end < ends[j]:
                    starts[j] = end
                else:
                    del starts[j]
                    del ends[j]
                placed[x] = (at, end)
            fitted += 1
        return fitted


def _give(starts: list[int], ends: list[int], offset: int, end: int) -> int:
    """Give ``[offset, end)`` (``end`` within the capacity) back to the gaps, merged with a gap
    ending at its start and one starting at its end; the index of the gap it is in now."""
    i = bisect.bisect_left(starts, offset)
    below = i > 0 and ends[i - 1] == offset
    if i < len(starts) and starts[i] == end:  # a gap starts at its end
        if below:
            ends[i - 1] = ends[i]
            del starts[i]
            del ends[i]
            return i - 1
        starts[i] = offset
        return i
    if below:
        ends[i - 1] = end
        return i - 1
    starts.insert(i, offset)
    ends.insert(i, end)
    return i


def _take(starts: list[int], ends: list[int], j: int, offset: int, end: int) -> None:
    """Take the block ``[offset, end)`` (``end`` rounded up) out of gap j, which holds it."""
    if offset > starts[j]:
        if end < ends[j]:  # a gap is left on each side
            starts.insert(j + 1, end)
            ends.insert(j + 1, ends[j])
        ends[j] = offset
    elif end < ends[j]:
        starts[j] = end
    else:
        del starts[j]
        del ends[j]
