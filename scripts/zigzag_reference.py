"""ZigZag's results for ResNet-18 on its bundled accelerators, as the fixtures of the ZigZag
validation (tests/fixtures/zigzag/<accelerator>.json; tests/test_zigzag.py, benchmarks/bench_zigzag.py).

ZigZag (``pip install zigzag-dse==3.9.1``, MIT, KU Leuven MICAS; its 3.9.1 wheel imports ``six``
without declaring it) is not a dependency of npusim: this script runs it once per accelerator and
stores per layer what the comparison needs, so CI needs no ZigZag:

    python scripts/zigzag_reference.py                      # every accelerator of ACCELERATORS
    python scripts/zigzag_reference.py edge_tpu_like        # one

Each accelerator runs with its bundled mapping file on the bundled ``resnet18.onnx`` with
``get_hardware_performance_zigzag(..., opt="latency", lpf_limit=6)`` — the settings of
shared/reference/zigzag/ — and each layer is recorded from its cost-model evaluation: the loop
sizes, the latency and its parts (ideal temporal cycles, stall/slack, on-loading, off-loading,
systolic drain), MAC energy, energy and word accesses by memory level (summed over the operands
a level holds), DRAM bytes by operand and direction, and the chosen spatial and temporal mapping.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from pathlib import Path

#: accelerator YAML -> mapping YAML (both bundled with ZigZag 3.9.1, zigzag/inputs/)
ACCELERATORS = {
    "tpu_like": "tpu_like",
    "edge_tpu_like": "edge_tpu_like",
    "meta_prototype": "meta_prototype_like",
    "ascend_like": "ascend_like",
    "tesla_npu_like": "tesla_npu_like",
}
OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "zigzag"
OPT, LPF_LIMIT, WORKLOAD = "latency", 6, "resnet18.onnx"


def layer_record(cme) -> dict:
    """What the comparison needs of one layer's cost-model evaluation."""
    from zigzag.hardware.architecture.memory_port import DataDirection

    layer = cme.layer
    energy: dict[str, float] = {}
    reads: dict[str, float] = {}
    writes: dict[str, float] = {}
    dram: dict[str, int] = {}
    for layer_op, per_level in cme.memory_word_access.items():
        mem_op = cme.memory_operand_links.layer_to_mem_op(layer_op)
        levels = cme.accelerator.memory_hierarchy.get_memory_levels(mem_op=mem_op)
        for i, (access, level) in enumerate(zip(per_level, levels)):
            name = level.name
            energy[name] = energy.get(name, 0.0) + cme.mem_energy_breakdown[layer_op][i]
            r = access.get(DataDirection.RD_OUT_TO_LOW) + access.get(DataDirection.RD_OUT_TO_HIGH)
            w = access.get(DataDirection.WR_IN_BY_LOW) + access.get(DataDirection.WR_IN_BY_HIGH)
            reads[name] = reads.get(name, 0) + r
            writes[name] = writes.get(name, 0) + w
            if name == "dram":
                bits = level.memory_instance.ports[0].bw_max
                dram[f"read_{layer_op}"] = int(r * bits // 8)
                dram[f"write_{layer_op}"] = int(w * bits // 8)
    dims = {str(d): int(s) for d, s in layer.layer_dim_sizes.items()}
    return dict(
        name=layer.name, type=layer.type, dims=dims, macs=int(layer.total_mac_count),
        latency=float(cme.latency_total2), ideal_cycles=float(cme.ideal_cycle),
        ideal_temporal_cycles=float(cme.ideal_temporal_cycle), stall_slack_cycles=float(cme.stall_slack_comb),
        onloading_cycles=float(cme.data_onloading_cycle), offloading_cycles=float(cme.data_offloading_cycle),
        systolic_drain_cycles=float(cme.systolic_drain_cycle), mac_energy_pJ=float(cme.mac_energy),
        energy_pJ=float(cme.energy_total), energy_per_level_pJ=energy, word_reads=reads, word_writes=writes,
        dram_bytes=dram, spatial_mapping=str(cme.spatial_mapping_dict_int),
        temporal_mapping=str(cme.temporal_mapping.mapping_dic_stationary),
    )


def run(accelerator: str) -> dict:
    import zigzag
    from zigzag.api import get_hardware_performance_zigzag

    inputs = Path(zigzag.__file__).parent / "inputs"
    started, cpu = time.time(), time.process_time()
    with tempfile.TemporaryDirectory() as dump:
        _, _, cmes = get_hardware_performance_zigzag(
            str(inputs / "workload" / WORKLOAD), str(inputs / "hardware" / f"{accelerator}.yaml"),
            str(inputs / "mapping" / f"{ACCELERATORS[accelerator]}.yaml"), opt=OPT, lpf_limit=LPF_LIMIT,
            dump_folder=dump, loma_show_progress_bar=False)
    layers = [layer_record(cme) for cme, _ in cmes[0][1]]
    total = lambda key: sum(layer[key] for layer in layers)  # noqa: E731
    levels: dict[str, float] = {}
    for layer in layers:
        for name, pj in layer["energy_per_level_pJ"].items():
            levels[name] = levels.get(name, 0.0) + pj
    from importlib.metadata import version
    return dict(
        tool="zigzag-dse", version=version("zigzag-dse"), accelerator=f"zigzag/inputs/hardware/{accelerator}.yaml",
        mapping=f"zigzag/inputs/mapping/{ACCELERATORS[accelerator]}.yaml", workload=f"zigzag/inputs/workload/{WORKLOAD}",
        call=f"get_hardware_performance_zigzag(workload, accelerator, mapping, opt={OPT!r}, lpf_limit={LPF_LIMIT})",
        script="scripts/zigzag_reference.py", wall_clock_s=round(time.time() - started, 1),
        cpu_s=round(time.process_time() - cpu, 1),
        totals=dict(layers=len(layers), macs=total("macs"), latency=total("latency"), energy_pJ=total("energy_pJ"),
                    mac_energy_pJ=total("mac_energy_pJ"), energy_per_level_pJ=levels),
        layers=layers,
    )


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for accelerator in argv or list(ACCELERATORS):
        result = run(accelerator)
        path = OUT / f"{accelerator}.json"
        path.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
        t = result["totals"]
        print(f"{accelerator}: {t['layers']} layers, latency {t['latency']:,.0f} cycles, "
              f"energy {t['energy_pJ'] / 1e6:,.1f} uJ -> {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    logging.disable(logging.INFO)  # ZigZag logs every mapping it tries
    sys.exit(main(sys.argv[1:]))
