"""Fused epilogues (npusim.graph.fusion, the `fuse` stage in planners/fusion)."""

from __future__ import annotations

import json

import pytest

from npusim import load_graph, load_hw, plan_graph, simulate_plan
from npusim.cli import main
from npusim.errors import PlanError
from npusim.graph.fusion import fuse, fusion_problems
from npusim.graph.model import build_graph
from npusim.graph.ops.costs import op_cost
from npusim.graph.tiling import expand
from npusim.graph.training import make_training_graph
from npusim.hw.costs import core_cycles, systolic_cycles
from npusim.plan.io import load_plan, plan_from_dict, plan_to_dict, save_plan
from npusim.plan.validate import check_tiling, validate
from planners.fusion import epilogue_chains


def t(name, shape, kind="activation"):
    return dict(name=name, shape=shape, dtype="int8", itemsize=1, kind=kind)


def costed_graph(name, tensors, ops):
    """``build_graph`` with each op's MACs, vector ops and GEMM view from its shapes, as the
    ONNX importer counts them."""
    shapes = {r["name"]: r["shape"] for r in tensors}
    for op in ops:
        cost = op_cost(op["kind"], op.get("attrs", {}), [shapes[i] for i in op["inputs"]],
                       [shapes[o] for o in op["outputs"]])
        op.update(macs=cost.macs, vector_ops=cost.vector_ops, gemm=cost.gemm)
    return build_graph(name, tensors, ops)


def residual_block():
    """x -> conv1 -> relu1 -> conv2 -> add(+ down(x)) -> relu2 -> out; the downsample conv comes
    after conv2 in op order, as in torchvision's ResNet export."""
    conv = lambda name, src, dst, w, cin, cout: dict(  # noqa: E731
        name=name, kind="Conv", inputs=[src, w, w + "b"], outputs=[dst],
        attrs=dict(group=1, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]))
    tensors = [t("x", [1, 8, 12, 12], "input"), t("w1", [16, 8, 3, 3], "weight"), t("w1b", [16], "weight"),
               t("c1", [1, 16, 12, 12]), t("r1", [1, 16, 12, 12]), t("w2", [16, 16, 3, 3], "weight"),
               t("w2b", [16], "weight"), t("c2", [1, 16, 12, 12]), t("wd", [16, 8, 3, 3], "weight"),
               t("wdb", [16], "weight"), t("d", [1, 16, 12, 12]), t("s", [1, 16, 12, 12]),
               t("out", [1, 16, 12, 12], "output")]
    ops = [conv("conv1", "x", "c1", "w1", 8, 16), dict(name="relu1", kind="Relu", inputs=["c1"], outputs=["r1"]),
           conv("conv2", "r1", "c2", "w2", 16, 16), conv("down", "x", "d", "wd", 8, 16),
           dict(name="add", kind="Add", inputs=["c2", "d"], outputs=["s"]),
           dict(name="relu2", kind="Relu", inputs=["s"], outputs=["out"])]
    return costed_graph("block", tensors, ops)


def test_chains_follow_single_readers_and_the_bigger_gemm_takes_a_shared_add():
    graph = residual_block()
    chains = epilogue_chains(graph)
    # conv2 (16 -> 16 channels) has more MACs than the downsample (8 -> 16): it takes add + relu2;
    # relu2's output is the graph output, but relu2 itself fuses (its input is not an output)
    assert chains == {"conv1": ["relu1"], "conv2": ["add", "relu2"]}


def test_fused_graph_keeps_work_drops_intermediates_and_stays_topological():
    graph = residual_block()
    fused = fuse(graph, epilogue_chains(graph))
    assert [o.name for o in fused.ops] == ["conv1", "down", "conv2"]  # conv2 at the Add's place
    assert {"c1", "c2", "s"}.isdisjoint(fused.tensor_by_name)
    conv2 = fused.op_by_name["conv2"]
    assert [fused.tensors[i].name for i in conv2.inputs] == ["r1", "w2", "w2b", "d"]
    assert fused.tensors[conv2.outputs[0]].name == "out"
    assert conv2.attrs["epilogue"] == ["Add", "Relu"] and conv2.attrs["epilogue_from"] == 3
    assert sum(o.macs for o in fused.ops) == sum(o.macs for o in graph.ops)
    assert sum(o.vector_ops for o in fused.ops) == sum(o.vector_ops for o in graph.ops)
    for op in fused.ops:  # every input made by an op earlier in the list
        for i in op.inputs:
            producer = fused.tensors[i].producer
            assert producer is None or producer < op.id


@pytest.mark.parametrize(("fusion", "reason"), [
    ({"conv1": ["relu2"]}, "read by other ops"),          # not the next link
    ({"relu1": ["conv2"]}, "not a GEMM-like op"),
    ({"conv1": ["relu1", "conv2"]}, "not an element-wise epilogue"),
    ({"down": ["add"], "conv2": ["add"]}, "fused twice"),
    ({"conv1": ["nope"]}, "not in graph"),
    ({"conv1": []}, "lists no ops"),
])
def test_illegal_fusions_are_named(fusion, reason):
    problems = fusion_problems(residual_block(), fusion)
    assert problems and reason in problems[0]
    with pytest.raises(PlanError, match=reason):
        fuse(residual_block(), fusion)


def test_a_tensor_another_op_reads_or_a_graph_output_is_never_fused_away():
    tensors = [t("x", [1, 4, 4, 4], "input"), t("w", [4, 4, 1, 1], "weight"), t("y", [1, 4, 4, 4], "output"),
               t("z", [1, 4, 4, 4], "output")]
    ops = [dict(name="conv", kind="Conv", inputs=["x", "w"], outputs=["y"], attrs=dict(kernel_shape=[1, 1])),
           dict(name="relu", kind="Relu", inputs=["y"], outputs=["z"])]
    graph = costed_graph("out", tensors, ops)
    assert epilogue_chains(graph) == {}
    assert "graph output" in fusion_problems(graph, {"conv": ["relu"]})[0]


def test_training_graphs_keep_their_saved_activations():
    """Only a tensor read by nothing but the next link is fused away: an activation the
    backward pass saves has a second reader and stays."""
    training = make_training_graph(load_graph("resnet18"))
    chains = epilogue_chains(training)
    fused = fuse(training, chains)
    links = {n for chain in chains.values() for n in chain}
    fused_away = set(training.tensor_by_name) - set(fused.tensor_by_name)
    assert fused_away
    for name in fused_away:
        readers = [training.ops[c].name for c in training.tensor_by_name[name].consumers]
        assert len(readers) == 1 and readers[0] in links, name
    hw = load_hw("edge-npu")
    plan = plan_graph(training, hw, "fuse+tile+default+arena+belady")
    assert validate(plan, training) == []
    assert simulate_plan(plan, hw, training).cycles > 0


def test_fused_op_takes_the_longer_of_array_and_vector():
    graph = residual_block()
    conv2 = fuse(graph, epilogue_chains(graph)).op_by_name["conv2"]
    for lanes in (16, 1):  # 1 lane: the epilogue is slower than the array
        hw = load_hw("edge-npu", {"cores.vector_lanes": lanes})
        array = systolic_cycles(conv2.gemm, 16, 16, "os")
        parts, bound = core_cycles(conv2.kind, conv2.gemm, conv2.macs, conv2.vector_ops, hw, 1, fused=True)
        assert parts == [max(array, conv2.vector_ops / lanes)]
        assert bound == ("vector" if conv2.vector_ops / lanes > array else "array")
        unfused, _ = core_cycles(conv2.kind, conv2.gemm, conv2.macs, conv2.vector_ops, hw, 1)
        assert unfused == [array]  # an op without an epilogue: its vector work is another op's


def test_fused_ops_tile_with_their_residual_and_bias_reads():
    graph = residual_block()
    fused = fuse(graph, epilogue_chains(graph))
    specs = {"conv2": {"block": [1, 8, 4, 12], "k": 8, "order": [2, 1, 0, 3]}}
    found = []
    check_tiling(fused, expand(fused, specs), lambda kind, msg: found.append(msg))
    assert found == []
    tiles = [o for o in expand(fused, specs).ops if o.attrs.get("tile_of") == "conv2"]
    assert all(o.attrs["epilogue"] == ["Add", "Relu"] for o in tiles)
    assert sum(o.vector_ops for o in tiles) >= fused.op_by_name["conv2"].vector_ops  # on the last k slice


def test_plan_records_the_fusion_and_round_trips(tmp_path):
    graph, hw = load_graph("resnet18"), load_hw("edge-npu")
    plan = plan_graph(graph, hw, "fuse+tile+default+arena+belady")
    assert plan.fusion and plan.graph == "resnet18@fused@tiled"
    assert validate(plan, graph) == []
    save_plan(plan, tmp_path / "p.json", graph)
    assert load_plan(tmp_path / "p.json", graph) == plan
    record = plan_to_dict(plan, graph)
    record["fusion"]["/conv1/Conv"] = ["/maxpool/MaxPool"]
    with pytest.raises(PlanError, match="not an element-wise epilogue"):
        plan_from_dict(record, graph)


def test_the_validator_reports_an_illegal_fusion():
    from dataclasses import replace

    graph, hw = load_graph("squeezenet1_0"), load_hw("edge-npu")
    plan = plan_graph(graph, hw, "fuse+tile+default+arena+belady")
    bad = replace(plan, fusion=dict(plan.fusion, **{graph.ops[0].name: [graph.ops[-1].name]}))
    kinds = [v.kind for v in validate(bad, graph)]
    assert kinds and set(kinds) == {"fusion"}


def test_without_fuse_a_pipeline_plans_the_graph_as_given():
    graph, hw = load_graph("squeezenet1_0"), load_hw("edge-npu")
    plan = plan_graph(graph, hw, "tile+default+arena+belady")
    assert plan.fusion == {} and not plan.graph.startswith("squeezenet1_0@fused")
    assert "fusion" not in plan_to_dict(plan, graph)


@pytest.mark.parametrize("trace", ["resnet18", "mobilenet_v2", "squeezenet1_0"])
def test_fusing_lowers_latency_and_offchip_bytes_at_the_edge_scratchpad(trace):
    graph, hw = load_graph(trace), load_hw("edge-npu")
    plain, fused = (simulate_plan(plan_graph(graph, hw, p), hw, graph)
                    for p in ("tile+default+arena+belady", "fuse+tile+default+arena+belady"))
    assert fused.cycles < plain.cycles
    assert fused.offchip_total_bytes < plain.offchip_total_bytes
    assert fused.total_energy_pj < plain.total_energy_pj


def test_cli_plan_file_carries_the_fusion(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "squeezenet1_0", "--hw", "edge-npu", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["fusion"] and data["graph"].startswith("squeezenet1_0@fused")
    assert main(["simulate", "squeezenet1_0", "--hw", "edge-npu", "--plan", str(out)]) == 0
    assert "squeezenet1_0@fused" in capsys.readouterr().out
