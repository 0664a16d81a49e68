"""The validator's fast paths against their element-by-element definitions."""

from __future__ import annotations

import random

import numpy as np

from npusim.graph.model import View
from npusim.plan.validate import _elements_of, _read_elements, _stepped_ranges_hold, _stepped_view_holds


def _row_major(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def _random_shape(rng, largest: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(a shape of rank 1 to 4, each dimension 1..largest, its row-major strides)."""
    shape = tuple(rng.randint(1, largest) for _ in range(rng.randint(1, 4)))
    return shape, _row_major(shape)


def _by_elements(view, shape, region, steps) -> bool:
    return bool(np.isin(_read_elements(shape, region, steps), _elements_of(view)).all())


def test_a_stepped_view_holds_a_strided_read_exactly_when_each_element_is_in_it():
    """Random stepped views (every step-th element from a start, along each dimension, as the
    tiler's strided input views are) and random strided reads near them: the range test
    agrees with the element test on every case, and takes the range path on all of them."""
    rng = random.Random(7)
    held = ranges_used = 0
    for _ in range(3000):
        shape, strides = _random_shape(rng, 9)
        starts, steps_v, counts = [], [], []
        for n in shape:
            step = rng.randint(1, 3)
            start = rng.randrange(n)
            count = rng.randint(1, (n - 1 - start) // step + 1)
            starts.append(start), steps_v.append(step), counts.append(count)
        view = View("x", sum(a * s for a, s in zip(starts, strides)), tuple(counts),
                    tuple(s * g for s, g in zip(strides, steps_v)))
        region, steps = [], []
        for n, a0, g0, c in zip(shape, starts, steps_v, counts):
            a = max(0, a0 + rng.randint(-1, 1))
            b = min(n, a0 + (c - 1) * g0 + 1 + rng.randint(-2, 1))
            region.append((a, max(a, b) if rng.random() > 0.05 else a))
            steps.append(rng.choice([g0, 2 * g0, 1, 3]))
        expected = _by_elements(view, shape, region, steps)
        assert _stepped_view_holds(view, shape, strides, region, steps) == expected, (shape, view, region, steps)
        ranges_used += _stepped_ranges_hold(view, shape, strides, region, steps) is not None
        held += expected
    assert ranges_used == 3000 and 300 < held < 2700  # both answers are exercised


def test_a_view_that_is_no_product_of_ranges_is_tested_element_by_element():
    """A view whose rows wrap past a dimension of the base (a flat span seen as 2-D) is no
    product of per-dimension ranges: the element test answers."""
    shape, strides = (4, 4), (4, 1)
    wrapping = View("x", 2, (2, 3), (4, 1))  # rows 0-1, columns 2, 3 and (wrapped) 4 = next row's 0
    assert _stepped_ranges_hold(wrapping, shape, strides, [(0, 2), (2, 4)], (1, 1)) is None
    assert _stepped_view_holds(wrapping, shape, strides, [(0, 2), (2, 4)], (1, 1))
    assert _stepped_view_holds(wrapping, shape, strides, [(1, 3), (0, 1)], (1, 1))  # elements 4 and 8
    assert not _stepped_view_holds(wrapping, shape, strides, [(3, 4), (0, 1)], (1, 1))  # element 12


def test_the_array_topological_test_accepts_exactly_the_orders_check_order_accepts():
    """``_is_topological`` (array work over the graph's input lists, and the tiles a view is
    read from) against ``check_order`` on a tiled graph: its own order, and orders with two ops
    swapped, many of which put a tile before a tile it reads (through a view's sources)."""
    from npusim.errors import PlanError
    from npusim.graph.analysis import check_order
    from npusim.plan.validate import _is_topological
    from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget

    hw = load_hw("edge-npu")
    graph = load_graph("squeezenet1_0")
    plan = plan_graph(graph, hw, budget=resolve_budget("64KiB", graph, hw))
    tiled, order = plan.bound_graph, list(plan.order)
    assert any(t.sources for t in tiled.tensors)  # views read from tiles: the second test is exercised
    rng = random.Random(5)
    accepted = refused = 0
    for k in range(300):
        candidate = order[:]
        if k:
            i = rng.randrange(len(candidate))
            j = min(len(candidate) - 1, i + rng.choice((1, 2, 5, 40)))
            candidate[i], candidate[j] = candidate[j], candidate[i]
        try:
            check_order(tiled, candidate)
            expected = True
        except PlanError:
            expected = False
        assert _is_topological(tiled, candidate) == expected
        accepted += expected
        refused += not expected
    assert accepted > 10 and refused > 10


def test_a_grid_of_boxes_is_accepted_only_when_counting_finds_each_element_once():
    """``_grid_of_boxes`` (check_tiling's fast path) against counting the elements: random
    grids are accepted, and grids with a cell dropped, doubled, shifted or split unevenly are
    either refused (then counted) or, when accepted, counted once everywhere too."""
    from npusim.plan.validate import _count_elements, _grid_of_boxes, _grid_of_boxes_by_views

    rng = random.Random(3)
    accepted = refused = 0
    agree = {True: 0, False: 0}
    for trial in range(600):
        shape, strides = _random_shape(rng, 7)
        rank = len(shape)
        cuts = [sorted({0, n, *rng.sample(range(1, n), rng.randint(0, n - 1))}) for n in shape]
        boxes = [()]
        for c in cuts:
            boxes = [b + ((lo, hi),) for b in boxes for lo, hi in zip(c, c[1:])]
        mutation = trial % 5
        if mutation == 1 and boxes:
            boxes.pop(rng.randrange(len(boxes)))
        elif mutation == 2:
            boxes.append(rng.choice(boxes))
        elif mutation == 3:
            i, d = rng.randrange(len(boxes)), rng.randrange(rank)
            lo, hi = boxes[i][d]
            if hi < shape[d]:
                boxes[i] = boxes[i][:d] + ((lo, hi + 1),) + boxes[i][d + 1:]
        elif mutation == 4:  # one box split along a dimension, off the grid's cuts
            i, d = rng.randrange(len(boxes)), rng.randrange(rank)
            lo, hi = boxes[i][d]
            if hi - lo > 1:
                mid = rng.randint(lo + 1, hi - 1)
                box = boxes.pop(i)
                boxes += [box[:d] + ((lo, mid),) + box[d + 1:], box[:d] + ((mid, hi),) + box[d + 1:]]
        views = [View("t", sum(a * s for (a, _), s in zip(box, strides)), tuple(b - a for a, b in box), strides)
                 for box in boxes]
        count = np.zeros(int(np.prod(shape)), dtype=np.uint16)
        for view in views:
            _count_elements(count, view, shape, strides)
        if _grid_of_boxes(views, shape, strides):
            accepted += 1
            assert (count == 1).all()
        else:
            refused += 1
        if mutation == 0:
            assert _grid_of_boxes(views, shape, strides)
        # the array form against the view-by-view one, also with a view moved (maybe past the end)
        shifted = list(views)
        k = rng.randrange(len(shifted)) if shifted else None
        if k is not None:
            shifted[k] = View("t", shifted[k].offset + rng.choice((-1, 1, strides[0], -strides[0])), shifted[k].shape,
                              strides)
        for vs in (views, shifted):
            agree[_grid_of_boxes_by_views(vs, shape, strides)] += 1
            assert _grid_of_boxes(vs, shape, strides) == _grid_of_boxes_by_views(vs, shape, strides)
    assert accepted > 100 and refused > 100 and min(agree.values()) > 100
