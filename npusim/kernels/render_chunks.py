"""RenderChunks (TAA paper, Algorithm 3): the contiguous byte chunks of a strided view.

A tile is a strided view of its tensor; a DMA moves it as one descriptor per contiguous
chunk. ``render_chunks(shape, strides, offset, itemsize)`` returns (offsets, sizes) in bytes,
in increasing address order, with abutting chunks merged.

``render_chunks_reference`` follows the paper's recursive pseudo-code line by line;
``_render_chunks_vectorised`` computes the same thing without recursion or a loop per chunk:
the trailing dimensions that are contiguous (each stride equals the product of the sizes
after it, the last stride is 1) form one block, the leading dimensions' offsets are
enumerated at once with NumPy, and a block is merged into the previous chunk when they
abut. (It was a Numba kernel; NumPy is as fast on the views npusim moves and spares every
run that needs no other kernel Numba's import and cache load, ~0.7 s.)
``chunks_of`` memoises per (shape, strides) and shifts by the offset; ``burst_count`` gives
just the number of chunks and of distinct DRAM bursts they touch (what a transfer moves on the
bus: a burst two adjacent chunks share is moved once), memoised too; a view of few blocks
(``SMALL_VIEW_BLOCKS``) is counted in plain Python (``_burst_count_python``), where NumPy's
fixed cost per call would be most of the time.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


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


def _leading_offsets(shape, strides, first: int) -> np.ndarray:
    """Element offsets of the contiguous blocks of a view, one per index of its leading
    ``first`` axes, in row-major (issue) order."""
    offsets = np.zeros(1, dtype=np.int64)
    for k in range(first):
        offsets = (offsets[:, None] + np.arange(shape[k], dtype=np.int64) * strides[k]).ravel()
    return offsets


def _render_chunks_vectorised(shape, strides, offset: int, itemsize: int) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 3 without recursion: the trailing contiguous axes form one block; the
    leading axes' offsets are enumerated at once (NumPy) and a block that starts where the
    previous one ends is merged into it."""
    first, elements = contiguous_block(shape, strides)
    block = elements * itemsize
    if block == 0 or any(shape[k] == 0 for k in range(first)):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = (_leading_offsets(shape, strides, first) + offset) * itemsize
    new = np.ones(starts.shape[0], dtype=bool)
    new[1:] = starts[1:] != starts[:-1] + block  # abuts the previous block: same chunk
    heads = np.flatnonzero(new)
    ends = np.append(heads[1:], starts.shape[0]) - 1  # last block of each chunk
    return starts[heads], starts[ends] + block - starts[heads]


def render_chunks(shape, strides, offset: int = 0, itemsize: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Byte offsets and sizes of the contiguous chunks of a view."""
    return _render_chunks_vectorised(tuple(int(d) for d in shape), tuple(int(d) for d in strides),
                                     int(offset), int(itemsize))


@lru_cache(maxsize=65536)
def _chunks_at_zero(shape: tuple, strides: tuple, itemsize: int) -> tuple[tuple[int, int], ...]:
    offsets, sizes = render_chunks(shape, strides, 0, itemsize)
    return tuple(zip(offsets.tolist(), sizes.tolist()))


@lru_cache(maxsize=65536)
def _chunk_arrays_at_zero(shape: tuple, strides: tuple, itemsize: int) -> tuple[np.ndarray, np.ndarray]:
    offsets, sizes = render_chunks(shape, strides, 0, itemsize)
    offsets.flags.writeable = sizes.flags.writeable = False  # shared by every view of this shape
    return offsets, sizes


def chunk_arrays(shape, strides, itemsize: int, base_address: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``chunks_of`` as (addresses, bytes) arrays, memoised per (shape, strides, itemsize): no
    tuple per chunk (a DRAM contents check takes the chunks of every buffer a plan stores)."""
    offsets, sizes = _chunk_arrays_at_zero(tuple(shape), tuple(strides), int(itemsize))
    return offsets + base_address, sizes


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


def _burst_count_vectorised(shape, strides, itemsize: int, start: int, burst: int) -> tuple[int, int]:
    offsets, sizes = _render_chunks_vectorised(shape, strides, 0, itemsize)
    first = (start + offsets) // burst
    last = (start + offsets + sizes - 1) // burst
    shared = int(np.count_nonzero(first[1:] == last[:-1]))  # a burst the previous chunk moved
    return offsets.shape[0], int((last - first + 1).sum()) - shared


#: Views of at most this many contiguous blocks are counted in plain Python: NumPy's fixed
#: cost per call (a dozen array operations, ~70 us) is more than the loop over so few blocks
#: (~0.5 us a block; measured even at about 200).
SMALL_VIEW_BLOCKS = 128


def contiguous_block(shape, strides) -> tuple[int, int]:
    """(first axis from which the view is contiguous, elements of that block): the trailing
    axes RenderChunks merges into one block."""
    first, expected = len(shape), 1
    for k in range(len(shape) - 1, -1, -1):
        if shape[k] != 1 and strides[k] != expected:
            break
        expected *= shape[k]
        first = k
    elements = 1
    for d in shape[first:]:
        elements *= d
    return first, elements


def _burst_count_python(shape, strides, itemsize: int, start: int, burst: int) -> tuple[int, int]:
    """``_burst_count_vectorised`` in plain Python, for views of few blocks: the blocks'
    offsets in issue order, a block merged into the chunk it abuts, then each chunk's bursts
    less those the previous chunk moved (tests/test_render_chunks.py holds the two equal)."""
    first, elements = contiguous_block(shape, strides)
    block = elements * itemsize
    if block == 0 or any(shape[k] == 0 for k in range(first)):
        return 0, 0
    offsets = [0]
    for k in range(first):
        offsets = [o + i * strides[k] for o in offsets for i in range(shape[k])]
    chunks, bursts, previous_last = 0, 0, None
    head = end = None
    for o in offsets:
        a = o * itemsize
        if a == end:  # abuts the previous block: the same chunk
            end += block
            continue
        if head is not None:
            lo, hi = (start + head) // burst, (start + end - 1) // burst
            bursts += hi - lo + 1 - (lo == previous_last)
            previous_last = hi
            chunks += 1
        head, end = a, a + block
    lo, hi = (start + head) // burst, (start + end - 1) // burst
    bursts += hi - lo + 1 - (lo == previous_last)
    return chunks + 1, bursts


def _block_count(shape, strides) -> int:
    """Contiguous blocks of a view (before abutting ones merge)."""
    first, _ = contiguous_block(shape, strides)
    count = 1
    for d in shape[:first]:
        count *= d
    return count


@lru_cache(maxsize=65536)
def _burst_count_memo(shape: tuple, strides: tuple, itemsize: int, phase: int, burst: int) -> tuple[int, int]:
    if _block_count(shape, strides) <= SMALL_VIEW_BLOCKS:
        return _burst_count_python(shape, strides, itemsize, phase, burst)
    return _burst_count_vectorised(shape, strides, itemsize, phase, burst)


def burst_count(shape, strides, itemsize: int, start: int, burst: int) -> tuple[int, int]:
    """(chunks, distinct DRAM bursts) a DMA of the view moves; memoised on the start's phase."""
    return _burst_count_memo(tuple(shape), tuple(strides), int(itemsize), int(start) % burst, int(burst))
