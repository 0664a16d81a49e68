"""Every planner at the NPU's own scratchpad: schedulers after tiling, joint planners with
tiling, and the hardware's scratchpad as the limit of a budget or a plan."""

import json

import pytest

from npusim.cli import main
from npusim.dse import evaluate_point, make_points, parse_sweep
from npusim.errors import NpusimError
from npusim.plan.validate import validate
from npusim.registry import make_plan
from npusim.workflow import load_graph, load_hw, resolve_budget, simulate_plan
from planners.schedule.op_level import tiles_of_ops


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def resnet18():
    return load_graph("resnet18")


# ------------------------------------------------------------------ schedulers after tiling

@pytest.mark.parametrize("scheduler", ["zhong", "greedy-mem", "olla-order", "rpo", "default"])
def test_schedulers_order_ops_and_tiles_follow(resnet18, scheduler):
    """At 256 KiB resnet18 is tiled; the scheduler orders its ops and each op's tiles follow
    in tiling order, so the plan is valid (no tile before the tiles it reads through DRAM)."""
    hw = load_hw("edge-npu")
    plan = make_plan(resnet18, hw, f"tile+{scheduler}+arena+belady", budget=256 * 1024,
                     options={"time_limit": 10})
    from npusim.graph.tiling import expand

    tiled = expand(resnet18, plan.tiling)  # the graph the plan's order refers to
    assert validate(plan, resnet18) == []  # (the validator takes the graph as given and expands it)
    members = tiles_of_ops(tiled, resnet18)
    position = {op: s for s, op in enumerate(plan.order)}
    for tiles in members:  # contiguous, in tiling order
        steps = [position[t] for t in tiles]
        assert steps == list(range(steps[0], steps[0] + len(steps)))
    assert sum(map(len, members)) == tiled.n_ops
    if scheduler in ("zhong", "olla-order"):  # a claim about a problem: which one is stated
        assert "op-level schedule" in plan.meta.scope
    else:
        assert plan.meta.scope == ""
    report = simulate_plan(plan, hw, resnet18)
    assert report.cycles > 0


def test_zhong_after_tile_on_resnet50_runs_and_says_what_is_optimal(capsys):
    """The issue's internal error ('... must be loaded at step 0 but DRAM has no copy')."""
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", "edge-npu", "--planner",
                             "tile+zhong+arena+belady", "--option", "time_limit=10")
    assert code == 0, err
    first = out.splitlines()[0]
    assert "peak of the op-level schedule (122 ops)" in first and "tiled ops follow their op" in first


def test_an_optimal_order_untiled_is_not_called_an_optimal_plan(capsys):
    """Untiled, zhong's order is optimal for its peak while belady's spills are a heuristic's:
    the first line and compare's row say what "optimal" is about, as they do on tiled graphs
    (a new user read "optimal" beside 75 KB of LRU spills). A plan that claims nothing has no scope."""
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "mid-npu", "--budget", "MR", "--planner",
                             "zhong+arena+belady", "--option", "time_limit=10")
    assert code == 0, err
    first = out.splitlines()[0]
    assert "(optimal: peak of the schedule (49 ops))" in first
    code, out, err = run_cli(capsys, "compare", "resnet18", "--hw", "mid-npu", "--budget", "MR", "--planner",
                             "zhong+arena+belady,default+arena+belady", "--option", "time_limit=10", "--format", "json")
    zhong, default = json.loads(out)
    assert zhong["plan_status"] == "optimal" and zhong["plan_scope"] == "peak of the schedule (49 ops)"
    assert zhong["offchip_spill_bytes"] > 0
    assert (default["plan_status"], default["plan_scope"]) == ("heuristic", "")


# ------------------------------------------------------------------ joint planners and tiling

def test_cosma_dnc_plans_a_tiled_graph(resnet18):
    """Each tile is one of COSMA's units with its true size: tiles read back through DRAM are
    written through when made and retrieved by their readers, never before the tiles they
    read were made (the validator's load_without_copy), and the plan simulates."""
    hw = load_hw("edge-npu")
    plan = make_plan(resnet18, hw, "tile+cosma-dnc", budget=512 * 1024, options={"time_limit": 5})
    assert plan.tiling and validate(plan, resnet18) == []
    causes = {t.cause for t in plan.transfers}
    assert {"spill", "retrieve"} <= causes
    assert simulate_plan(plan, hw, resnet18).cycles > 0


def test_cosma_part_knows_when_a_tile_view_exists_in_dram(resnet18):
    """A read view of tiles is in state 'dram' but ready only after the ops writing its
    sources: they are its readers' predecessors, and the model's retrieves wait for them."""
    from npusim.graph.tiling import expand
    from planners.joint.cosma.problem import DRAM, make_part

    plan = make_plan(resnet18, load_hw("edge-npu"), "tile+default+arena+belady", budget=256 * 1024)
    tiled = expand(resnet18, plan.tiling)
    part = make_part(tiled, list(range(tiled.n_ops)), 256 * 1024, 64, params=True)
    views = [a for a in range(part.n_tensors) if part.ready_after[a]]
    assert views and all(part.entry[a] == DRAM and part.in_dram[a] for a in views)
    preds = part.predecessors()
    for a in views:
        for reader in part.consumers[a]:
            assert set(part.ready_after[a]) <= set(preds[reader])
    through = tiled.dram_sources
    made = [a for a in range(part.n_tensors) if part.tensors[a] in through and part.producer[a] >= 0]
    assert made and all(part.in_dram[a] for a in made)  # written through: evicting them is free


def test_cosma_fs_keeps_the_schedule_stage_order_on_tiles(resnet18):
    plan = make_plan(resnet18, load_hw("edge-npu"), "tile+zhong+cosma-fs", budget=512 * 1024,
                     options={"time_limit": 5})
    reference = make_plan(resnet18, load_hw("edge-npu"), "tile+zhong+arena+belady", budget=512 * 1024,
                          options={"time_limit": 5})
    assert plan.order == reference.order and validate(plan, resnet18) == []


def test_olla_plans_a_tiled_graph():
    """OLLA orders the op-level graph; its address ILP places the tiles; tiles read back
    through DRAM are stored after their producer and loaded before their reader."""
    graph = load_graph("resnet18")
    hw = load_hw("mid-npu")
    plan = make_plan(graph, hw, "tile+olla", budget=1 << 20, options={"time_limit": 10})
    assert plan.tiling and validate(plan, graph) == []
    assert "OLLA order" in plan.meta.scope
    causes = {t.cause for t in plan.transfers}
    assert {"spill", "retrieve"} <= causes  # the DRAM round trips of tiles
    assert simulate_plan(plan, hw, graph).cycles > 0


# ------------------------------------------------------------------ the scratchpad is the limit

def test_budget_over_the_scratchpad_is_an_error_naming_both(capsys):
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--budget", "MP",
                             "--planner", "zhong+arena+belady")
    assert code == 2 and "2,460,160 B is larger than edge-npu's scratchpad (1,048,576 B" in err
    assert "--allow-oversize" in err and len(err.strip().splitlines()) == 1


def test_allow_oversize_says_so_in_the_first_line(capsys):
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--budget", "MP",
                             "--planner", "zhong+arena+belady", "--allow-oversize", "--option", "time_limit=5")
    assert code == 0, err
    assert "OVER the hardware's 1.00 MiB scratchpad" in out.splitlines()[0]


def test_misaligned_budget_is_an_error(capsys):
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--budget", "1000001B")
    assert code == 2 and "not a multiple of edge-npu's scratchpad.alignment (64 B); use 1,000,000 or 1,000,064 B" in err
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--budget", "1B")
    assert code == 2 and err.rstrip().endswith("(64 B); use 64 B")  # (not "0 or 64 B": 0 is no budget)


def test_plan_from_a_larger_config_is_refused_and_flagged_by_doctor(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    code, _, err = run_cli(capsys, "plan", "resnet18", "--hw", "mid-npu", "-o", str(plan))
    assert code == 0, err
    capacity = json.loads(plan.read_text())["capacity"]
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--plan", str(plan))
    assert code == 2 and f"{capacity:,} B is larger than edge-npu's scratchpad" in err
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--plan", str(plan),
                             "--allow-oversize")
    assert code == 0 and "OVER" in out.splitlines()[0]
    code, out, err = run_cli(capsys, "doctor", str(plan), "--trace", "resnet18", "--hw", "edge-npu")
    assert code != 0 and "larger than edge-npu's scratchpad" in out
    code, out, err = run_cli(capsys, "doctor", str(plan), "--trace", "resnet18", "--hw", "mid-npu")
    assert code == 0, out


def test_dse_point_over_the_scratchpad_is_infeasible_unless_allowed():
    sweeps = [parse_sweep("budget=2MiB")]
    (point,) = make_points(["squeezenet1_0"], "edge-npu", sweeps, ["tile+default+arena+belady"])
    row = evaluate_point(point)
    assert row["status"] == "infeasible" and "larger than edge-npu's scratchpad" in row["reason"]
    (allowed,) = make_points(["squeezenet1_0"], "edge-npu", sweeps, ["tile+default+arena+belady"],
                             allow_oversize=True)
    assert allowed.cache_key() != point.cache_key()
    assert evaluate_point(allowed)["status"] == "ok"


def test_library_budget_check():
    graph, hw = load_graph("squeezenet1_0"), load_hw("edge-npu")
    with pytest.raises(NpusimError, match="larger than"):
        resolve_budget("2MiB", graph, hw)
    assert resolve_budget("2MiB", graph, hw, allow_oversize=True) == 2 << 20


def test_budget_keywords_measure_the_graph_the_pipeline_plans(capsys):
    """M_R is the largest op's working set: a fused op holds its epilogue's tensors too, so the
    unfused graph's M_R is below what fuse+... needs, and without tiling no plan fit it (the
    documented ``--budget MR`` refused). Measured on the fused graph it plans, and each
    pipeline of ``compare`` gets its own."""
    graph, hw = load_graph("hrnet_w18_small"), load_hw("edge-npu")
    plain = resolve_budget("MR", graph, hw, allow_oversize=True)
    fused = resolve_budget("MR", graph, hw, allow_oversize=True, pipeline="fuse+default+arena+belady")
    assert fused > plain == resolve_budget("MR", graph, hw, allow_oversize=True, pipeline="default+arena+belady")
    with pytest.raises(NpusimError, match="below M_R"):
        make_plan(graph, hw, "fuse+default+arena+belady", budget=plain)
    assert validate(make_plan(graph, hw, "fuse+default+arena+belady", budget=fused), graph) == []
    code, out, err = run_cli(capsys, "compare", "hrnet_w18_small", "--hw", "edge-npu", "--budget", "MR",
                             "--allow-oversize", "--planner", "default+arena+belady,fuse+default+arena+belady",
                             "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["status"] for r in rows] == ["ok", "ok"] and rows[0]["capacity"] == plain
    assert rows[1]["capacity"] == fused


# ------------------------------------------------------------------ multi-stream allocation

def test_hrnet_multi_stream_tiled_plan_is_valid():
    """The issue's invalid plan on hrnet_w18_small ('[empty_residency] ... never filled'): a
    whole-lifetime allocator on a tiled graph now loads each read view of tiles and stores the
    tiles it reads (``planners.alloc.onchip.lifetime_transfers``), on several streams too."""
    graph, hw = load_graph("hrnet_w18_small"), load_hw("mid-npu")
    plan = make_plan(graph, hw, "tile+default+streams-rr+mindspore-mo:size,first-fit")
    assert plan.tiling and len(set(plan.streams)) > 1 and validate(plan, graph) == []
    assert simulate_plan(plan, hw, graph).cycles > 0  # with the happens-before race check


def test_a_spill_stage_needs_an_allocator_that_evicts():
    with pytest.raises(NpusimError, match="keeps every tensor for its whole lifetime and never evicts"):
        make_plan(load_graph("resnet18"), load_hw("mid-npu"), "default+streams-rr+mindspore-mo:size,first-fit+belady")


def test_a_whole_schedule_that_does_not_fit_names_what_works(capsys):
    """Untiled, the scratchpad it names fits; tiled, a larger scratchpad makes larger tiles, so
    the advice is the arena, which spills; each piece of advice is tried here."""
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--planner",
                             "default+mindspore-mo:size,first-fit", "--budget", "MR", "--allow-oversize")
    assert code == 2 and "never spills" in err and "default+arena+belady" in err
    advice = err.split("--set ")[1].split(")")[0]  # the scratchpad it needs
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--set", advice, "--planner",
                             "default+mindspore-mo:size,first-fit")
    assert code == 0, err
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", "edge-npu", "--planner",
                             "tile+default+mindspore-mo:size,first-fit")
    assert code == 2 and "larger tiles" in err and err.rstrip().endswith("tile+default+arena+belady")
    code, out, err = run_cli(capsys, "simulate", "resnet50", "--hw", "edge-npu", "--planner", "tile+default+arena+belady")
    assert code == 0, err


def test_cosma_dnc_in_wall_time_stops_building_models_when_time_is_up(resnet18, monkeypatch):
    """Wall-clock mode: once the time per remaining part is below MIN_PART_SECONDS, parts take
    their warm start without a model (fcn_resnet50 at 1 MiB: 137 s for a 20 s limit before)."""
    import planners.joint.cosma.dnc as dnc

    built = []
    real = dnc.solve_part
    monkeypatch.setattr(dnc, "solve_part", lambda *a, **k: built.append(1) or real(*a, **k))
    plan = make_plan(resnet18, load_hw("edge-npu"), "tile+cosma-dnc", budget=256 * 1024,
                     options={"time_limit": 0.001, "deterministic": False, "part_ops": 10})
    assert built == [] and plan.meta.status == "timed_out" and validate(plan, resnet18) == []


def test_cosma_fs_solves_a_big_fixed_order_in_parts(resnet18, monkeypatch):
    """A fixed-order model above max_cells (fcn_resnet50 tiled at 512 KiB: 5 M cells, 15 M
    variables, 14 GB before the size check refused it) is solved in parts of the schedule
    stage's order, each near max_cells, and the order is kept."""
    import planners.joint.cosma.dnc as dnc

    cells = []
    real = dnc.solve_part
    monkeypatch.setattr(dnc, "solve_part", lambda part, win, *a, **k: cells.append(win.cells()) or real(part, win, *a, **k))
    options = {"time_limit": 5, "max_cells": 300}
    plan = make_plan(resnet18, load_hw("edge-npu"), "tile+zhong+cosma-fs", budget=512 * 1024, options=options)
    reference = make_plan(resnet18, load_hw("edge-npu"), "tile+zhong+arena+belady", budget=512 * 1024,
                          options={"time_limit": 5})
    assert len(cells) > 2 and max(cells) < 2 * 300
    assert plan.order == reference.order and validate(plan, resnet18) == []
    assert plan.meta.status in ("feasible", "timed_out")  # stitched parts: never 'optimal'
    # the status is cosma-fs's, so zhong's scope (the op-level peak) no longer describes it
    assert "op-level" not in plan.meta.scope
    assert plan.meta.scope.startswith("spill + retrieve bytes for the schedule given to it; ")
    assert "parts solved one after another and stitched" in plan.meta.scope


def test_cosma_deterministic_parts_too_thin_get_no_model(resnet18, monkeypatch):
    """Deterministic mode: a limit split into shares below MIN_PART_UNITS builds no model (each
    would cost a wall second CP-SAT's deterministic clock does not count) — decided from the
    limit and the part count, so the plan is still repeatable."""
    import planners.joint.cosma.dnc as dnc

    built = []
    real = dnc.solve_part
    monkeypatch.setattr(dnc, "solve_part", lambda *a, **k: built.append(1) or real(*a, **k))
    options = {"time_limit": dnc.MIN_PART_UNITS, "part_ops": 10}
    plans = [make_plan(resnet18, load_hw("edge-npu"), "tile+cosma-dnc", budget=256 * 1024, options=dict(options))
             for _ in range(2)]
    assert built == [] and plans[0].meta.status == "timed_out" and validate(plans[0], resnet18) == []
    assert plans[0].residencies == plans[1].residencies


def test_cosma_refuses_a_part_model_too_big_before_building_it(resnet18, monkeypatch):
    import planners.joint.cosma.model as model

    monkeypatch.setattr(model, "CosmaModel", lambda *a, **k: pytest.fail("the model was built"))
    with pytest.raises(NpusimError, match=r"would have .* cells, at least .* variables, above max_variables = 100"):
        make_plan(resnet18, load_hw("mid-npu"), "cosma-fs", budget=4 << 20,
                  options={"time_limit": 5, "max_variables": 100})
