"""Solver discipline shared by the exact planners (CP-SAT from OR-Tools).

Every exact planner reads ``time_limit`` (seconds, default 60) and ``workers`` (default 2)
from the pipeline options, warm-starts from a heuristic, and reports one of the plan
statuses: ``optimal`` only when CP-SAT proved it; ``timed_out`` when the time limit stopped
the search (the best solution found is returned, with CP-SAT's lower bound).

Determinism and the wait. By default (``deterministic``, option ``deterministic=false`` to
turn it off) ``time_limit`` is CP-SAT's *deterministic* time (``max_deterministic_time``, work
units of roughly a second on an idle core), not wall time, and several workers interleave
their search in a fixed order (``interleave_search``): same model + seed -> same answer. A
wall-clock guard bounds the wait: a search also stops at ``wall_guard`` x ``time_limit`` +
``GUARD_SLACK`` seconds of wall time (option ``wall_guard``, default ``WALL_GUARD`` = 1.5), and
the model building that the planners check against the clock (``wall_deadline``) stops at the
same mark, so a planner returns within about 1.5 x the limit plus one heuristic pass. When the
guard, not the deterministic limit, ends a search, the answer is ``timed_out`` like any other
limit but may differ between runs, and the plan's ``scope`` says so (``npusim.util.wall_guard``).
The trade: on an idle machine a unit takes about a wall second, so the guard fires only under
load or on presolves CP-SAT does not meter; where the numbers must repeat under any load (the
goldens, ``npusim regress``) ``wall_guard=0`` turns the guard off and the wait is unbounded.
``deterministic=false`` makes the limit plain wall time (``max_time_in_seconds = time_limit``
minus the time already spent) with a free parallel portfolio.

Bounded models. ``check_model_size`` refuses a model with more than ``max_variables``
variables or ``max_constraints`` constraints (options; defaults below) with a PlanningError
that suggests the heuristic or divide-and-conquer variant, instead of exhausting memory.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace

from planners.schedule.cp import cp_model

from npusim.util.progress import solver_progress
from npusim.util.wall_guard import record

from npusim.errors import PlanningError
from npusim.planner_options import Option, values

DEFAULT_TIME_LIMIT = 60.0
DEFAULT_WORKERS = 2
#: Wall-clock cap of a deterministic solve, as a multiple of its time limit (plus GUARD_SLACK):
#: the wait a time limit promises (module docstring); option ``wall_guard`` (0: no guard).
WALL_GUARD = 1.5
GUARD_SLACK = 1.0
#: The largest time limit (a week) and worker count accepted.
MAX_TIME_LIMIT = 7 * 24 * 3600.0
#: A search's wall-time limit when it has no guard (``wall_guard=0``): a week.
NO_GUARD = MAX_TIME_LIMIT
MAX_WORKERS = 256
DEFAULT_MAX_VARIABLES = 2_000_000
DEFAULT_MAX_CONSTRAINTS = 5_000_000

#: The options every CP-SAT planner reads (``SolverOptions.from_options``); a planner with
#: another default time limit declares ``solver_options(time_limit=...)``.
def solver_options(time_limit: float = DEFAULT_TIME_LIMIT) -> tuple[Option, ...]:
    return (
        Option("time_limit", "float", time_limit, "CP-SAT search limit (deterministic units of about a second, "
               "wall seconds with deterministic=false)", unit="s", minimum=0.001, maximum=MAX_TIME_LIMIT),
        Option("workers", "int", DEFAULT_WORKERS, "CP-SAT search workers", minimum=1, maximum=MAX_WORKERS),
        Option("seed", "int", 0, "CP-SAT random seed", minimum=0),
        Option("deterministic", "bool", True, "the limit is deterministic time and workers interleave in a "
               "fixed order (same inputs, same plan); false: wall time and a free portfolio"),
        Option("max_variables", "int", DEFAULT_MAX_VARIABLES, "refuse a CP-SAT model with more variables",
               minimum=1),
        Option("max_constraints", "int", DEFAULT_MAX_CONSTRAINTS, "refuse a CP-SAT model with more constraints",
               minimum=1),
        Option("wall_guard", "float", WALL_GUARD, "a search also stops at wall_guard x time_limit + 1 s of wall "
               "time (0: no guard, for numbers that must repeat under any load)", minimum=0, maximum=1000),
    )


@dataclass(frozen=True)
class SolverOptions:
    time_limit: float = DEFAULT_TIME_LIMIT
    workers: int = DEFAULT_WORKERS
    seed: int = 0
    deterministic: bool = True
    max_variables: int = DEFAULT_MAX_VARIABLES
    max_constraints: int = DEFAULT_MAX_CONSTRAINTS
    wall_guard: float = WALL_GUARD
    #: The ``time.perf_counter()`` mark every solve of this planner call keeps to: set when the
    #: options are read at the call's start (``from_options``), kept by ``with_limit``, so
    #: the solves of one call share one guard instead of each having its own.
    deadline: float | None = field(default=None, compare=False)

    def guard_seconds(self, limit: float | None = None) -> float | None:
        """Wall seconds a deterministic solve of ``limit`` (default: the time limit) may take;
        None without a guard (``wall_guard=0``) or in wall-clock mode (the limit is wall time)."""
        if not self.deterministic or self.wall_guard <= 0:
            return None
        return self.wall_guard * (self.time_limit if limit is None else limit) + GUARD_SLACK

    def wall_seconds(self, limit: float | None = None) -> float:
        """Wall seconds a search of ``limit`` deterministic units starting now may take: its
        guard, cut to what is left before the call's ``deadline``; NO_GUARD without one."""
        guard = self.guard_seconds(limit)
        if guard is None:
            return NO_GUARD
        if self.deadline is not None:
            guard = min(guard, self.deadline - time.perf_counter())
        return max(0.05, guard)

    @staticmethod
    def from_options(options) -> "SolverOptions":
        """The solver options of a stage's options (or a plain dict), checked against their
        declarations (``solver_options``)."""
        o = values(options, solver_options(), "solver")
        opts = SolverOptions(o["time_limit"], o["workers"], o["seed"], o["deterministic"], o["max_variables"],
                             o["max_constraints"], o["wall_guard"])
        return replace(opts, deadline=wall_deadline(opts, time.perf_counter()))

    def with_limit(self, seconds: float) -> "SolverOptions":
        return replace(self, time_limit=max(0.05, seconds))


@functools.cache
def guarded_solver_class() -> type:
    """``GuardedSolver``: a CpSolver that notes (``npusim.util.wall_guard``) when the
    wall-clock guard, not the deterministic limit, ended a search. Made on first use, as
    CP-SAT is loaded then (``planners.schedule.cp``)."""

    class GuardedSolver(cp_model.CpSolver):
        guard: float | None = None

        def Solve(self, model, *args, **kwargs):  # noqa: N802 -- CP-SAT's name
            code = super().Solve(model, *args, **kwargs)
            if self.guard is not None and code != cp_model.OPTIMAL and code != cp_model.INFEASIBLE:
                det_limit = self.parameters.max_deterministic_time
                if (self.wall_time >= 0.95 * self.parameters.max_time_in_seconds
                        and self.deterministic_time < 0.95 * det_limit):
                    note_guard(f"a CP-SAT search after {self.wall_time:.1f} s, at {self.deterministic_time:.1f} "
                               f"of its {det_limit:g} deterministic units")
            return code

    return GuardedSolver


def note_guard(what: str) -> None:
    """Record that the wall-clock guard, not the deterministic limit, stopped ``what``."""
    record(f"the wall-clock guard stopped {what}: the answer may differ between runs (wall_guard=0 to wait "
           "for it)")


def wall_deadline(opts: SolverOptions, start: float) -> float | None:
    """The ``time.perf_counter()`` by which a planner started at ``start`` must stop building
    models and start no more solves: ``start`` + the limit in wall-clock mode, + the guard in
    deterministic mode (and never after the call's ``opts.deadline``), None without a guard."""
    if not opts.deterministic:
        return start + opts.time_limit
    guard = opts.guard_seconds()
    if guard is None:
        return None
    return start + guard if opts.deadline is None else min(start + guard, opts.deadline)


def make_solver(opts: SolverOptions, started: float | None = None, deadline: float | None = None) -> cp_model.CpSolver:
    """A CP-SAT solver under ``opts``' limits. ``started``: the ``time.perf_counter()`` at
    which the call began; the time since then (building the model) is taken off the wall-clock
    limit, or off the guard in deterministic mode, so the whole call stays within it.
    ``deadline``: a wall-clock mark of an enclosing call (``wall_deadline``) the guard keeps
    to as well, for planners that run several solves under one limit."""
    solver = guarded_solver_class()()
    solver.parameters.num_workers = opts.workers
    solver.parameters.random_seed = opts.seed
    spent = 0.0 if started is None else time.perf_counter() - started
    if opts.deterministic:
        solver.parameters.max_deterministic_time = opts.time_limit
        solver.parameters.interleave_search = opts.workers > 1
        guard = opts.guard_seconds()
        if guard is not None:
            guard -= spent
            for mark in (deadline, opts.deadline):
                if mark is not None:
                    guard = min(guard, mark - time.perf_counter())
            solver.guard = max(0.05, guard)
            solver.parameters.max_time_in_seconds = solver.guard
    else:
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
