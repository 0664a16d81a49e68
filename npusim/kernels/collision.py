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
from numba import njit

from npusim.kernels.render_chunks import render_chunks_reference


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


# --------------------------------------------------------------------------------------------
# Numba kernels on chunk patterns
# --------------------------------------------------------------------------------------------

@njit(cache=True)
def _collide(pat_ptr, pat_off, pat_size, p1, a1, p2, a2):
    """CollisionSize of pattern p1 at byte address a1 against pattern p2 at a2."""
    i, e1 = pat_ptr[p1], pat_ptr[p1 + 1]
    j, e2 = pat_ptr[p2], pat_ptr[p2 + 1]
    while i < e1 and j < e2:
        t1start = a1 + pat_off[i]
        t1end = t1start + pat_size[i]
        t2start = a2 + pat_off[j]
        t2end = t2start + pat_size[j]
        if t1end <= t2start:
            i += 1
        elif t2end <= t1start:
            j += 1
        else:
            return t1end - t2start
    return 0


@njit(cache=True)
def collision_size_kernel(pat_ptr, pat_off, pat_size, p1, a1, span1, p2, a2, span2):
    """Algorithm 2 on patterns: spans first (lines 1-2), then the chunk scan."""
    if a1 + span1 <= a2 or a2 + span2 <= a1:
        return 0
    return _collide(pat_ptr, pat_off, pat_size, p1, a1, p2, a2)


# --------------------------------------------------------------------------------------------
# A wide skip for a colliding pair (what the allocator shifts by)
# --------------------------------------------------------------------------------------------
#
# Algorithm 2 returns the shift of the *first* overlapping chunk pair, a chunk's worth at a
# time: a tensor crossing a column-tiled peer region moves up one chunk (then one alignment
# step) per round, thousands of rounds of ~8,000-chunk scans each. Any overlapping pair's
# ``t1end - t2start`` is as valid a shift (the pair still overlaps at every address it skips),
# so the allocator takes one found without walking the chunks when both patterns are
# lattices: the chunks of a strided view are ``sum_k i_k * s_k`` (0 <= i_k < n_k) of one size
# z, and chunks at p (size z1) and q (size z2) overlap iff ``p - q`` lies in ``(-z1, z2)``.
# The differences of two lattices form one lattice (a generalized arithmetic progression:
# each level of the first with indices 0..n-1, each level of the second with -(n-1)..0, equal
# strides summed into one level, a stride k times another folded into it when that one
# takes >= k consecutive values), so a colliding pair is an element of it inside an
# interval: a depth-first search over the levels, largest stride and index first, returning
# the first element found (the largest, for nested strides: each stride beyond the reach of
# the levels below, the usual case, where it visits one or two values per level). Patterns
# that are not lattices, or a search that exceeds its node budget (no collision is proved
# by exhausting it), take the chunk sweep, which returns the largest skip.

LATTICE_LEVELS = 8  # at most this many strided levels per pattern (more: the chunk sweep)
SEARCH_NODES = 2048  # search nodes before falling back to the chunk sweep (measured: bench_taa)
_NONE = -(1 << 62)


def lattice_of(shape, strides, itemsize: int, offsets: np.ndarray, sizes: np.ndarray):
    """(chunk bytes, [(count, byte stride)] largest stride first) when the rendered chunks
    ``offsets``/``sizes`` are exactly that lattice (from 0), else None. Levels that continue
    the one below (stride = count * stride below) are merged into it."""
    shape, strides = list(shape), list(strides)
    first, expected = len(shape), 1  # first axis of the contiguous block, as RenderChunks finds it
    for k in range(len(shape) - 1, -1, -1):
        if shape[k] != 1 and strides[k] != expected:
            break
        expected *= shape[k]
        first = k
    block = 1
    for d in shape[first:]:
        block *= d
    levels: list[list[int]] = []
    for n, s in zip(shape[:first], strides[:first]):
        if n == 1:
            continue
        if levels and levels[-1][1] == n * s * itemsize:  # the level above continues this one
            levels[-1] = [levels[-1][0] * n, s * itemsize]
        else:
            levels.append([n, s * itemsize])
    merged: list[list[int]] = []
    for n, s in levels:  # a level may also continue the one below it after the pass above
        if merged and merged[-1][1] == n * s:
            merged[-1] = [merged[-1][0] * n, s]
        else:
            merged.append([n, s])
    z = block * itemsize
    if len(merged) > LATTICE_LEVELS or any(s <= 0 for _, s in merged) or len(offsets) == 0:
        return None
    grid = np.zeros(1, dtype=np.int64)
    for n, s in merged:
        grid = (grid[:, None] + np.arange(n, dtype=np.int64)[None, :] * s).reshape(-1)
    if grid.shape != offsets.shape or not np.array_equal(grid, offsets) or np.any(sizes != z):
        return None
    if np.any(offsets[1:] < offsets[:-1] + z):  # the sweep's order: increasing, disjoint chunks
        return None
    return z, [(int(n), int(s)) for n, s in merged]


@njit(cache=True)
def lattice_work():
    """Scratch rows for the lattice search (strides, ranges, bounds, the search's stack)."""
    return np.zeros((10, 2 * LATTICE_LEVELS + 1), dtype=np.int64)


@njit(cache=True)
def _sweep_max(pat_ptr, pat_off, pat_size, p1, a1, p2, a2):
    """Largest ``t1end - t2start`` over every overlapping chunk pair (0: none), by one merge
    of the sorted chunk lists that visits each overlapping pair."""
    i, e1 = pat_ptr[p1], pat_ptr[p1 + 1]
    j, e2 = pat_ptr[p2], pat_ptr[p2 + 1]
    best = 0
    while i < e1 and j < e2:
        t1start = a1 + pat_off[i]
        t1end = t1start + pat_size[i]
        t2start = a2 + pat_off[j]
        t2end = t2start + pat_size[j]
        if t1end <= t2start:
            i += 1
        elif t2end <= t1start:
            j += 1
        else:
            if t1end - t2start > best:
                best = t1end - t2start
            if t1end <= t2end:
                i += 1
            else:
                j += 1
    return best


@njit(cache=True)
def _lattice_element(work, nd, lo, hi, budget):
    """The first ``sum_k m_k * ds[k]`` (m_k in [r0[k], r1[k]]) found inside [lo, hi], each
    level's m tried from the top: (value or _NONE, nodes visited). ``rmin[k]``/``rmax[k]``
    bound the levels after k; the search is iterative (Numba's cache cannot reload
    recursion) and stops past ``budget`` nodes. ``work``'s rows are the arrays (no allocation
    per call)."""
    ds, r0, r1, rmin, rmax = work[0], work[1], work[2], work[3], work[4]
    m_lo, m_cur, lo_k, hi_k, acc = work[5], work[6], work[7], work[8], work[9]
    acc[0] = 0  # acc[k]: the sum of the m * ds chosen above level k
    nodes = 0
    k = 0
    lo_k[0], hi_k[0] = lo, hi
    entering = True
    while k >= 0:
        if entering:
            entering = False
            if k == nd:  # every level chosen: a difference, inside [lo, hi] by the bounds above
                if lo_k[k] <= 0 <= hi_k[k]:
                    return acc[k], nodes
                k -= 1
                if k >= 0:
                    m_cur[k] -= 1
                continue
            s = ds[k]
            m_lo[k] = max(r0[k], -((rmax[k] - lo_k[k]) // s))  # ceil((lo - rmax) / s); // floors
            m_cur[k] = min(r1[k], (hi_k[k] - rmin[k]) // s)
        s = ds[k]
        m = m_cur[k]
        if m < m_lo[k]:
            k -= 1  # this level is done: back to the one above
            if k >= 0:
                m_cur[k] -= 1
            continue
        nodes += 1
        if nodes > budget:
            return _NONE, nodes
        lo_k[k + 1], hi_k[k + 1] = lo_k[k] - m * s, hi_k[k] - m * s
        acc[k + 1] = acc[k] + m * s
        k += 1
        entering = True
    return _NONE, nodes


@njit(cache=True)
def _lattice_skip(lat_z, lat_nl, lat_n, lat_s, p1, a1, p2, a2, budget, work):
    """``collision_skip`` of two lattice patterns; -1 when the search ran out of budget."""
    z1, z2 = lat_z[p1], lat_z[p2]
    nd = 0
    ds, r0, r1, rmin, rmax = work[0], work[1], work[2], work[3], work[4]
    for side in range(2):
        p = p1 if side == 0 else p2
        for lv in range(lat_nl[p]):
            n, s = lat_n[p, lv], lat_s[p, lv]
            lo, hi = (0, n - 1) if side == 0 else (1 - n, 0)
            k = 0
            while k < nd and ds[k] != s:
                k += 1
            if k < nd:  # the same stride on both sides: one level, ranges added
                r0[k] += lo
                r1[k] += hi
            else:
                ds[nd], r0[nd], r1[nd] = s, lo, hi
                nd += 1
    for k in range(1, nd):  # largest stride first (insertion sort, a handful of levels)
        q = k
        while q > 0 and ds[q - 1] < ds[q]:
            ds[q - 1], ds[q] = ds[q], ds[q - 1]
            r0[q - 1], r0[q] = r0[q], r0[q - 1]
            r1[q - 1], r1[q] = r1[q], r1[q - 1]
            q -= 1
    # A level whose stride is k times a lower one's, when the lower level takes >= k consecutive
    # values, adds nothing but reach: k*m_a + m_b is every integer of one range. Fold it in.
    folded = True
    while folded:
        folded = False
        for a in range(nd):
            for b in range(a + 1, nd):
                k = ds[a] // ds[b]
                if ds[a] % ds[b] == 0 and r1[b] - r0[b] + 1 >= k:
                    r0[b] += k * r0[a]
                    r1[b] += k * r1[a]
                    for q in range(a, nd - 1):
                        ds[q], r0[q], r1[q] = ds[q + 1], r0[q + 1], r1[q + 1]
                    nd -= 1
                    folded = True
                    break
            if folded:
                break
    if nd > 0:
        rmin[nd - 1] = rmax[nd - 1] = 0
    for k in range(nd - 1, 0, -1):  # rmin[k]: the levels after k
        rmin[k - 1] = rmin[k] + r0[k] * ds[k]
        rmax[k - 1] = rmax[k] + r1[k] * ds[k]
    # Chunks p = a1 + e1 and q = a2 + e2 overlap iff p - q in (-z1, z2): e = e1 - e2 in [lo, hi].
    diff = a1 - a2
    e, nodes = _lattice_element(work, nd, -z1 - diff + 1, z2 - diff - 1, budget)
    if nodes > budget:
        return -1
    return 0 if e == _NONE else diff + e + z1


@njit(cache=True)
def collision_skip_kernel(pat_ptr, pat_off, pat_size, lat_z, lat_nl, lat_n, lat_s, p1, a1, span1, p2, a2, span2,
                         budget, work):
    """A ``t1end - t2start`` of an overlapping chunk pair of pattern p1 at a1 and p2 at a2 (0:
    they share no byte): spans first, then the lattice search, else the sweep (the largest)."""
    if a1 + span1 <= a2 or a2 + span2 <= a1:
        return 0
    if lat_z[p1] > 0 and lat_z[p2] > 0:
        found = _lattice_skip(lat_z, lat_nl, lat_n, lat_s, p1, a1, p2, a2, budget, work)
        if found >= 0:
            return found
    return _sweep_max(pat_ptr, pat_off, pat_size, p1, a1, p2, a2)


@njit(cache=True)
def tensor_allocate_kernel(pat_ptr, pat_off, pat_size, lat_z, lat_nl, lat_n, lat_s, tile_pat, tile_shift,
                           tile_span, tile_first, tile_last, tile_base, cand, peers, addr, alignment, budget):
    """Algorithm 1. ``cand``: tiles of the tensor being placed; ``peers``: placed tiles sorted by
    first time (their tensor's address in ``tile_base``). Returns the address found.

    Every shift skips only addresses where a colliding pair of chunks still overlaps (the
    candidate chunk moves up to the end of the peer's), so the loop ends at the lowest
    address >= the start (aligned, if it moved) where no tile collides, whichever collision
    each round finds: the reference's first, or here the widest (``collision_skip_kernel``,
    fewer rounds), give the same address. The kernel keeps the (tile, peer) pairs whose
    lifetimes overlap in a linked list and, after a shift, moves the pair that collided to the
    front (O(1)) before starting over: pairs that collided once tend to collide again, so
    fewer clean pairs are re-checked.
    """
    n_peers = peers.shape[0]
    peer_first = np.empty(n_peers, dtype=np.int64)
    for k in range(n_peers):
        peer_first[k] = tile_first[peers[k]]
    # Peers that can overlap each candidate tile in time: first <= its last (a prefix).
    reach = np.searchsorted(peer_first, tile_last[cand], side="right")
    n = 0
    for ci in range(cand.shape[0]):
        for k in range(reach[ci]):
            if tile_last[peers[k]] >= tile_first[cand[ci]]:  # lifetimes overlap
                n += 1
    pair_tile = np.empty(n, dtype=np.int64)
    pair_peer = np.empty(n, dtype=np.int64)
    n = 0
    for ci in range(cand.shape[0]):
        for k in range(reach[ci]):
            if tile_last[peers[k]] >= tile_first[cand[ci]]:
                pair_tile[n] = cand[ci]
                pair_peer[n] = peers[k]
                n += 1
    work = lattice_work()
    following = np.arange(1, n + 1, dtype=np.int64)  # the pairs as a linked list (n: the end)
    head, before, p = 0, -1, 0
    while p < n:
        c, j = pair_tile[p], pair_peer[p]
        overlap = collision_skip_kernel(pat_ptr, pat_off, pat_size, lat_z, lat_nl, lat_n, lat_s, tile_pat[j],
                                       tile_base[j] + tile_shift[j], tile_span[j], tile_pat[c],
                                       addr + tile_shift[c], tile_span[c], budget, work)
        if overlap == 0:
            before, p = p, following[p]
            continue
        addr = ((addr + overlap + alignment - 1) // alignment) * alignment
        if before >= 0:  # move to front in O(1), start over
            following[before] = following[p]
            following[p] = head
            head = p
        before, p = -1, head
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
            from npusim.kernels.render_chunks import render_chunks

            offsets, sizes = render_chunks(key[0], key[1], 0, key[2])
            p = self._index[key] = len(self._offsets)
            self._offsets.append(offsets)
            self._sizes.append(sizes)
            self._lattices.append(lattice_of(key[0], key[1], key[2], offsets, sizes))
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
    return int(collision_size_kernel(ptr, off, size, p1, t1base + t1.start, t1.span,
                                     p2, t2base + t2.start, t2.span))


def collision_skip(t1: Tile, t1base: int, t2: Tile, t2base: int, budget: int = SEARCH_NODES) -> int:
    """``collision_skip_kernel`` on two tiles (``budget`` 0: the chunk sweep only): one of
    ``collision_skips_reference``, 0 when that is empty."""
    patterns = ChunkPatterns()
    p1 = patterns.pattern(t1.shape, t1.strides, t1.itemsize)
    p2 = patterns.pattern(t2.shape, t2.strides, t2.itemsize)
    return int(collision_skip_kernel(*patterns.kernel_arrays(), p1, t1base + t1.start, t1.span,
                                    p2, t2base + t2.start, t2.span, int(budget), lattice_work()))


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
        return int(tensor_allocate_kernel(*patterns.kernel_arrays(), self.pattern, self.shift, self.span,
                                          self.first, self.last, self.base, cand, peers, int(addr), int(alignment),
                                          int(budget)))
