"""What an op kind is: the families of operator kinds, in one place.

Every module that treats a kind specially asks this one. What each kind does beyond its
family lives, one table each, in:

- ``npusim.graph.ops.rules``: what an op of the kind must satisfy in a trace (arity,
  attributes, shape relations; the shapes' own rules in ``op_shapes``);
- ``npusim.graph.ops.costs``: its work from its shapes (MACs on the array, element operations
  on the vector unit);
- ``npusim.graph.regions``: which part of each input one box of its output reads (what the
  tiler and the validator of tiling need);
- ``npusim.graph.fusion``: which kinds fuse into a GEMM as its epilogue (``EPILOGUE_KINDS``);
- ``npusim.graph.training``: how its backward pass reads its forward tensors.
"""

from __future__ import annotations

#: Kinds the PE array executes as (batched) GEMMs (``op.gemm`` set); everything else runs on
#: the vector unit.
GEMM_KINDS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})

#: GEMM kinds the tiler can split along their reduction (K slices with partial sums) and whose
#: input regions per output box ``regions`` computes. Not ConvTranspose: one output box of a
#: transposed convolution reads a scattered set of input rows, so it is tiled as a whole op
#: (by blocks of its output, never by K).
REDUCTION_TILED_KINDS = frozenset({"Conv", "MatMul", "Gemm"})

#: Variadic element-wise reductions (ONNX Sum, Mean, Max, Min of N inputs). The tiler splits
#: them along their inputs as along a reduction: a tile reads ``k`` of the inputs and a running
#: partial result, so no tile needs a piece of each of a thousand inputs.
INPUT_REDUCED_KINDS = frozenset({"Sum", "Mean", "Max", "Min"})

#: Kinds whose tiles may be reduction slices (tile spec ``k``, partial results chained).
K_SLICED_KINDS = REDUCTION_TILED_KINDS | INPUT_REDUCED_KINDS

#: Kinds that can be grouped (depthwise and grouped convolutions: ``group`` attribute).
GROUPED_KINDS = frozenset({"Conv", "ConvTranspose"})

#: Kinds that only reinterpret their input's shape: an output box reads the same elements.
RESHAPE_LIKE = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})

#: Pooling windows: an output box reads its window's input rows (halo included).
WINDOW_KINDS = frozenset({"MaxPool", "AveragePool", "LpPool"})

#: Element-wise kinds an NPU's output path can apply to a GEMM's output tile (fusion).
EPILOGUE_KINDS = frozenset({
    "Relu", "Clip", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Gelu", "Erf",
    "Add", "Sub", "Mul", "Div", "BatchNormalization", "QuantizeLinear", "DequantizeLinear",
})

#: Kinds whose parameters a training graph updates (an SGD step per weight).
TRAINABLE_KINDS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization",
                             "LayerNormalization", "InstanceNormalization", "Add", "Mul", "Gather", "PRelu"})

#: Kinds whose rank >= 3 operands are image-like by definition (ONNX: channels in dimension 1),
#: for DRAM layouts (``npusim.plan.layout``).
CHANNEL_OPS = frozenset({
    "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
    "BatchNormalization", "InstanceNormalization", "LRN",
})

#: Kinds that change which dimension means what: the channel property does not flow through them.
REORDERING_OPS = frozenset({
    "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "MatMul", "Gemm", "Gather", "Softmax",
    "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "Einsum", "Split", "Slice", "Expand",
    "DepthToSpace", "SpaceToDepth",
})
