"""LLM inference as it runs: a prefill, then decode steps against a growing KV cache.

``run_llm(preset, prefill=P, decode=D, hw)`` simulates the prefill graph of the P-token prompt
(``npusim.graph.decoder``) and decode steps at KV lengths L = P … P + D − 1, each step planned
and simulated on its own with its layers' KV cache in DRAM when the step starts (the prefill
and every step store the entries they add). Steps are *sampled*: ``samples`` KV lengths spread
evenly over the D steps (both ends included; every step when D ≤ samples) are simulated, and
the others interpolated linearly between the two nearest samples. A step's work is the model's
weights (the same at every L) plus attention over L entries (linear in L), so the
interpolation is exact for the work and approximate only where tiling or the scratchpad make
a step's time jump; the report states how many steps were simulated. Such jumps are real and
not monotonic in L: gpt2-small on mid-npu with 32 MiB moves between 3.63 and 3.78 M cycles
from L = 512 to 607 with the same bytes and transfers, because the arena's offsets shift with
the L-sized tensors and a weight load waits for the last reader of the range it overwrites.

Reported (``LlmReport``): time to first token (the prefill's latency; the first token comes
out of it), per-token latency over the decode steps (min / median / max), tokens per second
of the decode phase (D tokens over the decode steps' total time), energy per generated token
(mean over the steps), KV-cache bytes moved per token (the cache tensors' loads and stores as
lowered: logical bytes, mean over the sampled steps) and off-chip bytes by cause per token.

Where the KV cache lives is decided per run (``kv_on_chip``): the caches of the first N layers
stay in the scratchpad across steps (``npusim.graph.decoder``: the planners see each as a
tensor live for the whole step, placed or spilled like any other), the others are read from
DRAM every step. ``"none"``: N = 0; an integer: that N; ``"auto"`` (default): the fastest of a
few N (0 and up to N_max in thirds, where N_max layers' caches at the last KV length fill at
most ``AUTO_SHARE`` of the budget), each tried on the decode step at the last sampled KV
length. Every layer's cache is read once per step, so which layers does not matter, only how
many; the report states N and how it was chosen.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from npusim.dram.presets import part_label
from npusim.errors import NOT_THE_POINTS, NpusimError
from npusim.graph.model import buffer_names
from npusim.graph.decoder import (MAX_BATCH, MAX_TOKENS, DecoderSpec, cache_bytes_per_layer, decode_graph,
                                  kv_cache_tensors, prefill_graph, preset)
from npusim.hw.config import Hardware
from npusim.plan.bound import as_bound
from npusim.plan.records import field_lists
from npusim.registry import check_pipelines
from npusim.sim.report import Report
from npusim.util.progress import silent
from npusim.util.units import format_bytes
from npusim.workflow import DEFAULT_PIPELINE, plan_graph, resolve_budget, simulate_plan

DEFAULT_SAMPLES = 5
#: The most decode steps simulated (each a full plan and simulation).
MAX_SAMPLES = 1000
#: ``kv_on_chip="auto"`` considers keeping caches that fill at most this share of the budget
#: (the rest streams the step's weights and activations)
AUTO_SHARE = 0.75


@dataclass(frozen=True)
class StepResult:
    kv_length: int
    cycles: float
    seconds: float
    energy_pj: float
    kv_bytes: int  # KV-cache bytes loaded and stored by the step
    offchip_bytes: dict  # cause -> bytes
    dram_stats: dict = field(default_factory=dict)  # dram.model: banks: the step's row statistics (Report)


@dataclass(frozen=True)
class LlmReport:
    model: str
    hardware: str
    pipeline: str
    prefill_tokens: int
    decode_tokens: int
    batch: int
    prefill: StepResult
    sampled: tuple[StepResult, ...]  # the simulated decode steps, by KV length
    step_seconds: tuple[float, ...] = field(repr=False)  # every decode step, interpolated between samples
    step_energy_pj: tuple[float, ...] = field(repr=False)
    kv_on_chip: int = 0  # layers whose KV cache stays in the scratchpad
    kv_choice: str = "none"  # how that number was chosen
    layers: int = 0

    @property
    def ttft_seconds(self) -> float:
        return self.prefill.seconds

    @property
    def tokens_per_second(self) -> float:
        return self.batch * self.decode_tokens / sum(self.step_seconds)

    @property
    def energy_per_token_pj(self) -> float:
        return sum(self.step_energy_pj) / (self.decode_tokens * self.batch)

    @property
    def kv_bytes_per_token(self) -> float:
        return statistics.fmean(s.kv_bytes for s in self.sampled) / self.batch

    def summary(self) -> str:
        ms = [s * 1e3 for s in self.step_seconds]
        per_cause = {k: statistics.fmean(s.offchip_bytes[k] for s in self.sampled) / self.batch
                     for k in self.sampled[0].offchip_bytes}
        steps = len(self.sampled)
        what = "every step simulated" if steps == self.decode_tokens else (
            f"{steps} of {self.decode_tokens} steps simulated (KV lengths "
            f"{', '.join(str(s.kv_length) for s in self.sampled)}), the rest interpolated linearly")
        return "\n".join([
            f"{self.model} on {self.hardware} with {self.pipeline}: prefill {self.prefill_tokens} tokens, "
            f"decode {self.decode_tokens} tokens, batch {self.batch} ({what})",
            f"  time to first token  {self.ttft_seconds * 1e3:,.3f} ms   (prefill: {self.prefill.cycles:,.0f} cycles, "
            f"{self.prefill.energy_pj / 1e6:,.3f} uJ)",
            f"  per-token latency    min {min(ms):,.3f} / median {statistics.median(ms):,.3f} / max {max(ms):,.3f} ms",
            f"  decode throughput    {self.tokens_per_second:,.2f} tokens/s",
            f"  energy per token     {self.energy_per_token_pj / 1e6:,.3f} uJ",
            f"  KV cache on chip     {self.kv_on_chip} of {self.layers} layers ({self.kv_choice})",
            f"  KV cache per token   {self.kv_bytes_per_token:,.0f} B moved",
            "  off-chip per token   " + ", ".join(f"{k} {v:,.0f}" for k, v in per_cause.items() if v) + " B",
            *self._dram_rows(),
        ])

    def _dram_rows(self) -> list[str]:
        """With ``dram.model: banks``: the prefill's and the sampled decode steps' row-hit rates."""
        d = self.prefill.dram_stats
        if not d:
            return []
        decode = [s.dram_stats for s in self.sampled if s.dram_stats]
        hits = sum(s["row_hits"] for s in decode)
        accesses = sum(s["row_hits"] + s["row_misses"] + s["row_conflicts"] for s in decode)
        text = (f"  DRAM rows            {part_label(d['device'], d['channels'], d.get('rate_mts'))} {d['mapping']} {d['page_policy']}: row hits "
                f"{d['row_hit_rate']:.1%} in the prefill")
        if accesses:
            text += f", {hits / accesses:.1%} over the {len(decode)} decode steps simulated"
        return [text]

    def to_dict(self) -> dict:
        return {
            "model": self.model, "hardware": self.hardware, "pipeline": self.pipeline,
            "prefill_tokens": self.prefill_tokens, "decode_tokens": self.decode_tokens, "batch": self.batch,
            "ttft_seconds": self.ttft_seconds, "tokens_per_second": self.tokens_per_second,
            "energy_per_token_pj": self.energy_per_token_pj, "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_on_chip_layers": self.kv_on_chip, "kv_choice": self.kv_choice,
            "step_seconds": list(self.step_seconds), "sampled_kv_lengths": [s.kv_length for s in self.sampled],
            "prefill": vars(self.prefill), "sampled_steps": [vars(s) for s in self.sampled],
        }


def sample_lengths(first: int, count: int, samples: int) -> list[int]:
    """``samples`` KV lengths spread evenly over first … first + count − 1, both ends included
    (all of them when count ≤ samples)."""
    if count <= samples or samples < 2:
        return list(range(first, first + count)) if count <= max(samples, 1) else [first, first + count - 1]
    last = first + count - 1
    return sorted({first + round(i * (last - first) / (samples - 1)) for i in range(samples)})


def interpolate(points: list[tuple[int, float]], x: int) -> float:
    """Piecewise-linear value at ``x`` through ``points`` (sorted by x, x inside their range)."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1] if x >= points[-1][0] else points[0][1]


def run_llm(model: str | DecoderSpec, hw: Hardware, *, prefill: int, decode: int, batch: int = 1,
            pipeline: str = DEFAULT_PIPELINE, budget=None, options: dict | None = None,
            samples: int = DEFAULT_SAMPLES, kv_on_chip: str | int = "auto", progress=None) -> LlmReport:
    """Prefill then ``decode`` sampled decode steps of ``model``, a preset's name or a
    ``DecoderSpec`` (module docstring)."""
    for what, value, most in (("--prefill", prefill, MAX_TOKENS), ("--decode", decode, MAX_TOKENS),
                              ("--prefill + --decode", prefill + decode if isinstance(prefill, int) and
                               isinstance(decode, int) else 1, MAX_TOKENS),
                              ("batch", batch, MAX_BATCH), ("--samples", samples, MAX_SAMPLES)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= most:
            raise NpusimError(f"llm:{getattr(model, 'name', model)}: {what} = {value!r}, expected a positive "
                              f"integer of at most {most:,}")
    if samples < 2 <= decode:  # (the first and the last step are always simulated: the others lie between)
        raise NpusimError(f"llm:{getattr(model, 'name', model)}: --samples = {samples}, expected at least 2 (the "
                          f"first and the last decode steps are simulated, the others interpolated between them)")
    spec = model if isinstance(model, DecoderSpec) else preset(model)
    check_pipelines([pipeline], options)  # (before the KV choice, which takes a failed step for a count that does not fit)
    lengths = sample_lengths(prefill, decode, samples)

    def one(graph, kv_length: int, label: str) -> StepResult:
        inner = silent
        if progress is not None:  # where the run is (which step, of how many), then where that step is
            progress(label, detail=graph.name)
            inner = lambda what, done=None, total=None, detail="": progress(  # noqa: E731
                f"{label}: {what}", done, total, detail)
        capacity = resolve_budget(budget, graph, hw, pipeline=pipeline, options=options)
        plan = plan_graph(graph, hw, pipeline, capacity, options=dict(options or {}), progress=inner)
        report: Report = simulate_plan(plan, hw, validated=True, progress=inner)
        return StepResult(kv_length, report.cycles, report.seconds, report.total_energy_pj,
                          kv_bytes_moved(plan, graph), dict(report.offchip_bytes), dict(report.dram_stats))

    steps: dict[tuple[int, int], StepResult] = {}  # (KV length, layers on chip): each step simulated once

    def decode_step(kv_length: int, layers_on_chip: int) -> StepResult:
        key = (kv_length, layers_on_chip)
        if key not in steps:
            label = (f"decode step {lengths.index(kv_length) + 1} of {len(lengths)} simulated (KV length {kv_length})"
                     if layers_on_chip == on_chip_chosen[0] else
                     f"choosing the KV layers on chip: {layers_on_chip} at KV length {kv_length}")
            steps[key] = one(decode_graph(spec, kv_length, batch, layers_on_chip), kv_length, label)
        return steps[key]

    on_chip_chosen = [None]  # set once the count is chosen: the steps after it are the sampled ones
    on_chip, choice = kv_layers_on_chip(kv_on_chip, spec, hw, lengths[-1], batch, budget,
                                        lambda n: decode_step(lengths[-1], n), pipeline=pipeline, options=options)
    on_chip_chosen[0] = on_chip
    first = one(prefill_graph(spec, prefill, batch, on_chip), 0, f"prefill of {prefill} tokens")
    sampled = tuple(decode_step(L, on_chip) for L in lengths)
    seconds = [(s.kv_length, s.seconds) for s in sampled]
    energy = [(s.kv_length, s.energy_pj) for s in sampled]
    every = range(prefill, prefill + decode)
    return LlmReport(spec.name, hw.name, pipeline, prefill, decode, batch, first, sampled,
                     tuple(interpolate(seconds, L) for L in every), tuple(interpolate(energy, L) for L in every),
                     kv_on_chip=on_chip, kv_choice=choice, layers=spec.layers)


def kv_layers_on_chip(kv_on_chip: str | int, spec: DecoderSpec, hw: Hardware, last_length: int, batch: int,
                      budget, try_step, *, pipeline: str | None = None, options: dict | None = None) -> tuple[int, str]:
    """(layers whose cache stays on chip, how that was chosen): ``kv_on_chip`` is ``"none"``,
    a number of layers, or ``"auto"`` (module docstring); ``try_step(n)`` simulates the decode
    step at the last KV length with n layers on chip."""
    if kv_on_chip in ("none", 0):
        return 0, "none: every layer's cache in DRAM"
    if isinstance(kv_on_chip, int) and not isinstance(kv_on_chip, bool):
        if not 0 <= kv_on_chip <= spec.layers:
            raise NpusimError(f"--kv-on-chip {kv_on_chip}: expected none, auto or 0 .. {spec.layers} layers")
        # The caches kept on chip are one op's working set that no tiling cuts: say how many fit,
        # not the planner's "below M_R" of that op (a user asked for layers, not for a budget).
        capacity = resolve_budget(budget, decode_graph(spec, last_length, batch), hw, pipeline=pipeline,
                                  options=options)
        half = -(-cache_bytes_per_layer(spec, last_length + 1, batch) // 2)  # a key or a value cache
        layer = 2 * -(-half // hw.scratchpad.alignment) * hw.scratchpad.alignment
        if kv_on_chip * layer > capacity:
            raise NpusimError(
                f"--kv-on-chip {kv_on_chip}: {kv_on_chip} layer{'s' * (kv_on_chip > 1)} of KV cache at length "
                f"{last_length + 1} need "
                f"{format_bytes(kv_on_chip * layer)} ({format_bytes(layer)} a layer), more than the budget of "
                f"{format_bytes(capacity)}: at most {capacity // layer} fit; use --kv-on-chip {capacity // layer} "
                "or auto (the fastest of a few counts)")
        return kv_on_chip, "as given"
    if kv_on_chip != "auto":
        raise NpusimError(f"--kv-on-chip {kv_on_chip!r}: expected none, auto or a number of layers "
                          f"(0 .. {spec.layers})")
    capacity = resolve_budget(budget, decode_graph(spec, last_length, batch), hw, pipeline=pipeline, options=options)
    per_layer = cache_bytes_per_layer(spec, last_length + 1, batch)
    most = min(spec.layers, int(capacity * AUTO_SHARE) // per_layer)
    candidates = sorted({0, most // 3, 2 * most // 3, most})
    cycles = {}
    for n in candidates:
        try:
            cycles[n] = try_step(n).cycles
        except NOT_THE_POINTS:
            raise
        except NpusimError:  # e.g. the step no longer fits beside the caches: not a candidate
            continue
    if not cycles:
        raise NpusimError(f"--kv-on-chip auto: no decode step at KV length {last_length} could be planned")
    best = min(cycles, key=lambda n: (cycles[n], n))
    tried = ", ".join(f"{n}: {c / 1e6:.3f} M" for n, c in cycles.items())
    return best, f"auto: the fastest at KV length {last_length} of {tried} cycles"


def kv_bytes_moved(plan, graph) -> int:
    """Bytes of the KV-cache tensors (or of tiles of them) the step's plan loads and stores."""
    names = set()
    for kind in ("read", "written"):
        names.update(kv_cache_tensors(graph).get(kind, ()))
    buffers = buffer_names(as_bound(plan, graph).bound_graph)
    moved, sizes = field_lists(plan.transfers, "tensor", "size")
    return sum(size for t, size in zip(moved, sizes) if buffers[t] in names)
