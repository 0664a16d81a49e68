"""The fuzz oracle through the command line: every fuzzed input to the five loaders (hardware
YAML, trace JSON, plan JSON, ONNX, LLM arguments), given to ``npusim`` as a user would, ends in exit 0 with
a report free of inf/nan, or exit 2 with one line on stderr (or 1: a documented non-error
outcome). Never a traceback, never exit 3 (an internal error), never a hang, and each input
within the limits of issue 21: at most ``WALL_SECONDS`` of wall time and at most
``MEMORY_BYTES`` (2 GiB) of memory -- the growth of the process's peak resident set over the
input, with the address space capped at the same margin so that a runaway input fails here
instead of exhausting the machine.

The inputs come from the loader fuzz tests' strategies (tests/test_fuzz_*.py); this file runs
them through ``npusim.cli.main`` -- argument parsing, error handling and output included -- in
this process (one input costs milliseconds, not a Python start-up). A fast seeded subset runs in
CI; ``pytest tests/test_fuzz_cli.py --slow`` runs ``SLOW_INPUTS`` (10,000) per loader, checks
that each loader really saw that many, and prints a line per loader: inputs, exit codes,
failures by kind, the slowest input and the largest memory growth. A failing input does not
stop the run: every failure is counted by kind (wall limit, memory limit, traceback, exit 3,
other oracle) and the test fails at the end, naming the first ten inputs.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import signal
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim.cli import main
from npusim.graph.trace_io import graph_to_dict

from fuzz_support import SLOW, cases
import test_fuzz_hw as hw_fuzz
import test_fuzz_onnx as onnx_fuzz
import test_fuzz_plan as plan_fuzz
import test_fuzz_trace as trace_fuzz

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                      HealthCheck.data_too_large, HealthCheck.filter_too_much],
                derandomize=True, database=None)
#: inputs per loader: in CI, and with ``--slow`` (``NPUSIM_FUZZ_CLI_INPUTS`` overrides the latter, to
#: size a run to the time at hand; the printed summary then states the number that ran)
CI_INPUTS, SLOW_INPUTS = 40, int(os.environ.get("NPUSIM_FUZZ_CLI_INPUTS") or 10_000)
#: Per-input limits (issue 21): no input may run longer or take more memory than this.
WALL_SECONDS = 60  # generous for a loaded 2-core machine; the inputs take milliseconds
MEMORY_BYTES = 2 << 30


class WallLimit(BaseException):
    """Raised by the per-input alarm: a BaseException, so that ``cli.main``'s ``except
    Exception`` (exit 3) cannot swallow it and the failure is named for what it is."""


def _status_bytes(field: str) -> int | None:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM, VmSize) in bytes; None off Linux."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(found.group(1)) * 1024 if found else None


def _reset_peak() -> bool:
    """Reset VmHWM (the peak resident set) to the current resident set (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class Limits:
    """Per-input wall and memory limits, and the figures of a loader's run."""

    def __init__(self, loader: str, wall_seconds: int = WALL_SECONDS, wanted: int | None = None) -> None:
        self.loader, self.wall_seconds = loader, wall_seconds
        self.wanted = cases(CI_INPUTS, SLOW_INPUTS) if wanted is None else wanted  # inputs the run must see
        self.inputs = 0
        self.codes: Counter = Counter()
        self.slowest = (0.0, "")
        self.largest = (0, "")
        self.failures: list[tuple[str, str]] = []

    @contextmanager
    def one(self, what):
        """Run one input (``what()`` describes it for a failure message) under the limits."""
        rss, size = _status_bytes("VmRSS"), _status_bytes("VmSize")
        peak_known = rss is not None and _reset_peak()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if size is not None:
            cap = size + MEMORY_BYTES
            resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))

        def alarm(signum, frame):
            raise WallLimit()

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.alarm(self.wall_seconds)
        start = time.perf_counter()
        try:
            yield
        except WallLimit:
            raise AssertionError(f"wall limit: a {self.loader} input ran longer than {self.wall_seconds} s: {what()}") from None
        except MemoryError:
            raise AssertionError(f"memory limit: a {self.loader} input needed more than {MEMORY_BYTES >> 30} GiB "
                                 f"of address space: {what()}") from None
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        seconds = time.perf_counter() - start
        self.inputs += 1
        if seconds > self.slowest[0]:
            self.slowest = (seconds, what())
        assert seconds <= self.wall_seconds, f"wall limit: a {self.loader} input took {seconds:.1f} s: {what()}"
        if peak_known:
            grew = max((_status_bytes("VmHWM") or 0) - rss, 0)
            if grew > self.largest[0]:
                self.largest = (grew, what())
            assert grew <= MEMORY_BYTES, (f"memory limit: a {self.loader} input grew the resident set by "
                                          f"{grew / 2**30:.2f} GiB: {what()}")

    def summary(self) -> str:
        codes = ", ".join(f"exit {c}: {n:,}" for c, n in sorted(self.codes.items()))
        kinds = ", ".join(f"{kind}: {n:,}" for kind, n in sorted(Counter(k for k, _ in self.failures).items()))
        return (f"fuzz-cli {self.loader}: {self.inputs:,} inputs ({codes}); failures: {kinds or 'none'}; "
                f"slowest {self.slowest[0]:.2f} s [{self.slowest[1][:120]}]; largest peak-RSS growth "
                f"{self.largest[0] / 2**20:.1f} MiB [{self.largest[1][:120]}]")

    def check(self, capsys, what, argv, report=None) -> None:
        """One input through the CLI and the oracle. A failure is recorded and the run goes
        on, so that a run counts every failing input by kind; ``finish`` then fails the test."""
        try:
            check_outcome(*npusim(capsys, self, what, *argv), report=report, what=what)
        except AssertionError as failure:
            message = str(failure)
            kind = next((k for k in ("wall limit", "memory limit", "Traceback", "exit 3") if k in message), "oracle")
            self.failures.append((kind, message.splitlines()[0][:1000]))

    def finish(self, capsys) -> None:
        if SLOW:
            with capsys.disabled():
                print("\n" + self.summary())
        assert not self.failures, (f"{len(self.failures)} of {self.inputs} {self.loader} inputs failed -- "
                                   + self.summary() + "\n" + "\n".join(m for _, m in self.failures[:10]))
        assert self.inputs >= self.wanted, f"{self.loader}: only {self.inputs} inputs ran, expected >= {self.wanted}"


def npusim(capsys, limits: Limits, what, *argv) -> tuple[int, str, str]:
    """``npusim *argv`` in this process, under ``limits``; a MemoryError inside the command
    (exit 3, since ``cli.main`` catches it) is a memory violation."""
    with limits.one(what):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as stop:  # argparse refuses an option's value (one line, exit 2) this way
            code = stop.code
    out, err = capsys.readouterr()
    limits.codes[code] += 1
    if code == 3 and "MemoryError" in err:
        raise AssertionError(f"memory limit: a {limits.loader} input needed more than {MEMORY_BYTES >> 30} GiB "
                             f"of address space: {what()}")
    return code, out, err


def check_outcome(code: int, out: str, err: str, report=None, what=lambda: "") -> None:
    """The oracle (module docstring)."""
    assert code in (0, 1, 2), f"exit {code}: {err.strip()[:300]} -- input: {what()}"
    assert "Traceback" not in out + err, f"{err[-600:]} -- input: {what()}"
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning")]
        assert len(lines) == 1 or (len(lines) > 1 and "violation" in lines[0]), f"{err[:600]} -- input: {what()}"
    if code == 0 and report is not None and report.exists():
        text = report.read_text()
        assert "Infinity" not in text and "NaN" not in text, f"a report with inf or nan -- input: {what()}"
        data = json.loads(text)
        time = data["cycles"] if "cycles" in data else data["ttft_seconds"]  # one run, or an LLM run's
        assert math.isfinite(time) and time >= 0, what()


def _short(data, limit: int = 400) -> str:
    text = json.dumps(data, allow_nan=True, default=repr)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text):,} characters)"


@pytest.fixture()
def files(tmp_path):
    trace = tmp_path / "tiny.json"
    trace.write_text(json.dumps(graph_to_dict(plan_fuzz._conv_graph())))
    return tmp_path, trace


def _fresh(*paths: Path) -> None:
    """Outputs of the previous input are removed, so a report is always this input's."""
    for path in paths:
        path.unlink(missing_ok=True)


#: Values a config may well hold, so that many fuzzed configs load and simulate.
PLAUSIBLE = st.sampled_from(["1", "2", "3", "16", "64KiB", "2MiB", "true", "false", "os", "ws", "is", "nhwc",
                             "nchw", "array", "vector", "groups", "1GHz", "12.8GB/s", "100ns", "64B", 4, 0.5])
INPUTS = cases(CI_INPUTS, SLOW_INPUTS)


def test_hardware_yaml_through_the_cli(capsys, files):
    folder, trace = files
    limits = Limits("hardware YAML")
    config, report = folder / "fuzz.yaml", folder / "report.json"

    @settings(max_examples=INPUTS, **SETTINGS)
    @given(knob=st.sampled_from(hw_fuzz.KNOBS), value=st.one_of(PLAUSIBLE, hw_fuzz.junk), delete=st.booleans())
    def one(knob, value, delete):
        data = hw_fuzz._with(hw_fuzz.BASE, knob, None if delete else value)
        config.write_text(yaml.safe_dump(data))
        _fresh(report)
        what = lambda: f"{knob} = {None if delete else value!r}"  # noqa: E731
        limits.check(capsys, what, ["simulate", trace, "--hw", config, "--report", report], report)

    one()
    limits.finish(capsys)


def test_trace_json_through_the_cli(capsys, files):
    folder, _ = files
    limits = Limits("trace JSON")
    trace, report = folder / "fuzz.json", folder / "report.json"

    @settings(max_examples=INPUTS, **SETTINGS)
    @given(case=trace_fuzz.field_mutations())
    def one(case):
        data, _, _ = case
        trace.write_text(json.dumps(data, allow_nan=True))
        _fresh(report)
        what = lambda: _short(data)  # noqa: E731
        limits.check(capsys, what, ["simulate", trace, "--hw", "edge-npu", "--budget", "1MiB", "--report", report],
                     report)

    one()
    limits.finish(capsys)


def test_plan_json_through_the_cli(capsys, files):
    folder, _ = files
    limits = Limits("plan JSON")
    trace, plan, report = folder / "graph.json", folder / "plan.json", folder / "report.json"

    @settings(max_examples=INPUTS, **SETTINGS)
    @given(case=plan_fuzz.field_mutations())
    def one(case):
        graph, data, _ = case
        trace.write_text(json.dumps(graph_to_dict(graph)))
        plan.write_text(json.dumps(data, allow_nan=True))
        _fresh(report)
        what = lambda: f"graph {graph.name!r}, plan {_short(data)}"  # noqa: E731
        # the plans were made for the default Hardware(): simulate on a config with its numbers
        limits.check(capsys, what, ["simulate", trace, "--plan", plan, "--hw", "edge-npu", "--allow-oversize",
                                    "--report", report], report)

    one()
    limits.finish(capsys)


def test_onnx_through_the_cli(capsys, files):
    folder, _ = files
    limits = Limits("ONNX")
    model, imported = folder / "fuzz.onnx", folder / "imported.json"

    @settings(max_examples=INPUTS, **SETTINGS)
    @given(flips=st.lists(st.tuples(st.integers(0, len(onnx_fuzz.VALID) - 1), st.integers(0, 255)),
                          min_size=1, max_size=6))
    def one(flips):
        raw = bytearray(onnx_fuzz.VALID)
        for at, byte in flips:
            raw[at] = byte
        model.write_bytes(bytes(raw))
        _fresh(imported)
        what = lambda: f"the test model with bytes (offset, value) {flips} replaced"  # noqa: E731
        limits.check(capsys, what, ["import", model, "-o", imported])

    one()
    limits.finish(capsys)


#: LLM runs: a valid one simulates a decoder step or a prefill and some decode steps (~1 s each), so
#: the slow run takes fewer than the loaders' 10,000 (``NPUSIM_FUZZ_LLM_INPUTS`` overrides).
LLM_INPUTS = cases(CI_INPUTS, int(os.environ.get("NPUSIM_FUZZ_LLM_INPUTS") or 1_000))
#: A valid value of each LLM argument, and what a mutation puts in its place: values at and past
#: every bound, of the wrong type, digits ``int`` refuses (``²``), empty and random text.
LLM_VALID = {"model": ["gpt2-small"], "prefill": ["1", "4", "16"],
             "decode": ["1", "2", "8"], "batch": ["1", "2"], "samples": ["1", "2"], "kv-on-chip": ["none", "auto", "1"]}
LLM_JUNK = st.one_of(
    st.sampled_from(["0", "-1", "-0", "131072", "131073", "100000000", "1024", "1025", "1000", "1001", "1e3", "1.5",
                     "²", "١٢", "٣", "0x10", "+3", " 4", "4 ", "", "nan", "inf", "9" * 30, "四", "all", "none",
                     "GPT2-small", "gpt2", "llama-2-7b", "decode", "=", ":"]),
    st.integers(-5, 5000).map(str), st.text(max_size=6))


@st.composite
def llm_arguments(draw) -> list[str]:
    """``simulate`` arguments of an LLM run, a valid one with 0-3 mutations (about a third run as
    they are; valid runs are of gpt2-small, the smallest preset, unless a mutation names another): one step named by the trace (``llm:<preset>:decode=<L>[:batch=<B>]``), or a prompt
    and generated tokens (``llm:<preset> --prefill P --decode D [--batch B] [--samples S]
    [--kv-on-chip K]``). A mutation replaces a value by junk, drops or repeats a part, renames a
    key or changes a separator."""
    pick = lambda key: draw(st.sampled_from(LLM_VALID[key]))  # noqa: E731
    one_step = draw(st.booleans())
    if one_step:
        parts = [["decode" if draw(st.booleans()) else "prefill", "=", pick("decode")]]
        if draw(st.booleans()):
            parts.append(["batch", "=", pick("batch")])
    else:
        parts = [["--prefill", "", pick("prefill")], ["--decode", "", pick("decode")]]
        parts += [[f"--{k}", "", pick(k)] for k in ("batch", "samples", "kv-on-chip") if draw(st.integers(0, 3)) == 0]
    model = pick("model")
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        what = draw(st.sampled_from(["value", "value", "value", "key", "drop", "repeat", "separator", "model"]))
        i = draw(st.integers(0, max(len(parts) - 1, 0)))
        if what == "model":
            model = draw(LLM_JUNK)
        elif not parts:
            continue
        elif what == "value":
            parts[i][2] = draw(LLM_JUNK)
        elif what == "key":
            parts[i][0] = draw(st.one_of(st.sampled_from(["prefill", "decode", "batch", "PREFILL", "--batch", "--samples"]),
                                         st.text(max_size=6)))
        elif what == "drop":
            parts.pop(i)
        elif what == "repeat":
            parts.append(list(parts[i]))
        else:
            parts[i][1] = draw(st.sampled_from(["", "==", ":"]))
    if one_step:
        return [f"llm:{model}" + "".join(f":{k}{sep}{v}" for k, sep, v in parts)]
    argv = [f"llm:{model}"]
    for flag, _, value in parts:
        argv += [f"{flag}={value}"] if value.startswith("-") or not value else [flag, value]
    return argv


def test_llm_arguments_through_the_cli(capsys, files):
    """The LLM argument loaders (the ``llm:`` trace names of ``npusim.graph.decoder`` and the
    ``--prefill``/``--decode``/``--batch``/``--samples``/``--kv-on-chip`` options) under the same
    oracle and limits as the files: a valid run simulates within them, everything else is one
    line and exit 2 (found this way: ``decode=²``, whose digit ``int`` refuses, was exit 3)."""
    folder, _ = files
    limits = Limits("LLM arguments", wanted=LLM_INPUTS)
    report = folder / "report.json"

    @settings(max_examples=LLM_INPUTS, **SETTINGS)
    @given(argv=llm_arguments())
    def one(argv):
        _fresh(report)
        limits.check(capsys, lambda: " ".join(map(repr, argv)),
                     ["simulate", *argv, "--hw", "edge-npu", "--report", report], report)

    one()
    limits.finish(capsys)


def test_the_oracle_can_fail():
    """A crash inside the command is exit 3 and fails the oracle."""
    with pytest.raises(AssertionError, match="exit 3"):
        check_outcome(3, "", "npusim: internal error: boom\n")
    with pytest.raises(AssertionError):
        check_outcome(2, "", "first line\nsecond line\n")


def test_the_limits_can_fail():
    """An input over the wall limit, or one that allocates past the memory limit, fails by
    name -- neither is swallowed as an exit 3 by ``cli.main`` -- and the limits are lifted after."""
    before = resource.getrlimit(resource.RLIMIT_AS)
    limits = Limits("test", wall_seconds=1)
    with pytest.raises(AssertionError, match=r"wall limit: a test input ran longer than 1 s: the sleeper"):
        with limits.one(lambda: "the sleeper"):
            time.sleep(5)
    if _status_bytes("VmSize") is not None:
        with pytest.raises(AssertionError, match=r"memory limit: a test input needed more than 2 GiB .*: the hog"):
            with limits.one(lambda: "the hog"):
                bytearray(MEMORY_BYTES + (256 << 20))
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    with limits.one(lambda: "a quick one"):
        pass
    assert limits.inputs == 1 and "1 inputs" in limits.summary()


def test_failures_are_counted_by_kind_and_fail_the_run(capsys, monkeypatch):
    def crashing(argv):
        print("npusim: internal error: ZeroDivisionError: boom", file=sys.stderr)
        return 3

    monkeypatch.setattr(sys.modules[__name__], "main", crashing)
    limits = Limits("test")
    limits.check(capsys, lambda: "the crasher", ["list"])
    assert [kind for kind, _ in limits.failures] == ["exit 3"] and limits.codes == {3: 1}
    with pytest.raises(AssertionError, match="1 of 1 test inputs failed.*exit 3: 1"):
        limits.finish(capsys)
