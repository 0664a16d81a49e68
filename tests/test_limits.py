"""Resource bounds checked before work: a small input cannot ask for unbounded memory."""

import json

import pytest

from npusim.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("key, value", [("cores.count", "10000000"), ("streams", "1000000000"),
                                        ("dma.channels", "5000"), ("cores.pe_rows", "100000"),
                                        # queues deeper than any controller's: the banks model's look-ahead
                                        # copies them, so 16384 took 25 s CPU for the results 1024 gives
                                        ("dram.bank_queue", "16384"), ("dram.read_queue", "4096")])
def test_counts_no_npu_has_are_refused_before_work(capsys, key, value):
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", "--set", f"{key}={value}")
    assert code == 2 and f"{key} = {value}: expected at most" in err and len(err.strip().splitlines()) == 1


def _trace_with_view(tmp_path, tensor_shape, view_shape, offset=0):
    data = {"format": "npusim-trace/1", "name": "v", "tensors": [
        {"name": "x", "shape": [1, 8], "dtype": "int8", "itemsize": 1, "kind": "input"},
        {"name": "v", "shape": tensor_shape, "dtype": "int8", "itemsize": 1, "kind": "input",
         "view": {"base": "x", "offset": offset, "shape": view_shape, "strides": [8, 1]}},
        {"name": "y", "shape": [1, 8], "dtype": "int8", "itemsize": 1, "kind": "output"}],
        "ops": [{"name": "r", "kind": "Relu", "inputs": ["v"], "outputs": ["y"]}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_452_byte_view_bomb_is_one_line(capsys, tmp_path):
    """The issue's reproduction: a [2**31, 2**31] view over a [1, 8] tensor (23 GB before)."""
    trace = _trace_with_view(tmp_path, [1, 8], [2147483648, 2147483648])
    code, out, err = run_cli(capsys, "simulate", trace, "--hw", "edge-npu")
    assert code == 2 and "expected the tensor's shape [1, 8]" in err


def test_a_view_outside_its_base_is_refused(capsys, tmp_path):
    trace = _trace_with_view(tmp_path, [1, 8], [1, 8], offset=5)
    code, out, err = run_cli(capsys, "simulate", trace, "--hw", "edge-npu")
    assert code == 2 and "reaches element 12 of 'x', which has 8; expected a view inside its base" in err
    inside = _trace_with_view(tmp_path, [1, 8], [1, 8], offset=0)
    assert run_cli(capsys, "info", inside)[0] == 0


def _concat_of(n: int):
    from npusim.graph.model import build_graph

    tensors = [dict(name="x", shape=[1, 64, 8, 8], dtype="int8", itemsize=1, kind="input"),
               dict(name="y", shape=[1, 64 * n, 8, 8], dtype="int8", itemsize=1, kind="output")]
    ops = [dict(name="cat", kind="Concat", inputs=["x"] * n, outputs=["y"], attrs={"axis": 1}, macs=0,
                vector_ops=64 * n * 64, gemm=None)]
    return build_graph("cat", tensors, ops)


def test_the_tilers_loop_order_is_linear_in_an_ops_inputs(monkeypatch):
    """A Concat reading one tensor n times (226 s at n = 10,000 before): the loop-order search
    asks for the inputs' boxes once per tiled dimension, not once per input and dimension."""
    import planners.tiling.estimate as estimate
    import planners.tiling.tiler as tiler

    calls = []
    real = estimate.box_rule  # the op's rule, what the tile search's memo (``op_input_boxes``) computes with

    def counting_rule(*args):
        rule = real(*args)
        return lambda *box: calls.append(1) or rule(*box)

    monkeypatch.setattr(estimate, "box_rule", counting_rule)
    graph = _concat_of(400)
    op = graph.ops[0]
    estimate.clear_memo()
    calls.clear()
    tiler._best_order(op, graph, [1, 64, 8, 8], 0, 64)
    assert len(calls) <= 1 + 4  # the base box, then one per tiled dimension


def test_concat_boxes_by_bisection_match_the_plain_scan():
    """Each input's part of an output box: the bisection agrees with scanning every input."""
    from npusim.graph.regions import input_boxes

    graph = _concat_of(7)
    op = graph.ops[0]
    for a, b in [(0, 64), (10, 70), (63, 65), (0, 448), (447, 448), (128, 192)]:
        box = ((0, 1), (a, b), (0, 8), (0, 8))
        expected = []
        for i in range(7):
            lo, hi = max(a, 64 * i), min(b, 64 * i + 64)
            expected.append(((0, 1), (lo - 64 * i, hi - 64 * i), (0, 8), (0, 8)) if lo < hi else None)
        assert input_boxes(op, graph, box) == expected


def test_a_simulation_too_big_for_memory_is_refused_before_lowering(capsys, monkeypatch):
    """Each command of a Program costs about BYTES_PER_COMMAND through lowering and simulation;
    a plan whose commands need more than NPUSIM_MEMORY_LIMIT (default: the machine's available
    memory) is refused before any is built, naming both numbers."""
    import npusim.workflow as workflow

    monkeypatch.setattr(workflow, "lower", lambda *a, **k: pytest.fail("lowered"))
    monkeypatch.setattr(workflow, "BYTES_PER_ELEMENT", 0)  # the graph's own check aside (tested below)
    monkeypatch.setenv("NPUSIM_MEMORY_LIMIT", "1MiB")
    code = main(["simulate", "resnet18", "--hw", "edge-npu"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "commands needs about" in err and "1.00 MiB available" in err and "NPUSIM_MEMORY_LIMIT" in err


@pytest.mark.parametrize("value", ["abc", "-5GiB", "0"])
def test_a_bad_memory_limit_is_a_one_line_error(capsys, monkeypatch, value):
    monkeypatch.setenv("NPUSIM_MEMORY_LIMIT", value)
    code = main(["simulate", "resnet18", "--hw", "edge-npu"])
    err = capsys.readouterr().err
    assert code == 2 and "NPUSIM_MEMORY_LIMIT" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["abc", "nan", "-5"])
def test_a_bad_memory_limit_is_refused_at_start_by_every_command(capsys, monkeypatch, value):
    """Checked with the other knobs before any command runs (a sweep would otherwise turn it
    into infeasible rows): even `list`, which simulates nothing."""
    monkeypatch.setenv("NPUSIM_MEMORY_LIMIT", value)
    code = main(["list"])
    err = capsys.readouterr().err
    assert code == 2 and "NPUSIM_MEMORY_LIMIT" in err and len(err.strip().splitlines()) == 1


def test_the_memory_limit_defaults_to_what_the_machine_has(monkeypatch):
    from npusim.util.env_knobs import memory_limit

    monkeypatch.delenv("NPUSIM_MEMORY_LIMIT", raising=False)
    limit = memory_limit()
    assert limit is None or limit > 1 << 20
    monkeypatch.setenv("NPUSIM_MEMORY_LIMIT", "2GiB")
    assert memory_limit() == 2 << 30


# ------------------------------------------------------------ issue 33, item 6: bounded before work


def test_a_380_byte_trace_with_a_1_gib_output_is_refused_before_planning(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NPUSIM_MEMORY_LIMIT", "256MiB")
    data = {"format": "npusim-trace/1", "name": "big", "tensors": [
        {"name": "x", "shape": [1, 1024, 1024, 1024], "dtype": "int8", "itemsize": 1, "kind": "input"},
        {"name": "y", "shape": [1, 1024, 1024, 1024], "dtype": "int8", "itemsize": 1, "kind": "output"}],
        "ops": [{"name": "r", "kind": "Relu", "inputs": ["x"], "outputs": ["y"], "vector_ops": 1 << 30}]}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(data))
    code, out, err = run_cli(capsys, "simulate", str(path), "--hw", "edge-npu")
    assert code == 2 and "tensor 'y' has 1,073,741,824 elements" in err and "NPUSIM_MEMORY_LIMIT" in err


def test_a_gzipped_plan_is_bounded_while_it_expands(tmp_path, monkeypatch):
    import gzip

    from npusim.errors import PlanError
    from npusim.plan import io as plan_io

    monkeypatch.setattr(plan_io, "MAX_PLAN_BYTES", 1 << 20)
    path = tmp_path / "plan.json"
    path.write_bytes(gzip.compress(b" " * (8 << 20), mtime=0))
    with pytest.raises(PlanError, match="once decompressed"):
        plan_io.load_plan(path, None)


@pytest.mark.parametrize("argv, words", [
    (["--option", "time_limit=2024-01-01"], "reads as a date"),
    (["--option", "time_limit=2001-02-03T04:05:06Z"], "reads as a datetime"),
    (["--set", "clock=2024-01-01"], "expected a frequency"),
])
def test_yaml_dates_on_the_command_line_are_one_line_errors(capsys, argv, words):
    code, out, err = run_cli(capsys, "simulate", "resnet18", "--hw", "edge-npu", *argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_a_yaml_date_in_a_sweep_is_a_one_line_error(capsys, tmp_path):
    code, out, err = run_cli(capsys, "dse", "resnet18", "--hw", "edge-npu", "--sweep", "scratchpad.size=2024-01-01",
                             "-o", str(tmp_path / "x.csv"))
    assert code == 2 and "expected a size" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, words", [
    (["llm:gpt2-small", "--prefill", "1000000", "--decode", "1"], "--prefill = 1000000, expected a positive integer of at most 131,072"),
    (["llm:gpt2-small", "--prefill", "8", "--decode", "2", "--samples", "100000"], "at most 1,000"),
    (["llm:gpt2-small:prefill=100000000"], "tokens = 100,000,000, expected at most 131,072"),
    (["llm:gpt2-small:decode=8:batch=100000"], "batch = 100,000, expected at most 1,024"),
])
def test_llm_arguments_have_a_largest_value(capsys, argv, words):
    code, out, err = run_cli(capsys, "simulate", *argv, "--hw", "edge-npu")
    assert code == 2 and words in err, err


@pytest.mark.parametrize("spec", ["llm:gpt2-small:decode=²", "llm:gpt2-small:prefill=٣", "llm:gpt2-small:decode=+3",
                                  "llm:gpt2-small:decode=4:batch= 2"])
def test_llm_token_counts_are_ascii_digits(capsys, spec):
    """Found by the LLM-argument fuzz: '²' is a digit to ``str.isdigit`` but not to ``int`` (exit 3)."""
    code, out, err = run_cli(capsys, "simulate", spec, "--hw", "edge-npu")
    assert code == 2 and "with a positive integer" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("argv", [["llm:gpt2-small:G\nx"], ["llm:gp\nt2:decode=1"],
                                  ["llm:gp\u2028t2", "--prefill", "1", "--decode", "1"]])
def test_an_llm_name_with_a_line_break_is_one_line(capsys, argv):
    """Found by the LLM-argument fuzz: the name was echoed as typed, its line break splitting the error."""
    code, out, err = run_cli(capsys, "simulate", *argv, "--hw", "edge-npu")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "'llm:" in err, err


def test_dse_workers_are_bounded_by_the_points_and_the_memory(monkeypatch, tmp_path):
    from npusim import dse

    with pytest.raises(dse.DseError, match="expected 1 to 1024"):
        dse.check_jobs(100_000)
    started = []
    def fake_dask(todo, jobs, scheduler, evaluate, done, **options):
        started.append(jobs)
        for point in todo:
            done(point, evaluate(point))

    monkeypatch.setattr(dse, "run_dask", fake_dask)
    points = dse.make_points(["resnet18"], "edge-npu", [dse.parse_sweep("budget=MR")], ["default+arena+belady"])
    dse.run_sweep(points, jobs=1000, backend="dask", cache_dir=None)
    assert started == [1]  # one point: one worker, whatever --jobs says
    monkeypatch.setenv("NPUSIM_MEMORY_LIMIT", "1GiB")
    with pytest.raises(dse.DseError, match="6 workers need about 1.50 GiB"):
        dse.check_jobs(16, 6)


def test_an_onnx_file_larger_than_memory_allows_is_refused_before_it_is_read(capsys, tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    path = tmp_path / "big.onnx"
    path.write_bytes(b"\0" * 65536)
    monkeypatch.setenv("NPUSIM_MEMORY_LIMIT", "64KiB")
    code, out, err = run_cli(capsys, "import", str(path), "-o", str(tmp_path / "t.json"))
    assert code == 2 and "65,536 bytes of ONNX take about" in err and len(err.strip().splitlines()) == 1
