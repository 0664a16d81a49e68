"""Bounded exact planners: ``cosma`` refuses a model above ``max_cells`` unless asked to divide
and conquer (``fallback=dnc``); COSMA's part ILPs and ``exact-offsets`` refuse models above
``max_variables`` / ``max_constraints`` like the other CP-SAT planners."""

import pytest

from npusim.errors import PlanningError
from npusim.cli.experiment import run_trace
from npusim.hw.config import Hardware
from npusim.plan.validate import validate
from npusim.registry import make_plan
from npusim.testing.random_dags import nas_cell
from npusim.workflow import load_hw, memory_bounds, simulate_plan
from planners.alloc.exact import exact_offsets

from test_offsets import random_problem

HW = Hardware()
GRAPH = nas_cell(2, 3, seed=4)


def budget():
    return memory_bounds(GRAPH, HW.scratchpad.alignment).m_h


def test_cosma_refuses_a_model_above_max_cells_and_says_what_to_do():
    with pytest.raises(PlanningError) as info:
        make_plan(GRAPH, HW, "cosma", budget=budget(), options={"time_limit": 2, "max_cells": 10})
    message = str(info.value)
    for part in (repr(GRAPH.name), "(tensor, step) cells", "max_cells = 10", "'cosma-dnc'",
                 "'default+arena+belady'", "--option max_cells=N", "--option fallback=dnc"):
        assert part in message, (part, message)


def test_cosma_divides_and_conquers_when_asked_and_records_it():
    plan = make_plan(GRAPH, HW, "cosma", budget=budget(),
                     options={"time_limit": 2, "max_cells": 10, "fallback": "dnc", "part_ops": 6})
    assert validate(plan, GRAPH) == []
    simulate_plan(plan, HW, GRAPH, validated=True)
    assert plan.meta.status in ("feasible", "timed_out") and plan.meta.bound == 0
    assert "max_cells=10" in plan.meta.stats["fallback"]
    # Below the limit the option changes nothing: one exact model.
    whole = make_plan(GRAPH, HW, "cosma", budget=budget(), options={"time_limit": 2, "fallback": "dnc"})
    assert "fallback" not in whole.meta.stats
    assert whole.meta.stats["parts"] == 1


def test_a_fallback_and_cosma_dnc_solve_the_parts_once_when_deterministic(monkeypatch):
    """cosma's fallback is cosma-dnc's very solve: with the wall-clock guard off (as regress
    runs) the second asks for the kept one -- the same plan, its own stats; with the guard on
    (the default: a search's end may depend on the load), or another budget, each solves."""
    import planners.joint.cosma as cosma

    solves = []
    real = cosma.solve_sequence
    monkeypatch.setattr(cosma, "solve_sequence", lambda *a, **k: solves.append(1) or real(*a, **k))
    cosma.memo._kept.clear()
    options = {"time_limit": 2, "max_cells": 10, "part_ops": 6, "wall_guard": 0}
    fallback = make_plan(GRAPH, HW, "cosma", budget=budget(), options={**options, "fallback": "dnc"})
    dnc = make_plan(GRAPH, HW, "cosma-dnc", budget=budget(), options=options)
    assert len(solves) == 1
    assert (dnc.order, dnc.residencies, dnc.transfers) == (fallback.order, fallback.residencies, fallback.transfers)
    assert "fallback" in fallback.meta.stats and "fallback" not in dnc.meta.stats
    make_plan(GRAPH, HW, "cosma-dnc", budget=budget() + 4096, options=options)
    assert len(solves) == 2
    guarded = {k: v for k, v in options.items() if k != "wall_guard"}
    make_plan(GRAPH, HW, "cosma-dnc", budget=budget(), options=guarded)
    make_plan(GRAPH, HW, "cosma-dnc", budget=budget(), options=guarded)
    assert len(solves) == 4


def test_cosma_rejects_an_unknown_fallback():
    with pytest.raises(PlanningError, match=r"fallback='heuristic', expected one of none, dnc"):
        make_plan(GRAPH, HW, "cosma", budget=budget(), options={"fallback": "heuristic"})


@pytest.mark.parametrize("pipeline", ["cosma", "cosma-fs", "cosma-dnc"])
def test_cosma_part_models_refuse_above_max_variables(pipeline):
    with pytest.raises(PlanningError) as info:
        make_plan(GRAPH, HW, pipeline, budget=budget(), options={"time_limit": 2, "max_variables": 10})
    message = str(info.value)
    assert "cosma (part ILP)" in message and "max_variables = 10" in message and "cosma-dnc" in message


def test_exact_offsets_refuses_above_max_variables():
    problem = random_problem(21, n=25, explicit=True, blocks=True)  # reaches the CP-SAT model
    with pytest.raises(PlanningError, match=r"exact-offsets: .* above the limits max_variables = 5 .*'tflite-arena'"):
        exact_offsets(problem, time_limit=1, workers=1, max_variables=5)
    assert exact_offsets(problem, time_limit=1, workers=1).status in ("optimal", "timed_out")


def test_experiment_asks_cosma_for_the_fallback_and_notes_it(monkeypatch):
    import planners.joint.cosma as cosma

    small = tuple(o.with_default(10) if o.name == "max_cells" else o for o in cosma.Cosma.options)
    monkeypatch.setattr(cosma.Cosma, "options", small)  # every trace is "too big" for one model
    rows = run_trace("squeezenet1_0", "human", load_hw("edge-npu"), params=False, budgets=("MR",),
                     time_limit=1, dnc_time_limit=2, part_ops=40, log=lambda *_: None)
    row = next(r for r in rows if r["method"] == "cosma")
    assert row["note"].startswith("solved by cosma-dnc") and "max_cells=10" in row["note"]
    # stitched parts: not 'optimal' unless nothing beyond the compulsory bytes moves
    assert row["status"] in ("feasible", "timed_out") or (row["status"] == "optimal" and row["non_compulsory_bytes"] == 0)



@pytest.mark.parametrize("pipeline, option", [("cosma-dnc", "part_ops"), ("cosma", "max_cells"), ("dp", "max_ops"),
                                              ("default+streams-category+mindspore-mo:size,first-fit", "stream_capacity"),
                                              ("tile+default+arena+belady", "max_tiles"), ("zhong", "max_region"),
                                              ("olla", "joint_max_ops")])
@pytest.mark.parametrize("value", ["abc", 1.5, True, -3])
def test_integer_options_are_checked_with_a_clear_error(pipeline, option, value):
    with pytest.raises(PlanningError) as info:
        make_plan(GRAPH, HW, pipeline, budget=1 << 30, options={"time_limit": 1, option: value})
    assert f"option {option}={value!r}, expected an integer" in str(info.value)
