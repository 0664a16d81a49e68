"""Feedback on long work (npusim.util.progress) and exit codes: 2 for the user's errors, 3 for bugs."""

import io
import time

import pytest

from npusim.cli import main
from npusim.errors import InternalError
from npusim.util.progress import Progress


def test_lines_every_interval_when_not_a_terminal():
    stream = io.StringIO()
    with Progress("npusim test", stream=stream, terminal=False, interval=0.05) as progress:
        progress("tiling ops", 3, 10, "1 tiled")
        time.sleep(0.3)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 2  # the state is repeated while nothing new is said
    assert all(line.startswith("npusim test: ") and "tiling ops 3/10 (1 tiled)" in line for line in lines)
    after = stream.getvalue()
    time.sleep(0.15)
    assert stream.getvalue() == after  # closed: the writer stopped


def test_short_work_says_nothing():
    stream = io.StringIO()
    with Progress("npusim test", stream=stream, terminal=False, interval=30) as progress:
        progress("planning", 1, 4)
    assert stream.getvalue() == ""


def test_terminal_draws_a_bar():
    stream = io.StringIO()
    with Progress("npusim test", stream=stream, terminal=True) as progress:
        progress("simulating: cycle", 1000, None, "10 events")
    assert "simulating: cycle" in stream.getvalue()


def test_simulate_reports_progress_on_a_pipe(capsys, monkeypatch):
    monkeypatch.setenv("NPUSIM_PROGRESS_SECONDS", "0.01")
    assert main(["simulate", "resnet18", "--hw", "edge-npu", "--budget", "256KiB"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("resnet18@fused@tiled on edge-npu")
    stages = {line.split(": ", 2)[2].split(" ")[0] for line in err.splitlines()}
    assert err.startswith("npusim simulate: ") and stages & {"planning", "tiling", "allocating", "simulating:"}


def test_bad_progress_interval_is_a_user_error(capsys, monkeypatch):
    monkeypatch.setenv("NPUSIM_PROGRESS_SECONDS", "soon")
    assert main(["list"]) == 2
    assert "NPUSIM_PROGRESS_SECONDS='soon'" in capsys.readouterr().err


def test_internal_errors_exit_3(capsys, monkeypatch):
    import planners.schedule.orders as orders

    def broken(self, ctx):
        raise InternalError("a scheduler lost an op")

    monkeypatch.setattr(orders.DefaultOrder, "run", broken)
    assert main(["simulate", "resnet18", "--hw", "edge-npu"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("npusim: internal error: a scheduler lost an op") and len(err.splitlines()) == 1


def test_a_planner_s_invalid_plan_is_its_bug_exit_3(capsys, monkeypatch):
    from dataclasses import replace

    import npusim.workflow as workflow

    real = workflow.make_plan

    def backwards(*args, **kwargs):  # a pipeline whose plan runs the ops backwards
        plan = real(*args, **kwargs)
        return replace(plan, order=plan.order[::-1])

    monkeypatch.setattr(workflow, "make_plan", backwards)
    assert main(["simulate", "resnet18", "--hw", "mid-npu"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("npusim: internal error: plan from") and "a planner bug" in err


def test_a_user_s_invalid_plan_exits_2(capsys, tmp_path):
    import json

    plan = tmp_path / "p.json"
    assert main(["plan", "resnet18", "--hw", "mid-npu", "-o", str(plan)]) == 0
    data = json.loads(plan.read_text())
    data["order"] = data["order"][::-1]
    plan.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["simulate", "resnet18", "--hw", "mid-npu", "--plan", str(plan)]) == 2
    assert "npusim: error:" in capsys.readouterr().err


def test_solver_reports_incumbent_and_bound_to_the_run_s_progress():
    from ortools.sat.python import cp_model

    from npusim.util.progress import reporting
    from planners.schedule.solver import SolverOptions, make_solver

    model = cp_model.CpModel()
    xs = [model.NewIntVar(0, 100, f"x{i}") for i in range(20)]
    for a, b in zip(xs, xs[1:]):
        model.Add(a + b >= 50)
    model.Minimize(sum(xs))
    heard = []
    with reporting(lambda what, done=None, total=None, detail="": heard.append((what, detail))):
        solver = make_solver(SolverOptions.from_options({"time_limit": 5}))
    assert solver.Solve(model) == cp_model.OPTIMAL
    assert heard and all(what == "solving (CP-SAT)" and "incumbent" in detail for what, detail in heard)
    assert any(f"incumbent {int(solver.ObjectiveValue())}" in detail for _, detail in heard)
    quiet = make_solver(SolverOptions.from_options({"time_limit": 5}))  # outside a run: no search log
    assert not quiet.parameters.log_search_progress


def test_a_negative_solver_bound_reads_as_none_yet():
    """CP-SAT logs a negative bound before it has one; every model here minimises a size."""
    from npusim.util.progress import reporting, solver_progress

    class Solver:
        class parameters:
            pass

    heard = []
    with reporting(lambda what, done=None, total=None, detail="": heard.append(detail)):
        solver = Solver()
        solver_progress(solver)
        solver.log_callback("#1       0.12s best:765056 next:[-765056,765055] fixed_bools:0/20")
        solver.log_callback("#Bound   0.50s best:765056 next:[700000,765055] fixed_bools:0/20")
    assert heard == ["incumbent 765056, no bound yet, 0 s", "incumbent 765056, bound 700000, 0 s"]
