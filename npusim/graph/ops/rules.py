"""What each operator kind of a trace must satisfy: arity, attribute types, shape relations.

The rules come from the ONNX operator definitions (the importer keeps ONNX op types), so a
trace an exporter could have written passes, and one that no operator could have -- a MatMul
with three inputs, a Conv whose ``pads`` is a list of lists, a ``gemm`` its shapes do not
give -- is refused at load, before a planner reads it (``npusim.graph.contract``). Every
consumer (costs, the tiler's regions, the schedulers) may then take these for granted.

``RULES`` maps an op type to a ``Rule``; a kind not listed (a custom op, ``FancyOp``, or the
training graph's ``ConvGrad``) gets only the generic rules of the contract. A rule lists the
attributes consumers read with their types; other attribute names are accepted as plain
values (ONNX opsets add and rename attributes: the importer keeps them all). A violation is a
``Bad(field, value, expected)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from npusim.graph.ops.costs import op_cost
from npusim.graph.ops.kinds import GEMM_KINDS
from npusim.graph.ops.shapes import (
    Bad, Count, INT, FLAG, POSITIVE, INTS, FLOAT, STR,
    AUTO_PAD, Shape, elementwise_same, elementwise_broadcast, clip, prelu,
    normalization, per_channel, softmax, conv, conv_transpose, gemm, matmul, pool,
    global_pool, reduce, arg_reduce, concat, split, transpose, same_elements, flatten,
    gather, same_rank, slice_, expand, tile,
)


ShapeCheck = Callable[[dict, Sequence[Shape], Sequence[Shape]], None]


@dataclass(frozen=True)
class Rule:
    inputs: tuple[int, int | None]  # (fewest, most; None: any number)
    outputs: tuple[int, int | None] = (1, 1)
    attrs: dict = field(default_factory=dict)  # name -> type check
    shapes: ShapeCheck | None = None


# --- the table --------------------------------------------------------------------------------

_UNARY = ("Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Neg", "Abs", "Sqrt", "Reciprocal", "Floor", "Ceil",
          "Round", "Sign", "Not", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
          "Atanh", "Softplus", "Softsign", "Elu", "Selu", "Celu", "LeakyRelu", "ThresholdedRelu", "HardSigmoid",
          "HardSwish", "Gelu", "Silu", "Mish", "IsNaN", "IsInf", "Cast", "Shrink", "BitwiseNot")
_BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Equal", "Less", "Greater",
           "LessOrEqual", "GreaterOrEqual", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor")
_VARIADIC = ("Max", "Min", "Sum", "Mean")
_REDUCE = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
_WINDOW = {"auto_pad": AUTO_PAD, "kernel_shape": INTS, "strides": INTS, "dilations": INTS, "pads": INTS}


def _table() -> dict[str, Rule]:
    scalar_attrs = {"alpha": FLOAT, "beta": FLOAT, "gamma": FLOAT, "lambd": FLOAT, "bias": FLOAT, "to": INT,
                    "approximate": STR, "min": FLOAT, "max": FLOAT, "saturate": INT}
    table = {k: Rule((1, 1), attrs=scalar_attrs, shapes=elementwise_same) for k in _UNARY}
    table.update({k: Rule((2, 2), attrs={"direction": STR, "fmod": FLAG}, shapes=elementwise_broadcast)
                  for k in _BINARY})
    table.update({k: Rule((1, None), shapes=elementwise_broadcast) for k in _VARIADIC})
    table.update({k: Rule((1, 2), attrs={"axes": INTS, "keepdims": FLAG, "noop_with_empty_axes": FLAG},
                          shapes=reduce) for k in _REDUCE})
    table.update({
        "Identity": Rule((1, 1), shapes=elementwise_same),
        "Clip": Rule((1, 3), attrs={"min": FLOAT, "max": FLOAT}, shapes=clip),
        "PRelu": Rule((2, 2), shapes=prelu),
        "Where": Rule((3, 3), shapes=elementwise_broadcast),
        "Dropout": Rule((1, 3), (1, 2), attrs={"ratio": FLOAT, "seed": INT}, shapes=elementwise_same),
        "Softmax": Rule((1, 1), attrs={"axis": INT}, shapes=softmax),
        "LogSoftmax": Rule((1, 1), attrs={"axis": INT}, shapes=softmax),
        "Hardmax": Rule((1, 1), attrs={"axis": INT}, shapes=softmax),
        "LayerNormalization": Rule((1, 3), (1, 3), attrs={"axis": INT, "epsilon": FLOAT, "stash_type": INT},
                                   shapes=normalization),
        "RMSNormalization": Rule((1, 2), (1, 2), attrs={"axis": INT, "epsilon": FLOAT}, shapes=normalization),
        "SimplifiedLayerNormalization": Rule((1, 2), (1, 3), attrs={"axis": INT, "epsilon": FLOAT},
                                             shapes=normalization),
        "BatchNormalization": Rule((5, 5), (1, 3), attrs={"epsilon": FLOAT, "momentum": FLOAT, "training_mode": FLAG},
                                   shapes=per_channel),
        "InstanceNormalization": Rule((3, 3), attrs={"epsilon": FLOAT}, shapes=per_channel),
        "LpNormalization": Rule((1, 1), attrs={"axis": INT, "p": INT}, shapes=softmax),
        "Conv": Rule((2, 3), attrs={**_WINDOW, "group": POSITIVE}, shapes=conv),
        "ConvTranspose": Rule((2, 3), attrs={**_WINDOW, "group": POSITIVE, "output_padding": INTS,
                                             "output_shape": INTS}, shapes=conv_transpose),
        "Gemm": Rule((2, 3), attrs={"alpha": FLOAT, "beta": FLOAT, "transA": FLAG, "transB": FLAG}, shapes=gemm),
        "MatMul": Rule((2, 2), shapes=matmul),
        "MaxPool": Rule((1, 1), (1, 2), attrs={**_WINDOW, "ceil_mode": FLAG, "storage_order": FLAG}, shapes=pool),
        "AveragePool": Rule((1, 1), attrs={**_WINDOW, "ceil_mode": FLAG, "count_include_pad": FLAG}, shapes=pool),
        "LpPool": Rule((1, 1), attrs={**_WINDOW, "ceil_mode": FLAG, "p": INT}, shapes=pool),
        "GlobalAveragePool": Rule((1, 1), shapes=global_pool),
        "GlobalMaxPool": Rule((1, 1), shapes=global_pool),
        "GlobalLpPool": Rule((1, 1), attrs={"p": INT}, shapes=global_pool),
        "ArgMax": Rule((1, 1), attrs={"axis": INT, "keepdims": FLAG, "select_last_index": FLAG}, shapes=arg_reduce),
        "ArgMin": Rule((1, 1), attrs={"axis": INT, "keepdims": FLAG, "select_last_index": FLAG}, shapes=arg_reduce),
        "Concat": Rule((1, None), attrs={"axis": INT}, shapes=concat),
        # Split's "split" list is not typed: the importer writes one of over 64 parts as "<N values>"
        "Split": Rule((1, 2), (1, None), attrs={"axis": INT, "num_outputs": POSITIVE}, shapes=split),
        "Transpose": Rule((1, 1), attrs={"perm": INTS}, shapes=transpose),
        "Reshape": Rule((1, 2), attrs={"allowzero": FLAG, "shape": INTS}, shapes=same_elements),
        "Squeeze": Rule((1, 2), attrs={"axes": INTS}, shapes=same_elements),
        "Unsqueeze": Rule((1, 2), attrs={"axes": INTS}, shapes=same_elements),
        "Flatten": Rule((1, 1), attrs={"axis": INT}, shapes=flatten),
        "Gather": Rule((2, 2), attrs={"axis": INT}, shapes=gather),
        "Resize": Rule((1, 4), attrs={"mode": STR, "coordinate_transformation_mode": STR, "nearest_mode": STR,
                                      "cubic_coeff_a": FLOAT, "exclude_outside": INT, "extrapolation_value": FLOAT},
                       shapes=same_rank),
        "Upsample": Rule((1, 2), attrs={"mode": STR}, shapes=same_rank),
        "Pad": Rule((1, 4), attrs={"mode": STR, "pads": INTS, "value": FLOAT}, shapes=same_rank),
        "Slice": Rule((1, 5), attrs={"starts": INTS, "ends": INTS, "axes": INTS}, shapes=slice_),
        "Expand": Rule((2, 2), shapes=expand),
        "Tile": Rule((2, 2), shapes=tile),
    })
    return table


RULES: dict[str, Rule] = _table()



def check_op(kind: str, attrs: dict, ins: Sequence[Shape], outs: Sequence[Shape], gemm) -> None:
    """Raise ``Bad`` unless an op of ``kind`` with these (core) inputs and outputs is well formed;
    ``gemm``: the op's declared GEMM (a dict or None)."""
    rule = RULES.get(kind)
    if rule is None:
        return
    fewest, most = rule.inputs
    if not fewest <= len(ins) <= (most if most is not None else len(ins)):
        raise Bad("inputs", Count(len(ins)), _arity(kind, fewest, most, "inputs"))
    fewest, most = rule.outputs
    if not fewest <= len(outs) <= (most if most is not None else len(outs)):
        raise Bad("outputs", Count(len(outs)), _arity(kind, fewest, most, "outputs"))
    for name, kind_check in rule.attrs.items():
        if name in attrs:
            problem = kind_check(attrs[name])
            if problem:
                raise Bad(f"attrs.{name}", attrs[name], problem)
    if rule.shapes is not None:
        rule.shapes(attrs, ins, outs)
    if kind in GEMM_KINDS:  # the array runs it: its gemm must be what op_costs derives
        want = op_cost(kind, attrs, list(ins), list(outs)).gemm
        declared = None if gemm is None else (gemm["m"], gemm["n"], gemm["k"], gemm["batch"])
        if declared != (want.m, want.n, want.k, want.batch):
            raise Bad("gemm", gemm, f"{{'m': {want.m}, 'n': {want.n}, 'k': {want.k}, 'batch': {want.batch}}}, "
                                    "what its shapes give")


def _arity(kind: str, fewest: int, most: int | None, what: str) -> str:
    if most is None:
        return f"at least {fewest} (a {kind} takes {fewest} or more {what})"
    if fewest == most:
        return f"{fewest} (a {kind} takes exactly {fewest})"
    return f"{fewest} to {most} (a {kind} takes {fewest} to {most})"
