"""Feedback on long work: what is being done and how far it got.

A ``Progress`` is a callable the CLI hands to planning and simulation:
``progress(what, done=None, total=None, detail="")`` says that the command is now at
``what`` (``tiling ops``, ``simulating: cycle``), ``done`` of ``total``. On a terminal it
draws a tqdm bar per ``what``. Otherwise (CI logs, pipes, files) a daemon thread writes the
latest state to stderr as one line every ``NPUSIM_PROGRESS_SECONDS`` (5 s), starting after
the first interval: short runs stay quiet, and a run of minutes says where it is even inside
a step that reports nothing new (``... 25 s: validating the plan``). Library calls get
``silent``, which does nothing.

Code deep inside a planner (a CP-SAT solve) reaches the run's progress through ``current()``,
set by ``reporting(progress)`` around the planning stages, instead of a parameter threaded
through every call: ``solver_progress`` turns CP-SAT's search log into "incumbent, bound".
"""

from __future__ import annotations

import re
import sys
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar

from npusim.util.env_knobs import progress_seconds


def silent(what: str, done: int | float | None = None, total: int | float | None = None, detail: str = "") -> None:
    """The progress of library calls: nothing."""


_CURRENT: ContextVar = ContextVar("npusim_progress", default=silent)


def current():
    """The progress of the planning run in this context (``silent`` outside one)."""
    return _CURRENT.get()


@contextmanager
def reporting(progress):
    token = _CURRENT.set(progress)
    try:
        yield progress
    finally:
        _CURRENT.reset(token)


#: A CP-SAT search-log line with a new solution or bound: "#3  1.2s best:750 next:[700,749] ...".
_SEARCH_LINE = re.compile(r"^#(?:\d+|Bound)\s+([\d.]+)s\s+best:(\S+)\s+next:\[(\S*?)(?:,\S*)?\]")


def solver_progress(solver, what: str = "solving (CP-SAT)") -> None:
    """Report ``solver``'s incumbent and bound to ``current()`` as it searches (nothing when
    the run is silent: the search log costs a little)."""
    progress = current()
    if progress is silent:
        return

    def line(text: str) -> None:
        found = _SEARCH_LINE.match(text)
        if found:
            seconds, best, bound = found.groups()
            bound = bound or best
            try:  # every model here minimises bytes or a peak: a negative bound is CP-SAT's "none yet"
                known = float(bound) >= 0
            except ValueError:
                known = True
            shown = f"bound {bound}" if known else "no bound yet"
            progress(what, detail=f"incumbent {best}, {shown}, {float(seconds):.0f} s")

    solver.parameters.log_search_progress = True
    solver.parameters.log_to_stdout = False
    solver.log_callback = line


class Progress:
    def __init__(self, label: str = "npusim", *, stream=None, terminal: bool | None = None,
                 interval: float | None = None, clock=time.monotonic) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = _isatty(self.stream) if terminal is None else terminal
        self.interval = progress_seconds() if interval is None else interval
        self.clock = clock
        self.started = clock()
        self.state: tuple | None = None  # (what, done, total, detail): read by the writer thread
        self._bar = None
        self._bar_what = None
        self._last_draw = self.started
        self._stop = threading.Event()
        self._writer: threading.Thread | None = None

    def __call__(self, what: str, done: int | float | None = None, total: int | float | None = None,
                 detail: str = "") -> None:
        self.state = (what, done, total, detail)
        if not self.terminal:
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_lines, name="npusim-progress", daemon=True)
                self._writer.start()
            return
        now = self.clock()
        if what == self._bar_what and now - self._last_draw < 0.1:  # callers may call once per op
            return
        self._last_draw = now
        self._draw(what, done, total, detail)

    def line(self) -> str:
        """The progress line of the latest state."""
        what, done, total, detail = self.state
        count = "" if done is None else f" {done:,.0f}" + ("" if total is None else f"/{total:,.0f}")
        extra = f" ({detail})" if detail else ""
        return f"{self.label}: {self.clock() - self.started:.0f} s: {what}{count}{extra}"

    def _write_lines(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                print(self.line(), file=self.stream, flush=True)
            except (OSError, ValueError):  # stderr closed under us: feedback is not worth a crash
                return

    def _draw(self, what, done, total, detail) -> None:
        from tqdm import tqdm  # lazy: ~35 ms to import, and only a terminal bar needs it

        if self._bar is None or self._bar_what != what:
            self._close_bar()
            self._bar = tqdm(total=total, desc=f"{self.label}: {what}", leave=False, file=self.stream)
            self._bar_what = what
        if total is not None and self._bar.total != total:
            self._bar.total = total
        if done is not None:
            self._bar.n = done
        if detail:
            self._bar.set_postfix_str(detail, refresh=False)
        self._bar.refresh()

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop drawing and writing (call when the work is done, also on errors)."""
        self._stop.set()
        self._close_bar()
        if self._writer is not None:
            self._writer.join()


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
