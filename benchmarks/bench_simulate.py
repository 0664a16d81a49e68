"""Wall time of plan / validate / lower / simulate and SimPy events per second.

    python benchmarks/bench_simulate.py [--hw mid-npu] [--budget MP] [--repeat 3] [TRACE ...]

Each stage is timed ``--repeat`` times and the best time is kept (less noise from the machine).
"""

from __future__ import annotations

import argparse

from npusim.plan.lower import lower
from npusim.plan.validate import validate
from npusim.registry import make_plan
from npusim.util.resources import list_resources
from npusim.sim.engine import simulate
from npusim.workflow import load_graph, load_hw, resolve_budget
from timing import best_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*")
    parser.add_argument("--hw", default="mid-npu")
    parser.add_argument("--budget", default="MP")
    parser.add_argument("--planner", default="default+arena+belady")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    hw = load_hw(args.hw)
    names = args.traces or list_resources("traces")
    print(f"hw={args.hw} budget={args.budget} planner={args.planner} (best of {args.repeat})")
    print(f"{'trace':<16} {'ops':>5} {'plan s':>8} {'valid s':>8} {'lower s':>8} {'sim s':>8} "
          f"{'total s':>8} {'commands':>9} {'events':>8} {'events/s':>10}")
    for name in names:
        graph = load_graph(name)
        budget = resolve_budget(args.budget, graph, hw, allow_oversize=True)  # simulated on a scratchpad of that size
        sim_hw = hw.with_scratchpad_size(budget)
        t_plan, plan = best_of(args.repeat, lambda: make_plan(graph, hw, args.planner, budget=budget))
        t_valid, _ = best_of(args.repeat, lambda: validate(plan, graph))
        t_lower, program = best_of(args.repeat, lambda: lower(plan, hw, graph))
        t_sim, report = best_of(args.repeat, lambda: simulate(program, sim_hw))
        total = t_plan + t_valid + t_lower + t_sim
        print(f"{name:<16} {graph.n_ops:>5} {t_plan:>8.3f} {t_valid:>8.3f} {t_lower:>8.3f} {t_sim:>8.3f} "
              f"{total:>8.3f} {report.commands:>9} {report.events:>8} {report.events / t_sim:>10,.0f}")


if __name__ == "__main__":
    main()
