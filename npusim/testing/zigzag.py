"""npusim against ZigZag on ZigZag's own accelerators: ResNet-18 layer by layer.

ZigZag (``zigzag-dse`` 3.9.1, KU Leuven MICAS) is not a dependency: ``scripts/zigzag_reference.py``
ran it once per accelerator and stored its per-layer results in ``tests/fixtures/zigzag/``. Each
accelerator is mirrored by hand in ``hw_configs/`` (``DESIGNS``: every figure quoted from ZigZag's
YAML), and each of ResNet-18's 21 conv/FC layers runs alone on it as ZigZag costs it — its input
and weights from DRAM, its output back to DRAM (``zigzag_layer_graph``) — planned with
``tile+default+arena+belady`` and simulated. Compared per layer and in total:

- **latency**: npusim's simulated cycles (compute, DMA and their overlap) against ZigZag's
  ``latency_total2`` (ideal temporal cycles + stalls + on/off-loading + drain);
- **on-chip energy by level**: each local level (``cores.levels``, named as ZigZag names them)
  against ZigZag's level of that name; the scratchpad against the sum of ZigZag's top SRAMs (the
  levels right below DRAM that npusim has no ``cores.levels`` entry for); the MACs;
- **DRAM energy**: npusim's DRAM read + write energy against ZigZag's ``dram`` level.

A layer is *DRAM-bound* in ZigZag when its DRAM traffic at the DRAM port's bandwidth takes longer
than its ideal temporal cycles (ZigZag then stalls on DRAM; npusim overlaps the DMA with compute
differently, ``docs/validation.md``).
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

from npusim.hw import costs, mapping
from npusim.hw.config import CACTI_MIN_BYTES, Hardware
from npusim.testing.validation import zigzag_layer_graph
from npusim.workflow import load_graph, load_hw, plan_graph, simulate_plan

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "zigzag"
#: ZigZag accelerator (fixture name) -> the npusim config mirroring it
DESIGNS = {
    "tpu_like": "zigzag-tpu-like",
    "edge_tpu_like": "zigzag-edge-tpu-like",
    "meta_prototype": "zigzag-meta-prototype",
    "ascend_like": "zigzag-ascend-like",
    "tesla_npu_like": "zigzag-tesla-npu-like",
}
PIPELINE = "tile+default+arena+belady"
#: The issue's targets (issue 30): latency total and per non-DRAM-bound layer, on-chip energy total
#: and per level (register files and each SRAM)
TARGETS = dict(latency_total=0.10, latency_layer=0.25, onchip_total=0.15, onchip_level=0.30)


def reference(design: str) -> dict:
    return json.loads((FIXTURES / f"{design}.json").read_text())


def available() -> list[str]:
    return [d for d in DESIGNS if (FIXTURES / f"{d}.json").is_file()]


def dram_bound(layer: dict, hw: Hardware) -> bool:
    """ZigZag's layer moves more DRAM bytes than its ideal temporal cycles can carry at the DRAM
    port's bandwidth (``dram.bandwidth`` per cycle, ZigZag's 64-bit port)."""
    return sum(layer["dram_bytes"].values()) / hw.dram_bytes_per_cycle > layer["ideal_temporal_cycles"]


def top_levels(ref: dict, hw: Hardware) -> list[str]:
    """ZigZag's levels the scratchpad stands for: every level but DRAM with no ``cores.levels``
    entry of its name."""
    local = {lv.name for lv in hw.cores.levels}
    return [n for n in ref["totals"]["energy_per_level_pJ"] if n != "dram" and n not in local]


def compare(design: str, layers: list[str] | None = None, overrides: dict | None = None,
            hardware: str | None = None) -> dict:
    """Per layer and in total, npusim's and ZigZag's latency, energy by level and DRAM energy
    (pJ; on-chip = MACs + every level but DRAM). ``hardware``: run another config instead of the
    design's mirror — an R x C core (``tpu-like``, how the designs were mirrored before
    ``cores.unroll``) compares its ``register_file`` with ZigZag's levels the mirror declares
    below 1 KiB and its scratchpad with ZigZag's other levels."""
    ref = reference(design)
    mirror = load_hw(DESIGNS[design])
    hw = load_hw(hardware or DESIGNS[design], overrides=overrides)
    graph = load_graph("resnet18")
    local = [lv.name for lv in hw.cores.levels]
    if local or not mirror.cores.levels:
        tops, groups = top_levels(ref, hw), {name: [name] for name in local}
    else:
        registers = [lv.name for lv in mirror.cores.levels if lv.size < CACTI_MIN_BYTES]
        tops = [n for n in ref["totals"]["energy_per_level_pJ"] if n != "dram" and n not in registers]
        local, groups = ["register_file"], {"register_file": registers}
    rows = []
    for layer in ref["layers"]:
        if layers is not None and layer["name"] not in layers:
            continue
        g = zigzag_layer_graph(graph, graph.op(layer["name"]))
        report = simulate_plan(plan_graph(g, hw, PIPELINE), hw, validated=True)
        e = report.energy_pj
        ours = {name: report.energy_by_level_pj.get(name, 0.0) for name in local}
        ours["scratchpad"] = report.energy_by_level_pj["scratchpad"]
        zl = layer["energy_per_level_pJ"]
        theirs = {name: sum(zl.get(n, 0.0) for n in groups[name]) for name in local}
        theirs["scratchpad"] = sum(zl.get(name, 0.0) for name in tops)
        rows.append(dict(
            name=layer["name"], dram_bound=dram_bound(layer, hw),
            latency=(report.cycles, layer["latency"]),
            levels={k: (ours[k], theirs[k]) for k in ours},
            mac=(e["mac"], layer["mac_energy_pJ"]),
            dram=(e["dram_read"] + e["dram_write"], zl.get("dram", 0.0)),
        ))
    total = dict(
        latency=tuple(sum(r["latency"][i] for r in rows) for i in (0, 1)),
        levels={k: tuple(sum(r["levels"][k][i] for r in rows) for i in (0, 1)) for k in (rows[0]["levels"] if rows else {})},
        mac=tuple(sum(r["mac"][i] for r in rows) for i in (0, 1)),
        dram=tuple(sum(r["dram"][i] for r in rows) for i in (0, 1)),
    )
    total["onchip"] = tuple(total["mac"][i] + sum(v[i] for v in total["levels"].values()) for i in (0, 1))
    return dict(design=design, hardware=hw.name, top_levels=tops, layers=rows, total=total)


def ratio(pair: tuple[float, float]) -> float:
    ours, theirs = pair
    return ours / theirs if theirs else (1.0 if not ours else float("inf"))


def misses(result: dict) -> list[str]:
    """Every target of ``TARGETS`` the comparison misses, one line each (empty: all met)."""
    out = []
    t = result["total"]
    r = ratio(t["latency"])
    if abs(r - 1) > TARGETS["latency_total"]:
        out.append(f"latency total {r:.3f}")
    for row in result["layers"]:
        r = ratio(row["latency"])
        if not row["dram_bound"] and abs(r - 1) > TARGETS["latency_layer"]:
            out.append(f"latency {row['name']} {r:.3f}")
    r = ratio(t["onchip"])
    if abs(r - 1) > TARGETS["onchip_total"]:
        out.append(f"on-chip energy total {r:.3f}")
    for name, pair in t["levels"].items():
        r = ratio(pair)
        if abs(r - 1) > TARGETS["onchip_level"]:
            out.append(f"{name} energy {r:.3f}")
    return out


def table(result: dict) -> str:
    """The per-design table: totals, the worst non-DRAM-bound layer, energy by level."""
    t = result["total"]
    lines = [f"{result['design']} on {result['hardware']} (scratchpad = ZigZag's {' + '.join(result['top_levels'])})",
             f"  {'':30s} {'ZigZag':>14s} {'npusim':>14s} {'ratio':>7s}"]

    def row(label, pair, scale=1.0, fmt="{:,.0f}"):
        lines.append(f"  {label:30s} {fmt.format(pair[1] / scale):>14s} {fmt.format(pair[0] / scale):>14s} "
                     f"{ratio(pair):7.3f}")

    row("latency total (cycles)", t["latency"])
    inner = [r for r in result["layers"] if not r["dram_bound"]]
    if inner:
        worst = max(inner, key=lambda r: abs(ratio(r["latency"]) - 1))
        row(f"worst non-DRAM-bound: {worst['name'][-18:]}", worst["latency"])
    row("on-chip energy (uJ)", t["onchip"], 1e6, "{:,.2f}")
    row("  MAC", t["mac"], 1e6, "{:,.2f}")
    for name, pair in t["levels"].items():
        row(f"  {name}", pair, 1e6, "{:,.2f}")
    row("DRAM energy (uJ)", t["dram"], 1e6, "{:,.2f}")
    return "\n".join(lines)


# -- ZigZag's own mapping, costed by npusim ---------------------------------------------------------

def zigzag_temporal_mapping(layer: dict, chains: dict) -> dict[str, list[list[tuple[str, int]]]]:
    """ZigZag's chosen temporal mapping of a fixture layer (its ``mapping_dic_stationary``: per
    operand, the loops of each of its levels, innermost first) on npusim's chains: a level matched
    level for level, ZigZag's levels above npusim's top (its top SRAM and DRAM) merged into it."""
    text = re.sub(r"\b([A-Z][A-Z0-9]*)\b", r"'\1'", layer["temporal_mapping"])
    ops = ast.literal_eval(text)
    out = {}
    for op, levels in ops.items():
        n = len(chains[op].levels)
        loops = [list(lv) for lv in levels[:n - 1]]
        loops.append([loop for lv in levels[n - 1:] for loop in lv])
        out[op] = [[(str(d), int(s)) for d, s in lv] for lv in loops]
    return out


def replay(design: str, name: str, search: bool = True) -> dict:
    """npusim's per-level energy (pJ) and temporal cycles for one fixture layer mapped as ZigZag
    mapped it (``zigzag_temporal_mapping``), beside its own best mapping's (``search``; else the
    temporal iterations its spatial mapping leaves) and ZigZag's: the check that npusim's per-op
    model costs a given mapping as ZigZag does, apart from which mapping each search picks."""
    ref = reference(design)
    layer = next(lay for lay in ref["layers"] if lay["name"] == name)
    hw = load_hw(DESIGNS[design])
    graph = load_graph("resnet18")
    op = graph.op(name)
    core = costs.core_model(hw)
    nest = costs.loop_nest(op.gemm, hw, costs.operand_bits(op, graph), op.kind)
    sp = mapping.spatial_mapping(core, nest)
    chs = mapping.chains(core, nest, sp)
    levels, cycles = mapping.traffic(core, nest, chs, zigzag_temporal_mapping(layer, chs))
    best = mapping.core_cost(core, nest) if search else None
    return dict(replayed={k: t.energy_pj for k, t in levels.items()}, replayed_cycles=cycles,
                best={k: t.energy_pj for k, t in best.levels.items()} if best else None,
                best_cycles=best.temporal if best else math.prod(size for _, size in sp.temporal),
                zigzag=layer["energy_per_level_pJ"], zigzag_cycles=layer["ideal_temporal_cycles"])
