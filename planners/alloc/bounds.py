"""Lower bounds on the footprint of an offset assignment (MindSpore paper, Appendix F).

- ``lifetime_bound``: the most bytes live at one step of the global order. Valid for any
  stream assignment whose order is the plan's order, since the multi-stream unsafe pairs
  contain the lifetime overlaps (Section 3; tested).
- ``max_weight_clique``: items that pairwise conflict need disjoint addresses, so the heaviest
  clique of the conflict graph is a bound. For lifetime conflicts (interval graphs) it equals
  the lifetime bound; for an explicit conflict set it is solved exactly with CP-SAT when the
  problem is small enough (``max_items``), with a time limit; a timed-out solve reports the
  solver's proven bound, never more. Larger problems get ``greedy_clique``: a heavy clique
  grown from the heaviest steps' live sets — not the maximum, but still a valid bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from planners.schedule.cp import cp_model

from planners.alloc.problem import OffsetProblem
from planners.schedule.solver import SolverOptions, make_solver


@dataclass(frozen=True)
class Bound:
    value: int
    kind: str  # lifetime | clique
    exact: bool  # True when ``value`` is the optimum of its bound problem


def lifetime_bound(problem: OffsetProblem) -> Bound:
    return Bound(problem.lifetime_bound(), "lifetime", True)


def max_weight_clique(problem: OffsetProblem, *, max_items: int = 250, time_limit: float = 5.0,
                      workers: int = 2, opts: SolverOptions | None = None) -> Bound | None:
    """The heaviest clique of the conflict graph (None if the problem is too large to solve)."""
    if problem.conflicts is None:
        return lifetime_bound(problem) if problem.has_lifetimes else None
    if problem.n > max_items:
        return None
    rel = problem.conflicts
    model = cp_model.CpModel()
    pick = [model.NewBoolVar(f"in{i}") for i in range(problem.n)]
    for i in range(problem.n):
        row = rel.row(i)
        for j in range(i + 1, problem.n):
            if not row[j]:
                model.AddBoolOr([pick[i].Not(), pick[j].Not()])
    model.Maximize(sum(int(problem.sizes[i]) * pick[i] for i in range(problem.n)))
    solver = make_solver(opts or SolverOptions(time_limit, workers))  # deterministic time, see there
    status = solver.Solve(model)
    if status == cp_model.OPTIMAL:
        return Bound(int(round(solver.ObjectiveValue())), "clique", True)
    if status == cp_model.FEASIBLE:  # the found clique is a valid bound; the optimum is unknown
        return Bound(int(round(solver.ObjectiveValue())), "clique", False)
    return None


def greedy_clique(problem: OffsetProblem, *, seeds: int = 64) -> Bound | None:
    """A heavy clique of an explicit conflict set as a bound (any clique is a valid bound);
    None without one. For problems too large for ``max_weight_clique``'s exact solve."""
    if problem.conflicts is None:
        return None
    members = heavy_clique(problem, seeds=seeds)
    return Bound(int(np.asarray(problem.sizes, dtype=np.int64)[members].sum()), "clique", False)


def heavy_clique(problem: OffsetProblem, *, seeds: int = 64) -> list[int]:
    """Members of a heavy clique of the explicit conflict set, grown greedily.

    Seeds: the live sets of the ``seeds`` heaviest steps of the global order (with lifetimes;
    the multi-stream relation contains the lifetime overlaps, so each is nearly always a clique
    already — members that are not are dropped, lightest first), else the heaviest single items.
    Each seed is then extended by the heaviest item in conflict with every member, repeatedly."""
    rel = problem.conflicts
    sizes = np.asarray(problem.sizes, dtype=np.int64)
    if problem.has_lifetimes:
        first, last = np.asarray(problem.first), np.asarray(problem.last)
        steps = np.arange(int(first.min()), int(last.max()) + 1)
        delta = np.zeros(len(steps) + 1, dtype=np.int64)
        np.add.at(delta, first - steps[0], sizes)
        np.add.at(delta, last - steps[0] + 1, -sizes)
        live = np.cumsum(delta)[:-1]
        heavy_steps = steps[np.argsort(-live, kind="stable")[:seeds]]
        starts = [np.flatnonzero((first <= t) & (last >= t)) for t in heavy_steps]
    else:
        starts = [np.array([i]) for i in np.argsort(-sizes, kind="stable")[:seeds]]
    cliques = [_grow_clique(rel, sizes, m[np.argsort(-sizes[m], kind="stable")]) for m in starts]
    return max(cliques, key=lambda c: int(sizes[c].sum()))


def _grow_clique(rel, sizes: np.ndarray, members: np.ndarray) -> list[int]:
    """A clique from ``members`` (heaviest first, keeping those in conflict with all kept so
    far), then extended greedily by the heaviest common neighbour."""
    allowed = np.ones(len(sizes), dtype=bool)
    clique = []
    for i in members.tolist():
        if allowed[i]:
            allowed &= rel.row(i)  # the relation is irreflexive: i leaves the candidates
            clique.append(i)
    while allowed.any():
        i = int(np.argmax(np.where(allowed, sizes, -1)))
        allowed &= rel.row(i)
        clique.append(i)
    return clique


def best_bound(problem: OffsetProblem, **clique_options) -> Bound:
    """The largest of the lifetime bound, a greedy clique and (when solvable) the exact clique."""
    candidates = []
    if problem.has_lifetimes:
        candidates.append(lifetime_bound(problem))
    greedy = greedy_clique(problem)
    if greedy is not None:
        candidates.append(greedy)
    clique = max_weight_clique(problem, **clique_options)
    if clique is not None:
        candidates.append(clique)
    if not candidates:
        return Bound(int(problem.sizes.max(initial=0)), "largest item", True)
    return max(candidates, key=lambda b: b.value)
