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
    # the batch is in the graph's name (reports, plans), as the KV length is; batch 1 keeps the short name
    assert graph.name == "gpt2-small-prefill16-batch2"
    assert load_graph("llm:gpt2-small:decode=8").name == "gpt2-small-decode8"


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
    assert main(["dse", "llm:gpt2-small:decode=8", "--hw", "datacenter-npu", "--sweep", "dram.bandwidth=6.4GB/s,12.8GB/s"]) == 0
    rows = (tmp_path / "dse-results.csv").read_text().splitlines()
    assert len(rows) == 3 and "llm:gpt2-small:decode=8" in rows[1]


def test_a_linear_layer_tile_folds_its_batch_into_m():
    """A tile of x[4, 1, 768] @ W[768, N] is one GEMM of M = 4 rows, as the untiled op's: the
    weights are loaded into the array once for the 4 sequences (it was 4 GEMMs of M = 1)."""
    from npusim.graph.tiling import tile_compute

    graph = decode_graph(PRESETS["gpt2-small"], 8, batch=4)
    head = next(op for op in graph.ops if op.name == "lm_head")
    assert head.gemm.m == 4 and head.gemm.batch == 1
    macs, gemm = tile_compute(head, graph, ((0, 4), (0, 1), (0, 128)), None)
    assert (gemm.m, gemm.n, gemm.k, gemm.batch) == (4, 128, 768, 1) and macs == 4 * 128 * 768
    scores = next(op for op in graph.ops if op.name == "layer0.attn.scores_cache")  # batched over heads
    assert tile_compute(scores, graph, ((0, 4), (0, 12), (0, 1), (0, 8)), None)[1].batch == 48


def test_batching_amortises_the_weights():
    hw = load_hw("edge-npu")
    _, one = run(load_graph("llm:gpt2-small:decode=64"), hw)
    _, four = run(load_graph("llm:gpt2-small:decode=64:batch=4"), hw)
    assert four.cycles < 1.5 * one.cycles  # 4 tokens for about the weights' cost of one


def test_dse_sweeps_decode_length_and_batch(tmp_path, monkeypatch):
    from npusim.dse import make_points, parse_sweep

    points = make_points(["llm:gpt2-small"], "edge-npu", [parse_sweep("decode=64,128"), parse_sweep("batch=1,2")],
                         ["tile+default+arena+belady"])
    assert [p.trace for p in points] == ["llm:gpt2-small:decode=64:batch=1", "llm:gpt2-small:decode=64:batch=2",
                                         "llm:gpt2-small:decode=128:batch=1", "llm:gpt2-small:decode=128:batch=2"]
    assert all(dict(p.settings).keys() == {"decode", "batch"} for p in points)
    from npusim.errors import NpusimError

    with pytest.raises(NpusimError, match="not both"):
        make_points(["llm:gpt2-small"], "edge-npu", [parse_sweep("decode=64"), parse_sweep("prefill=8")],
                    ["tile+default+arena+belady"])
    with pytest.raises(NpusimError, match="needs a generated decoder"):
        make_points(["resnet18"], "edge-npu", [parse_sweep("decode=64")], ["tile+default+arena+belady"])
