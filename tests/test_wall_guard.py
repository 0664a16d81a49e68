"""A time limit bounds the wait (issue 33, item 5; issue 28, item 4).

Exact planners count ``time_limit`` in CP-SAT's deterministic units (their plans repeat), and
a wall-clock guard stops every search at ``wall_guard`` x the limit + a second
(``planners.schedule.solver``): a planner returns within about 1.5 x its limit plus its
heuristics, and when the guard ended a search the plan's scope says so. The goldens run with
``wall_guard=0`` (npusim.cli.regress), so their numbers never depend on the machine's load.
"""

from __future__ import annotations

import multiprocessing
import random
import resource
import time

import pytest
from ortools.sat.python import cp_model

from npusim.cli import regress
from npusim.util import wall_guard
from npusim.hw.config import Hardware
from npusim.registry import make_plan
from npusim.workflow import load_graph, load_hw
from planners.schedule.solver import GUARD_SLACK, SolverOptions, make_solver

from helpers import REPO


def _hard_model() -> cp_model.CpModel:
    """A subset sum of 80 random 31-bit weights: CP-SAT needs far longer than a second."""
    rng = random.Random(1)
    m = cp_model.CpModel()
    x = [m.NewBoolVar(f"x{i}") for i in range(80)]
    w = [rng.randrange(1 << 30, 1 << 31) for _ in x]
    m.Add(sum(a * b for a, b in zip(w, x)) == sum(w) // 2 + 1)
    return m


def test_a_fired_guard_is_noted_and_bounds_the_solve():
    opts = SolverOptions(time_limit=1000.0, workers=1, wall_guard=0.0001)  # guard: 0.1 s + GUARD_SLACK
    solver = make_solver(opts)
    assert solver.parameters.max_deterministic_time == 1000.0
    assert solver.parameters.max_time_in_seconds == pytest.approx(0.1 + GUARD_SLACK)
    with wall_guard.collecting() as notes:
        started = time.perf_counter()
        code = solver.Solve(_hard_model())
        took = time.perf_counter() - started
    assert code == cp_model.UNKNOWN and took < 10 * (0.1 + GUARD_SLACK)
    assert len(notes) == 1 and "wall-clock guard stopped a CP-SAT search" in notes[0] and "wall_guard=0" in notes[0]


def test_no_guard_no_wall_limit_and_the_note_reaches_the_plan():
    assert SolverOptions(time_limit=5.0, wall_guard=0).guard_seconds() is None
    assert SolverOptions(time_limit=5.0, deterministic=False).guard_seconds() is None
    assert make_solver(SolverOptions(time_limit=5.0, wall_guard=0)).parameters.max_time_in_seconds > 1e6
    graph = load_graph("nasnetalarge")  # zhong's partitions take longer than the 1-s guard
    plan = make_plan(graph, Hardware(), "zhong+arena+belady", budget=1 << 30,
                     options={"time_limit": 1000, "wall_guard": 0.0001})
    assert plan.meta.status == "timed_out" and "the wall-clock guard stopped" in plan.meta.scope, plan.meta


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: Every time-limited planner behind the tile stage (tests/test_time_limits.py lists them).
TIME_LIMITED_TILED = ["tile+olla", "tile+olla-order+tflite-arena", "tile+zhong+arena+belady",
                      "tile+default+exact-offsets", "tile+cosma-dnc", "tile+default+cosma-fs", "tile+cosma-mpmf",
                      "tile+cosma"]


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", TIME_LIMITED_TILED)
def test_time_limit_5_bounds_the_cpu_on_a_tiled_transformer(pipeline):
    """~1,000 ops once tiled on edge-npu: at most 2 workers x (1.5 x 5 + 1) s of search, plus
    the tiler, heuristics and model building (bounded by the same guard)."""
    from npusim.errors import NpusimError

    graph, hw = load_graph("transformer"), load_hw("edge-npu")
    before, started = _cpu_seconds(), time.perf_counter()
    try:
        plan = make_plan(graph, hw, pipeline, options={"time_limit": 5, "workers": 2})
        assert plan.meta.status in ("optimal", "feasible", "timed_out", "heuristic")
    except NpusimError:
        pass  # a clean refusal (a model above max_cells) is within the bound too
    cpu, wall = _cpu_seconds() - before, time.perf_counter() - started
    assert cpu < 60, f"{pipeline}: {cpu:.0f} s CPU, {wall:.0f} s wall with time_limit=5"


def _burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


COSMA_CASES = [c for c in regress.load_goldens(REPO / "traces" / "expected")
               if c.pipeline.startswith("cosma") and c.trace in ("squeezenet1_0", "resnet18", "mobilenet_v2")]


@pytest.mark.slow
@pytest.mark.parametrize("case", COSMA_CASES, ids=[c.id for c in COSMA_CASES])
def test_cosma_goldens_hold_on_a_loaded_machine(case):
    """Two busy processes per core: the goldens' deterministic limits still give their numbers
    (the guard is off there), however long the wall wait."""
    burners = [multiprocessing.Process(target=_burn, args=(600.0,), daemon=True)
               for _ in range(2 * (multiprocessing.cpu_count() or 1))]
    for p in burners:
        p.start()
    try:
        assert regress.check_case(case) == []
    finally:
        for p in burners:
            p.terminate()
            p.join()
