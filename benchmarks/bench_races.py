"""Race detection coverage of the jittered simulator on seeded unsafe multi-stream plans.

    python benchmarks/bench_races.py [--graphs 30] [--seeds 32] [--jitter 4] [--overhead 3]

For each of ``--graphs`` seeded random DAGs (``npusim.testing.random_dags``, 2-4 streams on as
many cores) a safe plan is made with ``default+streams-rr+mindspore-mo:size,best-fit``
(multi-stream safe by the MindSpore safety relation) and one bug of each kind is injected
(``npusim.testing.seeded_races``: ``reuse`` across unordered streams, ``early_free``,
``missing_semaphore``), each a real race: no semaphore or queue order still orders the two
accesses.

Each unsafe Program is run by three detectors, each first without jitter, then with its
jitter seeds in turn until a SimulationError:

- ``happens-before``: the simulator as shipped: the timed run plus the timing-independent
  happens-before check (``npusim.sim.races``), which needs no jitter at all;
- ``timing, all modes``: the timed run alone (``check_races=False``), seeds 1..``--seeds``,
  whose schedules cycle through the jitter modes (``npusim.sim.jitter``: uniform, stall or
  rush one queue, per-queue speeds, wide delays);
- ``timing, uniform only``: the timed run alone on the uniform-mode seeds only (5, 10, ...):
  small independent noise on every command, as the simulator did before the modes.

The safe plan runs every seed with both checks and must never be flagged. Reported per
kind: catch rate, caught without jitter, and seeds needed (mean, max; 0 = the first run).
``--overhead`` also times, on every trace, the timed run and the happens-before check alone
(ratio = (timed + check) / timed, both measured in the same run).
"""

from __future__ import annotations

import argparse
import random
import statistics

from npusim.errors import SimulationError
from npusim.plan.lower import lower
from npusim.registry import make_plan
from npusim.util.resources import list_resources
from npusim.sim.engine import simulate
from npusim.sim.jitter import MODES
from npusim.sim.races import find_race
from npusim.testing.seeded_races import KINDS, seeded_cases
from npusim.workflow import load_graph, load_hw, resolve_budget
from timing import best_of


def first_catch(program, plan, graph, hw, seeds, jitter: float, check_races: bool) -> int | None:
    """0 if caught without jitter, k if first caught by the k-th of ``seeds``, None if never."""
    for k, seed in enumerate([0, *seeds]):
        try:
            simulate(program, hw, jitter=jitter if k else 0.0, seed=seed, check_races=check_races)
        except SimulationError:
            return k
    return None


def row(kind: str, runs: list) -> str:
    caught = [s for s in runs if s is not None]
    mean = f"{statistics.mean(caught):.1f}" if caught else "-"
    return (f"{kind:<20} {len(runs):>6} {len(caught):>7} {len(caught) / max(len(runs), 1):>7.0%} "
            f"{sum(1 for s in caught if s == 0):>10} {mean:>11} {max(caught, default=0):>10}")


def overhead(repeat: int) -> None:
    """Wall time of the timed run and of the happens-before check alone, each the best of at
    least ``repeat`` runs (more for small graphs: the machine is shared, so a short run is noisy)."""
    print(f"\nhappens-before check overhead (default+arena+belady on mid-npu at M_P, best of >= {repeat})")
    print(f"{'trace':<16} {'commands':>9} {'timed s':>8} {'check s':>8} {'ratio':>6}")
    hw = load_hw("mid-npu")
    ratios = []
    for name in list_resources("traces"):
        graph = load_graph(name)
        budget = resolve_budget("MP", graph, hw, allow_oversize=True)  # simulated on a scratchpad of that size
        plan = make_plan(graph, hw, "default+arena+belady", budget=budget)
        program, sim_hw = lower(plan, hw, graph), hw.with_scratchpad_size(budget)
        once, _ = best_of(1, lambda: simulate(program, sim_hw, check_races=False))
        runs = max(repeat, int(0.5 / max(once, 1e-3)))
        timed, _ = best_of(runs, lambda: simulate(program, sim_hw, check_races=False))
        check, race = best_of(runs, lambda: find_race(program, sim_hw.dma.channels, str, str))
        assert race is None, f"{name}: {race}"
        ratios.append((timed + check) / timed)
        print(f"{name:<16} {program.n_commands:>9} {timed:>8.4f} {check:>8.4f} {ratios[-1]:>6.2f}")
    print(f"{'geomean':<16} {'':>9} {'':>8} {'':>8} {statistics.geometric_mean(ratios):>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=32, help="jitter seeds tried per unsafe plan")
    parser.add_argument("--jitter", type=float, default=4.0, help="largest relative stretch of a compute or DMA")
    parser.add_argument("--overhead", type=int, default=3, metavar="REPEAT",
                        help="also time the happens-before check on every trace (0: skip)")
    args = parser.parse_args()
    rng = random.Random(0)
    detectors = {  # name -> (check_races, jitter seeds tried in order)
        "happens-before": (True, []),
        "timing, all modes": (False, list(range(1, args.seeds + 1))),
        "timing, uniform only": (False, [len(MODES) * k for k in range(1, args.seeds + 1)]),
    }
    found = {d: {k: [] for k in KINDS} for d in detectors}
    safe_runs = safe_flagged = made = 0
    for graph, hw, plan, injected in seeded_cases(args.graphs, rng):
        made += 1
        program = lower(plan, hw, graph)
        for seed in range(args.seeds + 1):  # both detectors on: never a SimulationError
            safe_runs += 1
            try:
                simulate(program, hw, jitter=args.jitter if seed else 0.0, seed=seed)
            except SimulationError as error:
                safe_flagged += 1
                print(f"FALSE POSITIVE on {graph.name} seed {seed}: {error}")
        for kind, case in injected.items():
            if case is None:
                continue
            for d, (check, seeds) in detectors.items():
                found[d][kind].append(first_catch(case[1], case[0], graph, hw, seeds, args.jitter, check))
    print(f"{made} multi-stream graphs, jitter {args.jitter}, up to {args.seeds} seeds per plan "
          f"(modes cycle {'/'.join(MODES)} by seed; 'uniform only' tries seeds {len(MODES)}, {2 * len(MODES)}, ...)")
    for d in detectors:
        print(f"\n{d}")
        print(f"{'kind':<20} {'plans':>6} {'caught':>7} {'rate':>7} {'no jitter':>10} {'seeds mean':>11} {'seeds max':>10}")
        for kind in KINDS:
            print(row(kind, found[d][kind]))
        print(row("all", [s for kind in KINDS for s in found[d][kind]]))
    print(f"\n{'safe plans':<20} {safe_runs:>6} runs (both detectors), flagged {safe_flagged}")
    if args.overhead:
        overhead(args.overhead)


if __name__ == "__main__":
    main()
