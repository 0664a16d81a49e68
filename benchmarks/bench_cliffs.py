"""Many-input ops at a small budget: does a 1,000-input op cost per input what a 300-input one does?

    python benchmarks/bench_cliffs.py [--hw edge-npu] [--budget 64KiB] [--inputs 300,1000] [--channels 8] [--size 28]

Each case is a trace of N small producers (a 1x1 Conv of the graph input, each output
[1, C, S, S] int8, image-like: stored channels-last in DRAM on an ``nhwc`` config) feeding one op that reads all N: a ``Concat`` along the channels and an
``Add`` of the N (``Sum``). The default pipeline (``fuse+tile+default+arena+belady``) plans it at
the budget; the run is validated, lowered and simulated. Per case: process CPU seconds
(``time.process_time``: the run's own, whatever the machine's load), commands, tiles of the
many-input op, simulated cycles and the bounds of the report (compute, DRAM bytes at peak
bandwidth); then each figure per input as the ratio of the largest N to the smallest, in the
same run (issue 28: within 2x).
"""

from __future__ import annotations

import argparse
import time

from npusim.errors import PlanningError
from npusim.plan.bound import as_bound
from npusim.testing.single_ops import many_input_graph
from npusim.util.units import parse_size
from npusim.workflow import load_hw, plan_graph, simulate_plan


def run_case(kind: str, n: int, hw, budget: int, channels: int, size: int) -> dict:
    graph = many_input_graph(kind, n, channels, size)
    start = time.process_time()
    plan = plan_graph(graph, hw, "fuse+tile+default+arena+belady", budget)
    report = simulate_plan(plan, hw, validated=True)
    cpu = time.process_time() - start
    tiles = sum(1 for o in as_bound(plan, graph).bound_graph.ops if o.attrs.get("tile_of") == "many")
    bounds = report.lower_bounds
    return dict(kind=kind, n=n, cpu=cpu, commands=report.commands, tiles=tiles, cycles=report.cycles,
                compute=bounds["compute_cycles"], dram=bounds["dram_cycles"], dma=bounds.get("dma_cycles", 0.0),
                spec=plan.tiling.get("many"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hw", default="edge-npu")
    parser.add_argument("--budget", default="64KiB")
    parser.add_argument("--inputs", default="300,1000")
    parser.add_argument("--kinds", default="Concat,Sum")
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--size", type=int, default=28)
    args = parser.parse_args()
    hw = load_hw(args.hw)
    budget = parse_size(args.budget)
    sizes = [int(s) for s in args.inputs.split(",")]
    print(f"{'op':<7} {'inputs':>6} {'CPU s':>7} {'commands':>9} {'tiles':>6} {'cycles':>12} {'compute':>11} "
          f"{'DRAM':>11} {'cycles/bound':>12}  spec")
    for kind in args.kinds.split(","):
        rows = []
        for n in sizes:
            try:
                r = run_case(kind, n, hw, budget, args.channels, args.size)
            except PlanningError as error:  # e.g. a Sum whose one-element tiles of every input do not fit
                print(f"{kind:<7} {n:>6}  no plan: {error}", flush=True)
                continue
            rows.append(r)
            bound = max(r["compute"], r["dram"])
            print(f"{kind:<7} {n:>6} {r['cpu']:>7.2f} {r['commands']:>9,} {r['tiles']:>6,} {r['cycles']:>12,.0f} "
                  f"{r['compute']:>11,.0f} {r['dram']:>11,.0f} {r['cycles'] / bound:>12.2f}  {r['spec']}", flush=True)
        if len(rows) < 2:
            continue
        small, big = rows[0], rows[-1]
        ratio = {key: (big[key] / big["n"]) / (small[key] / small["n"]) for key in ("cpu", "commands", "cycles")}
        print(f"{kind:<7} per input, {big['n']} vs {small['n']}: CPU {ratio['cpu']:.2f}x, commands "
              f"{ratio['commands']:.2f}x, cycles {ratio['cycles']:.2f}x")


if __name__ == "__main__":
    main()
