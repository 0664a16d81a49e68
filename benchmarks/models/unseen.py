"""Weight-free, shape-complete ONNX graphs of real architectures outside the shipped traces.

Each function returns an ``onnx.ModelProto`` built with ``onnx.helper`` following the
conventions of the public model corpus (``/work/shared/models/README.md``): opset 17, batch 1,
every weight a data-less graph input (its name, dtype and dims; no data), small shape
operands and scalars as ``Constant`` nodes, BatchNorm folded into the preceding Conv (a Conv
with bias), full static ``value_info`` from ``onnx.shape_inference.infer_shapes`` and
``onnx.checker.check_model(full_check=True)``. The layers are those the legacy TorchScript
exporter writes for the torchvision model (SiLU as Sigmoid+Mul, GELU in its Erf form,
``torch.roll`` as Slice+Concat, Linear as MatMul+Add, the classifier as Gemm).

Models (geometry from the torchvision source, published MACs at 224x224):
    efficientnet_b0    Tan & Le, "EfficientNet", ICML 2019, Table 1 (B0 baseline);
                       torchvision ``efficientnet_b0``: 0.39 GMACs ("0.39B FLOPS" in the paper
                       counts multiply-adds).
    swin_t             Liu et al., "Swin Transformer", ICCV 2021, Table 1 (Swin-T: C=96,
                       layers 2/2/6/2, heads 3/6/12/24, window 7); torchvision ``swin_t``:
                       4.49 GFLOPS (multiply-adds), the paper's 4.5G.
    mobilenet_v3_large Howard et al., "Searching for MobileNetV3", ICCV 2019, Table 1;
                       torchvision ``mobilenet_v3_large``: 0.22 GMACs (paper: 219 M MAdds).
    convnext_tiny      Liu et al., "A ConvNet for the 2020s", CVPR 2022, Table 1 (ConvNeXt-T:
                       C=96, blocks 3/3/9/3); torchvision ``convnext_tiny``: 4.46 GFLOPS
                       (multiply-adds; the paper's 4.5G).

    python benchmarks/models/unseen.py -o DIR [efficientnet_b0 swin_t ...]

writes ``DIR/<model>.onnx`` for each named model (all without names).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

OPSET = 17

#: Published multiply-accumulate counts at batch 1, 224x224 (sources in the module docstring).
PUBLISHED_GMACS = {"efficientnet_b0": 0.39, "swin_t": 4.49, "mobilenet_v3_large": 0.22, "convnext_tiny": 4.46}
#: Parameter counts of the torchvision models (``num_params`` of their weights' metadata).
TORCHVISION_PARAMS = {"efficientnet_b0": 5_288_548, "swin_t": 28_288_354, "mobilenet_v3_large": 5_483_032,
                      "convnext_tiny": 28_589_128}


class _Builder:
    """Nodes, data-less weight inputs and small Constant nodes of one graph, named in order."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.ValueInfoProto] = []
        self._count: dict[str, int] = {}

    def _fresh(self, prefix: str) -> str:
        n = self._count.get(prefix, 0)
        self._count[prefix] = n + 1
        return f"{prefix}_{n}"

    def weight(self, prefix: str, dims: list[int]) -> str:
        name = self._fresh(prefix)
        self.weights.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
        return name

    def const(self, values, dtype=TensorProto.INT64, scalar: bool = False) -> str:
        """A small Constant node (shape operand or scalar), as the exporter leaves them."""
        array = np.asarray(values, dtype=np.int64 if dtype == TensorProto.INT64 else np.float32)
        out = self._fresh("const")
        dims = [] if scalar else list(array.shape)
        tensor = helper.make_tensor(out + "_value", dtype, dims, array.flatten().tolist())
        self.nodes.append(helper.make_node("Constant", [], [out], name=out, value=tensor))
        return out

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        base = self._fresh(op_type)
        outs = [f"{base}_out{i}" if n_out > 1 else f"{base}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=base, **attrs))
        return outs if n_out > 1 else outs[0]

    # Layers, as the exporter writes them.
    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1,
             pad: int | None = None, bn: bool = True) -> str:
        """Conv with bias: with ``bn`` the bias is the BatchNorm that follows it in the model,
        folded in (named ``bn_b_*``: the model's Conv has no bias, its BatchNorm a scale and
        a shift per channel); else the Conv's own bias (``conv_b_*``)."""
        pad = (k - 1) // 2 if pad is None else pad
        w = self.weight("conv_w", [c_out, c_in // group, k, k])
        b = self.weight("bn_b" if bn else "conv_b", [c_out])
        return self.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=group, dilations=[1, 1])

    def silu(self, x: str) -> str:
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def hardswish(self, x: str) -> str:
        return self.op("HardSwish", [x])

    def linear(self, x: str, c_in: int, c_out: int, bias: bool = True) -> str:
        y = self.op("MatMul", [x, self.weight("linear_w", [c_in, c_out])])
        return self.op("Add", [y, self.weight("linear_b", [c_out])]) if bias else y

    def layer_norm(self, x: str, c: int) -> str:
        return self.op("LayerNormalization", [x, self.weight("ln_w", [c]), self.weight("ln_b", [c])],
                       axis=-1, epsilon=1e-5)

    def gelu(self, x: str) -> str:
        """GELU in the Erf form the exporter writes: x * 0.5 * (1 + erf(x / sqrt 2))."""
        erf = self.op("Erf", [self.op("Div", [x, self.const(math.sqrt(2.0), TensorProto.FLOAT, True)])])
        one_plus = self.op("Add", [erf, self.const(1.0, TensorProto.FLOAT, True)])
        return self.op("Mul", [self.op("Mul", [x, one_plus]), self.const(0.5, TensorProto.FLOAT, True)])

    def reshape(self, x: str, shape: list[int]) -> str:
        return self.op("Reshape", [x, self.const(shape)])

    def slice(self, x: str, starts: list[int], ends: list[int], axes: list[int],
              steps: list[int] | None = None) -> str:
        ins = [x, self.const(starts), self.const(ends), self.const(axes)]
        if steps is not None:
            ins.append(self.const(steps))
        return self.op("Slice", ins)

    def classifier(self, x: str, c_in: int, classes: int = 1000) -> str:
        flat = self.op("Flatten", [x], axis=1)
        return self.op("Gemm", [flat, self.weight("fc_w", [classes, c_in]), self.weight("fc_b", [classes])],
                       alpha=1.0, beta=1.0, transB=1)

    def model(self, data_inputs: list[onnx.ValueInfoProto], output: str, classes: int = 1000) -> onnx.ModelProto:
        out = helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, classes])
        graph = helper.make_graph(self.nodes, self.name, data_inputs + self.weights, [out])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="npusim benchmarks/models/unseen.py")
        helper.set_model_props(model, {"data_inputs": ",".join(v.name for v in data_inputs)})
        model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        _check_static(model)
        onnx.checker.check_model(model, full_check=True)
        return model


def _check_static(model: onnx.ModelProto) -> None:
    """Every node output carries value_info (or is a graph output) with a full static shape."""
    known = {v.name: v for v in list(model.graph.value_info) + list(model.graph.output)}
    for node in model.graph.node:
        for name in node.output:
            value = known.get(name)
            dims = value.type.tensor_type.shape.dim if value is not None else None
            if dims is None or (node.op_type != "Constant" and not all(d.HasField("dim_value") for d in dims)):
                raise ValueError(f"{model.graph.name}: {node.op_type} output {name!r} has no static shape")


def _image_input(size: int = 224) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])


def _squeeze_excite(b: _Builder, x: str, c: int, c_squeeze: int, act, gate) -> str:
    """Squeeze-excitation: GlobalAveragePool -> 1x1 Conv -> act -> 1x1 Conv -> gate -> Mul."""
    s = b.op("GlobalAveragePool", [x])
    s = act(b.conv(s, c, c_squeeze, 1, bn=False))
    return b.op("Mul", [gate(b.conv(s, c_squeeze, c, 1, bn=False)), x])


# EfficientNet-B0 stages: expand ratio, kernel, stride, input channels, output channels, layers.
EFFICIENTNET_B0_STAGES = [
    (1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1),
]


def efficientnet_b0() -> onnx.ModelProto:
    """torchvision ``efficientnet_b0``: stem 3x3 s2 to 32, MBConv stages of the paper's Table 1
    with SE (squeeze to a quarter of the block's input channels), head 1x1 to 1280, pool, Gemm."""
    b = _Builder("efficientnet_b0")
    x = b.silu(b.conv("input", 3, 32, 3, stride=2))
    for expand, k, stride, c_in, c_out, layers in EFFICIENTNET_B0_STAGES:
        for i in range(layers):
            cin, s = (c_in, stride) if i == 0 else (c_out, 1)
            mid = cin * expand
            h = x if expand == 1 else b.silu(b.conv(x, cin, mid, 1))
            h = b.silu(b.conv(h, mid, mid, k, stride=s, group=mid))
            h = _squeeze_excite(b, h, mid, max(1, cin // 4), b.silu, lambda t: b.op("Sigmoid", [t]))
            h = b.conv(h, mid, c_out, 1)
            x = b.op("Add", [h, x]) if s == 1 and cin == c_out else h
    x = b.silu(b.conv(x, 320, 1280, 1))
    return b.model([_image_input()], b.classifier(b.op("GlobalAveragePool", [x]), 1280))


# MobileNetV3-Large blocks: kernel, expanded channels, output channels, SE, activation, stride.
MOBILENET_V3_LARGE_BLOCKS = [
    (3, 16, 16, False, "RE", 1), (3, 64, 24, False, "RE", 2), (3, 72, 24, False, "RE", 1),
    (5, 72, 40, True, "RE", 2), (5, 120, 40, True, "RE", 1), (5, 120, 40, True, "RE", 1),
    (3, 240, 80, False, "HS", 2), (3, 200, 80, False, "HS", 1), (3, 184, 80, False, "HS", 1),
    (3, 184, 80, False, "HS", 1), (3, 480, 112, True, "HS", 1), (3, 672, 112, True, "HS", 1),
    (5, 672, 160, True, "HS", 2), (5, 960, 160, True, "HS", 1), (5, 960, 160, True, "HS", 1),
]


def _make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision ``_make_divisible``: round to a multiple of 8, never below 90 % of v."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def mobilenet_v3_large() -> onnx.ModelProto:
    """torchvision ``mobilenet_v3_large``: stem 3x3 s2 to 16 (hardswish), the paper's Table 1
    bneck blocks (SE squeeze to make_divisible(expanded / 4), ReLU then Hardsigmoid), last
    1x1 conv to 960, pool, Linear 960->1280 + hardswish, Linear 1280->1000."""
    b = _Builder("mobilenet_v3_large")
    x = b.hardswish(b.conv("input", 3, 16, 3, stride=2))
    c = 16
    for k, mid, c_out, se, act_name, stride in MOBILENET_V3_LARGE_BLOCKS:
        act = b.hardswish if act_name == "HS" else (lambda t: b.op("Relu", [t]))
        h = x if mid == c else act(b.conv(x, c, mid, 1))
        h = act(b.conv(h, mid, mid, k, stride=stride, group=mid))
        if se:
            h = _squeeze_excite(b, h, mid, _make_divisible(mid // 4), lambda t: b.op("Relu", [t]),
                                lambda t: b.op("HardSigmoid", [t], alpha=1.0 / 6, beta=0.5))
        h = b.conv(h, mid, c_out, 1)
        x = b.op("Add", [h, x]) if stride == 1 and c == c_out else h
        c = c_out
    x = b.hardswish(b.conv(x, 160, 960, 1))
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    x = b.hardswish(b.op("Gemm", [x, b.weight("fc_w", [1280, 960]), b.weight("fc_b", [1280])], transB=1))
    out = b.op("Gemm", [x, b.weight("fc_w", [1000, 1280]), b.weight("fc_b", [1000])], transB=1)
    return b.model([_image_input()], out)


def _roll(b: _Builder, x: str, shift: int, size: int) -> str:
    """``torch.roll(x, (shift, shift), dims=(1, 2))`` as the exporter writes it: per axis, the
    last ``shift`` rows (or the first ``-shift``) sliced off and concatenated in front."""
    s = shift % size
    for axis in (1, 2):
        tail = b.slice(x, [size - s], [size], [axis])
        head = b.slice(x, [0], [size - s], [axis])
        x = b.op("Concat", [tail, head], axis=axis)
    return x


def _window_attention(b: _Builder, x: str, res: int, c: int, heads: int, window: int, shift: int) -> str:
    """torchvision ``shifted_window_attention`` on x [1, res, res, c] (res a multiple of the
    window, so no padding): roll, partition, QKV, scaled attention + relative-position bias
    (+ the shifted-window mask), Softmax, projection, reverse, roll back."""
    n_w, tokens, hd = (res // window) ** 2, window * window, c // heads
    if shift:
        x = _roll(b, x, -shift, res)
    x = b.reshape(x, [1, res // window, window, res // window, window, c])
    x = b.reshape(b.op("Transpose", [x], perm=[0, 1, 3, 2, 4, 5]), [n_w, tokens, c])
    qkv = b.reshape(b.linear(x, c, 3 * c), [n_w, tokens, 3, heads, hd])
    qkv = b.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
    q, k, v = (b.op("Gather", [qkv, b.const(i, scalar=True)], axis=0) for i in range(3))
    q = b.op("Mul", [q, b.const(hd ** -0.5, TensorProto.FLOAT, True)])
    attn = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
    # The bias gathered from the relative-position table is a constant after folding: a
    # data-less input like the weights, as in the corpus.
    attn = b.op("Add", [attn, b.weight("rel_pos_bias", [1, heads, tokens, tokens])])
    if shift:
        attn = b.reshape(attn, [1, n_w, heads, tokens, tokens])
        attn = b.op("Add", [attn, b.weight("attn_mask", [1, n_w, 1, tokens, tokens])])
        attn = b.reshape(attn, [n_w, heads, tokens, tokens])
    attn = b.op("Softmax", [attn], axis=-1)
    x = b.op("Transpose", [b.op("MatMul", [attn, v])], perm=[0, 2, 1, 3])
    x = b.linear(b.reshape(x, [n_w, tokens, c]), c, c)
    x = b.reshape(x, [1, res // window, res // window, window, window, c])
    x = b.reshape(b.op("Transpose", [x], perm=[0, 1, 3, 2, 4, 5]), [1, res, res, c])
    return _roll(b, x, shift, res) if shift else x


SWIN_T = {"embed": 96, "depths": [2, 2, 6, 2], "heads": [3, 6, 12, 24], "window": 7}


def swin_t() -> onnx.ModelProto:
    """torchvision ``swin_t``: patch embedding Conv 4x4 s4 to 96 + LayerNorm (NHWC), stages of
    2/2/6/2 blocks (pre-norm attention and 4x MLP, each with a residual Add), shifted windows
    on odd blocks (shift 3; none where the window covers the map), patch merging by four
    strided Slices + Concat + LayerNorm + MatMul, final LayerNorm, pool, Gemm."""
    b = _Builder("swin_t")
    c, window, res = SWIN_T["embed"], SWIN_T["window"], 56
    x = b.conv("input", 3, c, 4, stride=4, pad=0, bn=False)
    x = b.layer_norm(b.op("Transpose", [x], perm=[0, 2, 3, 1]), c)
    for stage, (depth, heads) in enumerate(zip(SWIN_T["depths"], SWIN_T["heads"])):
        if stage:
            parts = [b.slice(x, [i, j], [res, res], [1, 2], [2, 2]) for j, i in ((0, 0), (0, 1), (1, 0), (1, 1))]
            x = b.layer_norm(b.op("Concat", parts, axis=-1), 4 * c)
            x = b.linear(x, 4 * c, 2 * c, bias=False)
            c, res = 2 * c, res // 2
        for i in range(depth):
            shift = window // 2 if i % 2 and window < res else 0
            x = b.op("Add", [x, _window_attention(b, b.layer_norm(x, c), res, c, heads, window, shift)])
            h = b.linear(b.gelu(b.linear(b.layer_norm(x, c), c, 4 * c)), 4 * c, c)
            x = b.op("Add", [x, h])
    x = b.op("Transpose", [b.layer_norm(x, c)], perm=[0, 3, 1, 2])
    return b.model([_image_input()], b.classifier(b.op("GlobalAveragePool", [x]), c))


CONVNEXT_T = {"dims": [96, 192, 384, 768], "depths": [3, 3, 9, 3]}


def _layer_norm_2d(b: _Builder, x: str, c: int) -> str:
    """torchvision ``LayerNorm2d``: NCHW to NHWC, LayerNorm over channels, back."""
    x = b.layer_norm(b.op("Transpose", [x], perm=[0, 2, 3, 1]), c)
    return b.op("Transpose", [x], perm=[0, 3, 1, 2])


def convnext_tiny() -> onnx.ModelProto:
    """torchvision ``convnext_tiny``: stem Conv 4x4 s4 to 96 + LayerNorm2d, stages of 3/3/9/3
    blocks (depthwise 7x7 Conv, NHWC LayerNorm, Linear 4x, GELU, Linear, per-channel layer
    scale, residual Add), downsampling by LayerNorm2d + Conv 2x2 s2, pool, LayerNorm2d, Gemm."""
    b = _Builder("convnext_tiny")
    dims = CONVNEXT_T["dims"]
    x = _layer_norm_2d(b, b.conv("input", 3, dims[0], 4, stride=4, pad=0, bn=False), dims[0])
    for stage, (c, depth) in enumerate(zip(dims, CONVNEXT_T["depths"])):
        if stage:
            x = b.conv(_layer_norm_2d(b, x, dims[stage - 1]), dims[stage - 1], c, 2, stride=2, pad=0, bn=False)
        for _ in range(depth):
            h = b.op("Transpose", [b.conv(x, c, c, 7, group=c, bn=False)], perm=[0, 2, 3, 1])
            h = b.linear(b.gelu(b.linear(b.layer_norm(h, c), c, 4 * c)), 4 * c, c)
            h = b.op("Transpose", [h], perm=[0, 3, 1, 2])
            x = b.op("Add", [b.op("Mul", [b.weight("layer_scale", [c, 1, 1]), h]), x])
    x = _layer_norm_2d(b, b.op("GlobalAveragePool", [x]), dims[-1])
    return b.model([_image_input()], b.classifier(x, dims[-1]))


MODELS = {"efficientnet_b0": efficientnet_b0, "swin_t": swin_t, "mobilenet_v3_large": mobilenet_v3_large,
          "convnext_tiny": convnext_tiny}


def write_models(out_dir: str | Path, names: list[str] | None = None) -> list[Path]:
    """Write ``<name>.onnx`` into ``out_dir`` for each name (all models without names)."""
    unknown = sorted(set(names or []) - set(MODELS))
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names or list(MODELS):
        path = out / f"{name}.onnx"
        onnx.save(MODELS[name](), path)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", required=True, help="directory for the .onnx files")
    parser.add_argument("models", nargs="*", help=f"models to write (default all: {', '.join(MODELS)})")
    args = parser.parse_args(argv)
    for path in write_models(args.output, args.models):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
