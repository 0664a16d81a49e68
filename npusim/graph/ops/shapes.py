"""The shape relations and attribute types of ``npusim.graph.ops.rules``, one function each.

A shape check takes an op's plain JSON ``attrs`` and the shapes of its inputs and outputs
(by ONNX argument position) and raises ``Bad(field, value, expected)`` at the first relation
that does not hold; an attribute type check returns None, or what was expected.
"""

from __future__ import annotations

import math

Shape = tuple[int, ...]


class Bad(Exception):
    def __init__(self, field_name: str, value, expected: str):
        super().__init__(field_name)
        self.field, self.value, self.expected = field_name, value, expected


class Count(int):
    """A number of tensors, shown as '3 tensors' in a message."""

    def __repr__(self) -> str:
        return f"{int(self)} tensor{'s' if self != 1 else ''}"


# --- attribute types --------------------------------------------------------------------------


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def INT(v) -> str | None:
    return None if _int(v) else "an integer"


def FLAG(v) -> str | None:
    return None if _int(v) and v in (0, 1) else "0 or 1"


def POSITIVE(v) -> str | None:
    return None if _int(v) and v >= 1 else "an integer >= 1"


def INTS(v) -> str | None:
    return None if isinstance(v, list) and all(_int(x) for x in v) else "a list of integers"


def FLOAT(v) -> str | None:  # the importer writes non-finite floats as strings ('inf')
    ok = (isinstance(v, (int, float)) and not isinstance(v, bool)) or v in ("inf", "-inf", "nan")
    return None if ok else "a number"


def STR(v) -> str | None:
    return None if isinstance(v, str) else "a string"


def AUTO_PAD(v) -> str | None:
    return None if v in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID") else \
        "one of 'NOTSET', 'SAME_UPPER', 'SAME_LOWER', 'VALID'"


# --- shape helpers ----------------------------------------------------------------------------


def broadcast(*shapes: Shape) -> Shape | None:
    """NumPy broadcasting of shapes (right-aligned; 1 stretches), or None."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(rank):
        dims = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _same(what: str, got: Shape, want: Shape, why: str) -> None:
    if tuple(got) != tuple(want):
        raise Bad(what, list(got), f"{list(want)} ({why})")


def _rank_at_least(what: str, shape: Shape, rank: int, why: str) -> None:
    if len(shape) < rank:
        raise Bad(what, list(shape), f"a shape of rank >= {rank} ({why})")


def _axis(attrs: dict, name: str, rank: int, default: int | None = 0) -> int:
    axis = attrs.get(name, default)
    if not _int(axis) or not -max(rank, 1) <= axis < max(rank, 1):
        raise Bad(f"attrs.{name}", axis, f"an integer from {-max(rank, 1)} to {max(rank, 1) - 1} (rank {rank})")
    return axis % max(rank, 1)


def _ints_of_length(attrs: dict, name: str, n: int, default: list[int], minimum: int) -> list[int]:
    value = attrs.get(name, default)
    if (not isinstance(value, list) or len(value) != n or not all(_int(v) and v >= minimum for v in value)):
        raise Bad(f"attrs.{name}", value, f"a list of {n} integers >= {minimum}")
    return value


def elementwise_same(attrs, ins, outs) -> None:
    """One element out per element in: every output has the first input's shape."""
    for i, y in enumerate(outs[:1]):
        _same(f"outputs[{i}] shape", y, ins[0], "the shape of inputs[0]")


def elementwise_broadcast(attrs, ins, outs) -> None:
    shape = broadcast(*ins)
    if shape is None:
        raise Bad("inputs shapes", [list(s) for s in ins], "shapes that broadcast (NumPy rules)")
    _same("outputs[0] shape", outs[0], shape, "the broadcast of the inputs")


def unidirectional(what: str, shape: Shape, target: Shape) -> None:
    if broadcast(shape, target) != tuple(target):
        raise Bad(what, list(shape), f"a shape that broadcasts to {list(target)}")


def clip(attrs, ins, outs) -> None:
    elementwise_same(attrs, ins, outs)
    for i, s in enumerate(ins[1:], 1):
        if math.prod(s) != 1:
            raise Bad(f"inputs[{i}] shape", list(s), "one element (a scalar bound)")


def prelu(attrs, ins, outs) -> None:
    unidirectional("inputs[1] shape", ins[1], ins[0])
    elementwise_same(attrs, ins, outs)


def normalization(attrs, ins, outs) -> None:
    """Y has X's shape; scale and bias broadcast to X (LayerNormalization and kin)."""
    if "axis" in attrs:
        _axis(attrs, "axis", len(ins[0]), -1)
    for i, s in enumerate(ins[1:3], 1):
        unidirectional(f"inputs[{i}] shape", s, ins[0])
    elementwise_same(attrs, ins, outs)


def per_channel(attrs, ins, outs) -> None:
    """BatchNormalization, InstanceNormalization: parameters of one value per channel (dim 1)."""
    _rank_at_least("inputs[0] shape", ins[0], 2, "N, C, ...")
    for i, s in enumerate(ins[1:], 1):
        _same(f"inputs[{i}] shape", s, (ins[0][1],), "one value per channel of inputs[0]")
    elementwise_same(attrs, ins, outs)


def softmax(attrs, ins, outs) -> None:
    _axis(attrs, "axis", len(ins[0]), -1)
    elementwise_same(attrs, ins, outs)


def _spatial_out(x: int, k: int, s: int, d: int, pb: int, pe: int, auto_pad: str, ceil: bool) -> set[int]:
    window = (k - 1) * d + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return {-(-x // s)}
    if auto_pad == "VALID":
        pb = pe = 0
    span = x + pb + pe - window
    if span < 0:
        return set()
    floor = span // s + 1
    return {floor, -(-span // s) + 1} if ceil else {floor}


def _window_attrs(attrs: dict, n: int, kernel: list[int]) -> tuple[list, list, list, str]:
    strides = _ints_of_length(attrs, "strides", n, [1] * n, 1)
    dilations = _ints_of_length(attrs, "dilations", n, [1] * n, 1)
    pads = _ints_of_length(attrs, "pads", 2 * n, [0] * (2 * n), 0)
    return strides, dilations, pads, attrs.get("auto_pad", "NOTSET")


def _check_spatial(out: Shape, x: Shape, kernel, strides, dilations, pads, auto_pad, ceil=False) -> None:
    n = len(x) - 2
    for i in range(n):
        allowed = _spatial_out(x[2 + i], kernel[i], strides[i], dilations[i], pads[i], pads[n + i], auto_pad, ceil)
        if out[2 + i] not in allowed:
            want = f"{min(allowed)}" if allowed else "none: the kernel window is larger than the padded input"
            raise Bad(f"outputs[0] shape[{2 + i}]", out[2 + i],
                      f"{want} (input {x[2 + i]}, kernel {kernel[i]}, stride {strides[i]}, dilation {dilations[i]}, "
                      f"pads {pads[i]}+{pads[n + i]}, auto_pad {auto_pad})")


def conv(attrs, ins, outs) -> None:
    x, w, y = ins[0], ins[1], outs[0]
    _rank_at_least("inputs[0] shape", x, 3, "N, C, spatial...")
    _same("inputs[1] rank", (len(w),), (len(x),), "the weight (O, I/group, kernel...) has the input's rank")
    group = attrs.get("group", 1)
    n = len(x) - 2
    kernel = _ints_of_length(attrs, "kernel_shape", n, list(w[2:]), 1)
    if list(kernel) != list(w[2:]):
        raise Bad("attrs.kernel_shape", kernel, f"the weight's kernel dims {list(w[2:])}")
    if x[1] != w[1] * group or w[0] % group:
        raise Bad("inputs[1] shape", list(w), f"(O, I, ...) with I x group = {x[1]} input channels "
                                               f"and O divisible by group = {group}")
    if len(ins) > 2:
        _same("inputs[2] shape", ins[2], (w[0],), "one bias per output channel")
    _same("outputs[0] rank", (len(y),), (len(x),), "the input's rank")
    _same("outputs[0] shape[:2]", y[:2], (x[0], w[0]), "N of the input, O of the weight")
    _check_spatial(y, x, kernel, *_window_attrs(attrs, n, kernel))


def conv_transpose(attrs, ins, outs) -> None:
    x, w, y = ins[0], ins[1], outs[0]
    _rank_at_least("inputs[0] shape", x, 3, "N, C, spatial...")
    _same("inputs[1] rank", (len(w),), (len(x),), "the weight (C, O/group, kernel...) has the input's rank")
    group = attrs.get("group", 1)
    n = len(x) - 2
    if w[0] != x[1] or x[1] % group:
        raise Bad("inputs[1] shape", list(w), f"(C, O/group, ...) with C = {x[1]} input channels divisible by "
                                               f"group = {group}")
    if len(ins) > 2:
        _same("inputs[2] shape", ins[2], (w[1] * group,), "one bias per output channel")
    _same("outputs[0] rank", (len(y),), (len(x),), "the input's rank")
    _same("outputs[0] shape[:2]", y[:2], (x[0], w[1] * group), "N of the input, O/group x group")
    kernel = _ints_of_length(attrs, "kernel_shape", n, list(w[2:]), 1)
    strides, dilations, pads, auto_pad = _window_attrs(attrs, n, kernel)
    extra = _ints_of_length(attrs, "output_padding", n, [0] * n, 0)
    given = attrs.get("output_shape")
    if given is not None:
        if not isinstance(given, list) or not all(_int(v) for v in given):
            raise Bad("attrs.output_shape", given, "a list of integers")
        if list(y[-len(given):] if given else ()) != given:
            raise Bad("outputs[0] shape", list(y), f"spatial dims {given} (attrs.output_shape)")
        return
    for i in range(n):
        full = strides[i] * (x[2 + i] - 1) + extra[i] + (kernel[i] - 1) * dilations[i] + 1
        want = x[2 + i] * strides[i] if auto_pad in ("SAME_UPPER", "SAME_LOWER") else \
            full - (0 if auto_pad == "VALID" else pads[i] + pads[n + i])
        if y[2 + i] != want:
            raise Bad(f"outputs[0] shape[{2 + i}]", y[2 + i], f"{want} (input {x[2 + i]}, kernel {kernel[i]}, "
                                                             f"stride {strides[i]}, pads {pads[i]}+{pads[n + i]})")


def gemm(attrs, ins, outs) -> None:
    a, b = ins[0], ins[1]
    if len(a) != 2 or len(b) != 2:
        raise Bad("inputs shapes", [list(a), list(b)], "two matrices (rank 2)")
    m, k = (a[1], a[0]) if attrs.get("transA", 0) else (a[0], a[1])
    k_b, n = (b[1], b[0]) if attrs.get("transB", 0) else (b[0], b[1])
    if k != k_b:
        raise Bad("inputs[1] shape", list(b), f"an inner dimension of {k}, as inputs[0] {list(a)} has")
    if len(ins) > 2:
        unidirectional("inputs[2] shape", ins[2], (m, n))
    _same("outputs[0] shape", outs[0], (m, n), "M x N of the product")


def matmul(attrs, ins, outs) -> None:
    a, b = tuple(ins[0]), tuple(ins[1])
    if not a or not b:
        raise Bad("inputs shapes", [list(a), list(b)], "operands of rank >= 1")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise Bad("inputs[1] shape", list(b), f"an inner dimension of {a2[-1]}, as inputs[0] {list(a)} has")
    lead = broadcast(a2[:-2], b2[:-2])
    if lead is None:
        raise Bad("inputs shapes", [list(a), list(b)], "batch dimensions that broadcast")
    want = lead + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())
    _same("outputs[0] shape", outs[0], want, "the product's shape (NumPy matmul)")


def pool(attrs, ins, outs) -> None:
    x, y = ins[0], outs[0]
    _rank_at_least("inputs[0] shape", x, 3, "N, C, spatial...")
    n = len(x) - 2
    if "kernel_shape" not in attrs:
        raise Bad("attrs.kernel_shape", None, f"a list of {n} integers >= 1")
    kernel = _ints_of_length(attrs, "kernel_shape", n, [], 1)
    ceil = attrs.get("ceil_mode", 0) == 1
    for i, out in enumerate(outs):
        _same(f"outputs[{i}] rank", (len(out),), (len(x),), "the input's rank")
        _same(f"outputs[{i}] shape[:2]", out[:2], x[:2], "N, C of the input")
    _check_spatial(y, x, kernel, *_window_attrs(attrs, n, kernel), ceil=ceil)


def global_pool(attrs, ins, outs) -> None:
    _rank_at_least("inputs[0] shape", ins[0], 3, "N, C, spatial...")
    _same("outputs[0] shape", outs[0], tuple(ins[0][:2]) + (1,) * (len(ins[0]) - 2), "N, C, then ones")


def reduce(attrs, ins, outs) -> None:
    x, y = ins[0], outs[0]
    keep = attrs.get("keepdims", 1)
    axes = attrs.get("axes")
    if axes is not None:
        if not isinstance(axes, list) or any(not _int(a) or not -len(x) <= a < max(len(x), 1) for a in axes):
            raise Bad("attrs.axes", axes, f"a list of axes from {-len(x)} to {len(x) - 1}")
        axes = {a % max(len(x), 1) for a in axes} if axes else set(range(len(x)))
        want = tuple(1 if d in axes else n for d, n in enumerate(x)) if keep else \
            tuple(n for d, n in enumerate(x) if d not in axes)
        _same("outputs[0] shape", y, want, f"the input reduced over axes {sorted(axes)}")
    elif keep:
        if len(y) != len(x) or any(o not in (i, 1) for i, o in zip(x, y)):
            raise Bad("outputs[0] shape", list(y), f"the input's {list(x)} with reduced dims 1 (keepdims)")
    elif len(y) > len(x):
        raise Bad("outputs[0] shape", list(y), f"at most the input's rank {len(x)}")


def arg_reduce(attrs, ins, outs) -> None:
    x = ins[0]
    axis = _axis(attrs, "axis", len(x), 0)
    keep = attrs.get("keepdims", 1)
    want = tuple(1 if d == axis else n for d, n in enumerate(x)) if keep else tuple(n for d, n in enumerate(x) if d != axis)
    _same("outputs[0] shape", outs[0], want, f"the input reduced over axis {axis}")


def concat(attrs, ins, outs) -> None:
    rank = len(ins[0])
    if rank == 0:
        raise Bad("inputs[0] shape", [], "a shape of rank >= 1 (scalars cannot be concatenated)")
    if "axis" not in attrs:
        raise Bad("attrs.axis", None, f"an integer from {-rank} to {rank - 1}")
    axis = _axis(attrs, "axis", rank)
    for i, s in enumerate(ins):
        if len(s) != rank or any(a != b for d, (a, b) in enumerate(zip(s, ins[0])) if d != axis):
            raise Bad(f"inputs[{i}] shape", list(s), f"{list(ins[0])} outside axis {axis}")
    want = list(ins[0])
    want[axis] = sum(s[axis] for s in ins)
    _same("outputs[0] shape", outs[0], tuple(want), f"the inputs joined along axis {axis}")


def split(attrs, ins, outs) -> None:
    x = ins[0]
    if not x:
        raise Bad("inputs[0] shape", [], "a shape of rank >= 1")
    axis = _axis(attrs, "axis", len(x))
    for i, s in enumerate(outs):
        if len(s) != len(x) or any(a != b for d, (a, b) in enumerate(zip(s, x)) if d != axis):
            raise Bad(f"outputs[{i}] shape", list(s), f"{list(x)} outside axis {axis}")
    if sum(s[axis] for s in outs) != x[axis]:
        raise Bad("outputs shapes", [list(s) for s in outs], f"parts adding up to {x[axis]} along axis {axis}")


def transpose(attrs, ins, outs) -> None:
    x = ins[0]
    perm = attrs.get("perm", list(reversed(range(len(x)))))
    if not isinstance(perm, list) or sorted(p for p in perm if _int(p)) != list(range(len(x))) or len(perm) != len(x):
        raise Bad("attrs.perm", perm, f"a permutation of 0..{len(x) - 1}")
    _same("outputs[0] shape", outs[0], tuple(x[p] for p in perm), f"the input permuted by {perm}")


def same_elements(attrs, ins, outs) -> None:
    """Reshape, Squeeze, Unsqueeze, Identity: the same elements in another shape."""
    if math.prod(outs[0]) != math.prod(ins[0]):
        raise Bad("outputs[0] shape", list(outs[0]), f"{math.prod(ins[0]):,} elements, as inputs[0] {list(ins[0])}")


def flatten(attrs, ins, outs) -> None:
    x = ins[0]
    axis = attrs.get("axis", 1)
    if not _int(axis) or not -len(x) <= axis <= len(x):
        raise Bad("attrs.axis", axis, f"an integer from {-len(x)} to {len(x)}")
    axis %= len(x) + 1 if axis < 0 else len(x) + 1
    _same("outputs[0] shape", outs[0], (math.prod(x[:axis]), math.prod(x[axis:])), f"the input flattened at axis {axis}")


def gather(attrs, ins, outs) -> None:
    data, indices = ins[0], ins[1]
    if not data:
        raise Bad("inputs[0] shape", [], "a shape of rank >= 1")
    axis = _axis(attrs, "axis", len(data))
    _same("outputs[0] shape", outs[0], tuple(data[:axis]) + tuple(indices) + tuple(data[axis + 1:]),
          f"data dims around axis {axis} with the indices' dims in its place")


def same_rank(attrs, ins, outs) -> None:
    """Resize, Pad, Upsample: every dim may change, the rank may not."""
    _same("outputs[0] rank", (len(outs[0]),), (len(ins[0]),), "the input's rank")


def slice_(attrs, ins, outs) -> None:
    same_rank(attrs, ins, outs)
    if any(o > i for o, i in zip(outs[0], ins[0])):
        raise Bad("outputs[0] shape", list(outs[0]), f"at most the input's {list(ins[0])} in every dim")


def expand(attrs, ins, outs) -> None:
    unidirectional("inputs[0] shape", ins[0], outs[0])


def tile(attrs, ins, outs) -> None:
    same_rank(attrs, ins, outs)
    if any(o % i for o, i in zip(outs[0], ins[0])):
        raise Bad("outputs[0] shape", list(outs[0]), f"multiples of the input's {list(ins[0])}")
