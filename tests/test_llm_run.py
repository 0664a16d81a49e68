"""A prefill and decode steps against a growing KV cache (the LLM issue, item 3): time to first
token, per-token latency, tokens per second, energy and KV-cache bytes per token."""

from __future__ import annotations

import pytest

from npusim.cli import main
from npusim.errors import NpusimError
from npusim.graph.decoder import DecoderSpec, cache_bytes_per_layer, decode_graph, prefill_graph, preset
from npusim.hw.costs import op_cycles, scratchpad_bytes
from npusim.llm_run import interpolate, kv_bytes_moved, kv_layers_on_chip, run_llm, sample_lengths
from npusim.plan.validate import validate
from npusim.workflow import load_hw, plan_graph, simulate_plan

TINY = DecoderSpec("tiny", layers=2, hidden=128, heads=4, kv_heads=2, ffn=256, vocab=1000)


def test_sampled_kv_lengths_include_both_ends():
    assert sample_lengths(100, 3, 5) == [100, 101, 102]  # few steps: every one
    assert sample_lengths(100, 101, 5) == [100, 125, 150, 175, 200]
    assert interpolate([(0, 0.0), (10, 5.0), (20, 25.0)], 15) == 15.0
    assert interpolate([(0, 0.0), (10, 5.0)], 10) == 5.0


def test_every_step_simulated_when_few(tmp_path):
    hw = load_hw("edge-npu")
    report = run_llm(TINY, hw, prefill=16, decode=4, samples=5, kv_on_chip="none")
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
    every = run_llm(TINY, hw, prefill=32, decode=5, samples=5, kv_on_chip="none")
    ends = run_llm(TINY, hw, prefill=32, decode=5, samples=2, kv_on_chip="none")
    assert [s.kv_length for s in ends.sampled] == [32, 36]
    for simulated, interpolated in zip(every.step_seconds, ends.step_seconds):
        assert interpolated == pytest.approx(simulated, rel=0.01)
    assert "2 of 5 steps simulated" in ends.summary()


def test_the_command_line_run(capsys, tmp_path):
    out = tmp_path / "llm.json"
    code = main(["simulate", "llm:gpt2-small", "--prefill", "8", "--decode", "2", "--samples", "2",
                 "--hw", "datacenter-npu", "--report", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "time to first token" in text and "tokens/s" in text and out.exists()
    assert main(["simulate", "llm:gpt2-small", "--prefill", "8", "--decode", "2", "--samples", "2",
                 "--hw", "datacenter-npu", "--kv-on-chip", "3"]) == 0
    assert "KV cache on chip     3 of 12 layers (as given)" in capsys.readouterr().out
    assert main(["simulate", "squeezenet1_0", "--hw", "edge-npu", "--kv-on-chip", "3"]) == 2
    assert "for an LLM run" in capsys.readouterr().err
    # options a one-step run does not read are refused, never dropped: ``--batch 4`` would print batch 1's numbers
    for argv, message in ((["llm:gpt2-small:decode=8", "--batch", "4"], "batch goes in the trace"),
                          (["squeezenet1_0", "--samples", "3"], "--samples: for an LLM run"),
                          (["squeezenet1_0", "--jitter-amount", "0.2"], "for a --jitter SEED run")):
        assert main(["simulate", *argv, "--hw", "edge-npu"]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
    for argv, message in ((["--prefill", "8"], "go together"),
                          (["--prefill", "8", "--decode", "2", "--jitter", "0"], "not available"),
                          (["--prefill", "8", "--decode", "4", "--samples", "1"], "at least 2"),
                          (["--prefill", "8", "--decode", "2", "--samples", "1"], "at least 2"),
                          (["--prefill", "8", "--decode", "-2"], "positive integer"),
                          (["--prefill", "8", "--decode", "2", "--kv-on-chip", "lots"], "kv-on-chip"),
                          (["--prefill", "8", "--decode", "2", "--kv-on-chip", "13"], "0 .. 12 layers")):
        assert main(["simulate", "llm:gpt2-small", "--hw", "edge-npu", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1


# -- the KV cache kept on chip across steps ---------------------------------------------------------

def test_on_chip_caches_are_live_for_the_whole_step_and_never_stored():
    spec = preset("gpt2-small")
    graph = decode_graph(spec, 64, on_chip=3)
    first, last = graph.ops[0], graph.ops[-1]
    assert first.kind == "KVCacheResident" and last.kind == "KVCacheKeep"
    kept = {graph.tensors[t].name for t in last.inputs}
    assert {"layer0.key_cache", "layer2.value_cache", "layer2.key_new"} <= kept
    assert "layer3.key_cache" not in kept and graph.tensor_by_name["layer3.key_cache"].kind == "input"
    assert graph.tensor_by_name["layer0.key_cache"].kind == "activation"
    assert graph.tensor_by_name["layer0.key_new"].kind == "activation"  # appended on chip
    assert graph.tensor_by_name["layer3.key_new"].kind == "output"  # stored to the DRAM cache
    hw = load_hw("edge-npu")
    for marker in (first, last):  # the markers touch no data and take no compute
        assert scratchpad_bytes(marker, graph, hw) == (0, 0)
        assert op_cycles(marker, graph, hw)[0] == 1.0


def test_keeping_caches_on_chip_moves_fewer_bytes_and_is_planned_like_any_tensor():
    spec, hw = preset("gpt2-small"), load_hw("mid-npu", {"scratchpad.size": "32MiB"})
    reports = {}
    for n in (0, spec.layers):
        graph = decode_graph(spec, 256, on_chip=n)
        plan = plan_graph(graph, hw)
        assert validate(plan, graph) == []
        reports[n] = (simulate_plan(plan, hw, graph), kv_bytes_moved(plan, graph))
    (dram, moved_dram), (chip, moved_chip) = reports[0], reports[spec.layers]
    per_layer = cache_bytes_per_layer(spec, 256)
    assert moved_dram >= spec.layers * per_layer and moved_chip == 0
    assert dram.offchip_total_bytes - chip.offchip_total_bytes >= spec.layers * per_layer
    assert chip.cycles < dram.cycles  # a memory-bound step on mid-npu's LPDDR5


def test_a_cache_that_does_not_fit_is_spilled_not_dropped():
    """Declared on chip but over the budget: the planners spill it (store and retrieve), so the
    bytes are paid, not lost."""
    spec, hw = preset("gpt2-small"), load_hw("edge-npu", {"scratchpad.size": "4MiB"})
    graph = decode_graph(spec, 512, on_chip=2)  # 2 x 1.5 MiB of cache in 4 MiB beside the weights
    plan = plan_graph(graph, hw)
    assert validate(plan, graph) == []
    report = simulate_plan(plan, hw, graph)
    assert report.cycles > 0 and kv_bytes_moved(plan, graph) >= 0


def test_auto_picks_the_fastest_count_and_says_so():
    hw = load_hw("mid-npu", {"scratchpad.size": "32MiB"})
    report = run_llm("gpt2-small", hw, prefill=64, decode=3, samples=2)
    assert report.kv_on_chip == 12 and report.kv_choice.startswith("auto: the fastest")
    assert "KV cache on chip     12 of 12 layers" in report.summary()
    none = run_llm("gpt2-small", hw, prefill=64, decode=3, samples=2, kv_on_chip="none")
    assert none.kv_on_chip == 0 and report.kv_bytes_per_token < none.kv_bytes_per_token
    given = run_llm("gpt2-small", hw, prefill=64, decode=3, samples=2, kv_on_chip=5)
    assert given.kv_on_chip == 5 and given.kv_choice == "as given"


def test_auto_tries_only_counts_whose_caches_fit():
    """auto tries 0 and up to N_max in thirds, N_max the layers whose caches at the last KV
    length fill at most 3/4 of the budget: on edge-npu (1 MiB) one gpt2-small layer's cache at
    L = 513 is 1.5 MiB, so only 0 is tried; with 32 MiB, 0, 4, 8 and 12 (all 12 fit)."""
    spec, tried = preset("gpt2-small"), []

    def try_step(n):
        tried.append(n)
        return type("Step", (), {"cycles": 100.0 - n})()  # more layers on chip, faster

    assert kv_layers_on_chip("auto", spec, load_hw("edge-npu"), 512, 1, None, try_step)[0] == 0
    assert tried == [0]
    tried.clear()
    big = load_hw("mid-npu", {"scratchpad.size": "32MiB"})
    n, choice = kv_layers_on_chip("auto", spec, big, 512, 1, None, try_step)
    assert tried == [0, 4, 8, 12] and n == 12 and "12: 0.000 M" in choice


def test_kv_layers_that_do_not_fit_say_how_many_do():
    """Asked for 12 layers of a 1.5 MiB cache each on a 1 MiB scratchpad, the planner's
    "budget below M_R of op 'kv_cache.keep' ... use a budget >= 18 MiB" named an internal op and
    a budget the hardware refuses: the error now counts the layers that fit. On 16 MiB, 10 of
    them (15.1 MiB at L = 516) fit, 11 do not, and a count that fits is taken as given."""
    spec = preset("gpt2-small")
    with pytest.raises(NpusimError, match=r"--kv-on-chip 12: 12 layers of KV cache at length 516 need 18\.14 MiB "
                                          r"\(1\.51 MiB a layer\), more than the budget of 1\.00 MiB: at most 0 fit"):
        kv_layers_on_chip(12, spec, load_hw("edge-npu"), 515, 1, None, None)
    big = load_hw("mid-npu", {"scratchpad.size": "16MiB"})
    with pytest.raises(NpusimError, match="at most 10 fit; use --kv-on-chip 10"):
        kv_layers_on_chip(11, spec, big, 515, 1, None, None)
    assert kv_layers_on_chip(10, spec, big, 515, 1, None, None) == (10, "as given")


@pytest.mark.parametrize("bad", ["some", 13, -1])
def test_bad_kv_on_chip_is_named(bad):
    with pytest.raises(NpusimError, match="kv-on-chip"):
        run_llm("gpt2-small", load_hw("edge-npu"), prefill=8, decode=2, kv_on_chip=bad)


# -- sanity against first principles (the LLM issue, item 5) ----------------------------------------

IDEAL_DMA = {"dma.setup_cycles": 0, "dma.chunk_cycles": 0, "dram.latency": "0ns", "dma.channels": 8}


def first_principles_bytes(graph) -> int:
    """What a decode step must move, counted from the graph alone: every weight once (of the
    embedding table only the gathered rows), the KV cache it reads, its inputs and what it
    writes (the new KV entries and the logits)."""
    total = 0
    for t in graph.tensors:
        if t.name == "embed.weight":
            total += graph.meta["batch"] * graph.meta["tokens"] * t.shape[1] * t.itemsize
        elif t.kind in ("weight", "input", "output"):
            total += t.size
    return total


def test_a_decode_step_far_over_the_scratchpad_is_memory_bound():
    """GPT-2 small's 124 M int8 weights and its 1.5 MB-per-layer cache against an 8 MiB
    scratchpad, on DRAM slow enough (4 GB/s) that the 16x16 array is not the limit: the step
    takes what its bytes take at the DRAM bandwidth, within 10 % (measured: +0.3 %; at 1 MiB,
    +2 %, but 42 k tiles and two minutes of CPU for the same check)."""
    hw = load_hw("edge-npu", {**IDEAL_DMA, "dram.bandwidth": "4GB/s", "scratchpad.size": "8MiB"})
    graph = decode_graph(preset("gpt2-small"), 512)
    report = simulate_plan(plan_graph(graph, hw), hw, validated=True)
    seconds = first_principles_bytes(graph) / hw.dram.bandwidth
    assert report.seconds == pytest.approx(seconds, rel=0.10)
    assert report.lower_bounds["compute_cycles"] < 0.5 * report.cycles  # memory, not compute


@pytest.mark.parametrize("prompt", [512, 1024])
def test_a_long_prefill_on_a_large_array_is_compute_bound(prompt):
    """A long prompt on datacenter-npu's two 128x128 weight-stationary arrays (ideal DMA):
    the latency is the fold formula's array cycles (⌈K/R⌉·⌈N/C⌉ folds of M + 2R + C − 2, each
    GEMM's output channels split over the two cores) plus the vector unit's (its ops over
    2 x 128 lanes: at P = 1024 the attention softmax over P² scores is 40 % of the compute),
    within 10 % (measured: −5 % at 512, +3 % at 1024; the cores split some GEMMs by heads,
    which this sum does not). Without fusion, so array and vector work simply add; with the
    folds back to back and every GEMM on the array (the config pipelines them: that formula is
    ``npusim.hw.costs``' own test)."""
    hw = load_hw("datacenter-npu", {**IDEAL_DMA, "cores.fold_overlap": "false", "cores.gemv": "array"})
    graph = prefill_graph(preset("gpt2-small"), prompt)
    report = simulate_plan(plan_graph(graph, hw, "tile+default+arena+belady"), hw, graph)
    rows, cols, cores, lanes = 128, 128, 2, 128
    array = vector = 0
    for op in graph.ops:
        g = op.gemm
        if g is None:
            vector += op.vector_ops / (lanes * cores)
            continue
        n = -(-g.n // cores)
        array += g.batch * -(-g.k // rows) * -(-n // cols) * (g.m + 2 * rows + cols - 2)
    assert report.cycles == pytest.approx(array + vector, rel=0.10)
    assert report.lower_bounds["dram_cycles"] < 0.25 * report.cycles  # compute, not memory


def test_no_decode_step_is_simulated_twice(monkeypatch):
    """auto's trial of the chosen count at the last KV length is that sampled step (issue 28)."""
    import npusim.llm_run as llm_run

    planned = []
    real = llm_run.plan_graph
    monkeypatch.setattr(llm_run, "plan_graph", lambda graph, *a, **k: (planned.append(graph.name), real(graph, *a, **k))[1])
    report = run_llm(TINY, load_hw("edge-npu"), prefill=16, decode=3, samples=3)
    assert len(planned) == len(set(planned)), planned
    tried = report.kv_choice.count(" M")  # the counts auto tried, each "n: c M"
    assert len(planned) == tried + 1 + len(report.sampled) - 1  # the last sampled step was one of the trials


def test_progress_says_which_step_of_how_many():
    """A long LLM run says where it is: choosing the layers on chip, the prefill, decode step k
    of N with its KV length, and inside each what the step is doing."""
    heard = []
    run_llm(TINY, load_hw("edge-npu"), prefill=16, decode=3, samples=3,
            progress=lambda what, done=None, total=None, detail="": heard.append(what))
    steps = [w for w in heard if ":" not in w]
    # the step at the last KV length was one of auto's trials: simulated once, then reused
    assert steps[-3:] == ["prefill of 16 tokens", "decode step 1 of 3 simulated (KV length 16)",
                          "decode step 2 of 3 simulated (KV length 17)"]
    assert any(w.startswith("choosing the KV layers on chip") for w in heard)
    assert any(w.startswith("decode step 1 of 3 simulated (KV length 16): ") for w in heard)  # the step's own stages


def test_a_run_of_gemvs_on_a_large_array_says_the_array_sets_its_latency():
    """A batch-1 decode step with its GEMVs forced onto datacenter-npu's 128x128 arrays spends
    most of the run below 1 % of their peak, and the report says so; the same step on the vector
    lanes (cores.gemv: fastest, the shipped setting) does not."""
    graph = decode_graph(preset("gpt2-small"), 64)
    forced = load_hw("datacenter-npu", {"cores.gemv": "array"})
    report = simulate_plan(plan_graph(graph, forced), forced, validated=True)
    assert "of the array's peak" in report.low_array_note and report.low_array_note in report.summary()
    shipped = load_hw("datacenter-npu")
    assert simulate_plan(plan_graph(graph, shipped), shipped, validated=True).low_array_note == ""
