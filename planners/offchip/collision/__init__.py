"""Tile collisions (TAA paper, Algorithms 1 and 2) over RenderChunks chunks.

A *tile* is a strided view of a tensor in DRAM: ``shape`` and ``strides`` in elements, the
element ``offset`` of its first element inside the tensor, and the ``itemsize``; the tensor
sits at a byte address (its *base*). Its bytes are the contiguous chunks RenderChunks
(``npusim.kernels.render_chunks``) renders, in increasing address order.

- ``collision_size(t1, base1, t2, base2)`` (Algorithm 2): 0 when the two tiles share no
  byte; else, for the first pair of overlapping chunks found by a linear scan, ``t1end -
  t2start`` — how far ``t2`` must move up for that chunk to clear ``t1``'s (the paper's
  example, two 4x64x128 tiles of tensors at 0 and 128: 8192 - 128 = 8064).
- ``tensor_allocate`` (Algorithm 1): from a start address, check every tile of the tensor
  being placed against every placed peer tile whose lifetime overlaps it; on a collision
  shift the address by the overlap (rounded up to the alignment) and start over, until no
  tile collides. The result is the lowest such address >= the start (see the kernel), so
  the kernel may check the pairs in another order than the reference and still agree.

The ``*_reference`` functions follow the pseudo-code in plain Python (RenderChunks'
reference too); the Numba kernels compute the same on chunk *patterns*: a pattern is the
chunk list of one (shape, strides, itemsize), rendered once and shared by every tile of that
shape, which is shifted by the tile's byte offset in its tensor and the tensor's base.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from npusim.kernels.render_chunks import render_chunks, render_chunks_reference
from npusim.util.lazy_import import lazy_import
from planners.offchip.collision.limits import LATTICE_LEVELS, SEARCH_NODES

kernels = lazy_import("planners.offchip.collision.kernels")  # Numba: loaded when a collision is first checked


@dataclass(frozen=True)
class Tile:
    """A strided view of a tensor (elements), live over the inclusive times [first, last]."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    itemsize: int = 1
    first: int = 0
    last: int = 0

    @property
    def start(self) -> int:
        """Byte offset of the first element inside its tensor (the paper's off(t))."""
        return self.offset * self.itemsize

    @property
    def span(self) -> int:
        """Bytes from the first to past the last element."""
        return (sum((n - 1) * s for n, s in zip(self.shape, self.strides)) + 1) * self.itemsize


# --------------------------------------------------------------------------------------------
# Python references, line by line
# --------------------------------------------------------------------------------------------

@lru_cache(maxsize=4096)
def _rendered(shape: tuple, strides: tuple, itemsize: int):
    return render_chunks_reference(shape, strides, 0, itemsize)


def collision_size_reference(t1: Tile, t1base: int, t2: Tile, t2base: int) -> int:
    """Algorithm 2 as written."""
    a1, a2 = t1base + t1.start, t2base + t2.start
    if a1 + t1.span <= a2:  # t1 lies completely to the left of t2
        return 0
    if a2 + t2.span <= a1:  # ... completely to the right
        return 0
    o1, s1 = _rendered(t1.shape, t1.strides, t1.itemsize)  # memoised, as the paper's preparation step
    o2, s2 = _rendered(t2.shape, t2.strides, t2.itemsize)
    i = j = 0
    while i < len(s1) and j < len(s2):
        t1start = a1 + o1[i]
        t1end = t1start + s1[i]
        t2start = a2 + o2[j]
        t2end = t2start + s2[j]
        if t1end <= t2start:
            i += 1
            continue
        if t2end <= t1start:
            j += 1
            continue
        return t1end - t2start
    return 0


def collision_skips_reference(t1: Tile, t1base: int, t2: Tile, t2base: int) -> set[int]:
    """Every skip a collision allows: ``t1end - t2start`` of each pair of overlapping chunks,
    trying every pair (empty when the tiles share no byte). ``collision_skip`` returns one of
    them (0 for none); the chunk sweep returns the largest."""
    a1, a2 = t1base + t1.start, t2base + t2.start
    o1, s1 = _rendered(t1.shape, t1.strides, t1.itemsize)
    o2, s2 = _rendered(t2.shape, t2.strides, t2.itemsize)
    return {a1 + x + n - (a2 + y) for x, n in zip(o1, s1) for y, m in zip(o2, s2)
            if a2 + y < a1 + x + n and a1 + x < a2 + y + m}


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def tensor_allocate_reference(tiles: list[Tile], peers: list[tuple[Tile, int]], addr: int,
                              alignment: int = 1) -> int:
    """Algorithm 1 as written: ``peers`` are (tile, base of its tensor) of placed tensors."""
    peers = sorted(peers, key=lambda pb: pb[0].first)  # placed peers are visited by first time
    overlap = -1
    while overlap != 0:
        overlap = 0
        for tile in tiles:
            for peer, base in peers:
                if peer.last < tile.first or tile.last < peer.first:
                    continue  # lifetimes do not overlap
                overlap = collision_size_reference(peer, base, tile, addr)
                if overlap != 0:
                    break
            if overlap != 0:
                break
        if overlap != 0:
            addr = align_up(addr + overlap, alignment)
    return addr


class ChunkPatterns:
    """Chunk lists rendered once per (shape, strides, itemsize), in CSR arrays for the kernels."""

    def __init__(self) -> None:
        self._index: dict[tuple, int] = {}
        self._offsets: list[np.ndarray] = []
        self._sizes: list[np.ndarray] = []
        self._lattices: list = []  # lattice_of per pattern (None: not a lattice)
        self._arrays = None
        self._lattice_arrays = None

    def pattern(self, shape, strides, itemsize: int) -> int:
        key = (tuple(shape), tuple(strides), int(itemsize))
        p = self._index.get(key)
        if p is None:
            offsets, sizes = render_chunks(key[0], key[1], 0, key[2])
            p = self._index[key] = len(self._offsets)
            self._offsets.append(offsets)
            self._sizes.append(sizes)
            self._lattices.append(kernels.lattice_of(key[0], key[1], key[2], offsets, sizes))
            self._arrays = self._lattice_arrays = None
        return p

    def __len__(self) -> int:
        return len(self._offsets)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ptr, offsets, sizes): pattern p's chunks are ``offsets[ptr[p]:ptr[p+1]]``."""
        if self._arrays is None:
            ptr = np.zeros(len(self._offsets) + 1, dtype=np.int64)
            ptr[1:] = np.cumsum([len(o) for o in self._offsets])
            off = np.concatenate(self._offsets) if self._offsets else np.zeros(0, np.int64)
            size = np.concatenate(self._sizes) if self._sizes else np.zeros(0, np.int64)
            self._arrays = (ptr, off.astype(np.int64), size.astype(np.int64))
        return self._arrays

    def lattice_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(z, levels, counts, strides): pattern p is a lattice of chunks of ``z[p]`` bytes at
        ``sum_k i_k * strides[p, k]`` (0 <= i_k < counts[p, k], k < levels[p]); z[p] = 0: not one."""
        if self._lattice_arrays is None:
            n = len(self._lattices)
            z = np.zeros(n, dtype=np.int64)
            levels = np.zeros(n, dtype=np.int64)
            counts = np.zeros((n, LATTICE_LEVELS), dtype=np.int64)
            strides = np.zeros((n, LATTICE_LEVELS), dtype=np.int64)
            for p, lattice in enumerate(self._lattices):
                if lattice is not None:
                    z[p], levels[p] = lattice[0], len(lattice[1])
                    for k, (c, st) in enumerate(lattice[1]):
                        counts[p, k], strides[p, k] = c, st
            self._lattice_arrays = (z, levels, counts, strides)
        return self._lattice_arrays

    def kernel_arrays(self) -> tuple:
        """The chunk arrays then the lattice arrays, as the allocation kernels take them."""
        return self.arrays() + self.lattice_arrays()


def collision_size(t1: Tile, t1base: int, t2: Tile, t2base: int) -> int:
    """Algorithm 2 with the Numba kernel (chunks rendered by the RenderChunks kernel)."""
    patterns = ChunkPatterns()
    p1 = patterns.pattern(t1.shape, t1.strides, t1.itemsize)
    p2 = patterns.pattern(t2.shape, t2.strides, t2.itemsize)
    ptr, off, size = patterns.arrays()
    return int(kernels.collision_size_kernel(ptr, off, size, p1, t1base + t1.start, t1.span,
                                     p2, t2base + t2.start, t2.span))


def collision_skip(t1: Tile, t1base: int, t2: Tile, t2base: int, budget: int = SEARCH_NODES) -> int:
    """``collision_skip_kernel`` on two tiles (``budget`` 0: the chunk sweep only): one of
    ``collision_skips_reference``, 0 when that is empty."""
    patterns = ChunkPatterns()
    p1 = patterns.pattern(t1.shape, t1.strides, t1.itemsize)
    p2 = patterns.pattern(t2.shape, t2.strides, t2.itemsize)
    return int(kernels.collision_skip_kernel(*patterns.kernel_arrays(), p1, t1base + t1.start, t1.span,
                                    p2, t2base + t2.start, t2.span, int(budget), kernels.lattice_work()))


def tensor_allocate(tiles: list[Tile], peers: list[tuple[Tile, int]], addr: int, alignment: int = 1,
                    budget: int = SEARCH_NODES) -> int:
    """Algorithm 1 with the Numba kernel; same arguments and result as the reference (``budget``:
    lattice search nodes before the chunk sweep, 0 = always sweep)."""
    patterns = ChunkPatterns()
    every = list(tiles) + [p for p, _ in peers]
    bases = [0] * len(tiles) + [b for _, b in peers]
    arrays = TileArrays.build(every, bases, patterns)
    cand = np.arange(len(tiles), dtype=np.int64)
    peer_idx = np.arange(len(tiles), len(every), dtype=np.int64)
    peer_idx = peer_idx[np.argsort(arrays.first[peer_idx], kind="stable")]
    return arrays.allocate(patterns, cand, peer_idx, addr, alignment, budget)


@dataclass
class TileArrays:
    """Per-tile arrays the kernels read: pattern, byte shift in its tensor, span, lifetime, base."""

    pattern: np.ndarray
    shift: np.ndarray
    span: np.ndarray
    first: np.ndarray
    last: np.ndarray
    base: np.ndarray

    @classmethod
    def build(cls, tiles: list[Tile], bases, patterns: ChunkPatterns) -> "TileArrays":
        i64 = lambda xs: np.asarray(xs, dtype=np.int64).reshape(-1)  # noqa: E731
        return cls(pattern=i64([patterns.pattern(t.shape, t.strides, t.itemsize) for t in tiles]),
                   shift=i64([t.start for t in tiles]), span=i64([t.span for t in tiles]),
                   first=i64([t.first for t in tiles]), last=i64([t.last for t in tiles]), base=i64(bases))

    def allocate(self, patterns: ChunkPatterns, cand: np.ndarray, peers: np.ndarray, addr: int,
                 alignment: int, budget: int = SEARCH_NODES) -> int:
        return int(kernels.tensor_allocate_kernel(*patterns.kernel_arrays(), self.pattern, self.shift, self.span,
                                          self.first, self.last, self.base, cand, peers, int(addr), int(alignment),
                                          int(budget)))
