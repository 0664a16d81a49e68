"""Issue 27's figures: how well each shipped trace overlaps its transfers with its compute.

For every shipped trace on the given configs (default edge-npu and datacenter-npu), the
default pipeline at the config's scratchpad: latency, latency over the larger of the compute
and DRAM bounds, off-chip bytes on the bus, and the DMA overlap — the share of the time some
transfer is in flight during which some core also computes (100 %: no transfer is exposed).
Then issue 27's single-GEMM targets: each tiled GEMM's latency over max(compute, bus bytes /
bandwidth), and the 512×768×768 GEMM's tiled array cycles over its untiled count on a 128×128
output-stationary array with 64 KiB of accumulators. Figures, not wall time.

    python benchmarks/bench_execution_model.py [--hw edge-npu,datacenter-npu] [--traces a,b] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import csv
import sys

from npusim.graph.generators import matmul_graph
from npusim.hw.costs import op_cycles, systolic_cycles
from npusim.util.resources import list_resources
from npusim.workflow import DEFAULT_PIPELINE, load_graph, load_hw, run


#: Issue 27's single-GEMM cases: (M, N, K), config, scratchpad bytes (about ¼ of the working set)
GEMMS = [((2048, 2048, 2048), "edge-npu", 256 << 10), ((64, 4096, 4096), "edge-npu", 256 << 10),
         ((2048, 2048, 2048), "mid-npu", 1 << 20)]


def _union(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def dma_overlap(report) -> float:
    """Share of the time a transfer is in flight during which a core computes."""
    dma = _union((e.start, e.end) for e in report.timeline if e.queue.startswith("dma"))
    compute = _union((e.start, e.end) for e in report.timeline if e.queue.startswith("stream"))
    both = i = j = 0
    while i < len(dma) and j < len(compute):
        lo, hi = max(dma[i][0], compute[j][0]), min(dma[i][1], compute[j][1])
        both += max(hi - lo, 0)
        if dma[i][1] < compute[j][1]:
            i += 1
        else:
            j += 1
    total = sum(end - start for start, end in dma)
    return both / total if total else 1.0


def trace_rows(hw_names, traces):
    for hw_name in hw_names:
        hw = load_hw(hw_name)
        for name in traces:
            _, report = run(load_graph(name), hw, DEFAULT_PIPELINE)
            bound = max(report.lower_bounds["compute_cycles"], report.lower_bounds["dram_cycles"])
            yield dict(hw=hw_name, trace=name, cycles=round(report.cycles), over_bound=report.cycles / bound,
                       bus_bytes=report.offchip_bus_bytes, dma_overlap=dma_overlap(report))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hw", default="edge-npu,datacenter-npu")
    parser.add_argument("--traces", default="")
    parser.add_argument("--csv", default="")
    args = parser.parse_args(argv)
    traces = args.traces.split(",") if args.traces else list_resources("traces")
    rows = []
    print(f"{'hw':15s} {'trace':18s} {'latency':>14s} {'/bound':>7s} {'bus bytes':>14s} {'DMA overlap':>11s}")
    for row in trace_rows(args.hw.split(","), traces):
        rows.append(row)
        print(f"{row['hw']:15s} {row['trace']:18s} {row['cycles']:14,d} {row['over_bound']:7.3f} "
              f"{row['bus_bytes']:14,d} {row['dma_overlap']:11.1%}", flush=True)
    print()
    for shape, hw_name, budget in GEMMS:
        graph = matmul_graph(*shape)
        hw = load_hw(hw_name, {"scratchpad.size": str(budget)})
        _, report = run(graph, hw, DEFAULT_PIPELINE)
        bound = max(report.lower_bounds["compute_cycles"], report.lower_bounds["dram_cycles"])
        print(f"GEMM {'x'.join(map(str, shape)):15s} {hw_name:9s} {budget >> 10:5d} KiB  latency "
              f"{report.cycles:14,.0f} = {report.cycles / bound:.3f} x max(compute, bus bytes / bandwidth)")
    graph = matmul_graph(512, 768, 768)
    untiled = systolic_cycles(graph.ops[0].gemm, 128, 128, "os")
    for size in ("192KiB", "64KiB"):
        sized = load_hw("edge-npu", {"cores.pe_rows": "128", "cores.pe_cols": "128", "scratchpad.size": size,
                                     "scratchpad.bytes_per_cycle": "512", "cores.accumulator_size": "64KiB"})
        plan, _ = run(graph, sized, DEFAULT_PIPELINE)
        tiled = sum(op_cycles(op, plan.bound_graph, sized)[0] for op in plan.bound_graph.ops if op.gemm is not None)
        print(f"GEMM 512x768x768 on a 128x128 os array at {size}: tiled array cycles {tiled:,.0f} = "
              f"{tiled / untiled:.3f} x untiled")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
