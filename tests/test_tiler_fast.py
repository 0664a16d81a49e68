"""The tile search's fast paths against the general code they replace, on many shapes.

``_largest_tile_bytes`` sums a tile's bytes with what it reads of the op looked up once;
it must equal ``_tile_bytes`` (the general sum, through the memoised box rule) on the same
sample tiles, for random convolutions (pads, strides, dilations, groups), matmuls, Gemms,
pools, Concats and element-wise ops reading one tensor twice, and for the fused ops of
shipped traces, at random blocks, reduction slices, alignments and accumulators.
"""

from __future__ import annotations

import random

import pytest

from npusim.graph.model import build_graph
from npusim.workflow import load_graph, load_hw, plan_graph
from planners.tiling import memo, tiler
from planners.tiling.estimate import op_k_slices
from planners.tiling.tiler import _largest_tile_bytes, _sample_boxes, _tile_bytes


def general_largest_tile_bytes(op, graph, blocks, k, align, acc) -> int:
    """The general path: ``_tile_bytes`` on every sample tile and first/last slice."""
    shape = graph.tensors[op.outputs[0]].shape
    slices = op_k_slices(op, graph, k)
    worst = 0
    for box in _sample_boxes(shape, blocks):
        for j in {0, len(slices) - 1}:
            worst = max(worst, _tile_bytes(op, graph, box, slices[j], j == len(slices) - 1, align, acc))
    return worst


def _t(name, shape, kind="activation", itemsize=1):
    return dict(name=name, shape=list(shape), dtype="int8" if itemsize == 1 else "float16", itemsize=itemsize,
                kind=kind)


def random_conv(rng: random.Random):
    groups = rng.choice([1, 1, 2, 4])
    cin, cout = groups * rng.randint(1, 6), groups * rng.randint(1, 6)
    rank = rng.choice([1, 2, 2, 3])
    kernel = [rng.randint(1, 4) for _ in range(rank)]
    strides = [rng.randint(1, 3) for _ in range(rank)]
    dilations = [rng.randint(1, 3) for _ in range(rank)]
    pads = [rng.randint(0, 3) for _ in range(2 * rank)]
    size = [rng.randint(3, 17) for _ in range(rank)]
    out = [(n + pads[i] + pads[i + rank] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
           for i, n in enumerate(size)]
    if min(out) < 1:
        return None
    batch = rng.randint(1, 2)
    tensors = [_t("x", [batch, cin, *size], "input", rng.choice([1, 2])), _t("w", [cout, cin // groups, *kernel], "weight"),
               _t("b", [cout], "weight"), _t("y", [batch, cout, *out], "output")]
    attrs = dict(group=groups, kernel_shape=kernel, strides=strides, dilations=dilations, pads=pads)
    conv = dict(name="conv", kind="Conv", inputs=["x", "w", "b"][:rng.choice([2, 3])], outputs=["y"], attrs=attrs,
                macs=batch * cout * (cin // groups) * _prod(kernel) * _prod(out))
    return build_graph("conv", tensors[:2] + ([tensors[2]] if len(conv["inputs"]) == 3 else []) + [tensors[3]], [conv])


def random_matmul(rng: random.Random):
    m, k, n = rng.randint(1, 40), rng.randint(1, 40), rng.randint(1, 40)
    if rng.random() < 0.5:
        batch = [rng.randint(1, 3)] if rng.random() < 0.5 else []
        b_batch = batch if rng.random() < 0.5 else []
        tensors = [_t("a", [*batch, m, k], "input"), _t("b", [*b_batch, k, n], "weight"), _t("y", [*batch, m, n], "output")]
        op = dict(name="mm", kind="MatMul", inputs=["a", "b"], outputs=["y"], macs=m * k * n)
        return build_graph("mm", tensors, [op])
    trans_a, trans_b = rng.random() < 0.5, rng.random() < 0.5
    tensors = [_t("a", [k, m] if trans_a else [m, k], "input"), _t("b", [n, k] if trans_b else [k, n], "weight"),
               _t("c", [n], "weight"), _t("y", [m, n], "output")]
    op = dict(name="gemm", kind="Gemm", inputs=["a", "b", "c"], outputs=["y"], macs=m * k * n,
              attrs=dict(transA=int(trans_a), transB=int(trans_b)))
    return build_graph("gemm", tensors, [op])


def random_concat(rng: random.Random):
    axis = rng.randint(0, 3)
    shape = [1, rng.randint(1, 8), rng.randint(1, 9), rng.randint(1, 9)]
    names, tensors, total = [], [], 0
    for i in range(rng.randint(2, 6)):
        if names and rng.random() < 0.3:  # the same tensor twice
            names.append(names[-1])
            total += shape[axis] if axis else 1
            continue
        part = list(shape)
        if axis:
            part[axis] = rng.randint(1, 6)
        tensors.append(_t(f"x{i}", part, "input"))
        names.append(f"x{i}")
        total += part[axis]
    out = list(shape)
    out[axis] = sum(next(t["shape"][axis] for t in tensors if t["name"] == n) for n in names)
    op = dict(name="cat", kind="Concat", inputs=names, outputs=["y"], attrs=dict(axis=axis))
    return build_graph("cat", tensors + [_t("y", out, "output")], [op])


def random_elementwise(rng: random.Random):
    shape = [rng.randint(1, 3), rng.randint(1, 12), rng.randint(1, 12)]
    other = [1 if rng.random() < 0.3 else n for n in shape]
    tensors = [_t("a", shape, "input"), _t("b", other, "input"), _t("y", shape, "output")]
    inputs = rng.choice([["a", "b"], ["a", "a"], ["b", "a", "a"]])
    kind = "Add" if len(inputs) == 2 else "Sum"
    op = dict(name="ew", kind=kind, inputs=inputs, outputs=["y"], vector_ops=_prod(shape))
    return build_graph("ew", tensors, [op])


def random_pool(rng: random.Random):
    size = [rng.randint(3, 15), rng.randint(3, 15)]
    kernel, strides = [rng.randint(1, 3)] * 2, [rng.randint(1, 3)] * 2
    pads = [rng.randint(0, kernel[0] - 1)] * 4
    out = [(n + 2 * pads[0] - kernel[0]) // strides[0] + 1 for n in size]
    tensors = [_t("x", [1, 4, *size], "input"), _t("y", [1, 4, *out], "output")]
    op = dict(name="pool", kind=rng.choice(["MaxPool", "AveragePool"]), inputs=["x"], outputs=["y"],
              attrs=dict(kernel_shape=kernel, strides=strides, pads=pads), vector_ops=4 * _prod(out) * kernel[0] ** 2)
    return build_graph("pool", tensors, [op])


def _prod(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def random_blocks(rng: random.Random, op, graph):
    shape = graph.tensors[op.outputs[0]].shape
    blocks = [rng.randint(1, n) if rng.random() < 0.7 else n for n in shape]
    k = rng.choice([0, 0, 1, 2, 3, 5, 8, 16])
    return blocks, k, rng.choice([1, 8, 32, 64]), rng.choice(["scratchpad", "scratchpad", "core"])


def check(op, graph, rng, tries=20) -> None:
    for _ in range(tries):
        blocks, k, align, acc = random_blocks(rng, op, graph)
        memo.forget()
        fast = _largest_tile_bytes(op, graph, blocks, k, align, acc)
        memo.forget()
        assert fast == general_largest_tile_bytes(op, graph, blocks, k, align, acc), (op.name, blocks, k, align, acc)


@pytest.mark.parametrize("make", [random_conv, random_matmul, random_concat, random_elementwise, random_pool])
def test_largest_tile_bytes_equals_the_general_sum_on_random_ops(make):
    rng = random.Random(make.__name__)
    built = 0
    while built < 60:
        graph = make(rng)
        if graph is None:
            continue
        built += 1
        check(graph.ops[0], graph, rng)


def _graph_the_tiler_sees(trace: str):
    seen = {}

    class Seen(Exception):
        pass

    def capture(self, ctx):
        seen["graph"] = ctx.graph
        raise Seen

    run = tiler.Tiler.run
    tiler.Tiler.run = capture
    try:
        graph = load_graph(trace)
        plan_graph(graph, load_hw("edge-npu"))
    except Seen:
        return seen["graph"]
    finally:
        tiler.Tiler.run = run
    raise AssertionError("the tile stage did not run")


@pytest.mark.parametrize("trace", ["squeezenet1_0", "mobilenet_v2", "bert_tiny"])
def test_largest_tile_bytes_equals_the_general_sum_on_fused_trace_ops(trace):
    graph = _graph_the_tiler_sees(trace)
    rng = random.Random(trace)
    for op in graph.ops:
        if len(op.outputs) == 1 and graph.tensors[op.outputs[0]].shape and op.kind not in (
                "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"):
            check(op, graph, rng, tries=4)
