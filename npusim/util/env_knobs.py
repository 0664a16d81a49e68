"""Environment variables npusim reads, each checked when it is used.

A knob set to something unusable (``abc``, ``nan``, ``inf``, ``-5``, a folder that does
not exist) is a one-line user error naming the variable, its value and what was expected;
it never crashes an import or silently turns a guard off.

- ``NPUSIM_SIM_MAX_SECONDS``: the wall-clock guard of one simulation (default 3600 s).
- ``NPUSIM_HW_PATH``: extra folders (separated by ``os.pathsep``) that ``extends:`` in a
  hardware YAML may resolve into, besides the config's own folder and the shipped configs.
- ``NPUSIM_PROGRESS_SECONDS``: seconds between two progress lines of a long command when
  stderr is not a terminal (default 5; ``npusim.util.progress``).
- ``NPUSIM_MEMORY_LIMIT``: the memory a simulation may plan to use (a size: ``8GiB``;
  default: the machine's available memory, ``MemAvailable`` in ``/proc/meminfo``; no check
  where that is unknown). ``npusim.workflow.check_simulation_memory`` reads it.
- ``NPUSIM_SIM_LOOP``: which event loop runs a simulation: ``auto`` (default: the compiled
  loop, ``npusim.sim.compiled_loop``, for programs of ``COMPILED_LOOP_MIN_COMMANDS`` commands
  or more, SimPy below), ``simpy`` or ``compiled`` (every program it can run). Both give the
  same report; the knob is for cross-checking one against the other.
- ``NPUSIM_DEBUG``: any value but empty, ``0``, ``false``, ``no``, ``off`` shows the
  traceback of an internal error.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from npusim.errors import NpusimError
from npusim.util.units import parse_size

SIM_MAX_SECONDS = "NPUSIM_SIM_MAX_SECONDS"
HW_PATH = "NPUSIM_HW_PATH"
DEBUG = "NPUSIM_DEBUG"
PROGRESS_SECONDS = "NPUSIM_PROGRESS_SECONDS"
MEMORY_LIMIT = "NPUSIM_MEMORY_LIMIT"
SIM_LOOP = "NPUSIM_SIM_LOOP"
SIM_LOOPS = ("auto", "simpy", "compiled")


class EnvironmentKnobError(NpusimError):
    """An NPUSIM_* environment variable holds a value npusim cannot use."""


def positive_seconds(name: str, default: float) -> float:
    """A positive, finite number of seconds from ``name`` (``default`` when unset or empty)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise EnvironmentKnobError(f"environment variable {name}={raw[:40]!r}: expected a positive, finite "
                                   f"number of seconds, e.g. {name}={default:g}")
    return value


def sim_loop() -> str:
    """``NPUSIM_SIM_LOOP``: ``auto`` (unset or empty), ``simpy`` or ``compiled``."""
    raw = os.environ.get(SIM_LOOP, "").strip().lower() or "auto"
    if raw not in SIM_LOOPS:
        raise EnvironmentKnobError(f"environment variable {SIM_LOOP}={raw[:40]!r}: expected one of "
                                   f"{', '.join(SIM_LOOPS)}")
    return raw


def sim_max_seconds(default: float = 3600.0) -> float:
    return positive_seconds(SIM_MAX_SECONDS, default)


def progress_seconds(default: float = 5.0) -> float:
    return positive_seconds(PROGRESS_SECONDS, default)


def hw_search_path() -> list[Path]:
    """The folders of ``NPUSIM_HW_PATH``, each an existing folder."""
    raw = os.environ.get(HW_PATH, "")
    folders = []
    for part in raw.split(os.pathsep):
        if not part.strip():
            continue
        folder = Path(part.strip()).expanduser()
        if not folder.is_dir():
            raise EnvironmentKnobError(f"environment variable {HW_PATH}: {part.strip()[:80]!r} is not a folder; "
                                       f"expected folders of hardware YAML files separated by {os.pathsep!r}")
        folders.append(folder)
    return folders


def debug() -> bool:
    return os.environ.get(DEBUG, "").strip().lower() not in ("", "0", "false", "no", "off")


def check_all() -> None:
    """Check every knob up front (the CLI does, so a sweep does not turn a bad knob into
    infeasible rows): raises EnvironmentKnobError for the first bad one."""
    sim_max_seconds()
    sim_loop()
    progress_seconds()
    hw_search_path()
    if os.environ.get(MEMORY_LIMIT, "").strip():  # (unset: the machine's memory, read when needed)
        memory_limit()


def memory_limit() -> int | None:
    """Bytes a simulation may use: ``NPUSIM_MEMORY_LIMIT``, else the machine's available memory
    (Linux ``MemAvailable``), else None (unknown: no check)."""
    raw = os.environ.get(MEMORY_LIMIT, "").strip()
    if raw:
        try:
            value = parse_size(raw)
        except (NpusimError, ValueError):
            value = 0
        if value <= 0:
            raise EnvironmentKnobError(f"environment variable {MEMORY_LIMIT}={raw[:40]!r}: expected a positive "
                                       f"size, e.g. {MEMORY_LIMIT}=8GiB")
        return int(value)
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
