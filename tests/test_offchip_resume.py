"""``make_plan(..., resume=OffchipResume())``: a pipeline that only adds off-chip stages to the
last one planned runs just those stages, and its plan is the one a fresh run makes; anything
else plans afresh. ``npusim regress`` uses it for the four off-chip planners of each trace's
tiled pipeline (``regress.check``)."""

from __future__ import annotations

import pytest

from npusim.cli import regress
from npusim.plan.io import plan_to_dict
from npusim.registry import OffchipResume, default_registry, make_plan
from npusim.workflow import load_graph, load_hw

BASE = "tile+default+arena+belady"
BUDGET = 128 * 1024


def _fresh(graph, hw, pipeline, options=None):
    return make_plan(graph, hw, pipeline, budget=BUDGET, options=options)


def _same(a, b) -> bool:
    """Equal plans, the planning time (``solve_seconds``, the machine's) aside."""
    da, db = plan_to_dict(a), plan_to_dict(b)
    for d in (da, db):
        d.get("meta", {}).pop("solve_seconds", None)
    return da == db


@pytest.fixture(scope="module")
def setting():
    return load_graph("squeezenet1_0"), load_hw("edge-npu")


def _counting(monkeypatch, name: str) -> list:
    """Calls of planner ``name``'s run, counted."""
    planner = default_registry().get(name)
    calls, run = [], planner.run
    monkeypatch.setattr(planner, "run", lambda ctx: (calls.append(1), run(ctx))[1])
    return calls


def test_each_off_chip_planner_after_the_kept_plan_gives_the_fresh_plan(setting, monkeypatch):
    graph, hw = setting
    resume = OffchipResume()
    base = make_plan(graph, hw, BASE, budget=BUDGET, resume=resume)
    assert _same(base, _fresh(graph, hw, BASE))
    tiler = _counting(monkeypatch, "tile")
    for offchip in ("taa", "offchip-naive", "offchip-so", "offchip-offsets"):
        resumed = make_plan(graph, hw, f"{BASE}+{offchip}", budget=BUDGET, resume=resume)
        assert resumed.dram, offchip
        monkeypatch.undo()
        assert _same(resumed, _fresh(graph, hw, f"{BASE}+{offchip}")), offchip
        tiler = _counting(monkeypatch, "tile")
    assert tiler == []  # (the last resumed one did not tile again either)


def test_another_budget_options_or_graph_plans_afresh(setting, monkeypatch):
    graph, hw = setting
    resume = OffchipResume()
    make_plan(graph, hw, BASE, budget=BUDGET, resume=resume)
    tiler = _counting(monkeypatch, "tile")
    make_plan(graph, hw, f"{BASE}+taa", budget=2 * BUDGET, resume=resume)
    make_plan(graph, hw, f"{BASE}+taa", budget=BUDGET, options={"taa_sort": "lifetime"}, resume=resume)
    make_plan(load_graph("resnet18"), hw, f"{BASE}+taa", budget=BUDGET, resume=resume)
    assert len(tiler) == 3
    resume.clear()
    make_plan(graph, hw, f"{BASE}+taa", budget=BUDGET, resume=resume)
    assert len(tiler) == 4


def test_regress_plans_the_tiled_pipeline_once_for_its_off_chip_planners(monkeypatch):
    cases = regress.load_goldens(None, "squeezenet1_0/edge-npu/tile+*")
    assert len(cases) == 5  # the tiled pipeline and it with each of four off-chip planners
    tiler = _counting(monkeypatch, "tile")
    checked, mismatches = regress.check(None, "squeezenet1_0/edge-npu/tile+*")
    assert (checked, mismatches, len(tiler)) == (5, [], 1)
    order = regress._planning_order(cases)
    assert [cases[i].pipeline for i in order][0] == BASE
