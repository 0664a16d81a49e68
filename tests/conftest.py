"""Test options shared by every test file.

``--slow`` runs the long suites: tests marked ``@pytest.mark.slow`` (skipped otherwise) and
the full case counts of the Hypothesis fuzz and property tests (a few hundred cases in CI,
>= 10,000 per loader and >= 1,000 planner cases with ``--slow``)::

    python -m pytest tests/test_fuzz_*.py tests/test_property_planners.py --slow

Hypothesis runs derandomized in CI (the same cases every run, so a red CI is reproducible)
and randomized with ``--slow`` (new cases every run). No test has a wall-clock deadline:
the machine is shared.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

SLOW_ENV = "NPUSIM_SLOW_TESTS"
# Progress lines (npusim.util.progress) appear on stderr after this many seconds: tests that check a
# command's stderr line by line must not see one because the machine is loaded.
# tests/test_progress.py sets its own interval.
os.environ.setdefault("NPUSIM_PROGRESS_SECONDS", "86400")

_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
settings.register_profile("npusim-ci", derandomize=True, database=None, **_COMMON)
settings.register_profile("npusim-slow", **_COMMON)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="run slow tests and the full fuzz/property case counts")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running; runs only with --slow")
    slow = config.getoption("--slow")
    # Read by tests/fuzz_support.cases() when test modules are imported (after this hook).
    os.environ[SLOW_ENV] = "1" if slow else ""
    settings.load_profile("npusim-slow" if slow else "npusim-ci")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture()
def chain_trace(tmp_path):
    """chain_with_skip (tests/helpers.py) as a trace file: M_R = 2112 B, live peak 3072 B at
    64-B alignment; small enough for any command in a second."""
    from helpers import chain_with_skip
    from npusim.graph.trace_io import save_trace

    return str(save_trace(chain_with_skip(), tmp_path / "chain.json"))

