"""Determinism: the same inputs and seed give byte-identical plan JSON and report JSON for every
registered planner, across two processes with different hash seeds, and ``npusim dse`` writes
identical files with ``--jobs 1`` and ``--jobs 2``.

Wall-clock values are kept out of both files by default (plan ``meta.solve_seconds`` and the
DSE ``solve_seconds`` column are written only with ``--timings``), and CP-SAT runs on
deterministic time (planners/schedule/solver.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npusim.errors import InternalError
from npusim.registry import make_plan
from npusim.testing import random_dags

from helpers import every_planner_pipeline as pipelines, hardware_with_two_streams as hardware, nine_op_cell as graph

TESTS = Path(__file__).resolve().parent
#: wall_guard=0: the wall-clock guard (1.5x the limit) fires on a loaded machine and stops a
#: deterministic search early: repeatability is what this test asks for (docs/usage.md, "Reproducible")
EXACT_OPTIONS = {"time_limit": 2.0, "workers": 2, "seed": 0, "wall_guard": 0}


def write_all(out: Path) -> None:
    """Plan and simulate every pipeline, writing ``<planner>.plan.json`` and ``.report.json``."""
    from npusim.plan.io import save_plan
    from npusim.workflow import memory_bounds, simulate_plan

    g, hw = graph(), hardware()
    bounds = memory_bounds(g, hw.scratchpad.alignment)
    budgets = {"MR": bounds.m_r, "roomy": 1 << 20, "tight": max(64, bounds.m_r // 2)}
    out.mkdir(parents=True, exist_ok=True)
    for planner, (pipeline, budget) in sorted(pipelines().items()):
        stem = out / planner.replace(":", "_").replace(",", "_")
        try:
            plan = make_plan(g, hw, pipeline, budget=budgets[budget], options=dict(EXACT_OPTIONS))
        except InternalError:
            raise  # e.g. a planner reading an option it does not declare: a bug, not a refusal
        except Exception as error:  # the refusal itself must be deterministic too
            stem.with_suffix(".error").write_text(f"{type(error).__name__}: {error}\n")
            continue
        save_plan(plan, f"{stem}.plan.json", g)
        jitter = 0.5 if len(set(plan.streams)) > 1 else 0.0
        report = simulate_plan(plan, hw, g, jitter=jitter, seed=7)
        report.save_json(f"{stem}.report.json")


def _run_in_process(out: Path, hash_seed: str) -> None:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    subprocess.run([sys.executable, str(Path(__file__)), str(out)], check=True, env=env, cwd=TESTS.parent,
                   timeout=600)


def test_every_planner_is_byte_identical_across_runs(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    _run_in_process(first, "1")
    _run_in_process(second, "2")
    files = sorted(p.name for p in first.iterdir())
    assert files == sorted(p.name for p in second.iterdir())
    planners = {name for name in pipelines()}
    written = {f.split(".")[0] for f in files if f.endswith(".plan.json")}
    assert len(written) >= len(planners) - 2, f"too many planners refused: {sorted(files)}"
    differing = [f for f in files if (first / f).read_bytes() != (second / f).read_bytes()]
    assert differing == []
    sample = json.loads((first / "default.plan.json").read_text())
    assert "solve_seconds" not in sample["meta"]


def test_solve_seconds_only_with_timings(tmp_path):
    from npusim.cli import main

    trace = tmp_path / "g.json"
    from npusim.graph.trace_io import save_trace

    save_trace(random_dags.with_custom_kinds(graph()), trace)
    assert main(["plan", str(trace), "--hw", "edge-npu", "-o", str(tmp_path / "p.json")]) == 0
    assert main(["plan", str(trace), "--hw", "edge-npu", "-o", str(tmp_path / "t.json"), "--timings"]) == 0
    assert "solve_seconds" not in json.loads((tmp_path / "p.json").read_text())["meta"]
    assert "solve_seconds" in json.loads((tmp_path / "t.json").read_text())["meta"]
    # compare's table likewise: two runs write the same bytes (found by a new-user audit)
    for name in ("c1.json", "c2.json"):
        assert main(["compare", str(trace), "--hw", "edge-npu", "--planner", "default,naive", "--format", "json",
                     "-o", str(tmp_path / name)]) == 0
    assert (tmp_path / "c1.json").read_bytes() == (tmp_path / "c2.json").read_bytes()
    assert not any("solve_seconds" in row for row in json.loads((tmp_path / "c1.json").read_text()))
    assert main(["compare", str(trace), "--hw", "edge-npu", "--planner", "default", "--timings", "--format", "json",
                 "-o", str(tmp_path / "c3.json")]) == 0
    assert all("solve_seconds" in row for row in json.loads((tmp_path / "c3.json").read_text()))


@pytest.mark.parametrize("jobs", [2])
def test_dse_jobs_1_and_n_write_identical_files(tmp_path, jobs):
    from npusim import dse
    from npusim.graph.trace_io import save_trace

    trace = tmp_path / "g.json"
    save_trace(random_dags.with_custom_kinds(graph()), trace)
    sweeps = [dse.parse_sweep("budget=MR,MH,MP")]
    pipes = ["default+arena+belady", "greedy-mem+tflite-arena", "zhong+arena+lru", "olla"]
    outputs = []
    for j in (1, jobs):
        points = dse.make_points([str(trace)], "edge-npu", sweeps, pipes)
        result = dse.run_sweep(points, jobs=j, cache_dir=None)
        csv_path, json_path = dse.write_results(result, tmp_path / f"jobs{j}" / "out.csv", sweeps)
        outputs.append((csv_path.read_bytes(), json_path.read_bytes()))
    assert outputs[0] == outputs[1]
    assert b"solve_seconds" not in outputs[0][1]


if __name__ == "__main__":  # the child process of test_every_planner_is_byte_identical_across_runs
    sys.path.insert(0, str(TESTS))
    write_all(Path(sys.argv[1]))
