"""The Numba kernels of tile collisions (``planners.offchip.collision``): collision size and
skip on chunk patterns (CSR arrays of the chunks of one shape, strides and itemsize), the
strided lattices that let a skip jump over many chunks at once, and the tensor-allocate loop.
Each is checked against the plain-Python references in ``collision`` (tests/test_taa.py)."""

from __future__ import annotations

import numpy as np
from numba import njit

from npusim.kernels.render_chunks import contiguous_block
from planners.offchip.collision.limits import LATTICE_LEVELS, SEARCH_NODES  # noqa: F401 (re-exported)


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

_NONE = -(1 << 62)


def lattice_of(shape, strides, itemsize: int, offsets: np.ndarray, sizes: np.ndarray):
    """(chunk bytes, [(count, byte stride)] largest stride first) when the rendered chunks
    ``offsets``/``sizes`` are exactly that lattice (from 0), else None. Levels that continue
    the one below (stride = count * stride below) are merged into it."""
    shape, strides = list(shape), list(strides)
    first, block = contiguous_block(shape, strides)  # the contiguous block, as RenderChunks finds it
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
