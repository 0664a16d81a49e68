"""Design-space exploration: sweep parsing, points, infeasible points, cache, backends agree."""

import csv
import json

import pytest

from helpers import chain_with_skip
from npusim import dse
from npusim.cli import main
from npusim.graph.trace_io import save_trace

PIPELINES = ["default+arena+belady", "rpo+arena+lru"]


def sweep_points(trace, *sweeps, pipelines=PIPELINES):
    return dse.make_points([trace], "edge-npu", [dse.parse_sweep(s) for s in sweeps], pipelines)


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize("text, key, values", [
    ("scratchpad.size=64KiB..8MiB:x2", "scratchpad.size", [64 * 1024 << i for i in range(8)]),
    ("cores.pe_rows=8..32:+8", "cores.pe_rows", [8, 16, 24, 32]),
    ("scratchpad.size=1MiB..2MiB:+256KiB", "scratchpad.size", [1 << 20, 1280 << 10, 1536 << 10, 1792 << 10, 2 << 20]),
    ("dram.bandwidth=6.4GB/s..25.6GB/s:x2", "dram.bandwidth", [6.4e9, 12.8e9, 25.6e9]),
    ("budget=MR, mp ,3MiB", "budget", ["MR", "MP", 3 << 20]),
    ("budget=2.5MiB..20MiB:x2", "budget", [int(2.5 * 2**20) << i for i in range(4)]),
    ("cores.dataflow=os,ws", "cores.dataflow", ["os", "ws"]),
    ("dram.latency=100ns", "dram.latency", [pytest.approx(1e-7)]),
])
def test_parse_sweep(text, key, values):
    sweep = dse.parse_sweep(text)
    assert sweep.key == key and list(sweep.values) == values


@pytest.mark.parametrize("text, message", [
    ("scratchpad.size", "expected KEY="),
    ("scratchpad.sise=1KiB,2KiB", "did you mean 'scratchpad.size'"),
    ("scratchpad.size=64KiB..8MiB", "needs a step"),
    ("scratchpad.size=8MiB..64KiB:x2", "starts above its end"),
    ("scratchpad.size=64KiB..8MiB:x1", "factor must be > 1"),
    ("scratchpad.size=64KiB..8MiB:+0", "step must be > 0"),
    ("cores.dataflow=os..ws:x2", "takes a list"),
    ("scratchpad.size=1 parsec", "unknown size unit"),
    ("budget=MR,MR", "given twice"),
    ("scratchpad.size=1B..1GiB:+1", "more than"),
    # a value the field refuses on its own is bad input, not an infeasible point
    ("dram.bank_queue=-1,8", "-1: expected a whole number of 0 or more"),
    ("dram.read_queue=0,8", "0: expected a whole number greater than 0"),
    ("dram.bank_queue=0,abc", "'abc': expected an integer such as 16"),
    ("dram.bank_queue=1e1,4", "'1e1': expected an integer such as 16"),
    ("dram.mapping=RoBaCoCh,RoRaBaCoCh", "'RoBaCoCh': missing field(s) Ra"),  # (whatever the device)
    ("dram.mapping=RoRaBaCoCh,RoRoBaCoCh", "'RoRoBaCoCh': a field appears twice"),
])
def test_parse_sweep_errors_name_the_problem(text, message):
    with pytest.raises(dse.DseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dse.parse_sweep(text)


def test_points_are_the_cartesian_product_in_a_fixed_order(chain_trace):
    points = sweep_points(chain_trace, "budget=3KiB,4KiB", "dram.bandwidth=6.4GB/s,12.8GB/s")
    assert len(points) == 2 * 2 * len(PIPELINES)
    assert [p.index for p in points] == list(range(len(points)))
    combos = [(dict(p.settings)["budget"], dict(p.settings)["dram.bandwidth"], p.pipeline) for p in points]
    assert combos[:3] == [(3072, 6.4e9, PIPELINES[0]), (3072, 6.4e9, PIPELINES[1]), (3072, 12.8e9, PIPELINES[0])]
    assert points[2].hw.dram.bandwidth == 12.8e9 and points[0].hw.dram.bandwidth == 6.4e9
    assert len({p.cache_key() for p in points}) == len(points)


def test_bad_planner_or_hardware_is_an_error_before_the_sweep(chain_trace):
    with pytest.raises(Exception, match="unknown planner 'magic'"):
        sweep_points(chain_trace, "budget=3KiB", pipelines=["default+magic"])
    with pytest.raises(Exception, match="hardware config not found"):
        dse.make_points([chain_trace], "no-such-npu", [], PIPELINES)
    with pytest.raises(Exception, match="no-such-trace: trace not found"):
        dse.make_points(["no-such-trace"], "edge-npu", [], PIPELINES)
    # a --budget beside a swept budget would be replaced at every point without a word
    with pytest.raises(dse.DseError, match=r"--budget 256KiB: the budget is swept \(--sweep budget=...\)"):
        dse.make_points([chain_trace], "edge-npu", [dse.parse_sweep("budget=3KiB,4KiB")], PIPELINES, budget="256KiB")


# ---------------------------------------------------------------- running


def test_infeasible_points_are_recorded_with_their_reason(chain_trace):
    # 1 KiB is below M_R; a 32-B scratchpad is below the 64-B alignment (a config error).
    points = sweep_points(chain_trace, "budget=1KiB,2112") + sweep_points(chain_trace, "scratchpad.size=32B")
    result = dse.run_sweep(points, cache_dir=None)
    by_budget = {(r["budget"], r["planner"]): r for r in result.rows}
    low = by_budget[(1024, PIPELINES[0])]
    assert low["status"] == "infeasible" and "below M_R" in low["reason"] and low["cycles"] is None
    ok = by_budget[(2112, PIPELINES[0])]
    assert ok["status"] == "ok" and ok["capacity"] == 2112 and ok["offchip_spill_bytes"] > 0
    assert ok["offchip_read_bytes"] + ok["offchip_write_bytes"] == ok["offchip_bytes"]
    tiny = [r for r in result.rows if r.get("scratchpad.size") == 32]
    assert len(tiny) == 2 and all(r["status"] == "infeasible" and "scratchpad.alignment" in r["reason"] for r in tiny)
    assert result.infeasible == 4 and len(result.rows) == len(points)


def test_cache_resumes_and_is_keyed_by_content(chain_trace, tmp_path):
    cache = tmp_path / "cache"
    points = sweep_points(chain_trace, "budget=2112,3KiB,4KiB")
    first = dse.run_sweep(points[:3], cache_dir=cache)  # an "interrupted" sweep
    assert (first.computed, first.cached) == (3, 0)
    files = sorted(cache.rglob("*.json"))
    assert len(files) == 3 and all(json.loads(f.read_text())["format"] == dse.CACHE_FORMAT for f in files)
    full = dse.run_sweep(points, cache_dir=cache)  # resumes: only the rest is computed
    assert (full.computed, full.cached) == (3, 3)
    assert full.rows[:3] == first.rows  # cached rows come back unchanged, solve time included
    again = dse.run_sweep(points, cache_dir=cache)
    assert (again.computed, again.cached) == (0, 6) and again.rows == full.rows

    # A different trace content, hardware or npusim version is a different point.
    changed = json.loads(open(chain_trace).read())
    changed["ops"][0]["vector_ops"] = 2000
    open(chain_trace, "w").write(json.dumps(changed))
    dse._file_digest.cache_clear()
    moved = sweep_points(chain_trace, "budget=2112,3KiB,4KiB")
    assert {p.cache_key() for p in moved}.isdisjoint(p.cache_key() for p in points)
    other_hw = dse.make_points([chain_trace], "mid-npu", [dse.parse_sweep("budget=3KiB")], PIPELINES[:1])
    assert other_hw[0].cache_key() != moved[1].cache_key()
    from dataclasses import replace

    assert replace(moved[0], version="0.0.0").cache_key() != moved[0].cache_key()


def test_a_torn_cache_entry_is_recomputed(chain_trace, tmp_path):
    cache = tmp_path / "cache"
    points = sweep_points(chain_trace, "budget=3KiB")
    dse.run_sweep(points, cache_dir=cache)
    entry = next(cache.rglob("*.json"))
    entry.write_text("{not json")
    result = dse.run_sweep(points, cache_dir=cache)
    assert result.computed == 1 and json.loads(entry.read_text())["row"]["status"] == "ok"


def test_jobs_1_and_2_give_identical_rows(chain_trace):
    points = sweep_points(chain_trace, "budget=1KiB,2112,3KiB,4KiB", "cores.vector_lanes=8,16")
    serial = dse.run_sweep(points, jobs=1, cache_dir=None)
    parallel = dse.run_sweep(points, jobs=2, cache_dir=None)
    assert dse.without_wall_clock(serial.rows) == dse.without_wall_clock(parallel.rows)
    assert {r["status"] for r in serial.rows} == {"ok", "infeasible"}


def test_dask_local_cluster_matches_local_backend(chain_trace):
    pytest.importorskip("distributed")
    points = sweep_points(chain_trace, "budget=1KiB,2112,3KiB,4KiB")
    local = dse.run_sweep(points, jobs=1, cache_dir=None)
    distributed = dse.run_sweep(points, jobs=2, backend="dask", cache_dir=None, dask_processes=False)
    assert dse.without_wall_clock(distributed.rows) == dse.without_wall_clock(local.rows)


@pytest.mark.parametrize("error", ["InstallError", "InternalError"])
def test_a_stale_install_or_a_bug_stops_the_sweep_and_caches_nothing(chain_trace, tmp_path, monkeypatch, error):
    """A C kernel older than its source (or a planner's invalid plan) says nothing of the
    point: recorded as "infeasible" it would be cached and read back after the fix. The same
    in compare and regress, which turn the user's infeasible points into rows too."""
    import npusim.errors as errors
    import npusim.workflow as workflow
    from npusim.cli import regress
    from npusim.cli.compare import compare_planners
    from npusim.workflow import load_graph, load_hw

    def broken(*args, **kwargs):
        raise getattr(errors, error)("npusim's C kernel is older than its source: rebuild it")

    points = sweep_points(chain_trace, "budget=2112,3KiB")
    for module in (dse, workflow, regress):  # (compare imports it from workflow when it runs)
        monkeypatch.setattr(module, "simulate_plan", broken)
    with pytest.raises(getattr(errors, error), match="rebuild it"):
        dse.run_sweep(points, jobs=1, cache_dir=tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("*.json"))
    graph, hw = load_graph(chain_trace), load_hw("edge-npu")
    with pytest.raises(getattr(errors, error)):
        compare_planners(graph, hw, [PIPELINES[0]], "4KiB")
    with pytest.raises(getattr(errors, error)):
        regress.measure(chain_trace, "edge-npu", PIPELINES[0], "4KiB")
    monkeypatch.undo()
    assert dse.run_sweep(points, jobs=1, cache_dir=tmp_path / "cache").infeasible == 0


def test_worker_with_other_version_or_trace_refuses(chain_trace):
    from dataclasses import replace

    point = sweep_points(chain_trace, "budget=3KiB")[0]
    with pytest.raises(dse.DseError, match="worker runs npusim"):
        dse.evaluate_point(replace(point, version="0.0.0"))
    with pytest.raises(dse.DseError, match="differs on the worker"):
        dse.evaluate_point(replace(point, trace_digest="0" * 64))


# ---------------------------------------------------------------- output and command


def test_results_round_trip_through_csv_and_json(chain_trace, tmp_path):
    sweeps = [dse.parse_sweep("budget=1KiB,3KiB")]
    points = dse.make_points([chain_trace], "edge-npu", sweeps, PIPELINES)
    result = dse.run_sweep(points, cache_dir=None)
    csv_path, json_path = dse.write_results(result, tmp_path / "out" / "res.csv", sweeps)
    assert dse.read_results(json_path) == dse.without_wall_clock(result.rows)  # no solve_seconds by default
    from_csv = dse.read_results(csv_path)
    assert [r["cycles"] for r in from_csv] == [r["cycles"] for r in result.rows]
    assert json.loads(json_path.read_text())["sweeps"] == {"budget": [1024, 3072]}


def test_dse_command_writes_csv_json_and_uses_the_cache(capsys, chain_trace, tmp_path):
    out, cache = tmp_path / "r.csv", tmp_path / "cache"
    argv = ["dse", chain_trace, "--hw", "edge-npu", "--sweep", "budget=1KiB..4KiB:x2", "--planner", ",".join(PIPELINES),
            "-o", str(out), "--cache-dir", str(cache)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "6 points (0 cached, 6 computed, 4 infeasible)" in text
    rows = list(csv.DictReader(out.open()))
    assert [r["budget"] for r in rows] == ["1024", "1024", "2048", "2048", "4096", "4096"]
    assert [r["status"] for r in rows] == ["infeasible"] * 4 + ["ok"] * 2
    assert json.loads(out.with_suffix(".json").read_text())["rows"][-1]["status"] == "ok"
    assert main(argv) == 0
    assert "6 points (6 cached, 0 computed, 4 infeasible)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, expected", [
    (["--sweep", "scratchpad.sise=1KiB"], "did you mean 'scratchpad.size'"),
    (["--sweep", "budget=1KiB", "--planner", "default+magic"], "unknown planner 'magic'"),
    (["--sweep", "budget=1KiB", "--jobs", "0"], "--jobs 0"),
    (["--set", "scratchpad.size=1 MB/s"], "scratchpad.size"),
    (["--budget", "12 parsecs"], "--budget '12 parsecs'"),
    (["--sweep", "budget=1KiB..64KiB:+1KiB", "--max-points", "10"], "64 points (1 trace(s) x 64 setting(s)"),
    (["--sweep", "dram.device=lpddr4-3200,ddr3"], "'ddr3': expected one of lpddr4-3200"),  # not an infeasible point
    (["--sweep", "dram.page_policy=open,shut"], "'shut': expected one of open, closed, adaptive"),
])
def test_dse_user_errors_are_one_line(capsys, chain_trace, tmp_path, argv, expected):
    code = main(["dse", chain_trace, "--hw", "edge-npu", "--no-cache", "-o", str(tmp_path / "r.csv"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and err.startswith("npusim: error: ") and err.count("\n") == 1


def test_the_summary_shows_values_in_their_units_and_lines_up(chain_trace):
    """12.8GB/s, not 12800000000.0; the metrics start in one column whatever the names."""
    points = dse.make_points([chain_trace], "edge-npu", [dse.parse_sweep("dram.bandwidth=6.4GB/s,12.8GB/s")],
                             ["default+arena+belady", "default+streams-rr+mindspore-mo:size,best-fit"],
                             budget="3KiB")
    text = dse.summary(dse.run_sweep(points, jobs=1, cache_dir=None))
    lines = text.splitlines()[:-1]
    assert "dram.bandwidth=12.8GB/s" in text and "12800000000" not in text
    assert len({line.index(" cyc") for line in lines if " cyc" in line}) == 1


def test_the_summary_shows_the_row_hit_rate_of_a_banks_sweep(chain_trace):
    """With dram.model: banks each point's line ends with its DRAM row-hit rate (the CSV has the
    rest); the bandwidth model has none to show."""
    points = dse.make_points([chain_trace], "edge-npu", [dse.parse_sweep("dram.model=banks,bandwidth")],
                             ["default+arena+belady"], budget="3KiB")
    banks, bandwidth = dse.summary(dse.run_sweep(points, jobs=1, cache_dir=None)).splitlines()[:2]
    assert "dram.model=banks" in banks and banks.endswith("row hits")
    assert "dram.model=bandwidth" in bandwidth and "row hits" not in bandwidth


def test_a_sweep_off_a_terminal_says_how_far_it_got(chain_trace, monkeypatch, capfd):
    """Off a terminal (CI logs, pipes) a sweep prints a line with the point reached and the time
    left, every NPUSIM_PROGRESS_SECONDS, as the other long commands do."""
    monkeypatch.setenv("NPUSIM_PROGRESS_SECONDS", "0.000001")
    points = sweep_points(chain_trace, "budget=3KiB,4KiB,5KiB")
    dse.run_sweep(points, jobs=1, cache_dir=None)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("npusim dse: point")]
    assert lines and lines[-1].startswith(f"npusim dse: point {len(points)} of {len(points)},")
    assert all("s left" in line for line in lines)


def test_a_huge_range_says_how_many_values_it_has():
    """327,680 values is what the range holds, not where counting stopped."""
    with pytest.raises(dse.DseError, match=r"327,680 values, more than 10,000"):
        dse.parse_sweep("scratchpad.size=64KiB..20GiB:+64KiB")
