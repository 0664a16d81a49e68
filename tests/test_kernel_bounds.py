"""Every Numba kernel's kernel-vs-reference tests, recompiled with bounds checks.

The kernels are compiled without bounds checks, so an index past the end of an array silently
corrupts memory (a one-word bitset overflow once surfaced only as a later ``realloc(): invalid
next size`` abort). Here the tests of the kernel modules run again in ONE pytest subprocess with
``NUMBA_BOUNDSCHECK=1`` and a fresh ``NUMBA_CACHE_DIR`` (so nothing comes from the cache without
the checks): an out-of-range index then raises IndexError and fails the test that made it.

Bounds checks alone still accept ``a[-1]``: Numba always wraps negative indices (like Python)
before checking. The kernels never mean to index from the end, so a -1 there is a bug (usually a
"none" sentinel used as an index) that wraps to the last element. The subprocess therefore also
turns off the wraparound of integer array indices, and checks first that ``a[-1]`` is rejected.

``--slow`` runs the tests that compare each kernel with its reference (every kernel at least
once; compiling them with checks is most of the time, 45–55 s here), and the whole kernel test
files with the planner tests that drive the kernels on real graphs. They left CI for its
15-minute budget; CI keeps ``test_offsets.py::test_kernels_stay_in_bounds_with_pinned_items``,
the bounds-checked run of the MindSpore kernels where the one-word bitset overflowed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# The test files of the kernel modules: planners/alloc/canonical/kernel.py (test_canonical_search),
# planners/alloc/mindspore/kernels.py (test_offsets), npusim/kernels/render_chunks.py (test_render_chunks),
# npusim/plan/safety/kernels.py + npusim/kernels/bitsets.py (test_safety),
# planners/offchip/collision/kernels.py (test_taa).
KERNEL_TEST_FILES = ["test_canonical_search.py", "test_offsets.py", "test_render_chunks.py",
                     "test_safety.py", "test_taa.py"]
# Planner tests that run the kernels on real graphs (slow set only).
DRIVER_TEST_FILES = ["test_offsets_onchip.py", "test_offchip.py", "test_streams.py", "test_bounded_exact.py"]

# CI: the kernel-vs-reference tests of every kernel, without the long parametrised sweeps.
CI_KEYWORDS = " or ".join([
    "test_numba_kernel_matches_the_python_reference",             # canonical_kernel._search_kernel
    "test_kernel_and_reference_walk_the_same_tree",
    "test_kernel_and_reference_rank_parts_alike",
    "test_discrepancy_limited_kernel_matches_the_reference",
    "test_numba_kernels_match_their_python_functions",            # canonical_search, safety helpers
    "test_kernels_match_the_reference_with_many_conflicts_per_item",  # mindspore_fast (both fits)
    "test_kernels_match_their_python_functions",                  # mindspore_fast kernels
    "test_figures_8_and_9",
    "test_kernel_matches_reference",                              # render_chunks kernel
    "test_burst_count_matches_reference",
    "test_figure2_pairs_from_the_text",                           # safety (every method)
    "test_ancestor_bitsets_match_python_reference",               # bitsets
    "test_stream_tables_kernel_matches_the_python_reference",
    "test_stream_at_a_time_algorithm3_matches_the_pairwise_kernel",
    "test_collision_size_kernel_matches_reference",               # collision kernels
    "test_collision_skip",
    "test_tensor_allocate",
])
# Already a bounds-checked subprocess of its own.
EXCLUDED = "not test_kernels_stay_in_bounds_with_pinned_items"

# Runs in the subprocess before anything is compiled: integer array indices are no longer wrapped
# (numba.np.arrayobj.fix_integer_index, read at compile time by the indexing code), so with
# NUMBA_BOUNDSCHECK=1 a negative index raises IndexError like one past the end.
RUNNER = r'''
import sys
import numpy as np
import numba
import numba.np.arrayobj as arrayobj
from numba.core import types

def _no_wraparound(context, builder, idxty, idx, size):
    return context.cast(builder, idx, idxty, types.intp if idxty.signed else types.uintp)

# A Numba internal: if a future release drops it, keep the plain bounds checks (past-the-end
# indices) rather than fail a fresh install, and say so in the output.
strict = hasattr(arrayobj, "fix_integer_index")
if strict:
    arrayobj.fix_integer_index = _no_wraparound
else:
    print("note: numba %s has no fix_integer_index; negative indices are not checked" % numba.__version__)

@numba.njit
def _probe(a, i):
    return a[i]

for index in ((-1, 4) if strict else (4,)):
    try:
        _probe(np.zeros(4), index)
    except IndexError:
        continue
    sys.exit("index %d was not rejected: bounds checks are not on" % index)

import pytest
sys.exit(pytest.main(sys.argv[1:]))
'''


def run_bounds_checked(tmp_path, files, *pytest_args, llvm_opt=None):
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba_cache"))
    if llvm_opt is not None:
        env["NUMBA_OPT"] = str(llvm_opt)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT), env.get("PYTHONPATH", "")] if p)
    cmd = [sys.executable, "-c", RUNNER, "-q", "-p", "no:cacheprovider", "-o", "addopts=",
           "-W", "ignore::numba.core.errors.NumbaWarning",
           *[str(TESTS / f) for f in files], *pytest_args]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    tail = (run.stdout + run.stderr)[-4000:]
    assert run.returncode == 0, f"bounds-checked kernel tests failed (exit {run.returncode}):\n{tail}"
    assert " passed" in run.stdout, f"no test ran:\n{tail}"


@pytest.mark.slow
def test_kernel_reference_tests_pass_with_bounds_checks(tmp_path):
    # LLVM -O0: the bounds checks are emitted by Numba before LLVM runs, and compiling every kernel
    # is most of this test's time (about 20 % less at -O0).
    run_bounds_checked(tmp_path, KERNEL_TEST_FILES, "-k", f"({CI_KEYWORDS}) and {EXCLUDED}", llvm_opt=0)


@pytest.mark.slow
def test_all_kernel_and_planner_tests_pass_with_bounds_checks(tmp_path):
    run_bounds_checked(tmp_path, KERNEL_TEST_FILES + DRIVER_TEST_FILES, "-k", EXCLUDED)
