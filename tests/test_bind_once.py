"""Bind once (issue 29): a plan travels with the graphs its steps refer to. Planning binds it;
a plan read from a file is bound once on load; validate, lower, plan files, plots and the
simulation never fuse or expand a graph again."""

from __future__ import annotations

from dataclasses import replace

import pytest

from npusim.errors import PlanError
from npusim.graph import fusion as fusion_module
from npusim.graph import tiling as tiling_module
from npusim.plan import bound as bound_module
from npusim.plan.bound import BoundPlan, bind
from npusim.plan.io import load_plan, save_plan
from npusim.plan.lower import lower
from npusim.plan.validate import validate
from npusim.workflow import load_graph, load_hw, plan_graph, simulate_plan


@pytest.fixture(scope="module")
def planned():
    graph, hw = load_graph("squeezenet1_0"), load_hw("edge-npu")
    return graph, hw, plan_graph(graph, hw, "fuse+tile+default+arena+belady", budget=128 * 1024)


@pytest.fixture()
def rebuilds(monkeypatch):
    """Counts every fusion and tiled expansion of a graph, wherever it is asked for."""
    calls = []
    for module, name in ((fusion_module, "fuse"), (tiling_module, "expand"), (bound_module, "fuse"),
                         (bound_module, "expand")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name, **k: (calls.append(_name), _real(*a, **k))[1])
    return calls


def test_a_planned_plan_is_bound_to_its_fused_tiled_graph(planned):
    graph, _, plan = planned
    assert isinstance(plan, BoundPlan) and plan.given_graph is graph
    assert plan.graph == plan.bound_graph.name == f"{graph.name}@fused@tiled"
    assert plan.fusion and plan.tiling and len(plan.order) == plan.bound_graph.n_ops


def test_no_consumer_rebuilds_the_graph(planned, rebuilds, tmp_path):
    _, hw, plan = planned
    assert validate(plan) == []
    lower(plan, hw)
    save_plan(plan, tmp_path / "p.json")
    simulate_plan(plan, hw, validated=True)
    assert rebuilds == []


def test_a_plan_file_is_bound_once_on_load(planned, rebuilds, tmp_path):
    graph, hw, plan = planned
    save_plan(plan, tmp_path / "p.json")
    loaded = load_plan(tmp_path / "p.json", graph)
    built = len(rebuilds)
    assert loaded == plan and built == 2  # one fusion, one expansion
    assert validate(loaded) == []
    simulate_plan(loaded, hw)
    assert len(rebuilds) == built


def test_an_edited_fusion_or_tiling_is_bound_again(planned):
    graph, _, plan = planned
    edited = replace(plan, tiling={})
    assert edited.stale
    assert [v.kind for v in validate(edited)] == ["order"]  # the tiled graph name without its tiling
    with pytest.raises(PlanError, match="not bound to its graph"):
        lower(replace(plan.unbound), load_hw("edge-npu"))
    assert bind(plan.unbound, graph) == plan
