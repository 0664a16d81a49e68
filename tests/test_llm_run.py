"""A prefill and decode steps against a growing KV cache (the LLM issue, item 3): time to first
token, per-token latency, tokens per second, energy and KV-cache bytes per token."""

from __future__ import annotations

import pytest

from npusim.cli import main
from npusim.graph.decoder import DecoderSpec
from npusim.llm_run import interpolate, run_llm, sample_lengths
from npusim.workflow import load_hw

TINY = DecoderSpec("tiny", layers=2, hidden=128, heads=4, kv_heads=2, ffn=256, vocab=1000)


def test_sampled_kv_lengths_include_both_ends():
    assert sample_lengths(100, 3, 5) == [100, 101, 102]  # few steps: every one
    assert sample_lengths(100, 101, 5) == [100, 125, 150, 175, 200]
    assert interpolate([(0, 0.0), (10, 5.0), (20, 25.0)], 15) == 15.0
    assert interpolate([(0, 0.0), (10, 5.0)], 10) == 5.0


def test_every_step_simulated_when_few(tmp_path):
    hw = load_hw("edge-npu")
    report = run_llm(TINY, hw, prefill=16, decode=4, samples=5)
    assert [s.kv_length for s in report.sampled] == [16, 17, 18, 19]
    assert list(report.step_seconds) == [s.seconds for s in report.sampled]
    assert report.tokens_per_second == pytest.approx(4 / sum(s.seconds for s in report.sampled))
    assert report.ttft_seconds == report.prefill.seconds > 0
    # the cache of L entries is loaded and the new entry stored, at least: K and V, fp16
    per_entry = 2 * TINY.layers * TINY.kv_heads * TINY.head_dim * 2
    for step in report.sampled:
        assert step.kv_bytes >= (step.kv_length + 1) * per_entry
    assert "every step simulated" in report.summary().splitlines()[0]


def test_interpolated_steps_are_close_to_simulated_ones():
    """A step's work is the weights (constant) plus attention over L entries (linear in L):
    interpolating between two simulated steps lands within 1 % of simulating each."""
    hw = load_hw("edge-npu")
    every = run_llm(TINY, hw, prefill=32, decode=5, samples=5)
    ends = run_llm(TINY, hw, prefill=32, decode=5, samples=2)
    assert [s.kv_length for s in ends.sampled] == [32, 36]
    for simulated, interpolated in zip(every.step_seconds, ends.step_seconds):
        assert interpolated == pytest.approx(simulated, rel=0.01)
    assert "2 of 5 steps simulated" in ends.summary()


def test_the_command_line_run(capsys, tmp_path):
    out = tmp_path / "llm.json"
    code = main(["simulate", "llm:gpt2-small", "--prefill", "8", "--decode", "2", "--samples", "2",
                 "--hw", "edge-npu", "--report", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "time to first token" in text and "tokens/s" in text and out.exists()
    for argv, message in ((["--prefill", "8"], "go together"),
                          (["--prefill", "8", "--decode", "2", "--jitter", "1"], "not available"),
                          (["--prefill", "8", "--decode", "-2"], "positive integer")):
        assert main(["simulate", "llm:gpt2-small", "--hw", "edge-npu", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
