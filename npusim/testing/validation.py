"""The validation table: npusim against other simulators, published silicon and first-principles
bounds, one row per reference (README "Validation", docs/validation.md for the discussion).

Each ``*_figures`` function computes what one row compares and returns it as a plain dict;
``rows`` turns them into ``Row`` records and ``markdown`` prints the table
(``python benchmarks/validation_table.py``). Every row names the CI test that holds it to its
tolerance: ``tests/test_validation.py``, or the older test the row reuses (SCALE-Sim per layer,
ZigZag). The rows:

- **SCALE-Sim, untiled**: ResNet-18's layers on SCALE-Sim v3's 32×32 output-stationary array,
  npusim's stall-free array cycles (``npusim.hw.costs.systolic_cycles``) against SCALE-Sim's
  ``compute_cycles`` + 1 (shared/reference/scalesim/resnet18_32x32_os/per_layer.csv).
- **SCALE-Sim, tiled**: the same layers planned at 192 KiB (SCALE-Sim's three 64 KiB SRAMs as
  one scratchpad) with the default pipeline, npusim's array cycles summed over each layer's tiles
  against SCALE-Sim's untiled count.
- **ZigZag tpu_like**: ResNet-18's 21 conv/FC layers alone on ``hw_configs/tpu-like.yaml``
  (ZigZag 3.9.1's figures), total energy against shared/reference/zigzag/.
- **ZigZag's other accelerators** (``zigzag_design_rows``, ``npusim.testing.zigzag``):
  tpu_like, edge_tpu_like, meta_prototype, ascend_like and tesla_npu_like mirrored as unrolled cores with
  local levels (``hw_configs/zigzag-*.yaml``), ResNet-18's layers alone: latency, and on-chip
  energy by level, against tests/fixtures/zigzag/.
- **TPU v1** (``tpu_v1_figures``): Jouppi et al., ISCA 2017, Table 3's measured TeraOps/s of
  MLP0, MLP1, LSTM0 and LSTM1 against npusim's 2·MACs / simulated seconds on
  ``hw_configs/tpu-v1.yaml`` with the workloads of ``npusim.graph.generators.TPU_V1_WORKLOADS``.
- **TPU v4 matmul kernels** (``tpu_kernel_figures``): measured kernel times against npusim's,
  after a two-parameter linear fit on half of the shapes, R² and MAPE on the other half, next to
  SCALE-Sim's closed form fitted the same way.
- **Tiled-GEMM I/O** (``gemm_io_figures``): off-chip bytes of a 2048³ int8 GEMM on edge-npu
  against the square-tile bound.
- **Decode roofline** (``decode_figures``): a GPT-2-small decode step against the larger of its
  DRAM roofline and the array's weight-load bound.

Rows whose reference lives in ``../shared`` (SCALE-Sim, ZigZag) print as skipped without it.
"""

from __future__ import annotations

import csv
import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npusim.graph.decoder import kv_cache_tensors
from npusim.graph.generators import TPU_V1_WORKLOADS, matmul_graph, tpu_v1_workload
from npusim.graph.model import Graph, build_graph
from npusim.hw.config import Hardware
from npusim.hw.costs import compute_cycles, systolic_cycles
from npusim.registry import make_plan
from npusim.sim.report import Report
from npusim.workflow import DEFAULT_PIPELINE, load_graph, load_hw, plan_graph, simulate_plan

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
SCALESIM_RESNET18 = SHARED / "reference" / "scalesim" / "resnet18_32x32_os" / "per_layer.csv"
ZIGZAG = SHARED / "reference" / "zigzag"
TPU_KERNELS = REPO / "tests" / "fixtures" / "tpu_kernels" / "tpu_v4_matmul_1024_4096.csv"

#: SCALE-Sim's config of shared/reference/scalesim/resnet18_32x32_os/scale.cfg on edge-npu
SCALESIM_OVERRIDES = {"cores.pe_rows": "32", "cores.pe_cols": "32", "cores.dataflow": "os"}
#: SCALE-Sim's three 64 KiB SRAMs (ifmap, filter, ofmap) as one scratchpad
SCALESIM_TILED_BUDGET = 192 << 10

PAPER_TPU_V1 = "Jouppi et al., ISCA 2017, Tables 1-3"
SCALESIM_VALIDATION = "scalesim-project/SCALE-Sim-validation @45818f1 (MIT), data/data_matmul7"


def run(graph: Graph, hw: Hardware, budget: int | None = None, options: dict | None = None) -> Report:
    """``graph`` through the default pipeline on ``hw`` (planned, validated once, simulated)."""
    plan = plan_graph(graph, hw, DEFAULT_PIPELINE, budget=budget, options=options)
    return simulate_plan(plan, hw, validated=True)


# -- SCALE-Sim per layer --------------------------------------------------------------------------

def scalesim_layers() -> list[dict] | None:
    """SCALE-Sim's per-layer results for ResNet-18 on its 32×32 os config (None: not present)."""
    if not SCALESIM_RESNET18.exists():
        return None
    with open(SCALESIM_RESNET18, newline="") as f:
        return list(csv.DictReader(f))


def scalesim_untiled_figures() -> dict | None:
    """npusim's array cycles of every ResNet-18 GEMM (its own imported graph) on the 32×32 os
    array against SCALE-Sim's ``compute_cycles`` + 1 (it prints the last cycle's 0-based index),
    matched layer by layer through their (M, N, K)."""
    layers = scalesim_layers()
    if layers is None:
        return None
    theirs = sorted(((int(r["M"]), int(r["N"]), int(r["K"])), int(r["compute_cycles"]) + 1) for r in layers)
    graph = load_graph("resnet18")
    ours = sorted(((o.gemm.m, o.gemm.n, o.gemm.k), systolic_cycles(o.gemm, 32, 32, "os"))
                  for o in graph.ops if o.gemm is not None)
    return dict(layers=len(theirs), npusim=sum(c for _, c in ours), scalesim=sum(c for _, c in theirs),
                equal_layers=sum(a == b for a, b in zip(ours, theirs)))


def scalesim_tiled_cycles(objective: str = "time", budget: int = SCALESIM_TILED_BUDGET,
                          layout: str = "nhwc") -> dict[str, int]:
    """Array cycles of each ResNet-18 layer, summed over its tiles, planned at ``budget`` with
    the default pipeline on SCALE-Sim's 32×32 os array (``tile_objective``, ``dram.layout``)."""
    graph = load_graph("resnet18")
    hw = load_hw("edge-npu", {**SCALESIM_OVERRIDES, "dram.layout": layout})
    plan = make_plan(graph, hw, DEFAULT_PIPELINE, budget=budget, options={"tile_objective": objective})
    cycles: dict[str, int] = {}
    for op in plan.bound_graph.ops:  # the graph the plan's steps refer to (tiled)
        if op.gemm is not None:
            layer = op.attrs.get("tile_of", op.name)
            cycles[layer] = cycles.get(layer, 0) + systolic_cycles(op.gemm, 32, 32, "os")
    return cycles


def scalesim_tiled_figures(layout: str = "nhwc") -> dict | None:
    """``scalesim_tiled_cycles`` summed over the network against SCALE-Sim's untiled total."""
    layers = scalesim_layers()
    if layers is None:
        return None
    return dict(npusim=sum(scalesim_tiled_cycles(layout=layout).values()),
                scalesim=sum(int(r["compute_cycles"]) + 1 for r in layers), layout=layout)


# -- ZigZag tpu_like ------------------------------------------------------------------------------

def zigzag_layer_graph(graph: Graph, op) -> Graph:
    """One layer alone, as ZigZag costs it: its input from DRAM, its weights (no bias: ZigZag
    has none) from DRAM, its output back to DRAM."""
    x, w = (graph.tensors[i] for i in op.inputs[:2])
    y = graph.tensors[op.outputs[0]]

    def record(t, kind):
        return dict(name=t.name, shape=list(t.shape), dtype=t.dtype, itemsize=t.itemsize, kind=kind)

    ops = [dict(name=op.name, kind=op.kind, inputs=[x.name, w.name], outputs=[y.name], attrs=op.attrs,
                macs=op.macs, vector_ops=op.vector_ops, gemm=op.gemm)]
    return build_graph(op.name, [record(x, "input"), record(w, "weight"), record(y, "output")], ops)


def zigzag_figures() -> dict | None:
    """ResNet-18's conv/FC layers each alone on ``tpu-like`` (ZigZag's ``tpu_like`` figures),
    planned with ``tile+default+arena+belady`` and simulated: npusim's energy by component and
    DRAM bytes summed over the layers (``npusim``), and ZigZag's summary (``zigzag``)."""
    if not ZIGZAG.is_dir():
        return None
    ref = json.loads((ZIGZAG / "tpu_like__resnet18__summary.json").read_text())
    with open(ZIGZAG / "tpu_like__resnet18__per_layer.csv", newline="") as f:
        layers = [r["layer"] for r in csv.DictReader(f)]
    graph, hw = load_graph("resnet18"), load_hw("tpu-like")
    energy: dict[str, float] = {}
    read = written = 0
    for name in layers:
        layer = zigzag_layer_graph(graph, graph.op(name))
        report = simulate_plan(plan_graph(layer, hw, "tile+default+arena+belady"), hw, validated=True)
        for k, v in report.energy_pj.items():
            energy[k] = energy.get(k, 0.0) + v
        read += report.offchip_read_bytes
        written += report.offchip_write_bytes
    return dict(npusim=dict(energy_pj=energy, total_pj=sum(energy.values()), read=read, written=written),
                zigzag=ref, layers=len(layers))


# -- TPU v1 ---------------------------------------------------------------------------------------

def tpu_v1_figures(name: str) -> dict:
    """One TPU v1 workload (``TPU_V1_WORKLOADS[name]``: Table 1's layers, weights and batch as
    equal square int8 FC layers) through the default pipeline on ``tpu-v1``: npusim's TeraOps/s =
    2·MACs / simulated seconds (Table 3's measure: 92 TOPS peak = 65,536 MACs × 2 × 700 MHz),
    against Table 3's measured TeraOps/s.

    ``roofline_tops`` is the weight-streaming bound of the paper's roofline (§4): each
    weight byte read from the 34 GB/s Weight Memory serves ``batch`` MACs, so no run beats
    2·batch·34e9 ops/s (MLP0 13.6, MLP1 11.4, LSTM0 4.35, LSTM1 6.5 TOPS); ``dram_share`` is the
    fraction of npusim's time its DRAM traffic alone takes at that bandwidth.

    MLP0 and MLP1 land within a few % of Table 3 (the issue's target, ±10 %), as the paper's
    roofline says they should: weight-stream bound, measured at 90 % and 85 % of that bound. The
    LSTMs stay above the measurement, LSTM1 by 2.2×; why (docs/validation.md has the figures):

    - What bounds them in npusim: the weight stream. Their bytes at the pins' peak take 95 % of
      their time (``dram_share``; the rest is the DRAM's refresh and row changes: tpu-v1 times
      its DRAM with banks), i.e. they run at the roofline the device sustains: npusim cannot be
      slower than the bytes it must move, and nothing else in a chain of FC layers costs more.
    - What the paper says: its roofline (§4) puts the LSTMs under the memory roof too, and
      Table 3's counters attribute most of their cycles to weight stalls and weight shifting —
      the same bound. But the measured TeraOps/s are of production code and, as Table 3's
      caption says, not perfectly consistent with the counters: LSTM0 reaches 85 % of its
      roofline, LSTM1 only 43 % (2.8 of 6.5 TOPS), while MLP0 and MLP1 reach 90 % and 85 %.
    - What the model leaves out, where the rest goes: an LSTM is not a chain of equal square
      FC layers. Its vector layers (gate nonlinearities, element-wise products) and the
      dependence of each time step on the previous one's output (Table 3's RAW stalls and
      non-matrix cycles) serialise work the paper's counters cannot place on the matrix unit,
      and its real layer shapes leave part of each 256×256 weight tile unused (Table 3's
      "unused MACs", highest for LSTM1 of the four). None of that is in Table 1's totals, so an FC-stack
      model of LSTM1 is an upper bound on its throughput, not a prediction.
    """
    spec = TPU_V1_WORKLOADS[name]
    graph, hw = tpu_v1_workload(name), load_hw("tpu-v1")
    report = run(graph, hw)
    macs = sum(op.macs for op in graph.ops)
    tops = 2 * macs / report.seconds / 1e12
    return dict(name=name, tops=tops, measured=spec["measured_tops"], ratio=tops / spec["measured_tops"],
                roofline_tops=2 * spec["batch"] * hw.dram.bandwidth / 1e12,
                dram_share=report.lower_bounds["dram_cycles"] / report.cycles, cycles=report.cycles,
                width=graph.meta["width"], layers=spec["layers"], batch=spec["batch"])


# -- TPU v4 matmul kernels ------------------------------------------------------------------------

def tpu_kernel_rows() -> list[dict]:
    """The measured kernels (tests/fixtures/tpu_kernels/), sorted by MACs then (M, N, K): the
    order the fit/held-out split alternates over. ``us``: measured µs (the mean of the XLA
    ``fusion`` event over the runs), ``scalesim``: SCALE-Sim cycles as that repository computed
    them (its closed form for a 128×128 ws array)."""
    with open(TPU_KERNELS, newline="") as f:
        rows = [dict(m=int(r["dim_m"]), n=int(r["dim_n"]), k=int(r["dim_k"]), us=float(r["fusion_avg"]),
                     scalesim=int(r["scale_sim_cycles"])) for r in csv.DictReader(f)]
    return sorted(rows, key=lambda r: (r["m"] * r["n"] * r["k"], r["m"], r["n"], r["k"]))


@functools.lru_cache(maxsize=None)
def tpu_kernel_seconds(m: int, n: int, k: int) -> float:
    """npusim's time for the fp16 MatMul (M × K) · (K × N) on ``tpu-v4``: one MatMul graph (A an
    input, B a weight, C the output, all in HBM) through the default pipeline, simulated. Not the
    cost model alone: the operands (2-32 MiB each) live in HBM and the larger shapes do not fit
    the 32 MiB scratchpad untiled (4096³: 96 MiB), so the loads, tiles and their overlap are part
    of the time."""
    return run(matmul_graph(m, n, k, dtype="fp16", itemsize=2), load_hw("tpu-v4")).seconds


def linear_fit(x, y) -> tuple[float, float]:
    """(intercept a, slope b) of the least-squares line y ≈ a + b·x."""
    design = np.vstack([np.ones(len(x)), np.asarray(x, dtype=float)]).T
    (a, b), *_ = np.linalg.lstsq(design, np.asarray(y, dtype=float), rcond=None)
    return float(a), float(b)


def r_squared(predicted, measured) -> float:
    """1 − Σ(y − ŷ)² / Σ(y − ȳ)²."""
    y, p = np.asarray(measured, dtype=float), np.asarray(predicted, dtype=float)
    return float(1 - ((y - p) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def mape(predicted, measured) -> float:
    """Mean absolute percentage error, as a fraction: mean(|ŷ − y| / y)."""
    y, p = np.asarray(measured, dtype=float), np.asarray(predicted, dtype=float)
    return float(np.mean(np.abs(p - y) / y))


def held_out_fit(x: list[float], y: list[float]) -> dict:
    """Fit ``y ≈ a + b·x`` (two global parameters: a fixed per-kernel overhead a in µs and a
    scale b, the clock scale for npusim's seconds) on the even positions, evaluate on the odd
    ones: R² and MAPE of the held-out half."""
    a, b = linear_fit(x[0::2], y[0::2])
    predicted = [a + b * v for v in x[1::2]]
    return dict(intercept=a, slope=b, r2=r_squared(predicted, y[1::2]), mape=mape(predicted, y[1::2]),
                fitted=len(x[0::2]), held_out=len(x[1::2]))


def tpu_kernel_figures(step: int = 1) -> dict | None:
    """Measured TPU v4 matmul kernel times (343 shapes, M, N, K in 1024 … 4096 by 512, fp16;
    scalesim-project/SCALE-Sim-validation) against npusim and SCALE-Sim, like for like.

    The shapes sorted by MACs (``tpu_kernel_rows``; every ``step``-th of them for a quicker
    subset), the even positions are the fit half, the odd ones the held-out half. Each model's
    figure x (npusim: simulated µs, ``tpu_kernel_seconds``; SCALE-Sim: the repository's cycles)
    is fitted to the measured µs as y ≈ a + b·x on the fit half — two global parameters, the
    fixed overhead of a kernel launch and a clock scale (TPU v4 runs a matmul over its 8 MXUs,
    SCALE-Sim's count is one 128×128 array's) — and R² and MAPE are taken on the held-out half.
    SCALE-Sim-validation reports R² 0.979 for its own fit over all 343 shapes (``scalesim_all``
    reproduces it). ``cost_model`` is npusim's compute cycles alone (the array model without
    the memory system), as context: how much the simulated loads add to the error."""
    if not TPU_KERNELS.exists():
        return None
    rows = tpu_kernel_rows()[::step]
    measured = [r["us"] for r in rows]
    ours = [tpu_kernel_seconds(r["m"], r["n"], r["k"]) * 1e6 for r in rows]
    hw = load_hw("tpu-v4")
    compute = [compute_cycles("MatMul", matmul_graph(r["m"], r["n"], r["k"], "fp16", 2).ops[0].gemm, 0, 0, hw,
                              cores=hw.cores.count)[0] for r in rows]
    scalesim = [r["scalesim"] for r in rows]
    a, b = linear_fit(scalesim, measured)
    fit = held_out_fit(ours, measured)
    errors = sorted(((fit["intercept"] + fit["slope"] * v) / y - 1, (r["m"], r["n"], r["k"]))
                    for v, y, r in zip(ours, measured, rows))
    return dict(shapes=len(rows), step=step, npusim=fit, scalesim=held_out_fit(scalesim, measured),
                cost_model=held_out_fit(compute, measured),
                scalesim_all=r_squared([a + b * v for v in scalesim], measured),
                worst=errors[:3] + errors[-3:])


# -- first-principles oracles ---------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def gemm_run(scratchpad: int, m: int = 2048, n: int = 2048, k: int = 2048, objective: str = "time"):
    """(plan, report) of one int8 GEMM (``matmul_graph``) on edge-npu with a ``scratchpad``-byte
    scratchpad through the default pipeline (memoised: several tests look at the same run)."""
    graph = matmul_graph(m, n, k)
    hw = load_hw("edge-npu", {"scratchpad.size": scratchpad})
    plan = plan_graph(graph, hw, DEFAULT_PIPELINE, options={"tile_objective": objective})
    return plan, simulate_plan(plan, hw, validated=True)


def gemm_io_figures(scratchpad: int, m: int = 2048, n: int = 2048, k: int = 2048, objective: str = "time") -> dict:
    """Off-chip bytes of one int8 GEMM (``matmul_graph``) on edge-npu with a ``scratchpad``-byte
    scratchpad, planned and simulated with the default pipeline, against two bounds:

    - the square-tile bound 2·M·N·K/b + M·N: a b×b output block kept on chip while the A row
      panel and B column panel stream past it reads 2·b·K bytes per block, (M/b)·(N/b) blocks,
      and writes each output once; b = √(S/8), the largest block whose int32 partial sums fit
      the scratchpad twice over (4 bytes × b² × 2 buffers = S). A tiler that shapes its output
      blocks as the I/O bound says moves about this much (issue 27's target: ≤ 1.5× of it);
    - T. M. Smith, B. Lowery, J. Langou, R. A. van de Geijn, "A Tight I/O Lower Bound for Matrix
      Multiplication" (arXiv:1702.02017, 2019): Q ≥ 2·M·N·K/√S − 2S elements moved by any
      schedule with S elements of fast memory (here 1-byte elements, S the scratchpad's bytes),
      printed for context: it assumes every byte of fast memory holds operands, which a
      double-buffered tile schedule cannot.

    ``bytes`` is what the DMA moved (``offchip_read_bytes + offchip_write_bytes``);
    ``objective`` is the tiler's (``tile_objective``: ``time``, the default, or ``bytes``)."""
    _, report = gemm_run(scratchpad, m, n, k, objective)
    moved = report.offchip_read_bytes + report.offchip_write_bytes
    b = math.sqrt(scratchpad / 8)
    square = 2 * m * n * k / b + m * n
    smith = 2 * m * n * k / math.sqrt(scratchpad) - 2 * scratchpad
    return dict(scratchpad=scratchpad, bytes=moved, square_bound=square, smith_bound=smith, ratio=moved / square,
                smith_ratio=moved / smith, cycles=report.cycles)


def decode_figures(hw_name: str, preset: str = "gpt2-small", kv_len: int = 512) -> dict:
    """One decode step of ``llm:<preset>:decode=<kv_len>`` (int8 weights, fp16 KV cache) through
    the default pipeline on ``hw_name``, against the larger of two bounds no schedule beats:

    - the DRAM roofline: the weight bytes (every weight tensor but the embedding table, of which
      a step gathers one row) and the KV cache the step reads, at ``dram.bandwidth``;
    - the weight-load bound: an R × C array takes in at most one row of C values of its B
      operand (the weights, or the cached keys and values attention multiplies by) per cycle
      — a ws array preloads its stationary weights a row per cycle, an os array streams them
      down its C columns — and a vector unit one value per lane (a GEMV there: each lane one
      output's dot product), so Σ K·N·batch over the GEMMs / (max(C, lanes) × cores) cycles,
      wherever the cost model runs them (``cores.gemv``).

    A GEMV (M = 1) does one MAC per weight, so a decode step is weight-bound either way; issue
    27's targets are ≤ 1.5× on datacenter-npu and ≤ 1.10× on mid-npu."""
    graph, hw = load_graph(f"llm:{preset}:decode={kv_len}"), load_hw(hw_name)
    report = run(graph, hw)
    gathered = {i for op in graph.ops if op.kind == "Gather" for i in op.inputs[:1]}
    weight_bytes = sum(t.size for t in graph.tensors if t.kind == "weight" and t.id not in gathered)
    kv_bytes = sum(graph.tensor(name).size for name in kv_cache_tensors(graph)["read"])
    roofline = (weight_bytes + kv_bytes) / hw.dram.bandwidth
    elements = sum(g.k * g.n * g.batch for op in graph.ops if (g := op.gemm) is not None)
    weight_load = elements / (max(hw.cores.pe_cols, hw.cores.vector_lanes) * hw.cores.count) / hw.clock
    bound = max(roofline, weight_load)
    return dict(hw=hw_name, seconds=report.seconds, roofline=roofline, weight_load=weight_load, bound=bound,
                ratio=report.seconds / bound, weight_bytes=weight_bytes, kv_bytes=kv_bytes)


# -- the table ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    reference: str
    compared: str
    npusim: str
    ratio: str
    tolerance: str
    meets: bool | None  # None: the reference is absent here
    source: str
    test: str  # the CI test holding the row to its tolerance


#: scratchpad and tile objective of each GEMM row: at 64 KiB the square tiles cost edge-npu's
#: os array more time than their bytes save, so the default (time) objective moves more bytes
#: and the row holds the bytes objective (tests/test_validation.py explains)
GEMM_SCRATCHPADS = {"1MiB": (1 << 20, "time"), "256KiB": (256 << 10, "time"), "64KiB": (64 << 10, "bytes")}
DECODE_TARGETS = {"datacenter-npu": 1.5, "mid-npu": 1.10}

#: ZigZag's accelerators mirrored in hw_configs/zigzag-*.yaml (npusim.testing.zigzag.DESIGNS)
ZIGZAG_DESIGNS = ("tpu_like", "edge_tpu_like", "meta_prototype", "ascend_like", "tesla_npu_like")

#: the CI test holding each row to its tolerance (pytest node ids from the repository root); rows
#: whose target the model does not meet yet are xfail(strict) there
ROW_TESTS = {
    "scalesim-untiled": "tests/test_compute_mapping.py::test_os_32x32_matches_what_scalesim_simulated",
    "scalesim-tiled": "tests/test_data_movement.py::test_time_objective_beats_bytes_objective_on_the_array[nhwc-1.08]",
    "zigzag": "tests/test_energy_area.py::test_energy_matches_zigzag_tpu_like_on_resnet18",
    **{f"tpu-v1-{name}": f"tests/test_validation.py::test_tpu_v1_{name.rstrip('01')}[{name}]"
       for name in TPU_V1_WORKLOADS},
    "tpu-kernels": "tests/test_validation.py::test_tpu_kernels_held_out_fit",
    **{f"gemm-{size}": f"tests/test_validation.py::test_tiled_gemm_bytes[{size}]" for size in ("1MiB", "256KiB")},
    "gemm-64KiB": "tests/test_validation.py::test_tiled_gemm_bytes_at_64KiB_trade_bytes_for_time",
    **{f"decode-{hw}": f"tests/test_validation.py::test_decode_step[{hw}]" for hw in DECODE_TARGETS},
    **{f"zigzag-{design}-{what}": f"tests/test_zigzag.py::test_{what}_targets[{design}]"
       for design in ZIGZAG_DESIGNS for what in ("latency", "onchip_energy")},
}


def _size_text(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def _shared_row(key: str, reference: str, compared: str, source: str, figures: dict | None, make) -> Row:
    """A row whose reference lives in ../shared: ``make(figures)`` gives (reference figure text,
    npusim, ratio, tolerance, meets); without the reference the row says it was skipped."""
    if figures is None:
        return Row(reference, compared, "skipped: ../shared absent", "", "", None, source, ROW_TESTS[key])
    theirs, ours, ratio, tolerance, meets = make(figures)
    return Row(f"{reference}: {theirs}", compared, ours, ratio, tolerance, meets, source, ROW_TESTS[key])


def reference_rows() -> list[Row]:
    """The rows against other simulators: SCALE-Sim untiled and tiled, ZigZag."""
    scalesim = "shared/reference/scalesim (SCALE-Sim v3)"

    def untiled(f):
        return ("{:,} cycles".format(f["scalesim"]), "{:,} ({}/{} layers equal)".format(
            f["npusim"], f["equal_layers"], f["layers"]), f"{f['npusim'] / f['scalesim']:.3f}", "every layer exact",
            f["equal_layers"] == f["layers"])

    def tiled(f):
        ratio = f["npusim"] / f["scalesim"]
        return ("{:,} cycles".format(f["scalesim"]), "{:,}".format(f["npusim"]), f"{ratio:.3f}", "≤ 1.08",
                ratio <= 1.08)

    def zigzag(f):
        ours, theirs = f["npusim"]["total_pj"], f["zigzag"]["energy_pJ"]
        return (f"{theirs / 1e6:.1f} µJ", f"{ours / 1e6:.1f} µJ", f"{ours / theirs:.3f}", "±10 %",
                abs(ours / theirs - 1) <= 0.10)

    return [
        _shared_row("scalesim-untiled", "SCALE-Sim v3", "ResNet-18 array cycles per layer, untiled, 32×32 os",
                    scalesim, scalesim_untiled_figures(), untiled),
        _shared_row("scalesim-tiled", "SCALE-Sim v3 (untiled)",
                    "the same, tiled at 192 KiB (cycles summed over tiles, nhwc)", scalesim,
                    scalesim_tiled_figures(), tiled),
        _shared_row("zigzag", "ZigZag tpu_like", "ResNet-18 total energy, layer by layer, tpu-like",
                    "shared/reference/zigzag (ZigZag 3.9.1)", zigzag_figures(), zigzag),
    ]


def zigzag_design_rows() -> list[Row]:
    """Two rows per ZigZag accelerator mirrored in hw_configs/ (``npusim.testing.zigzag``):
    ResNet-18's latency layer by layer, and its on-chip energy by level."""
    from npusim.testing import zigzag  # lazy: a cycle, npusim.testing.zigzag imports this module

    source = "tests/fixtures/zigzag (ZigZag 3.9.1)"
    t = zigzag.TARGETS
    table = []
    for design in ZIGZAG_DESIGNS:
        if design not in zigzag.available():
            continue
        result = zigzag.compare(design)
        total, missed = result["total"], zigzag.misses(result)
        inner = [r for r in result["layers"] if not r["dram_bound"]]
        worst = max((zigzag.ratio(r["latency"]) for r in inner), key=lambda x: abs(x - 1), default=1.0)
        ours, theirs = total["latency"]
        table.append(Row(f"ZigZag {design}: {theirs:,.0f} cycles",
                         f"ResNet-18 latency, layers alone, {result['hardware']} (worst layer not DRAM-bound)",
                         f"{ours:,.0f} (worst layer {worst:.2f}×)", f"{ours / theirs:.3f}",
                         f"±{t['latency_total']:.0%} total, ±{t['latency_layer']:.0%} a layer",
                         not any(m.startswith("latency") for m in missed), source,
                         ROW_TESTS[f"zigzag-{design}-latency"]))
        ours, theirs = total["onchip"]
        level, pair = max(total["levels"].items(), key=lambda kv: abs(zigzag.ratio(kv[1]) - 1))
        table.append(Row(f"ZigZag {design}: {theirs / 1e6:.1f} µJ on chip",
                         "on-chip energy (MACs, local levels, scratchpad), worst level",
                         f"{ours / 1e6:.1f} µJ ({level} {zigzag.ratio(pair):.2f}×)", f"{ours / theirs:.3f}",
                         f"±{t['onchip_total']:.0%} total, ±{t['onchip_level']:.0%} a level",
                         not any(not m.startswith("latency") for m in missed), source,
                         ROW_TESTS[f"zigzag-{design}-onchip_energy"]))
    return table


def rows(kernel_step: int = 1, gemm_scratchpads=tuple(GEMM_SCRATCHPADS)) -> list[Row]:
    """Every row of the table (the kernels on every ``kernel_step``-th shape; the GEMM oracle at
    the ``gemm_scratchpads`` named in ``GEMM_SCRATCHPADS``)."""
    table = reference_rows() + zigzag_design_rows()
    for name in TPU_V1_WORKLOADS:
        f = tpu_v1_figures(name)
        mlp = name.startswith("mlp")
        tolerance = "±10 %" if mlp else "≥ 1, ≤ 1.05× roofline"
        meets = abs(f["ratio"] - 1) <= 0.10 if mlp else (f["ratio"] >= 1 and f["tops"] <= 1.05 * f["roofline_tops"])
        table.append(Row(f"TPU v1 {name.upper()}: {f['measured']} TOPS measured",
                         f"TeraOps/s, {f['layers']} FC layers {f['width']}² int8, batch {f['batch']}",
                         f"{f['tops']:.2f} TOPS (roofline {f['roofline_tops']:.1f})", f"{f['ratio']:.3f}", tolerance,
                         meets, PAPER_TPU_V1, ROW_TESTS[f"tpu-v1-{name}"]))
    kernels = tpu_kernel_figures(kernel_step)
    if kernels is None:  # an installed package without the repository's tests/fixtures
        table.append(Row("TPU v4 matmul kernels", "held-out R², MAPE of µs", f"skipped: {TPU_KERNELS} absent", "", "",
                         None, SCALESIM_VALIDATION, ROW_TESTS["tpu-kernels"]))
    else:
        ours, theirs = kernels["npusim"], kernels["scalesim"]
        meets = ours["r2"] >= theirs["r2"] - 0.02 and ours["mape"] <= theirs["mape"] + 0.03
        table.append(Row(f"TPU v4 matmul kernels: SCALE-Sim R² {theirs['r2']:.3f}, MAPE {theirs['mape']:.1%} "
                         f"(its own fit on all {kernels['shapes']}: R² {kernels['scalesim_all']:.3f})",
                         f"held-out R², MAPE of µs ({ours['held_out']} of {kernels['shapes']} shapes, "
                         "2-parameter fit)",
                         f"R² {ours['r2']:.3f}, MAPE {ours['mape']:.1%}", f"R² {ours['r2'] - theirs['r2']:+.3f}",
                         "R² ≥ SCALE-Sim's − 0.02, MAPE ≤ SCALE-Sim's + 3 pts", meets, SCALESIM_VALIDATION,
                         ROW_TESTS["tpu-kernels"]))
    for label in gemm_scratchpads:
        size, objective = GEMM_SCRATCHPADS[label]
        f = gemm_io_figures(size, objective=objective)
        bounds = f"square-tile bound {f['square_bound'] / 1e6:.1f} MB (Smith 2019: {f['smith_bound'] / 1e6:.1f} MB)"
        how = "" if objective == "time" else f", tile_objective={objective}"
        table.append(Row(bounds, f"off-chip bytes, 2048³ int8 GEMM, edge-npu at {_size_text(size)}{how}",
                         f"{f['bytes'] / 1e6:.1f} MB ({f['smith_ratio']:.2f}× Smith)", f"{f['ratio']:.3f}", "≤ 1.5",
                         f["ratio"] <= 1.5, "first principles (issue 27)", ROW_TESTS[f"gemm-{label}"]))
    for hw_name, target in DECODE_TARGETS.items():
        f = decode_figures(hw_name)
        table.append(Row(f"max(DRAM {f['roofline'] * 1e6:.0f} µs, weight load {f['weight_load'] * 1e6:.0f} µs)",
                         f"GPT-2-small decode step (KV 512), {hw_name}", f"{f['seconds'] * 1e6:.0f} µs",
                         f"{f['ratio']:.2f}", f"≤ {target:.2f}", f["ratio"] <= target, "first principles (issue 27)",
                         ROW_TESTS[f"decode-{hw_name}"]))
    return table


def markdown(table: list[Row]) -> str:
    """The table as Markdown: reference, what is compared, npusim, ratio, tolerance, meets, source."""
    head = ["reference", "what is compared", "npusim", "ratio", "tolerance", "meets", "source"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        meets = "" if r.meets is None else ("yes" if r.meets else "**no**")
        cells = [r.reference, r.compared, r.npusim, r.ratio, r.tolerance, meets, r.source]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
