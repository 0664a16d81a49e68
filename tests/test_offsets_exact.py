"""Exact offsets (CP-SAT) and lower bounds: honest status, bound and gap; never worse than the hint."""

import itertools

import numpy as np
import pytest

from npusim.plan.model import STATUSES
from planners.alloc.bounds import best_bound, greedy_clique, heavy_clique, lifetime_bound, max_weight_clique
from planners.alloc.exact import best_heuristic, exact_offsets
from planners.alloc.minimalloc_io import load_minimalloc
from planners.alloc.problem import check_assignment

from helpers import SHARED
from test_offsets import TOY, random_problem


def test_toy_is_solved_to_its_bound():
    result = exact_offsets(TOY, time_limit=5)
    assert result.status == "optimal" and result.total == result.bound == 1664
    assert check_assignment(TOY, result.offsets) == []


@pytest.mark.parametrize("case", [dict(), dict(explicit=True, blocks=True)])
def test_exact_is_valid_and_never_worse_than_the_best_heuristic(case):
    problem = random_problem(21, n=25, **case)
    hint = best_heuristic(problem)
    result = exact_offsets(problem, time_limit=3, hint=hint)
    assert result.status in STATUSES and result.status in ("optimal", "timed_out")
    assert check_assignment(problem, result.offsets) == []
    assert result.bound <= result.total <= hint.total
    if result.status == "optimal":
        assert result.bound == result.total and result.gap == 0
    assert result.bound >= problem.lifetime_bound()


def test_clique_bound_is_the_lifetime_bound_for_intervals_and_brute_force_otherwise():
    problem = random_problem(4, n=12)
    assert max_weight_clique(problem).value == lifetime_bound(problem).value
    explicit = random_problem(4, n=12, explicit=True)
    brute = _brute_max_clique(explicit)
    clique = max_weight_clique(explicit)
    assert clique.exact and clique.value == brute
    assert best_bound(explicit).value == max(brute, explicit.lifetime_bound())


def _brute_max_clique(problem):
    rel, n = problem.conflicts, problem.n
    best = 0
    for r in range(1, n + 1):
        for subset in itertools.combinations(range(n), r):
            if all(rel.has(a, b) for a, b in itertools.combinations(subset, 2)):
                best = max(best, int(problem.sizes[list(subset)].sum()))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_greedy_clique_is_a_clique_no_heavier_than_the_maximum(seed):
    explicit = random_problem(seed, n=11, explicit=True)
    greedy = greedy_clique(explicit, seeds=4)
    members = heavy_clique(explicit, seeds=4)
    assert all(explicit.conflicts.has(a, b) for a, b in itertools.combinations(members, 2))
    assert greedy.value == int(explicit.sizes[members].sum())
    brute = _brute_max_clique(explicit)
    assert not greedy.exact and greedy.value <= brute
    # the explicit relation contains the lifetime overlaps, so a live set is a clique to grow
    assert greedy.value >= explicit.lifetime_bound()
    assert greedy_clique(random_problem(seed, n=11)) is None  # lifetimes only: the lifetime bound is exact


MINIMALLOC = SHARED / "reference" / "minimalloc" / "C.1048576.csv"


@pytest.mark.skipif(not MINIMALLOC.exists(), reason="../shared/reference/minimalloc is absent")
def test_minimalloc_smoke_status_and_ratio_are_consistent():
    problem = load_minimalloc(MINIMALLOC)
    result = exact_offsets(problem, time_limit=5)
    assert check_assignment(problem, result.offsets) == []
    assert result.bound >= problem.lifetime_bound() == 1039360
    if result.status == "optimal":
        assert result.total == result.bound
    else:
        assert result.status == "timed_out" and result.total >= result.bound
    assert np.isclose(result.gap, result.total / result.bound - 1)
