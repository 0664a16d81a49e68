"""Bounded resources: exact planners refuse models above a configurable size (suggesting the
heuristic or divide-and-conquer variant), every CP-SAT call has a time limit, and the
simulator stops with a clear SimulationError at its event budget or wall-clock guard."""

from __future__ import annotations

import pytest

from npusim.errors import PlanningError, SimulationError
from npusim.hw.config import Hardware
from npusim.registry import make_plan
from npusim.sim import engine
from npusim.testing import random_dags
from npusim.workflow import plan_graph, simulate_plan
from planners.schedule.solver import GUARD_SLACK, WALL_GUARD, SolverOptions, make_solver
from tests.helpers import FakeClock

GRAPH = random_dags.diamonds(4, 2, seed=3)


@pytest.mark.parametrize("pipeline, limit, suggests", [
    ("olla-order+naive", {"max_variables": 10}, "greedy-mem"),
    ("zhong+naive", {"max_constraints": 5}, "greedy-mem"),
    ("olla", {"max_variables": 10}, "joint_max_ops"),
    ("olla", {"max_constraints": 5, "joint_max_ops": 0}, "olla-order"),
])
def test_exact_planners_refuse_models_above_the_limit(pipeline, limit, suggests):
    with pytest.raises(PlanningError) as info:
        make_plan(GRAPH, Hardware(), pipeline, budget=1 << 30, options={"time_limit": 2, **limit})
    message = str(info.value)
    assert "max_variables" in message and "max_constraints" in message and suggests in message, message


def test_dp_refuses_large_graphs():
    with pytest.raises(PlanningError, match="refuses a graph of .* Use 'zhong' or 'greedy-mem'"):
        make_plan(random_dags.chain(40, 1), Hardware(), "dp+naive", budget=1 << 30)


@pytest.mark.parametrize("deterministic", [True, False])
def test_every_solver_has_a_time_limit(deterministic):
    opts = SolverOptions.from_options({"time_limit": 3, "deterministic": deterministic})
    solver = make_solver(opts)
    # wall time is bounded either way: the limit itself, or the guard of a deterministic solve
    assert solver.parameters.max_time_in_seconds == pytest.approx(WALL_GUARD * 3 + GUARD_SLACK if deterministic else 3, abs=0.05)
    if deterministic:
        assert solver.parameters.max_deterministic_time == 3
    with pytest.raises(PlanningError, match="deterministic"):
        SolverOptions.from_options({"deterministic": "maybe"})


def test_wall_clock_limit_counts_the_time_spent_building_the_model(monkeypatch):
    import planners.schedule.solver as solver_module

    monkeypatch.setattr(solver_module, "time", FakeClock(100.0))
    opts = SolverOptions.from_options({"time_limit": 10, "deterministic": False})
    solver = make_solver(opts, started=96.0)  # the model took 4 s to build
    assert solver.parameters.max_time_in_seconds == pytest.approx(6.0)
    late = make_solver(opts, started=40.0)  # nothing left: a token solve
    assert late.parameters.max_time_in_seconds == pytest.approx(0.05)


def _plan():
    graph = random_dags.random_dag(150, 2)
    return graph, plan_graph(graph, Hardware(), "default+arena+belady", 1 << 20)


def test_simulator_event_budget(monkeypatch):
    graph, plan = _plan()
    monkeypatch.setattr(engine, "MAX_EVENTS_PER_COMMAND", 1)
    monkeypatch.setattr(engine, "MIN_EVENT_BUDGET", 10)
    with pytest.raises(SimulationError, match=r"more than [\d,]+ events .*MAX_EVENTS_PER_COMMAND"):
        simulate_plan(plan, Hardware(), graph, validated=True)


def test_simulator_wall_clock_guard(monkeypatch):
    graph, plan = _plan()
    monkeypatch.setattr(engine, "MAX_WALL_SECONDS", 0.0)
    with pytest.raises(SimulationError, match="wall-clock guard of 0 s.*NPUSIM_SIM_MAX_SECONDS"):
        simulate_plan(plan, Hardware(), graph, validated=True)


def test_default_guards_leave_normal_runs_alone():
    graph, plan = _plan()
    report = simulate_plan(plan, Hardware(), graph, validated=True)
    assert report.events < engine.MAX_EVENTS_PER_COMMAND * report.commands
