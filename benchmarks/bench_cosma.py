"""COSMA's non-overlap encodings compared: time to solution of the same models.

    python benchmarks/bench_cosma.py [--time-limit 30] [--budget MR] [TRACE ...]

For every trace (activations only, as in the paper's Fig. 3; default: resnet50, r2plus1d_18,
fcn_resnet50, squeezenet1_0, mobilenet_v2, googlenet) and for three random NAS-like graphs,
solves COSMA-FS (default order) and COSMA (schedule freedom) at the budget with each
encoding of constraint (10):

- ``nooverlap``: per step, one optional interval [L, L+size) per tensor, present iff resident,
  in a 1-D ``AddNoOverlap`` (the default);
- ``nooverlap2d``: one optional box per (tensor, step), x = [t, t+1), in one ``AddNoOverlap2D``;
- ``bigm``: the paper's u/d binaries and big-M rows per coexisting pair and step.

Prints objective, status and seconds per encoding and the time ratio to ``nooverlap`` in the
same run (2 workers each). The objective must agree wherever two encodings prove optimality.
"""

from __future__ import annotations

import argparse
import time

from npusim.cli.experiment import activation_graph
from npusim.hw.config import Hardware
from npusim.registry import make_plan
from npusim.testing.random_dags import nas_cell
from npusim.workflow import load_graph, memory_bounds

ENCODINGS = ("nooverlap", "nooverlap2d", "bigm")
DEFAULT_TRACES = ("resnet50", "r2plus1d_18", "fcn_resnet50", "squeezenet1_0", "mobilenet_v2", "googlenet")


def solve(graph, planner, budget, encoding, limit):
    start = time.perf_counter()
    plan = make_plan(graph, Hardware(), planner, budget=budget,
                     options={"time_limit": limit, "workers": 2, "overlap": encoding})
    return plan.meta.objective, plan.meta.status, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="*", default=list(DEFAULT_TRACES))
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--budget", default="MR", choices=("MR", "MH"))
    args = ap.parse_args()
    graphs = [(t, activation_graph(load_graph(t))) for t in args.traces]
    graphs += [(f"nas_cell(3,3,s{s})", nas_cell(3, 3, seed=s)) for s in range(3)]
    make_plan(graphs[0][1], Hardware(), "default+arena+belady", budget=1 << 30)  # load the registry first
    print(f"{'graph':22s} {'planner':9s} " + " ".join(f"{e + ' (B, status, s)':>36s}" for e in ENCODINGS)
          + "   2d/1d  bigm/1d")
    totals = dict.fromkeys(ENCODINGS, 0.0)
    for name, g in graphs:
        bounds = memory_bounds(g, 64)
        budget = bounds.m_r if args.budget == "MR" else bounds.m_h
        for planner in ("cosma-fs", "cosma"):
            cells = []
            got = {}
            for enc in ENCODINGS:
                obj, status, sec = solve(g, planner, budget, enc, args.time_limit)
                got[enc] = (obj, status, sec)
                totals[enc] += sec
                cells.append(f"{obj:>14,.0f} {status:>9s} {sec:8.2f}")
            optimal = {got[e][0] for e in ENCODINGS if got[e][1] == "optimal"}
            assert len(optimal) <= 1, f"encodings disagree on {name}: {got}"
            base = got["nooverlap"][2]
            print(f"{name:22s} {planner:9s} " + " ".join(f"{c:>36s}" for c in cells)
                  + f"   {got['nooverlap2d'][2] / base:5.2f}  {got['bigm'][2] / base:5.2f}", flush=True)
    print("total seconds: " + ", ".join(f"{e} {totals[e]:.1f}" for e in ENCODINGS))


if __name__ == "__main__":
    main()
