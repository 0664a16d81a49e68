"""Planner comparison: one row per pipeline, consistent numbers, text/CSV/JSON output."""

import csv
import io
import json

import pytest

from npusim.sim.report import DRAM_DYNAMIC_COMPONENTS, DRAM_STATIC_COMPONENTS, ENERGY_COMPONENTS

from helpers import chain_with_skip
from npusim.cli import main
from npusim.cli.compare import METRIC_COLUMNS, compare_planners, format_rows, parse_pipelines
from npusim.plan.validate import validate
from npusim.workflow import load_graph, load_hw, plan_graph, simulate_plan

PIPELINES = ["default+arena+belady", "rpo+arena+lru", "default+arena"]


@pytest.fixture(scope="module")
def rows():
    # 2112 B = M_R of the chain: the skip tensor must be spilled; without a policy, no plan.
    return compare_planners(chain_with_skip(), load_hw("edge-npu"), PIPELINES, 2112)


def test_one_row_per_pipeline_in_order_with_every_column(rows):
    assert [r["planner"] for r in rows] == PIPELINES
    assert all(list(r) == list(METRIC_COLUMNS) for r in rows)
    assert [r["status"] for r in rows] == ["ok", "ok", "infeasible"]
    assert "spill policy" in rows[2]["reason"] and rows[2]["cycles"] is None


def test_numbers_match_a_direct_simulation_and_add_up(rows):
    graph, hw = chain_with_skip(), load_hw("edge-npu")
    plan = plan_graph(graph, hw, "default+arena+belady", 2112)
    assert validate(plan, graph) == []
    report = simulate_plan(plan, hw, graph)
    row = rows[0]
    assert row["cycles"] == report.cycles and row["energy_pj"] == report.total_energy_pj
    assert row["offchip_spill_bytes"] == report.offchip_bytes["spill"] > 0
    assert row["offchip_retrieve_bytes"] == row["offchip_spill_bytes"]
    assert row["offchip_read_bytes"] == row["offchip_compulsory_bytes"] + row["offchip_retrieve_bytes"]
    assert row["offchip_write_bytes"] == row["offchip_writeback_bytes"] + row["offchip_spill_bytes"]
    assert row["offchip_bytes"] == row["offchip_read_bytes"] + row["offchip_write_bytes"]
    # edge-npu's DRAM has banks: its activation, refresh and background energy are parts too
    assert row["energy_dram_background_pj"] > 0
    energy_parts = sum(row[f"energy_{c}_pj"] for c in ENERGY_COMPONENTS + DRAM_DYNAMIC_COMPONENTS + DRAM_STATIC_COMPONENTS)
    assert energy_parts == pytest.approx(row["energy_pj"], rel=1e-12)
    assert row["energy_dynamic_pj"] + row["energy_static_pj"] == pytest.approx(row["energy_pj"], rel=1e-12)
    assert row["area_mm2"] == pytest.approx(report.total_area_mm2) and row["area_mm2"] > 0
    assert row["onchip_peak_bytes"] <= row["capacity"] == 2112


def test_text_csv_and_json_formats(rows):
    text = format_rows(rows, "text")
    header = text.splitlines()[1]
    assert all(p in header for p in PIPELINES)
    assert "spill (B)" in text and "energy (uJ)" in text and "default+arena: " in text
    parsed = list(csv.DictReader(io.StringIO(format_rows(rows, "csv"))))
    assert [r["planner"] for r in parsed] == PIPELINES and parsed[2]["cycles"] == ""
    assert parsed[0]["cycles"] == str(round(rows[0]["cycles"]))  # whole cycles
    assert json.loads(format_rows(rows, "json")) == rows


def test_parse_pipelines():
    assert parse_pipelines(" a+b , c+d ,") == ["a+b", "c+d"]
    with pytest.raises(Exception, match="expected pipelines"):
        parse_pipelines(" , ")
    # the comma inside a planner's own name (sort,fit) does not split the pipeline
    assert parse_pipelines("default+streams-rr+mindspore-mo:size,first-fit,rpo+arena+lru,"
                           "mindspore-so:breadth,best-fit+rpo") == [
        "default+streams-rr+mindspore-mo:size,first-fit", "rpo+arena+lru", "mindspore-so:breadth,best-fit+rpo"]
    assert parse_pipelines("rpo+mindspore-mo:size,first-fit,first-fit") == [
        "rpo+mindspore-mo:size,first-fit", "first-fit"]  # left for the registry to reject by name


def test_compare_command(capsys, tmp_path):
    code = main(["compare", "squeezenet1_0", "--hw", "edge-npu", "--budget", "MR", "--allow-oversize",
                 "--planner", "default+arena+belady,rpo+arena+belady", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert [r["planner"] for r in data] == ["default+arena+belady", "rpo+arena+belady"]
    graph = load_graph("squeezenet1_0")
    assert data[0]["capacity"] == plan_graph(graph, load_hw("edge-npu"), "default+arena+belady",
                                             data[0]["capacity"]).capacity
    target = tmp_path / "cmp.csv"
    code = main(["compare", "squeezenet1_0", "--hw", "edge-npu", "--budget", "MP", "--planner",
                 "default+arena+lru", "--format", "csv", "-o", str(target), "--allow-oversize"])
    assert code == 0 and len(list(csv.DictReader(target.open()))) == 1


@pytest.mark.parametrize("argv, expected", [
    (["--planner", "default+magic"], "unknown planner 'magic'"),
    (["--planner", "default+arena+belady", "--budget", "12 parsecs"], "--budget '12 parsecs'"),
])
def test_compare_user_errors_are_one_line(capsys, argv, expected):
    code = main(["compare", "squeezenet1_0", "--hw", "edge-npu", *argv])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and err.count("\n") == 1
