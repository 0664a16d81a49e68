"""The time budget of one ``zhong`` call, shared by all its CP-SAT solves.

``time_limit`` bounds the whole call, not each solve. With ``deterministic=false`` it is wall
time from the start of the call, so fusion, heuristics and building every ILP model count
against it (a solve gets what is left once its model is built). With the default
deterministic mode it is CP-SAT's deterministic time summed over the solves, so the same
inputs give the same plan whatever the machine's load (wall time spent building models
cannot be counted without losing that); the wall clock then only guards the call: past
the wall guard (``wall_guard`` x ``time_limit`` + a second, planners.schedule.solver) no
further solve starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from planners.schedule.solver import SolverOptions, note_guard, wall_deadline


@dataclass
class Budget:
    opts: SolverOptions
    start: float = field(default_factory=time.perf_counter)
    deterministic_used: float = 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def remaining(self) -> float:
        """Seconds (deterministic or wall, see module docstring) left for solving."""
        if self.opts.deterministic:
            guard = self.opts.guard_seconds()
            if guard is not None and self.elapsed() > guard:
                note_guard(f"zhong's solves after {self.elapsed():.1f} s, at {self.deterministic_used:.1f} of its "
                           f"{self.opts.time_limit:g} deterministic units")
                return 0.0
            return self.opts.time_limit - self.deterministic_used
        return self.opts.time_limit - self.elapsed()

    def deadline(self) -> float | None:
        """The wall-clock mark every solve of the call keeps to (``wall_deadline``)."""
        return wall_deadline(self.opts, self.start)

    def solver_options(self) -> SolverOptions:
        """Options for the next solve: the limit is what is left."""
        return self.opts.with_limit(self.remaining())

    def charge(self, deterministic_time: float) -> None:
        self.deterministic_used += deterministic_time

    def slice(self, seconds: float) -> "Budget":
        """A budget of at most ``seconds`` from now, within this one; charge its
        ``deterministic_used`` back to this one when done (wall time counts here anyway)."""
        return Budget(self.opts.with_limit(max(0.0, min(seconds, self.remaining()))))
