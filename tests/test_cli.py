"""The npusim command: the three main paths and clear one-line errors."""

import json

import pytest

from npusim.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_prints_latency_energy_and_bytes(capsys, tmp_path):
    report = tmp_path / "r.json"
    timeline = tmp_path / "t.json"
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "mid-npu", "--report", str(report),
                             "--timeline", str(timeline))
    assert code == 0, err
    for word in ("latency", "energy", "off-chip bytes", "compulsory", "spill"):
        assert word in out
    data = json.loads(report.read_text())
    assert data["graph"].startswith("resnet18") and data["hardware"] == "mid-npu" and data["cycles"] > 0
    assert json.loads(timeline.read_text())["traceEvents"]


@pytest.mark.parametrize("budget", ["MR", "MH", "MP", "3MiB"])
def test_symbolic_budgets(capsys, budget):
    code, out, err = run_cli(capsys, "simulate", "squeezenet1_0", "--hw", "edge-npu", "--budget", budget, "--json",
                             "--allow-oversize")
    assert code == 0, err
    assert json.loads(out)["offchip_bytes"]["compulsory"] > 0


def test_plan_dash_o_dash_writes_the_plan_to_standard_output(capsys, tmp_path, monkeypatch):
    """``-o -`` is standard output (the plan's bytes, as the file would hold them), with the
    summary on standard error; no file named "-" appears."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "plan", "squeezenet1_0", "--hw", "edge-npu", "-o", "-")
    assert code == 0, err
    assert err.startswith("standard output: squeezenet1_0") and not (tmp_path / "-").exists()
    code, _, err = run_cli(capsys, "plan", "squeezenet1_0", "--hw", "edge-npu", "-o", str(tmp_path / "p.json"))
    assert code == 0, err
    assert out == (tmp_path / "p.json").read_text()


def test_plan_validate_simulate_round_trip(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    code, out, err = run_cli(capsys, "plan", "resnet18", "--hw", "edge-npu", "--budget", "MR", "-o", str(plan),
                             "--allow-oversize")
    assert code == 0, err
    code, out, _ = run_cli(capsys, "validate", "resnet18", "--plan", str(plan))
    assert code == 0 and "valid" in out
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--plan", str(plan), "--json",
                             "--allow-oversize")
    assert code == 0, err
    assert json.loads(out)["offchip_bytes"]["spill"] > 0

    # A hand edit that makes two tensors collide is reported, not simulated.
    data = json.loads(plan.read_text())
    data["residencies"][1]["offset"] = data["residencies"][0]["offset"]
    data["residencies"][1]["first"] = data["residencies"][0]["first"]
    plan.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "validate", "resnet18", "--plan", str(plan))
    assert code == 1 and "[overlap]" in out
    code, _, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--plan", str(plan), "--allow-oversize")
    assert code == 2 and "violation" in err and "Traceback" not in err
    # the plan fixes its pipeline and budget: other planning flags are refused, not ignored
    code, _, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--plan", str(plan), "--budget", "1MiB")
    assert code == 2 and "the plan already fixes its pipeline, budget and options; drop --budget" in err


def test_a_negative_jitter_seed_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "resnet18", "--hw", "edge-npu", "--jitter", "-1"])
    assert exc.value.code == 2 and "expected a non-negative integer, got '-1'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, expected", [
    (["simulate", "resnet18", "--hw", "edge-npu", "--planer", "rpo+arena+lru"],
     "npusim simulate: error: unrecognized arguments: --planer rpo+arena+lru (did you mean '--planner'?)"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--budgett=1MiB"], "(did you mean '--budget'?)"),
    (["dse", "--sweep", "budget=1MiB"], "npusim dse: error: the following arguments are required: trace"),
    # argparse takes a value starting with '-' for an option: say how to give it
    (["simulate", "resnet18", "--budget", "-64KiB"],
     "argument --budget: expected one argument; a value that starts with '-' is given as --budget=-64KiB"),
    (["plan", "resnet18", "-o"], "npusim plan: error: argument -o/--output: expected one argument (see"),
])
def test_usage_errors_are_one_line_naming_the_subcommand(capsys, argv, expected):
    """argparse's usage block and 'npusim: error: unrecognized arguments' (blaming the top
    level) become one line naming the subcommand, with a guess for a misspelt option."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and expected in err and len(err.strip().splitlines()) == 1


def test_a_misspelt_planner_gets_a_guess(capsys):
    code, _, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--planner", "rpo+arena+lur")
    assert code == 2 and "unknown planner 'lur' (did you mean 'lru'?)" in err


@pytest.mark.parametrize("argv, expected", [
    (["simulate", "no-such-trace", "--hw", "edge-npu"], "no-such-trace: trace not found"),
    (["simulate", "resnet18", "--hw", "no-such-hw"], "no-such-hw: hardware config not found"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--planner", "default+arena+belady"], "below M_R"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--budget", "64"], "too small to tile op"),
    (["simulate", "resnet18", "--hw", "mid-npu", "--budget", "12 parsecs"], "--budget '12 parsecs'"),
    (["simulate", "resnet18", "--hw", "mid-npu", "--planner", "default+magic"], "unknown planner 'magic'"),
    (["simulate", "resnet18", "--hw", "mid-npu", "--set", "scratchpad.size=1 MB/s"], "scratchpad.size"),
    (["simulate", "resnet18", "--hw", "mid-npu", "--set", "nonsense"], "expected KEY=VALUE"),
    (["simulate", "resnet18", "--hw", "mid-npu", "--set", "=5"], "the key before '=' is empty"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--set", "dram.bandwidth=12.8"], "write the unit, e.g. '25.6GB/s'"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--set", "clock=800"], "would be 800 Hz"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--report", "/no/such/folder/r.json"], "/no/such/folder does not exist"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--timeline", "."], "--timeline .: is a folder"),
    (["plan", "resnet18", "--hw", "edge-npu", "-o", "/no/such/folder/p.json"], "/no/such/folder does not exist"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--offchip", "arena"], "expected an off-chip one: "),
    (["simulate", "resnet18", "--hw", "edge-npu", "--set", "dram.capacity=1KiB"], "above dram.capacity = 1,024 B"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--planner", "cosma+arena"],
     "cannot be combined with the alloc stage 'arena'"),
    (["simulate", "resnet18", "--hw", "edge-npu", "--option", "taa_srt=best", "--offchip", "taa"],
     "did you mean 'taa_sort'?"),
])
def test_user_errors_are_one_line(capsys, argv, expected):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert expected in err and "Traceback" not in err
    assert err.startswith("npusim: error: ")


def test_info_and_list(capsys):
    code, out, _ = run_cli(capsys, "info", "resnet50", "--hw", "edge-npu")
    assert code == 0 and "M_R" in out and "2,485,248" in out and "/layer4/layer4.0/conv2/Conv" in out
    # and the M_R that --budget MR means with the default (fusing) pipeline, when it differs
    code, out, _ = run_cli(capsys, "info", "hrnet_w18_small", "--hw", "edge-npu")
    assert "M_R                   4,870,144 B" in out and "M_R, fused            4,920,320 B" in out
    code, out, err = run_cli(capsys, "simulate", "hrnet_w18_small", "--hw", "edge-npu", "--budget", "MR",
                             "--allow-oversize")
    assert code == 0 and "scratchpad budget 4.69 MiB" in out.splitlines()[0], err
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and "belady" in out and "edge-npu" in out and "resnet50" in out
    # the named pipelines the README lists are shown with what they stand for
    assert "scheme-mpmf-belady              = zhong+arena+belady" in out


def test_import_command(capsys, tmp_path):
    from helpers import SHARED

    model = SHARED / "models" / "resnet18.onnx"
    if not model.exists():
        pytest.skip("shared models not present")
    out_path = tmp_path / "r18.json.gz"
    code, out, err = run_cli(capsys, "import", str(model), "-o", str(out_path), "--dtype", "fp16")
    assert code == 0, err
    code, out, err = run_cli(capsys, "info", str(out_path))
    assert code == 0 and "49 ops" in out


def test_planner_options_reach_the_planners(capsys):
    code, _, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--budget", "16KiB",
                           "--option", "max_tiles=100")
    assert code == 2 and "more than 100 tiles" in err
    code, _, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--option", "oops")
    assert code == 2 and "--option 'oops'" in err


def test_one_spelling_per_concept_and_the_old_ones_still_work(tmp_path, capsys, chain_trace):
    """--planner (one or several pipelines), -o/--output, positional traces and --hw (default
    edge-npu) in every command; --planners, --out and --traces still work with a one-line note."""
    old = main(["dse", chain_trace, "--sweep", "budget=3KiB", "--no-cache", "--planners", "default+arena+belady",
                "--out", str(tmp_path / "old.csv")])
    err = capsys.readouterr().err
    assert old == 0 and "--planners is deprecated, use --planner" in err and "--out is deprecated, use -o/--output" in err
    new = main(["dse", chain_trace, "--sweep", "budget=3KiB", "--no-cache", "--planner", "default+arena+belady",
                "-o", str(tmp_path / "new.csv")])
    assert new == 0 and "deprecated" not in capsys.readouterr().err
    assert (tmp_path / "old.csv").read_text() == (tmp_path / "new.csv").read_text()
    assert main(["compare", chain_trace, "--planner", "default+arena+belady,rpo+arena+belady", "--budget", "3KiB"]) == 0
    table = capsys.readouterr().out  # no --hw: edge-npu
    assert "default+arena+belady" in table and "rpo+arena+belady" in table
    # compare has no default pipeline: the old spelling gives it one too, and neither is refused
    assert main(["compare", chain_trace, "--planners", "default+arena+belady,rpo+arena+belady", "--budget", "3KiB"]) == 0
    assert capsys.readouterr().out == table
    with pytest.raises(SystemExit) as info:
        main(["compare", chain_trace, "--budget", "3KiB"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "required: --planner (" in err and "--planners" not in err and err.count("\n") == 1
    # plan requires its output: --out gives it too
    assert main(["plan", chain_trace, "--budget", "3KiB", "--out", str(tmp_path / "old.json")]) == 0
    assert main(["plan", chain_trace, "--budget", "3KiB", "-o", str(tmp_path / "new.json")]) == 0
    assert (tmp_path / "old.json").read_text() == (tmp_path / "new.json").read_text()
    with pytest.raises(SystemExit) as info:
        main(["plan", chain_trace, "--budget", "3KiB"])
    assert info.value.code == 2 and "required: -o/--output (" in capsys.readouterr().err


def test_compare_and_dse_take_planner_options(tmp_path, capsys, chain_trace):
    """--option goes to every pipeline of a comparison or a sweep; a name no planner declares
    is refused before any point runs."""
    assert main(["compare", chain_trace, "--planner", "zhong+arena+belady,default+arena+belady", "--budget", "3KiB",
                 "--option", "time_limit=1", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["planner"] for r in rows] == ["zhong+arena+belady", "default+arena+belady"]
    assert main(["compare", chain_trace, "--planner", "default+arena+belady", "--option", "time_limt=1"]) == 2
    assert "unknown planner option 'time_limt' (did you mean 'time_limit'?)" in capsys.readouterr().err
    assert main(["dse", chain_trace, "--sweep", "budget=3KiB", "--no-cache", "--planner", "zhong+arena+belady",
                 "--option", "time_limit=1", "-o", str(tmp_path / "r.csv")]) == 0
    assert main(["dse", chain_trace, "--sweep", "budget=3KiB", "--no-cache", "--option", "tile_objective=speed",
                 "-o", str(tmp_path / "r.csv")]) == 2
    assert "tile_objective='speed', expected one of time, bytes" in capsys.readouterr().err


def test_a_command_leaves_the_callers_gc_setting_as_it_was(capsys):
    import gc

    from npusim.cli import GC_THRESHOLD

    before = gc.get_threshold()
    seen = []
    import npusim.cli as cli

    real = cli._run
    cli._run = lambda argv: (seen.append(gc.get_threshold()[0]), real(argv))[1]
    try:
        assert main(["list"]) == 0
    finally:
        cli._run = real
    assert seen == [GC_THRESHOLD] and gc.get_threshold() == before


def test_the_command_exits_hard_with_its_output_flushed_and_its_status(tmp_path):
    """``npusim`` (``npusim.cli.command``) ends with ``os._exit``, skipping the interpreter's
    teardown: what it printed to a pipe (block-buffered; ``main`` flushes it) must all arrive,
    and its exit status must be main's, for a success and for a user error."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "npusim.cli", "simulate", "squeezenet1_0", "--hw", "edge-npu",
                           "--json"], capture_output=True, text=True, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cycles"] > 0  # the whole JSON document, not a truncated one
    bad = subprocess.run([sys.executable, "-m", "npusim.cli", "simulate", "no_such_trace", "--hw", "edge-npu"],
                         capture_output=True, text=True, cwd=root, timeout=300)
    assert bad.returncode == 2 and bad.stderr.startswith("npusim: error: no_such_trace")


def test_simulate_frees_the_plan_before_the_run(capsys, monkeypatch):
    """``simulate`` keeps no reference to the plan once it is lowered: a tiled plan's residencies
    and transfers (a few hundred MB on fcn_resnet50 at 64 KiB) are freed before the run."""
    import gc
    import weakref

    import npusim.cli as cli

    plans, alive_at_run = [], []
    plan_for, simulate_program = cli._plan_for, cli.simulate_program

    def recording_plan_for(*args, **kwargs):
        plan = plan_for(*args, **kwargs)
        plans.append(weakref.ref(plan))
        return plan

    def checking_simulate_program(*args, **kwargs):
        gc.collect()
        alive_at_run.append(plans[0]() is not None)
        return simulate_program(*args, **kwargs)

    monkeypatch.setattr(cli, "_plan_for", recording_plan_for)
    monkeypatch.setattr(cli, "simulate_program", checking_simulate_program)
    assert main(["simulate", "bert_tiny", "--hw", "edge-npu"]) == 0
    assert "latency" in capsys.readouterr().out
    assert alive_at_run == [False]


def test_commands_of_many_runs_collect_the_young_generation_more_often(capsys, monkeypatch, tmp_path):
    """``regress``, ``dse``, ``compare`` and ``experiment`` run the collector at
    ``MANY_RUNS_GC_THRESHOLDS`` (a case's simulator is freed only by a collection); the others at
    ``GC_THRESHOLDS``; the caller's setting is back after either."""
    import gc

    import npusim.cli as cli

    before, seen = gc.get_threshold(), {}
    for name in ("regress", "list"):
        handler = cli.HANDLERS.get(name)
        fake = lambda args, name=name: seen.setdefault(name, gc.get_threshold()) and 0  # noqa: E731
        fake.__name__ = handler.__name__
        monkeypatch.setattr(cli, handler.__name__, fake)
        monkeypatch.setitem(cli.HANDLERS, name, fake)
    assert main(["regress", "--only", "nothing"]) == 0 and main(["list"]) == 0
    assert seen == {"regress": cli.MANY_RUNS_GC_THRESHOLDS, "list": cli.GC_THRESHOLDS}
    assert gc.get_threshold() == before


def test_compare_text_shows_the_banks_models_energy_and_rows(capsys):
    """With dram.model: banks (edge-npu's) the text table has the DRAM device's energy (activation,
    refresh, background: part of the static total above them) and its row statistics; with the
    bandwidth model, none."""
    args = ["compare", "squeezenet1_0", "--hw", "edge-npu", "--budget", "512KiB", "--planner",
            "fuse+tile+default+arena+belady"]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    for label in ("dram_activate (uJ)", "dram_refresh (uJ)", "dram_background (uJ)", "DRAM row hit rate",
                  "DRAM activations"):
        assert label in out
    code, out, err = run_cli(capsys, *args, "--set", "dram.model=bandwidth")
    assert code == 0, err
    assert "DRAM" not in out and "dram_background" not in out


def test_banks_only_settings_on_the_bandwidth_model_are_said_not_dropped(capsys):
    """``dram.device`` (or any field only the banks model reads) given for a run of the bandwidth
    model gets a note on standard error; with the banks model, or without such a setting, none."""
    code, out, err = run_cli(capsys, "simulate", "squeezenet1_0", "--hw", "edge-npu", "--set", "dram.model=bandwidth",
                             "--set", "dram.device=hbm3-6400", "--set", "dram.bank_queue=8")
    assert code == 0, err
    assert "note: dram.device, dram.bank_queue only apply with dram.model: banks" in err
    code, out, err = run_cli(capsys, "simulate", "squeezenet1_0", "--hw", "edge-npu", "--set", "dram.device=hbm3-6400",
                             "--set", "dram.model=banks")
    assert code == 0, err
    assert "only appl" not in err
    code, out, err = run_cli(capsys, "simulate", "squeezenet1_0", "--hw", "edge-npu", "--set", "dram.bandwidth=25.6GB/s")
    assert code == 0, err
    assert "only appl" not in err
    # a placement for a plan that places its tensors itself (an off-chip planner) is said unused too
    code, out, err = run_cli(capsys, "simulate", "squeezenet1_0", "--hw", "edge-npu", "--offchip", "taa",
                             "--set", "dram.model=banks", "--set", "dram.placement=rows")
    assert code == 0, err
    assert "note: dram.placement is not used: the plan (" in err


@pytest.mark.parametrize("command", [["simulate", "squeezenet1_0"], ["plan", "squeezenet1_0", "-o", "unused.json"],
                                     ["simulate", "llm:gpt2-small", "--prefill", "8", "--decode", "2"]])
def test_an_empty_planner_is_refused_not_the_default(capsys, command):
    """``--planner ''`` (an unset shell variable) ran the default pipeline without a word."""
    code, out, err = run_cli(capsys, *command, "--planner", "")
    assert code == 2 and "pipeline '': expected planner names joined by '+'" in err, err


@pytest.mark.parametrize("dram", ["bandwidth", "banks"])
def test_a_slow_clock_prints_seconds(capsys, dram):
    """clock: 1Hz printed '4,241,815 cycles = 4241815000.019 ms'. The banks model refreshed
    every 3.9 us of the run one at a time and never ended: it takes an idle stretch's
    refreshes in one step. Below 1 kHz (1e-6 Hz hung: doubles of ns at 1e21 no longer move by
    a tREFI) the clock is refused, one line, exit 2."""
    code, out, err = run_cli(capsys, "simulate", "squeezenet1_0", "--hw", "edge-npu", "--set", "clock=1kHz",
                             "--set", f"dram.model={dram}")
    latency = out.splitlines()[1]
    assert code == 0 and " cycles = 4,2" in latency and latency.split(" cycles = ")[1].split()[1] == "s", latency
    code, out, err = run_cli(capsys, "simulate", "squeezenet1_0", "--hw", "edge-npu")
    assert out.splitlines()[1].split(" cycles = ")[1].split()[1] == "ms"
    code, out, err = run_cli(capsys, "simulate", "squeezenet1_0", "--hw", "edge-npu", "--set", "clock=1e-6Hz",
                             "--set", f"dram.model={dram}")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "clock = '1e-6Hz': expected at least 1000 Hz" in err


def test_graphs_built_in_python_are_held_to_the_trace_contract():
    """``build_graph`` checks references and cycles only: negative macs gave negative energy,
    a MatMul of mismatched shapes ran (an API audit). ``npusim.graph_from_records`` checks what
    a trace file is checked for."""
    import npusim
    from npusim.errors import TraceError

    def t(name, shape, kind="activation"):
        return dict(name=name, shape=shape, dtype="int8", itemsize=1, kind=kind)

    mm = dict(name="mm", kind="MatMul", inputs=["x", "w"], outputs=["y"], macs=64,
              gemm=dict(m=4, n=2, k=8, batch=1))
    ok = npusim.graph_from_records("g", [t("x", [4, 8], "input"), t("w", [8, 2], "weight"), t("y", [4, 2], "output")],
                                   [mm])
    assert ok.ops[0].macs == 4 * 8 * 2
    with pytest.raises(TraceError, match="graph 'g': op 'mm' \\(MatMul\\)"):
        npusim.graph_from_records("g", [t("x", [4, 8], "input"), t("w", [9, 2], "weight"), t("y", [4, 2], "output")],
                                  [mm])
    with pytest.raises(TraceError, match="vector_ops"):
        npusim.graph_from_records("g", [t("x", [4], "input"), t("y", [4], "output")],
                                  [dict(name="r", kind="Relu", inputs=["x"], outputs=["y"], vector_ops=-10 ** 6)])


def test_info_prices_the_dram_part_the_banks_model_times(capsys):
    """``info --hw tpu-v4`` printed a DRAM peak of 78.64 W (1228.8 GB/s x energy.dram_read_byte)
    beside 'dram.model: banks', which prices reads from the HBM2 part's currents (~15 W), and
    its static power left out the part's background and refresh (a user audit)."""
    import re

    from npusim.dram.model import device_power_w
    from npusim.workflow import load_hw

    def figures(*args):
        code, out, err = run_cli(capsys, "info", "--hw", "tpu-v4", *args)
        assert code == 0, err
        peak = float(re.search(r"peak dynamic .*?dram ([\d,.]+) W", out).group(1).replace(",", ""))
        static = re.search(r"static power .*", out).group(0)
        return peak, static

    hw = load_hw("tpu-v4")
    peak, static = figures()
    assert peak == pytest.approx(device_power_w(hw)[0], rel=0.01) and "dram" in static
    assert peak < 0.5 * hw.dram.bandwidth * hw.energy.dram_read_byte * 1e-12
    peak, static = figures("--set", "dram.model=bandwidth")
    assert peak == pytest.approx(hw.dram.bandwidth * hw.energy.dram_read_byte * 1e-12, rel=0.01) and "dram" not in static


def test_the_dram_rows_line_names_the_rate_a_part_runs_off_its_rating(capsys):
    """tpu-v1's DDR4-3200 runs at 2,125 MT/s (the 34 GB/s of its DDR3) and a one-channel
    edge-npu's LPDDR4 at 6,400: the DRAM rows line said 'ddr4-3200 x2' and 'lpddr4-3200 x1',
    the rate only in info and the JSON (a user audit). At its rating the line is unchanged."""
    from npusim.dram.presets import part_label

    assert part_label("lpddr4-3200", 2, 3200.0) == "lpddr4-3200 x2"
    assert part_label("hbm2-2000", 32, 2400.0) == "hbm2-2000 at 2,400 MT/s x32"
    code, out, err = run_cli(capsys, "simulate", "squeezenet1_0", "--hw", "edge-npu", "--set", "dram.channels=1")
    line = next(s for s in out.splitlines() if "DRAM rows" in s)
    assert code == 0 and "lpddr4-3200 at 6,400 MT/s x1 " in line, line
