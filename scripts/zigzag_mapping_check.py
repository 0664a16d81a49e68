"""ZigZag on one ResNet-18 layer twice: with its own mapping search, and with the temporal loop
order npusim's search chose (``npusim.hw.mapping``) given to ZigZag as ``temporal_ordering`` —
the check behind docs/validation.md's "who is right" for the ZigZag designs: ZigZag costs
npusim's mapping with the per-level energies npusim gives it, a little more latency (its DRAM
on-loading) and less on-chip energy.

    .venv/bin/pip install zigzag-dse==3.9.1 six onnx     # not a dependency of npusim
    python scripts/zigzag_mapping_check.py ascend_like /layer2/layer2.0/conv2/Conv   # ~20 s

Prints, for each of the two mappings, ZigZag's latency (ideal temporal cycles, stall,
on-loading, off-loading) and energy by level, and npusim's energy by level for its own.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

#: accelerator -> its bundled mapping file (zigzag/inputs/mapping/)
MAPPINGS = {"tpu_like": "tpu_like", "edge_tpu_like": "edge_tpu_like", "meta_prototype": "meta_prototype_like",
            "ascend_like": "ascend_like", "tesla_npu_like": "tesla_npu_like"}


def npusim_order(design: str, layer: str) -> tuple[list[list], dict]:
    """npusim's chosen temporal loop order, innermost first (equal neighbours merged), and its
    energy by level (pJ) for the layer on the design's mirror."""
    from npusim.hw import costs
    from npusim.testing import zigzag as zz
    from npusim.workflow import load_graph, load_hw

    hw, graph = load_hw(zz.DESIGNS[design]), load_graph("resnet18")
    op = graph.op(layer)
    cost = costs.unrolled_cost(op.gemm, hw, costs.operand_bits(op, graph), op.kind)
    order: list[list] = []
    for dim, size in cost.order:
        if order and order[-1][0] == dim:
            order[-1][1] *= size
        else:
            order.append([dim, size])
    return order, {k: t.energy_pj for k, t in cost.levels.items()}


def run_zigzag(design: str, layer: str, ordering: list | None, folder: Path):
    """ZigZag's cost-model evaluation of ``layer`` alone (an ONNX of that one node)."""
    import onnx
    import yaml
    import zigzag
    from zigzag.api import get_hardware_performance_zigzag

    inputs = Path(zigzag.__file__).parent / "inputs"
    model = onnx.shape_inference.infer_shapes(onnx.load(str(inputs / "workload" / "resnet18.onnx"),
                                                        load_external_data=False))
    node = next(n for n in model.graph.node if n.name == layer)
    onnx.save(onnx.utils.Extractor(model).extract_model([node.input[0]], [node.output[0]]), folder / "one.onnx")
    entries = yaml.safe_load((inputs / "mapping" / f"{MAPPINGS[design]}.yaml").read_text())
    if ordering:
        entries.insert(0, {**entries[0], "name": layer, "temporal_ordering": ordering})
    (folder / "mapping.yaml").write_text(yaml.safe_dump(entries))
    _, _, cmes = get_hardware_performance_zigzag(
        str(folder / "one.onnx"), str(inputs / "hardware" / f"{design}.yaml"), str(folder / "mapping.yaml"),
        opt="latency", lpf_limit=6, dump_folder=str(folder / "dump"), loma_show_progress_bar=False)
    return cmes[0][1][0][0]


def levels(cme) -> dict[str, float]:
    out: dict[str, float] = {}
    for layer_op, per_level in cme.mem_energy_breakdown.items():
        mem_op = cme.memory_operand_links.layer_to_mem_op(layer_op)
        for level, pj in zip(cme.accelerator.memory_hierarchy.get_memory_levels(mem_op=mem_op), per_level):
            out[level.name] = out.get(level.name, 0.0) + pj
    return out


def main(argv: list[str]) -> int:
    design, layer = argv
    order, ours = npusim_order(design, layer)
    print(f"npusim's order (innermost first): {order}")
    print("npusim's energy by level, its mapping (pJ): " + ", ".join(f"{k} {v:,.0f}" for k, v in ours.items()))
    for label, ordering in (("ZigZag's own search", None), ("npusim's order in ZigZag", order)):
        with tempfile.TemporaryDirectory() as tmp:
            cme = run_zigzag(design, layer, ordering, Path(tmp))
        by_level = levels(cme)
        onchip = cme.energy_total - by_level.get("dram", 0.0)
        print(f"{label}: latency {cme.latency_total2:,.0f} = ideal {cme.ideal_temporal_cycle:,.0f} + stall "
              f"{cme.stall_slack_comb:,.0f} + on-loading {cme.data_onloading_cycle:,.0f} + off-loading "
              f"{cme.data_offloading_cycle:,.0f}; on-chip energy {onchip / 1e6:,.2f} uJ; "
              + ", ".join(f"{k} {v:,.0f}" for k, v in by_level.items()))
    return 0


if __name__ == "__main__":
    logging.disable(logging.WARNING)  # ZigZag logs every mapping it tries
    sys.exit(main(sys.argv[1:]))
