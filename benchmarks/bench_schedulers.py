"""Peak live bytes of the schedulers, fusion op counts, solve times and OLLA fragmentation.

    python benchmarks/bench_schedulers.py [--time-limit 10] [--align 64] [TRACE ...]

For every trace (and the training graphs of resnet50, mobilenet_v2, bert_tiny, transformer,
named ``<trace>-train``): ops before/after Zhong fusion; peak live bytes (KiB) of the default
order, RPO, greedy-mem, Zhong and OLLA's lifetime ILP (eq. 14, with early weight-update
control edges on training graphs); Zhong's and OLLA's reduction vs RPO and vs default; solve
times; and the OLLA address ILP (eq. 15) on the OLLA order: arena, fragmentation = (arena −
max live) / arena, status. Every exact solve gets ``--time-limit`` seconds and 2 workers.
"""

from __future__ import annotations

import argparse
import time

from npusim.graph.training import make_training_graph
from npusim.resources import list_resources
from npusim.workflow import load_graph
from planners.joint.olla import olla_order, tensor_blocks
from planners.joint.olla_address import solve_addresses
from planners.schedule.greedy import RULES, greedy_order, reverse_post_order
from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import SolverOptions
from planners.schedule.zhong.fusion import fuse
from planners.schedule.zhong.planner import zhong_schedule

TRAINING = ("resnet50", "mobilenet_v2", "bert_tiny", "transformer")


def row(name, graph, limit, align):
    p = MemoryProblem.from_graph(graph, align)
    kib = lambda b: b / 1024  # noqa: E731
    default = p.peak(list(range(p.n)))
    rpo = p.peak(reverse_post_order(p))
    greedy = min(p.peak(greedy_order(p, r)) for r in RULES)
    t = time.perf_counter()
    fused = fuse(p).problem.n
    t_fuse = time.perf_counter() - t
    z = zhong_schedule(p, {"time_limit": limit})
    t = time.perf_counter()
    o_order, o_status, _, edges = olla_order(graph, align, {"time_limit": limit})
    t_olla = time.perf_counter() - t
    olla = p.peak(o_order)
    addr = solve_addresses(tensor_blocks(graph, o_order, align), align, SolverOptions(limit))
    print(f"{name:<20} {p.n:>5} {fused:>5} {p.n / fused:>5.1f}x {kib(default):>9.0f} {kib(rpo):>9.0f} "
          f"{kib(greedy):>9.0f} {kib(z['peak']):>9.0f} {kib(olla):>9.0f} {100 * (z['peak'] / rpo - 1):>+6.1f}% "
          f"{100 * (olla / default - 1):>+6.1f}% {t_fuse:>5.2f} {z['stats']['seconds']:>6.1f} {z['status']:>9} "
          f"{t_olla:>6.1f} {o_status:>9} {edges:>4} {kib(addr.arena):>9.0f} {100 * addr.fragmentation:>6.2f}% "
          f"{addr.seconds:>5.1f} {addr.status:>9}", flush=True)
    return z["peak"] / rpo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--align", type=int, default=64)
    parser.add_argument("--no-training", action="store_true")
    args = parser.parse_args()
    names = args.traces or list_resources("traces")
    print(f"time limit {args.time_limit} s per solve, 2 workers, sizes aligned to {args.align} B; peaks in KiB")
    print(f"{'graph':<20} {'ops':>5} {'fused':>5} {'shrink':>6} {'default':>9} {'RPO':>9} {'greedy':>9} "
          f"{'Zhong':>9} {'OLLA-ord':>9} {'Zh/RPO':>7} {'OL/def':>7} {'fuse s':>5} {'Zh s':>6} {'Zh stat':>9} "
          f"{'OL s':>6} {'OL stat':>9} {'ctl':>4} {'arena':>9} {'frag':>7} {'adr s':>5} {'adr stat':>9}")
    ratios = {}
    for name in names:
        ratios[name] = row(name, load_graph(name), args.time_limit, args.align)
    if not args.no_training:
        for name in TRAINING:
            if not args.traces or name in args.traces:
                row(f"{name}-train", make_training_graph(load_graph(name)), args.time_limit, args.align)
    nas = [r for n, r in ratios.items() if n.startswith(("nasnet", "hrnet"))]
    if nas:
        print(f"Zhong vs RPO, mean over NAS/HRNet traces: {100 * (sum(nas) / len(nas) - 1):+.1f}%")
    if ratios:
        print(f"Zhong vs RPO, mean over all traces: {100 * (sum(ratios.values()) / len(ratios) - 1):+.1f}%")


if __name__ == "__main__":
    main()
