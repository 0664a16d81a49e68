"""Per-op work from shapes: MACs on the PE array, element operations on the vector unit.

One small function per op family, registered by ONNX op type in ``COST_FUNCTIONS``;
``op_cost`` looks the op type up and falls back to ``elementwise`` (output elements), so an
op type nobody registered still gets a sensible count. Every function takes the op's plain
JSON ``attrs`` and the shapes of its inputs and outputs *by ONNX argument position*
(``None`` for an omitted optional input), so costs can be recomputed from a trace.

=====================================  ====================================  ==================
op types                               ``gemm`` (m, n, k, batch) / ``macs``  ``vector_ops``
=====================================  ====================================  ==================
Conv (1-D, 2-D, 3-D, grouped,          implicit GEMM as SCALE-Sim maps it:   output elements if
depthwise)                             M = N_batch·output pixels,            a bias is fused,
                                       N = Cout/group,                       else 0
                                       K = kernel volume·Cin/group,
                                       batch = group
ConvTranspose                          col2im GEMM: M = N_batch·input        as Conv
                                       pixels, N = Cout/group·kernel
                                       volume, K = Cin/group, batch = group
                                       (MACs equal the direct scatter form)
Gemm                                   M×K · K×N honouring transA/transB     M·N if C is given
MatMul                                 numpy rules: 1-D operands promoted,   0
                                       batch = product of the broadcast
                                       leading dims; when B has no batch
                                       dims (a linear layer) A's leading
                                       dims fold into M and batch = 1
MaxPool, AveragePool, LpPool           —                                     output elements ×
                                                                             kernel volume
GlobalAveragePool, GlobalMaxPool,      —                                     input elements
GlobalLpPool, Reduce*
Softmax, LogSoftmax,                   —                                     5 × input elements
LayerNormalization, Instance/Group/
LpNormalization, RMSNormalization
BatchNormalization (inference)         —                                     2 × elements
                                                                             (multiply-add)
Resize                                 —                                     output elements ×
                                                                             taps (1 nearest,
                                                                             2^d linear, 4^d
                                                                             cubic; d = resized
                                                                             axes)
everything else: element-wise ops,     —                                     output elements
copies (Concat, Split, Slice, Reshape,                                       (all outputs)
Transpose, Gather, Flatten, Squeeze,
Unsqueeze, Expand, Pad, Cast, Where…)
and unknown op types
=====================================  ====================================  ==================

``macs`` is always ``gemm.macs`` for GEMM ops and 0 otherwise. Shape inconsistencies raise
``ValueError``; the importer turns them into a ``TraceError`` naming the file and node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from npusim.graph.model import Gemm

Shape = Sequence[int]


class OpCost(NamedTuple):
    macs: int = 0
    vector_ops: int = 0
    gemm: Gemm | None = None


CostFunction = Callable[[dict, Sequence[Shape | None], Sequence[Shape]], OpCost]


def elements(shape: Shape | None) -> int:
    n = 1
    for d in shape or ():
        n *= d
    return n


def _product(dims: Shape) -> int:
    return elements(tuple(dims))


def _operand(shapes: Sequence[Shape | None], position: int, what: str) -> Shape:
    """The shape of a required input, or a ValueError saying which one is missing."""
    if position >= len(shapes) or shapes[position] is None:
        raise ValueError(f"missing input {position} ({what})")
    return shapes[position]


def _has_input(shapes: Sequence[Shape | None], position: int) -> bool:
    return position < len(shapes) and shapes[position] is not None


def _gemm_cost(gemm: Gemm, bias_elements: int) -> OpCost:
    return OpCost(macs=gemm.macs, vector_ops=bias_elements, gemm=gemm)


# --- GEMM ops -------------------------------------------------------------------------------


def conv(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    x = _operand(inputs, 0, "X")
    w = _operand(inputs, 1, "W")
    y = outputs[0]
    group = int(attrs.get("group", 1))
    if len(x) < 3 or len(w) != len(x) or len(y) != len(x):
        raise ValueError(f"Conv expects X, W, Y of equal rank >= 3, got X {list(x)}, W {list(w)}, Y {list(y)}")
    c_in, c_out = x[1], w[0]
    if w[1] * group != c_in or c_out % group:
        raise ValueError(
            f"Conv channels do not match group={group}: X {list(x)} has Cin={c_in}, "
            f"W {list(w)} expects Cin/group={w[1]} and Cout={c_out} divisible by group"
        )
    gemm = Gemm(m=x[0] * _product(y[2:]), n=c_out // group, k=_product(w[2:]) * w[1], batch=group)
    return _gemm_cost(gemm, elements(y) if _has_input(inputs, 2) else 0)


def conv_transpose(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    # col2im form (as Caffe/PyTorch run a transposed conv): each input pixel times W gives a
    # column of Cout/group × kernel values, later scatter-added into the output.
    x = _operand(inputs, 0, "X")
    w = _operand(inputs, 1, "W")
    y = outputs[0]
    group = int(attrs.get("group", 1))
    if len(x) < 3 or len(w) != len(x) or len(y) != len(x):
        raise ValueError(
            f"ConvTranspose expects X, W, Y of equal rank >= 3, got X {list(x)}, W {list(w)}, Y {list(y)}"
        )
    c_in = x[1]
    if w[0] != c_in or c_in % group:
        raise ValueError(
            f"ConvTranspose channels do not match group={group}: X {list(x)} has Cin={c_in}, W {list(w)}"
        )
    gemm = Gemm(m=x[0] * _product(x[2:]), n=w[1] * _product(w[2:]), k=c_in // group, batch=group)
    return _gemm_cost(gemm, elements(y) if _has_input(inputs, 2) else 0)


def gemm(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    a = _operand(inputs, 0, "A")
    b = _operand(inputs, 1, "B")
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"Gemm expects 2-D A and B, got A {list(a)}, B {list(b)}")
    m, k = (a[1], a[0]) if attrs.get("transA", 0) else (a[0], a[1])
    k_b, n = (b[1], b[0]) if attrs.get("transB", 0) else (b[0], b[1])
    if k != k_b:
        raise ValueError(
            f"Gemm inner dims differ: A {list(a)} (transA={attrs.get('transA', 0)}) gives K={k}, "
            f"B {list(b)} (transB={attrs.get('transB', 0)}) gives K={k_b}"
        )
    return _gemm_cost(Gemm(m=m, n=n, k=k, batch=1), m * n if _has_input(inputs, 2) else 0)


def _broadcast(a: Shape, b: Shape) -> tuple[int, ...]:
    """numpy broadcasting of two shapes (right-aligned; 1 stretches)."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for da, db in zip(a, b):
        if da != db and 1 not in (da, db):
            raise ValueError(f"leading dims {list(a)} and {list(b)} do not broadcast")
        out.append(max(da, db))
    return tuple(out)


def matmul(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    a = tuple(_operand(inputs, 0, "A"))
    b = tuple(_operand(inputs, 1, "B"))
    if not a or not b:
        raise ValueError(f"MatMul operands must be at least 1-D, got A {list(a)}, B {list(b)}")
    a2 = (1,) + a if len(a) == 1 else a  # numpy: a 1-D left operand is a row vector
    b2 = b + (1,) if len(b) == 1 else b  # and a 1-D right operand a column vector
    m, k = a2[-2], a2[-1]
    k_b, n = b2[-2], b2[-1]
    if k != k_b:
        raise ValueError(f"MatMul inner dims differ: A {list(a)} has K={k}, B {list(b)} has K={k_b}")
    a_lead, b_lead = a2[:-2], b2[:-2]
    batch = _product(_broadcast(a_lead, b_lead))
    if _product(b_lead) == 1:
        # B is one shared matrix (a linear layer): the stacked rows of A form one tall GEMM.
        m, batch = m * batch, 1
    return OpCost(macs=batch * m * n * k, vector_ops=0, gemm=Gemm(m=m, n=n, k=k, batch=batch))


# --- vector-unit ops ------------------------------------------------------------------------


def elementwise(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    """One operation per output element, summed over all outputs (also the fallback)."""
    return OpCost(vector_ops=sum(elements(y) for y in outputs))


def variadic(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    """A Sum, Max or Min of N inputs: N - 1 two-input operations per output element (one for a
    single input, a copy); ONNX ``Sum``/``Max``/``Min`` semantics."""
    return OpCost(vector_ops=elements(outputs[0]) * max(len(inputs) - 1, 1))


def mean(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    """A Mean of N inputs: N - 1 additions and one scaling per output element."""
    return OpCost(vector_ops=elements(outputs[0]) * max(len(inputs), 1))


def pool(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    window = _product(attrs.get("kernel_shape", ()))
    return OpCost(vector_ops=elements(outputs[0]) * window)


def reduce_input(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    """Every input element is read and accumulated once."""
    return OpCost(vector_ops=elements(_operand(inputs, 0, "data")))


def normalize(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    # ~5 passes: max or mean, subtract, exp or square, sum, scale.
    return OpCost(vector_ops=5 * elements(_operand(inputs, 0, "input")))


def batch_norm(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    # Inference BatchNorm is a per-channel scale and shift: one multiply-add per element.
    return OpCost(vector_ops=2 * elements(outputs[0]))


_RESIZE_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


def resize(attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    x = _operand(inputs, 0, "X")
    y = outputs[0]
    resized_axes = sum(1 for dx, dy in zip(x, y) if dx != dy)
    taps = _RESIZE_TAPS.get(str(attrs.get("mode", "nearest")), 1) ** resized_axes
    return OpCost(vector_ops=elements(y) * taps)


def _register() -> dict[str, CostFunction]:
    table: dict[str, CostFunction] = {
        "Conv": conv,
        "ConvTranspose": conv_transpose,
        "Gemm": gemm,
        "MatMul": matmul,
        "BatchNormalization": batch_norm,
        "Resize": resize,
        "Sum": variadic,
        "Max": variadic,
        "Min": variadic,
        "Mean": mean,
    }
    for op_type in ("MaxPool", "AveragePool", "LpPool"):
        table[op_type] = pool
    for op_type in ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "ReduceMean", "ReduceSum",
                    "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                    "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin"):
        table[op_type] = reduce_input
    for op_type in ("Softmax", "LogSoftmax", "LayerNormalization", "InstanceNormalization",
                    "GroupNormalization", "LpNormalization", "RMSNormalization", "SimplifiedLayerNormalization"):
        table[op_type] = normalize
    return table


#: Cost function by ONNX op type; op types not listed use ``elementwise``.
COST_FUNCTIONS: dict[str, CostFunction] = _register()


def op_cost(op_type: str, attrs: dict, inputs: Sequence[Shape | None], outputs: Sequence[Shape]) -> OpCost:
    """MACs, vector ops and GEMM mapping of one op (``ValueError`` on inconsistent shapes)."""
    return COST_FUNCTIONS.get(op_type, elementwise)(attrs, inputs, outputs)
