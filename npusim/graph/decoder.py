"""Decoder-only transformers from their hyper-parameters: a prefill graph and a decode step.

No weights and no hub access: a ``DecoderSpec`` (layers, hidden size, heads, KV heads for
GQA/MQA, FFN size and kind, norm, vocabulary, dtype per tensor kind) is enough to build the
graphs an NPU runs for inference, op by op, with the shapes and costs the ONNX importer would
give them (``npusim.graph.ops.costs``):

- ``prefill_graph(spec, prompt)``: the prompt's P tokens through every layer, causal attention
  over them, logits of the last token; each layer *writes* its KV cache (``layer{i}.key_cache``,
  ``layer{i}.value_cache``: outputs, P entries);
- ``decode_graph(spec, kv_len)``: one new token at KV length L; each layer *reads* its cache
  (the same names, graph inputs of L entries, in DRAM when the step starts) and writes only
  the new token's entries (``layer{i}.key_new`` / ``layer{i}.value_new``: outputs, appended
  to the cache by storing them), so a step moves the cache once, not a grown copy of it.

KV cache on chip (``on_chip = N``): the caches of the first N layers live in the scratchpad
across steps instead of DRAM. In a decode step they are made at the start by a zero-cost
marker op (``KVCacheResident``: the previous step left them there) and read at the end by
another (``KVCacheKeep``: the next step needs them), so the planners see each as a tensor live
for the whole step and place it (or spill it, paying the store and the reload); the new
entries of those layers are appended in the scratchpad (activations read by the keep op), not
stored. A prefill with N on-chip layers leaves their caches on chip the same way. Where a
cache sits between steps is not tracked: each step is planned on its own, so moving a cache
to another address between two steps would be an on-chip copy this model does not charge.

Layout choices, as NPU runtimes make them: the key cache is stored transposed (``[batch,
kv_heads, head_dim, L]``), so attention reads it as the right-hand operand of its MatMul with
no per-step transpose; the value cache is ``[batch, kv_heads, L, head_dim]``. Grouped-query
attention multiplies each KV head with its group of ``heads / kv_heads`` query heads in one
batched MatMul (M = group × tokens), so the cache is never repeated per head. In a decode step
the new token's key and value join attention as separate operands (scores over the cache and
over the new token, concatenated for one softmax; the two value products added), since the
cache read by the step is the one before the append.

Costs: MatMuls are GEMMs on the array (M = batch·tokens for projections; batched over KV heads
for attention). Prefill attention computes the full P × P scores (a causal mask is added, as
ONNX exports do; kernels that skip the masked half would halve those MACs). Norms, softmax,
rotary embedding, activations and residual adds run on the vector unit (``op_costs``'
counts: 5 per element for norms and softmax; RMSNorm likewise).

Presets (``PRESETS``) carry published dimensions: GPT-2 small (Radford et al. 2019; the
Hugging Face ``gpt2`` config: 12 layers, 768 hidden, 12 heads, 3072 FFN, GELU, LayerNorm,
50,257 tokens), Llama-3.2-1B-like (Meta's model card / HF config: 16 layers, 2048 hidden, 32
heads, 8 KV heads, 8192 FFN, SwiGLU, RMSNorm, 128,256 tokens) and Llama-2-7B-like (Touvron et
al. 2023: 32 layers, 4096 hidden, 32 heads = KV heads, 11,008 FFN, SwiGLU, RMSNorm, 32,000
tokens). Default dtypes: int8 weights, fp16 activations and KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from npusim.errors import TraceError
from npusim.graph.model import Graph, build_graph
from npusim.graph.ops.costs import op_cost

#: bytes per element of the dtypes a spec may name
ITEMSIZE = {"int8": 1, "fp8": 1, "int4": 1, "fp16": 2, "bf16": 2, "fp32": 4, "int64": 8}
FFN_KINDS = ("gelu", "swiglu")
NORMS = ("layernorm", "rmsnorm")


@dataclass(frozen=True)
class DecoderSpec:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    ffn_kind: str = "swiglu"
    norm: str = "rmsnorm"
    vocab: int = 32_000
    weight_dtype: str = "int8"
    act_dtype: str = "fp16"
    kv_dtype: str = "fp16"
    learned_positions: bool = False  # GPT-2: a position embedding table; Llama: rotary

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    def check(self) -> None:
        problems = []
        for field in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                problems.append(f"{field} = {value!r} (expected a positive integer)")
        if not problems and self.hidden % self.heads:
            problems.append(f"hidden = {self.hidden} is not a multiple of heads = {self.heads}")
        if not problems and self.heads % self.kv_heads:
            problems.append(f"heads = {self.heads} is not a multiple of kv_heads = {self.kv_heads}")
        if self.ffn_kind not in FFN_KINDS:
            problems.append(f"ffn_kind = {self.ffn_kind!r} (expected one of {', '.join(FFN_KINDS)})")
        if self.norm not in NORMS:
            problems.append(f"norm = {self.norm!r} (expected one of {', '.join(NORMS)})")
        for field in ("weight_dtype", "act_dtype", "kv_dtype"):
            if getattr(self, field) not in ITEMSIZE:
                problems.append(f"{field} = {getattr(self, field)!r} (expected one of {', '.join(ITEMSIZE)})")
        if problems:
            raise TraceError(f"decoder {self.name!r}: " + "; ".join(problems))


PRESETS = {
    "gpt2-small": DecoderSpec("gpt2-small", layers=12, hidden=768, heads=12, kv_heads=12, ffn=3072,
                              ffn_kind="gelu", norm="layernorm", vocab=50_257, learned_positions=True),
    "llama-3.2-1b": DecoderSpec("llama-3.2-1b", layers=16, hidden=2048, heads=32, kv_heads=8, ffn=8192,
                                vocab=128_256),
    "llama-2-7b": DecoderSpec("llama-2-7b", layers=32, hidden=4096, heads=32, kv_heads=32, ffn=11_008,
                              vocab=32_000),
}


def preset(name: str) -> DecoderSpec:
    if name not in PRESETS:
        raise TraceError(f"{_shown('llm:' + name)}: no such decoder preset; expected one of {', '.join(PRESETS)}")
    return PRESETS[name]


def _suffix(batch: int, on_chip: int) -> str:
    """The graph name's batch (when more than one sequence) and on-chip cache layers."""
    return (f"-batch{batch}" if batch > 1 else "") + (f"-kv{on_chip}" if on_chip else "")


def prefill_graph(spec: DecoderSpec, prompt: int, batch: int = 1, on_chip: int = 0) -> Graph:
    """The prompt's ``prompt`` tokens through the model (module docstring); the caches of the
    first ``on_chip`` layers stay in the scratchpad (``cached_on_chip``)."""
    return _Builder(spec, batch, tokens=prompt, past=0, on_chip=on_chip).build(
        f"{spec.name}-prefill{prompt}{_suffix(batch, on_chip)}")


def decode_graph(spec: DecoderSpec, kv_len: int, batch: int = 1, on_chip: int = 0) -> Graph:
    """One decode step at KV length ``kv_len`` (module docstring); the caches of the first
    ``on_chip`` layers are in the scratchpad when it starts and stay there."""
    return _Builder(spec, batch, tokens=1, past=kv_len, on_chip=on_chip).build(
        f"{spec.name}-decode{kv_len}{_suffix(batch, on_chip)}")


def cache_bytes_per_layer(spec: DecoderSpec, kv_len: int, batch: int = 1) -> int:
    """Bytes of one layer's key and value cache at KV length ``kv_len``."""
    return 2 * batch * spec.kv_heads * spec.head_dim * kv_len * ITEMSIZE[spec.kv_dtype]


def kv_cache_tensors(graph: Graph) -> dict[str, list[str]]:
    """The KV-cache tensors of a prefill or decode graph: ``read`` (the cache a step attends
    over) and ``written`` (what the graph appends to it)."""
    return dict(graph.meta.get("kv_cache", {}))


def _shown(name: str) -> str:
    """A generated graph's name as an error shows it: as typed, or its repr when it holds a line
    break or another unprintable character (the error stays one line)."""
    return name if name.isprintable() else repr(name)


def graph_from_name(source: str) -> Graph:
    """``llm:<preset>:prefill=<P>`` or ``llm:<preset>:decode=<L>``, optionally ``:batch=<B>``."""
    parts, shown = source.split(":"), _shown(source)
    if len(parts) < 3 or parts[0] != "llm":
        raise TraceError(f"{shown}: expected llm:<preset>:prefill=<P> or llm:<preset>:decode=<L> "
                         f"(presets: {', '.join(PRESETS)}), optionally :batch=<B>")
    spec = preset(parts[1])
    fields = {}
    for part in parts[2:]:
        key, sep, value = part.partition("=")
        # ASCII digits only: str.isdigit also takes '²', which int() refuses
        if key not in ("prefill", "decode", "batch") or not sep or not (value.isascii() and value.isdigit()) \
                or int(value) <= 0:
            raise TraceError(f"{shown}: {part!r}: expected prefill=<P>, decode=<L> or batch=<B> with a positive "
                             "integer")
        fields[key] = int(value)
    if ("prefill" in fields) == ("decode" in fields):
        raise TraceError(f"{shown}: give exactly one of prefill=<P> (prompt tokens) or decode=<L> (KV length)")
    batch = fields.get("batch", 1)
    if "prefill" in fields:
        return prefill_graph(spec, fields["prefill"], batch)
    return decode_graph(spec, fields["decode"], batch)


#: Zero-cost ops that mark where a cache kept on chip is live (``cached_on_chip``): they read
#: and write no scratchpad bytes and take no compute (``npusim.hw.costs`` reads ``attrs["marker"]``).
RESIDENT_KIND, KEEP_KIND = "KVCacheResident", "KVCacheKeep"


#: The longest sequence (prompt plus generated tokens, or KV length) and the largest batch a
#: generated step may have: 128 Ki tokens is the longest context of the presets' families;
#: beyond these a single step's graph alone takes minutes and gigabytes to build and plan.
MAX_TOKENS = 1 << 17
MAX_BATCH = 1024


class _Builder:
    def __init__(self, spec: DecoderSpec, batch: int, tokens: int, past: int, on_chip: int = 0) -> None:
        spec.check()
        for what, value, most in (("batch", batch, MAX_BATCH), ("tokens", tokens, MAX_TOKENS),
                                  ("KV length", past, MAX_TOKENS), ("tokens + KV length", tokens + past, MAX_TOKENS)):
            if isinstance(value, int) and not isinstance(value, bool) and value > most:
                raise TraceError(f"decoder {spec.name!r}: {what} = {value:,}, expected at most {most:,}")
        if not isinstance(on_chip, int) or not 0 <= on_chip <= spec.layers:
            raise TraceError(f"decoder {spec.name!r}: KV cache on chip for {on_chip!r} layers, expected 0 .. "
                             f"{spec.layers}")
        for what, value in (("batch", batch), ("tokens", tokens)):
            if not isinstance(value, int) or value <= 0:
                raise TraceError(f"decoder {spec.name!r}: {what} = {value!r}, expected a positive integer")
        if not isinstance(past, int) or past < 0:
            raise TraceError(f"decoder {spec.name!r}: KV length = {past!r}, expected a positive integer")
        self.s, self.b, self.t, self.past, self.on_chip = spec, batch, tokens, past, on_chip
        self.tensors: dict[str, dict] = {}
        self.ops: list[dict] = []
        self.read_cache: list[str] = []
        self.written_cache: list[str] = []
        self.kept: list[str] = []  # cache tensors of on-chip layers, live to the end of the graph

    # -- records -------------------------------------------------------------------------------
    def tensor(self, name: str, shape, dtype: str, kind: str = "activation") -> str:
        self.tensors[name] = dict(name=name, shape=list(shape), dtype=dtype, itemsize=ITEMSIZE[dtype], kind=kind)
        return name

    def op(self, kind: str, name: str, inputs: list[str], out: str, shape, dtype: str | None = None,
           attrs: dict | None = None, out_kind: str = "activation") -> str:
        self.tensor(out, shape, dtype or self.s.act_dtype, out_kind)
        attrs = dict(attrs or {})
        cost = op_cost(kind, attrs, [self.tensors[i]["shape"] for i in inputs], [list(shape)])
        self.ops.append(dict(name=name, kind=kind, inputs=inputs, outputs=[out], attrs=attrs, macs=cost.macs,
                             vector_ops=cost.vector_ops, gemm=cost.gemm))
        return out

    def weight(self, name: str, shape, dtype: str | None = None) -> str:
        return self.tensor(name, shape, dtype or self.s.weight_dtype, "weight")

    # -- blocks --------------------------------------------------------------------------------
    def norm(self, x: str, name: str) -> str:
        s = self.s
        gamma = self.weight(f"{name}.weight", [s.hidden], s.act_dtype)
        kind = "LayerNormalization" if s.norm == "layernorm" else "RMSNormalization"
        return self.op(kind, name, [x, gamma], f"{name}.out", self.tensors[x]["shape"], attrs={"axis": -1})

    def linear(self, x: str, name: str, n_out: int) -> str:
        w = self.weight(f"{name}.weight", [self.tensors[x]["shape"][-1], n_out])
        shape = self.tensors[x]["shape"][:-1] + [n_out]
        return self.op("MatMul", name, [x, w], f"{name}.out", shape)

    def attention(self, x: str, i: int) -> str:
        s, b, t, past = self.s, self.b, self.t, self.past
        kvh, g, d = s.kv_heads, s.group, s.head_dim
        p = f"layer{i}.attn"
        q = self.linear(x, f"{p}.q", s.heads * d)
        k = self.linear(x, f"{p}.k", kvh * d)
        v = self.linear(x, f"{p}.v", kvh * d)
        if not s.learned_positions:  # rotary position embedding on q and k
            q = self.op("RotaryEmbedding", f"{p}.rope_q", [q], f"{p}.rope_q.out", self.tensors[q]["shape"])
            k = self.op("RotaryEmbedding", f"{p}.rope_k", [k], f"{p}.rope_k.out", self.tensors[k]["shape"])
        # heads: q -> [b, kvh, g*t, d]; k -> [b, kvh, d, t] (transposed, as the cache); v -> [b, kvh, t, d]
        q5 = self.op("Reshape", f"{p}.q_heads", [q], f"{p}.q_heads.out", [b, t, kvh, g, d])
        qt = self.op("Transpose", f"{p}.q_group", [q5], f"{p}.q_group.out", [b, kvh, g, t, d],
                     attrs={"perm": [0, 2, 3, 1, 4]})
        qg = self.op("Reshape", f"{p}.q_rows", [qt], f"{p}.q_rows.out", [b, kvh, g * t, d])
        k4 = self.op("Reshape", f"{p}.k_heads", [k], f"{p}.k_heads.out", [b, t, kvh, d])
        v4 = self.op("Reshape", f"{p}.v_heads", [v], f"{p}.v_heads.out", [b, t, kvh, d])
        key_name, value_name = (f"layer{i}.key_cache", f"layer{i}.value_cache") if past == 0 else \
            (f"layer{i}.key_new", f"layer{i}.value_new")
        on_chip = i < self.on_chip  # its cache stays in the scratchpad: appended there, not stored
        written = "activation" if on_chip else "output"
        kt = self.op("Transpose", f"{p}.k_store", [k4], key_name, [b, kvh, d, t], dtype=s.kv_dtype,
                     attrs={"perm": [0, 2, 3, 1]}, out_kind=written)
        vt = self.op("Transpose", f"{p}.v_store", [v4], value_name, [b, kvh, t, d], dtype=s.kv_dtype,
                     attrs={"perm": [0, 2, 1, 3]}, out_kind=written)
        self.written_cache += [kt, vt]
        if on_chip:
            self.kept += [kt, vt]
        if past == 0:  # prefill: causal attention over the prompt
            scores = self.op("MatMul", f"{p}.scores", [qg, kt], f"{p}.scores.out", [b, kvh, g * t, t])
            mask = self.weight(f"{p}.causal_mask", [g * t, t], s.act_dtype)
            masked = self.op("Add", f"{p}.mask", [scores, mask], f"{p}.mask.out", [b, kvh, g * t, t])
            probs = self.op("Softmax", f"{p}.softmax", [masked], f"{p}.softmax.out", [b, kvh, g * t, t],
                            attrs={"axis": -1})
            ctx = self.op("MatMul", f"{p}.context", [probs, vt], f"{p}.context.out", [b, kvh, g * t, d])
        else:  # decode: the cache of `past` tokens and the new token's key and value
            kc, vc = f"layer{i}.key_cache", f"layer{i}.value_cache"
            if not on_chip:  # in DRAM when the step starts (graph inputs)
                self.tensor(kc, [b, kvh, d, past], s.kv_dtype, "input")
                self.tensor(vc, [b, kvh, past, d], s.kv_dtype, "input")
            self.read_cache += [kc, vc]
            old = self.op("MatMul", f"{p}.scores_cache", [qg, kc], f"{p}.scores_cache.out", [b, kvh, g, past])
            new = self.op("MatMul", f"{p}.scores_new", [qg, kt], f"{p}.scores_new.out", [b, kvh, g, 1])
            scores = self.op("Concat", f"{p}.scores", [old, new], f"{p}.scores.out", [b, kvh, g, past + 1],
                             attrs={"axis": -1})
            probs = self.op("Softmax", f"{p}.softmax", [scores], f"{p}.softmax.out", [b, kvh, g, past + 1],
                            attrs={"axis": -1})
            p_old = self.op("Slice", f"{p}.probs_cache", [probs], f"{p}.probs_cache.out", [b, kvh, g, past])
            p_new = self.op("Slice", f"{p}.probs_new", [probs], f"{p}.probs_new.out", [b, kvh, g, 1])
            c_old = self.op("MatMul", f"{p}.context_cache", [p_old, vc], f"{p}.context_cache.out", [b, kvh, g, d])
            c_new = self.op("MatMul", f"{p}.context_new", [p_new, vt], f"{p}.context_new.out", [b, kvh, g, d])
            ctx = self.op("Add", f"{p}.context", [c_old, c_new], f"{p}.context.out", [b, kvh, g, d])
        c5 = self.op("Reshape", f"{p}.ctx_group", [ctx], f"{p}.ctx_group.out", [b, kvh, g, t, d])
        ct = self.op("Transpose", f"{p}.ctx_tokens", [c5], f"{p}.ctx_tokens.out", [b, t, kvh, g, d],
                     attrs={"perm": [0, 3, 1, 2, 4]})
        merged = self.op("Reshape", f"{p}.ctx_merge", [ct], f"{p}.ctx_merge.out", [b, t, s.heads * d])
        return self.linear(merged, f"{p}.o", s.hidden)

    def ffn(self, x: str, i: int) -> str:
        s, p = self.s, f"layer{i}.ffn"
        shape = self.tensors[x]["shape"][:-1] + [s.ffn]
        if s.ffn_kind == "gelu":
            up = self.linear(x, f"{p}.up", s.ffn)
            act = self.op("Gelu", f"{p}.gelu", [up], f"{p}.gelu.out", shape)
        else:
            gate = self.linear(x, f"{p}.gate", s.ffn)
            up = self.linear(x, f"{p}.up", s.ffn)
            silu = self.op("Silu", f"{p}.silu", [gate], f"{p}.silu.out", shape)
            act = self.op("Mul", f"{p}.swiglu", [silu, up], f"{p}.swiglu.out", shape)
        return self.linear(act, f"{p}.down", s.hidden)

    def marker(self, kind: str, name: str, inputs: list[str], outputs: list[str]) -> None:
        """A zero-cost op (``RESIDENT_KIND``/``KEEP_KIND``)."""
        self.ops.append(dict(name=name, kind=kind, inputs=inputs, outputs=outputs, attrs={"marker": True},
                             macs=0, vector_ops=0, gemm=None))

    def resident_caches(self) -> None:
        """A decode step's on-chip caches: made by a marker op at the start (the previous step
        left them in the scratchpad), so they are live, and planned, for the whole step."""
        s, b, past = self.s, self.b, self.past
        for i in range(self.on_chip):
            kc = self.tensor(f"layer{i}.key_cache", [b, s.kv_heads, s.head_dim, past], s.kv_dtype)
            vc = self.tensor(f"layer{i}.value_cache", [b, s.kv_heads, past, s.head_dim], s.kv_dtype)
            self.marker(RESIDENT_KIND, f"layer{i}.kv_resident", [], [kc, vc])
            self.kept += [kc, vc]

    def keep_caches(self) -> None:
        """The end of the graph holds every on-chip cache (and the entries appended to it): a
        marker op reads them last, so they stay live to the end, for the next step."""
        if self.kept:
            done = self.tensor("kv_cache.kept", [1], "int8")
            self.marker(KEEP_KIND, "kv_cache.keep", list(self.kept), [done])

    def build(self, name: str) -> Graph:
        s, b, t = self.s, self.b, self.t
        if self.past > 0:
            self.resident_caches()
        ids = self.tensor("token_ids", [b, t], "int64", "input")
        table = self.weight("embed.weight", [s.vocab, s.hidden])
        x = self.op("Gather", "embed", [table, ids], "embed.out", [b, t, s.hidden], attrs={"axis": 0})
        if s.learned_positions:
            positions = self.weight("embed.positions", [t, s.hidden])
            x = self.op("Add", "embed.add_positions", [x, positions], "embed.add_positions.out", [b, t, s.hidden])
        for i in range(s.layers):
            h = self.attention(self.norm(x, f"layer{i}.norm1"), i)
            x = self.op("Add", f"layer{i}.residual1", [x, h], f"layer{i}.residual1.out", [b, t, s.hidden])
            h = self.ffn(self.norm(x, f"layer{i}.norm2"), i)
            x = self.op("Add", f"layer{i}.residual2", [x, h], f"layer{i}.residual2.out", [b, t, s.hidden])
        x = self.norm(x, "final_norm")
        if t > 1:  # only the last token's logits are needed to pick the next token
            x = self.op("Slice", "last_token", [x], "last_token.out", [b, 1, s.hidden])
        logits = self.linear(x, "lm_head", s.vocab)
        self.tensors[logits]["kind"] = "output"
        self.keep_caches()
        meta = {"decoder": dict(vars(s)), "batch": b, "tokens": t, "kv_length": self.past,
                "kv_cache": {"read": list(self.read_cache), "written": list(self.written_cache)},
                "kv_on_chip_layers": self.on_chip}
        return build_graph(name, list(self.tensors.values()), self.ops, meta)


def with_overrides(spec: DecoderSpec, **fields) -> DecoderSpec:
    """A copy of ``spec`` with some hyper-parameters changed (checked when a graph is built)."""
    return replace(spec, **fields)
