"""Tensor layouts in DRAM: which order a tensor's dimensions are stored in.

The graph keeps ONNX's logical shapes (NCHW for images). In DRAM an NPU stores image-like
tensors channels-last (``dram.layout: nhwc``, the default: TFLite, Arm Ethos-U, Qualcomm
Hexagon NN and NVIDIA's tensor-core kernels store activations as NHWC and weights as OHWI),
so a tile that cuts rows (H) or keeps all channels moves long contiguous runs, where in NCHW
a tile of a few columns is one short run per channel and row.

*Image-like* tensors are those whose dimension 1 means channels: rank >= 3 inputs and outputs
of convolutions, pools and batch norms, and every tensor of the same rank that flows through
element-wise ops, pads and concats from or to them (found to a fixpoint). Everything else —
matrices, attention tensors [B, heads, S, d], tensors across a Reshape or Transpose — keeps its
row-major order: their logical order is already their storage order.

Weights are constants, so a compiler stores them in DRAM in the order the tiles read them
(Arm's Vela compiler encodes each Ethos-U block's weights as one stream; TPU compilers
pre-tile weights likewise): a tile of a weight is one contiguous run, whatever the layout.

A layout is a permutation ``order`` of the logical dimensions, outermost first: NHWC of a
rank-4 tensor is (0, 2, 3, 1). ``storage_view`` turns a box of a tensor (the logical view a
tile has) into the DRAM view a DMA walks: its shape and strides in storage order, so the
innermost dimension is the contiguous one and chunks come in increasing address order.
"""

from __future__ import annotations

from dataclasses import replace

from npusim.graph.model import Graph, row_major_strides
from npusim.graph.ops.kinds import CHANNEL_OPS, REORDERING_OPS
from npusim.graph.tiling import view_region

LAYOUTS = ("nhwc", "nchw")



def image_like_tensors(graph: Graph) -> frozenset[str]:
    """Names of the tensors whose dimension 1 holds channels (see the module docstring)."""
    marked: set[int] = set()
    for op in graph.ops:
        if op.kind in CHANNEL_OPS:
            marked.update(t for t in (*op.inputs, *op.outputs) if len(graph.tensors[t].shape) >= 3)
    changed = True
    while changed:  # spread through element-wise ops in both directions
        changed = False
        for op in graph.ops:
            if op.kind in REORDERING_OPS or op.kind in CHANNEL_OPS or not op.outputs:
                continue
            rank = len(graph.tensors[op.outputs[0]].shape)
            if rank < 3:
                continue
            same = [t for t in (*op.inputs, *op.outputs) if len(graph.tensors[t].shape) == rank]
            if any(t in marked for t in same) and not all(t in marked for t in same):
                marked.update(same)
                changed = True
    return frozenset(graph.tensors[t].name for t in marked)


def storage_order(rank: int, layout: str, image_like: bool) -> tuple[int, ...]:
    """Logical dimensions in storage order, outermost first."""
    if layout == "nhwc" and image_like and rank >= 3:
        return (0, *range(2, rank), 1)
    return tuple(range(rank))


def storage_strides(shape: tuple[int, ...], order: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of each logical dimension when stored in ``order``."""
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def storage_view(base_shape: tuple[int, ...], box: list[tuple[int, int]], order: tuple[int, ...],
                 steps: tuple[int, ...] | None = None):
    """(element offset, shape, strides) of a box of a tensor stored in ``order`` (every
    ``steps``-th element along each dimension), with shape and strides listed in storage
    order (outermost first)."""
    strides = storage_strides(base_shape, order)
    offset = sum(a * s for (a, _), s in zip(box, strides))
    steps = steps or (1,) * len(box)
    return (offset, tuple(-(-(box[d][1] - box[d][0]) // steps[d]) for d in order),
            tuple(strides[d] * steps[d] for d in order))


class DramLayout:
    """Where each tensor's elements sit in its DRAM buffer under ``layout``.

    Built from the untiled graph (which knows the base tensors of every tile view). Tiles are
    views whose offset and strides are row-major in their base tensor; ``view_of`` re-expresses
    them in the base tensor's storage order. A flat view (a run of a reshape-like op's flat
    index) is taken as a contiguous run of storage: such ops read their input in the order it
    is stored.
    """

    def __init__(self, untiled: Graph, layout: str = "nhwc") -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"unknown DRAM layout {layout!r}, expected one of {', '.join(LAYOUTS)}")
        self.layout = layout
        self._image_like = image_like_tensors(untiled) if layout != "nchw" else frozenset()
        self._shapes = {t.name: tuple(t.shape) for t in untiled.tensors}
        self._walks: dict[tuple, tuple | None] = {}  # (base, view shape, view strides) -> its walk

    def order_of(self, name: str, rank: int) -> tuple[int, ...]:
        return storage_order(rank, self.layout, name in self._image_like)

    def view_of(self, tensor) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        """(element offset in its buffer, shape, strides) of ``tensor``'s bytes, storage order."""
        if tensor.view is None:
            return 0, (tensor.elements,), (1,)
        v = tensor.view
        if tensor.kind == "weight":  # stored pre-tiled: one run from the tile's first element
            return v.offset, (tensor.elements,), (1,)
        walk = self._walk(v)
        if walk is None:  # stored in its logical order
            return v.offset, tuple(v.shape), tuple(v.strides)
        row_major, stored, shape, strides = walk
        # The box's first element, decoded from the row-major offset (``view_region``),
        # placed by the storage strides: only the offset differs between views of one walk.
        rest, offset = v.offset, 0
        for r, s in zip(row_major, stored):
            offset += rest // r * s
            rest %= r
        return offset, shape, strides

    def _walk(self, v) -> tuple | None:
        """What the storage view of ``v`` shares with every view of the same base, shape and
        strides (the tiles of one op): the base's row-major and storage strides and the view's
        storage-order shape and strides; None when the base is stored in its logical order
        (or is not a box of the same rank). Memoised."""
        key = (v.base, v.shape, v.strides)
        if key in self._walks:
            return self._walks[key]
        base_shape = self._shapes.get(v.base)
        walk = None
        if base_shape is not None and len(v.shape) == len(base_shape) >= 2:
            order = self.order_of(v.base, len(base_shape))
            if order != tuple(range(len(base_shape))):
                region = view_region(replace(v, offset=0), base_shape)  # (npusim.graph.tiling)
                box = [(a, a + (n - 1) * g + 1) for a, n, g in region]
                _, shape, strides = storage_view(base_shape, box, order, tuple(g for _, _, g in region))
                walk = (row_major_strides(base_shape), storage_strides(base_shape, order), shape, strides)
        self._walks[key] = walk
        return walk
