"""Tiled graphs: an op streamed through the scratchpad becomes one op per tile.

A *tile spec* (what a plan records for a tiled op, plain JSON) says how:

- ``{"block": [b0, b1, ...], "k": K, "order": [d, ...]}``: the op's output is cut into boxes of
  ``block`` elements per dimension, visited in the loop ``order`` (outer dimension first);
  GEMM-like ops may also cut their reduction dimension into ``K``-long slices (0 = whole),
  accumulating partial sums on chip (4-byte accumulators) — the reduction loop is innermost.
  The partial sums go to the scratchpad between slices, or with ``"acc": "core"`` stay in
  the core's accumulators (``cores.accumulator_size``): the slices then pass an
  ``accumulator`` tensor that takes no scratchpad bytes, and the cost model charges the
  chain as the array runs it (``npusim.hw.costs``);
- ``{"flat": n}``: a reshape-like op is cut into runs of ``n`` elements of its flat index.

``expand(graph, specs)`` builds the tiled graph, deterministically:

- each tile is an op ``<op>#<i>`` whose inputs and outputs are *views* (``Tensor.view``) of
  the original tensors; identical views are shared, so a view reused by consecutive tiles
  (input rows across output-channel tiles, or weights across row tiles) stays on chip;
- a tile's output is a *written view*; a tile that reads part of a tensor produced by
  another tiled op, in other boxes, reads a *read view* listing its ``sources`` (the written
  views it overlaps): the data goes through DRAM. A read of exactly one written view reads
  it directly, on chip;
- a tensor produced by an untiled op and read in parts by tiles is stored once and read
  back as views; read whole, it is used on chip as is;
- an untiled op reading a tensor produced by tiles reads a whole-tensor read view.

Which part of each input a tile reads is ``npusim.graph.regions.input_boxes``.

The tiles of one op form a regular grid, and the ops of one template key (a transformer's
layers) tile alike: what they share is computed once per key and as arrays (the boxes each
input is read in with their views' offsets and shapes, ``_ReadGeometry``; the output boxes'
offsets, ``grid_offsets``), and the read views an op makes of a tensor in DRAM are made ahead
of its tile loop (``_Builder.fresh_reads``), which then only numbers what it uses.
"""

from __future__ import annotations

import bisect
import itertools
import math

import numpy as np

from npusim.errors import PlanError
from npusim.graph.columns import OpColumnsBuilder, TileAttrs
from npusim.graph.model import ConvLoops, Gemm, Graph, Op, View, graph_from_ids, row_major_strides
from npusim.graph.ops.kinds import INPUT_REDUCED_KINDS, K_SLICED_KINDS, REDUCTION_TILED_KINDS, RESHAPE_LIKE
from npusim.graph.regions import (
    Box, box_rule_by_box, box_shape, box_volume, full_box, input_steps, reduction_size, stepped_shape,
)
from npusim.util.fast_init import positional_constructor, twin_constructor

PSUM_ITEMSIZE = 4  # partial sums accumulate in 32 bits
#: Where the partial sums of a split reduction live between its slices (tile spec ``acc``).
ACCUMULATE = ("scratchpad", "core")
TILED_SUFFIX = "@tiled"


def tiled_name(name: str) -> str:
    return name + TILED_SUFFIX


def check_spec(op: Op, graph: Graph, spec: dict, where: str = "tiling") -> None:
    """Raise PlanError unless ``spec`` is a well-formed tile spec for ``op``."""
    out_shape = graph.tensors[op.outputs[0]].shape
    if not isinstance(spec, dict):
        raise PlanError(f"{where}[{op.name!r}]: expected an object, got {spec!r}")
    if len(op.outputs) != 1:
        raise PlanError(f"{where}[{op.name!r}]: ops with {len(op.outputs)} outputs cannot be tiled")
    if "flat" in spec:
        n = spec["flat"]
        if op.kind not in RESHAPE_LIKE or not isinstance(n, int) or n <= 0:
            raise PlanError(f"{where}[{op.name!r}]: 'flat' is for reshape-like ops and must be a positive integer, got {n!r}")
        return
    block, k, order = spec.get("block"), spec.get("k", 0), spec.get("order")
    if (not isinstance(block, list) or len(block) != len(out_shape)
            or any(not isinstance(b, int) or isinstance(b, bool) or b <= 0 for b in block)):
        raise PlanError(f"{where}[{op.name!r}]: 'block' is {block!r}, expected {len(out_shape)} positive integers "
                        f"(output shape {list(out_shape)})")
    if not isinstance(k, int) or k < 0 or (k and op.kind not in K_SLICED_KINDS):
        raise PlanError(f"{where}[{op.name!r}]: 'k' is {k!r}, expected 0, or a positive slice of the reduction of a "
                        "GEMM-like op or of the inputs of a Sum, Mean, Max or Min")
    acc = spec.get("acc", "scratchpad")
    if acc not in ACCUMULATE or (acc == "core" and not k):
        raise PlanError(f"{where}[{op.name!r}]: 'acc' is {acc!r}, expected 'scratchpad', or 'core' with a reduction "
                        "slice 'k' (partial sums held in the core's accumulators)")
    if order is not None and (not isinstance(order, list) or any(not isinstance(d, int) for d in order)
                              or sorted(order) != list(range(len(out_shape)))):
        raise PlanError(f"{where}[{op.name!r}]: 'order' is {order!r}, expected a permutation of 0..{len(out_shape) - 1}")


def tile_boxes(out_shape, spec: dict):
    """The output boxes of a spec in loop order (flat specs yield ((start, stop),) ranges)."""
    if "flat" in spec:
        total = 1
        for d in out_shape:
            total *= d
        n = spec["flat"]
        for a in range(0, total, n):
            yield ((a, min(a + n, total)),)
        return
    block = spec["block"]
    order = spec.get("order") or list(range(len(out_shape)))
    ranges = {d: [(a, min(a + block[d], out_shape[d])) for a in range(0, out_shape[d], block[d])] for d in order}
    for combo in itertools.product(*(ranges[d] for d in order)):
        box = [None] * len(out_shape)
        for d, r in zip(order, combo):
            box[d] = r
        yield tuple(box)


def k_slices(op: Op, graph: Graph, spec: dict) -> list[tuple[int, int] | None]:
    k = spec.get("k", 0)
    total = reduction_size(op, graph) if op.kind in K_SLICED_KINDS else 1
    if not k or k >= total:
        return [None]
    return [(a, min(a + k, total)) for a in range(0, total, k)]


def box_view(tensor, box: Box, steps: tuple[int, ...] | None = None) -> View:
    """The view of ``box`` of ``tensor`` (every ``steps``-th element along each dimension)."""
    strides = row_major_strides(tensor.shape)
    offset = 0
    for (a, _), s in zip(box, strides):
        offset += a * s
    if steps is None:
        return _new_view(tensor.name, offset, box_shape(box), strides)
    return _new_view(tensor.name, offset, stepped_shape(box, steps), tuple(s * g for s, g in zip(strides, steps)))


#: ``View(base, offset, shape, strides)``, made faster (``npusim.util.fast_init``): one per tile's view.
_new_view = twin_constructor(View)


def view_region(view: View, base_shape) -> list[tuple[int, int, int]]:
    """(start, count, step) per dimension of a box view, strided or not, of a tensor of
    ``base_shape`` (its offset and strides decoded against the base's row-major strides)."""
    rest, region = view.offset, []
    for n, s, r in zip(view.shape, view.strides, row_major_strides(tuple(base_shape))):
        region.append((rest // r, n, max(s // r, 1)))
        rest %= r
    return region


def flat_view(tensor, rng: tuple[int, int]) -> View:
    return View(base=tensor.name, offset=rng[0], shape=(rng[1] - rng[0],), strides=(1,))


def view_span(view: View) -> tuple[int, int]:
    """First and one-past-last element of a view in its base (its flat extent)."""
    last = view.offset + sum((n - 1) * s for n, s in zip(view.shape, view.strides))
    return view.offset, last + 1


def _box_of(view: View) -> list[tuple[int, int]]:
    """(start, length) per dim of a box view, recovered from its offset and row-major strides."""
    rest = view.offset
    out = []
    for n, s in zip(view.shape, view.strides):
        out.append((rest // s, n))
        rest %= s
    return out


def _bounds_of(view: View) -> tuple[tuple[int, int], ...]:
    """(start, end) per dim of a box view (``_box_of``)."""
    return tuple((start, start + length) for start, length in _box_of(view))


#: Up to this many written views of one layout that a read does not share, their flat spans
#: are tested one by one (``_Layout.span_meeting``); beyond, as an array.
FEW_WRITTEN = 64


class _Ranges:
    """The distinct (start, end) ranges of one dimension of a layout's views, each with the
    positions of the views that have it. While no two ranges overlap (a producer's tiles
    partition each dimension) the ones a read meets are found by bisection."""

    def __init__(self) -> None:
        self.positions: dict[tuple[int, int], list[int]] = {}
        self.sorted: list[tuple[int, int]] = []  # the distinct ranges, by start
        self.disjoint = True

    def add(self, bound: tuple[int, int], position: int) -> None:
        found = self.positions.get(bound)
        if found is not None:
            found.append(position)
            return
        self.positions[bound] = [position]
        at = bisect.bisect_left(self.sorted, bound)
        before = self.sorted[at - 1] if at else None
        after = self.sorted[at] if at < len(self.sorted) else None
        if (before is not None and before[1] > bound[0]) or (after is not None and bound[1] > after[0]):
            self.disjoint = False
        self.sorted.insert(at, bound)

    def met(self, start: int, end: int) -> list[tuple[int, int]]:
        """The distinct ranges here that meet [start, end)."""
        ranges = self.sorted
        if self.disjoint:  # starts and ends both ascend: the ranges met are contiguous
            first = max(bisect.bisect_right(ranges, (start, math.inf)) - 1, 0)
            candidates = itertools.takewhile(lambda r: r[0] < end, itertools.islice(ranges, first, None))
        else:
            candidates = ranges
        return [(w_start, w_end) for w_start, w_end in candidates if w_start < end and start < w_end]


class _Layout:
    """The written views of a tensor that share one layout (strides), filed by their bounds
    (``_Ranges`` per dimension) and flat spans. A read of that layout finds the views its box
    meets along every dimension from the few ranges it meets per dimension, and a read of
    another layout the views whose flat span meets its own, without testing each view in
    Python (a 64 KiB tiling of fcn_resnet50 has thousands of tiles per tensor)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.positions: list[int] = []
        self.spans: list[tuple[int, int]] = []
        self.by_dim = [_Ranges() for _ in range(rank)]
        self.by_bounds: dict[tuple, list[int]] = {}  # a view's bounds -> the positions with them
        self.bounds: dict[int, tuple] = {}  # position -> its view's bounds
        self._span_array: np.ndarray | None = None

    def add(self, position: int, bounds, span: tuple[int, int]) -> None:
        self.positions.append(position)
        self.spans.append(span)
        self._span_array = None
        bounds = tuple(bounds)
        self.bounds[position] = bounds
        self.by_bounds.setdefault(bounds, []).append(position)
        for ranges, bound in zip(self.by_dim, bounds):
            ranges.add(bound, position)

    def meeting(self, bounds) -> list[int]:
        """Positions of the views that meet the box ``bounds`` ((start, end) per dimension)
        along every dimension: on a grid of tiles, each combination of the ranges met along
        the dimensions is one view, looked up by its bounds; else the views of the dimension
        with the fewest met are tested against the box."""
        if not self.rank:
            return list(self.positions)
        met = [ranges.met(start, end) for ranges, (start, end) in zip(self.by_dim, bounds)]
        if not all(met):
            return []
        if math.prod(len(m) for m in met) <= len(self.positions):
            return [p for combination in itertools.product(*met) for p in self.by_bounds.get(combination, ())]
        fewest = min(range(self.rank), key=lambda d: sum(len(self.by_dim[d].positions[r]) for r in met[d]))
        found = []
        for r in met[fewest]:
            for p in self.by_dim[fewest].positions[r]:
                for (w_start, w_end), (start, end) in zip(self.bounds[p], bounds):
                    if w_start >= end or start >= w_end:
                        break
                else:
                    found.append(p)
        return found

    def span_meeting(self, lo: int, hi: int) -> list[int]:
        """Positions of the views whose flat span meets [lo, hi)."""
        if len(self.positions) <= FEW_WRITTEN:
            return [p for p, (w_lo, w_hi) in zip(self.positions, self.spans) if w_lo < hi and lo < w_hi]
        if self._span_array is None:
            self._span_array = np.array(self.spans, dtype=np.int64).reshape(-1, 2)
        spans = self._span_array
        hits = np.flatnonzero((spans[:, 0] < hi) & (lo < spans[:, 1])).tolist()
        return [self.positions[i] for i in hits]


class _Grid:
    """The written views of a tensor a tiled op produced by a block spec: one per box of the
    spec's regular grid, written in its loop order (``tile_boxes``), so a view's position among
    them is its box's number in that order. A box read of the tensor meets, along dimension d,
    the blocks ``start // block[d]`` to ``(end - 1) // block[d]``: the views it meets along
    every dimension are computed, not searched for, already in the order they were written."""

    def __init__(self, shape: tuple[int, ...], block: list[int], order: list[int]) -> None:
        self.shape, self.block, self.order = shape, block, order
        self.weights = [0] * len(shape)  # a block's number along d times this = its share of the position
        weight = 1
        for d in reversed(order):
            self.weights[d] = weight
            weight *= -(-shape[d] // block[d])
        self.count = weight
        self.strides = row_major_strides(shape)

    def meeting(self, bounds) -> list[int]:
        """Positions of the boxes that meet ``bounds`` ((start, end) per dimension) along every
        dimension, ascending: the dimensions along which the read meets several blocks spread
        them, in loop order; one block adds its share to every position."""
        positions, base = [0], 0
        for d in self.order:
            start, end = bounds[d]
            size, weight = self.block[d], self.weights[d]
            first, last = start // size, (end - 1) // size
            if first == last:
                base += first * weight
            else:
                shares = range(first * weight, last * weight + 1, weight)
                positions = [p + share for p in positions for share in shares]
        return [base + p for p in positions] if base else positions

    def meeting_span(self, bounds, lo: int, hi: int) -> list[int]:
        """``meeting``, keeping only the boxes whose flat span meets [lo, hi) (a strided read:
        its span may end before its bounding box does)."""
        cells = [(0, 0, 0)]  # (position, flat offset, flat extent - 1) of the boxes so far
        for d in self.order:
            start, end = bounds[d]
            size, weight, stride, n = self.block[d], self.weights[d], self.strides[d], self.shape[d]
            shares = [(i * weight, i * size * stride, (min(size, n - i * size) - 1) * stride)
                      for i in range(start // size, (end - 1) // size + 1)]
            cells = [(p + dp, o + do, e + de) for p, o, e in cells for dp, do, de in shares]
        return [p for p, offset, extent in cells if offset < hi and lo < offset + extent + 1]


def grid_offsets(shape: tuple[int, ...], spec: dict) -> list[int]:
    """The flat offset of the first element of each box of a block spec (``tile_boxes``, in its
    loop order) in a row-major tensor of ``shape``, as array work: the boxes are the product of
    the blocks along each dimension, the last of the loop order varying fastest, so their
    offsets are the outer sum of the blocks' offsets along each dimension, in that order."""
    block, strides = spec["block"], row_major_strides(shape)
    offsets = np.zeros(1, dtype=np.int64)
    for d in spec.get("order") or range(len(shape)):
        starts = np.arange(0, shape[d], block[d], dtype=np.int64) * strides[d]
        offsets = (offsets[:, None] + starts[None, :]).ravel()
    return offsets.tolist()


class _ReadGeometry:
    """The distinct box regions one input of a tiled op is read in (in the order its tiles first
    read them) with the offset, shape and strides of the view of each, as ``box_view`` makes
    them, computed as arrays; ops of one template key (``_Templates``) share it."""

    def __init__(self, regions: list, base_shape: tuple[int, ...], steps: tuple[int, ...] | None) -> None:
        self.steps = steps
        self.regions = [r for r in dict.fromkeys(regions) if r is not None]
        rank = len(base_shape)
        bounds = np.array(self.regions, dtype=np.int64).reshape(len(self.regions), rank, 2)
        strides = np.array(row_major_strides(base_shape), dtype=np.int64)
        self.offsets = (bounds[:, :, 0] @ strides).tolist()
        extents = bounds[:, :, 1] - bounds[:, :, 0]
        if steps is not None:
            step = np.array(steps, dtype=np.int64)
            extents = -(-extents // step)
            strides = strides * step
        self.shapes = list(map(tuple, extents.tolist()))
        self.strides = tuple(strides.tolist())


class _Builder:
    """Accumulates the tensor and op records of a tiled graph. Tensors are numbered as they
    are made (a record's position is its id), and ops and read views refer to them by id."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.tensors: list[tuple] = []  # (name, shape, dtype, itemsize, kind, view, sources): graph_from_ids
        self.ops = OpColumnsBuilder()  # (graph_from_ids records, appended as columns)
        self.kept: dict[int, int] = {}  # original tensor id -> its id here, used as is
        # original tensor -> (offset, shape, strides) of each read view made of it -> its id
        self.read_views: dict[int, dict[tuple, int]] = {}
        # original tensor -> its written views: (view, id, its box's (start, end) per dim or None)
        self.written: dict[int, list[tuple[View, int, tuple | None]]] = {}
        # original tensor -> its written views as (view, id, flat span, (start, end) per dim),
        # decoded when a read first tests them (``_decoded``), once: most reads are of exactly
        # one written view and test none
        self.decoded: dict[int, list[tuple[View, int, tuple[int, int], tuple]]] = {}
        self.layouts: dict[int, dict[tuple, _Layout]] = {}  # original tensor -> strides -> its views of them
        # original tensor -> the grid of boxes its tiled producer writes (``_Grid``), declared
        # before the writes (``write_grid``): a box read finds its sources from it
        self.grids: dict[int, _Grid] = {}
        self.written_index: dict[int, dict[tuple, int]] = {}  # as ``read_views``, of written views
        # original tensor -> {(flat, steps): {region: what ``read`` gave}}: tiles read the same
        # region again and again (weights across row tiles, inputs across channel tiles);
        # emptied when a view of the tensor is written, the only change that alters the answer
        self.reads: dict[int, dict[tuple, dict[tuple, int]]] = {}
        self.counter: dict[str, dict[str, int]] = {"r": {}, "w": {}}  # tag -> stem -> views named so far

    def _fresh(self, stem: str, tag: str) -> str:
        counts = self.counter[tag]  # (a dict per tag: the stem, a tensor's name, keeps its hash)
        n = counts.get(stem, 0)
        counts[stem] = n + 1
        return f"{stem}@{tag}{n}"

    def keep(self, t: int) -> int:
        if t not in self.kept:
            tensor = self.graph.tensors[t]
            self.kept[t] = self.add_tensor(tensor.name, tensor.shape, tensor.dtype, tensor.itemsize, tensor.kind)
        return self.kept[t]

    def add_tensor(self, name, shape, dtype, itemsize, kind, view=None, sources=()) -> int:
        self.tensors.append((name, shape, dtype, itemsize, kind, view, sources))
        return len(self.tensors) - 1

    def add_op(self, name: str, kind: str, inputs: list[int], outputs: list[int], attrs: dict, macs: int,
               vector_ops: int, gemm: Gemm | None) -> None:
        """Add an op record (``graph_from_ids``); the graph keeps ``attrs`` as it is."""
        self.ops.append((name, kind, inputs, outputs, attrs, macs, vector_ops, gemm))

    def read(self, t: int, region, flat: bool = False, steps: tuple[int, ...] | None = None) -> int:
        """The tensor a tile reads for ``region`` (a box, or a flat range) of original tensor t,
        every ``steps``-th element of it along each dimension (``regions.input_steps``)."""
        seen = self.regions_read(t, flat, steps)
        found = seen.get(region)
        if found is None:
            found = seen[region] = self._read(t, region, flat, steps)
        return found

    def regions_read(self, t: int, flat: bool = False, steps: tuple[int, ...] | None = None) -> dict[tuple, int]:
        """What ``read`` gave so far for each region of t read with ``flat`` and ``steps``
        (``reads``): the tiles of one op look the regions of each input up in it directly,
        calling ``_read`` for a new one and filing its answer there, as ``read`` does (none
        of them writes its inputs, which would empty it)."""
        by_how = self.reads.get(t)
        if by_how is None:
            by_how = self.reads[t] = {}
        seen = by_how.get((flat, steps))
        if seen is None:
            seen = by_how[(flat, steps)] = {}
        return seen

    def read_from_copy(self, t: int) -> bool:
        """Whether the reads of parts of t are views of its DRAM copy alone (no tile writes it:
        it starts in DRAM, or an untiled op made it whole)."""
        return t not in self.written and (self.graph.tensors[t].in_dram_initially or t in self.kept)

    def fresh_reads(self, t: int, seen: dict, geometry: "_ReadGeometry") -> dict:
        """The records of the read views ``_read`` would make for the regions of t that an op's
        tiles read (``geometry``) and ``seen`` does not hold, in the order they first appear:
        region -> record, for the caller to add when it first reads that region (the names
        count on in that order) instead of calling ``_read``. Only for a tensor whose reads in
        parts are views of its DRAM copy (it starts there, or an untiled op made it), read by
        one input of the op; the regions ``_read`` answers otherwise (the whole tensor, a view
        made before) are left to it."""
        if not self.read_from_copy(t):
            return {}
        tensor = self.graph.tensors[t]
        in_dram = tensor.in_dram_initially
        whole = None if geometry.steps is not None and in_dram else full_box(tensor.shape)  # read as is
        strides = geometry.strides
        # views made before, which ``_read`` finds (by another op, or by a strided region of
        # this one that reads the same elements as an earlier region: two strided regions
        # may make one view; box regions never do)
        known, strided = self.read_views.get(t, {}), geometry.steps is not None
        made, added = {}, set()  # added: the strided views made here
        for region, offset, shape in zip(geometry.regions, geometry.offsets, geometry.shapes):
            if region in seen or region == whole:
                continue
            if known or strided:
                key = (offset, shape, strides)
                if key in known or key in added:
                    continue
                if strided:
                    added.add(key)
            made[region] = (offset, shape)
        kind, sources = (tensor.kind, ()) if in_dram else ("activation", (self.kept[t],))
        name = tensor.name
        first = self.counter["r"].get(name, 0)
        self.counter["r"][name] = first + len(made)
        dtype, itemsize, stem = tensor.dtype, tensor.itemsize, name + "@r"
        return {region: (stem + str(first + n), shape, dtype, itemsize, kind, _new_view(name, offset, shape, strides),
                         sources)
                for n, (region, (offset, shape)) in enumerate(made.items())}

    def file_fresh_reads(self, t: int, fresh: dict, seen: dict) -> None:
        """File the read views of ``fresh_reads`` that the tiles made (all of them: each is
        made when first read) under their ids in ``seen``, as ``_read`` files what it makes."""
        if fresh:
            made = self.read_views.setdefault(t, {})
            for region, record in fresh.items():
                view = record[5]
                made[(view.offset, view.shape, view.strides)] = seen[region]

    def _read(self, t: int, region, flat: bool, steps: tuple[int, ...] | None) -> int:
        tensor = self.graph.tensors[t]
        produced_by_tiles = t in self.written
        whole = not flat and region == full_box(tensor.shape)
        if whole and not produced_by_tiles and (steps is None or not tensor.in_dram_initially):
            return self.keep(t)  # read on chip as is (a tensor an untiled op made stays whole)
        view = flat_view(tensor, region[0]) if flat else box_view(tensor, region, steps)
        key = (view.offset, view.shape, view.strides)  # the view's base is the tensor's
        if produced_by_tiles:
            written = self.written_index[t].get(key)
            if written is not None:
                return written  # exactly one tile's output: read it on chip
        read_views = self.read_views.setdefault(t, {})
        if key in read_views:
            return read_views[key]
        if produced_by_tiles:
            sources = self._overlapping_written(t, view, region if not flat else None)
            kind = "activation"
        elif tensor.in_dram_initially:
            sources, kind = [], tensor.kind
        else:  # produced on chip whole by an untiled op: stored, then read back in parts
            sources, kind = [self.keep(t)], "activation"
        made = self.add_tensor(self._fresh(tensor.name, "r"), view.shape, tensor.dtype, tensor.itemsize,
                               kind, view=view, sources=sources)
        read_views[key] = made
        return made

    def _overlapping_written(self, t: int, view: View, box=None) -> list[int]:
        """Ids of the written views of t that overlap ``view``, in the order they were written:
        flat spans must meet, and views of the same layout must meet along every dimension (a
        strided view by its bounding ``box``). A box read of a tensor its tiled producer wrote
        as a grid of boxes (all of them) computes them from the grid (``_Grid``); any other
        read looks them up by layout (``_Layout``). ``tests/test_tiling.py`` holds both to
        testing every written view."""
        grid = self.grids.get(t)
        if grid is not None and box is not None and len(self.written[t]) == grid.count:
            return self._in_grid(t, grid, view, box)
        written = self._decoded(t)
        dense = box_view(self.graph.tensors[t], box) if box is not None else view
        lo, hi = view_span(view)
        found = []
        for strides, layout in self.layouts[t].items():
            if strides == dense.strides and layout.rank == len(view.shape):
                # those meeting the read's box along every dimension, if their flat span meets
                # the read's (a strided read's span may end before its box does)
                for position in layout.meeting(_bounds_of(dense)):
                    w_lo, w_hi = written[position][2]
                    if w_lo < hi and lo < w_hi:
                        found.append(position)
            else:
                found.extend(layout.span_meeting(lo, hi))
        found.sort()
        return [written[position][1] for position in found]

    def _in_grid(self, t: int, grid: _Grid, view: View, box) -> list[int]:
        """``_overlapping_written`` of a box read of a tensor written as ``grid``: a dense read
        meets every view its box meets along every dimension (they share an element, so their
        flat spans meet too); a strided one, those whose span also meets its own."""
        written = self.written[t]
        if view.strides == grid.strides:
            positions = grid.meeting(box)
        else:
            positions = grid.meeting_span(box, *view_span(view))
        return [written[p][1] for p in positions]

    def write_grid(self, t: int, shape: tuple[int, ...], block: list[int], order: list[int]) -> None:
        """Declare that t is about to be written as the boxes of a block spec, in its loop
        order (``_Grid``), before any other write of it."""
        if t not in self.written:
            self.grids[t] = _Grid(shape, block, order)

    def _decoded(self, t: int) -> list[tuple[View, int, tuple[int, int], tuple]]:
        """The written views of t with their flat spans and bounds (``decoded``), each also
        filed under its layout (``layouts``)."""
        decoded = self.decoded.setdefault(t, [])
        layouts = self.layouts.setdefault(t, {})
        for view, made, box in self.written[t][len(decoded):]:
            bounds = box if box is not None else _bounds_of(view)
            layout = layouts.get(view.strides)
            if layout is None:
                layout = layouts[view.strides] = _Layout(len(bounds))
            span = view_span(view)
            layout.add(len(decoded), bounds, span)
            decoded.append((view, made, span, bounds))
        return decoded

    def write(self, t: int, region, flat: bool = False) -> int:
        """The written view a tile makes of ``region`` (a box, or a flat range) of original
        tensor t."""
        tensor = self.graph.tensors[t]
        view = flat_view(tensor, region[0]) if flat else box_view(tensor, region)
        return self._written(t, tensor, view, None if flat else tuple(map(tuple, region)))

    def write_box(self, t: int, box: Box, shape: tuple[int, ...]) -> int:
        """``write`` of ``box`` (a tuple of tuples) of t, whose shape (``box_shape``) the caller has."""
        tensor = self.graph.tensors[t]
        strides = row_major_strides(tensor.shape)
        offset = 0
        for (a, _), s in zip(box, strides):
            offset += a * s
        return self._written(t, tensor, _new_view(tensor.name, offset, shape, strides), box)

    def box_writer(self, t: int, offsets: list[int]):
        """``write_box`` for the boxes of one op's grid, a box given by its number in the grid
        as well (``offsets``: the flat offset of each box, by number), with what it looks up of
        t looked up once: nothing reads t while its tiles write it."""
        tensor, tensors = self.graph.tensors[t], self.tensors
        name, strides, stem = tensor.name, row_major_strides(tensor.shape), tensor.name + "@w"
        dtype, itemsize, kind = tensor.dtype, tensor.itemsize, tensor.kind
        counts = self.counter["w"]
        written, index = self.written.setdefault(t, []), self.written_index.setdefault(t, {})
        self.reads.pop(t, None)

        def write(number: int, box: Box, shape: tuple[int, ...]) -> int:
            offset = offsets[number]
            n = counts.get(name, 0)
            counts[name] = n + 1
            view = _new_view(name, offset, shape, strides)
            tensors.append((stem + str(n), shape, dtype, itemsize, kind, view, ()))
            made = len(tensors) - 1
            written.append((view, made, box))
            index[(offset, shape, strides)] = made
            return made

        return write

    def _written(self, t: int, tensor, view: View, box: Box | None) -> int:
        made = self.add_tensor(self._fresh(tensor.name, "w"), view.shape, tensor.dtype, tensor.itemsize,
                               tensor.kind, view=view)
        self.written.setdefault(t, []).append((view, made, box))
        self.written_index.setdefault(t, {})[(view.offset, view.shape, view.strides)] = made
        self.reads.pop(t, None)
        return made


def expand(graph: Graph, specs: dict[str, dict]) -> Graph:
    """The tiled graph of ``graph`` under ``specs`` (op name -> tile spec)."""
    unknown = sorted(set(specs) - set(graph.op_by_name))
    if unknown:
        raise PlanError(f"tiling names op {unknown[0]!r}, which is not in graph {graph.name!r}")
    b = _Builder(graph)
    templates = _Templates(graph, specs)
    for op in graph.ops:
        spec = specs.get(op.name)
        if spec is None:
            inputs = [b.read(t, full_box(graph.tensors[t].shape)) for t in op.inputs]
            outputs = [b.keep(t) for t in op.outputs]
            b.add_op(op.name, op.kind, inputs, outputs, dict(op.attrs), op.macs, op.vector_ops, op.gemm)
            continue
        check_spec(op, graph, spec)
        _expand_op(b, graph, op, spec, templates)
    meta = dict(graph.meta)
    meta.update(tiled_from=graph.name, tiling=dict(sorted(specs.items())))
    return graph_from_ids(tiled_name(graph.name), b.tensors, b.ops, meta)


def _expand_op(b: _Builder, graph: Graph, op: Op, spec: dict, templates: _Templates | None = None) -> None:
    """Add the tiles of ``op`` under ``spec`` to ``b``: per box of its output, in loop order,
    one tile per reduction slice (``_add_tiles``); ``templates``: the tile templates ops of
    one key share (``_Templates``)."""
    out = graph.tensors[op.outputs[0]]
    first = len(b.ops)
    slices = k_slices(op, graph, spec)
    if "flat" in spec:
        _add_flat_tiles(b, graph, op, spec)
    else:
        b.write_grid(op.outputs[0], out.shape, spec["block"], spec.get("order") or list(range(len(out.shape))))
        _add_tiles(b, graph, op, spec, slices, templates)
        if op.kind in REDUCTION_TILED_KINDS and len(slices) == 1:
            _mark_runs(b.ops, first)


def _add_flat_tiles(b: _Builder, graph: Graph, op: Op, spec: dict) -> None:
    """The tiles of a reshape-like op: each reads and writes one run of the flat index (its
    other inputs whole)."""
    out = graph.tensors[op.outputs[0]]
    for index, box in enumerate(tile_boxes(out.shape, spec)):
        inputs = [b.read(op.inputs[0], box, flat=True)]
        inputs += [b.read(t, full_box(graph.tensors[t].shape)) for t in op.inputs[1:]]
        output = b.write(op.outputs[0], box, flat=True)
        macs, gemm = _tile_compute(op, graph, box, None)
        vector_ops = math.ceil(tile_vector_ops(op, graph, box, None, True))
        b.add_op(f"{op.name}#{index}", op.kind, inputs, [output],
                 TileAttrs(_tiled_op(op), box, None), macs, vector_ops, gemm)


def _tiled_op(op: Op) -> tuple:
    """What a tile's ``TileAttrs`` say of the op it cuts: its name and its epilogue (or None)."""
    return op.name, op.attrs["epilogue"] if "epilogue" in op.attrs else None


def _add_tiles(b: _Builder, graph: Graph, op: Op, spec: dict, slices: list, templates: _Templates | None = None) -> None:
    """The tiles of ``op`` under a block spec. Per tile: the box of each input it reads and its
    costs (``_tile_template``), the tensor it reads for each box (``_Builder.read``, looked up
    here in the input's ``regions_read``), and its output (a written view on the last
    reduction slice, else partial sums)."""
    out_t = op.outputs[0]
    in_core = spec.get("acc") == "core" and len(slices) > 1
    template, shared = (templates.of(op, spec, slices) if templates is not None
                        else (_tile_template(op, graph, spec, slices), None))
    # per input: (tensor, steps, what its regions gave, the read views its tiles make afresh,
    # made ahead (``_Builder.fresh_reads``) when ops of its key share the regions' geometry
    # (made for one op, it costs what it saves)): an op never reads its own output, the only
    # tensor its tiles write, so the memo of each input holds throughout
    readers = []
    for j, (t, g) in enumerate(zip(op.inputs, input_steps(op, graph))):
        seen = b.regions_read(t, False, g)
        fresh = {}
        if shared is not None and op.inputs.count(t) == 1 and graph.tensors[t].shape and b.read_from_copy(t):
            geometry = shared.get((j, g))
            if geometry is None:
                regions = [regions[j] for _, _, tiles in template for _, _, regions, _ in tiles]
                geometry = shared[(j, g)] = _ReadGeometry(regions, graph.tensors[t].shape, g)
            fresh = b.fresh_reads(t, seen, geometry)
        readers.append((t, g, seen, fresh))
    offsets = shared.get("written") if shared is not None else None
    if offsets is None:
        offsets = grid_offsets(graph.tensors[out_t].shape, spec)
        if shared is not None:
            shared["written"] = offsets
    write = b.box_writer(out_t, offsets)
    psum_kind = "accumulator" if in_core else "activation"
    tiled = _tiled_op(op)
    tensors, ops, name_stem = b.tensors, b.ops, op.name + "#"
    index = 0
    for number, (box, shape, tiles) in enumerate(template):
        psum = None
        for k_range, last, regions, costs in tiles:
            inputs = []
            for (t, g, seen, fresh), region in zip(readers, regions):
                if region is not None:
                    found = seen.get(region)
                    if found is None:
                        record = fresh.get(region)
                        if record is None:
                            found = b._read(t, region, False, g)
                        else:  # ``_read``'s new read view, made ahead
                            tensors.append(record)
                            found = len(tensors) - 1
                        seen[region] = found
                    inputs.append(found)
            if psum is not None:
                inputs.append(psum)
            name = name_stem + str(index)
            if last:
                output = write(number, box, shape)
            else:
                tensors.append((name + ".psum", shape, "int32", PSUM_ITEMSIZE, psum_kind, None, ()))
                output = psum = len(tensors) - 1
            attrs = TileAttrs(tiled, box, k_range, (2 if last else 1) if in_core else 0)  # (box: shared tuples)
            ops.append((name, op.kind, inputs, [output], attrs, *costs))  # _Builder.add_op
            index += 1
    for t, _, seen, fresh in readers:
        b.file_fresh_reads(t, fresh, seen)


def _tile_template(op: Op, graph: Graph, spec: dict, slices: list):
    """What the tiles of ``op`` under a block spec are, but the tensors they name, made one
    box at a time: per box of the output in loop order, (the box, its shape, per reduction
    slice (its range, whether it is the last, the box each input reads (None: not read,
    ``box_rule_by_box``), the tile's (MACs, vector ops, Gemm))). The costs are computed once
    per cost key (below): tiles repeat their shape."""
    out = graph.tensors[op.outputs[0]]
    boxes_at = box_rule_by_box(op, graph)
    grouped = op.kind == "Conv" and int(op.attrs.get("group", 1)) != 1
    n_slices = len(slices)
    # per slice: (its range, its length in the cost key, whether it is the last)
    slice_keys = [(k_range, k_range[1] - k_range[0] if k_range else None, j == n_slices - 1)
                  for j, k_range in enumerate(slices)]
    tile_costs: dict[tuple, tuple] = {}  # cost key (below) -> (MACs, vector ops, Gemm)
    for box in tile_boxes(out.shape, spec):
        shape = box_shape(box)
        channels = box[1] if grouped else None
        boxes_read = boxes_at(box)
        tiles = []
        for k_range, k_len, last in slice_keys:
            # what the tile's MACs, Gemm (``_tile_compute``) and vector operations
            # (``tile_vector_ops``) depend on: its extents, its reduction slice's length,
            # whether it is the last slice, and for a grouped Conv where its output channels
            # lie (the groups they span)
            key = (shape, k_len, last, channels)
            costs = tile_costs.get(key)
            if costs is None:
                macs, gemm = _tile_compute(op, graph, box, k_range)
                costs = tile_costs[key] = (macs, math.ceil(tile_vector_ops(op, graph, box, k_range, last)), gemm)
            tiles.append((k_range, last, boxes_read(k_range, last), costs))
        yield box, shape, tiles


class _Templates:
    """The tile templates (``_tile_template``) of an expansion, shared by the ops of one key
    (``_template_key``): a template is kept from the first op of its key to the last (the
    ops of every key are counted first), so a graph whose ops all differ keeps none."""

    def __init__(self, graph: Graph, specs: dict[str, dict]) -> None:
        self.graph = graph
        self.left: dict[tuple, int] = {}  # key -> its ops not expanded yet
        self.kept: dict[tuple, list] = {}
        self.shared: dict[tuple, dict] = {}  # key -> what its ops derive from the template alike
        for op in graph.ops:
            key = self._key(op, specs.get(op.name))
            if key is not None:
                self.left[key] = self.left.get(key, 0) + 1

    def _key(self, op: Op, spec: dict | None, slices: list | None = None) -> tuple | None:
        if spec is None or not isinstance(spec, dict) or "block" not in spec:
            return None
        try:
            return _template_key(op, self.graph, spec, k_slices(op, self.graph, spec) if slices is None else slices)
        except Exception:  # a spec ``check_spec`` refuses: reported when its op is expanded
            return None

    def of(self, op: Op, spec: dict, slices: list) -> tuple:
        """The template of ``op`` under a block ``spec`` whose reduction slices are ``slices``,
        and a dict the ops of its key share (what they derive from the template alike:
        ``_ReadGeometry``): for an op with others of its key, the list kept for them and
        their dict; for an op alone, the template made box by box as it is read, and None."""
        key = self._key(op, spec, slices)
        left = self.left.get(key, 0)
        if left <= 1:  # the last op of its key (or one with no key)
            self.left.pop(key, None)
            found = self.kept.pop(key, None)
            if found is None:
                return _tile_template(op, self.graph, spec, slices), None
            return found, self.shared.pop(key)
        self.left[key] = left - 1
        found = self.kept.get(key)
        if found is None:
            found = self.kept[key] = list(_tile_template(op, self.graph, spec, slices))
            self.shared[key] = {}
        return found, self.shared[key]


def _template_key(op: Op, graph: Graph, spec: dict, slices: list) -> tuple | None:
    """What ``_tile_template`` reads of ``op`` and ``graph``, as a key: ops of equal keys (one
    per layer of a transformer) have equal templates. Its kind, attributes, MACs, vector
    operations and Gemm (with the loop nest), the shapes of its inputs and outputs, the spec
    and the slices; None when an attribute is not plain data (no key is safe then)."""
    try:
        attrs = _plain(op.attrs)
    except TypeError:
        return None
    gemm = op.gemm
    tensors = graph.tensors
    return (op.kind, attrs, op.macs, op.vector_ops,
            None if gemm is None else (gemm.m, gemm.n, gemm.k, gemm.batch, gemm.loops),
            tuple(tensors[t].shape for t in op.inputs), tuple(tensors[t].shape for t in op.outputs),
            _plain(spec), tuple(slices))


def _plain(value):
    """``value`` (numbers, text, lists and dicts of them) as a hashable key that tells apart
    what ``==`` does not (1, 1.0 and True): TypeError for anything else."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return type(value), value
    if isinstance(value, (list, tuple)):
        return type(value), tuple(map(_plain, value))
    if isinstance(value, dict):
        return dict, tuple((_plain(k), _plain(v)) for k, v in value.items())
    raise TypeError(f"not plain data: {type(value).__name__}")


#: The operands a run of tiles may share, by input position (``runs`` attribute of a tile).
RUN_OPERANDS = (("a", 0), ("b", 1))


def _mark_runs(ops: OpColumnsBuilder, first: int) -> None:
    """Mark the tiles of one GEMM-like op (ops ``first`` on of ``ops``) that read the same view
    of an operand as the tile before or after them (attribute ``runs``: operand -> ``"first"``,
    ``"middle"`` or ``"last"``): an array that holds that operand still keeps it between them
    (``npusim.hw.costs.stationary_run``). The loop order decides the runs: weights stay the
    same across consecutive row blocks when the rows are the innermost tiled loop."""
    inputs = [ops.inputs_of(j) for j in range(first, len(ops))]
    for operand, i in RUN_OPERANDS:
        names = [ins[i] if len(ins) > i else None for ins in inputs]
        for j, name in enumerate(names):
            same_before = j > 0 and name is not None and name == names[j - 1]
            same_after = j + 1 < len(names) and name is not None and name == names[j + 1]
            if same_before or same_after:
                position = "middle" if same_before and same_after else ("last" if same_before else "first")
                ops.mark_run(first + j, operand, position)


def tile_vector_ops(op: Op, graph: Graph, box: Box, k_range, last: bool) -> float:
    """Vector-unit operations of one tile: its box's share of the op's, all on the last
    reduction slice (a GEMM's epilogue), or, for an op reduced along its inputs (a Sum of N),
    on every slice in proportion to the inputs it reads."""
    share = box_volume(box) / max(graph.tensors[op.outputs[0]].elements, 1)
    if op.kind in INPUT_REDUCED_KINDS and k_range is not None:
        return op.vector_ops * share * (k_range[1] - k_range[0]) / max(len(op.inputs), 1)
    return op.vector_ops * share if last else 0.0


def _tile_compute(op: Op, graph: Graph, box: Box, k_range):
    """(MACs, Gemm) of one tile of a GEMM-like op; (proportional MACs, None) otherwise."""
    volume = box_volume(box)
    if op.kind not in REDUCTION_TILED_KINDS:
        out = graph.tensors[op.outputs[0]]
        return (op.macs * volume) // max(out.elements, 1), None
    k_len = (k_range[1] - k_range[0]) if k_range else reduction_size(op, graph)
    if op.kind == "Conv":
        w = graph.tensors[op.inputs[1]].shape
        kernel = 1
        for d in w[2:]:
            kernel *= d
        groups = int(op.attrs.get("group", 1))
        c0, c1 = box[1]
        pixels = volume // (c1 - c0)
        if groups == 1:
            gemm = _new_gemm(pixels, c1 - c0, k_len * kernel, 1, None)
        else:
            per_group = w[0] // groups
            spanned = (c1 - 1) // per_group - c0 // per_group + 1
            gemm = _new_gemm(pixels, -(-(c1 - c0) // spanned), w[1] * kernel, spanned, None)
        return volume * k_len * kernel, _with_tile_loops(gemm, op.gemm, box, k_len if groups == 1 else w[1])
    m = box[-2][1] - box[-2][0]
    n = box[-1][1] - box[-1][0]
    batch = volume // (m * n)
    if len(graph.tensors[op.inputs[1]].shape) <= 2:
        # a linear layer (B has no batch dims): A's leading dims fold into M, as the untiled
        # op's GEMM does (``op_costs.matmul``) -- 4 sequences x 1 token is one M = 4 GEMM
        m, batch = m * batch, 1
    gemm = _new_gemm(m, n, k_len, batch, None)
    return gemm.macs, gemm


def _with_tile_loops(gemm: Gemm, whole: Gemm | None, box: Box, c: int) -> Gemm:
    """``gemm`` of a conv tile with its loop nest (``Gemm.loops``) cut from the op's: the tile's
    batch, channels and output rows and columns, ``c`` input channels per group, and the input
    rows and columns its window spans."""
    loops = whole.loops if whole is not None else None
    if loops is None:
        return gemm
    extent = [hi - lo for lo, hi in box]
    oy, ox = (extent[2], extent[3]) if len(box) == 4 else (1, extent[2])
    iy = min(loops.sy * (oy - 1) + loops.dy * (loops.fy - 1) + 1, loops.iy or oy)
    ix = min(loops.sx * (ox - 1) + loops.dx * (loops.fx - 1) + 1, loops.ix or ox)
    if extent[0] * oy * ox != gemm.m or c * loops.fy * loops.fx != gemm.k:
        return gemm
    tile = _new_loops(extent[0], gemm.batch, gemm.n, c, oy, ox, loops.fy, loops.fx, loops.sy, loops.sx, loops.dy,
                      loops.dx, iy, ix)
    return _new_gemm(gemm.m, gemm.n, gemm.k, gemm.batch, tile)


#: ``Gemm(m, n, k, batch, loops)`` and ``ConvLoops(b, g, k, c, oy, ox, fy, fx, sy, sx, dy, dx, iy, ix)``,
#: made faster (``npusim.util.fast_init``): the tile search costs thousands of tiles per op.
_new_gemm = positional_constructor(Gemm)
_new_loops = positional_constructor(ConvLoops)


#: (MACs, Gemm) of one tile: public for the tiler's time estimate (planners.tiling.estimate).
tile_compute = _tile_compute
