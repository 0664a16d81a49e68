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
then raised, when partitioning, first by a quick DP-only window bound on the warm start
(when it meets its peak, the warm start is returned as optimal without any ILP), then by a
window bound (``planners.schedule.window_bound``)
around the order's peak after a first short solve of the peak's part: an order that meets
it is optimal and the work ends (on NASNet, HRNet and the transformer it does); otherwise
it is the floor of the remaining solves. If the best
warm-start heuristic beats the result (possible only after partitioning), it is returned.
"""

from __future__ import annotations

import time

from npusim.errors import PlanningError
from planners.schedule.greedy import best_heuristic_order
from planners.schedule.op_level import op_graph, set_order
from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import SolverOptions, solver_options
from planners.schedule.window_bound import DEFAULT_WINDOW_STATES, window_lower_bound
from planners.schedule.zhong.budget import Budget
from npusim.planner_options import Option, values
from planners.schedule.zhong.fusion import DEFAULT_MAX_REGION, fuse
from planners.schedule.zhong.ilp import solve_schedule_ilp
from planners.schedule.zhong.partition import default_parts, partition_schedule

DEFAULT_MAX_ILP_NODES = 60
#: the share of the time limit the ILPs of window bounds may use (in all, per bound)
#: DP states of the quick window bound on the warm start (a second or two at most)
QUICK_STATES = 20_000
WINDOW_ILP_SHARE = 0.25

#: What ``zhong_schedule`` reads besides the solver options.
ZHONG_OPTIONS = (
    Option("max_region", "int", DEFAULT_MAX_REGION, "largest region Algorithm 1 fuses (the paper's M)",
           unit="ops", minimum=1),
    Option("edges", "bool", True, "fuse monotonic edges too (false: the paper's isolated regions only)"),
    Option("max_ilp_nodes", "int", DEFAULT_MAX_ILP_NODES, "fused nodes the ILP takes in one piece", unit="nodes",
           minimum=1),
    Option("parts", "int", None, "partitions k (default: ceil(fused nodes / max_ilp_nodes))", minimum=1),
    Option("refine", "bool", True, "solve the part of the new peak again after partitioning"),
    Option("window_states", "int", DEFAULT_WINDOW_STATES, "DP states a window lower bound may use (0: none)",
           minimum=0),
)


def zhong_schedule(problem: MemoryProblem, options: dict) -> dict:
    """Schedule ``problem``; returns order (of its nodes), peak, status, bound and statistics."""
    start = time.perf_counter()
    opts = SolverOptions.from_options(options)
    budget = Budget(opts, start)
    o = values(options, ZHONG_OPTIONS, "zhong")
    max_region, max_ilp, edges, window_states = o["max_region"], o["max_ilp_nodes"], o["edges"], o["window_states"]
    heuristic, heuristic_peak = best_heuristic_order(problem)
    fusion = fuse(problem, max_region, edges=edges)
    fused = fusion.problem
    stats = {"ops": problem.n, "fused_ops": fused.n, "fusion_rounds": fusion.rounds,
             "fused_by": dict(fusion.fused_by)}
    quick = window_lower_bound(problem, heuristic, max_states=min(window_states, QUICK_STATES)).value \
        if window_states and fused.n > max_ilp else 0
    if quick >= heuristic_peak:
        # the warm start is already optimal (a quick, DP-only window bound shows it): no ILP
        order, status, bound = heuristic, "optimal", quick
        stats.update(parts=0, variables=0)
    elif fused.n <= max_ilp:
        hint, _ = best_heuristic_order(fused)
        result = solve_schedule_ilp(fused, hint, opts, budget=budget)
        order, status, bound = fused.expand(result.order), result.status, result.bound
        stats.update(parts=1, variables=result.variables)
    else:
        k = o["parts"] or default_parts(fused.n, max_ilp)
        prove = None if not window_states else (
            lambda fused_order: _window_bound(problem, fused.expand(fused_order), window_states, opts, start))
        result = partition_schedule(fused, k, opts, refine=o["refine"], budget=budget,
                                    prove=prove)
        order, status, bound = fused.expand(result.order), result.status, max(problem.lower_bound(), result.bound)
        stats.update(parts=len(result.parts), solved_parts=result.solved_parts, variables=result.variables)
    peak = problem.peak(order)
    if heuristic_peak < peak:
        order, peak = heuristic, heuristic_peak
        stats["fallback"] = "heuristic"
    if status != "optimal" and bound < peak and window_states and (stats["parts"] == 1 or "fallback" in stats):
        # (after partitioning, ``prove`` already tried windows around the order it found)
        bound = max(bound, _window_bound(problem, order, window_states, opts, start))
    if bound >= peak:
        status = "optimal"
    stats["seconds"] = round(time.perf_counter() - start, 3)
    return dict(order=order, peak=peak, status=status, bound=min(bound, peak), stats=stats)


def _window_bound(problem: MemoryProblem, order: list[int], max_states: int, opts: SolverOptions,
                  start: float) -> int:
    """The window bound around ``order``'s peak (``planners.schedule.window_bound``). Only its
    state limit stops it in deterministic mode (the same call reports the same bound); with
    wall-clock limits, the call's time limit does too. Windows too wide for the DP go to the
    ILP, sharing ``WINDOW_ILP_SHARE`` of the time limit."""
    deadline = None if opts.deterministic else start + opts.time_limit
    ilp = opts.with_limit(WINDOW_ILP_SHARE * opts.time_limit)
    return window_lower_bound(problem, order, max_states=max_states, deadline=deadline, ilp=ilp).value


class ZhongScheduler:
    name = "zhong"
    stage = "schedule"
    description = "Zhong et al.: optimality-preserving fusion + CP-SAT ILP + memory-aware partitioning"
    reads = ("graph", "untiled", "alignment", "options")
    writes = ("order", "scope", "status", "objective", "bound")
    options = (*solver_options(), *ZHONG_OPTIONS)

    def run(self, ctx) -> None:
        problem = MemoryProblem.from_graph(op_graph(ctx), ctx.alignment)
        out = zhong_schedule(problem, ctx.options)
        set_order(ctx, list(out["order"]), "peak")
        ctx.status = out["status"]
        ctx.objective = float(out["peak"])
        ctx.bound = float(out["bound"])
