"""Solver discipline shared by the exact planners (CP-SAT from OR-Tools).

Every exact planner reads ``time_limit`` (seconds, default 60) and ``workers`` (default 2)
from the pipeline options, warm-starts from a heuristic, and reports one of the plan
statuses: ``optimal`` only when CP-SAT proved it; ``timed_out`` when the time limit stopped
the search (the best solution found is returned, with CP-SAT's lower bound).
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from npusim.errors import PlanningError

DEFAULT_TIME_LIMIT = 60.0
DEFAULT_WORKERS = 2


@dataclass(frozen=True)
class SolverOptions:
    time_limit: float = DEFAULT_TIME_LIMIT
    workers: int = DEFAULT_WORKERS
    seed: int = 0

    @staticmethod
    def from_options(options: dict) -> "SolverOptions":
        try:
            limit = float(options.get("time_limit", DEFAULT_TIME_LIMIT))
            workers = int(options.get("workers", DEFAULT_WORKERS))
            seed = int(options.get("seed", 0))
        except (TypeError, ValueError) as exc:
            raise PlanningError(f"solver options {options!r}: time_limit must be a number of seconds, "
                                f"workers and seed integers ({exc})") from None
        if limit <= 0 or workers < 1:
            raise PlanningError(f"solver options: time_limit = {limit} and workers = {workers}; "
                                "expected time_limit > 0 and workers >= 1")
        return SolverOptions(limit, workers, seed)

    def with_limit(self, seconds: float) -> "SolverOptions":
        return SolverOptions(max(0.05, seconds), self.workers, self.seed)


def make_solver(opts: SolverOptions) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = opts.time_limit
    solver.parameters.num_workers = opts.workers
    solver.parameters.random_seed = opts.seed
    return solver


def status_name(code) -> str:
    """Plan status of a CP-SAT answer that has a solution."""
    return "optimal" if code == cp_model.OPTIMAL else "timed_out"


def has_solution(code) -> bool:
    return code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
