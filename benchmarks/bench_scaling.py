"""How every heuristic path scales: time and peak memory per stage on synthetic graphs.

    python benchmarks/bench_scaling.py [--sizes 1000,5000,20000,50000] [--stage-limit 120] [--out scaling.json]

Graphs are ``npusim.testing.random_dags.random_dag(n)`` (each op reads 1-3 recent
tensors, 40 % also a weight; tensors of 256 B - 64 KiB, ``SIZES``). Stages: import (``load_trace`` of the
saved JSON), analysis (``memory_bounds``: M_R and the default-order peak), each heuristic
schedule / streams / spill / allocation / off-chip planner of the registry (exact ones are
excluded: they refuse or partition large graphs by design), validation, lowering and
simulation of the default pipeline at M_H (so the arena spills).

Each stage is timed once without and once with ``tracemalloc`` (peak Python + numpy bytes),
in CPU seconds of this process, after one warm-up run of every stage on a 200-op graph (so
Numba's compilation is not counted against the smallest size).
The growth exponent is the least-squares slope of log(time) over log(ops); n log n between
1k and 50k ops has a slope of about 1.1, so a slope above ``--flag`` (1.3) is flagged. A stage
whose extrapolated time at the next size exceeds ``--stage-limit`` seconds is skipped there.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from npusim.testing.random_dags import random_dag, with_custom_kinds
from npusim.graph.trace_io import load_trace, save_trace
from npusim.workflow import load_hw
from npusim.hw.config import Hardware
from npusim.plan.lower import lower
from npusim.plan.validate import validate
from npusim.registry import PlanningContext, default_registry, make_plan, run_stage
from npusim.sim.engine import simulate
from npusim.workflow import memory_bounds

#: Planners left out: exact or solver-based ones (exponential, or CP-SAT-bounded by design).
EXACT = {"dp", "zhong", "olla-order", "olla", "exact-offsets", "offchip-offsets"}
EXACT_PREFIXES = ("cosma",)
BIG = 1 << 40

SIZES = (256, 1024, 4096, 16384, 65536)  # bytes: tensors as large as a small CNN's


def measure(fn):
    """(CPU seconds, peak MiB, result): one plain run for the time (``time.process_time``: this
    process's CPU, whatever else loads the machine), one traced run for the memory."""
    start = time.process_time()
    result = fn()
    seconds = time.process_time() - start
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak / 2**20, result


def heuristic_stages(registry) -> list[tuple[str, str]]:
    """(label, pipeline or schedule name) of every heuristic planner."""
    stages = []
    for p in registry.planners():
        if p.name in EXACT or p.name.startswith(EXACT_PREFIXES):
            continue
        if p.stage == "schedule":
            stages.append((f"schedule {p.name}", p.name))
        elif p.stage == "streams":
            stages.append((f"streams {p.name}", f"default+{p.name}+mindspore-mo:size,best-fit"))
        elif p.stage == "spill":
            stages.append((f"spill {p.name}", f"default+arena+{p.name}"))
        elif p.stage == "alloc" and p.name != "arena":
            stages.append((f"alloc {p.name}", f"default+{p.name}"))
        elif p.stage == "offchip":
            stages.append((f"offchip {p.name}", f"default+arena+belady+{p.name}"))
    return stages


def run_size(n: int, hw: Hardware, stages, skip: set[str], results: dict, quiet: bool = False) -> None:
    registry = default_registry()
    graph = random_dag(n, seed=1, sizes=SIZES)
    row = results.setdefault(n, {})

    def record(label, fn):
        if label in skip:
            row[label] = None
            return None
        seconds, mib, value = measure(fn)
        row[label] = (seconds, mib)
        if not quiet:
            print(f"  {n:>6} ops  {label:<42} {seconds:9.3f} s {mib:9.1f} MiB", flush=True)
        return value

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.json"
        save_trace(with_custom_kinds(graph), path)  # a trace names kinds whose shapes it honours
        record("import (load_trace)", lambda: load_trace(path))
    bounds = record("analysis (memory_bounds)", lambda: memory_bounds(graph, hw.scratchpad.alignment))
    budget = bounds.m_h if bounds else memory_bounds(graph, hw.scratchpad.alignment).m_h

    def schedule(name):
        ctx = PlanningContext(graph=graph, hw=hw, capacity=BIG, alignment=hw.scratchpad.alignment)
        return run_stage(registry.get(name), ctx).order

    for label, spec in stages:
        if "+" not in spec:
            record(label, lambda spec=spec: schedule(spec))
        else:
            arena = "+arena+" in spec
            record(label, lambda spec=spec, arena=arena: make_plan(graph, hw, spec, budget=budget if arena else BIG))
    plan = make_plan(graph, hw, "default+arena+belady", budget=budget)
    record("validate (default+arena+belady, M_H)", lambda: validate(plan, graph))
    program = record("lower", lambda: lower(plan, hw, graph))
    program = program or lower(plan, hw, graph)
    record("simulate", lambda: simulate(program, hw.with_scratchpad_size(budget)))
    # multi-stream simulation against single-stream on the same 2-core config (target: within 2x)
    two = load_hw("mid-npu", {"cores.split_ops": "false"})
    for label, spec in (("simulate 1 stream (mid-npu)", "default+mindspore-mo:size,best-fit"),
                        ("simulate 2 streams (mid-npu, streams-rr)", "default+streams-rr+mindspore-mo:size,best-fit")):
        if label in skip:
            row[label] = None
            continue
        program = lower(make_plan(graph, two, spec, budget=BIG), two, graph)
        record(label, lambda program=program: simulate(program, two.with_scratchpad_size(BIG)))


def exponent(points: list[tuple[int, float]]) -> float | None:
    pts = [(math.log(n), math.log(t)) for n, t in points if t > 1e-3]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000,50000")
    parser.add_argument("--stage-limit", type=float, default=120.0,
                        help="skip a stage at a size where its extrapolated time exceeds this (s)")
    parser.add_argument("--flag", type=float, default=1.3, help="flag growth exponents above this")
    parser.add_argument("--out", help="also write the table as JSON here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    hw = Hardware()
    stages = heuristic_stages(default_registry())
    results: dict[int, dict] = {}
    skip: set[str] = set()
    run_size(200, hw, stages, set(), {}, quiet=True)  # warm-up: compile the Numba kernels
    for i, n in enumerate(sizes):
        run_size(n, hw, stages, skip, results)
        if i + 1 < len(sizes):  # skip what would take too long at the next size (quadratic guess)
            ratio = sizes[i + 1] / n
            for label, value in results[n].items():
                if value is not None and value[0] * ratio ** 2 > args.stage_limit:
                    skip.add(label)
    labels = list(results[sizes[0]])
    head = "".join(f"{n:>18,}" for n in sizes)
    print(f"\n{'stage (s / peak MiB)':<42}{head}  exponent")
    table = {}
    for label in labels:
        cells, pts = [], []
        for n in sizes:
            value = results[n].get(label)
            cells.append(f"{'skipped':>18}" if value is None else f"{value[0]:>9.3f}/{value[1]:>8.1f}")
            if value is not None:
                pts.append((n, value[0]))
        k = exponent(pts)
        flag = "  <-- worse than ~n log n" if k is not None and k > args.flag else ""
        print(f"{label:<42}{''.join(cells)}  {'n/a' if k is None else f'{k:.2f}'}{flag}")
        table[label] = {"seconds": {n: results[n][label][0] for n in sizes if results[n].get(label)},
                        "peak_mib": {n: results[n][label][1] for n in sizes if results[n].get(label)},
                        "exponent": k}
    if args.out:
        Path(args.out).write_text(json.dumps({"sizes": sizes, "stages": table}, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
