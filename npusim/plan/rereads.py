"""Bytes that compulsory loads read again: the overlap of tiles of one input or weight.

A tiled op reads an input or weight as views (tiles) of the base tensor, each first loaded
with cause ``compulsory`` (``npusim.plan.validate``: the first load of a tensor that starts in
DRAM). Tiles of a convolution's input overlap by the kernel's halo, so those loads read some
bytes of the base more than once. *Compulsory* traffic is what any schedule must read — each
byte of the inputs and weights once — so only the first read of a byte is compulsory; the
others are re-reads, counted with ``retrieve`` (what a larger scratchpad would have kept):
compulsory bytes are then the same whatever the tiling, and ``compulsory + retrieve`` is still
every byte loaded.

The overlap of a base's tiles is ``Σ tile bytes − |union of the tiles| × itemsize``. Tiles whose
element ranges (``View``: element ``offset + Σ i_k strides_k``) do not overlap are disjoint;
tiles with one set of row-major strides are boxes of the base, whose union is measured on the
grid their edges cut it into; any other view is measured element by element.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable
from itertools import chain
from operator import attrgetter

import numpy as np

from npusim.graph.model import Graph, View

#: Most cells of the grid the boxes' edges make (else element by element).
_MAX_CELLS = 1 << 22


def reread_bytes(graph: Graph, loaded: Iterable[int]) -> int:
    """Bytes the compulsory loads of tensors ``loaded`` (ids of ``graph``, once each) read that
    another of them also reads (module docstring)."""
    by_base: dict[str, list[View]] = defaultdict(list)
    itemsize: dict[str, int] = {}  # of each base's first view
    tensors = graph.tensors
    for tensor in map(tensors.__getitem__, loaded):  # (25,000 tiles of a decode step: kept lean)
        view = tensor.view or View(tensor.name, 0, tensor.shape, tensor.strides)
        base = view.base
        by_base[base].append(view)
        if base not in itemsize:
            itemsize[base] = tensor.itemsize
    total = 0
    for base, views in by_base.items():
        if len(views) > 1:
            loaded_elements = sum(map(math.prod, map(_SHAPE, views)))
            total += (loaded_elements - _union_elements(views)) * itemsize[base]
    return total


_SHAPE = attrgetter("shape")


def move_rereads(offchip: dict[str, int], graph: Graph, loaded: Iterable[int]) -> dict[str, int]:
    """``offchip`` (bytes by cause) with the bytes the compulsory loads of ``loaded`` read again
    moved from compulsory to retrieve (``reread_bytes``); the simulator's report and
    ``Plan.offchip_bytes`` both count this way."""
    again = reread_bytes(graph, loaded)
    offchip["compulsory"] -= again
    offchip["retrieve"] += again
    return offchip


def _union_elements(views: list[View]) -> int:
    """Elements of the base that at least one of ``views`` covers."""
    strides = views[0].strides
    if all(v.strides == strides for v in views):  # (tiles of one base shape: its boxes, as arrays)
        offsets = np.fromiter(map(attrgetter("offset"), views), np.int64, len(views))
        shapes = np.fromiter(chain.from_iterable(map(attrgetter("shape"), views)), np.int64,
                             len(views) * len(strides)).reshape(len(views), len(strides))
        lows, highs = offsets, offsets + (shapes - 1) @ np.asarray(strides, dtype=np.int64)
        order = np.argsort(lows, kind="stable")
        if (np.all(np.asarray(strides) > 0) and (shapes > 0).all()
                and (highs[order][:-1] < lows[order][1:]).all()):
            return int(shapes.prod(axis=1).sum())  # (disjoint ranges: slices of contiguous rows)
        starts = _box_starts(offsets, shapes, strides)
        if starts is not None:
            covered = _union_of_grid_boxes(starts, shapes)
            if covered is None:
                covered = _union_of_boxes(starts, shapes)
            if covered is not None:
                return covered
    return _union_by_element(views)


def _box_starts(offsets: np.ndarray, shapes: np.ndarray, strides: tuple[int, ...]) -> np.ndarray | None:
    """Each view's first index on every axis of a row-major base, or None when they are not
    boxes of one: strides decreasing to 1, each a multiple of the next (the base's axis sizes
    but the first), every box within those sizes."""
    if not strides or any(s <= 0 for s in strides) or strides[-1] != 1:
        return None
    if any(outer % inner for outer, inner in zip(strides, strides[1:])):
        return None
    sizes = [outer // inner for outer, inner in zip(strides, strides[1:])]  # axes 1 ..
    starts, rest = np.empty_like(shapes), offsets.copy()
    for k, s in enumerate(strides):
        starts[:, k] = rest // s
        rest -= starts[:, k] * s
    if (starts < 0).any() or any((starts[:, k] + shapes[:, k] > sizes[k - 1]).any() for k in range(1, len(strides))):
        return None
    return starts


def _union_of_grid_boxes(starts: np.ndarray, shapes: np.ndarray) -> int | None:
    """Elements the boxes (first index and size per axis, none empty) cover together when,
    along every axis, any two of their ranges are equal or disjoint (the tiles of a grid,
    read again by other ops): two such boxes meet only if they are equal, so the union is
    the distinct boxes' volumes summed. None when some ranges overlap (halos): far fewer
    array operations than cutting the grid (``_union_of_boxes``)."""
    if not (shapes > 0).all():
        return None
    ends = starts + shapes
    span = int(ends.max()) + 1
    for k in range(starts.shape[1]):
        ranges = _distinct(starts[:, k] * span + ends[:, k])  # by start, then end
        if (ranges[1:] // span < ranges[:-1] % span).any():  # a range starts before the previous one ends
            return None
    boxes = np.concatenate([starts, ends], axis=1)
    order = np.lexsort(boxes.T[::-1])
    boxes = boxes[order]
    distinct = np.ones(len(boxes), dtype=bool)
    distinct[1:] = (boxes[1:] != boxes[:-1]).any(axis=1)
    return int(shapes[order][distinct].prod(axis=1).sum())


def _union_of_boxes(starts: np.ndarray, shapes: np.ndarray) -> int | None:
    """Elements the boxes (first index and size per axis) cover together: the cells of the grid
    their edges cut, each counted once (None when that grid has more than ``_MAX_CELLS``)."""
    ends = starts + shapes
    edges = [_distinct(np.concatenate([starts[:, k], ends[:, k]])) for k in range(starts.shape[1])]
    if math.prod(len(e) - 1 for e in edges) > _MAX_CELLS:
        return None
    lo = [np.searchsorted(e, starts[:, k]) for k, e in enumerate(edges)]
    hi = [np.searchsorted(e, ends[:, k]) for k, e in enumerate(edges)]
    # how many boxes cover each cell: +1 / -1 at each box's corners, then a running sum per axis
    # (the corners counted by sign with one bincount each: a ufunc.at per corner was most of the time)
    dims = [len(e) for e in edges]
    plus, minus = [], []
    for corner in itertools.product((0, 1), repeat=len(edges)):
        index = np.ravel_multi_index(tuple(h if c else low for c, low, h in zip(corner, lo, hi)), dims)
        (minus if sum(corner) % 2 else plus).append(index)
    cells = math.prod(dims)
    count = (np.bincount(np.concatenate(plus), minlength=cells)
             - np.bincount(np.concatenate(minus), minlength=cells)).reshape(dims)
    for axis in range(len(edges)):
        count = np.cumsum(count, axis=axis)
    covered = count[tuple(slice(0, len(e) - 1) for e in edges)] > 0
    cell = np.diff(edges[0])
    for e in edges[1:]:
        cell = np.multiply.outer(cell, np.diff(e))
    return int(cell[covered].sum())


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` by a sort (NumPy's hashing unique is slower on these few values)."""
    values = np.sort(values)
    keep = np.ones(len(values), dtype=bool)
    keep[1:] = values[1:] != values[:-1]
    return values[keep]


def _union_by_element(views: list[View]) -> int:
    """Elements the views cover together, marking each one (views that are not boxes of one base)."""
    extents = [(v.offset + sum((n - 1) * s for n, s in zip(v.shape, v.strides) if s < 0),
                v.offset + sum((n - 1) * s for n, s in zip(v.shape, v.strides) if s > 0)) for v in views]
    first = min(low for low, _ in extents)
    seen = np.zeros(max(high for _, high in extents) - first + 1, dtype=bool)
    for v in views:
        index = np.full(1, v.offset - first, dtype=np.int64)
        for n, s in zip(v.shape, v.strides):
            index = np.add.outer(index, np.arange(n, dtype=np.int64) * s).ravel()
        seen[index] = True
    return int(seen.sum())
