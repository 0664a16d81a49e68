"""Lower bounds on the footprint of an offset assignment (MindSpore paper, Appendix F).

- ``lifetime_bound``: the most bytes live at one step of the global order. Valid for any
  stream assignment whose order is the plan's order, since the multi-stream unsafe pairs
  contain the lifetime overlaps (Section 3; tested).
- ``max_weight_clique``: items that pairwise conflict need disjoint addresses, so the heaviest
  clique of the conflict graph is a bound. For lifetime conflicts (interval graphs) it equals
  the lifetime bound; for an explicit conflict set it is solved exactly with CP-SAT when the
  problem is small enough (``max_items``), with a time limit; a timed-out solve reports the
  solver's proven bound, never more.
"""

from __future__ import annotations

from dataclasses import dataclass

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
                      workers: int = 2) -> Bound | None:
    """The heaviest clique of the conflict graph (None if the problem is too large to solve)."""
    if problem.conflicts is None:
        return lifetime_bound(problem) if problem.has_lifetimes else None
    if problem.n > max_items:
        return None
    from ortools.sat.python import cp_model

    rel = problem.conflicts
    model = cp_model.CpModel()
    pick = [model.NewBoolVar(f"in{i}") for i in range(problem.n)]
    for i in range(problem.n):
        row = rel.row(i)
        for j in range(i + 1, problem.n):
            if not row[j]:
                model.AddBoolOr([pick[i].Not(), pick[j].Not()])
    model.Maximize(sum(int(problem.sizes[i]) * pick[i] for i in range(problem.n)))
    solver = make_solver(SolverOptions(time_limit, workers))  # deterministic time, see there
    status = solver.Solve(model)
    if status == cp_model.OPTIMAL:
        return Bound(int(round(solver.ObjectiveValue())), "clique", True)
    if status == cp_model.FEASIBLE:  # the found clique is a valid bound; the optimum is unknown
        return Bound(int(round(solver.ObjectiveValue())), "clique", False)
    return None


def best_bound(problem: OffsetProblem, **clique_options) -> Bound:
    """The larger of the lifetime bound and (when solvable) the clique bound."""
    candidates = []
    if problem.has_lifetimes:
        candidates.append(lifetime_bound(problem))
    clique = max_weight_clique(problem, **clique_options)
    if clique is not None:
        candidates.append(clique)
    if not candidates:
        return Bound(int(problem.sizes.max(initial=0)), "largest item", True)
    return max(candidates, key=lambda b: b.value)
