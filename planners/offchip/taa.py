"""The Tile-Aware Allocator (Kvochko et al., "Off-Chip Memory Allocation for Neural Processing
Units", IEEE Access 2024): DRAM offsets for whole tensors, checked tile by tile, so a tile's
bytes are reused as soon as that tile is dead even while the rest of its tensor is alive.

1. Sort the buffers by one of the paper's three heuristics: ``size`` (largest first),
   ``lifetime`` (longest first, from the first tile's birth to the last tile's death) or
   ``peers`` (most peers first: for each tile, the tiles of other tensors whose lifetimes
   overlap it, counted with two binary searches in the tiles sorted by first and by last time).
2. For each buffer T: the first gap large enough for T among the placed buffers whose tensor
   lifetimes (all tiles live at once) overlap T's (Algorithm 1, line 2); then TensorAllocate
   (Algorithm 1, Numba: ``planners.offchip.collision``) checks every tile of T against every
   placed peer tile whose lifetime overlaps it with CollisionSize (Algorithm 2) over
   RenderChunks chunks (Algorithm 3, rendered once per tile shape), shifting T's address by
   the overlap found until nothing collides. The kernel shifts by a wider overlap when it
   finds one (a lattice search on the chunk patterns, ``collision_skip_kernel``): fewer
   rounds, the same address (the lowest collision-free one from the start).

Peers are found with sorted arrays: the tiles sorted by first time, a binary search for the
prefix starting no later than T's last time, filtered to those ending no earlier than T's
first time and already placed (what Algorithm 1 scans).

``taa`` runs one heuristic (``size`` unless told), or with ``sort="best"`` all three, keeping the smallest arena
(ties: the order size, lifetime, peers).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from npusim.errors import PlanningError
from planners.offchip.collision import SEARCH_NODES, ChunkPatterns, TileArrays, align_up
from planners.offchip.lifetimes import Buffer

SORTS = ("size", "lifetime", "peers")


@dataclass(frozen=True)
class ArenaResult:
    offsets: dict  # buffer name -> byte offset
    total: int  # arena bytes: max(offset + size)
    algorithm: str
    seconds: float = 0.0


class TileIndex:
    """Every tile of the buffers in flat arrays, grouped by buffer, plus lifetime searches."""

    def __init__(self, buffers: list[Buffer], patterns: ChunkPatterns | None = None):
        self.buffers = buffers
        self.patterns = patterns or ChunkPatterns()
        tiles = [t for b in buffers for t in b.tiles]
        self.arrays = TileArrays.build(tiles, [0] * len(tiles), self.patterns)
        counts = [len(b.tiles) for b in buffers]
        self.ptr = np.zeros(len(buffers) + 1, dtype=np.int64)
        self.ptr[1:] = np.cumsum(counts)
        self.owner = np.repeat(np.arange(len(buffers), dtype=np.int64), counts)
        self.by_first = np.argsort(self.arrays.first, kind="stable")
        self.first_sorted = self.arrays.first[self.by_first]
        self.last_sorted = np.sort(self.arrays.last)
        self.patterns.arrays()  # render every pattern once, before the timed loops

    def tiles_of(self, b: int) -> np.ndarray:
        return np.arange(self.ptr[b], self.ptr[b + 1], dtype=np.int64)

    def overlapping_count(self, first: np.ndarray, last: np.ndarray) -> np.ndarray:
        """How many tiles' lifetimes overlap each [first, last] (O(log n) each)."""
        return (np.searchsorted(self.first_sorted, last, side="right")
                - np.searchsorted(self.last_sorted, first, side="left"))

    def peer_counts(self) -> np.ndarray:
        """Per buffer: over its tiles, the tiles of other buffers whose lifetimes overlap them."""
        a = self.arrays
        total = self.overlapping_count(a.first, a.last)
        counts = np.zeros(len(self.buffers), dtype=np.int64)
        for b in range(len(self.buffers)):
            lo, hi = self.ptr[b], self.ptr[b + 1]
            f, l = a.first[lo:hi], a.last[lo:hi]
            own = np.searchsorted(np.sort(f), l, side="right") - np.searchsorted(np.sort(l), f, side="left")
            counts[b] = int((total[lo:hi] - own).sum())
        return counts

    def placed_peers(self, first: int, last: int, placed: np.ndarray) -> np.ndarray:
        """Placed tiles whose lifetimes overlap [first, last], sorted by first time."""
        k = np.searchsorted(self.first_sorted, last, side="right")
        idx = self.by_first[:k]
        return idx[(self.arrays.last[idx] >= first) & placed[self.owner[idx]]]


def sort_order(index: TileIndex, sort: str) -> list[int]:
    buffers = index.buffers
    if sort == "size":
        key = lambda b: (-buffers[b].size, -(buffers[b].last - buffers[b].first), b)  # noqa: E731
    elif sort == "lifetime":
        key = lambda b: (-(buffers[b].last - buffers[b].first), -buffers[b].size, b)  # noqa: E731
    elif sort == "peers":
        peers = index.peer_counts()
        key = lambda b: (-int(peers[b]), -buffers[b].size, b)  # noqa: E731
    else:
        raise PlanningError(f"taa: sort {sort!r}, expected one of {SORTS} or 'best'")
    return sorted(range(len(buffers)), key=key)


def first_fit(size: int, taken: list[tuple[int, int]], alignment: int) -> int:
    """The lowest aligned address whose [addr, addr + size) misses every taken range: walking
    the ranges by (lo, hi), the candidate is the highest aligned end so far (0 before any), and
    the first range starting ``size`` or more above it ends the walk (``first_fit_reference``;
    here as a running maximum over arrays)."""
    if len(taken) < 16:
        return first_fit_reference(size, taken, alignment)
    ranges = np.array(taken, dtype=np.int64)
    ranges = ranges[np.lexsort((ranges[:, 1], ranges[:, 0]))]
    ends = -(-ranges[:, 1] // alignment) * alignment
    before = np.zeros(len(ranges) + 1, dtype=np.int64)
    np.maximum.accumulate(ends, out=before[1:])
    np.maximum(before, 0, out=before)
    fits = np.flatnonzero(ranges[:, 0] - before[:-1] >= size)
    return int(before[fits[0]] if fits.size else before[-1])


def first_fit_reference(size: int, taken: list[tuple[int, int]], alignment: int) -> int:
    """``first_fit`` as a plain walk over the sorted ranges."""
    addr = 0
    for lo, hi in sorted(taken):
        if lo - addr >= size:
            break
        addr = max(addr, align_up(hi, alignment))
    return addr


def taa_with(index: TileIndex, sort: str, alignment: int, search_nodes: int = SEARCH_NODES) -> ArenaResult:
    start = time.perf_counter()
    buffers = index.buffers
    arrays = index.arrays
    arrays.base[:] = 0
    placed = np.zeros(len(buffers), dtype=bool)
    offsets: dict[str, int] = {}
    # placed tensor lifetimes and addresses (first, last, lo, hi), as arrays: the ranges a buffer
    # must miss are a mask over them, not a Python scan of every placed buffer
    whole = np.zeros((4, len(buffers)), dtype=np.int64)
    n_whole = 0
    for b in sort_order(index, sort):
        buf = buffers[b]
        life = buf.tensor_lifetime
        taken = []
        if life is not None and n_whole:
            f, l, lo, hi = whole[:, :n_whole]
            meets = (f <= life[1]) & (life[0] <= l)
            taken = list(zip(lo[meets].tolist(), hi[meets].tolist()))
        addr = first_fit(buf.size, taken, alignment)
        peers = index.placed_peers(buf.first, buf.last, placed)
        cand = index.tiles_of(b)
        if peers.size:
            addr = arrays.allocate(index.patterns, cand, peers, addr, alignment, search_nodes)
        arrays.base[cand] = addr
        placed[b] = True
        offsets[buf.name] = addr
        if life is not None:
            whole[:, n_whole] = (life[0], life[1], addr, addr + buf.size)
            n_whole += 1
    total = max((offsets[b.name] + b.size for b in buffers), default=0)
    return ArenaResult(offsets, total, f"taa:{sort}", time.perf_counter() - start)


def taa(buffers: list[Buffer], alignment: int = 1, sort: str = "size",
        search_nodes: int = SEARCH_NODES) -> ArenaResult:
    """Offsets for ``buffers`` (none of them weights) by the Tile-Aware Allocator
    (``search_nodes``: the kernel's lattice search budget, 0 = chunk sweeps only; same offsets)."""
    start = time.perf_counter()
    index = TileIndex(buffers)
    sorts = SORTS if sort == "best" else (sort,)
    best = None
    for s in sorts:
        result = taa_with(index, s, alignment, search_nodes)
        if best is None or result.total < best.total:
            best = result
    return ArenaResult(best.offsets, best.total, best.algorithm, time.perf_counter() - start)
