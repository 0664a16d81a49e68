"""The fuzz oracle through the command line: every fuzzed input to the four loaders (hardware
YAML, trace JSON, plan JSON, ONNX), given to ``npusim`` as a user would, ends in exit 0 with
a report free of inf/nan, or exit 2 with one line on stderr (or 1: a documented non-error
outcome). Never a traceback, never exit 3 (an internal error), never a hang.

The inputs come from the loader fuzz tests' strategies (tests/test_fuzz_*.py); this file runs
them through ``npusim.cli.main`` — argument parsing, error handling and output included. A fast
seeded subset runs in CI; ``pytest --slow`` runs 2,500 per loader here, on top of the >= 10,000
per loader the API-level fuzz tests run under ``--slow``.
"""

from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim.cli import main
from npusim.graph.trace_io import graph_to_dict
from npusim.plan.io import plan_to_dict

from fuzz_support import cases, no_hang
import test_fuzz_hw as hw_fuzz
import test_fuzz_onnx as onnx_fuzz
import test_fuzz_plan as plan_fuzz
import test_fuzz_trace as trace_fuzz

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
                derandomize=True)


def npusim(capsys, *argv) -> tuple[int, str, str]:
    with no_hang():
        code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def check_outcome(code: int, out: str, err: str, report=None) -> None:
    """The oracle (module docstring)."""
    assert code in (0, 1, 2), f"exit {code}: {err.strip()[:300]}"
    assert "Traceback" not in out + err, err[-600:]
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning")]
        assert len(lines) == 1 or (len(lines) > 1 and "violation" in lines[0]), err[:600]
    if code == 0 and report is not None and report.exists():
        text = report.read_text()
        assert "Infinity" not in text and "NaN" not in text, "a report with inf or nan"
        data = json.loads(text)
        assert math.isfinite(data["cycles"]) and data["cycles"] >= 0


@pytest.fixture()
def files(tmp_path):
    trace = tmp_path / "tiny.json"
    trace.write_text(json.dumps(graph_to_dict(plan_fuzz._conv_graph())))
    return tmp_path, trace


#: Values a config may well hold, so that many fuzzed configs load and simulate.
PLAUSIBLE = st.sampled_from(["1", "2", "3", "16", "64KiB", "2MiB", "true", "false", "os", "ws", "is", "nhwc",
                             "nchw", "array", "vector", "groups", "1GHz", "12.8GB/s", "100ns", "64B", 4, 0.5])


@settings(max_examples=cases(25, 2_500), **SETTINGS)
@given(knob=st.sampled_from(hw_fuzz.KNOBS), value=st.one_of(PLAUSIBLE, hw_fuzz.junk), delete=st.booleans())
def test_hardware_yaml_through_the_cli(capsys, files, knob, value, delete):
    folder, trace = files
    data = hw_fuzz._with(hw_fuzz.BASE, knob, None if delete else value)
    config = folder / "fuzz.yaml"
    config.write_text(yaml.safe_dump(data))
    report = folder / "report.json"
    check_outcome(*npusim(capsys, "simulate", trace, "--hw", config, "--report", report), report=report)


@settings(max_examples=cases(25, 2_500), **SETTINGS)
@given(case=trace_fuzz.field_mutations())
def test_trace_json_through_the_cli(capsys, files, case):
    folder, _ = files
    data, _, _ = case
    trace = folder / "fuzz.json"
    trace.write_text(json.dumps(data, allow_nan=True))
    report = folder / "report.json"
    check_outcome(*npusim(capsys, "simulate", trace, "--hw", "edge-npu", "--budget", "1MiB", "--report", report),
                  report=report)


@settings(max_examples=cases(25, 2_500), **SETTINGS)
@given(case=plan_fuzz.field_mutations())
def test_plan_json_through_the_cli(capsys, files, case):
    folder, _ = files
    graph, data, _ = case
    trace = folder / "graph.json"
    trace.write_text(json.dumps(graph_to_dict(graph)))
    plan = folder / "plan.json"
    plan.write_text(json.dumps(data, allow_nan=True))
    report = folder / "report.json"
    # the plans were made for the default Hardware(): simulate on a config with its numbers
    code, out, err = npusim(capsys, "simulate", trace, "--plan", plan, "--hw", "edge-npu", "--allow-oversize",
                            "--report", report)
    check_outcome(code, out, err, report=report)


@settings(max_examples=cases(25, 2_500), **SETTINGS)
@given(flips=st.lists(st.tuples(st.integers(0, len(onnx_fuzz.VALID) - 1), st.integers(0, 255)),
                      min_size=1, max_size=6))
def test_onnx_through_the_cli(capsys, files, flips):
    folder, _ = files
    raw = bytearray(onnx_fuzz.VALID)
    for at, byte in flips:
        raw[at] = byte
    model = folder / "fuzz.onnx"
    model.write_bytes(bytes(raw))
    check_outcome(*npusim(capsys, "import", model, "-o", folder / "imported.json"))


def test_the_oracle_can_fail(capsys, files):
    """A crash inside the command is exit 3 and fails the oracle."""
    folder, trace = files
    with pytest.raises(AssertionError, match="exit 3"):
        check_outcome(3, "", "npusim: internal error: boom\n")
    with pytest.raises(AssertionError):
        check_outcome(2, "", "first line\nsecond line\n")
