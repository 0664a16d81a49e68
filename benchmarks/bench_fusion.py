"""The fusion stage on every shipped trace: latency, off-chip bytes and energy with and without it.

Runs ``tile+default+arena+belady`` and ``fuse+tile+default+arena+belady`` on edge-npu at its own
1 MiB scratchpad and prints a Markdown table (simulated figures, so the same on any machine).

    python benchmarks/bench_fusion.py [--hw edge-npu]
"""

from __future__ import annotations

import argparse

from npusim import load_graph, load_hw, plan_graph, simulate_plan
from npusim.util.resources import list_resources

PIPELINES = ("tile+default+arena+belady", "fuse+tile+default+arena+belady")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hw", default="edge-npu")
    args = parser.parse_args()
    hw = load_hw(args.hw)
    print("| trace | fused ops | cycles without -> with fuse | off-chip bytes without -> with | energy uJ without -> with |")
    print("|---|---|---|---|---|")
    for name in list_resources("traces"):
        graph = load_graph(name)
        plans = [plan_graph(graph, hw, p) for p in PIPELINES]
        a, b = (simulate_plan(plan, hw, graph) for plan in plans)
        print(f"| {name} | {len(plans[1].fusion)} | {a.cycles / 1e6:.2f} M -> {b.cycles / 1e6:.2f} M "
              f"({b.cycles / a.cycles - 1:+.1%}) | {a.offchip_total_bytes:,} -> {b.offchip_total_bytes:,} "
              f"({b.offchip_total_bytes / a.offchip_total_bytes - 1:+.1%}) | {a.total_energy_pj / 1e6:.1f} -> "
              f"{b.total_energy_pj / 1e6:.1f} ({b.total_energy_pj / a.total_energy_pj - 1:+.1%}) |", flush=True)


if __name__ == "__main__":
    main()
