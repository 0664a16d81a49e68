"""Decoder-only transformers from hyper-parameters (the LLM issue, item 2): prefill and decode
graphs whose sizes and MACs follow the published dimensions by hand-computed formulas, with
the KV cache as named tensors that the prefill writes and a decode step reads and appends."""

from __future__ import annotations

import pytest

from npusim.cli import main
from npusim.errors import TraceError
from npusim.graph.decoder import PRESETS, decode_graph, kv_cache_tensors, prefill_graph, with_overrides
from npusim.workflow import load_graph, load_hw, run


def weight_bytes(graph) -> int:
    return sum(t.size for t in graph.tensors if t.kind == "weight" and not t.name.endswith("causal_mask"))


def matrix_params(spec) -> int:
    """Parameters of the matrices (embedding, projections, FFN, LM head; norms aside)."""
    d, kv = spec.head_dim, spec.kv_heads * spec.head_dim
    ffn = (3 if spec.ffn_kind == "swiglu" else 2) * spec.hidden * spec.ffn
    layer = spec.hidden * (spec.heads * d + 2 * kv) + spec.heads * d * spec.hidden + ffn
    return spec.layers * layer + 2 * spec.vocab * spec.hidden  # embedding and an untied LM head


@pytest.mark.parametrize("name, published", [("gpt2-small", 124e6), ("llama-2-7b", 6.74e9)])
def test_presets_have_the_published_parameter_counts(name, published):
    """int8 weights: one byte per parameter. GPT-2 and Llama-3.2 tie the LM head to the
    embedding; npusim keeps a separate LM head matrix (the step reads it either way), so for
    GPT-2 the count is the published one plus vocab x hidden."""
    spec = PRESETS[name]
    graph = decode_graph(spec, 16)
    tied_extra = spec.vocab * spec.hidden if name == "gpt2-small" else 0
    assert weight_bytes(graph) == pytest.approx(published + tied_extra, rel=0.01)
    norms = (2 * spec.layers + 1) * spec.hidden * 2  # fp16 gammas
    # GPT-2's position table: the step reads the row of its one token (a gather), int8
    positions = spec.hidden if spec.learned_positions else 0
    assert weight_bytes(graph) == matrix_params(spec) + norms + positions


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_decode_step_macs_by_hand(name):
    spec, L = PRESETS[name], 100
    graph = decode_graph(spec, L)
    d, kv = spec.head_dim, spec.kv_heads * spec.head_dim
    ffn = (3 if spec.ffn_kind == "swiglu" else 2) * spec.hidden * spec.ffn
    projections = spec.hidden * (spec.heads * d + 2 * kv) + spec.heads * d * spec.hidden + ffn
    attention = 2 * spec.heads * d * (L + 1)  # scores and context over the cache and the new token
    expected = spec.layers * (projections + attention) + spec.hidden * spec.vocab
    assert sum(op.macs for op in graph.ops) == expected


def test_kv_cache_is_written_by_prefill_and_read_and_appended_by_decode():
    spec = PRESETS["llama-3.2-1b"]  # GQA: 8 KV heads for 32 query heads
    P, L = 32, 64
    prefill, step = prefill_graph(spec, P), decode_graph(spec, L)
    written = kv_cache_tensors(prefill)["written"]
    read = kv_cache_tensors(step)["read"]
    assert sorted(written) == sorted(read) and len(read) == 2 * spec.layers
    per_token = 2 * spec.layers * spec.kv_heads * spec.head_dim * 2  # K and V, fp16
    assert sum(prefill.tensor(n).size for n in written) == P * per_token
    assert sum(step.tensor(n).size for n in read) == L * per_token
    assert sum(step.tensor(n).size for n in kv_cache_tensors(step)["written"]) == per_token
    assert all(step.tensor(n).kind == "input" for n in read)  # in DRAM when the step starts
    assert all(step.tensor(n).kind == "output" for n in kv_cache_tensors(step)["written"])


def test_a_decode_step_plans_and_simulates_and_reads_its_cache_and_weights():
    graph = load_graph("llm:gpt2-small:decode=256")
    plan, report = run(graph, load_hw("edge-npu"))
    cache = sum(graph.tensor(n).size for n in kv_cache_tensors(graph)["read"])
    # every weight and the whole cache cross the bus once at least (the Gather reads rows only)
    embed = graph.tensor("embed.weight").size
    assert report.offchip_bytes["compulsory"] >= weight_bytes(graph) - embed + cache
    assert report.cycles > report.lower_bounds["dram_cycles"] > 0


def test_prefill_by_name_with_batch():
    graph = load_graph("llm:gpt2-small:prefill=16:batch=2")
    assert graph.tensor("token_ids").shape == (2, 16) and graph.tensor("lm_head.out").shape == (2, 1, 50257)


@pytest.mark.parametrize("source, message", [
    ("llm:gpt5:decode=8", "no such decoder preset"),
    ("llm:gpt2-small:decode=8:prefill=8", "exactly one of"),
    ("llm:gpt2-small", "expected llm:<preset>"),
    ("llm:gpt2-small:decode=0", "positive integer"),
    ("llm:gpt2-small:decode=x", "positive integer"),
])
def test_bad_decoder_names_are_one_line_errors(capsys, source, message):
    assert main(["info", source]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_inconsistent_hyper_parameters_are_named():
    with pytest.raises(TraceError, match=r"heads = 12 is not a multiple of kv_heads = 5"):
        decode_graph(with_overrides(PRESETS["gpt2-small"], kv_heads=5), 8)
    with pytest.raises(TraceError, match=r"ffn_kind = 'relu'"):
        prefill_graph(with_overrides(PRESETS["gpt2-small"], ffn_kind="relu"), 8)


def test_dse_sweeps_a_generated_decoder(tmp_path, monkeypatch, capsys):
    """A generated graph has no file: the cache key takes its name (the generator's code is in
    the key's code fingerprint)."""
    from npusim.dse import trace_digest

    assert trace_digest("llm:gpt2-small:decode=8") == trace_digest("llm:gpt2-small:decode=8")
    assert trace_digest("llm:gpt2-small:decode=8") != trace_digest("llm:gpt2-small:decode=9")
    with pytest.raises(TraceError):
        trace_digest("llm:nope:decode=8")
    monkeypatch.chdir(tmp_path)
    assert main(["dse", "llm:gpt2-small:decode=8", "--hw", "edge-npu", "--sweep", "dram.bandwidth=6.4GB/s,12.8GB/s"]) == 0
    rows = (tmp_path / "dse-results.csv").read_text().splitlines()
    assert len(rows) == 3 and "llm:gpt2-small:decode=8" in rows[1]
