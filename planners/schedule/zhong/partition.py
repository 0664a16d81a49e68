"""Memory-aware partitioning (Zhong et al., §IV-C, Algorithm 2).

Fused graphs can still be too large for the ILP. The peak of a network sits in one region,
so: schedule the (fused) graph by reverse post-order to find the node at the peak; cut the
graph k ways, with tensor sizes as edge weights so that the cut crosses small tensors
(METIS through ``pymetis``, a k-way min-cut partitioner from PyPI; the paper used dagP);
repair the cut so that the parts form a DAG; then run the parts one after the other in that
DAG's order, scheduling the part that holds the peak with the ILP and the others by RPO.

Acyclicity repair: METIS ignores edge directions, so parts may depend on each other both
ways. Parts are ranked by the mean topological position of their nodes, and every node is
moved to the highest rank among its own and its predecessors' (in topological order). Edges
then only go from lower to higher ranks, so the parts run in rank order.

Each part is scheduled as a region (``MemoryProblem.region``): tensors from earlier parts are
live at its start, tensors read by later parts live at its end, so minimising the part's
peak minimises the graph's footprint while that part runs. Beyond the paper (``refine``),
when time remains the part holding the new peak is solved next, until the peak's part has
been solved or no time is left. The ILP runs on the fused graph, warm-started from the best
of RPO, the definition order and the greedy memory-aware list scheduler on the part; all
solves share one time ``Budget``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pymetis

from planners.schedule.greedy import best_heuristic_order, reverse_post_order
from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import SolverOptions
from planners.schedule.zhong.budget import Budget
from planners.schedule.zhong.ilp import solve_schedule_ilp

EDGE_WEIGHT_UNIT = 64  # bytes per unit of METIS edge weight (METIS wants small integers)
#: the share of the time limit the first solve gets when a bound may end the work after it
FIRST_SLICE = 0.2


def metis_parts(problem: MemoryProblem, k: int, seed: int = 0) -> list[int]:
    """A k-way min-cut of the undirected node graph, edge weight = bytes passed."""
    n = problem.n
    weight: dict[tuple[int, int], int] = {}
    for b in range(problem.n_buffers):
        u = problem.producer[b]
        readers = problem.consumers[b]
        ends = ([u] if u >= 0 else []) + list(readers)
        w = max(1, problem.sizes[b] // EDGE_WEIGHT_UNIT)
        for x in ends:  # a hyper-edge becomes a star around its producer (or first reader)
            if x != ends[0]:
                key = (min(x, ends[0]), max(x, ends[0]))
                weight[key] = weight.get(key, 0) + w
    adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for (a, c), w in sorted(weight.items()):
        w = min(w, 1 << 24)
        adj[a].append((c, w))
        adj[c].append((a, w))
    xadj, adjncy, eweights = [0], [], []
    for row in adj:
        for c, w in row:
            adjncy.append(c)
            eweights.append(w)
        xadj.append(len(adjncy))
    if k <= 1 or n <= k or not adjncy:
        return [0] * n
    opts = pymetis.Options(seed=seed)
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2 (xadj/adjncy are deprecated there)
        _, parts = pymetis.part_graph(k, pymetis.CSRAdjacency(xadj, adjncy), eweights=eweights, options=opts)
    else:
        _, parts = pymetis.part_graph(k, xadj=xadj, adjncy=adjncy, eweights=eweights, options=opts)
    return list(parts)


def make_acyclic(problem: MemoryProblem, parts: list[int]) -> list[list[int]]:
    """Repair a partition into parts whose dependencies form a chain (see module docstring).
    Returns the non-empty parts in execution order, each as a list of nodes."""
    topo = problem.topological_order()
    pos = {v: i for i, v in enumerate(topo)}
    labels = sorted(set(parts))
    mean = {lab: sum(pos[v] for v in range(problem.n) if parts[v] == lab) /
            max(1, sum(1 for v in range(problem.n) if parts[v] == lab)) for lab in labels}
    rank_of = {lab: r for r, lab in enumerate(sorted(labels, key=lambda lab: (mean[lab], lab)))}
    preds = problem.predecessors()
    rank = [0] * problem.n
    for v in topo:
        rank[v] = max([rank_of[parts[v]]] + [rank[u] for u in preds[v]])
    groups: dict[int, list[int]] = {}
    for v in topo:
        groups.setdefault(rank[v], []).append(v)
    return [groups[r] for r in sorted(groups)]


@dataclass(frozen=True)
class PartitionResult:
    order: list[int]
    peak: int
    parts: list[int]  # sizes of the parts
    solved_parts: int
    status: str  # "feasible" or "timed_out"
    variables: int
    bound: int  # from ``prove`` (0 without it)


def partition_schedule(problem: MemoryProblem, k: int, opts: SolverOptions, refine: bool = True,
                       budget: Budget | None = None,
                       prove: Callable[[list[int]], int] | None = None) -> PartitionResult:
    """Algorithm 2 on an (already fused) problem, within ``budget`` (default: ``opts.time_limit``
    from now).

    ``prove`` (an order of ``problem`` -> a lower bound on its optimum) is asked once, after
    a first solve of the peak's part limited to ``FIRST_SLICE`` of the time limit: an order
    that meets the bound is optimal, so the work ends there; otherwise the bound becomes the
    ILPs' floor (``solve_schedule_ilp``) and the same part is solved again with the rest."""
    budget = budget or Budget(opts)
    rpo = reverse_post_order(problem)
    profile = problem.profile(rpo)
    peak_node = rpo[max(range(len(rpo)), key=profile.__getitem__)]
    groups = make_acyclic(problem, metis_parts(problem, k, opts.seed))
    schedules: list[list[int]] = []
    for i, nodes in enumerate(groups):
        region = _region(problem, groups, i)
        schedules.append([nodes[v] for v in reverse_post_order(region)])
    solved: set[int] = set()
    status, variables, floor = "feasible", 0, 0
    target = next(i for i, nodes in enumerate(groups) if peak_node in nodes)
    while target not in solved and problem.peak([v for s in schedules for v in s]) > floor:
        if budget.remaining() <= 0:
            status = "timed_out"
            break
        nodes = groups[target]
        region = _region(problem, groups, target)
        local = {v: i for i, v in enumerate(nodes)}
        hint = min([best_heuristic_order(region)[0], [local[v] for v in schedules[target]]], key=region.peak)
        first = prove is not None
        part_budget = budget.slice(FIRST_SLICE * opts.time_limit) if first else budget
        result = solve_schedule_ilp(region, hint, opts, budget=part_budget, floor=floor)
        if first:
            budget.charge(part_budget.deterministic_used)
        variables += result.variables
        schedules[target] = [nodes[v] for v in result.order]
        if first:
            floor, prove = prove([v for s in schedules for v in s]), None
            if result.status != "optimal":
                continue  # the same part again, with the floor and the rest of the time
        if result.status != "optimal":
            status = "timed_out"
        solved.add(target)
        if not refine:
            break
        order = [v for s in schedules for v in s]
        prof = problem.profile(order)
        peak_node = order[max(range(len(order)), key=prof.__getitem__)]
        target = next(i for i, nodes in enumerate(groups) if peak_node in nodes)
    order = [v for s in schedules for v in s]
    return PartitionResult(order, problem.peak(order), [len(g) for g in groups], len(solved), status, variables,
                           floor)


def _region(problem: MemoryProblem, groups: list[list[int]], i: int) -> MemoryProblem:
    before = {v for g in groups[:i] for v in g}
    after = {v for g in groups[i + 1:] for v in g}
    return problem.region(groups[i], before=before, after=after)


def default_parts(n: int, max_ilp_nodes: int) -> int:
    return max(1, math.ceil(n / max_ilp_nodes))
