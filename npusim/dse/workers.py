"""Worker processes that die with the sweep that started them (SIGKILL of it included).

``dse --jobs N`` runs points in a process pool whose workers are forked by a forkserver,
itself a child of the sweep. When the sweep is killed with SIGKILL nothing runs in it to
stop them, and a worker busy in a solver would otherwise run on for as long as its point
takes. :func:`die_with` is the pool's worker initializer; it uses two mechanisms:

- on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker when its
  parent (the forkserver, which exits when the sweep's end of its pipe closes) dies;
- everywhere, a daemon thread that checks every ``POLL_SECONDS`` that the sweep process
  is still alive and that the worker has not been re-parented, and ends the worker
  (``os._exit``) when either fails. It costs one ``kill(pid, 0)`` per second.

Workers only compute rows (the sweep writes the cache and the results), so ending one
abruptly loses nothing but its current point.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

POLL_SECONDS = 1.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with(sweep_pid: int) -> None:
    """Process-pool initializer: end this worker when process ``sweep_pid`` ends."""
    parent = os.getppid()
    _set_parent_death_signal()
    if os.getppid() != parent or not _alive(sweep_pid):  # it died before the signal was armed
        os._exit(1)
    watchdog = threading.Thread(target=_watch, args=(sweep_pid, parent), name="npusim-parent-watchdog",
                                daemon=True)
    watchdog.start()


def _set_parent_death_signal() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):  # no libc symbol (musl oddities): the watchdog still works
        return False


def _watch(sweep_pid: int, parent: int) -> None:
    stop = threading.Event()
    while not stop.wait(POLL_SECONDS):
        if os.getppid() != parent or not _alive(sweep_pid):
            os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (cannot be ours, but it is alive)
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    """A killed sweep whose own parent has not reaped it yet is a zombie: dead for us."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0] != b"Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(pid, 0) is all we have
