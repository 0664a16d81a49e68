"""Solver discipline shared by the exact planners (CP-SAT from OR-Tools).

Every exact planner reads ``time_limit`` (seconds, default 60) and ``workers`` (default 2)
from the pipeline options, warm-starts from a heuristic, and reports one of the plan
statuses: ``optimal`` only when CP-SAT proved it; ``timed_out`` when the time limit stopped
the search (the best solution found is returned, with CP-SAT's lower bound).

Determinism. By default (``deterministic``, option ``deterministic=false`` to turn it off)
``time_limit`` is CP-SAT's *deterministic* time (``max_deterministic_time``, work units of
roughly a second each), not wall time, and several workers interleave their search in a fixed
order (``interleave_search``): same model + seed -> same answer, whatever the machine's load.
A wall-clock guard of ``WALL_GUARD`` x ``time_limit`` still bounds every call; if it stops a
search first, the answer is ``timed_out`` like any other limit, but may then differ between
runs. (Planners that split their limit between several solves by elapsed wall time keep that
split; it matters only when the limits bind.) ``deterministic=false`` restores a plain
wall-clock ``max_time_in_seconds = time_limit`` with a free parallel portfolio.

Bounded models. ``check_model_size`` refuses a model with more than ``max_variables``
variables or ``max_constraints`` constraints (options; defaults below) with a PlanningError
that suggests the heuristic or divide-and-conquer variant, instead of exhausting memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ortools.sat.python import cp_model

from npusim.progress import solver_progress

from npusim.errors import PlanningError

DEFAULT_TIME_LIMIT = 60.0
DEFAULT_WORKERS = 2
#: Wall-clock cap of a deterministic solve, as a multiple of its time limit (plus one second):
#: generous, since a loaded 2-core machine can take several seconds per deterministic unit, and
#: a guard that fires makes the answer depend on the load.
WALL_GUARD = 30.0
DEFAULT_MAX_VARIABLES = 2_000_000
DEFAULT_MAX_CONSTRAINTS = 5_000_000


@dataclass(frozen=True)
class SolverOptions:
    time_limit: float = DEFAULT_TIME_LIMIT
    workers: int = DEFAULT_WORKERS
    seed: int = 0
    deterministic: bool = True
    max_variables: int = DEFAULT_MAX_VARIABLES
    max_constraints: int = DEFAULT_MAX_CONSTRAINTS

    @staticmethod
    def from_options(options: dict) -> "SolverOptions":
        try:
            limit = float(options.get("time_limit", DEFAULT_TIME_LIMIT))
            workers = int(options.get("workers", DEFAULT_WORKERS))
            seed = int(options.get("seed", 0))
            max_variables = int(options.get("max_variables", DEFAULT_MAX_VARIABLES))
            max_constraints = int(options.get("max_constraints", DEFAULT_MAX_CONSTRAINTS))
        except (TypeError, ValueError) as exc:
            raise PlanningError(f"solver options {options!r}: time_limit must be a number of seconds, "
                                f"workers, seed, max_variables and max_constraints integers ({exc})") from None
        deterministic = options.get("deterministic", True)
        if not isinstance(deterministic, bool):
            raise PlanningError(f"solver option deterministic = {deterministic!r}: expected true or false")
        if limit <= 0 or workers < 1:
            raise PlanningError(f"solver options: time_limit = {limit} and workers = {workers}; "
                                "expected time_limit > 0 and workers >= 1")
        return SolverOptions(limit, workers, seed, deterministic, max_variables, max_constraints)

    def with_limit(self, seconds: float) -> "SolverOptions":
        return replace(self, time_limit=max(0.05, seconds))


def make_solver(opts: SolverOptions, started: float | None = None) -> cp_model.CpSolver:
    """A CP-SAT solver under ``opts``' limits. ``started``: the ``time.perf_counter()`` at
    which the call began; in wall-clock mode the time since then (building the model) is
    taken off the limit, so the whole call stays within it."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = opts.workers
    solver.parameters.random_seed = opts.seed
    if opts.deterministic:
        solver.parameters.max_deterministic_time = opts.time_limit
        solver.parameters.max_time_in_seconds = WALL_GUARD * opts.time_limit + 1.0
        solver.parameters.interleave_search = opts.workers > 1
    else:
        spent = 0.0 if started is None else time.perf_counter() - started
        solver.parameters.max_time_in_seconds = max(0.05, opts.time_limit - spent)
    solver_progress(solver)  # incumbent and bound on the run's progress line, if it has one
    return solver


def check_model_size(model: cp_model.CpModel, opts: SolverOptions, planner: str, instead: str) -> None:
    """Refuse a model above the size limits, before CP-SAT allocates for it.

    ``instead``: the variant to suggest (e.g. "'greedy-mem' or 'zhong'")."""
    proto = model.Proto()
    n_vars, n_cons = len(proto.variables), len(proto.constraints)
    if n_vars > opts.max_variables or n_cons > opts.max_constraints:
        raise PlanningError(
            f"{planner}: the exact model has {n_vars:,} variables and {n_cons:,} constraints, above the "
            f"limits max_variables = {opts.max_variables:,} / max_constraints = {opts.max_constraints:,}; "
            f"use {instead}, or raise the limits with --option max_variables=N / max_constraints=N")


def status_name(code) -> str:
    """Plan status of a CP-SAT answer that has a solution."""
    return "optimal" if code == cp_model.OPTIMAL else "timed_out"


def has_solution(code) -> bool:
    return code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
