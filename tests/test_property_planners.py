"""Property checks of every registered planner pipeline on random DAGs.

Graphs: chains, diamonds, NAS-like cells, wide fan-outs and random DAGs of 2-200 ops
(``npusim.testing.random_dags``); hardware with 1-4 streams; budgets drawn from [M_R, M_P];
pipelines drawn from the registry by stage (every schedule x streams x allocator x spill
policy, the joint planners, with or without tiling), so a newly registered planner is
covered without editing this file. Exact planners run on small graphs with a short
``time_limit`` and one worker (deterministic).

For every case: the plan passes the independent validator, simulates without a
SimulationError (and under jitter when multi-stream), its off-chip bytes equal the sum of its
transfers, its on-chip peak fits the budget, and a refusal is a PlanningError that is
consistent (a "does not fit" names a need above the budget). Exact planners that report
``optimal`` are never worse than the heuristics on the same case.

About 100 cases in CI; ``pytest tests/test_property_planners.py --slow`` runs >= 1,000.
Shrunk failures are kept below as regression tests.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.errors import PlanningError
from npusim.graph.analysis import peak_live_bytes
from npusim.hw.config import Hardware
from npusim.plan.validate import validate
from npusim.registry import PlanningContext, default_registry, make_plan, run_stage
from npusim.testing import random_dags
from npusim.workflow import memory_bounds, plan_graph, simulate_plan

from fuzz_support import SLOW, cases

REGISTRY = default_registry()
STAGE = {p.name: p.stage for p in REGISTRY.planners()}


def names(stage: str) -> list[str]:
    return sorted(n for n, s in STAGE.items() if s == stage)


#: Exact planners and the largest graph (ops) each is given here: they are exponential.
EXACT_MAX_OPS = ({"dp": 14, "zhong": 30, "olla-order": 20, "olla": 16, "exact-offsets": 40, "cosma": 12,
                  "cosma-fs": 16, "cosma-mpmf": 16, "cosma-dnc": 60} if SLOW else
                 {"dp": 10, "zhong": 14, "olla-order": 12, "olla": 10, "exact-offsets": 16, "cosma": 8,
                  "cosma-fs": 10, "cosma-mpmf": 10, "cosma-dnc": 24})
HEURISTIC_SCHEDULES = ["default", "rpo", "greedy-mem"]
SPILL_POLICIES = names("spill")
#: Allocators that evict (need a spill policy); the rest place tensors for their whole lifetime.
EVICTING = {"arena"}
EXACT_OPTIONS = {"time_limit": 2.0 if SLOW else 1.0, "workers": 1, "seed": 0}
MAX_OPS = 200 if SLOW else 60

# Refusals a planner may give at a budget in [M_R, M_P], with the numbers that must agree.
DOES_NOT_FIT = re.compile(r"needs ([\d,]+) (?:bytes|B)\b.*?budget (?:is )?([\d,]+)")
#: Stages that work on one stream only say so (the arena; the off-chip planners' DRAM lifetimes).
SINGLE_STREAM = ("single-stream", "several streams")


@st.composite
def graphs(draw, max_ops: int = MAX_OPS):
    family = draw(st.sampled_from(sorted(random_dags.GENERATORS)))
    size = draw(st.integers(2, max_ops))
    seed = draw(st.integers(0, 2**30))
    return random_dags.GENERATORS[family](seed, size)


def hardware(streams: int, cores: int) -> Hardware:
    base = Hardware()
    return replace(base, streams=streams, cores=replace(base.cores, count=cores))


@st.composite
def pipelines(draw, n_ops: int):
    """A registered pipeline: (tiling) schedule (streams) alloc (spill), or a joint planner."""
    fits = lambda name: n_ops <= EXACT_MAX_OPS.get(name, n_ops)  # noqa: E731
    joint = [n for n in names("joint") if fits(n)]
    if joint and draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(joint))
    parts = []
    if draw(st.integers(0, 6)) == 0:
        parts += names("tiling")
    parts.append(draw(st.sampled_from([n for n in names("schedule") if fits(n)])))
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(names("streams"))))
    alloc = draw(st.sampled_from([n for n in names("alloc") if fits(n)]))
    parts.append(alloc)
    if alloc in EVICTING:
        parts.append(draw(st.sampled_from(SPILL_POLICIES)))
    offchip = [n for n in names("offchip") if fits(n)]
    if offchip and draw(st.integers(0, 3)) == 0:
        parts.append(draw(st.sampled_from(offchip)))
    return "+".join(parts)


@st.composite
def planning_cases(draw):
    graph = draw(graphs())
    streams = draw(st.integers(1, 4))
    hw = hardware(streams, draw(st.integers(1, streams)))
    bounds = memory_bounds(graph, hw.scratchpad.alignment)
    budget = draw(st.integers(bounds.m_r, bounds.m_p))
    return graph, hw, budget, draw(pipelines(graph.n_ops))


def check_refusal(error: PlanningError, pipeline: str, budget: int) -> None:
    """A planner may refuse a budget in [M_R, M_P] only when it cannot spill, and consistently."""
    message = str(error)
    if any(text in message for text in SINGLE_STREAM):
        return
    assert not any(p in EVICTING for p in pipeline.split("+")), f"{pipeline} refused at >= M_R: {message}"
    found = DOES_NOT_FIT.search(message)
    assert found, f"{pipeline}: unexpected refusal: {message}"
    need, said_budget = (int(found.group(k).replace(",", "")) for k in (1, 2))
    assert said_budget == budget and need > budget, message


def check_plan(graph, hw, budget: int, pipeline: str, options: dict | None = None):
    """Plan, validate, simulate (jittered too when multi-stream); the plan, or None if refused."""
    try:
        plan = plan_graph(graph, hw, pipeline, budget, options=options)  # raises PlanError if invalid
    except PlanningError as error:
        check_refusal(error, pipeline, budget)
        return None
    assert validate(plan, graph) == []
    report = simulate_plan(plan, hw, graph, validated=True)
    assert report.offchip_bytes == plan.offchip_bytes()
    assert report.offchip_total_bytes == sum(t.size for t in plan.transfers)
    assert report.onchip_peak_bytes <= budget
    if len(set(plan.streams)) > 1:
        for seed in range(2):
            simulate_plan(plan, hw, graph, jitter=0.5, seed=seed, validated=True)
    return plan


@settings(max_examples=cases(100, 1_000))
@given(case=planning_cases())
def test_every_pipeline_plans_validly(case):
    graph, hw, budget, pipeline = case
    check_plan(graph, hw, budget, pipeline, dict(EXACT_OPTIONS))


# --------------------------------------------------------------------- exact vs heuristic


def _schedule(name: str, graph, options: dict, hw: Hardware | None = None) -> PlanningContext:
    ctx = PlanningContext(graph=graph, hw=hw or Hardware(), capacity=1 << 40, alignment=64)
    return run_stage(REGISTRY.get(name), ctx, options)


def _footprint(plan) -> int:
    return max((r.offset + r.size for r in plan.residencies), default=0)


@settings(max_examples=cases(12, 200))
@given(graph=graphs(max_ops=14))
def test_exact_planners_are_never_worse_when_optimal(graph):
    """dp, zhong and olla-order minimise the live-bytes peak of the order; exact-offsets the
    footprint of one order; olla the footprint over orders and offsets."""
    heuristic_orders = {n: _schedule(n, graph, {}).order or list(range(graph.n_ops)) for n in HEURISTIC_SCHEDULES}
    best_peak = min(peak_live_bytes(graph, order, 64) for order in heuristic_orders.values())
    for name in ("dp", "zhong", "olla-order"):
        ctx = _schedule(name, graph, EXACT_OPTIONS)
        if ctx.status == "optimal":
            assert peak_live_bytes(graph, ctx.order, 64) <= best_peak, name
    big = 1 << 40
    heuristics = [n for n in names("alloc") if n not in EVICTING and n not in EXACT_MAX_OPS]
    footprints = {a: _footprint(make_plan(graph, Hardware(), f"greedy-mem+{a}", budget=big)) for a in heuristics}
    exact = make_plan(graph, Hardware(), "greedy-mem+exact-offsets", budget=big, options=EXACT_OPTIONS)
    if exact.meta.status == "optimal":
        assert _footprint(exact) <= min(footprints.values()), footprints
    olla = make_plan(graph, Hardware(), "olla", budget=big, options=EXACT_OPTIONS)
    if olla.meta.status == "optimal":
        best = min(_footprint(make_plan(graph, Hardware(), f"{s}+{a}", budget=big))
                   for s in HEURISTIC_SCHEDULES for a in ("tflite-arena", "so-size-improved"))
        assert _footprint(olla) <= best


# --------------------------------------------------------------------- shrunk failures


def test_regression_arena_refuses_several_streams():
    """Found by test_every_pipeline_plans_validly (shrunk): the online arena reused addresses
    by the step order across streams, so 'default+streams-rr+arena+belady' on a 3-op random DAG
    on 2 streams put t1 and t2 (which may coexist) at the same addresses. It now refuses."""
    graph = random_dags.random_dag(3, 5)
    hw = hardware(2, 2)
    budget = 1280
    with pytest.raises(PlanningError, match="single-stream.*mindspore-mo"):
        make_plan(graph, hw, "default+streams-rr+arena+belady", budget=budget)
    # Without prefetch reservations, as the arena placed them when this was found.
    single = make_plan(graph, hw, "default+arena+belady", budget=budget, options={"prefetch_depth": 0})
    rr_streams = _schedule("streams-rr", graph, {}, hw).streams
    assert len(set(rr_streams)) > 1
    assert any(v.kind == "overlap" for v in validate(replace(single, streams=tuple(rr_streams)), graph))


def test_regression_tiler_refuses_convs_without_a_conv_layout():
    """Found while fuzzing pipelines below M_R: a trace may call an op 'Conv' with 1-D tensors
    (as random_dags does); the tiler indexed its weight as (O, I, ...) and raised IndexError.
    It now refuses with a PlanningError naming the op and the layout it needs."""
    graph = random_dags.random_dag(3, 882002)
    with pytest.raises(PlanningError, match=r"op 'op0' \(Conv\) cannot be tiled: a Conv needs input"):
        make_plan(graph, Hardware(), "tile+default+arena+belady", budget=698)
