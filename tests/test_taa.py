"""The Tile-Aware Allocator's algorithms: the paper's worked examples (Section III-C, Table 3),
and the Numba kernels against their pure-Python references."""

from __future__ import annotations

import random

import numpy as np
import pytest

from npusim.errors import PlanningError
from planners.offchip.collision import (
    SEARCH_NODES, Tile, collision_size, collision_size_reference, collision_skip, collision_skips_reference,
    tensor_allocate, tensor_allocate_reference,
)
from planners.offchip.collision.kernels import lattice_of
from npusim.kernels.render_chunks import render_chunks, render_chunks_reference
from npusim.sim.dram_memory import first_overlap, first_overlap_reference
from planners.offchip.baselines import naive, offsets, shared_objects_best
from planners.offchip.lifetimes import Buffer
from planners.offchip.taa import SORTS, TileIndex, taa

CHW = (16384, 128, 1)  # strides of a 4x128x128 tensor


# -- Section III-C.1: RenderChunks -------------------------------------------------------------
def test_render_chunks_worked_example():
    expected = ([0, 16384, 32768, 49152], [8192] * 4)
    assert render_chunks_reference((4, 64, 128), CHW) == expected
    offsets, sizes = render_chunks((4, 64, 128), CHW)
    assert (offsets.tolist(), sizes.tolist()) == expected


# -- Section III-C.2: CollisionSize ------------------------------------------------------------
def test_collision_size_worked_example():
    t1 = t2 = Tile((4, 64, 128), CHW)
    assert t1.span == 57344  # the paper's tile span
    assert collision_size_reference(t1, 0, t2, 128) == 8064
    assert collision_size(t1, 0, t2, 128) == 8064


def test_collision_size_is_zero_when_tiles_interleave_without_touching():
    top, bottom = Tile((4, 64, 128), CHW, 0), Tile((4, 64, 128), CHW, 64 * 128)
    for fn in (collision_size_reference, collision_size):
        assert fn(top, 0, bottom, 0) == 0  # chunks alternate: [0, 8192) then [8192, 16384) ...
        # 64 bytes up, bottom's first chunk [8256, 16448) meets top's second [16384, 24576): 24576 - 8256
        assert fn(top, 0, bottom, 64) == 16320


def _random_tile(rng: random.Random, first: int = 0, last: int = 0) -> Tile:
    base = [rng.randint(1, 6) for _ in range(rng.randint(1, 3))]
    strides = [1] * len(base)
    for k in range(len(base) - 2, -1, -1):
        strides[k] = strides[k + 1] * base[k + 1]
    shape = [rng.randint(1, n) for n in base]
    offset = sum(rng.randint(0, n - m) * s for n, m, s in zip(base, shape, strides))
    return Tile(tuple(shape), tuple(strides), offset, rng.choice((1, 2, 4)), first, last)


def _bytes(tile: Tile, base: int) -> set[int]:
    offsets, sizes = render_chunks_reference(tile.shape, tile.strides, tile.offset, tile.itemsize)
    return {base + o + k for o, s in zip(offsets, sizes) for k in range(s)}


def test_collision_size_kernel_matches_reference_and_brute_force():
    rng = random.Random(7)
    for _ in range(400):
        t1, t2 = _random_tile(rng), _random_tile(rng)
        b1, b2 = rng.randint(0, 200), rng.randint(0, 200)
        ref = collision_size_reference(t1, b1, t2, b2)
        assert collision_size(t1, b1, t2, b2) == ref
        assert (ref > 0) == bool(_bytes(t1, b1) & _bytes(t2, b2))


# -- The widest skip (what the allocator shifts by): lattice search and chunk sweep ------------------
def _view_tile(rng: random.Random, layout=None, first: int = 0, last: int = 0) -> Tile:
    """A sub-box of a tensor of up to 4 dims (``layout``: its dims, shared between tiles of one
    tensor), often with several strided levels, like the traces' channel-major row and column tiles."""
    dims = layout or [rng.randint(1, 7) for _ in range(rng.randint(1, 4))]
    strides = [1] * len(dims)
    for k in range(len(dims) - 2, -1, -1):
        strides[k] = strides[k + 1] * dims[k + 1]
    shape = [rng.randint(1, n) for n in dims]
    offset = sum(rng.randint(0, n - m) * st for n, m, st in zip(dims, shape, strides))
    return Tile(tuple(shape), tuple(strides), offset, rng.choice((1, 2)), first, last)


def _tile_pair(rng: random.Random):
    if rng.random() < 0.5:  # two tiles of one layout (equal strides: merged levels)
        layout = [rng.randint(1, 7) for _ in range(rng.randint(1, 4))]
        return _view_tile(rng, layout), _view_tile(rng, layout)
    return _view_tile(rng), _view_tile(rng)


def test_lattice_of_reproduces_the_rendered_chunks():
    rng = random.Random(3)
    lattices = 0
    for _ in range(300):
        t = _view_tile(rng)
        offsets, sizes = render_chunks(t.shape, t.strides, 0, t.itemsize)
        lattice = lattice_of(t.shape, t.strides, t.itemsize, offsets, sizes)
        if lattice is None:
            continue
        lattices += 1
        z, levels = lattice
        grid = [0]
        for n, st in levels:
            grid = [g + i * st for g in grid for i in range(n)]
        assert grid == offsets.tolist() and set(sizes.tolist()) == {z}
        assert all(a[1] > b[1] for a, b in zip(levels, levels[1:]))  # largest stride first
    assert lattices > 250  # views of dense tensors are lattices
    # A trace's column tile: 144 channels x 56 rows x 7 bytes of a 56x56 map, one level (rows
    # continue across channels); a row tile of a 3-D map keeps its levels.
    assert lattice_of((1, 144, 56, 7), (451584, 3136, 56, 1), 1,
                      *render_chunks((1, 144, 56, 7), (451584, 3136, 56, 1))) == (7, [(8064, 56)])
    r2plus1d = (1, 144, 8, 7, 7), (28901376, 200704, 12544, 112, 1)  # 8 of 16 frames, 7 rows, 7 columns
    assert lattice_of(*r2plus1d, 1, *render_chunks(*r2plus1d)) == (7, [(144, 200704), (8, 12544), (7, 112)])
    # Chunks that do not form one lattice from 0 (abutting blocks merged into longer ones).
    assert lattice_of((2, 3), (3, 1), 1, np.array([0, 5]), np.array([3, 3])) is None


def test_collision_skip_kernel_matches_reference_and_brute_force():
    rng = random.Random(13)
    for _ in range(500):
        t1, t2 = _tile_pair(rng)
        b1, b2 = rng.randint(0, 120), rng.randint(0, 120)
        skips = collision_skips_reference(t1, b1, t2, b2)
        # default budget (lattice search), 1 node (the sweep after a failed search), 0 (sweep only)
        got = [collision_skip(t1, b1, t2, b2, budget) for budget in (SEARCH_NODES, 1, 0)]
        assert got[2] == max(skips, default=0)  # the sweep: the largest
        assert all(g in skips for g in got) if skips else got == [0, 0, 0]
        bytes1 = _bytes(t1, b1)
        assert bool(skips) == bool(bytes1 & _bytes(t2, b2))
        if skips:  # a valid skip: t2 still collides at every shift it jumps over
            assert collision_size_reference(t1, b1, t2, b2) in skips
            assert all(bytes1 & _bytes(t2, b2 + d) for d in range(got[0]))


def test_collision_skip_on_lattices_with_large_ranges():
    """Long lattices (hundreds of chunks), where the search visits a few values per level."""
    rng = random.Random(17)
    for _ in range(60):
        layout = [rng.randint(8, 40), rng.randint(2, 12), rng.randint(4, 16)]
        same = rng.random() < 0.6
        t1 = _view_tile(rng, layout)
        t2 = _view_tile(rng, layout if same else [rng.randint(8, 40), rng.randint(2, 12), rng.randint(4, 16)])
        b1, b2 = rng.randint(0, 400), rng.randint(0, 400)
        skips = collision_skips_reference(t1, b1, t2, b2)
        assert collision_skip(t1, b1, t2, b2, 0) == max(skips, default=0)
        got = collision_skip(t1, b1, t2, b2)
        assert got in skips if skips else got == 0


# -- Section III-C.3: TensorAllocate, a unary element-wise layer --------------------------------
def _unary_example(tile_shape, n_tiles, offset_step):
    """Input I (tiles i_k live [0, k]) is placed at 0; output O's tiles o_k are written at
    step k + 1 and live to 5. The paper's text says 4x64x128 tiles but gives tile offsets of
    16384 (one channel): both readings are checked."""
    inputs = [Tile(tile_shape, CHW, k * offset_step, 1, 0, k + 1) for k in range(n_tiles)]
    outputs = [Tile(tile_shape, CHW, k * offset_step, 1, k + 2, 5) for k in range(n_tiles)]
    return inputs, outputs


@pytest.mark.parametrize("tile_shape, n_tiles, step", [((1, 128, 128), 4, 16384), ((4, 64, 128), 2, 64 * 128)])
def test_tensor_allocate_unary_example_places_output_at_zero(tile_shape, n_tiles, step):
    inputs, outputs = _unary_example(tile_shape, n_tiles, step)
    peers = [(t, 0) for t in inputs]
    assert tensor_allocate_reference(outputs, peers, 0) == 0
    assert tensor_allocate(outputs, peers, 0) == 0
    # Through the allocator: I and O share offset 0, an arena of one tensor.
    result = taa([Buffer("I", 65536, False, inputs), Buffer("O", 65536, False, outputs)], 64, "size")
    assert result.offsets == {"I": 0, "O": 0} and result.total == 65536


def test_tensor_allocate_shifts_by_the_overlap_found():
    # O's first tile is live while I's first tile is: it must move past it (8192 up, one chunk).
    i1 = Tile((4, 64, 128), CHW, 0, 1, 0, 3)
    o1 = Tile((4, 64, 128), CHW, 0, 1, 2, 5)
    assert tensor_allocate_reference([o1], [(i1, 0)], 0) == 8192
    assert tensor_allocate([o1], [(i1, 0)], 0) == 8192
    assert tensor_allocate([o1], [(i1, 0)], 128) == 8192  # the paper's 128 + 8064
    assert tensor_allocate([o1], [(i1, 0)], 100, alignment=64) == 8192  # 100 + 8092
    # A peer at an unaligned base: every shift is rounded up to the alignment.
    addr = tensor_allocate_reference([o1], [(i1, 10)], 0, 64)
    assert addr % 64 == 0 and addr > 8202 and tensor_allocate([o1], [(i1, 10)], 0, 64) == addr


def test_tensor_allocate_kernel_matches_reference_and_leaves_no_collision():
    rng = random.Random(11)
    for _ in range(150):
        tiles = [_random_tile(rng, a, a + rng.randint(0, 4)) for a in (rng.randint(0, 8) for _ in range(rng.randint(1, 4)))]
        peers = [(_random_tile(rng, a, a + rng.randint(0, 4)), rng.randint(0, 300))
                 for a in (rng.randint(0, 8) for _ in range(rng.randint(0, 6)))]
        start, align = rng.randint(0, 50), rng.choice((1, 4, 16))
        addr = tensor_allocate_reference(tiles, peers, start, align)
        assert tensor_allocate(tiles, peers, start, align) == addr == tensor_allocate(tiles, peers, start, align, 0)
        assert addr >= start and (addr == start or addr % align == 0)
        for t in tiles:
            for p, base in peers:
                if p.first <= t.last and t.first <= p.last:
                    assert not _bytes(t, addr) & _bytes(p, base)


def test_tensor_allocate_kernel_matches_reference_on_tiles_of_shared_layouts():
    """Tensors tiled like the traces' (tiles of a few layouts, several live at once): the
    widest-skip kernel, with and without the lattice search, lands where Algorithm 1 as
    written (the first collision's shift) does."""
    rng = random.Random(23)
    for _ in range(60):
        layouts = [[rng.randint(1, 8) for _ in range(rng.randint(2, 4))] for _ in range(2)]
        tiles = [_view_tile(rng, layouts[0], a, a + rng.randint(0, 4)) for a in (rng.randint(0, 8) for _ in range(rng.randint(1, 5)))]
        peers = [(_view_tile(rng, rng.choice(layouts), a, a + rng.randint(0, 4)), rng.randint(0, 200))
                 for a in (rng.randint(0, 8) for _ in range(rng.randint(1, 8)))]
        start, align = rng.randint(0, 40), rng.choice((1, 2, 8, 64))
        addr = tensor_allocate_reference(tiles, peers, start, align)
        assert tensor_allocate(tiles, peers, start, align) == addr == tensor_allocate(tiles, peers, start, align, 0)


def test_dram_tracker_overlap_kernel_matches_reference():
    rng = random.Random(5)
    for _ in range(300):
        a = sorted({rng.randrange(0, 400, 4) for _ in range(rng.randint(1, 8))})
        b = sorted({rng.randrange(0, 400, 4) for _ in range(rng.randint(1, 8))})
        ca = [(x, rng.randint(1, 4)) for x in a]
        cb = [(x, rng.randint(1, 4)) for x in b]
        got = first_overlap(*(np.array(v, dtype=np.int64) for v in zip(*ca)), *(np.array(v, dtype=np.int64) for v in zip(*cb)))
        assert tuple(int(x) for x in got) == first_overlap_reference(ca, cb)


# -- Section IV, Table 3: SqueezeNet's peak ---------------------------------------------------
SQUEEZE_STRIDES = (96800, 1760, 32, 1)
SLAB = 55 * 55 * 32  # one 1x55x55x32 channel group, contiguous


def _squeezenet_buffers():
    """The three tensors of Table 3 (lifetimes, shapes, strides as listed), streamed in
    1x55x55x32 channel-group tiles whose lifetimes make up the listed tensor lifetimes."""
    def tiles(count, lives):
        return [Tile((1, 55, 55, 32), SQUEEZE_STRIDES, k * SLAB, 1, *lives[k]) for k in range(count)]

    fire3 = tiles(4, [(150, 182), (150, 186), (150, 189), (150, 192)])  # read group by group
    squeeze = tiles(1, [(183, 225)])
    fire4 = tiles(4, [(226, 254), (204, 254), (204, 254), (204, 254)])  # group 0 written last
    return [Buffer("fire3/concat", 4 * SLAB, False, fire3),
            Buffer("fire4/squeeze/relu", SLAB, False, squeeze),
            Buffer("fire4/concat", 4 * SLAB, False, fire4)]


def test_squeezenet_table3_taa_shares_offset_zero_where_shared_objects_cannot():
    buffers = _squeezenet_buffers()
    assert [(b.first, b.last) for b in buffers] == [(150, 192), (183, 225), (204, 254)]
    for sort in SORTS:
        result = taa(buffers, 32, sort)
        assert set(result.offsets.values()) == {0}, sort
        assert result.total == 4 * SLAB
    so = shared_objects_best(buffers, 32)
    assert so.offsets["fire4/squeeze/relu"] != so.offsets["fire3/concat"]  # a separate object
    assert so.total == 5 * SLAB  # 484,000 B: the paper's 484,182 less the other, small tensors
    assert offsets(buffers, 32).total == 5 * SLAB and naive(buffers, 32).total == 9 * SLAB


def test_peer_counts_and_sorts():
    buffers = _squeezenet_buffers()
    index = TileIndex(buffers)
    # fire3's tiles overlap squeeze's one tile (3 of them at 183..192); squeeze overlaps 3 of
    # fire3 and 3 of fire4; fire4's tiles 1..3 overlap squeeze.
    assert index.peer_counts().tolist() == [3, 6, 3]
    with pytest.raises(PlanningError, match="sort 'breadth'"):
        taa(buffers, 32, "breadth")


def test_taa_offsets_do_not_depend_on_the_lattice_search():
    """Channel-major feature maps in column tiles (one chunk per row per channel, as in the
    traces), several alive at once: lattice search and chunk sweeps place them alike."""
    def feature_map(name, channels, height, width, tiles, born):
        cols, strides = width // tiles, (height * width, width, 1)
        return Buffer(name, channels * height * width, False,
                      [Tile((channels, height, cols), strides, k * cols, 1, born + k, born + tiles + 2 * k)
                       for k in range(tiles)])
    buffers = [feature_map(f"fm{i}", 8 + 4 * (i % 3), 16 >> (i % 2), 16 >> (i % 2), 4, 3 * i) for i in range(8)]
    for sort in SORTS:
        swept = taa(buffers, 64, sort, search_nodes=0)
        assert taa(buffers, 64, sort).offsets == swept.offsets
        assert swept.total < sum(b.size for b in buffers)  # some reuse happens


def test_first_fit_matches_the_plain_walk():
    import random

    from planners.offchip.taa import first_fit, first_fit_reference

    rng = random.Random(5)
    for _ in range(400):
        taken = []
        for _ in range(rng.randrange(0, 60)):
            lo = rng.randrange(0, 4000)
            taken.append((lo, lo + rng.randrange(1, 300)))
        size, alignment = rng.randrange(1, 400), rng.choice([1, 16, 64])
        assert first_fit(size, taken, alignment) == first_fit_reference(size, taken, alignment)
