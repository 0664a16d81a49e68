"""Notes of the wall-clock guard that bounds exact planners' deterministic solves.

A CP-SAT search with a deterministic time limit (``planners.schedule.solver``) is also
stopped by the wall clock at ``wall_guard`` x ``time_limit`` (plus a second), so a time
limit bounds the wait whatever the machine's load. When that guard, not the deterministic
limit, ends a search, the answer may differ between runs; the solver records a note here,
and ``npusim.registry.make_plan`` adds the notes of its stages to the plan's ``scope``.
(A context variable, like ``npusim.util.progress``: planners cannot import the registry.)
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

_NOTES: ContextVar = ContextVar("npusim_wall_guard_notes", default=None)


@contextmanager
def collecting():
    """Collect the notes of the solves run inside the block: yields their (growing) list."""
    token = _NOTES.set([])
    try:
        yield _NOTES.get()
    finally:
        _NOTES.reset(token)


def record(note: str) -> None:
    """Keep ``note`` for the enclosing ``collecting`` block (none: dropped)."""
    notes = _NOTES.get()
    if notes is not None and note not in notes:
        notes.append(note)
