"""Every shipped trace at edge-npu with ``dram.model: banks``: today's placement (``bump``)
against the two row-aware ones (``dram.placement: pages`` and ``rows``), and the simulation's
wall time against ``dram.model: bandwidth`` on the same program.

Per trace: latency, row-hit rate, DRAM energy (activation + read/write + refresh +
background) for the three placements, whether each of ``pages`` and ``rows`` is better than
``bump`` (a higher row-hit rate or less DRAM energy, with no latency regression over 1 %),
and the simulate-only wall times (plan and lowering shared, so the ratio is the DRAM model's
own cost; the end-to-end ratio adds the planning time, printed too). The last line counts
the traces where each placement is better.

    .venv/bin/python benchmarks/dram_placement.py [trace ...]
"""

from __future__ import annotations

import sys
import time

from npusim import workflow as W
from npusim.plan.lower import lower
from npusim.sim.engine import simulate

DRAM = ("dram_activate", "dram_read", "dram_write", "dram_refresh", "dram_background")
PLACEMENTS = ("bump", "pages", "rows")
TRACES = ["bert_tiny", "densenet121", "fcn_resnet50", "googlenet", "hrnet_w18_small", "inception_v3", "mnasnet1_0",
          "mobilenet_v2", "nasnetalarge", "r2plus1d_18", "resnet18", "resnet50", "squeezenet1_0", "transformer",
          "vit_b_16"]


def better(r, ref) -> bool:
    """A higher row-hit rate or less DRAM energy than ``ref``, and at most 1 % slower."""
    hit, hit0 = r.dram_stats["row_hit_rate"], ref.dram_stats["row_hit_rate"]
    return (hit > hit0 or dram_uj(r) < dram_uj(ref)) and r.cycles <= ref.cycles * 1.01


def dram_uj(r) -> float:
    return sum(r.energy_pj[k] for k in DRAM) / 1e6


def row(trace: str, wins: dict, hw_name: str = "edge-npu") -> str:
    graph = W.load_graph(trace)
    base = W.load_hw(hw_name, {"dram.model": "bandwidth"})  # (the shipped configs time banks)
    t0 = time.perf_counter()
    plan = W.plan_graph(graph, base)
    program = lower(plan, base)
    plan_s = time.perf_counter() - t0
    t = time.perf_counter()
    rb = simulate(program, base)
    tb = time.perf_counter() - t
    out = {}
    for name in PLACEMENTS:
        hw = W.load_hw(hw_name, {"dram.model": "banks", "dram.placement": name})
        t = time.perf_counter()
        out[name] = simulate(program, hw)
        if name == "bump":
            t1 = time.perf_counter() - t
    r1 = out["bump"]
    verdicts = []
    for name in PLACEMENTS[1:]:
        ok = better(out[name], r1)
        wins[name] += ok
        verdicts.append("yes" if ok else "no")
    lat = " / ".join(f"{out[n].cycles:,.0f}" for n in PLACEMENTS)
    change = " / ".join(f"{out[n].cycles / r1.cycles - 1:+.3%}" for n in PLACEMENTS[1:])
    hits = " / ".join(f"{out[n].dram_stats['row_hit_rate']:.3%}" for n in PLACEMENTS)
    acts = " / ".join(f"{out[n].dram_stats['activations']:,}" for n in PLACEMENTS)
    energy = " / ".join(f"{dram_uj(out[n]):.1f}" for n in PLACEMENTS)
    return (f"| {trace} | {lat} ({change}) | {hits} | {acts} | {energy} | {' / '.join(verdicts)} | "
            f"{rb.cycles:,.0f} ({r1.cycles / rb.cycles - 1:+.2%}) | {tb:.2f} / {t1:.2f} s | "
            f"{(plan_s + t1) / (plan_s + tb):.2f} |")


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    traces = argv or TRACES
    names = " / ".join(PLACEMENTS)
    print(f"| trace | latency {names} (cycles; pages, rows vs bump) | row hits {names} | activations {names} "
          f"| DRAM energy {names} (uJ) | pages / rows better, no regression > 1 % | bandwidth-model latency "
          "(banks vs it) | simulate wall bandwidth / banks | end-to-end ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    wins = dict.fromkeys(PLACEMENTS[1:], 0)
    for trace in traces:
        print(row(trace, wins), flush=True)
    print(f"\nbetter than bump with no latency regression > 1 %: "
          + ", ".join(f"{name} on {n} of {len(traces)}" for name, n in wins.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
