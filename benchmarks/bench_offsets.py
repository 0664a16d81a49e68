"""Multi-stream safety and offset assignment over every trace and a synthetic graph
(the MindSpore paper's Tables 1-3, measured here).

    python benchmarks/bench_offsets.py [--per-stream 32] [--repeat 3] [--detail] [--synthetic-cells 420]
                                       [--exact-seconds 10] [--work] [TRACE ...]

Each graph runs in its default order with a MindSpore-like stream map (GEMM and vector ops
in separate streams, a new stream every ``--per-stream`` ops; ``npusim.graph.generators``).
Table 1: safety time of Algorithm 1, 1_opt and Algorithm 2 (best of ``--repeat``, after a
warm-up that compiles the kernels). Tables 2-3: footprint of every allocator on the same
unsafe pairs, the lifetime bound, the best result's gap to it, and the Many Objects vs Single
Object time gain (best MO vs best SO, and average MO vs average SO, as in the paper); with
``--work``, the avoid intervals MO meets per interval SO meets (``avoid_work``), which caps
the gain MO's design can give.

The lifetime bound is the paper's yardstick, but with several streams it is not a bound the
unsafe pairs can reach: concurrent streams make more pairs unsafe. So the table also gives a
clique of the conflict graph (``planners.alloc.bounds.best_bound``: any clique is a valid
lower bound) and the gap to the larger of the two, and the exact assignment
(``planners.alloc.exact``, wall-clock ``--exact-seconds``, seeded with the best heuristic).
"""

from __future__ import annotations

import argparse

from npusim.graph.analysis import default_order
from npusim.graph.generators import assign_streams
from npusim.testing.random_dags import nas_cells
from npusim.plan.safety import METHODS, safety_relation
from npusim.util.resources import list_resources
from npusim.workflow import load_graph
from planners.alloc import mindspore, naive, shared_objects, tflite
from planners.alloc.mindspore import kernels as mindspore_kernels
from planners.alloc.bounds import best_bound
from planners.alloc.exact import exact_offsets
from planners.alloc.onchip import graph_problem
from timing import best_of

ALIGN = 64


def allocators():
    algos = [("naive", naive.naive), ("tflite-arena", tflite.tflite_arena), ("tflm-greedy", tflite.tflm_greedy),
             ("so-size", shared_objects.greedy_by_size), ("so-breadth", shared_objects.greedy_by_breadth),
             ("so-size-improved", shared_objects.greedy_by_size_improved)]
    for family, fn in (("SO", mindspore_kernels.single_object), ("MO", mindspore_kernels.many_objects)):
        for sort in mindspore_kernels.SORTS:
            for fitter in mindspore_kernels.FITS:
                algos.append((f"{family} {sort} {fitter}", lambda p, fn=fn, s=sort, f=fitter: fn(p, s, f)))
    return algos


def avoid_work(problem) -> dict[str, int]:
    """Avoid intervals (unsafe placed items met) of Single and Many Objects (size sort, first
    fit), counted on the pure-Python algorithms: the work Many Objects can save. Its gain
    comes from objects whose unsafe items it never meets; where one object holds most
    tensors there is little to save, whatever the implementation."""
    counts = {}
    real = mindspore.avoid
    for family, fn in (("SO", mindspore.single_object), ("MO", mindspore.many_objects)):
        met = 0

        def counting(*args, **kwargs):
            nonlocal met
            out = real(*args, **kwargs)
            met += len(out)
            return out

        mindspore.avoid = counting
        try:
            fn(problem, "size", "first-fit")
        finally:
            mindspore.avoid = real
        counts[family] = met
    return counts


def bench_graph(graph, per_stream, repeat, detail, large, exact_seconds, work=False):
    order = default_order(graph)
    if large:  # the synthetic graph: about 16 streams, one timed run, size sorts and baselines only
        per_stream, repeat = max(per_stream, graph.n_ops // 16), 1
    streams = assign_streams(graph, order, per_stream)
    safety_times = {}
    for method in METHODS:
        safety_relation(graph, order, streams, method)  # warm-up (kernel compilation)
        safety_times[method], _ = best_of(repeat, lambda: safety_relation(graph, order, streams, method))
    problem, _ = graph_problem(graph, order, streams, ALIGN)
    bound = problem.lifetime_bound()
    rows = []
    for name, fn in allocators():
        if large and (name.startswith("so-size-improved") or name.split()[-2:-1] in (["breadth"], ["source"], ["unsafe"])):
            continue
        fn(problem)  # warm-up
        seconds, result = best_of(repeat, lambda: fn(problem))
        rows.append((name, result.total, seconds))
    if detail:
        print(f"\n{graph.name}: {problem.n} tensors, {len(set(streams))} streams, lifetime bound {bound:,} B")
        print(f"  {'allocator':<26} {'footprint B':>14} {'vs bound':>9} {'ms':>9}")
        for name, total, seconds in rows:
            print(f"  {name:<26} {total:>14,} {100 * (total / bound - 1):>8.3f}% {1000 * seconds:>9.2f}")
    so = [r for r in rows if r[0].startswith("SO ")]
    mo = [r for r in rows if r[0].startswith("MO ")]
    best_so, best_mo = min(so, key=lambda r: (r[1], r[2])), min(mo, key=lambda r: (r[1], r[2]))
    best = min(rows[1:], key=lambda r: r[1])
    valid = best_bound(problem, time_limit=2.0).value
    exact = None
    if exact_seconds > 0:
        hint = min((fn(problem) for name, fn in allocators()[1:] if name == best[0]), key=lambda r: r.total)
        exact = exact_offsets(problem, time_limit=exact_seconds, workers=2, hint=hint, deterministic=False)
    avg = lambda rs: sum(r[2] for r in rs) / len(rs)  # noqa: E731
    met = avoid_work(problem) if work else None
    return dict(name=graph.name, work=met, tensors=problem.n, streams=len(set(streams)), safety=safety_times,
                naive=rows[0][1], bound=bound, valid=max(valid, bound, exact.bound if exact else 0), best=best,
                exact=exact, best_so=best_so, best_mo=best_mo,
                gain_best=1 - best_mo[2] / best_so[2], gain_avg=1 - avg(mo) / avg(so),
                mo_vs_so=best_mo[1] / best_so[1] - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*")
    parser.add_argument("--per-stream", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--detail", action="store_true", help="print every allocator for every graph")
    parser.add_argument("--synthetic-cells", type=int, default=420, help="NAS-like cells of the synthetic graph (0: none)")
    parser.add_argument("--exact-seconds", type=float, default=10.0, help="exact assignment time per graph (0: skip)")
    parser.add_argument("--work", action="store_true",
                        help="count the avoid intervals SO and MO meet (pure Python: slow on the synthetic graph)")
    args = parser.parse_args()
    graphs = [load_graph(n) for n in (args.traces or list_resources("traces"))]
    if args.synthetic_cells:
        graphs.append(nas_cells(args.synthetic_cells, 5, seed=0))
    print(f"streams: GEMM/vector split, new stream every {args.per_stream} ops; alignment {ALIGN} B; "
          f"best of {args.repeat}")
    results = []
    for g in graphs:
        results.append(bench_graph(g, args.per_stream, args.repeat, args.detail, large=g.n_tensors > 8000,
                                   exact_seconds=args.exact_seconds, work=args.work))
        print(f"  done {g.name} ({g.n_tensors} tensors)", flush=True)
    print("\nTable 1: multi-stream safety (ms)")
    print(f"{'graph':<22} {'tensors':>7} {'streams':>7} {'alg1':>9} {'alg1_opt':>9} {'alg2':>9} {'alg2 vs 1_opt':>13}")
    for r in results:
        s = r["safety"]
        print(f"{r['name']:<22} {r['tensors']:>7} {r['streams']:>7} {1000 * s['alg1']:>9.1f} "
              f"{1000 * s['alg1_opt']:>9.1f} {1000 * s['alg2']:>9.1f} {100 * (1 - s['alg2'] / s['alg1_opt']):>12.1f}%")
    print("\nTables 2-3: footprint (MiB) and MO vs SO; gaps of the best heuristic to the lifetime bound (paper) "
          "and to the best valid bound (lifetime or clique); the exact assignment")
    print(f"{'graph':<22} {'naive':>9} {'lifetime':>9} {'valid':>9} {'best':>9} {'gap life':>8} {'gap valid':>9}  "
          f"{'best allocator':<24} {'exact':>9} {'gap':>7} {'status':<9} {'best SO':>9} {'best MO':>9} {'MO-SO':>8} "
          f"{'gain best':>9} {'gain avg':>9} {'MO ms':>8} {'MO/SO work':>10}")
    mib = 1 << 20
    for r in results:
        ex = r["exact"]
        exact_cols = (f"{ex.total / mib:>9.3f} {100 * (ex.total / r['valid'] - 1):>6.2f}% {ex.status:<9}" if ex
                      else f"{'-':>9} {'-':>7} {'-':<9}")
        print(f"{r['name']:<22} {r['naive'] / mib:>9.3f} {r['bound'] / mib:>9.3f} {r['valid'] / mib:>9.3f} "
              f"{r['best'][1] / mib:>9.3f} {100 * (r['best'][1] / r['bound'] - 1):>7.2f}% "
              f"{100 * (r['best'][1] / r['valid'] - 1):>8.2f}%  {r['best'][0]:<24} {exact_cols} "
              f"{r['best_so'][1] / mib:>9.3f} {r['best_mo'][1] / mib:>9.3f} {100 * r['mo_vs_so']:>7.3f}% "
              f"{100 * r['gain_best']:>8.1f}% {100 * r['gain_avg']:>8.1f}% {1000 * r['best_mo'][2]:>8.1f} "
              f"{work_ratio(r['work']):>10}")

def work_ratio(work) -> str:
    if not work:
        return "-"
    return f"{work['MO'] / work['SO']:.2f}" if work["SO"] else "n/a"


if __name__ == "__main__":
    main()
