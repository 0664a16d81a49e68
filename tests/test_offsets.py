"""Offset assignment (MindSpore paper, Section 4 and Appendix D) and the baselines."""

import numpy as np
import pytest

from npusim.errors import PlanningError
from planners.alloc import mindspore, naive, shared_objects, tflite
from planners.alloc.mindspore import kernels as mindspore_kernels
from planners.alloc.minimalloc_io import load_minimalloc, to_minimalloc_csv
from planners.alloc.problem import MatrixConflicts, OffsetProblem, check_assignment

# Figure 7: A..E with sizes 1024, 768, 640, 512, 256 and lifetimes [0,1], [3,4], [1,2], [4,5], [2,4]
TOY = OffsetProblem(sizes=np.array([1024, 768, 640, 512, 256]), first=np.array([0, 3, 1, 4, 2]),
                    last=np.array([1, 4, 2, 5, 4]), names=tuple("ABCDE"))


def test_toy_unsafe_pairs_are_those_of_the_text():
    pairs = {tuple(TOY.name(int(i)) for i in p) for p in TOY.relation.pairs()}
    assert pairs == {("A", "C"), ("B", "D"), ("B", "E"), ("C", "E"), ("D", "E")}


@pytest.mark.parametrize("impl", [mindspore, mindspore_kernels])
def test_figures_8_and_9_single_object_1920_many_objects_1664(impl):
    so = impl.single_object(TOY, "size", "first-fit")
    mo = impl.many_objects(TOY, "size", "first-fit")
    assert so.total == 1920 and mo.total == 1664
    # Figure 8: A 0, B 0, C 1024, D 768, E 1664; Figure 9: A 0, B 0, C 1024, D 1024, E 768
    assert so.offsets.tolist() == [0, 0, 1024, 768, 1664]
    assert mo.offsets.tolist() == [0, 0, 1024, 1024, 768]
    assert check_assignment(TOY, so.offsets) == [] and check_assignment(TOY, mo.offsets) == []


def test_figure6_avoid_for_a_contiguous_block():
    # Block ABC at 0, 10, 15 (sizes 10, 5, 3); new block D(8) E(6) F(6); only {E, B} unsafe.
    sizes = [10, 5, 3, 8, 6, 6]
    offsets = [0, 10, 15, 0, 0, 0]
    A, B, C, D, E, F = range(6)
    unsafe = lambda x, y: {x, y} == {E, B}  # noqa: E731
    assert mindspore.avoid((D, E, F), [(A, B, C)], offsets, sizes, unsafe, 0) == [(0, 7)]
    # and it is respected: the block goes to 7 (first fit), where E = [15, 21) misses B = [10, 15)
    problem = OffsetProblem(sizes=np.array(sizes), conflicts=MatrixConflicts.from_pairs(6, [(E, B)]),
                            blocks=((A, B, C), (D, E, F)), pinned={})
    result = mindspore.single_object(problem, "size", "first-fit")
    assert check_assignment(problem, result.offsets) == []


def test_merge_and_fit_follow_algorithms_9_and_10():
    assert mindspore.merge([(5, 9), (0, 3), (2, 4), (6, 7)]) == [[0, 4], [5, 9]]
    stack = mindspore.merge([(0, 4), (10, 20)])
    sizes = {0: 6}
    assert mindspore.fit((0,), stack, 0, 1 << 62, sizes, "first-fit") == 4
    assert mindspore.fit((0,), stack, 0, 1 << 62, sizes, "best-fit") == 4  # gap 6 beats infinity
    sizes = {0: 7}
    assert mindspore.fit((0,), stack, 0, 1 << 62, sizes, "best-fit") == 20
    assert mindspore.fit((0,), stack, 0, 16, sizes, "first-fit") is None  # Many Objects: no room


def random_problem(seed, n=40, explicit=False, blocks=False, pinned=False, align=8):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 40, size=n) * align
    first = rng.integers(0, 30, size=n)
    last = first + rng.integers(0, 8, size=n)
    conflicts = None
    if explicit:  # lifetime overlap plus random extra pairs (a multi-stream-like superset)
        base = OffsetProblem(sizes=sizes, first=first, last=last).relation.pairs().tolist()
        extra = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(n, 2))]
        conflicts = MatrixConflicts.from_pairs(n, base + extra)
    chains = ()
    if blocks:
        perm = rng.permutation(n).tolist()
        chains = (tuple(perm[0:3]), tuple(perm[3:5]), tuple(perm[5:9]))
    pins = {}
    if pinned:
        cursor = int(rng.integers(0, 20)) * align  # pinned side by side: they never clash
        for t in rng.permutation(n)[10:13].tolist():
            if not any(t in c for c in chains):
                pins[t] = cursor
                cursor += int(sizes[t])
    return OffsetProblem(sizes=sizes, first=first, last=last, conflicts=conflicts, blocks=chains,
                         alignment=align, pinned=pins)


CASES = [dict(), dict(explicit=True), dict(blocks=True), dict(explicit=True, blocks=True, pinned=True),
         dict(pinned=True),
         # pinned items with ids >= 64 on a lifetime problem: once overflowed a one-word bitset
         dict(pinned=True, n=200)]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("sort", mindspore.SORTS)
@pytest.mark.parametrize("fitter", mindspore.FITS)
def test_numba_kernels_match_the_reference_and_are_valid(case, sort, fitter):
    for seed in range(4):
        problem = random_problem(seed * 7 + case, **CASES[case])
        for algo in ("single_object", "many_objects"):
            ref = getattr(mindspore, algo)(problem, sort, fitter)
            fast = getattr(mindspore_kernels, algo)(problem, sort, fitter)
            assert fast.offsets.tolist() == ref.offsets.tolist(), (algo, seed)
            assert check_assignment(problem, fast.offsets) == [], (algo, seed)
            assert fast.total >= problem.lifetime_bound()


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("sort", mindspore.SORTS)
def test_vectorized_sort_gives_the_reference_block_order(case, sort):
    for seed in range(4):
        problem = random_problem(seed * 5 + case, **CASES[case])
        ptr, items = mindspore_kernels.sorted_block_arrays(problem, sort)
        ref = mindspore_kernels.kernel_inputs(problem, mindspore.sort_blocks(problem, sort))
        assert ptr.tolist() == ref[0].tolist() and items.tolist() == ref[1].tolist(), seed


@pytest.mark.parametrize("fitter", mindspore.FITS)
def test_kernels_match_the_reference_with_many_conflicts_per_item(fitter):
    # dense conflicts: more unsafe neighbours per item than the kernels sort in place
    # (SMALL_SORT), so the argsort path of Merge runs too
    for seed in range(2):
        rng = np.random.default_rng(100 + seed)
        n = 130
        pairs = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(n * 25, 2))]
        problem = OffsetProblem(sizes=rng.integers(1, 30, size=n) * 8, first=np.zeros(n, dtype=np.int64),
                                last=np.zeros(n, dtype=np.int64) + 5, conflicts=MatrixConflicts.from_pairs(n, pairs),
                                blocks=(tuple(range(0, 4)),), alignment=8, pinned={7: 0})
        assert problem.relation.degrees().max() > mindspore_kernels.SMALL_SORT
        for sort in ("size", "unsafe"):
            for algo in ("single_object", "many_objects"):
                ref = getattr(mindspore, algo)(problem, sort, fitter)
                fast = getattr(mindspore_kernels, algo)(problem, sort, fitter)
                assert fast.offsets.tolist() == ref.offsets.tolist(), (algo, sort, seed)
                assert check_assignment(problem, fast.offsets) == []


def test_kernels_match_their_python_functions():
    problem = random_problem(3, blocks=True, explicit=True)
    blocks = mindspore.sort_blocks(problem, "size")
    args = mindspore_kernels.kernel_inputs(problem, blocks)
    ins = args[:7] + (0,) + args[7:]
    for kernel in (mindspore_kernels.single_object_kernel, mindspore_kernels.many_objects_kernel):
        assert np.array_equal(kernel(*ins), kernel.py_func(*ins))


@pytest.mark.parametrize("case", [0, 1, 2, 4])
def test_baselines_are_valid_and_naive_is_the_sum(case):
    for seed in range(3):
        problem = random_problem(100 + seed, **CASES[case])
        results = [naive.naive(problem), tflite.tflite_arena(problem), tflite.tflm_greedy(problem)]
        if not problem.blocks and not problem.pinned:
            results += [shared_objects.greedy_by_size(problem), shared_objects.greedy_by_breadth(problem),
                        shared_objects.greedy_by_size_improved(problem)]
        for r in results:
            assert check_assignment(problem, r.offsets) == [], r.algorithm
            assert problem.lifetime_bound() <= r.total <= results[0].total, r.algorithm
        if not problem.pinned:
            assert results[0].total == int(problem.sizes.sum())


def test_shared_objects_never_share_an_object_between_conflicting_items():
    problem = random_problem(5)
    for algo in (shared_objects.greedy_by_size, shared_objects.greedy_by_breadth,
                 shared_objects.greedy_by_size_improved):
        r = algo(problem)
        bases = sorted(set(r.offsets.tolist()))
        assert r.total == sum(int(problem.sizes[r.offsets == b].max()) for b in bases)


def test_contiguous_blocks_are_respected_and_checked():
    problem = random_problem(11, blocks=True)
    result = mindspore_kernels.many_objects(problem, "size", "best-fit")
    for block in problem.blocks:
        for a, b in zip(block, block[1:]):
            assert result.offsets[b] == result.offsets[a] + problem.sizes[a]
    broken = result.offsets.copy()
    broken[problem.blocks[0][1]] += 8
    assert any("contiguous block" in m for m in check_assignment(problem, broken))


def test_checker_catches_overlap_and_alignment():
    offsets = np.array([0, 0, 1024, 768, 1664])
    bad = offsets.copy()
    bad[4] = 1000  # E over C and D
    assert any("conflict" in m for m in check_assignment(TOY, bad))
    aligned = OffsetProblem(sizes=np.array([64, 64]), first=np.array([0, 0]), last=np.array([1, 1]), alignment=64)
    assert any("multiple of 64" in m for m in check_assignment(aligned, [0, 65]))


def test_bad_problems_are_named():
    with pytest.raises(PlanningError, match="multiple of the alignment 64"):
        OffsetProblem(sizes=np.array([10]), first=np.array([0]), last=np.array([0]), alignment=64)
    with pytest.raises(PlanningError, match="contiguous blocks 0 and 1"):
        OffsetProblem(sizes=np.array([8, 8, 8]), first=np.zeros(3), last=np.zeros(3), blocks=((0, 1), (1, 2)))
    with pytest.raises(PlanningError, match="sort 'widest'"):
        mindspore.single_object(TOY, "widest", "first-fit")
    with pytest.raises(PlanningError, match="cannot honour contiguous blocks"):
        shared_objects.greedy_by_size(random_problem(1, blocks=True))


def test_minimalloc_csv_round_trip(tmp_path):
    problem = random_problem(2, align=1)
    result = mindspore_kernels.single_object(problem)
    path = tmp_path / "X.4096.csv"
    path.write_text(to_minimalloc_csv(problem))
    back = load_minimalloc(path)
    assert back.sizes.tolist() == problem.sizes.tolist()
    assert back.first.tolist() == problem.first.tolist() and back.last.tolist() == problem.last.tolist()
    assert "offset" in to_minimalloc_csv(problem, result.offsets).splitlines()[0]
    bad = tmp_path / "bad.csv"
    bad.write_text("id,lower,upper,size\n0,5,5,10\n")
    with pytest.raises(PlanningError, match="expected lower < upper"):
        load_minimalloc(bad)


def test_kernels_stay_in_bounds_with_pinned_items(tmp_path):
    """Numba does not check indices: recompile the kernels with bounds checks (fresh cache) and
    run them where a one-word bitset once overflowed (pinned ids >= 64, lifetime conflicts)."""
    import os
    import subprocess
    import sys

    script = (
        "from test_offsets import random_problem\n"
        "from planners.alloc.mindspore import kernels as mindspore_kernels\n"
        "for case in (dict(pinned=True, n=200), dict(pinned=True, n=200, explicit=True)):\n"
        "    problem = random_problem(3, **case)\n"
        "    for fitter in mindspore_kernels.FITS:\n"
        "        mindspore_kernels.single_object(problem, 'size', fitter)\n"
        "        mindspore_kernels.many_objects(problem, 'size', fitter)\n")
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path))
    tests_dir = os.path.dirname(__file__)
    env["PYTHONPATH"] = os.pathsep.join([tests_dir, env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.mark.parametrize("seed", range(4))
def test_lifetime_index_finds_exactly_the_placed_items_a_lifetime_meets(seed):
    """The MindSpore kernels' lifetime index (segment tree + start bitset) against the
    definition: the placed items whose inclusive lifetime meets [f, l], each once."""
    import numpy as np

    k = mindspore_kernels
    rng = np.random.default_rng(seed)
    n = 300
    first = rng.integers(3, 200, size=n).astype(np.int64)
    last = first + rng.integers(0, 40 if seed % 2 else 150, size=n)
    index = k._live_index(first, last, n)
    base, leaves, node_head, pool_item, pool_next, start_head, start_next, start_bits, used = index
    placed = []
    out = np.empty(n, dtype=np.int64)
    for t in rng.permutation(n)[: n * 2 // 3]:
        k._live_insert(int(t), first, last, base, leaves, node_head, pool_item, pool_next, start_head,
                       start_next, start_bits, used)
        placed.append(int(t))
        f = int(rng.integers(0, 260))
        l = f + int(rng.integers(0, 60))
        cnt = k._live_query(f, l, base, leaves, node_head, pool_item, pool_next, start_head, start_next,
                            start_bits, out)
        got = out[:cnt].tolist()
        assert len(got) == len(set(got))
        assert set(got) == {p for p in placed if first[p] <= l and f <= last[p]}


@pytest.mark.parametrize("explicit", [False, True])
def test_check_assignment_finds_every_conflicting_pair_that_shares_addresses(explicit):
    """The checker's sweep (a bisection per item, the relation asked about those pairs only)
    against the definition: every conflicting pair of items whose address ranges meet."""
    import numpy as np

    rng = np.random.default_rng(3)
    n = 120
    first = rng.integers(0, 60, size=n)
    last = first + rng.integers(0, 8, size=n)
    sizes = rng.integers(0, 4, size=n) * 16
    offsets = rng.integers(0, 12, size=n) * 16
    conflicts = None
    if explicit:
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.1]
        conflicts = MatrixConflicts.from_pairs(n, pairs)
    problem = OffsetProblem(sizes=sizes.astype(np.int64), first=first, last=last, conflicts=conflicts, alignment=16)
    relation = problem.relation
    expected = {(i, j) for i in range(n) for j in range(i + 1, n)
                if sizes[i] and sizes[j] and relation.has(i, j)
                and offsets[i] < offsets[j] + sizes[j] and offsets[j] < offsets[i] + sizes[i]}
    found = check_assignment(problem, offsets, limit=10 ** 6)
    names = {(problem.name(i), problem.name(j)) for i, j in expected}
    assert expected and len(found) == len(expected)
    for message in found:
        a, b = message.split("'")[1], message.split("'")[3]
        assert (a, b) in names or (b, a) in names
