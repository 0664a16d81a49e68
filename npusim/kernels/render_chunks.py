"""RenderChunks (TAA paper, Algorithm 3): the contiguous byte chunks of a strided view.

A tile is a strided view of its tensor; a DMA moves it as one descriptor per contiguous
chunk. ``render_chunks(shape, strides, offset, itemsize)`` returns (offsets, sizes) in bytes,
in increasing address order, with abutting chunks merged.

``render_chunks_reference`` follows the paper's recursive pseudo-code line by line; the
Numba kernel ``_render_chunks_kernel`` computes the same thing iteratively: the trailing
dimensions that are contiguous (each stride equals the product of the sizes after it, the
last stride is 1) form one block, and the leading dimensions are walked like an odometer,
one block per index, merging a block into the previous chunk when they abut.
``chunks_of`` memoises per (shape, strides) and shifts by the offset; ``burst_count`` gives
just the number of chunks and of distinct DRAM bursts they touch (what a transfer moves on the
bus: a burst two adjacent chunks share is moved once), memoised too.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit


def _contiguous_from(shape, strides, axis: int) -> bool:
    """Dimensions ``axis`` and after are contiguous (the paper's criterion, plus a unit last stride)."""
    expected = 1
    for k in range(len(shape) - 1, axis - 1, -1):
        if shape[k] != 1 and strides[k] != expected:
            return False
        expected *= shape[k]
    return True


def render_chunks_reference(shape, strides, offset: int = 0, itemsize: int = 1, axis: int = 0):
    """Algorithm 3 as written in the paper (element units inside, bytes out)."""
    offsets: list[int] = []
    sizes: list[int] = []
    if _contiguous_from(shape, strides, axis):
        block = 1
        for d in shape[axis:]:
            block *= d
        return [offset * itemsize], [block * itemsize]
    for _ in range(shape[axis]):
        if axis == len(shape) - 1:
            offsets.append(offset * itemsize)
            sizes.append(itemsize)
        else:
            noffsets, nsizes = render_chunks_reference(shape, strides, offset, itemsize, axis + 1)
            if offsets and noffsets[0] == offsets[-1] + sizes[-1]:
                sizes[-1] += nsizes[0]
                offsets.extend(noffsets[1:])
                sizes.extend(nsizes[1:])
            else:
                offsets.extend(noffsets)
                sizes.extend(nsizes)
        offset += strides[axis]
    return offsets, sizes


@njit(cache=True)
def _render_chunks_kernel(shape, strides, offset, itemsize):
    rank = shape.shape[0]
    # First axis from which the view is contiguous.
    first = rank
    expected = 1
    for k in range(rank - 1, -1, -1):
        if shape[k] != 1 and strides[k] != expected:
            break
        expected *= shape[k]
        first = k
    block = 1
    for k in range(first, rank):
        block *= shape[k]
    outer = 1
    for k in range(first):
        outer *= shape[k]
    offsets = np.empty(max(outer, 1), dtype=np.int64)
    sizes = np.empty(max(outer, 1), dtype=np.int64)
    index = np.zeros(max(first, 1), dtype=np.int64)
    n = 0
    position = offset
    for _ in range(outer):
        start = position * itemsize
        size = block * itemsize
        if n > 0 and offsets[n - 1] + sizes[n - 1] == start:
            sizes[n - 1] += size
        else:
            offsets[n] = start
            sizes[n] = size
            n += 1
        # Odometer step over the leading (non-contiguous) axes.
        k = first - 1
        while k >= 0:
            index[k] += 1
            position += strides[k]
            if index[k] < shape[k]:
                break
            position -= strides[k] * shape[k]
            index[k] = 0
            k -= 1
    return offsets[:n], sizes[:n]


def render_chunks(shape, strides, offset: int = 0, itemsize: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Byte offsets and sizes of the contiguous chunks of a view (Numba)."""
    return _render_chunks_kernel(np.asarray(shape, dtype=np.int64), np.asarray(strides, dtype=np.int64),
                                 int(offset), int(itemsize))


@lru_cache(maxsize=65536)
def _chunks_at_zero(shape: tuple, strides: tuple, itemsize: int) -> tuple[tuple[int, int], ...]:
    offsets, sizes = render_chunks(shape, strides, 0, itemsize)
    return tuple(zip(offsets.tolist(), sizes.tolist()))


def chunks_of(shape, strides, offset: int, itemsize: int, base_address: int = 0) -> tuple[tuple[int, int], ...]:
    """(address, bytes) chunks of a view, memoised per (shape, strides, itemsize)."""
    shift = base_address + offset * itemsize
    return tuple((o + shift, s) for o, s in _chunks_at_zero(tuple(shape), tuple(strides), int(itemsize)))


def burst_count_reference(shape, strides, itemsize: int, start: int, burst: int) -> tuple[int, int]:
    """(chunks, bursts moved) of a view whose first element is at byte ``start``.

    Each chunk moves the bursts it touches, except that a burst the previous chunk (in issue
    order) also touched is moved once: adjacent rows of a tile that share a burst do not pay
    for it twice. For chunks in increasing address order (views in storage order) this is the
    number of distinct bursts touched.
    """
    offsets, sizes = render_chunks_reference(shape, strides, 0, itemsize)
    bursts, previous_last = 0, None
    for o, s in zip(offsets, sizes):
        a = start + o
        first, last = a // burst, (a + s - 1) // burst
        bursts += last - first + 1 - (first == previous_last)
        previous_last = last
    return len(offsets), bursts


@njit(cache=True)
def _burst_count_kernel(shape, strides, itemsize, start, burst):
    offsets, sizes = _render_chunks_kernel(shape, strides, 0, itemsize)
    bursts = 0
    previous_last = -1
    for i in range(offsets.shape[0]):
        a = start + offsets[i]
        first = a // burst
        last = (a + sizes[i] - 1) // burst
        bursts += last - first + 1
        if first == previous_last:
            bursts -= 1
        previous_last = last
    return offsets.shape[0], bursts


@lru_cache(maxsize=65536)
def _burst_count_memo(shape: tuple, strides: tuple, itemsize: int, phase: int, burst: int) -> tuple[int, int]:
    n, b = _burst_count_kernel(np.asarray(shape, dtype=np.int64), np.asarray(strides, dtype=np.int64),
                               itemsize, phase, burst)
    return int(n), int(b)


def burst_count(shape, strides, itemsize: int, start: int, burst: int) -> tuple[int, int]:
    """(chunks, distinct DRAM bursts) a DMA of the view moves; memoised on the start's phase."""
    return _burst_count_memo(tuple(shape), tuple(strides), int(itemsize), int(start) % burst, int(burst))
