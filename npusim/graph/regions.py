"""Which part of each input an op reads to produce one box of its output.

A *box* is a tuple of half-open ``(start, stop)`` ranges, one per dimension. For a tile of
an op — a box of its (first) output, plus a range of the reduction dimension for GEMM-like
ops — ``input_boxes`` gives the box of every input the tile reads, or ``None`` for an input
it does not read at all (a Concat tile that falls inside one operand).

The rules, by op family:

===================  ========================================================================
family               input box for an output box
===================  ========================================================================
Conv                 batch as the output; input channels of the groups the output channels
                     belong to (or the reduction range); spatial rows/cols with the halo
                     ``[a·s − pad, (b−1)·s − pad + (k−1)·d + 1)`` clipped to the input;
                     weights: output-channel range × reduction range × whole kernel;
                     bias: the output-channel range (read by the last reduction step only)
MatMul / Gemm        A: batch (broadcast) × M range × K range; B: batch × K range × N range
                     (transposes honoured); Gemm's C: broadcast, last reduction step only
MaxPool/AveragePool  channels as the output; spatial halo as for Conv
Concat               each operand's share of the output range along the axis (None if empty)
Transpose            output dim d reads input dim perm[d] over the same range
Resize               proportional ranges along resized dims, widened by one for interpolation
Gather               indices: the output's index dims; data: the leading rows of the gathered
                     axis, as many as the tile gathers (the indices are data: their values
                     are not known statically, so this is an approximation of the addresses,
                     exact in bytes)
everything else      NumPy broadcasting (right-aligned): an input dim of 1 reads [0, 1), an
                     equal dim reads the same range, any other dim is read whole (e.g. the
                     reduced axes of ReduceMean, or a Pad/Slice operand); an input of higher
                     rank than the output (a reduction without keepdims) aligns on the left
===================  ========================================================================

``reshape_like`` ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) are tiled on the flat
element index instead; see ``npusim.graph.tiling``.

A strided window that skips rows (a 1×1 convolution of stride 2, a dilated kernel whose taps
and stride share a factor) reads only every ``step``-th row and column of its box:
``input_steps`` gives those steps, and a tile loads that strided view, not the whole box.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math

from npusim.graph.model import Graph, Op
from npusim.graph.ops.kinds import INPUT_REDUCED_KINDS, REDUCTION_TILED_KINDS, RESHAPE_LIKE, WINDOW_KINDS

Box = tuple[tuple[int, int], ...]



@functools.lru_cache(maxsize=4096)
def _full_box(shape: tuple[int, ...]) -> Box:
    return tuple((0, d) for d in shape)


def full_box(shape) -> Box:
    """The box of a whole tensor (memoised: a weight's box is asked for by every tile)."""
    return _full_box(shape) if type(shape) is tuple else tuple((0, d) for d in shape)


def box_shape(box: Box) -> tuple[int, ...]:
    return tuple([b - a for a, b in box])


def box_volume(box: Box) -> int:
    n = 1
    for a, b in box:
        n *= b - a
    return n


def _halo(a: int, b: int, stride: int, pad: int, kernel: int, dilation: int, size: int) -> tuple[int, int]:
    lo = a * stride - pad
    hi = (b - 1) * stride - pad + (kernel - 1) * dilation + 1
    lo, hi = max(lo, 0), min(hi, size)
    if hi <= lo:  # the window reads only padding (a 1×1 conv with pads): one edge row keeps the box real
        lo = min(lo, size - 1)
        hi = lo + 1
    return lo, hi


def _spatial(op: Op, rank: int) -> tuple[list[int], list[int], list[int], list[int]]:
    n = rank - 2
    kernel = list(op.attrs.get("kernel_shape") or [1] * n)
    strides = list(op.attrs.get("strides") or [1] * n)
    dilations = list(op.attrs.get("dilations") or [1] * n)
    pads = list(op.attrs.get("pads") or [0] * (2 * n))
    return kernel, strides, dilations, pads[:n]


def input_steps(op: Op, graph: Graph) -> list[tuple[int, ...] | None]:
    """Per input, the step between the elements the op reads along each dimension of its box,
    or None where it reads every one. A window of ``k`` taps ``d`` apart moved by stride ``s``
    reads input rows ``o·s − pad + j·d``: all of them on a grid of ``s`` when k = 1, of
    gcd(s, d) otherwise. Only the data input of a Conv or pooling op has steps, and only along
    spatial dimensions whose padding lies on that grid (so every tile's first row does too)."""
    steps: list[tuple[int, ...] | None] = [None] * len(op.inputs)
    if op.kind != "Conv" and op.kind not in WINDOW_KINDS or not op.inputs or "epilogue_from" in op.attrs:
        return steps
    x = graph.tensors[op.inputs[0]].shape
    if len(x) < 3:
        return steps
    kernel, strides, dilations, pads = _spatial(op, len(x))
    if op.kind == "Conv" and len(op.inputs) > 1:
        kernel = list(graph.tensors[op.inputs[1]].shape[2:])
    grid = [1, 1]
    for i in range(len(x) - 2):
        step = strides[i] if kernel[i] == 1 else math.gcd(strides[i], dilations[i])
        grid.append(step if step > 1 and pads[i] % step == 0 else 1)
    if any(g > 1 for g in grid):
        steps[0] = tuple(grid)
    return steps


def stepped_shape(box: Box, steps: tuple[int, ...] | None) -> tuple[int, ...]:
    """Elements along each dimension of ``box`` read every ``steps``-th (all when None)."""
    if steps is None:
        return box_shape(box)
    return tuple(-(-(b - a) // g) for (a, b), g in zip(box, steps))


def stepped_volume(box: Box, steps: tuple[int, ...] | None) -> int:
    return box_volume(box) if steps is None else math.prod(stepped_shape(box, steps))


def reduction_size(op: Op, graph: Graph) -> int:
    """Length of the reduction dimension a GEMM-like op may be split along, the number of
    inputs of an op reduced along its inputs (a Sum of N), 1 if none."""
    if op.kind in INPUT_REDUCED_KINDS:
        return len(op.inputs)
    shapes = [graph.tensors[t].shape for t in op.inputs]
    if op.kind == "Conv":
        return shapes[1][1]  # input channels per group
    if op.kind == "MatMul":
        return shapes[0][-1]
    if op.kind == "Gemm":
        a = shapes[0]
        return a[0] if op.attrs.get("transA") else a[1]
    return 1


def broadcast_box(in_shape, out_shape, out_box: Box) -> Box:
    """The NumPy-broadcast rule (right-aligned; left-aligned for rank-reducing ops)."""
    if type(in_shape) is tuple and type(out_shape) is tuple:
        picks = _broadcast_picks(in_shape, out_shape)
    else:
        picks = _broadcast_picks.__wrapped__(tuple(in_shape), tuple(out_shape))
    return tuple(out_box[k] if k is not None else whole for k, whole in picks)


@functools.lru_cache(maxsize=4096)
def _broadcast_picks(in_shape: tuple, out_shape: tuple) -> tuple:
    """Per input dimension of ``broadcast_box``: (the output dimension whose range it reads,
    None) or (None, the range it reads whatever the output box: [0, 1) or whole). Memoised
    by shapes: every tile of an element-wise op asks."""
    r_in, r_out = len(in_shape), len(out_shape)
    if r_in > r_out:  # reduction without keepdims: leading dims correspond
        pairs = [(k, k) for k in range(r_out)]
    else:
        pairs = [(k, k + r_out - r_in) for k in range(r_in)]
    picks = [(None, (0, d)) for d in in_shape]
    for k_in, k_out in pairs:
        d_in, d_out = in_shape[k_in], out_shape[k_out]
        if d_in == 1 and d_out != 1:
            picks[k_in] = (None, (0, 1))
        elif d_in == d_out:
            picks[k_in] = (k_out, None)
    return tuple(picks)


def input_boxes(op: Op, graph: Graph, out_box: Box, k_range: tuple[int, int] | None = None,
                last_k: bool = True) -> list[Box | None]:
    """Box of each input (in ``op.inputs`` order) read by the tile ``out_box`` × ``k_range``."""
    return box_rule(op, graph)(out_box, k_range, last_k)


def box_rule(op: Op, graph: Graph):
    """``input_boxes`` of ``op`` as a function of ``(out_box, k_range, last_k)``, with what it
    reads of the op and the graph (shapes, a convolution's attributes) looked up once: the
    tiler and the expansion ask for the boxes of every tile of an op."""
    shapes, out_shape, epilogue = _rule_inputs(op, graph)
    if op.kind == "Conv":
        core = _conv_rule(op, shapes)
    else:
        def core(out_box, k_range, last_k):
            return _core_boxes(op, shapes, out_shape, out_box, k_range, last_k)
    if epilogue is None:
        return core
    unread = [None] * len(epilogue)

    def with_epilogue(out_box, k_range, last_k):
        boxes = core(out_box, k_range, last_k)
        if not last_k:
            boxes.extend(unread)
            return boxes
        for picks in epilogue:
            boxes.append(tuple([out_box[k] if k is not None else whole for k, whole in picks]))
        return boxes

    return with_epilogue


def box_rule_by_box(op: Op, graph: Graph):
    """``box_rule`` in two steps, ``box_rule_by_box(op, graph)(out_box)(k_range, last_k)``:
    what depends on the output box alone (a convolution's rows and columns with their halo,
    a fused epilogue's boxes) is found once for all the reduction slices of a box (the
    expansion's tiles, ``npusim.graph.tiling``). The boxes are those ``box_rule`` gives."""
    shapes, out_shape, epilogue = _rule_inputs(op, graph)
    if op.kind == "Conv":
        core_at = _conv_rule_by_box(op, shapes)
    else:
        def core_at(out_box):
            def core(k_range, last_k):
                return _core_boxes(op, shapes, out_shape, out_box, k_range, last_k)
            return core
    if epilogue is None:
        return core_at
    unread = [None] * len(epilogue)

    def at(out_box):
        core = core_at(out_box)
        after_last = [tuple([out_box[k] if k is not None else whole for k, whole in picks]) for picks in epilogue]

        def with_epilogue(k_range, last_k):
            boxes = core(k_range, last_k)
            boxes.extend(after_last if last_k else unread)
            return boxes

        return with_epilogue

    return at


def _rule_inputs(op: Op, graph: Graph) -> tuple[list, tuple, list | None]:
    """What the box rules read of ``op``: the shapes of its own inputs (a fused op's first
    ones), its output's shape, and a fused op's epilogue inputs as picks (None if not fused)."""
    start = op.attrs.get("epilogue_from")
    out_shape = graph.tensors[op.outputs[0]].shape
    fused = start is not None and len(op.inputs) > start  # a fused op (npusim.graph.fusion)
    shapes = [graph.tensors[t].shape for t in (op.inputs[:start] if fused else op.inputs)]
    if not fused:
        return shapes, out_shape, None
    kinds = op.attrs.get("epilogue_input_kinds") or [""] * (len(op.inputs) - start)
    epilogue = [_epilogue_picks(graph.tensors[t].shape, out_shape, kind) for t, kind in zip(op.inputs[start:], kinds)]
    return shapes, out_shape, epilogue


def _core_boxes(op: Op, shapes: list, out_shape, out_box: Box, k_range, last_k: bool) -> list[Box | None]:
    """``input_boxes`` of the op's own inputs of ``shapes`` (a fused op's first ones)."""
    kind = op.kind
    if kind == "Conv":
        return _conv_boxes(op, shapes, out_box, k_range, last_k)
    if kind in ("MatMul", "Gemm"):
        return _matmul_boxes(op, shapes, out_shape, out_box, k_range, last_k)
    if kind in WINDOW_KINDS:
        kernel, strides, dilations, pads = _spatial(op, len(out_shape))
        box = list(out_box[:2])
        for i in range(len(out_shape) - 2):
            a, b = out_box[2 + i]
            box.append(_halo(a, b, strides[i], pads[i], kernel[i], dilations[i], shapes[0][2 + i]))
        return [tuple(box)] + [full_box(s) for s in shapes[1:]]
    if kind == "Concat":
        return _concat_boxes(op, shapes, out_shape, out_box)
    if kind == "Transpose":
        perm = op.attrs.get("perm") or list(reversed(range(len(out_shape))))
        box = [None] * len(out_shape)
        for d, p in enumerate(perm):
            box[p] = out_box[d]
        return [tuple(box)]
    if kind == "Resize":
        box = []
        for d, (a, b) in enumerate(out_box):
            n_in, n_out = shapes[0][d], out_shape[d]
            if n_in == n_out:
                box.append((a, b))
            else:  # proportional, widened by one on each side for interpolation neighbours
                box.append((max(a * n_in // n_out - 1, 0), min(-(-b * n_in // n_out) + 1, n_in)))
        return [tuple(box)] + [full_box(s) for s in shapes[1:]]
    if kind == "Gather":
        return _gather_boxes(op, shapes, out_box)
    if kind in INPUT_REDUCED_KINDS and k_range is not None:  # a slice of the inputs reduced (``k``)
        return [broadcast_box(s, out_shape, out_box) if k_range[0] <= i < k_range[1] else None
                for i, s in enumerate(shapes)]
    return [broadcast_box(s, out_shape, out_box) for s in shapes]


def _epilogue_picks(shape, out_shape, kind: str) -> tuple:
    """What a fused epilogue reads of one of its inputs for an output tile, after the last
    reduction slice, as picks (``_broadcast_picks``: per input dimension, the output
    dimension whose range it reads, or the range it reads whatever the tile): batch-norm
    parameters (rank 1) per channel (dim 1, ONNX's layout), anything else by broadcasting (a
    residual: the tile's own box)."""
    if kind == "BatchNormalization" and len(shape) == 1 and len(out_shape) > 1:
        return ((1, None),)
    return _broadcast_picks.__wrapped__(tuple(shape), tuple(out_shape))


def _conv_boxes(op, shapes, out_box, k_range, last_k):
    return _conv_rule(op, shapes)(out_box, k_range, last_k)


def _conv_rule(op, shapes):
    """The boxes a Conv's tile reads (``box_rule``): input channels of the groups its output
    channels belong to (or the reduction range), the halo of its rows and columns; the
    weights' output-channel range × reduction range × whole kernel; the bias's range
    (``_conv_rule_by_box`` in one step)."""
    at = _conv_rule_by_box(op, shapes)

    def boxes(out_box, k_range, last_k):
        return at(out_box)(k_range, last_k)

    return boxes


def _conv_rule_by_box(op, shapes):
    """A Conv's boxes in two steps (``box_rule_by_box``): the halo of a box's rows and
    columns, then per reduction slice its input channels and weights. The halo of each
    spatial dimension is ``_halo`` with its last row's offset from (b - 1) * stride, reach =
    (kernel - 1) * dilation + 1 - pad, added up once."""
    x, w = shapes[0], shapes[1]
    groups = int(op.attrs.get("group", 1))
    per_group_out = w[0] // groups
    cin_g = w[1]
    _, strides, dilations, pads = _spatial(op, len(x))
    kernel = list(w[2:])
    # (dimension of the box, stride, pad, reach, input size) per spatial dimension, as ``_conv_rule``
    windows = [(2 + i, strides[i], pads[i], (kernel[i] - 1) * dilations[i] + 1 - pads[i], x[2 + i])
               for i in range(len(x) - 2)]
    whole_kernel = full_box(w[2:])
    has_bias = len(shapes) > 2

    def at(out_box):
        c0, c1 = out_box[1]
        halos = []
        for d, stride, pad, reach, size in windows:  # _halo, inlined: every tile asks
            a, b = out_box[d]
            lo, hi = a * stride - pad, (b - 1) * stride + reach
            if lo < 0:
                lo = 0
            if hi > size:
                hi = size
            if hi <= lo:
                lo = min(lo, size - 1)
                hi = lo + 1
            halos.append((lo, hi))
        halos = tuple(halos)
        if groups != 1:
            g0, g1 = c0 // per_group_out, (c1 - 1) // per_group_out + 1
        outputs, bias = (c0, c1), ((c0, c1),)

        def boxes(k_range, last_k):
            k0, k1 = k_range or (0, cin_g)
            if groups == 1:
                channels = (k0, k1)
            else:
                channels = (g0 * cin_g + k0, (g1 - 1) * cin_g + k1) if g1 - g0 == 1 else (g0 * cin_g, g1 * cin_g)
            found = [(out_box[0], channels) + halos, (outputs, (k0, k1)) + whole_kernel]
            if has_bias:
                found.append(bias if last_k else None)
            return found

        return boxes

    return at


def _matmul_boxes(op, shapes, out_shape, out_box, k_range, last_k):
    if op.kind == "Gemm":
        m_range, n_range = out_box[0], out_box[1]
        k = shapes[0][0] if op.attrs.get("transA") else shapes[0][1]
        k_range = k_range or (0, k)
        a = (k_range, m_range) if op.attrs.get("transA") else (m_range, k_range)
        b = (n_range, k_range) if op.attrs.get("transB") else (k_range, n_range)
        boxes = [a, b]
        if len(shapes) > 2:
            boxes.append(broadcast_box(shapes[2], out_shape, out_box) if last_k else None)
        return boxes
    a_shape, b_shape = shapes
    k_range = k_range or (0, a_shape[-1])
    batch_out = out_shape[:-2]
    batch_box = out_box[:-2]
    a_batch = broadcast_box(a_shape[:-2], batch_out, batch_box) if len(a_shape) > 2 else ()
    b_batch = broadcast_box(b_shape[:-2], batch_out, batch_box) if len(b_shape) > 2 else ()
    return [a_batch + (out_box[-2], k_range), b_batch + (k_range, out_box[-1])]


def _concat_boxes(op, shapes, out_shape, out_box):
    """Each input's part of the output box along the concat axis (None: not read). The inputs
    overlapping the box are found by bisection, so a tile of a 10,000-input Concat costs
    little more than the list it returns."""
    axis = op.attrs.get("axis", 0) % len(out_shape)
    a, b = out_box[axis]
    starts = _prefix_sums(tuple(s[axis] for s in shapes))  # input i covers [starts[i], starts[i+1])
    boxes: list = [None] * len(shapes)
    i = max(bisect.bisect_right(starts, a) - 1, 0)
    while i < len(shapes) and starts[i] < b:
        lo, hi = max(a, starts[i]), min(b, starts[i + 1])
        if lo < hi:
            box = list(out_box)
            box[axis] = (lo - starts[i], hi - starts[i])
            boxes[i] = tuple(box)
        i += 1
    return boxes


def operand_axis(op: Op, graph: Graph) -> tuple[int, tuple[int, ...]] | None:
    """(output dimension, each input's extent along it) of an op whose inputs lie side by side
    along one output dimension, each read only by the tiles that cover its own range (a
    Concat: its axis); None for any other op. A tile whose block along that dimension is a
    whole number of inputs reads each input it covers as one view."""
    if op.kind != "Concat" or len(op.inputs) < 2 or not op.outputs:
        return None
    out_shape = graph.tensors[op.outputs[0]].shape
    if not out_shape:
        return None
    axis = op.attrs.get("axis", 0) % len(out_shape)
    extents = tuple(graph.tensors[t].shape[axis] if len(graph.tensors[t].shape) > axis else 0 for t in op.inputs)
    return axis, extents


@functools.lru_cache(maxsize=64)
def _prefix_sums(sizes: tuple[int, ...]) -> tuple[int, ...]:
    return (0,) + tuple(itertools.accumulate(sizes))


def _gather_boxes(op, shapes, out_box):
    data, indices = shapes[0], shapes[1]
    axis = op.attrs.get("axis", 0) % len(data)
    q = len(indices)
    index_box = tuple(out_box[axis:axis + q])
    gathered = box_volume(index_box) if q else 1
    data_box = list(out_box[:axis]) + [(0, min(gathered, data[axis]))] + list(out_box[axis + q:])
    return [tuple(data_box), index_box] + [full_box(s) for s in shapes[2:]]


def untileable_dims(op: Op, graph: Graph) -> set[int]:
    """Output dims a tile must keep whole: the axes an op normalises over."""
    rank = len(graph.tensors[op.outputs[0]].shape)
    if op.kind in ("Softmax", "LogSoftmax", "Hardmax"):
        return {op.attrs.get("axis", -1) % rank}
    if op.kind == "LayerNormalization":
        return set(range(op.attrs.get("axis", -1) % rank, rank))
    return set()
