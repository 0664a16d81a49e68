"""Compulsory bytes are each byte of the inputs and weights read once (``npusim.plan.rereads``):
tiles that overlap (a convolution's halo, one input tile read for every block of outputs) read
some bytes again, and those count with retrieve."""

import itertools

import numpy as np
import pytest

from npusim import workflow as W
from npusim.graph.model import Graph, Tensor, View
from npusim.plan.rereads import reread_bytes


def _graph(views: list[View], itemsize: int = 2) -> Graph:
    tensors = [Tensor(i, f"tile{i}", v.shape, "fp16", itemsize, "input", view=v) for i, v in enumerate(views)]
    return Graph("tiles", tuple(tensors), ())


def _by_element(views: list[View]) -> int:
    """Elements loaded more than once, counted one by one (the reference)."""
    seen, again = set(), 0
    for v in views:
        for index in itertools.product(*(range(n) for n in v.shape)):
            element = v.offset + sum(i * s for i, s in zip(index, v.strides))
            again += element in seen
            seen.add(element)
    return again


def _box(start, size, base=(2, 9, 10)):
    strides = tuple(int(np.prod(base[k + 1:])) for k in range(len(base)))
    return View("x", sum(a * s for a, s in zip(start, strides)), tuple(size), strides)


@pytest.mark.parametrize("trial", range(20))
def test_overlapping_boxes_and_other_views_match_counting_each_element(trial):
    """Random boxes of one base (halo rows, repeated tiles, disjoint slices) through the grid of
    their edges, and strided views that are not boxes through element marking, against a
    count of every element."""
    rng = np.random.default_rng(trial)
    base = (2, 9, 10)
    views = []
    for _ in range(int(rng.integers(2, 7))):
        start = [int(rng.integers(0, n)) for n in base]
        size = [int(rng.integers(1, n - s + 1)) for n, s in zip(base, start)]
        views.append(_box(start, size, base))
    if trial % 3 == 0:  # a view that is no box: every other column of a row band
        views.append(View("x", int(rng.integers(0, 10)), (3, 4), (10, 2)))
    assert reread_bytes(_graph(views), range(len(views))) == 2 * _by_element(views)


@pytest.mark.parametrize("trial", range(20))
def test_tiles_of_grids_read_again_match_counting_each_element(trial):
    """Boxes cut from a grid (each axis's ranges equal or disjoint: summed once each, none
    cut), some read again, some moved off the grid (then cut), against a count of every element."""
    rng = np.random.default_rng(100 + trial)
    base = (2, 9, 10)
    cuts = [sorted({0, n, *(int(c) for c in rng.integers(0, n, 2))}) for n in base]
    views = []
    for _ in range(int(rng.integers(2, 9))):
        start, size = [], []
        for k, n in enumerate(base):
            i = int(rng.integers(0, len(cuts[k]) - 1))
            a, b = cuts[k][i], cuts[k][i + 1]
            if trial % 4 == 0 and rng.random() < 0.2:  # off the grid
                a = int(rng.integers(0, n))
                b = int(rng.integers(a + 1, n + 1))
            start.append(a)
            size.append(b - a)
        views.append(_box(start, size, base))
    views += views[: int(rng.integers(0, 3))]  # read again
    assert reread_bytes(_graph(views), range(len(views))) == 2 * _by_element(views)


def test_halo_rows_and_a_tile_read_twice():
    """Two row bands of a 9-row image sharing one halo row, and the first band loaded again
    (another block of outputs reads the same inputs): one row and one band read twice."""
    top, bottom = _box((0, 0, 0), (2, 5, 10)), _box((0, 4, 0), (2, 5, 10))
    assert reread_bytes(_graph([top, bottom]), [0, 1]) == 2 * (2 * 10)  # 2 B each: batch 2, one row, 10 columns
    assert reread_bytes(_graph([top, bottom, top]), [0, 1, 2]) == 2 * (2 * 10 + 2 * 5 * 10)
    assert reread_bytes(_graph([top, bottom]), [0]) == 0  # one load reads nothing twice
    halves = [_box((0, 0, 0), (2, 9, 5)), _box((0, 0, 5), (2, 9, 5))]
    assert reread_bytes(_graph(halves), [0, 1]) == 0


@pytest.mark.parametrize("trace, budget", [("mobilenet_v2", "64KiB"), ("resnet18", "128KiB"), ("resnet18", "1MiB")])
def test_compulsory_bytes_are_the_inputs_and_weights_whatever_the_tiling(trace, budget):
    """The tiles of a network at a small scratchpad overlap (halos, inputs read per output
    block), yet compulsory is the bytes of its inputs and weights, as untiled; the bytes read
    again are retrieve, and every byte loaded is still counted once."""
    hw = W.load_hw("edge-npu", {"scratchpad.size": budget})
    graph = W.load_graph(trace)
    report = W.simulate_program(W.lower_plan(W.plan_graph(graph, hw), hw), hw)
    first_reads = sum(t.size for t in graph.tensors if t.in_dram_initially)
    assert report.offchip_bytes["compulsory"] == first_reads
    assert report.offchip_bytes["compulsory"] + report.offchip_bytes["retrieve"] == report.offchip_read_bytes
