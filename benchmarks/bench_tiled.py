"""Tiled simulation throughput, and RenderChunks: Numba kernel vs its Python reference.

    python benchmarks/bench_tiled.py [--hw edge-npu] [--budgets 256KiB,1MiB] [TRACE ...]

Per trace and budget: tiles, commands, SimPy events, wall seconds of each stage and events per
second of the simulation. Then the speed-up of the Numba RenderChunks over the pure-Python
reference (Algorithm 3 of the TAA paper) on a view of about 10,000 chunks, both measured here.
"""

from __future__ import annotations

import argparse
import time

from npusim.kernels.render_chunks import render_chunks, render_chunks_reference
from npusim.plan.lower import lower
from npusim.plan.bound import as_bound
from npusim.sim.engine import simulate
from npusim.util.units import parse_size
from npusim.workflow import load_graph, load_hw, plan_graph


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def simulation_table(traces, hw_name, budgets):
    hw = load_hw(hw_name)
    print(f"{'trace':<10} {'budget':>8} {'tiles':>7} {'commands':>9} {'events':>8} {'plan s':>7} "
          f"{'lower s':>8} {'sim s':>7} {'total s':>8} {'events/s':>10}")
    for name in traces:
        graph = load_graph(name)
        for spec in budgets:
            budget = parse_size(spec)
            t_plan, plan = timed(lambda: plan_graph(graph, hw, "tile+default+arena+belady", budget))
            t_lower, program = timed(lambda: lower(plan, hw, graph))
            t_sim, report = timed(lambda: simulate(program, hw.with_scratchpad_size(budget)))
            tiles = sum(1 for o in as_bound(plan, graph).bound_graph.ops if "tile_of" in o.attrs)
            print(f"{name:<10} {spec:>8} {tiles:>7} {report.commands:>9} {report.events:>8} {t_plan:>7.2f} "
                  f"{t_lower:>8.2f} {t_sim:>7.2f} {t_plan + t_lower + t_sim:>8.2f} {report.events / t_sim:>10,.0f}")


def render_chunks_speedup(repeat: int = 5):
    # A 100 x 100 x 64 tile of a 100 x 200 x 128 tensor: 10,000 chunks of 64 elements.
    shape, strides = (100, 100, 64), (200 * 128, 128, 1)
    render_chunks(shape, strides)  # compile outside the timing
    t_numba = min(timed(lambda: render_chunks(shape, strides, 0, 1))[0] for _ in range(repeat))
    t_python, (offsets, _) = min((timed(lambda: render_chunks_reference(shape, strides, 0, 1)) for _ in range(repeat)),
                                 key=lambda x: x[0])
    print(f"\nRenderChunks on {len(offsets):,} chunks: Python {t_python * 1e3:.2f} ms, Numba {t_numba * 1e3:.3f} ms, "
          f"speed-up {t_python / t_numba:,.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=["resnet50", "bert_tiny"])
    parser.add_argument("--hw", default="edge-npu")
    parser.add_argument("--budgets", default="256KiB,1MiB")
    args = parser.parse_args()
    simulation_table(args.traces, args.hw, args.budgets.split(","))
    render_chunks_speedup()


if __name__ == "__main__":
    main()
