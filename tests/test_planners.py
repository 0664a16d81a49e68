"""The baseline pipeline (schedule + arena + spill policy) on every trace and budget."""

import re

import pytest

from npusim.errors import PlanningError, RegistryError
from npusim.graph.model import build_graph
from npusim.hw.config import Hardware
from npusim.plan.validate import validate
from npusim.registry import default_registry, make_plan
from npusim.workflow import load_graph, load_hw, memory_bounds, run

from helpers import TRACE_NAMES, chain_with_skip, tensor

EDGE = load_hw("edge-npu")


def budgets(graph, hw):
    b = memory_bounds(graph, hw.scratchpad.alignment)
    return {"MR": b.m_r, "MH": b.m_h, "MP": b.m_p}


@pytest.mark.parametrize("trace", TRACE_NAMES)
@pytest.mark.parametrize("pipeline", ["default+arena+belady", "rpo+arena+lru"])
def test_baseline_plans_validate_and_simulate(trace, pipeline):
    graph = load_graph(trace)
    for label, budget in budgets(graph, EDGE).items():
        plan, report = run(graph, EDGE, pipeline, budget)  # run() validates before simulating
        assert validate(plan, graph) == [], (trace, label)
        assert report.offchip_bytes == plan.offchip_bytes()
        assert report.onchip_peak_bytes <= budget
        # every input and weight is loaded at least once, compulsorily
        assert report.offchip_bytes["compulsory"] == sum(
            t.size for t in graph.tensors if t.kind in ("input", "weight") and t.consumers)
        assert report.offchip_bytes["writeback"] == sum(t.size for t in graph.tensors if t.kind == "output")


def test_spill_shrinks_as_budget_grows():
    graph = load_graph("resnet50")
    b = budgets(graph, EDGE)
    spills = [make_plan(graph, EDGE, "default+arena+belady", budget=b[k]).offchip_bytes()["spill"]
              for k in ("MR", "MH", "MP")]
    assert spills[0] > 0 and spills[0] >= spills[1] >= spills[2]


def test_belady_spills_no_more_than_lru_on_a_chain():
    graph = load_graph("resnet18")
    budget = budgets(graph, EDGE)["MR"]
    belady = make_plan(graph, EDGE, "default+arena+belady", budget=budget).offchip_bytes()
    lru = make_plan(graph, EDGE, "default+arena+lru", budget=budget).offchip_bytes()
    assert belady["spill"] + belady["retrieve"] <= lru["spill"] + lru["retrieve"]


def _stranding_chain():
    """x -P-> a -Q-> c -R-> big -S-> sig -M(big, sig)-> y, sizes in 64-B units 2, 6, 3, 19,
    19, 19 (EfficientNet-B0's expand conv, then SiLU as Sigmoid and Mul, scaled down).

    At a 60-unit budget best fit puts c above a, big above c, and sig above big: when M needs
    19 contiguous units for y, 11 are free below big and 11 above sig, and two 19-unit
    tensors go out and back although M's working set (57) fits."""
    u = 64
    sizes = {"x": 2, "a": 6, "c": 3, "big": 19, "sig": 19, "y": 19}
    kinds = {"x": "input", "y": "output"}
    tensors = [tensor(n, k * u, kinds.get(n, "activation")) for n, k in sizes.items()]
    ops = [dict(name=name, kind=kind, inputs=ins, outputs=[out], vector_ops=sizes[out] * u)
           for name, kind, ins, out in [("P", "Relu", ["x"], "a"), ("Q", "Relu", ["a"], "c"),
                                        ("R", "Relu", ["c"], "big"), ("S", "Sigmoid", ["big"], "sig"),
                                        ("M", "Mul", ["big", "sig"], "y")]]
    return build_graph("stranding_chain", tensors, ops), 60 * u


def test_arena_places_for_the_next_ops_instead_of_spilling():
    """Placement lookahead (planners/alloc/arena.py): R's output goes to the top of its gap,
    so S's fills the bottom and M finds room; plain best fit (placement_lookahead=0) spills."""
    graph, budget = _stranding_chain()
    ahead = make_plan(graph, Hardware(), "default+arena+belady", budget=budget)
    plain = make_plan(graph, Hardware(), "default+arena+belady", budget=budget, options={"placement_lookahead": 0})
    assert validate(ahead) == [] and validate(plain) == []
    assert ahead.offchip_bytes()["spill"] == 0
    assert plain.offchip_bytes()["spill"] == 2 * 19 * 64


def test_below_mr_is_a_clear_error():
    graph = load_graph("resnet50")
    m_r = budgets(graph, EDGE)["MR"]
    with pytest.raises(PlanningError) as info:
        make_plan(graph, EDGE, "default+arena+belady", budget=m_r - 1)
    msg = str(info.value)
    assert f"M_R = {m_r} B" in msg and "/layer4/layer4.0/conv2/Conv" in msg


def test_arena_without_spill_policy_says_what_to_add():
    graph = chain_with_skip()
    with pytest.raises(PlanningError, match=r"\+belady"):
        make_plan(graph, Hardware(), "default+arena", budget=2560)
    plan = make_plan(graph, Hardware(), "default+arena", budget=1 << 20)
    assert validate(plan, graph) == []


def test_spill_and_retrieve_by_hand():
    """Budget 2.5 KiB: preparing step 2 (C), tensor a (needed again by D at step 4) goes out."""
    graph = chain_with_skip()
    plan = make_plan(graph, Hardware(), "default+arena+belady", budget=2 * 1024 + 512)
    assert validate(plan, graph) == []
    moves = [(t.step, t.kind, graph.tensors[t.tensor].name, t.cause) for t in plan.transfers]
    assert (1, "store", "a", "spill") in moves and (4, "load", "a", "retrieve") in moves


def test_registry_rejects_bad_pipelines():
    reg = default_registry()
    with pytest.raises(RegistryError, match="unknown planner 'nope'"):
        reg.pipeline("default+nope")
    with pytest.raises(RegistryError, match="both schedule"):
        reg.pipeline("default+rpo+arena")
    with pytest.raises(RegistryError, match="joined by"):
        reg.pipeline("default++arena")
    assert {"default", "rpo", "arena", "belady", "lru"} <= set(reg.names())


@pytest.mark.parametrize("spec, stage", [("cosma+arena", "alloc"), ("rpo+cosma", "schedule"),
                                         ("cosma+belady", "spill"), ("streams-rr+olla", "streams"),
                                         ("streams-rr+cosma-fs", "streams"), ("cosma-dnc+greedy-ilp", "spill")])
def test_joint_planners_refuse_the_stages_they_decide(spec, stage):
    """A joint planner decides those stages itself: another planner there would be silently
    overwritten (or, for an allocation stage before it, fail deep inside), so it is refused."""
    with pytest.raises(RegistryError, match=f"cannot be combined with the {stage} stage"):
        default_registry().pipeline(spec)


def test_joint_planners_take_a_tiling_stage_before_and_an_offchip_stage_after():
    graph = chain_with_skip()
    hw = Hardware()
    budget = memory_bounds(graph, hw.scratchpad.alignment).m_h
    names = [p.name for p in default_registry().pipeline("taa+cosma+tile")]
    assert names == ["tile", "cosma", "taa"]
    plan = make_plan(graph, hw, "cosma+offchip-so", budget=budget)
    assert validate(plan, graph) == [] and plan.dram  # the off-chip stage laid out cosma's transfers
    ordered = make_plan(graph, hw, "rpo+cosma-fs", budget=budget)  # cosma-fs takes the schedule stage's order
    assert validate(ordered, graph) == []

def test_deterministic_plans():
    graph = load_graph("googlenet")
    budget = budgets(graph, EDGE)["MR"]
    a = make_plan(graph, EDGE, "rpo+arena+belady", budget=budget)
    b = make_plan(graph, EDGE, "rpo+arena+belady", budget=budget)
    assert a.residencies == b.residencies and a.transfers == b.transfers and a.order == b.order


def test_an_unknown_planner_option_is_refused_with_the_likely_name():
    """A typo must not silently run with the default: 'time_limt' names 'time_limit'. A
    known option the pipeline does not read (a solver's time limit for a heuristic) is fine,
    so one set of options can go to every pipeline of a sweep."""
    graph, hw = chain_with_skip(), Hardware()
    with pytest.raises(PlanningError, match=r"unknown planner option 'time_limt' \(did you mean 'time_limit'\?\)"):
        make_plan(graph, hw, "zhong+arena+belady", budget=1 << 20, options={"time_limt": 1})
    with pytest.raises(PlanningError, match="unknown planner option 'nope'; the options its stages read are "):
        make_plan(graph, hw, "default+arena+belady", budget=1 << 20, options={"nope": 1})
    plan = make_plan(graph, hw, "default+arena+belady", budget=1 << 20, options={"time_limit": 1, "workers": 1})
    assert validate(plan, graph) == []
    # ... but not with a value no planner could read: a mistake whichever pipeline runs
    for bad, expected in ((("time_limit", "abc"), "time_limit='abc', expected a number in"),
                          (("time_limit", -1), "time_limit=-1, expected a number in"),
                          (("workers", 0), "workers=0, expected an integer in")):
        with pytest.raises(PlanningError, match=re.escape(expected) + r".*\(no stage of pipeline 'default\+arena"):
            make_plan(graph, hw, "default+arena+belady", budget=1 << 20, options=dict([bad]))
