"""The ``zhong`` schedule planner: fusion, then the ILP on the whole fused graph when it is
small enough, else partitioning (Algorithm 2). Options (``--option`` / ``options=``):
``time_limit`` (s, 60, for the whole call: see ``budget``), ``workers`` (2), ``max_region``
(Algorithm 1's M, 12), ``edges`` (fuse monotonic edges too, True; false = the paper's
isolated regions only), ``max_ilp_nodes`` (fused nodes the ILP takes in one piece, 60),
``parts`` (k; default ceil(fused nodes / max_ilp_nodes)), ``refine`` (solve the part of the
new peak too, True), ``window_states`` (DP states a window bound may use, 300000; 0: none).

Status: ``optimal`` when the ILP proved the whole fused graph optimal (fusion preserves the
optimum, so the order is optimal for the graph); ``feasible`` after partitioning (a heuristic
cut); ``timed_out`` when a time limit stopped a solve. The bound is CP-SAT's when the whole
graph was solved, else the largest working set of a node (valid for any order); either is
then raised by window bounds around the order's peak (``planners.schedule.window_bound``),
and a bound that meets the peak makes the status ``optimal`` (on NASNet and HRNet it does). If the best
warm-start heuristic beats the result (possible only after partitioning), it is returned.
"""

from __future__ import annotations

import time

from npusim.errors import PlanningError
from planners.schedule.greedy import best_heuristic_order
from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import SolverOptions
from planners.schedule.window_bound import DEFAULT_WINDOW_STATES, window_lower_bound
from planners.schedule.zhong.budget import Budget
from planners.options import int_option
from planners.schedule.zhong.fusion import DEFAULT_MAX_REGION, fuse
from planners.schedule.zhong.ilp import solve_schedule_ilp
from planners.schedule.zhong.partition import default_parts, partition_schedule

DEFAULT_MAX_ILP_NODES = 60


def zhong_schedule(problem: MemoryProblem, options: dict) -> dict:
    """Schedule ``problem``; returns order (of its nodes), peak, status, bound and statistics."""
    start = time.perf_counter()
    opts = SolverOptions.from_options(options)
    budget = Budget(opts, start)
    max_region = int_option(options, "max_region", DEFAULT_MAX_REGION, "zhong")
    max_ilp = int_option(options, "max_ilp_nodes", DEFAULT_MAX_ILP_NODES, "zhong")
    edges = options.get("edges", True)
    if not isinstance(edges, bool):
        raise PlanningError(f"zhong option edges = {edges!r}: expected true or false")
    heuristic, heuristic_peak = best_heuristic_order(problem)
    fusion = fuse(problem, max_region, edges=edges)
    fused = fusion.problem
    stats = {"ops": problem.n, "fused_ops": fused.n, "fusion_rounds": fusion.rounds,
             "fused_by": dict(fusion.fused_by)}
    if fused.n <= max_ilp:
        hint, _ = best_heuristic_order(fused)
        result = solve_schedule_ilp(fused, hint, opts, budget=budget)
        order, status, bound = fused.expand(result.order), result.status, result.bound
        stats.update(parts=1, variables=result.variables)
    else:
        k = int_option(options, "parts", default_parts(fused.n, max_ilp), "zhong")
        result = partition_schedule(fused, k, opts, refine=bool(options.get("refine", True)), budget=budget)
        order, status, bound = fused.expand(result.order), result.status, problem.lower_bound()
        stats.update(parts=len(result.parts), solved_parts=result.solved_parts, variables=result.variables)
    peak = problem.peak(order)
    if heuristic_peak < peak:
        order, peak = heuristic, heuristic_peak
        stats["fallback"] = "heuristic"
    window_states = int_option(options, "window_states", DEFAULT_WINDOW_STATES, "zhong", minimum=0)
    if status != "optimal" and window_states:
        # a window of the order solved exactly often proves it optimal (window_bound); only
        # its state limit stops it in deterministic mode, so the same call reports the same bound
        deadline = None if opts.deterministic else start + opts.time_limit
        window = window_lower_bound(problem, order, max_states=window_states, deadline=deadline)
        stats["bound_window_ops"] = len(window.window)
        if window.value > bound:
            bound = window.value
        if bound >= peak:
            status = "optimal"
    stats["seconds"] = round(time.perf_counter() - start, 3)
    return dict(order=order, peak=peak, status=status, bound=min(bound, peak), stats=stats)


class ZhongScheduler:
    name = "zhong"
    stage = "schedule"
    description = "Zhong et al.: optimality-preserving fusion + CP-SAT ILP + memory-aware partitioning"

    def run(self, ctx) -> None:
        problem = MemoryProblem.from_graph(ctx.graph, ctx.alignment)
        out = zhong_schedule(problem, ctx.options)
        ctx.order = list(out["order"])
        ctx.status = out["status"]
        ctx.objective = float(out["peak"])
        ctx.bound = float(out["bound"])
