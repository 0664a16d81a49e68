"""The validation table (npusim/testing/validation.py; README "Validation", docs/validation.md):
one test per row, each with its tolerance and source in its docstring. The SCALE-Sim per-layer
rows and the ZigZag row are held by the older tests they name (test_compute_mapping.py,
test_data_movement.py, test_energy_area.py), which compute the same figures.

Rows whose issue-27 target the model does not meet yet are ``xfail(strict=True)`` with today's
figure in the reason: the test fails the moment a change meets the target, and the mark goes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from npusim.cli import main
from npusim.errors import TraceError
from npusim.graph.generators import TPU_V1_WORKLOADS, fc_stack
from npusim.testing import validation
from npusim.workflow import load_graph, load_hw

TESTS = Path(__file__).resolve().parent


# -- TPU v1 (Jouppi et al., ISCA 2017) -------------------------------------------------------------

@pytest.mark.parametrize("name", ["mlp0", "mlp1"])
def test_tpu_v1_mlp(name):
    """TPU v1 MLP0 (12.3 TOPS) and MLP1 (9.7 TOPS), Table 3's measured TeraOps/s, against npusim on
    hw_configs/tpu-v1.yaml (Table 2's figures, §2's double-buffered weight tiles) with Table 1's
    workloads as equal square int8 FC layers. Tolerance ±10 % (issue 27's target). Today 1.02×
    and 1.00×: both weight-stream bound, as the paper's roofline says; the default fold model
    (no fold overlap) gave 0.87× and 0.79×."""
    f = validation.tpu_v1_figures(name)
    assert f["measured"] == TPU_V1_WORKLOADS[name]["measured_tops"]
    assert abs(f["ratio"] - 1) <= 0.10, f


@pytest.mark.parametrize("name", ["lstm0", "lstm1"])
def test_tpu_v1_lstm(name):
    """TPU v1 LSTM0 (3.7 TOPS) and LSTM1 (2.8 TOPS), Table 3, modelled as FC stacks: npusim gives
    the weight-streaming roofline, not the measurement (today 1.11× and 2.20× of it); why is in
    ``validation.tpu_v1_figures``' docstring and docs/validation.md. What is held: npusim is an
    upper bound on the measurement (ratio ≥ 1: the recurrence and vector layers it leaves out
    only add time), within 10 % of the 2·batch·34 GB/s weight-stream roofline, and its time is
    the DRAM stream's (its bytes at the pins' peak take ≥ 90 % of it). 10 %, not less: tpu-v1's
    DRAM has banks (ddr4-3200, an assumption for its DDR3), whose refresh alone takes
    tRFC/tREFI = 350 ns / 7.8 µs = 4.5 % of the pins' time, and row changes more (94–95 % of the
    roofline today). Source: Table 3 (measured), Table 2 (34 GB/s)."""
    f = validation.tpu_v1_figures(name)
    assert f["ratio"] >= 1.0, f
    assert f["roofline_tops"] * 0.90 <= f["tops"] <= f["roofline_tops"] * 1.05, f
    assert f["dram_share"] >= 0.90, f


def test_tpu_v1_config_holds_table_2():
    """hw_configs/tpu-v1.yaml: Table 2's 256×256 8-bit MACs at 700 MHz, 34 GB/s and 24 MiB
    Unified Buffer, §2's weight-stationary array with a double-buffered weight tile
    (``fold_overlap``): 92 TOPS peak, as Table 2 says."""
    hw = load_hw("tpu-v1")
    assert (hw.clock, hw.cores.pe_rows, hw.cores.pe_cols, hw.cores.dataflow) == (700e6, 256, 256, "ws")
    assert hw.cores.fold_overlap and hw.cores.count == 1
    assert (hw.scratchpad.size, hw.dram.bandwidth) == (24 << 20, 34e9)
    assert 2 * hw.cores.pe_rows * hw.cores.pe_cols * hw.clock / 1e12 == pytest.approx(92, rel=0.01)


def test_tpu_v1_workloads_hold_table_1_weights():
    """Table 1's weight counts, split into equal square layers: within 0.1 % (rounding the width)."""
    for name, spec in TPU_V1_WORKLOADS.items():
        graph = load_graph(f"tpuv1:{name}")
        weights = sum(t.size for t in graph.tensors if t.kind == "weight")
        assert weights == pytest.approx(spec["weights"], rel=1e-3), name
        assert sum(op.kind == "MatMul" for op in graph.ops) == spec["layers"]
        assert all(op.gemm.m == spec["batch"] for op in graph.ops if op.gemm is not None)
    with pytest.raises(TraceError, match="no such TPU v1 workload"):
        load_graph("tpuv1:cnn0")
    with pytest.raises(TraceError, match="layers = 0"):
        fc_stack("x", 0, 100, 1)


def test_tpuv1_names_run_from_the_command_line(capsys):
    assert main(["simulate", "tpuv1:mlp1", "--hw", "tpu-v1"]) == 0
    assert capsys.readouterr().out.startswith("tpuv1-mlp1@fused on tpu-v1 ")


# -- TPU v4 matmul kernels (SCALE-Sim-validation) --------------------------------------------------

def _check_kernels(f):
    ours, theirs = f["npusim"], f["scalesim"]
    assert ours["held_out"] >= f["shapes"] // 2
    assert ours["slope"] > 0 and theirs["slope"] > 0
    assert ours["r2"] >= theirs["r2"] - 0.02, f
    assert ours["mape"] <= theirs["mape"] + 0.03, f


def test_tpu_kernels_held_out_fit():
    """Measured TPU v4 matmul kernels (scalesim-project/SCALE-Sim-validation @45818f1, MIT;
    tests/fixtures/tpu_kernels/) against npusim on hw_configs/tpu-v4.yaml, each shape one MatMul
    simulated through the default pipeline; two global parameters (per-kernel overhead, clock
    scale) fitted on alternate shapes sorted by MACs, R² and MAPE on the others, next to
    SCALE-Sim's closed form fitted the same way. Tolerance: R² at most 0.02 below SCALE-Sim's,
    MAPE at most 3 points above (no target in issue 27; a floor against regressions). Every 4th
    shape here (86 of 343, ~10 s): today R² 0.977 / MAPE 8.7 % against SCALE-Sim's 0.985 / 7.3 %;
    every shape with --slow."""
    _check_kernels(validation.tpu_kernel_figures(step=4))


@pytest.mark.slow
def test_tpu_kernels_held_out_fit_every_shape():
    """As above on all 343 shapes (~40 s): today npusim R² 0.971 / MAPE 10.8 % on the held-out
    171, SCALE-Sim 0.980 / 9.6 %. SCALE-Sim's own fit over every shape reproduces the R² 0.979 its
    repository reports (data/data_matmul7/regression_analysis_summary.md: 0.9786), which checks the
    fixture."""
    f = validation.tpu_kernel_figures(step=1)
    assert f["shapes"] == 343
    assert f["scalesim_all"] == pytest.approx(0.9786, abs=5e-4)
    _check_kernels(f)


# -- first-principles oracles ----------------------------------------------------------------------

@pytest.mark.parametrize("scratchpad", [
    pytest.param(1 << 20, id="1MiB"),
    pytest.param(256 << 10, id="256KiB"),
])
def test_tiled_gemm_bytes(scratchpad):
    """Off-chip bytes of a 2048³ int8 GEMM on edge-npu with a 1 MiB / 256 KiB scratchpad, default
    pipeline, ≤ 1.5× the square-tile bound 2·M·N·K/b + M·N, b = √(S/8) (issue 27's target; the
    bound's derivation in ``validation.gemm_io_figures``); Smith et al. 2019's lower bound
    Q ≥ 2·M·N·K/√S − 2S is below what any schedule moves. At 64 KiB see the next test."""
    f = validation.gemm_io_figures(scratchpad)
    assert f["bytes"] >= f["smith_bound"]  # no schedule moves fewer bytes
    assert f["ratio"] <= 1.5, f


@pytest.mark.slow
def test_tiled_gemm_bytes_at_64KiB_trade_bytes_for_time():
    """The same GEMM at 64 KiB: tiles shaped as the I/O bound says (``tile_objective=bytes``)
    move ≤ 1.5× the square-tile bound, but on edge-npu they are slower, and the default
    (``time``) objective rightly picks a tiling that moves more bytes and finishes sooner.
    Why: the square blocks need short reduction slices (a 64×64 block and its slices fit
    64 KiB double-buffered only with K slices of 64), and on an output-stationary array that
    does not overlap folds (edge-npu mirrors SCALE-Sim) each slice of each fold pays the array's
    fill/drain skew again: 32 slices × 30 cycles on top of 64 per fold, +31 % array cycles,
    while the deep-K tiling's extra bytes stay under the compute time. A config whose folds
    overlap (``cores.fold_overlap``) or whose accumulators hold the block (``accumulator_size``)
    makes the split free, and the time objective then picks the square blocks. Both runs plan
    and simulate ~100 k commands: --slow."""
    by_bytes = validation.gemm_io_figures(64 << 10, objective="bytes")
    assert by_bytes["ratio"] <= 1.5, by_bytes
    by_time = validation.gemm_io_figures(64 << 10)
    assert by_time["cycles"] < by_bytes["cycles"], (by_time, by_bytes)
    assert by_time["bytes"] > by_bytes["bytes"]


@pytest.mark.parametrize("hw_name, target", [
    pytest.param("datacenter-npu", 1.5, id="datacenter-npu"),
    pytest.param("mid-npu", 1.10, id="mid-npu"),
])
def test_decode_step(hw_name, target):
    """A GPT-2-small decode step (KV length 512) against max(DRAM roofline, array weight-load
    bound) (``validation.decode_figures``): issue 27's targets ≤ 1.5× on datacenter-npu (weight
    load bound, 519 µs) and ≤ 1.10× on mid-npu (DRAM bound, 2782 µs). Before them 3.35× and
    1.22×: each GEMV fold paid preload + fill/drain on the array (datacenter-npu now pipelines
    its folds and runs GEMVs on its vector lanes), and the weight loads were not overlapped
    with compute (mid-npu: ops now stream their loads band by band)."""
    f = validation.decode_figures(hw_name)
    assert f["seconds"] >= f["bound"]  # both are bounds no run beats
    assert f["ratio"] <= target, f


# -- the table itself ------------------------------------------------------------------------------

def test_every_row_names_a_test_that_exists():
    """Each row of the table names the CI test that holds it (``validation.ROW_TESTS``):
    renaming or deleting one must update the table. Checked on the source (collecting the four
    files would take seconds): the function exists, and its parameter id's parts appear in it."""
    for node in validation.ROW_TESTS.values():
        file, _, name = node.partition("::")
        function, _, params = name.partition("[")
        source = (TESTS.parent / file).read_text()
        found = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == function]
        assert found, node
        decorators = "".join(ast.get_source_segment(source, d) or "" for d in found[0].decorator_list)
        assert all(part in decorators for part in params.rstrip("]").split("-") if part), node


def test_readme_shows_every_row():
    """README "Validation" holds the table ``benchmarks/validation_table.py --update`` writes: one
    row per entry of ``validation.ROW_TESTS``, in the table's column order (its figures are
    regenerated, not checked here: that takes a minute)."""
    readme = (TESTS.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- BEGIN VALIDATION TABLE", 1)[1].split("<!-- END VALIDATION TABLE -->", 1)[0]
    lines = [line for line in table.splitlines() if line.startswith("|")]
    assert lines[0] == validation.markdown([]).splitlines()[0]
    assert len(lines) - 2 == len(validation.ROW_TESTS)
