"""Unrolled arrays and local memory levels (``cores.unroll``, ``cores.levels``) against ZigZag.

ZigZag 3.9.1's results for ResNet-18 on its bundled accelerators are fixtures
(``tests/fixtures/zigzag/``, made by ``scripts/zigzag_reference.py``); the accelerators are
mirrored in ``hw_configs/zigzag-*.yaml``. Two levels of check:

- **the per-op model** (``npusim.hw.mapping``), fast: every layer's temporal cycles equal ZigZag's
  ideal temporal cycles, and costed with the temporal mapping ZigZag chose, every local level's
  energy equals ZigZag's (to 0.1 %). This is the model itself; it does not depend on which
  mapping either search picks.
- **the whole simulation**, slow (``--slow``): each layer alone, planned and simulated, against
  ZigZag's latency and energy by level, with the targets of issue 30 (``npusim.testing.zigzag.
  TARGETS``). Where the two disagree by more than a target it is because they choose different
  mappings or move DRAM data differently, not because a given mapping is costed differently (the
  fast check proves that); ``test_whole_layers_against_zigzag`` says which and why.
"""

from __future__ import annotations

import functools
import math
import textwrap

import pytest

from npusim.errors import ConfigError
from npusim.graph.model import ConvLoops, Gemm
from npusim.hw import costs, mapping
from npusim.hw.loader import hardware_from_mapping, hardware_to_dict, load_hardware
from npusim.hw.silicon import area_mm2
from npusim.testing import zigzag
from npusim.testing.validation import zigzag_layer_graph
from npusim.workflow import load_graph, plan_graph, simulate_plan

DESIGNS = zigzag.available()


def error_of(tmp_path, text: str) -> str:
    path = tmp_path / "x.yaml"
    path.write_text("extends: tpu-like\n" + textwrap.dedent(text))
    with pytest.raises(ConfigError) as caught:
        load_hardware(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- the config ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(zigzag.DESIGNS.values()))
def test_mirrors_load_and_round_trip(name):
    hw = load_hardware(name)
    assert hw.cores.pes == 1024  # every mirror has ZigZag's 1,024 MACs
    assert hardware_from_mapping(hardware_to_dict(hw)) == hw
    assert hw.cores.levels and all(lv.read_energy is not None for lv in hw.cores.levels)


def test_unroll_text_form_and_instances():
    hw = load_hardware("zigzag-meta-prototype", overrides={"cores.unroll": "K16xC4xOX4xOY4"})
    assert hw.cores.unroll == (("K", 16), ("C", 4), ("OX", 4), ("OY", 4))
    rf_1b = hw.cores.levels[0]  # shared over OX, OY: one per K x C position
    assert hw.cores.instances(rf_1b) == 16 * 4


@pytest.mark.parametrize("text, expected", [
    ("cores: {unroll: {K: 32, Q: 2}}\n", "cores.unroll"),
    ("cores: {unroll: {K: 0}}\n", "cores.unroll"),
    ("cores: {stationary_register: 0, accumulator_register: 0, unroll: {K: 32}, systolic: [C]}\n", "cores.systolic"),
    ("cores: {stationary_register: 0, accumulator_register: 0, unroll: {K: 32},\n"
     "        levels: {rf: {operands: [W], size: 1B, shared_over: [OX], read_energy: 0.1pJ, write_energy: 0.1pJ}}}\n",
     "cores.levels.rf.shared_over"),
    ("cores: {stationary_register: 0, accumulator_register: 0, unroll: {K: 32},\n"
     "        levels: {rf: {operands: [W], size: 16B}}}\n", "cores.levels.rf.size"),
    ("cores: {stationary_register: 0, accumulator_register: 0, unroll: {K: 32},\n"
     "        levels: {rf: {operands: [X], size: 2KiB}}}\n", "cores.levels.rf.operands"),
    ("cores: {stationary_register: 0, accumulator_register: 0, unroll: {K: 32},\n"
     "        levels: {rf: {operandz: [W]}}}\n", "operandz"),
])
def test_bad_unrolled_core_is_one_line_naming_the_field(tmp_path, text, expected):
    message = error_of(tmp_path, text)
    assert expected in message and "x.yaml" in message


def test_registers_beside_an_unrolled_core_name_where_they_were_set(tmp_path):
    message = error_of(tmp_path, "cores: {unroll: {K: 32}}\n")  # tpu-like's R x C registers remain
    assert "hw_configs/tpu-like.yaml (extended by " in message and "x.yaml): cores.stationary_register = '128B'" in message


# -- the per-op model against ZigZag's own mapping -------------------------------------------------

@pytest.mark.parametrize("design", DESIGNS)
def test_model_costs_zigzags_mapping_as_zigzag(design):
    """For every layer: npusim's spatial mapping gives ZigZag's temporal cycles, and ZigZag's
    chosen temporal mapping, costed by npusim, gives ZigZag's energy on every local level."""
    hw = load_hardware(zigzag.DESIGNS[design])
    local = [lv.name for lv in hw.cores.levels]
    for layer in zigzag.reference(design)["layers"]:
        r = zigzag.replay(design, layer["name"], search=False)
        assert r["replayed_cycles"] == r["best_cycles"] == layer["ideal_temporal_cycles"], layer["name"]
        for name in local:
            assert r["replayed"][name] == pytest.approx(layer["energy_per_level_pJ"][name], rel=1e-3), \
                (layer["name"], name)


def test_best_mapping_is_never_slower_or_costlier_than_zigzags():
    """npusim's search ranks (cycles, energy): on ZigZag's cycles it never spends more local and
    scratchpad energy than ZigZag's mapping costed by the same model."""
    design = DESIGNS[0]
    for layer in zigzag.reference(design)["layers"][:8]:
        r = zigzag.replay(design, layer["name"])
        assert sum(r["best"].values()) <= sum(r["replayed"].values()) * (1 + 1e-9), layer["name"]


# -- the mechanism: what unrolling and levels change -----------------------------------------------

def test_adder_tree_over_c_shares_output_registers():
    """rf_2B is shared over C (an adder tree reduces C): K x OX x OY instances, and each output's
    partial sum is written once per C-block, not once per MAC as an R x C PE register would be."""
    hw = load_hardware("zigzag-edge-tpu-like")
    rf_2b = next(lv for lv in hw.cores.levels if lv.name == "rf_2B")
    assert hw.cores.instances(rf_2b) == 8 * 4 * 4
    graph = load_graph("resnet18")
    op = graph.op("/layer1/layer1.0/conv1/Conv")
    cost = costs.unrolled_cost(op.gemm, hw, costs.operand_bits(op, graph), op.kind)
    assert cost.levels["rf_2B"].writes <= op.macs / 8 * (1 + 1e-9)


def test_a_reduction_slice_with_wide_partial_sums_maps_on_narrow_accumulators():
    """A tile of a reduction the tiler split writes its partial sums as an int32 tensor; on
    zigzag-ascend-like (16-bit output registers, C unrolled by 16) a slice of C = 16 has its
    sums final in the registers, which hold 16 bits: the core's results are no wider than its
    partial sums (the tensor keeps its 4 bytes an element), where it used to find no mapping
    at all (an internal error at ``--budget 32KiB`` on mnasnet1_0)."""
    hw = load_hardware("zigzag-ascend-like")
    gemm = Gemm(m=49, n=32, k=16, loops=ConvLoops(b=1, g=1, k=32, c=16, oy=7, ox=7, fy=1, fx=1, sy=1, sx=1,
                                                 dy=1, dx=1, iy=7, ix=7))
    nest = costs.loop_nest(gemm, hw, (8, 8, 32), "Conv")
    assert nest.o_bits == nest.psum_bits == 16
    cost = costs.unrolled_cost(gemm, hw, (8, 8, 32), "Conv")
    assert cost.cycles >= gemm.m * gemm.n * gemm.k / 1024


def test_unrolling_c_speeds_up_conv1_and_changes_latency():
    """conv1 (C = 3): an array unrolling C by 8 idles 5/8 of it; one unrolling OX/OY does not.
    Designs with the same 1,024 MACs get different cycles (the issue's first complaint)."""
    graph = load_graph("resnet18")
    op = graph.op("/conv1/Conv")
    cycles = {n: costs.array_cycles(op.gemm, load_hardware(n), bits=(8, 8, 8), kind=op.kind)
              for n in ("zigzag-edge-tpu-like", "zigzag-meta-prototype")}
    assert cycles["zigzag-edge-tpu-like"] > 1.5 * cycles["zigzag-meta-prototype"]
    assert math.isclose(cycles["zigzag-meta-prototype"], op.macs / 1024 * 2 / 1.5, rel_tol=1e-9)  # C = 3 on 2: 2 passes of 1.5


def test_simulation_reports_energy_and_area_by_level():
    hw = load_hardware("zigzag-meta-prototype")
    graph = load_graph("resnet18")
    layer = zigzag_layer_graph(graph, graph.op("/layer3/layer3.0/downsample/downsample.0/Conv"))
    report = simulate_plan(plan_graph(layer, hw, zigzag.PIPELINE), hw, validated=True)
    by_level = report.energy_by_level_pj
    assert list(by_level) == [lv.name for lv in hw.cores.levels] + ["scratchpad"]
    assert all(v > 0 for v in by_level.values())
    assert report.energy_pj["register_file"] == pytest.approx(sum(by_level[lv.name] for lv in hw.cores.levels))
    assert by_level["scratchpad"] == pytest.approx(report.energy_pj["scratchpad_read"]
                                                   + report.energy_pj["scratchpad_write"])
    assert "  by level       rf_1B " in report.summary()
    # a bigger weight SRAM costs more per access (the given figures stand in for CACTI's)
    bigger = load_hardware("zigzag-meta-prototype", overrides={"cores.levels.sram_64KB.read_energy": "53.12pJ"})
    again = simulate_plan(plan_graph(layer, bigger, zigzag.PIPELINE), bigger, validated=True)
    assert again.energy_by_level_pj["sram_64KB"] > by_level["sram_64KB"] * 1.5
    assert area_mm2(load_hardware("zigzag-meta-prototype", overrides={"cores.levels.sram_64KB.area": None}))[
        "local_levels"] > 0


def test_rxc_cores_unchanged():
    """An R x C core keeps the SCALE-Sim fold model and reports its registers as one level."""
    hw = load_hardware("tpu-like")
    assert not hw.cores.unroll
    assert mapping.SCRATCHPAD == "scratchpad"
    graph = load_graph("resnet18")
    layer = zigzag_layer_graph(graph, graph.op("/layer3/layer3.0/downsample/downsample.0/Conv"))
    report = simulate_plan(plan_graph(layer, hw, zigzag.PIPELINE), hw, validated=True)
    assert list(report.energy_by_level_pj) == ["register_file", "scratchpad"]
    assert area_mm2(hw)["local_levels"] == 0


# -- the whole simulation (slow) -------------------------------------------------------------------

@functools.cache
def _compared(design: str) -> dict:
    return zigzag.compare(design)


#: Why three designs miss the on-chip energy targets (docs/validation.md): the model is not the
#: cause — ZigZag's own mapping costs the same in npusim as in ZigZag, level for level
#: (test_model_costs_zigzags_mapping_as_zigzag); the searches pick different mappings. ZigZag ranks
#: by its latency, which includes on-loading the first data from DRAM, off-loading the last and
#: stalls on DRAM, so of mappings with the same temporal cycles it takes one that saves a few
#: hundred of those cycles even when it spends several times the energy of an SRAM level; on
#: layer4 of meta_prototype (2.36 MB of weights above its 1 MiB weight SRAM) it keeps C above that
#: SRAM and spills 16-bit partial sums to sram_1MB_A 256 times (40 uJ a layer), where npusim's tiler
#: splits the layer by output channels in its 2 MiB scratchpad. npusim ranks by the core's cycles,
#: then on-chip energy, and leaves DRAM to its DMA, which overlaps it with compute: of equally fast
#: mappings it takes the cheapest, as a compiler for the design would. Its figure is the lower one
#: on every level that misses (test_onchip_energy_never_above_zigzag). ZigZag agrees when handed
#: npusim's loop order (scripts/zigzag_mapping_check.py): it costs that mapping with npusim's
#: per-level energies, +0.02 % to +2.2 % latency and -14 % to -65 % on-chip energy on the layers
#: docs/validation.md lists.
ENERGY_MISSES = {
    "meta_prototype": "on-chip 0.67x ZigZag's, scratchpad 0.35x (ZigZag's layer4 partial-sum spills)",
    "ascend_like": "on-chip 0.80x ZigZag's, sram_256KB_O 0.33x (ZigZag's latency-first mapping choice)",
    "tesla_npu_like": "on-chip 0.76x ZigZag's, sram_1KB_I 0.56x (ZigZag's latency-first mapping choice)",
}


def _energy_param(design: str):
    if design in ENERGY_MISSES:
        return pytest.param(design, marks=pytest.mark.xfail(strict=True, reason=ENERGY_MISSES[design]))
    return design


@pytest.mark.slow
@pytest.mark.parametrize("design", ["tpu_like", "edge_tpu_like", "meta_prototype", "ascend_like", "tesla_npu_like"])
def test_latency_targets(design):
    """ResNet-18 layer by layer on the mirror: latency within ±10 % of ZigZag's in total and ±25 %
    on every layer that is not DRAM-bound (issue 30). npusim's isolated layer adds what its DMA
    cannot hide before the first band and after the last (up to +17 % on a non-DRAM-bound layer);
    on DRAM-bound layers npusim reads the whole input of a stride-2 1x1 downsample, ZigZag only
    the pixels it uses (2x there, excluded by the target)."""
    result = _compared(design)
    missed = [m for m in zigzag.misses(result) if m.startswith("latency")]
    assert not missed, zigzag.table(result)


@pytest.mark.slow
@pytest.mark.parametrize("design", [_energy_param(d) for d in
                                    ("tpu_like", "edge_tpu_like", "meta_prototype", "ascend_like", "tesla_npu_like")])
def test_onchip_energy_targets(design):
    """On-chip energy (MACs and every level but DRAM) within ±15 % of ZigZag's in total, and every
    local level and the scratchpad (against ZigZag's top SRAMs) within ±30 % (issue 30). Met on
    tpu_like and edge_tpu_like; the others are ``ENERGY_MISSES`` (why above)."""
    result = _compared(design)
    missed = [m for m in zigzag.misses(result) if not m.startswith("latency")]
    assert not missed, zigzag.table(result)


@pytest.mark.slow
@pytest.mark.parametrize("design", DESIGNS)
def test_onchip_energy_never_above_zigzag(design):
    """Where the two disagree, npusim's figure is the lower one: never more on-chip energy than
    ZigZag's beyond the tolerance, on no level; the MACs equal and DRAM within 5 % (the same
    bytes, in whole bursts)."""
    result = _compared(design)
    total = result["total"]
    assert zigzag.ratio(total["onchip"]) <= 1 + zigzag.TARGETS["onchip_total"], zigzag.table(result)
    for name, pair in total["levels"].items():
        assert zigzag.ratio(pair) <= 1 + zigzag.TARGETS["onchip_level"], (name, zigzag.table(result))
    assert zigzag.ratio(total["dram"]) == pytest.approx(1, abs=0.05)
    assert zigzag.ratio(total["mac"]) == pytest.approx(1, rel=1e-9)


@pytest.mark.slow
def test_designs_zigzag_separates_are_separated_in_the_same_order():
    totals = {d: _compared(d)["total"]["latency"] for d in DESIGNS}
    for a in DESIGNS:
        for b in DESIGNS:
            ours_a, theirs_a = totals[a]
            ours_b, theirs_b = totals[b]
            if theirs_a > 1.10 * theirs_b:
                assert ours_a > ours_b, (a, b, totals)
