"""RenderChunks: the paper's worked example and the vectorised implementation against the
paper's recursive reference, on sub-boxes, transposed and strided views."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.kernels.render_chunks import chunk_arrays, chunks_of, render_chunks, render_chunks_reference


def test_paper_worked_example():
    # A 4x64x128 tile of a 4x128x128 CHW tensor (TAA, Section "RenderChunks").
    offsets, sizes = render_chunks_reference((4, 64, 128), (16384, 128, 1))
    assert offsets == [0, 16384, 32768, 49152] and sizes == [8192] * 4
    k_offsets, k_sizes = render_chunks((4, 64, 128), (16384, 128, 1))
    assert k_offsets.tolist() == offsets and k_sizes.tolist() == sizes


def test_contiguous_view_is_one_chunk_and_itemsize_scales():
    assert render_chunks_reference((2, 3, 4), (12, 4, 1), 5, 2) == ([10], [48])
    assert [c for c in chunks_of((2, 3, 4), (12, 4, 1), 5, 2, base_address=100)] == [(110, 48)]


def test_column_view_has_one_chunk_per_element():
    offsets, sizes = render_chunks((3, 2), (10, 1), 4, 4)
    assert offsets.tolist() == [16, 56, 96] and sizes.tolist() == [8, 8, 8]


@st.composite
def views(draw):
    """A random sub-box of a random row-major tensor, or a transposed view of one."""
    rank = draw(st.integers(1, 4))
    full = [draw(st.integers(1, 6)) for _ in range(rank)]
    strides = [1] * rank
    for k in range(rank - 2, -1, -1):
        strides[k] = strides[k + 1] * full[k + 1]
    starts = [draw(st.integers(0, d - 1)) for d in full]
    shape = [draw(st.integers(1, d - s)) for d, s in zip(full, starts)]
    offset = sum(s * t for s, t in zip(starts, strides))
    if draw(st.booleans()):  # every step-th element along some dimensions (a strided window's reads)
        steps = [draw(st.integers(1, 3)) for _ in range(rank)]
        shape = [-(-n // g) for n, g in zip(shape, steps)]
        strides = [s * g for s, g in zip(strides, steps)]
    if draw(st.booleans()):
        perm = draw(st.permutations(range(rank)))
        shape, strides = [shape[p] for p in perm], [strides[p] for p in perm]
    return tuple(shape), tuple(strides), offset, draw(st.sampled_from([1, 2, 4]))


def _bytes_of(offsets, sizes):
    covered = []
    for o, s in zip(offsets, sizes):
        covered.extend(range(o, o + s))
    return covered


@settings(max_examples=300, deadline=None)
@given(views())
def test_kernel_matches_reference(view):
    shape, strides, offset, itemsize = view
    ref = render_chunks_reference(shape, strides, offset, itemsize)
    got = render_chunks(shape, strides, offset, itemsize)
    # Same bytes in the same order; the kernel merges every abutting pair, so it never has more chunks.
    assert _bytes_of(*ref) == _bytes_of(got[0].tolist(), got[1].tolist())
    assert len(got[0]) <= len(ref[0])
    if all(a >= b * n for a, b, n in zip(strides, strides[1:], shape[1:])):  # nested: increasing order
        assert np.all(np.diff(got[0]) > 0)


@settings(max_examples=200, deadline=None)
@given(views())
def test_chunks_cover_exactly_the_view_elements(view):
    shape, strides, offset, itemsize = view
    offsets, sizes = render_chunks(shape, strides, offset, itemsize)
    expected = set()
    for idx in np.ndindex(*shape):
        e = offset + sum(i * s for i, s in zip(idx, strides))
        expected.update(range(e * itemsize, (e + 1) * itemsize))
    got = _bytes_of(offsets.tolist(), sizes.tolist())
    assert len(got) == len(set(got)) and set(got) == expected


@settings(max_examples=200, deadline=None)
@given(views(), st.integers(0, 200), st.sampled_from([16, 32, 64]))
def test_burst_count_matches_reference(view, start, burst):
    from npusim.kernels.render_chunks import burst_count, burst_count_reference

    shape, strides, offset, itemsize = view
    assert burst_count(shape, strides, itemsize, start, burst) == burst_count_reference(
        shape, strides, itemsize, start, burst)


def test_burst_count_by_hand():
    from npusim.kernels.render_chunks import burst_count

    # Four 8192-byte chunks, 64-byte bursts: aligned -> 128 each; shifted by 1 -> 129 each.
    assert burst_count((4, 64, 128), (16384, 128, 1), 1, 0, 64) == (4, 512)
    assert burst_count((4, 64, 128), (16384, 128, 1), 1, 1, 64) == (4, 516)
    # Rows of 7 bytes 56 bytes apart (a [.., 7] slice of 56-wide rows): 8 rows span 448 B.
    # Alone each row would be one burst (8 bursts, a few two); adjacent rows sharing a burst
    # move it once, so the bursts moved are the 7 distinct ones the rows touch.
    assert burst_count((8, 7), (56, 1), 1, 0, 64) == (8, 7)
    # Two chunks touching bursts {0} and {0, 1}: the shared burst 0 is moved once.
    assert burst_count((2, 40), (60, 1), 1, 0, 64) == (2, 2)


@settings(max_examples=300, deadline=None)
@given(views(), st.integers(0, 200), st.sampled_from([16, 32, 64]))
def test_burst_count_in_python_matches_the_vectorised_one(view, start, burst):
    """The plain-Python count of small views (``_burst_count_python``) against NumPy's."""
    from npusim.kernels.render_chunks import _burst_count_python, _burst_count_vectorised

    shape, strides, _, itemsize = view
    shape, strides = tuple(shape), tuple(strides)
    assert _burst_count_python(shape, strides, itemsize, start, burst) == _burst_count_vectorised(
        shape, strides, itemsize, start, burst)


def test_burst_count_in_python_of_empty_views():
    from npusim.kernels.render_chunks import _burst_count_python, _burst_count_vectorised

    for shape, strides in [((0, 4), (4, 1)), ((3, 0), (8, 1)), ((2, 0, 3), (24, 3, 1)), ((), ())]:
        assert _burst_count_python(shape, strides, 2, 5, 64) == _burst_count_vectorised(shape, strides, 2, 5, 64)


def test_burst_count_in_python_matches_the_vectorised_one_on_many_views():
    """Every sub-box, step and order of small tensors (blocks that abut across a wrap, as
    rows 0..1 of [[0, 2], [3, 5]], merge into one chunk), at several starts and bursts."""
    import itertools
    import random

    from npusim.kernels.render_chunks import _burst_count_python, _burst_count_vectorised

    rng = random.Random(11)
    checked = 0
    for full in [(2, 3), (3, 4), (2, 3, 4), (4, 2, 3, 2), (5,), (1, 6, 1)]:
        rank = len(full)
        row_major = [1] * rank
        for k in range(rank - 2, -1, -1):
            row_major[k] = row_major[k + 1] * full[k + 1]
        for _ in range(120):
            shape = [rng.randint(1, d) for d in full]
            steps = [rng.randint(1, 3) for _ in full]
            shape = [-(-n // g) for n, g in zip(shape, steps)]
            strides = [s * g for s, g in zip(row_major, steps)]
            perm = rng.sample(range(rank), rank)
            view = tuple(shape[p] for p in perm), tuple(strides[p] for p in perm)
            for itemsize, start, burst in itertools.product([1, 4], [0, 5, 63], [16, 64]):
                assert _burst_count_python(*view, itemsize, start, burst) == _burst_count_vectorised(
                    *view, itemsize, start, burst), (view, itemsize, start, burst)
                checked += 1
    assert _burst_count_python((2, 2), (3, 2), 1, 0, 64) == (3, 1)  # offsets 0, 2, 3, 5: 2 and 3 abut
    assert checked > 1000


@settings(max_examples=200, deadline=None)
@given(views(), st.integers(0, 1 << 20))
def test_chunk_arrays_are_chunks_of_as_arrays(view, address):
    """The arrays the DRAM contents check takes: the same chunks, at the view's address, and the
    memoised arrays behind them are not changed by a caller shifting its copy."""
    shape, strides, _, itemsize = view
    addresses, sizes = chunk_arrays(shape, strides, itemsize, address)
    assert list(zip(addresses.tolist(), sizes.tolist())) == list(chunks_of(shape, strides, 0, itemsize, address))
    addresses += 1
    again, _ = chunk_arrays(shape, strides, itemsize, address)
    assert again.tolist() == (addresses - 1).tolist()
