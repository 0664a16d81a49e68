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

from npusim.errors import InternalError

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
    except InternalError as exc:  # (a stage's own exception is its bug, the pipeline says: this one is the test's)
        if isinstance(exc.__cause__, Seen):
            return seen["graph"]
        raise
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


def reference_conv_boxes(op, graph, out_box, k_range, last_k):
    """A Conv's input boxes with ``regions._halo`` per spatial dimension (the rule's
    definition, before it was inlined)."""
    from npusim.graph.regions import _halo, _spatial

    x, w = graph.tensors[op.inputs[0]].shape, graph.tensors[op.inputs[1]].shape
    groups, per_group_out, cin_g = int(op.attrs.get("group", 1)), w[0] // int(op.attrs.get("group", 1)), w[1]
    _, strides, dilations, pads = _spatial(op, len(x))
    c0, c1 = out_box[1]
    k0, k1 = k_range or (0, cin_g)
    if groups == 1:
        channels = (k0, k1)
    else:
        g0, g1 = c0 // per_group_out, (c1 - 1) // per_group_out + 1
        channels = (g0 * cin_g + k0, (g1 - 1) * cin_g + k1) if g1 - g0 == 1 else (g0 * cin_g, g1 * cin_g)
    box = [out_box[0], channels]
    for i in range(len(x) - 2):
        a, b = out_box[2 + i]
        box.append(_halo(a, b, strides[i], pads[i], w[2 + i], dilations[i], x[2 + i]))
    found = [tuple(box), ((c0, c1), (k0, k1)) + tuple((0, n) for n in w[2:])]
    if len(op.inputs) > 2:
        found.append(((c0, c1),) if last_k else None)
    return found


def random_box(rng: random.Random, shape):
    box = []
    for n in shape:
        a = rng.randrange(n)
        box.append((a, rng.randint(a + 1, n)))
    return tuple(box)


def test_the_conv_rule_equals_the_halo_of_each_dimension():
    from npusim.graph.regions import box_rule

    rng = random.Random(7)
    built = 0
    while built < 300:
        graph = random_conv(rng)
        if graph is None:
            continue
        built += 1
        op = graph.ops[0]
        rule, cin_g = box_rule(op, graph), graph.tensors[op.inputs[1]].shape[1]
        for _ in range(10):
            box = random_box(rng, graph.tensors[op.outputs[0]].shape)
            k0 = rng.randrange(cin_g)
            k_range = rng.choice([None, (k0, rng.randint(k0 + 1, cin_g))])
            last = rng.random() < 0.5
            assert rule(box, k_range, last) == reference_conv_boxes(op, graph, box, k_range, last), (op.attrs, box)


def _rule_by_box_agrees(op, graph, rng, boxes=10):
    """box_rule_by_box(op)(box)(k_range, last) == box_rule(op)(box, k_range, last) on random
    boxes, each with the reductions slices of a few random lengths. Returns how many it compared."""
    from npusim.graph.regions import box_rule, box_rule_by_box, reduction_size

    rule, by_box = box_rule(op, graph), box_rule_by_box(op, graph)
    total, compared = reduction_size(op, graph), 0
    for _ in range(boxes):
        box = random_box(rng, graph.tensors[op.outputs[0]].shape)
        at = by_box(box)
        for k in (0, rng.randint(1, total)):
            slices = [None] if not k else [(a, min(a + k, total)) for a in range(0, total, k)]
            for j, k_range in enumerate(slices):
                last = j == len(slices) - 1
                assert at(k_range, last) == rule(box, k_range, last), (op.name, box, k_range, last)
                compared += 1
    return compared


def test_the_rule_by_box_equals_the_rule_on_random_convolutions():
    # the expansion finds a conv tile's halo once per box (box_rule_by_box), then its
    # channels per reduction slice: the boxes are box_rule's
    rng = random.Random(11)
    built = compared = 0
    while built < 200:
        graph = random_conv(rng)
        if graph is not None:
            built += 1
            compared += _rule_by_box_agrees(graph.ops[0], graph, rng)
    assert compared >= 200 * 10 * 2  # every box with at least its whole reduction and one slicing


@pytest.mark.parametrize("trace", ["resnet18", "mobilenet_v2", "bert_tiny"])
def test_the_rule_by_box_equals_the_rule_on_fused_trace_ops(trace):
    graph = _graph_the_tiler_sees(trace)
    rng = random.Random(trace)
    compared = [_rule_by_box_agrees(op, graph, rng, boxes=3)
                for op in graph.ops if len(op.outputs) == 1 and graph.tensors[op.outputs[0]].shape]
    assert len(compared) >= 10 and all(compared)


@pytest.mark.parametrize("trace", ["resnet18", "mobilenet_v2", "bert_tiny"])
def test_fused_epilogue_boxes_equal_broadcasting(trace):
    """A fused op's epilogue inputs: batch-norm parameters per channel, the rest broadcast."""
    from npusim.graph.regions import box_rule, broadcast_box

    graph = _graph_the_tiler_sees(trace)
    rng = random.Random(trace)
    fused = [op for op in graph.ops if op.attrs.get("epilogue_from") is not None]
    assert fused
    for op in fused:
        start, out_shape = op.attrs["epilogue_from"], graph.tensors[op.outputs[0]].shape
        kinds = op.attrs.get("epilogue_input_kinds") or [""] * (len(op.inputs) - start)
        rule = box_rule(op, graph)
        for _ in range(10):
            box = random_box(rng, out_shape)
            expected = []
            for t, kind in zip(op.inputs[start:], kinds):
                shape = graph.tensors[t].shape
                expected.append((box[1],) if kind == "BatchNormalization" and len(shape) == 1 and len(out_shape) > 1
                                else broadcast_box(shape, out_shape, box))
            assert rule(box, None, True)[start:] == expected
            assert rule(box, None, False)[start:] == [None] * len(expected)


def test_epilogue_picks_read_batch_norm_parameters_per_channel_and_broadcast_the_rest():
    from npusim.graph.regions import _epilogue_picks, broadcast_box

    rng = random.Random(3)
    for _ in range(500):
        out_shape = tuple(rng.randint(1, 6) for _ in range(rng.randint(1, 4)))
        kind = rng.choice(["BatchNormalization", "Add", "Mul", ""])
        shape = (out_shape[1],) if kind == "BatchNormalization" and len(out_shape) > 1 and rng.random() < 0.7 else \
            tuple(rng.choice([1, n]) for n in out_shape[rng.randint(0, len(out_shape)):])
        box = random_box(rng, out_shape)
        got = tuple([box[k] if k is not None else whole for k, whole in _epilogue_picks(shape, out_shape, kind)])
        bn = kind == "BatchNormalization" and len(shape) == 1 and len(out_shape) > 1
        assert got == ((box[1],) if bn else broadcast_box(shape, out_shape, box)), (shape, out_shape, kind, box)


def _tiling(trace: str, hw_name: str, budget: str | None) -> dict:
    from npusim.workflow import resolve_budget

    seen = {}

    class Tiled(Exception):
        pass

    run = tiler.Tiler.run

    def capture(self, ctx):
        run(self, ctx)
        seen["tiling"] = ctx.tiling
        raise Tiled

    tiler.Tiler.run = capture
    try:
        graph, hw = load_graph(trace), load_hw(hw_name)
        plan_graph(graph, hw, budget=resolve_budget(budget, graph, hw) if budget else None)
    except InternalError as exc:  # (the test's exception, out of a stage: the pipeline calls it the stage's bug)
        if isinstance(exc.__cause__, Tiled):
            return seen["tiling"]
        raise
    finally:
        tiler.Tiler.run = run
    raise AssertionError("the tile stage did not run")


@pytest.mark.parametrize("hw_name", ["zigzag-edge-tpu-like", "edge-npu"])
def test_the_hardware_wide_memo_chooses_what_costing_every_tile_afresh_does(monkeypatch, hw_name):
    """Transfer costs, compute cycles and bands are memoised across ops by a key of what they
    read (``memo.hw_cached``): on an unrolled array (whose cycles read a GEMM's loop nest, not
    part of its equality) and on a systolic one, the specs are those of costing afresh."""
    tiler._CHOSEN.clear()
    memoised = _tiling("resnet18", hw_name, "64KiB")
    monkeypatch.setattr(memo, "hw_cached", lambda name, hw, key, compute: compute())
    tiler._CHOSEN.clear()
    assert _tiling("resnet18", hw_name, "64KiB") == memoised
    tiler._CHOSEN.clear()


@pytest.mark.parametrize("hw_name", ["zigzag-edge-tpu-like", "edge-npu"])
def test_tile_costs_memoised_across_ops_equal_costs_made_afresh(hw_name):
    """Every tile of every op of a network, costed in turn with the hardware-wide memo filled
    by the ops before (``memo.hw_cached``), against the same tile costed afresh."""
    from planners.tiling import estimate

    graph, hw = _graph_the_tiler_sees("resnet18"), load_hw(hw_name)
    rng = random.Random(hw_name)
    ops = [op for op in graph.ops if op.kind in ("Conv", "Gemm", "MaxPool", "Add")]
    memo.forget()
    cases = []
    for op in ops:
        shape = graph.tensors[op.outputs[0]].shape
        for _ in range(12):
            blocks = [rng.choice([n, max(1, n // 2), max(1, n // 4), 1]) for n in shape]
            k = rng.choice([0, 0, 16, 32])
            for box, _count in estimate._box_classes(shape, blocks):
                for k_range, _n, last in estimate.op_slice_classes(op, graph, k):
                    run = rng.choice([None, "run-first", "run-middle", "run-last"])
                    cost = estimate._tile_compute(op, graph, box, k_range, last, hw, "scratchpad", run)
                    t = graph.tensors[op.inputs[0]]
                    region = estimate.op_input_boxes(op, graph, box, k_range, last)[0]
                    moved = estimate._transfer_cycles(t, region, hw, False, None, op, graph)
                    cases.append((op, box, k_range, last, run, t, region, cost, moved))
    for op, box, k_range, last, run, t, region, cost, moved in cases:
        assert estimate._tile_compute_of(op, graph, box, k_range, last, hw, "scratchpad", run) == cost, (op.name, box)
        assert estimate._transfer_cycles_of(t, region, hw, False, None) == moved, (op.name, region)
    memo.forget()


def _plain_conv(size_in: list[int], size_out: list[int], channels: int = 32):
    tensors = [_t("x", [1, channels, *size_in], "input"), _t("w", [channels, channels, 3, 3], "weight"),
               _t("y", [1, channels, *size_out], "output")]
    conv = dict(name="conv", kind="Conv", inputs=["x", "w"], outputs=["y"], macs=channels * channels * 9 * 64,
                attrs=dict(kernel_shape=[3, 3], strides=[1, 1], pads=[0, 0, 0, 0]),
                gemm=dict(m=size_out[0] * size_out[1], n=channels, k=channels * 9))  # loops from the shapes
    return build_graph("conv", tensors, [conv])


@pytest.mark.parametrize("hw_name", ["zigzag-edge-tpu-like", "zigzag-meta-prototype"])
def test_tiles_of_one_gemm_but_other_loops_are_costed_apart(hw_name):
    """A 1×64 and an 8×8 output of a 3×3 conv are one GEMM (M 64, N 32, K 288), equal as
    Gemms (their loop nests are not part of the equality), but an unrolled array runs them
    in different cycles: the memo across ops must tell them apart."""
    from planners.tiling import estimate

    hw = load_hw(hw_name)
    row, square = _plain_conv([3, 66], [1, 64]), _plain_conv([10, 10], [8, 8])
    memo.forget()
    costs = []
    for graph in (row, square):
        op = graph.ops[0]
        box = tuple((0, n) for n in graph.tensors[op.outputs[0]].shape)
        costs.append(estimate._tile_compute(op, graph, box, None, True, hw))
    assert costs[1] == estimate._tile_compute_of(square.ops[0], square, box, None, True, hw, "scratchpad", None)
    assert costs[0] != costs[1]
    memo.forget()


def test_a_search_gives_up_only_on_ops_whose_streaming_would_not_pay():
    """Ops that fit the budget but not half of it: the search given the times to beat
    (``_untiled_against``) returns the spec the full search does, or None where
    ``_streaming_pays`` refuses that spec."""
    from npusim.graph.analysis import op_working_set
    from npusim.plan.layout import image_like_tensors

    graph, hw = _graph_the_tiler_sees("resnet50"), load_hw("edge-npu")
    capacity, align = hw.scratchpad.size, hw.scratchpad.alignment
    needs, image_like = op_working_set(graph, align), image_like_tensors(graph)
    gave_up = paid = 0
    for op in graph.ops:
        if not capacity // 2 < needs[op.id] <= capacity:
            continue
        tiler._CHOSEN.clear()
        full = tiler.choose_spec(op, graph, align, capacity, hw, "time", image_like, {})
        pays = tiler._streaming_pays(op, graph, full, hw, align, capacity, image_like)
        tiler._CHOSEN.clear()
        lazy = tiler.choose_spec(op, graph, align, capacity, hw, "time", image_like, {},
                                 tiler._untiled_against(op, graph, hw, image_like))
        assert lazy == full or (lazy is None and not pays), op.name
        gave_up += lazy is None
        paid += pays
    tiler._CHOSEN.clear()
    assert gave_up and paid  # both ways taken


@pytest.mark.parametrize("trace,budget", [("resnet18", 64 * 1024), ("mobilenet_v2", 128 * 1024), ("bert_tiny", 32 * 1024)])
def test_the_lazy_ranking_chooses_what_the_eager_one_does(monkeypatch, trace, budget):
    """On an array that keeps no operand still, ``_estimated_lazily`` against the ranking that
    bounds every candidate first (taken when ``_has_runs``): the same spec for every op."""
    from npusim.errors import PlanningError
    from npusim.plan.layout import image_like_tensors

    graph, hw = _graph_the_tiler_sees(trace), load_hw("edge-npu")
    image_like, align = image_like_tensors(graph), hw.scratchpad.alignment
    ops = [op for op in graph.ops if len(op.outputs) == 1 and graph.tensors[op.outputs[0]].shape]

    def specs():
        chosen = {}
        for op in ops:
            tiler._CHOSEN.clear()
            try:
                chosen[op.name] = tiler.choose_spec(op, graph, align, budget, hw, "time", image_like, {})
            except PlanningError as exc:
                chosen[op.name] = str(exc)
        return chosen

    lazy = specs()
    monkeypatch.setattr(tiler, "_has_runs", lambda op, hw: True)
    assert specs() == lazy
    tiler._CHOSEN.clear()
