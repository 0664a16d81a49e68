"""How much of the DRAM bandwidth a DMA transfer gets when it runs alone.

For each run (trace, hardware, scratchpad size) plan and lower with the default pipeline
and, for every DMA command of at least ``--min-bytes`` (4 KiB), take its unloaded time
(``npusim.plan.transfer_cost.unloaded_cycles``: descriptor setup, DRAM latency, then the
longer of address generation and its bursts at peak bandwidth) and print the share of
peak bandwidth its logical bytes get: min, median, and how many reach 70 %. Also the bus
bytes / logical bytes of all transfers. Target: every transfer >= 70 %.

    python benchmarks/bench_dma_efficiency.py
"""

from __future__ import annotations

import argparse
import statistics

from npusim.plan.lower import lower
from npusim.plan.transfer_cost import unloaded_cycles
from npusim.util.units import parse_size
from npusim.workflow import DEFAULT_PIPELINE, load_graph, load_hw, plan_graph

RUNS = (("resnet50", "1MiB"), ("resnet50", "256KiB"), ("mobilenet_v2", "256KiB"), ("bert_tiny", "256KiB"))


def efficiencies(trace: str, size: str, hw_name: str, min_bytes: int):
    hw = load_hw(hw_name, {"scratchpad.size": size})
    graph = load_graph(trace)
    plan = plan_graph(graph, hw, DEFAULT_PIPELINE, parse_size(size))
    program = lower(plan, hw, graph)
    shares, logical, bus = [], 0, 0
    for c in program.commands:
        if c.cost is None:
            continue
        logical += c.cost.logical_bytes
        bus += c.cost.bus_bytes
        if c.cost.logical_bytes >= min_bytes:
            shares.append(c.cost.logical_bytes / unloaded_cycles(c.cost, hw) / hw.dram_bytes_per_cycle)
    return shares, logical, bus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hw", default="edge-npu")
    parser.add_argument("--min-bytes", default="4KiB")
    args = parser.parse_args(argv)
    min_bytes = parse_size(args.min_bytes)
    for trace, size in RUNS:
        shares, logical, bus = efficiencies(trace, size, args.hw, min_bytes)
        ok = sum(s >= 0.7 for s in shares)
        print(f"{trace:14s} {size:>7s}: {len(shares):5d} transfers >= {args.min_bytes}: share of peak "
              f"min {min(shares):.1%}, median {statistics.median(shares):.1%}, >= 70 %: {ok}/{len(shares)}; "
              f"bus/logical bytes {bus / logical:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
