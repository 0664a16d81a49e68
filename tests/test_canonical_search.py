"""The canonical branch and bound for lifetime offset problems (planners.alloc.canonical_search)."""

import numpy as np
import pytest

from planners.alloc.canonical_search import (
    FOUND, PREORDERINGS, CanonicalSearch, _Instance, search_offsets, search_offsets_reference,
)
from planners.alloc.exact import exact_offsets
from planners.alloc.minimalloc_io import load_minimalloc
from planners.alloc.problem import OffsetProblem, check_assignment
from tests.helpers import SHARED


def random_instance(rng, n_max=12):
    n = int(rng.integers(2, n_max + 1))
    first = rng.integers(0, 10, n)
    last = first + rng.integers(0, 6, n)
    sizes = rng.integers(0, 8, n)
    return first, last, sizes


def cp_sat_optimum(first, last, sizes) -> int:
    result = exact_offsets(OffsetProblem(sizes=sizes, first=first, last=last), time_limit=10)
    assert result.status == "optimal"
    return int(result.total)


@pytest.mark.parametrize("seed", range(6))
def test_numba_kernel_matches_the_python_reference(seed):
    rng = np.random.default_rng(seed)
    for _ in range(8):
        first, last, sizes = random_instance(rng)
        optimum = cp_sat_optimum(first, last, sizes)
        for capacity in (optimum, optimum + 3):
            for preordering in PREORDERINGS:
                search = CanonicalSearch(_Instance(first, last, sizes, preordering), capacity)
                assert search.run(10**7) == FOUND
                reference = search_offsets_reference(first, last, sizes, capacity, preordering)
                assert reference is not None
                assert search.offsets().tolist() == reference.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_search_finds_the_optimum_and_proves_one_byte_less_infeasible(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(8):
        first, last, sizes = random_instance(rng)
        problem = OffsetProblem(sizes=sizes, first=first, last=last)
        optimum = cp_sat_optimum(first, last, sizes)
        offsets, status, _ = search_offsets(first, last, sizes, optimum, time_limit=10)
        assert status == "found"
        assert check_assignment(problem, offsets) == []
        assert int((offsets + sizes).max()) <= optimum
        if optimum > 0:
            assert search_offsets(first, last, sizes, optimum - 1, time_limit=10)[:2] == (None, "infeasible")
            assert search_offsets_reference(first, last, sizes, optimum - 1) is None


def test_a_capacity_below_max_live_is_infeasible_without_search():
    first, last, sizes = np.array([0, 0, 1]), np.array([2, 1, 2]), np.array([4, 4, 4])
    problem = OffsetProblem(sizes=sizes, first=first, last=last)
    offsets, status, nodes = search_offsets(first, last, sizes, problem.lifetime_bound() - 1)
    assert (offsets, status, nodes) == (None, "infeasible", 0)


def test_empty_buffers_get_offset_zero_and_do_not_block():
    first, last, sizes = np.array([0, 0, 0]), np.array([3, 3, 3]), np.array([0, 5, 5])
    offsets, status, _ = search_offsets(first, last, sizes, 10)
    assert status == "found" and offsets[0] == 0 and sorted(offsets[1:].tolist()) == [0, 5]


MINIMALLOC_C = SHARED / "reference" / "minimalloc" / "C.1048576.csv"


@pytest.mark.skipif(not MINIMALLOC_C.exists(), reason="../shared/reference/minimalloc is absent")
def test_exact_offsets_reach_the_max_live_bound_on_minimalloc_c():
    problem = load_minimalloc(MINIMALLOC_C)
    result = exact_offsets(problem, time_limit=10)
    assert check_assignment(problem, result.offsets) == []
    assert result.status == "optimal" and result.total == result.bound == problem.lifetime_bound()
