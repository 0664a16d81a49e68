"""The papers' planners at the NPU's own scratchpad, side by side.

For every shipped trace on ``edge-npu`` at its 1 MiB scratchpad (``--hw``, ``--budget``),
plan and simulate each pipeline (``--pipelines``, default: the tiling default, Zhong's
min-peak order, COSMA divide and conquer and OLLA, each behind the tile stage) and print
off-chip bytes, latency and energy as ratios to the first pipeline, or the refusal. Also
prints each planner call's wall time against its time limit (target: within limit + 10 %);
limits are wall seconds here (``deterministic=false``) unless ``--deterministic``; the
time-limited stages' own times are printed beside the pipeline's.

    python benchmarks/bench_pipelines.py [--traces a,b] [--time-limit 20]
"""

from __future__ import annotations

import argparse
import time

from npusim.errors import NpusimError
from npusim.util.resources import list_resources
from npusim.util.units import parse_size
from npusim.workflow import load_graph, load_hw, plan_graph, simulate_plan

PIPELINES = "tile+default+arena+belady,tile+zhong+arena+belady,tile+cosma-dnc,tile+olla"
#: Stages that take a time limit (their wall time is checked against it).
LIMITED = ("zhong", "olla", "olla-order", "cosma", "cosma-dnc", "cosma-fs", "cosma-mpmf", "exact-offsets")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hw", default="edge-npu")
    parser.add_argument("--budget", default=None, help="default: the scratchpad size")
    parser.add_argument("--traces", default="")
    parser.add_argument("--pipelines", default=PIPELINES)
    parser.add_argument("--time-limit", type=float, default=20.0, help="time_limit of every planner (s)")
    parser.add_argument("--deterministic", action="store_true",
                        help="CP-SAT's deterministic time (repeatable plans; not wall seconds) instead of wall time")
    args = parser.parse_args(argv)
    options = {"time_limit": args.time_limit, "deterministic": args.deterministic}
    hw = load_hw(args.hw)
    budget = parse_size(args.budget) if args.budget else hw.scratchpad.size
    pipelines = args.pipelines.split(",")
    traces = args.traces.split(",") if args.traces else list_resources("traces")
    clock = "deterministic units" if args.deterministic else "wall seconds"
    print(f"{args.hw}, budget {budget:,} B, time_limit {args.time_limit:g} ({clock}); ratios to {pipelines[0]}")
    print(f"{'trace':16s} {'pipeline':28s} {'off-chip B':>12s} {'cycles':>12s} {'energy uJ':>10s} "
          f"{'bytes':>6s} {'cycles':>6s} {'energy':>6s} {'plan s':>7s}")
    worst_overrun = 0.0
    for name in traces:
        graph = load_graph(name)
        base = None
        for pipeline in pipelines:
            start = time.perf_counter()
            stages: list[tuple[float, str]] = []  # (when, stage) as make_plan announces each

            def heard(what, done=None, total=None, detail=""):
                if what == "planning":
                    stages.append((time.perf_counter(), detail.split("'")[1]))

            try:
                plan = plan_graph(graph, hw, pipeline, budget, options=dict(options), progress=heard)
                seconds = time.perf_counter() - start
                ends = [t for t, _ in stages[1:]] + [start + seconds]
                timed = {name: end - t for (t, name), end in zip(stages, ends) if name in LIMITED}
                report = simulate_plan(plan, hw, graph, validated=True)
            except NpusimError as exc:
                seconds = time.perf_counter() - start
                print(f"{name:16s} {pipeline:28s} refused after {seconds:.1f} s: {str(exc)[:110]}", flush=True)
                continue
            worst_overrun = max([worst_overrun] + [t / args.time_limit - 1 for t in timed.values()])
            row = (report.offchip_total_bytes, report.cycles, report.total_energy_pj / 1e6)
            base = base or row
            ratios = " ".join(f"{v / b:6.3f}" for v, b in zip(row, base))
            stage_times = ", ".join(f"{k} {v:.1f} s" for k, v in timed.items())
            print(f"{name:16s} {pipeline:28s} {row[0]:12,} {row[1]:12,.0f} {row[2]:10.1f} {ratios} {seconds:7.1f}"
                  + (f"  ({stage_times})" if stage_times else ""), flush=True)
    print(f"largest time of a time-limited stage over its limit: {worst_overrun:+.0%} (target <= +10%); "
          "'plan s' is the whole pipeline (the tile stage has no time limit)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
