"""The on-chip allocation stages: whole-schedule offset assignment as a validated Plan."""

import numpy as np
import pytest

from npusim.errors import PlanningError
from npusim.graph.analysis import peak_live_bytes, reverse_post_order
from npusim.plan.validate import validate
from npusim.registry import Registry, default_registry, make_plan
from npusim.workflow import load_graph, load_hw, simulate_plan
from planners.alloc.onchip import planners as onchip_planners

from helpers import TRACE_NAMES
from test_safety_graphs import figure2, random_multistream

MID = load_hw("mid-npu")
BIG = 1 << 34  # a budget every full-lifetime footprint fits in


@pytest.mark.parametrize("trace", TRACE_NAMES)
def test_every_trace_gets_a_valid_plan_near_the_lifetime_bound(trace):
    graph = load_graph(trace)
    plan = make_plan(graph, MID, "rpo+mindspore-mo:size,first-fit", budget=BIG)
    assert validate(plan, graph) == []
    bound = peak_live_bytes(graph, reverse_post_order(graph), MID.scratchpad.alignment)
    assert plan.meta.bound == bound <= plan.meta.objective
    assert plan.meta.objective == max(r.offset + r.size for r in plan.residencies)
    assert plan.offchip_bytes()["spill"] == 0 and plan.offchip_bytes()["retrieve"] == 0


@pytest.mark.parametrize("name", [p.name for p in onchip_planners() if p.name != "exact-offsets"])
def test_every_variant_validates_on_resnet18(name):
    graph = load_graph("resnet18")
    plan = make_plan(graph, MID, f"default+{name}", budget=BIG)
    assert validate(plan, graph) == [], name


def test_the_issue_pipeline_simulates_within_its_own_footprint():
    graph = load_graph("resnet50")
    plan = make_plan(graph, MID, "rpo+mindspore-mo:size,first-fit", budget=BIG)
    budget = int(plan.meta.objective)
    plan = make_plan(graph, MID, "rpo+mindspore-mo:size,first-fit", budget=budget)
    report = simulate_plan(plan, MID, graph)
    assert report.onchip_peak_bytes <= budget
    assert report.offchip_bytes["compulsory"] == sum(t.size for t in graph.tensors
                                                     if t.kind in ("input", "weight") and t.consumers)
    with pytest.raises(PlanningError, match=f"does not fit: needs {budget:,} B, budget {budget - 64:,} B"):
        make_plan(graph, MID, "rpo+mindspore-mo:size,first-fit", budget=budget - 64)


class RandomStreams:
    """A test schedule stage: the definition order, ops spread over two streams by a seed."""

    stage = "schedule"
    description = "test only"

    def __init__(self, seed):
        self.name = f"streams{seed}"
        self.seed = seed

    def run(self, ctx):
        ctx.order = list(range(ctx.graph.n_ops))
        ctx.streams = [int(s) for s in np.random.default_rng(self.seed).integers(0, 2, size=ctx.graph.n_ops)]


def _registry(seed):
    registry = Registry()
    registry.add(RandomStreams(seed))
    for p in onchip_planners():
        registry.add(p)
    return registry


@pytest.mark.parametrize("seed", range(3))
def test_multistream_plans_are_safe_in_the_validator_and_the_simulator(seed):
    graph, _, _ = random_multistream(seed, n_ops=16, with_weights=True)
    registry = _registry(seed)
    for alloc in ("mindspore-so:unsafe,best-fit", "mindspore-mo:size,first-fit", "tflite-arena"):
        plan = make_plan(graph, MID, f"streams{seed}+{alloc}", budget=BIG, registry=registry)
        assert len(set(plan.streams)) == 2
        assert validate(plan, graph) == []
        for jitter_seed in range(3):  # explore interleavings: the tagged scratchpad must stay quiet
            simulate_plan(plan, MID, graph, jitter=0.5, seed=jitter_seed)


def test_validator_rejects_a_single_stream_assignment_run_on_several_streams():
    graph, order, streams = figure2()
    registry = Registry()

    class Figure2Streams:
        name, stage, description = "fig2", "schedule", "test only"

        def run(self, ctx):
            ctx.order, ctx.streams = list(order), list(streams)

    registry.add(Figure2Streams())
    for p in onchip_planners():
        registry.add(p)
    safe = make_plan(graph, MID, "fig2+mindspore-so:size,first-fit", budget=BIG, registry=registry)
    assert validate(safe, graph) == []
    single = make_plan(graph, MID, "default+mindspore-so:size,first-fit", budget=BIG)
    unsafe_plan = type(safe)(**{**safe.__dict__, "residencies": single.residencies})
    found = validate(unsafe_plan, graph)
    assert any(v.kind == "overlap" and "different streams" in v.message for v in found)
    assert validate(single, graph) == []  # the same offsets are fine on one stream


def test_registry_lists_the_variants():
    names = default_registry().names()
    for expected in ("naive", "tflite-arena", "tflm-greedy", "so-size", "so-breadth", "so-size-improved",
                     "mindspore-so:breadth,best-fit", "mindspore-mo:unsafe,first-fit", "exact-offsets"):
        assert expected in names
