"""The canonical branch and bound for lifetime offset problems (planners.alloc.canonical.search)."""

import itertools
import multiprocessing

import numpy as np
import pytest

from npusim.errors import ConfigError
from planners.alloc.canonical import search as canonical_search
from planners.alloc.canonical.instance import BUDGET, EXHAUSTED, FOUND, LIMITED, PREORDERINGS, SearchInstance
from planners.alloc.canonical.kernel import _rank_part, _staircase_fits
from planners.alloc.canonical.reference import search_offsets_reference
from planners.alloc.canonical.search import LANES, CanonicalSearch, _Lane, search_offsets
from planners.alloc.exact import capacity_step, exact_offsets
from planners.alloc.minimalloc_io import load_minimalloc
from planners.alloc.problem import OffsetProblem, check_assignment
from tests.helpers import SHARED, far_deadline


def random_instance(rng, n_max=12, twins=False):
    n = int(rng.integers(2, n_max + 1))
    first = rng.integers(0, 10, n)
    last = first + rng.integers(0, 6, n)
    sizes = rng.integers(0, 8, n)
    if twins:  # copy lifetimes so that many buffers share one (sizes differ)
        source = rng.integers(0, max(n // 3, 1), n)
        first, last = first[source], last[source]
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
                search = CanonicalSearch(SearchInstance(first, last, sizes, preordering), capacity)
                assert search.run(10**7) == FOUND
                reference, nodes = search_offsets_reference(first, last, sizes, capacity, preordering,
                                                            with_nodes=True)
                assert reference is not None
                assert search.offsets().tolist() == reference.tolist()
                assert search.nodes == nodes  # the same tree: same inferences, same memo


#: instances whose optimum exceeds max-live by one byte (18 > 17, 15 > 14): at max-live the
#: search must exhaust a real tree to prove infeasibility (found among random ones)
FRAGMENTED = [([1, 1, 2, 5, 0, 1, 2, 4, 4, 3], [4, 2, 4, 8, 1, 3, 3, 6, 6, 6], [2, 5, 2, 3, 5, 5, 1, 2, 4, 7]),
              ([0, 5, 2, 0, 1, 3, 0, 4, 1, 5], [0, 5, 4, 1, 3, 5, 2, 4, 2, 8], [6, 3, 1, 3, 5, 7, 2, 4, 4, 4])]


@pytest.mark.parametrize("case", range(len(FRAGMENTED)))
def test_kernel_and_reference_walk_the_same_tree_when_it_is_exhausted(case):
    first, last, sizes = (np.array(v) for v in FRAGMENTED[case])
    optimum = cp_sat_optimum(first, last, sizes)
    assert optimum == OffsetProblem(sizes=sizes, first=first, last=last).lifetime_bound() + 1
    for preordering in PREORDERINGS:
        search = CanonicalSearch(SearchInstance(first, last, sizes, preordering), optimum - 1)
        assert search.run(10**7) == EXHAUSTED and search.nodes > 50
        reference, nodes = search_offsets_reference(first, last, sizes, optimum - 1, preordering, with_nodes=True)
        assert reference is None and search.nodes == nodes


#: instances (found among random ones) on which ordering each part by the bytes still
#: unplaced walks a different tree than the static preordering does (TWA, TWA, TAW and TWA)
RERANKED = [([1, 17, 19, 5, 15, 18, 6, 1, 4, 11, 2, 13, 2, 1], [9, 26, 28, 14, 17, 26, 6, 5, 9, 20, 11, 18, 2, 4],
             [4, 6, 1, 7, 6, 7, 3, 3, 2, 6, 2, 1, 6, 4]),
            ([18, 9, 3, 4, 12, 1, 6, 6, 8, 1, 6, 11, 3, 16, 10, 18],
             [18, 11, 5, 13, 14, 2, 10, 10, 13, 9, 11, 20, 5, 21, 18, 25],
             [4, 5, 2, 3, 4, 1, 4, 5, 1, 5, 1, 6, 7, 5, 1, 7]),
            ([13, 3, 15, 3, 16, 14, 0, 6, 9, 13, 14, 4, 5], [21, 9, 16, 10, 22, 22, 2, 7, 9, 15, 23, 11, 14],
             [4, 3, 7, 6, 4, 5, 4, 7, 7, 1, 6, 2, 4])]


@pytest.mark.parametrize("case", range(len(RERANKED)))
def test_kernel_and_reference_rank_parts_alike(case):
    first, last, sizes = (np.array(v) for v in RERANKED[case])
    bound = OffsetProblem(sizes=sizes, first=first, last=last).lifetime_bound()
    for capacity in (bound, bound + 2):
        for preordering in PREORDERINGS:
            search = CanonicalSearch(SearchInstance(first, last, sizes, preordering), capacity)
            status = search.run(10**7)
            reference, nodes = search_offsets_reference(first, last, sizes, capacity, preordering, with_nodes=True)
            assert search.nodes == nodes
            if status == FOUND:
                assert search.offsets().tolist() == reference.tolist()
            else:
                assert status == EXHAUSTED and reference is None


@pytest.mark.parametrize("seed", range(4))
def test_discrepancy_limited_kernel_matches_the_reference(seed):
    rng = np.random.default_rng(300 + seed)
    statuses = set()
    for _ in range(6):
        first, last, sizes = random_instance(rng, twins=True)
        optimum = cp_sat_optimum(first, last, sizes)
        for limit in (0, 1, 2):
            search = CanonicalSearch(SearchInstance(first, last, sizes, "WAT"), optimum, discrepancies=limit)
            status = search.run(10**7)
            statuses.add(status)
            reference, nodes = search_offsets_reference(first, last, sizes, optimum, "WAT", with_nodes=True,
                                                        discrepancies=limit)
            assert search.nodes == nodes
            if status == FOUND:
                assert search.offsets().tolist() == reference.tolist()
            else:
                assert status in (LIMITED, EXHAUSTED) and reference is None
    assert FOUND in statuses


@pytest.mark.parametrize("seed", range(6))
def test_search_finds_the_optimum_and_proves_one_byte_less_infeasible(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(8):
        first, last, sizes = random_instance(rng, twins=seed >= 3)
        problem = OffsetProblem(sizes=sizes, first=first, last=last)
        optimum = cp_sat_optimum(first, last, sizes)
        offsets, status, _ = search_offsets(first, last, sizes, optimum, time_limit=10)
        assert status == "found"
        assert check_assignment(problem, offsets) == []
        assert int((offsets + sizes).max()) <= optimum
        if optimum > 0:
            assert search_offsets(first, last, sizes, optimum - 1, time_limit=10)[:2] == (None, "infeasible")
            assert search_offsets_reference(first, last, sizes, optimum - 1) is None


def _stacks_by_brute_force(releases, sizes, capacity):
    """One section: some order of the buffers, each as low as its release and the one below
    allow, ends below the capacity."""
    for order in itertools.permutations(range(len(sizes))):
        top = 0
        for i in order:
            top = max(top, releases[i]) + sizes[i]
        if top <= capacity:
            return True
    return False


def test_staircase_is_exactly_the_one_section_feasibility():
    rng = np.random.default_rng(7)
    verdicts = set()
    for _ in range(300):
        m = int(rng.integers(1, 6))
        sizes = rng.integers(1, 6, m)
        h = rng.integers(0, 10, m)
        capacity = int(rng.integers(int(sizes.sum()), int(sizes.sum()) + 8))
        floor = np.array([int(h.min())])  # the section's floor: its lowest h
        placed = np.zeros(m, dtype=np.bool_)
        fits = _staircase_fits(0, 0, sizes, placed, h, floor, np.array([0, m]), np.arange(m), capacity,
                               np.zeros(m, dtype=np.int64))
        brute = _stacks_by_brute_force(h.tolist(), sizes.tolist(), capacity)
        fits = fits and int(floor[0]) + int(sizes.sum()) <= capacity  # with the plain section check
        assert fits == brute
        verdicts.add(fits)
    assert verdicts == {True, False}


def test_portfolio_is_deterministic_under_a_node_limit():
    rng = np.random.default_rng(5)
    for _ in range(5):
        first, last, sizes = random_instance(rng, n_max=12, twins=True)
        optimum = cp_sat_optimum(first, last, sizes)
        for capacity in (optimum, optimum - 1):
            runs = [search_offsets(first, last, sizes, capacity, node_limit=40) for _ in range(2)]
            assert runs[0][1:] == runs[1][1:]
            assert runs[0][1] in ("found", "infeasible", "timed_out") and runs[0][2] <= 40 + 1
            assert runs[0][1] != ("infeasible" if capacity == optimum else "found")


def test_capacity_step_is_the_gcd_of_the_sizes():
    problem = OffsetProblem(sizes=np.array([0, 3072, 1024, 2048]), first=np.array([0, 0, 1, 2]),
                            last=np.array([1, 1, 2, 3]))
    assert capacity_step(problem) == 1024


@pytest.mark.parametrize("case", range(len(FRAGMENTED)))
def test_exact_raises_the_bound_over_capacities_proved_infeasible(case):
    first, last, sizes = (np.array(v) for v in FRAGMENTED[case])
    sizes = sizes * 1024
    problem = OffsetProblem(sizes=sizes, first=first, last=last)
    result = exact_offsets(problem, time_limit=5)
    # max-live is proved infeasible, so the bound moves up a whole step (the gcd 1024)
    assert result.status == "optimal" and result.total == result.bound == problem.lifetime_bound() + 1024
    assert check_assignment(problem, result.offsets) == []


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


def test_full_trails_grow_without_changing_the_search():
    first, last, sizes = (np.array(v) for v in FRAGMENTED[0])
    normal = CanonicalSearch(SearchInstance(first, last, sizes, "WAT"), 17)
    cramped = CanonicalSearch(SearchInstance(first, last, sizes, "WAT"), 17)
    cramped.trail_fi, cramped.trail_fv = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    cramped.ltrail = np.zeros((1, 3), dtype=np.int64)
    assert normal.run(10**6) == cramped.run(10**6) == EXHAUSTED
    assert normal.nodes == cramped.nodes and len(cramped.ltrail) > 1


def test_each_part_is_ranked_by_the_bytes_still_unplaced():
    """MiniMalloc's T key, recomputed for a part from the bytes not yet placed: the order
    ``_rank_part`` gives equals sorting by (keys before T, T now, keys after T, index), and
    before any placement it is the static preordering."""
    rng = np.random.default_rng(11)
    changed = 0
    for _ in range(40):
        first, last, sizes = random_instance(rng, n_max=14, twins=True)
        for preordering in PREORDERINGS + ("WAC",):
            inst = SearchInstance(first, last, sizes, preordering)
            search = CanonicalSearch(inst, 10**6)
            n = len(inst.sizes)
            live = [r for r in range(n) if inst.sizes[r] > 0]
            placed = np.zeros(n, dtype=np.bool_)
            placed[rng.choice(n, size=n // 3, replace=False)] = True
            for mask in (np.zeros(n, dtype=np.bool_), placed):
                rem = inst.section_bytes - np.array(
                    [sum(int(inst.sizes[r]) for r in range(n) if mask[r] and inst.sec_lo[r] <= s < inst.sec_hi[r])
                     for s in range(inst.n_sections)], dtype=np.int64)
                prio, tops = np.full(n, -7, dtype=np.int64), np.zeros(6, dtype=np.int64)
                _rank_part(0, inst.n_sections, inst.sizes, inst.sec_lo, inst.sec_hi, mask, rem, inst.pre_key,
                           inst.by_post, prio, search.ptrail, tops, search.keys, search.picked)
                todo = [r for r in live if not mask[r]]
                got = sorted(todo, key=lambda r: prio[r])
                if not mask.any():
                    assert got == todo  # nothing placed: the static order
                original = inst.order  # buffer index of each rank
                first_, ends = np.asarray(first)[original], np.asarray(last)[original] + 1
                static = {"W": ends - first_, "C": inst.sec_hi - inst.sec_lo, "A": inst.sizes * (ends - first_)}

                def key(r):
                    now = {**static, "T": {r: max(rem[inst.sec_lo[r]:inst.sec_hi[r]])}}
                    return tuple(-int(now[c][r]) for c in preordering) + (int(original[r]),)
                assert got == sorted(todo, key=key)
                assert sorted(prio[todo].tolist()) == list(range(len(todo)))  # others untouched
                assert all(prio[r] == -7 for r in range(n) if r not in todo)
                assert int(tops[5]) == len(todo)
                changed += got != sorted(todo)
    assert changed > 0  # placements did reorder some parts


def _answers_alike(a, b):
    """Two ``search_offsets`` answers: same status, placements and offsets."""
    return a[1:] == b[1:] and (a[0] is None) == (b[0] is None) and (a[0] is None or a[0].tolist() == b[0].tolist())


@pytest.mark.parametrize("slice_", [7, 10_000])
def test_worker_processes_give_the_in_process_answer_under_a_node_limit(monkeypatch, slice_):
    """No head start in this process, so every search here runs in two forked workers: under
    a node limit the answer (status, placements, offsets) is the one of the lanes taking
    turns in one process, found offsets are valid, and infeasibility proofs come back."""
    monkeypatch.setattr(canonical_search, "HEAD_START", 0)
    monkeypatch.setattr(canonical_search, "SLICE", slice_)
    rng = np.random.default_rng(21)
    statuses = set()
    for case in range(6):
        first, last, sizes = random_instance(rng, n_max=14, twins=case % 2 == 1)
        problem = OffsetProblem(sizes=sizes, first=first, last=last)
        optimum = cp_sat_optimum(first, last, sizes)
        for capacity, limit in ((optimum, 10**6), (optimum - 1, 10**6), (optimum, 30)):
            alone = search_offsets(first, last, sizes, capacity, node_limit=limit, workers=1)
            forked = search_offsets(first, last, sizes, capacity, node_limit=limit, workers=2)
            assert _answers_alike(alone, forked)
            statuses.add(forked[1])
            if forked[1] == "found":
                assert check_assignment(problem, forked[0]) == [] and int((forked[0] + sizes).max()) <= capacity
            if limit == 10**6 and optimum > 0:
                assert forked[1] == ("found" if capacity == optimum else "infeasible")
    assert {"found", "infeasible"} <= statuses


@pytest.mark.skipif(not MINIMALLOC_C.exists(), reason="../shared/reference/minimalloc is absent")
def test_the_find_after_the_fewest_lane_placements_wins_whatever_the_workers(monkeypatch):
    """MiniMalloc's C at max-live: the second lane finds (complete TAW, 266 placements of its
    own) after fewer placements of its lane than the first (complete TWA, 8348), so it wins
    in a deterministic run, with one worker or two, sliced finely or not."""
    problem = load_minimalloc(MINIMALLOC_C)
    args = (problem.first, problem.last, problem.sizes, problem.lifetime_bound())
    answers = []
    for head_start, slice_, workers in ((10.0, 10_000, 2), (0, 10_000, 2), (0, 500, 2), (0, 500, 1)):
        monkeypatch.setattr(canonical_search, "HEAD_START", head_start)
        monkeypatch.setattr(canonical_search, "SLICE", slice_)
        answers.append(search_offsets(*args, node_limit=10**6, workers=workers))
    assert all(_answers_alike(answers[0], answer) for answer in answers[1:])
    offsets, status, nodes = answers[0]
    assert status == "found" and check_assignment(problem, offsets) == []
    lanes = [_Lane({p: SearchInstance(*args[:3], p) for p in PREORDERINGS}, args[3], entries) for entries in LANES]
    assert lanes[0].run(10**6) == lanes[1].run(10**6) == FOUND
    assert nodes == lanes[1].nodes < lanes[0].nodes
    # a lane that found before the fork (in the head start) still wins from the workers
    lanes = [_Lane({p: SearchInstance(*args[:3], p) for p in PREORDERINGS}, args[3], entries) for entries in LANES]
    assert lanes[1].run(10**6) == FOUND
    answer = canonical_search._drive_in_processes(lanes, 2, 10**6, far_deadline(), False)
    assert answer[:3] == (FOUND, nodes, 1) and answer[3].tolist() == offsets.tolist()


def test_a_lane_finds_after_the_same_placements_however_it_is_sliced():
    """``_Lane.run`` stops anywhere, even mid-turn, and resumes: slices of 1, 13 or all at once
    walk the same round robin (discrepancy searches replaced on the way included)."""
    rng = np.random.default_rng(8)
    for _ in range(4):
        first, last, sizes = random_instance(rng, n_max=14, twins=True)
        optimum = cp_sat_optimum(first, last, sizes)
        instances = {p: SearchInstance(first, last, sizes, p) for p in PREORDERINGS}
        for entries in LANES:
            runs = []
            for piece in (1, 13, 10**7):
                lane = _Lane(instances, optimum, entries)
                while lane.run(piece) == BUDGET and lane.nodes < 10**6:
                    pass
                runs.append((lane.status, lane.nodes, lane.decided.offsets().tolist()))
            assert runs[0] == runs[1] == runs[2] and runs[0][0] == FOUND


def test_wall_clock_workers_find_valid_offsets_and_prove_infeasibility(monkeypatch):
    monkeypatch.setattr(canonical_search, "HEAD_START", 0)
    for case in range(len(FRAGMENTED)):
        first, last, sizes = (np.array(v) for v in FRAGMENTED[case])
        problem = OffsetProblem(sizes=sizes, first=first, last=last)
        optimum = problem.lifetime_bound() + 1
        offsets, status, _ = search_offsets(first, last, sizes, optimum, time_limit=10, workers=2)
        assert status == "found" and check_assignment(problem, offsets) == []
        assert int((offsets + sizes).max()) <= optimum
        assert search_offsets(first, last, sizes, optimum - 1, time_limit=10, workers=2)[:2] == (None, "infeasible")


def test_a_failing_worker_is_reported_and_bad_workers_refused(monkeypatch):
    first, last, sizes = (np.array(v) for v in FRAGMENTED[0])
    with pytest.raises(ConfigError, match="workers"):
        search_offsets(first, last, sizes, 18, workers=0)
    real_drive = canonical_search._drive

    def drive(lanes, ids, budget, deadline, first_wins, shared=None):
        if shared is not None:  # in a worker process
            raise ValueError("broken lane")
        return real_drive(lanes, ids, budget, deadline, first_wins, shared)

    monkeypatch.setattr(canonical_search, "HEAD_START", 0)
    monkeypatch.setattr(canonical_search, "_drive", drive)
    with pytest.raises(RuntimeError, match="broken lane"):
        search_offsets(first, last, sizes, 18, workers=2)


def _search_in_a_daemon(args):
    return search_offsets(*args, node_limit=10**6, workers=2)[1:]


def test_a_daemonic_process_searches_without_children(monkeypatch):
    """A daemonic process (a multiprocessing pool's worker) may not start processes: the
    lanes then take turns in it, with the same answer."""
    monkeypatch.setattr(canonical_search, "HEAD_START", 0)
    first, last, sizes = (np.array(v) for v in FRAGMENTED[1])
    args = (first, last, sizes, 15)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        in_daemon = pool.apply(_search_in_a_daemon, (args,))
    assert in_daemon == search_offsets(*args, node_limit=10**6, workers=1)[1:] and in_daemon[0] == "found"
