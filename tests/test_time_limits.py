"""Every limit is a limit (issue 21, item 2): each planner's ``time_limit`` covers all its
phases -- heuristics, warm starts, model building, solving -- checked on a fake clock for
every registered planner that takes one.

The planners read the time through ``time.perf_counter()`` of their module's ``time`` (a
test below keeps it so: no other clock in ``planners/``). Here every planner module's
``time`` is a fake whose ``perf_counter()`` jumps ``STEP`` seconds at each reading, so any
deadline a planner computes has passed by its next look at the clock. With
``deterministic=false`` (wall-clock limits; in deterministic mode the limit is CP-SAT's work
units, which no Python clock can stand in for), a planner that honours its limit in every
phase then does only what every answer needs -- a heuristic order and placement, no model,
token solves -- and returns at once, with a plan or a clean ``NpusimError``. A phase that
ignores the limit shows in the real seconds taken: ``GRAPH_OPS`` ops is large enough that
OLLA's lifetime model alone took 39 s to build before its builder looked at the clock (now
about 1 s for the whole planner), against a bound of ``SLACK_SECONDS`` plus ``SLACK_FACTOR``
times a heuristic pipeline on the same graph.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import time
import types
from pathlib import Path

import pytest

import planners
from npusim.errors import NpusimError
from npusim.hw.config import Hardware
from npusim.registry import default_registry, make_plan
from npusim.testing import random_dags
from npusim.workflow import memory_bounds

from tests.helpers import FakeClock

GRAPH_OPS = 1500
STEP = 1000.0  # seconds the fake clock moves at each reading: far past any limit below
TIME_LIMIT = 1.0
SLACK_SECONDS, SLACK_FACTOR = 10.0, 10.0
MAX_READINGS = 500  # a planner looks at the clock a bounded number of times (at most ~80 seen)
BASELINE = "greedy-mem+tflite-arena"  # what a heuristic answer costs on the graph

#: planner -> (pipeline that runs it, extra options). Budgets: the scratchpad for the
#: whole-lifetime planners, between M_R and the peak for COSMA (so that it must spill).
TIME_LIMITED = {
    "olla": ("olla", {}),
    "olla-order": ("olla-order+tflite-arena", {}),
    "zhong": ("zhong+tflite-arena", {}),
    "exact-offsets": ("default+exact-offsets", {}),
    # max_cells raised: on this graph cosma would otherwise refuse (a clean error, but before
    # any time-limited phase); with it, it builds its part and must stop for time
    "cosma": ("cosma", {"max_cells": 10**9}),
    "cosma-dnc": ("cosma-dnc", {}),
    "cosma-fs": ("default+cosma-fs", {}),
    "cosma-mpmf": ("cosma-mpmf", {}),
}

_NO_READ = "reads no time_limit: "
#: planner -> why it has no time limit (what bounds it instead)
WITHOUT_LIMIT = {
    "dp": _NO_READ + "exact DP bounded by max_ops (refuses graphs over ~25 ops) and max_states",
    "default": _NO_READ + "the definition order, linear",
    "rpo": _NO_READ + "a depth-first search, linear",
    "greedy-mem": _NO_READ + "list scheduling, a fixed number of greedy passes",
    "streams-category": _NO_READ + "one pass over the ops",
    "streams-rr": _NO_READ + "one pass over the ops",
    "belady": _NO_READ + "an eviction rule, asked once per eviction",
    "lru": _NO_READ + "an eviction rule, asked once per eviction",
    "greedy-ilp": _NO_READ + "cheapest_window, exact by enumeration (O(k^2) for k resident blocks), no solver",
    "arena": _NO_READ + "online best fit, one pass over the order",
    "naive": _NO_READ + "one address per tensor",
    "tflite-arena": _NO_READ + "a greedy heuristic",
    "tflm-greedy": _NO_READ + "a greedy heuristic",
    "so-breadth": _NO_READ + "a greedy heuristic (Shared Objects)",
    "so-size": _NO_READ + "a greedy heuristic (Shared Objects)",
    "so-size-improved": _NO_READ + "a greedy heuristic (Shared Objects)",
    "offchip-naive": _NO_READ + "one DRAM address per buffer",
    "offchip-offsets": _NO_READ + "a greedy heuristic (largest first, best fit)",
    "offchip-so": _NO_READ + "three greedy heuristics",
    "taa": _NO_READ + "a greedy heuristic over tiles",
    "tile": _NO_READ + "the tiler: near-linear in the inputs per op (tests/test_limits.py)",
    "fuse": _NO_READ + "one pass matching epilogues",
}
WITHOUT_LIMIT_FAMILIES = {  # every sort x fit of the MindSpore heuristics
    "mindspore-so:": _NO_READ + "a greedy heuristic (MindSpore Single Object)",
    "mindspore-mo:": _NO_READ + "a greedy heuristic (MindSpore Many Objects)",
}


def _builtin_names() -> list[str]:
    return [p.name for p in default_registry().planners() if type(p).__module__.split(".")[0] == "planners"]


def _without_limit(name: str) -> str | None:
    return WITHOUT_LIMIT.get(name) or next((why for prefix, why in WITHOUT_LIMIT_FAMILIES.items()
                                            if name.startswith(prefix)), None)


def test_every_builtin_planner_is_checked_or_says_why_not():
    """A new planner must join TIME_LIMITED (and so the fake-clock test) or WITHOUT_LIMIT.
    (Plugin planners are their packages' business.)"""
    names = _builtin_names()
    unclassified = [n for n in names if n not in TIME_LIMITED and _without_limit(n) is None]
    assert not unclassified, f"planners neither time-limited here nor listed without a limit: {unclassified}"
    assert not [n for n in TIME_LIMITED if _without_limit(n)], "a planner in both lists"
    gone = [n for n in list(TIME_LIMITED) + list(WITHOUT_LIMIT) if n not in names]
    assert not gone, f"listed planners that are not registered: {gone}"


def test_planners_read_no_other_clock():
    """The fake clock below replaces ``time.perf_counter`` of the planner modules: a planner
    that read another clock (``time.time``, ``monotonic``, ``from time import ...``) would
    escape it."""
    root = Path(planners.__file__).parent
    other = re.compile(r"\btime\.(time|monotonic|process_time|thread_time)(_ns)?\(|^\s*from time import|"
                       r"datetime\.(now|utcnow)\(|perf_counter_ns", re.M)
    found = [f"{path.relative_to(root.parent)}: {m.group(0).strip()}" for path in sorted(root.rglob("*.py"))
             for m in other.finditer(path.read_text())]
    assert not found, found


class JumpingClock(FakeClock):
    """A ``time`` module whose ``perf_counter()`` moves ``step`` seconds at every reading
    (everything else is the real ``time``), counting its readings."""

    def __init__(self, step: float) -> None:
        super().__init__(0.0)
        self.step, self.readings = step, 0

    def perf_counter(self) -> float:
        self.readings += 1
        self.now += self.step
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


def _planner_modules() -> list[types.ModuleType]:
    """Every module of the ``planners`` package (imported now: one imported later, inside a
    planner's run, would keep the real clock)."""
    for info in pkgutil.walk_packages(planners.__path__, "planners."):
        importlib.import_module(info.name)
    return [m for name, m in sorted(sys.modules.items())
            if (name == "planners" or name.startswith("planners.")) and m is not None]


@pytest.fixture(scope="module")
def graph():
    return random_dags.random_dag(GRAPH_OPS, seed=1)


@pytest.fixture(scope="module")
def baseline_seconds(graph):
    """Real seconds of a heuristic pipeline on the graph (the second of two runs: no compile)."""
    hw = Hardware()
    make_plan(graph, hw, BASELINE, budget=1 << 40)
    start = time.perf_counter()
    make_plan(graph, hw, BASELINE, budget=1 << 40)
    return time.perf_counter() - start


@pytest.mark.parametrize("name", sorted(TIME_LIMITED))
def test_the_time_limit_covers_every_phase(monkeypatch, graph, baseline_seconds, name):
    pipeline, extra = TIME_LIMITED[name]
    hw = Hardware()
    bounds = memory_bounds(graph, hw.scratchpad.alignment)
    budget = (bounds.m_r + bounds.m_p) // 2 if name.startswith("cosma") else 1 << 40
    options = {"time_limit": TIME_LIMIT, "deterministic": False, **extra}
    clock = JumpingClock(STEP)
    for module in _planner_modules():
        if getattr(module, "time", None) is time:
            monkeypatch.setattr(module, "time", clock)
    start = time.perf_counter()  # the real clock: this module's ``time`` is not patched
    try:
        plan = make_plan(graph, hw, pipeline, budget=budget, options=options)
        outcome = f"a plan ({plan.meta.status})"
    except NpusimError as error:  # a clean refusal is an answer too
        outcome = f"{type(error).__name__}: {error}"
    seconds = time.perf_counter() - start
    bound = SLACK_SECONDS + SLACK_FACTOR * baseline_seconds
    assert clock.readings > 0, f"{name} never looked at the clock: its time limit bounds nothing"
    assert clock.readings <= MAX_READINGS, f"{name} read the clock {clock.readings} times after its deadline"
    assert seconds <= bound, (f"{name} took {seconds:.1f} s with its time limit long spent (bound {bound:.1f} s: "
                              f"{SLACK_SECONDS} s + {SLACK_FACTOR} x the {baseline_seconds:.2f} s of {BASELINE!r}); "
                              f"a phase ignores the limit. Outcome: {outcome[:300]}")

