"""Multi-stream plans: stream assignment, and races caught by the jittered simulator."""

import dataclasses
import json

import pytest

from npusim.errors import SimulationError
from npusim.graph.model import build_graph
from npusim.hw.loader import load_hardware
from npusim.plan.lower import lower
from npusim.plan.validate import validate
from npusim.registry import make_plan
from npusim.sim.engine import simulate
from npusim.workflow import load_graph, load_hw, run

MID = load_hardware("mid-npu")  # 2 cores, 2 streams


def two_branches():
    """x -> A -> a -> B -> b and x -> C -> c -> D -> d, joined by E(b, d) -> y."""
    t = lambda name, n, kind="activation": dict(name=name, shape=[n], dtype="int8", itemsize=1, kind=kind)  # noqa: E731
    tensors = [t("x", 4096, "input"), t("a", 8192), t("b", 1024), t("c", 8192), t("d", 2048), t("y", 64, "output")]
    op = lambda name, ins, outs, n: dict(name=name, kind="Relu", inputs=ins, outputs=outs, vector_ops=n)  # noqa: E731
    ops = [op("A", ["x"], ["a"], 8192), op("B", ["a"], ["b"], 40000), op("C", ["x"], ["c"], 8192),
           op("D", ["c"], ["d"], 2048), op("E", ["b", "d"], ["y"], 64)]
    return build_graph("two_branches", tensors, ops)


def test_round_robin_puts_branches_on_different_streams():
    graph = two_branches()
    plan = make_plan(graph, MID, "default+streams-rr+mindspore-mo:size,first-fit", budget=1 << 20)
    s = {graph.ops[o].name: plan.streams[o] for o in range(graph.n_ops)}
    assert s["A"] == s["B"] and s["C"] == s["D"] and s["A"] != s["C"]
    assert validate(plan, graph) == []


def test_category_streams_separate_gemm_and_vector_ops():
    graph = load_graph("resnet18")
    plan = make_plan(graph, MID, "default+streams-category+mindspore-mo:size,first-fit", budget=64 << 20,
                     options={"stream_capacity": 8})
    assert len(set(plan.streams)) == 2  # eight-op streams of one category, folded onto the 2 queues
    assert validate(plan, graph) == []


def test_multi_stream_plan_overlaps_branches_on_two_cores():
    """With one core per stream (``cores.split_ops: false``) two streams overlap inception's
    branches. Splitting every op over both cores (the default) does better still: no branch
    imbalance, both cores on every op (6.33 M cycles with streams-rr against 4.26 M split)."""
    graph = load_graph("inception_v3")
    per_stream = load_hw("mid-npu", {"cores.split_ops": "false"})
    one = run(graph, per_stream, "default+mindspore-mo:size,first-fit", 64 << 20)[1]
    two = run(graph, per_stream, "default+streams-rr+mindspore-mo:size,first-fit", 64 << 20)[1]
    assert two.cycles < one.cycles
    assert two.offchip_bytes == one.offchip_bytes
    split = run(graph, MID, "default+mindspore-mo:size,first-fit", 64 << 20)[1]
    assert split.cycles < two.cycles and split.offchip_bytes == one.offchip_bytes


def unsafe_plan():
    """Single-stream offsets (c reuses a's bytes once B has read a) run on two streams."""
    graph = two_branches()
    plan = make_plan(graph, MID, "default+arena+belady", budget=1 << 20)
    res = {graph.tensors[r.tensor].name: r for r in plan.residencies}
    assert res["a"].offset == res["c"].offset  # the reuse this test is about
    streams = tuple(1 if graph.ops[o].name in ("C", "D") else 0 for o in range(graph.n_ops))
    return graph, dataclasses.replace(plan, streams=streams)


def test_validator_rejects_reuse_across_unordered_streams():
    graph, plan = unsafe_plan()
    found = validate(plan, graph)
    assert any(v.kind == "overlap" and "'a'" in v.message and "'c'" in v.message for v in found)


def caught(graph, plan, seeds) -> list[int]:
    hits = []
    program = lower(plan, MID, graph)
    for seed in seeds:
        try:
            simulate(program, MID, jitter=0.5, seed=seed)
        except SimulationError as exc:
            assert "overwrite of live data" in str(exc) or "reads" in str(exc)
            hits.append(seed)
    return hits


def test_jitter_catches_the_race_and_never_flags_a_safe_plan():
    graph, unsafe = unsafe_plan()
    assert caught(graph, unsafe, range(10))  # caught within ten seeds
    safe = make_plan(graph, MID, "default+streams-rr+mindspore-mo:size,first-fit", budget=1 << 20)
    assert validate(safe, graph) == []
    assert caught(graph, safe, range(20)) == []


def test_a_multi_stream_run_says_each_stream_drives_its_own_cores(capsys):
    """Two streams on mid-npu's two cores: each stream's ops run on its own core only, and the
    report says so (a comparison with the default pipeline, which splits every op over both
    cores, would otherwise blame the allocator)."""
    from npusim.cli import main

    assert main(["simulate", "squeezenet1_0", "--hw", "mid-npu", "--set", "scratchpad.size=8MiB",
                 "--planner", "default+streams-rr+mindspore-mo:size,first-fit"]) == 0
    assert "note           2 streams, each on 1 core of 2: an op runs on its stream's cores only" in capsys.readouterr().out
    assert main(["simulate", "squeezenet1_0", "--hw", "mid-npu", "--set", "scratchpad.size=8MiB",
                 "--planner", "default+streams-rr+mindspore-mo:size,first-fit", "--json"]) == 0
    assert any("2 streams, each on 1 core of 2" in n for n in json.loads(capsys.readouterr().out)["notes"])
    assert main(["simulate", "squeezenet1_0", "--hw", "mid-npu"]) == 0
    assert "streams, each on" not in capsys.readouterr().out
