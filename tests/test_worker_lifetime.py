"""Workers of `dse --jobs N` die with the sweep, SIGKILL included (issue 21, item 2's last part)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npusim.dse import workers as worker_lifetime

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")


def _ppids() -> dict[int, int]:
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":  # a zombie is dead, only not yet reaped
            table[int(entry.name)] = int(fields[1])
    return table


def descendants(pid: int) -> set[int]:
    table = _ppids()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in table.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    table = _ppids()
    return {pid for pid in pids if pid in table}


def test_workers_end_when_the_sweep_is_killed(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    sweep = subprocess.Popen(
        [sys.executable, "-m", "npusim.cli", "dse", "resnet18", "--hw", "edge-npu", "--jobs", "2", "--no-cache",
         "--sweep", "budget=1MiB..64MiB:+64KiB", "--max-points", "2000", "-o", str(tmp_path / "r.csv")],
        cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 120  # only a bound on a broken setup: no timing is asserted
        while time.monotonic() < deadline and len(workers) < 3:  # the forkserver and two workers
            time.sleep(0.2)
            workers = descendants(sweep.pid)
        assert len(workers) >= 3, f"the sweep did not start its workers: {workers}"
        assert sweep.poll() is None, "the sweep ended before it could be killed: the test proves nothing"
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
        deadline = time.monotonic() + 30
        while alive(workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert alive(workers) == set(), "workers outlived the sweep killed with SIGKILL"
    finally:
        for pid in alive(workers) | ({sweep.pid} if sweep.poll() is None else set()):
            try:
                os.kill(pid, signal.SIGKILL)  # only processes this test started
            except ProcessLookupError:
                pass


def test_the_watchdog_sees_a_dead_process():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert worker_lifetime._alive(os.getpid()) and not worker_lifetime._alive(child.pid)
