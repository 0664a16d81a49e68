"""Every shipped trace at edge-npu with ``dram.model: banks``: today's placement (``bump``)
against the row-aware one (``dram.placement: pages``), and the simulation's wall time against
``dram.model: bandwidth`` on the same program.

Per trace: latency, row-hit rate, DRAM energy (activation + read/write + refresh +
background) for both placements, and the simulate-only wall times (plan and lowering shared,
so the ratio is the DRAM model's own cost; the end-to-end ratio adds the planning time,
printed too).

    .venv/bin/python benchmarks/dram_placement.py [trace ...]
"""

from __future__ import annotations

import sys
import time

from npusim import workflow as W
from npusim.plan.lower import lower
from npusim.sim.engine import simulate

DRAM = ("dram_activate", "dram_read", "dram_write", "dram_refresh", "dram_background")


def row(trace: str, hw_name: str = "edge-npu") -> str:
    graph = W.load_graph(trace)
    base = W.load_hw(hw_name)
    t0 = time.perf_counter()
    plan = W.plan_graph(graph, base)
    program = lower(plan, base)
    plan_s = time.perf_counter() - t0
    out = {}
    for name, over in (("bandwidth", {}), ("bump", {"dram.model": "banks"}),
                       ("pages", {"dram.model": "banks", "dram.placement": "pages"})):
        hw = W.load_hw(hw_name, over or None)
        t = time.perf_counter()
        r = simulate(program, hw)
        out[name] = (r, time.perf_counter() - t)
    rb, tb = out["bandwidth"]
    r1, t1 = out["bump"]
    r2, t2 = out["pages"]
    e1 = sum(r1.energy_pj[k] for k in DRAM) / 1e6
    e2 = sum(r2.energy_pj[k] for k in DRAM) / 1e6
    h1, h2 = r1.dram_stats["row_hit_rate"], r2.dram_stats["row_hit_rate"]
    better = (h2 > h1 or e2 < e1) and r2.cycles <= r1.cycles * 1.01
    return (f"| {trace} | {r1.cycles:,.0f} / {r2.cycles:,.0f} ({r2.cycles / r1.cycles - 1:+.2%}) | "
            f"{h1:.2%} / {h2:.2%} | {e1:.1f} / {e2:.1f} | {'yes' if better else 'no'} | "
            f"{rb.cycles:,.0f} ({r1.cycles / rb.cycles - 1:+.2%}) | {tb:.2f} / {t1:.2f} s | "
            f"{(plan_s + t1) / (plan_s + tb):.2f} |")


def main(argv: list[str]) -> int:
    traces = argv or ["bert_tiny", "densenet121", "fcn_resnet50", "googlenet", "hrnet_w18_small", "inception_v3",
                      "mnasnet1_0", "mobilenet_v2", "nasnetalarge", "r2plus1d_18", "resnet18", "resnet50",
                      "squeezenet1_0", "transformer", "vit_b_16"]
    print("| trace | latency bump / pages (cycles) | row hits bump / pages | DRAM energy bump / pages (uJ) "
          "| pages better, no regression > 1 % | bandwidth-model latency (banks vs it) | simulate wall "
          "bandwidth / banks | end-to-end ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for trace in traces:
        print(row(trace), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
