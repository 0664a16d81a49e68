"""Off-chip (DRAM) planning in the pipeline: TAA and the baselines give layouts that validate
and simulate cleanly under the DRAM tracker, which catches a corrupted one."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from npusim.workflow import DEFAULT_PIPELINE

from npusim.cli import main
from npusim.errors import PlanningError, SimulationError
from npusim.graph.model import build_graph
from npusim.plan.dram import arena_bytes, buffer_of
from npusim.plan.io import load_plan, save_plan
from npusim.plan.bound import as_bound
from npusim.plan.validate import validate
from npusim.registry import make_plan
from npusim.util.resources import list_resources
from npusim.workflow import load_graph, load_hw, resolve_budget, simulate_plan
from planners.offchip.baselines import shared_objects_best
from planners.offchip.lifetimes import dram_buffers

EDGE = load_hw("edge-npu")
TILED = "tile+default+arena+belady"
OFFCHIP = ("taa", "offchip-so", "offchip-offsets", "offchip-naive")


def conv_relu_graph():
    t = lambda name, shape, kind="activation": dict(name=name, shape=shape, dtype="int8", itemsize=1, kind=kind)  # noqa: E731
    tensors = [t("x", [1, 8, 20, 20], "input"), t("w", [8, 8, 3, 3], "weight"), t("y", [1, 8, 20, 20]),
               t("z", [1, 8, 20, 20]), t("out", [1, 8, 20, 20], "output")]
    conv = dict(name="conv", kind="Conv", inputs=["x", "w"], outputs=["y"],
                attrs=dict(group=1, kernel_shape=[3, 3], pads=[1] * 4, strides=[1, 1]), macs=20 * 20 * 8 * 8 * 9)
    relu = dict(name="relu", kind="Relu", inputs=["y"], outputs=["z"], vector_ops=3200)
    add = dict(name="add", kind="Add", inputs=["z", "y"], outputs=["out"], vector_ops=3200)
    return build_graph("convnet", tensors, [conv, relu, add])


def plan_and_check(graph, pipeline, budget, options=None):
    plan = make_plan(graph, EDGE, pipeline, budget=budget, options=options)
    assert validate(plan, graph) == []
    tiled = as_bound(plan, graph).bound_graph
    moved = {buffer_of(tiled.tensors[tr.tensor]) for tr in plan.transfers}
    assert moved <= set(plan.dram)
    report = simulate_plan(plan, EDGE, graph, validated=True)
    assert report.offchip_peak_bytes == arena_bytes(plan.dram, tiled, graph)
    return plan, report


@pytest.fixture(scope="module")
def squeezenet():
    return load_graph("squeezenet1_0")


@pytest.fixture(scope="module")
def squeezenet_taa(squeezenet):
    return plan_and_check(squeezenet, TILED + "+taa", 256 << 10)


# -- every off-chip planner on a small tiled graph (tiles straddle and read halos) ----------------
@pytest.mark.parametrize("offchip", OFFCHIP)
def test_offchip_planners_on_a_tiled_conv(offchip):
    graph = conv_relu_graph()
    plan, report = plan_and_check(graph, TILED + "+" + offchip, 4 << 10, {"tile_all": True})
    assert plan.tiling and plan.meta.planner.endswith("+" + offchip)
    assert report.offchip_peak_bytes > 0


def test_taa_reuses_tiles_where_whole_tensors_cannot():
    graph = conv_relu_graph()
    peaks = {o: plan_and_check(graph, TILED + "+" + o, 4 << 10, {"tile_all": True})[1].offchip_peak_bytes
             for o in OFFCHIP}
    assert peaks["taa"] <= peaks["offchip-so"] <= peaks["offchip-naive"]
    assert peaks["taa"] < peaks["offchip-naive"]


def test_untiled_plans_with_spills_get_a_layout_too():
    graph = load_graph("resnet18")
    plan, report = plan_and_check(graph, "default+arena+belady+taa",
                                  resolve_budget("MR", graph, EDGE, allow_oversize=True))
    assert not plan.tiling and plan.offchip_bytes()["spill"] > 0
    weights = [t.name for t in graph.tensors if t.kind == "weight" and t.name in plan.dram]
    assert weights and all(plan.dram[w] >= report.offchip_peak_bytes for w in weights)  # above the arena


# -- real traces -----------------------------------------------------------------------------
@pytest.mark.parametrize("trace, budget_kib", [("resnet18", 256), ("bert_tiny", 64)])
def test_taa_plans_on_traces_validate_and_simulate(trace, budget_kib):
    graph = load_graph(trace)
    plan, report = plan_and_check(graph, TILED + "+taa", budget_kib << 10)
    assert plan.tiling
    naive = make_plan(graph, EDGE, TILED + "+offchip-naive", budget=budget_kib << 10)
    tiled = as_bound(plan, graph).bound_graph
    assert report.offchip_peak_bytes <= arena_bytes(naive.dram, tiled, graph)


def test_taa_on_squeezenet_64kib(squeezenet):
    plan, report = plan_and_check(squeezenet, TILED + "+taa", 64 << 10)
    tiled = as_bound(plan, squeezenet).bound_graph
    buffers = [b for b in dram_buffers(tiled, plan.order, plan.transfers, None, squeezenet, 64) if not b.weight]
    assert report.offchip_peak_bytes < shared_objects_best(buffers, 64).total  # the same buffers, whole


def test_a_corrupted_taa_plan_is_caught_naming_both_tensors(squeezenet, squeezenet_taa):
    plan, _ = squeezenet_taa
    tiled = as_bound(plan, squeezenet).bound_graph
    buffers = [b for b in dram_buffers(tiled, plan.order, plan.transfers, None, squeezenet, 64) if not b.weight]
    # Two buffers whose data is in DRAM at the same time: the pair overlapping longest.
    a, b = max(((x, y) for i, x in enumerate(buffers) for y in buffers[i + 1:]),
               key=lambda p: min(p[0].last, p[1].last) - max(p[0].first, p[1].first))
    bad = replace(plan, dram={**plan.dram, b.name: plan.dram[a.name]})
    assert validate(bad, squeezenet) == []  # statically fine: only the simulator sees the overwrite
    with pytest.raises(SimulationError, match="overwrite of live data") as info:
        simulate_plan(bad, EDGE, squeezenet)
    message = str(info.value)
    named = [x for x in buffers if repr(x.name) in message]
    assert b in named and len(named) == 2, message
    other = next(x for x in named if x is not b)
    lo, hi = bad.dram[b.name], bad.dram[b.name] + b.size  # the other one sits where b was moved
    assert bad.dram[other.name] < hi and lo < bad.dram[other.name] + other.size


def test_taa_plan_round_trips_through_json(squeezenet, squeezenet_taa, tmp_path):
    plan, report = squeezenet_taa
    path = tmp_path / "plan.json"
    save_plan(plan, path, squeezenet)
    data = json.loads(path.read_text())
    assert data["dram"] and set(data["dram"]) <= set(squeezenet.tensor_by_name)  # untiled names: buffers
    loaded = load_plan(path, squeezenet)
    assert loaded.dram == plan.dram
    again = simulate_plan(loaded, EDGE, squeezenet)
    assert again.cycles == report.cycles and again.offchip_peak_bytes == report.offchip_peak_bytes


def test_dram_layout_violations(squeezenet, squeezenet_taa):
    plan, _ = squeezenet_taa
    some = next(iter(plan.dram))
    missing = replace(plan, dram={k: v for k, v in plan.dram.items() if k != some})
    assert any(v.kind == "dram" and repr(some) in v.message and "no offset" in v.message
               for v in validate(missing, squeezenet))
    unknown = replace(plan, dram={**plan.dram, "nope": 0})
    assert [v.kind for v in validate(unknown, squeezenet)] == ["dram"]


def test_cli_offchip_flag(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "resnet18", "--hw", "edge-npu", "--budget", "256KiB", "--offchip", "taa", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["meta"]["planner"] == DEFAULT_PIPELINE + "+taa" and data["dram"]
    assert main(["validate", "resnet18", "--plan", str(out)]) == 0
    assert main(["plan", "resnet18", "--hw", "edge-npu", "--offchip", "tsa", "-o", str(out)]) == 2
    assert "unknown planner 'tsa'" in capsys.readouterr().err


def test_several_streams_are_refused():
    graph = conv_relu_graph()
    with pytest.raises(PlanningError, match="several streams"):
        dram_buffers(graph, [0, 1, 2], [], streams=[0, 1, 0])


@pytest.mark.slow
@pytest.mark.parametrize("trace", list_resources("traces"))
def test_taa_on_every_trace(trace):
    graph = load_graph(trace)
    plan_and_check(graph, TILED + "+taa", 256 << 10)
