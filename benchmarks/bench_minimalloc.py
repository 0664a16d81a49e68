"""Offset assignment on MiniMalloc's challenging instances (../shared/reference/minimalloc/).

    python benchmarks/bench_minimalloc.py [--time-limit 10] [--workers 2] [INSTANCE.csv ...]
    python benchmarks/bench_minimalloc.py --ratio 1.02 [--time-limit 600] D.1048576.csv ...

For every instance: the max-live (lifetime) bound, the best heuristic (every Single/Many
Objects sort and fit, TFLite's arena) and the exact solve (``planners.alloc.exact``: the
canonical search at the bound, then bisecting capacities above it, then CP-SAT; ``--workers``
is both CP-SAT's threads and the canonical search's worker processes), each as a
ratio to the bound, with the status, the proven bound and the wall time on this machine
(wall-clock limits: the figures move with the machine's load, printed first).

``--ratio R`` asks the decision question instead: the canonical search alone, at the
capacity R x max-live (rounded down to a multiple of the sizes' gcd), for the whole time
limit: offsets found, capacity proved infeasible, or neither, with the placements searched.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from planners.alloc.canonical.search import search_offsets
from planners.alloc.exact import best_heuristic, capacity_step, exact_offsets
from planners.alloc.minimalloc_io import load_minimalloc
from planners.alloc.problem import OffsetProblem, check_assignment

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "minimalloc"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instances", nargs="*")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ratio", type=float, help="only probe this capacity, as a multiple of max-live")
    args = parser.parse_args()
    paths = [Path(p) for p in args.instances] or sorted(REFERENCE.glob("*.csv"))
    # compile the Numba kernels first (a second or more per kernel after any edit of their
    # module), so that no instance's wall time includes it
    warm = load_minimalloc(paths[0])
    warm = OffsetProblem(sizes=warm.sizes[:30], first=warm.first[:30], last=warm.last[:30])
    exact_offsets(warm, time_limit=1.0, workers=1)
    search_offsets(warm.first, warm.last, warm.sizes, warm.lifetime_bound(), time_limit=1.0)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"time limit {args.time_limit} s, {args.workers} workers (CP-SAT, canonical search), load average {load}")
    if args.ratio is not None:
        probe_capacities(paths, args.ratio, args.time_limit, args.workers)
        return
    print(f"{'instance':<16} {'buffers':>7} {'max-live':>9} {'heuristic':>9} {'best heuristic':<28} "
          f"{'exact':>7} {'status':<10} {'bound':>7} {'s':>6}")
    for path in paths:
        problem = load_minimalloc(path)
        bound = problem.lifetime_bound()
        start = time.perf_counter()
        hint = best_heuristic(problem)
        # wall-clock limit (deterministic=False): the target is seconds on this machine
        result = exact_offsets(problem, time_limit=args.time_limit, workers=args.workers, hint=hint,
                               deterministic=False)
        seconds = time.perf_counter() - start
        assert check_assignment(problem, result.offsets) == []
        print(f"{path.name:<16} {problem.n:>7} {bound:>9} {hint.total / bound:>9.3f} {hint.algorithm:<28} "
              f"{result.total / bound:>7.4f} {result.status:<10} {result.bound / bound:>7.4f} {seconds:>6.1f}")


def probe_capacities(paths: list[Path], ratio: float, seconds: float, workers: int) -> None:
    print(f"{'instance':<16} {'max-live':>9} {'capacity':>9} {'ratio':>7} {'answer':<10} {'placements':>11} {'s':>6}")
    for path in paths:
        problem = load_minimalloc(path)
        bound = problem.lifetime_bound()
        step = capacity_step(problem)
        capacity = int(ratio * bound) // step * step
        start = time.perf_counter()
        offsets, status, nodes = search_offsets(problem.first, problem.last, problem.sizes, capacity,
                                                time_limit=seconds, workers=workers)
        if offsets is not None:
            assert check_assignment(problem, offsets) == [] and int((offsets + problem.sizes).max()) <= capacity
        print(f"{path.name:<16} {bound:>9} {capacity:>9} {capacity / bound:>7.4f} {status:<10} {nodes:>11,} "
              f"{time.perf_counter() - start:>6.1f}")


if __name__ == "__main__":
    main()
