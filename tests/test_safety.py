"""Multi-stream safety (MindSpore paper, Section 3): Figure 2, kernels vs references, properties."""

import numpy as np
import pytest

from npusim.errors import PlanError
from npusim.kernels.bitsets import (ancestor_bitsets, ancestor_sets_reference, rows_to_ints)
from npusim.plan import safety
from npusim.plan.safety import kernels as safety_kernels, reference as safety_reference
from npusim.plan.safety import prepare, safety_relation
from npusim.plan.safety.reference import lifetime_overlap_pairs, unsafe_pairs_reference

from test_safety_graphs import figure2, random_multistream


def _pair(graph, a, b):
    i, j = graph.tensor(a).id, graph.tensor(b).id
    return (min(i, j), max(i, j))


@pytest.mark.parametrize("method", safety.METHODS)
def test_figure2_pairs_from_the_text(method):
    graph, order, streams = figure2()
    rel = safety_relation(graph, order, streams, method)
    unsafe = lambda a, b: rel.unsafe(graph.tensor(a).id, graph.tensor(b).id)  # noqa: E731
    assert unsafe("a", "f")      # Section 2: 4 may run before 3 although a ends at 3 and f starts at 4
    assert unsafe("h", "a")      # node 7 may run before node 2 is done with a
    assert not unsafe("a", "i")  # valid ancestor: EndTime[a][0] = 3 <= MaxAncId[i][0], 2 < 6
    assert unsafe("b", "e")      # neither is a valid ancestor of the other
    assert not unsafe("i", "c") and not unsafe("i", "d")  # i starts after c and d end in stream 1
    assert unsafe("i", "f")      # StartTime[i] = 6 = EndTime[f]
    assert rel.pairs() == unsafe_pairs_reference(graph, order, streams)


def test_figure2_stream_tables_match_the_text():
    graph, order, streams = figure2()
    inputs = prepare(graph, order, streams)
    tables = safety.stream_tables(inputs)
    t = {n: graph.tensor(n).id for n in "abcdefghi"}
    node = lambda k: k - 1  # noqa: E731
    local = inputs.local
    # AncStreams[0] = {}, AncStreams[1] = {0}, AncStreams[2] = {0, 1}
    assert tables["anc_streams"].tolist() == [[False, False, False], [True, False, False], [True, True, False]]
    # MaxAncId[g][0] = node 1, MaxAncId[h][0] = node 3, MaxAncId[h][1] = 0 (as local orders)
    max_anc = tables["max_anc"]
    assert max_anc[node(5), 0] == local[node(1)]
    assert max_anc[node(7), 0] == local[node(3)] and max_anc[node(7), 1] == 0
    # DestStreams[a] = {0, 1} with EndTime[a][0] = node 3, EndTime[a][1] = node 2; a is between streams
    ds = {int(s): int(e) for s, e in zip(tables["ds_stream"][tables["ds_ptr"][t["a"]]:tables["ds_ptr"][t["a"] + 1]],
                                         tables["ds_end"][tables["ds_ptr"][t["a"]]:tables["ds_ptr"][t["a"] + 1]])}
    assert ds == {0: local[node(3)], 1: local[node(2)]}
    assert tables["t_between"][t["a"]] and not tables["t_between"][t["c"]]


def test_ancestor_bitsets_match_python_reference():
    for seed in range(5):
        graph, order, streams = random_multistream(seed, n_ops=90)
        inputs = prepare(graph, order, streams)
        parents = [inputs.parent_idx[inputs.parent_ptr[v]:inputs.parent_ptr[v + 1]].tolist()
                   for v in range(inputs.n_nodes)]
        got = rows_to_ints(ancestor_bitsets(inputs.parent_ptr, inputs.parent_idx, inputs.topo, inputs.n_nodes))
        assert got == ancestor_sets_reference(parents, inputs.topo.tolist())


@pytest.mark.parametrize("seed", range(12))
def test_all_algorithms_agree_and_contain_lifetime_overlap(seed):
    graph, order, streams = random_multistream(seed, n_ops=12 + seed, n_streams=1 + seed % 4)
    reference = unsafe_pairs_reference(graph, order, streams)
    for method in safety.METHODS:
        assert safety_relation(graph, order, streams, method).pairs() == reference, method
    assert lifetime_overlap_pairs(graph, order) <= reference


def test_single_stream_is_exactly_lifetime_overlap():
    for seed in range(6):
        graph, order, _ = random_multistream(seed, n_ops=20)
        rel = safety_relation(graph, order, [0] * graph.n_ops)
        assert rel.pairs() == lifetime_overlap_pairs(graph, order)


def test_numba_kernels_match_their_python_functions():
    graph, order, streams = random_multistream(3, n_ops=25, n_streams=3)
    inputs = prepare(graph, order, streams)
    assert np.array_equal(safety.run_algorithm2(inputs),
                          safety.run_algorithm2(inputs, kernel=safety.kernels.stream_graph_unsafe.py_func))
    for optimized in (False, True):
        assert np.array_equal(safety.run_algorithm1(inputs, optimized),
                              safety.run_algorithm1(inputs, optimized, kernel=safety.kernels.ancestor_tensors_unsafe.py_func))
    args = (inputs.parent_ptr, inputs.parent_idx, inputs.topo, inputs.node_stream, inputs.local, inputs.n_streams)
    assert np.array_equal(safety.kernels.max_ancestor_ids(*args), safety.kernels.max_ancestor_ids.py_func(*args))


@pytest.mark.parametrize("seed", range(6))
def test_stream_tables_kernel_matches_the_python_reference(seed):
    graph, order, streams = random_multistream(seed, n_ops=30 + 5 * seed, n_streams=1 + seed % 4)
    inputs = prepare(graph, order, streams)
    ref = safety_reference.stream_tables_reference(inputs)
    for kernel in (None, safety.kernels.stream_tables_kernel.py_func):
        got = safety.stream_tables(inputs, kernel=kernel)
        assert got.keys() == ref.keys()
        for key in ref:
            assert np.array_equal(got[key], ref[key]), key


@pytest.mark.parametrize("seed", range(10))
def test_stream_at_a_time_algorithm3_matches_the_pairwise_kernel(seed):
    graph, order, streams = random_multistream(seed, n_ops=40 + 8 * seed, n_streams=2 + seed % 5)
    inputs = prepare(graph, order, streams)
    fast = safety.run_algorithm2(inputs)
    assert np.array_equal(fast, safety.run_algorithm2(inputs, kernel=safety_kernels.stream_graph_unsafe_pairwise))
    assert np.array_equal(fast, safety.run_algorithm1(inputs, optimized=True))


def test_restrict_keeps_the_relation():
    graph, order, streams = random_multistream(7, n_ops=30, n_streams=3)
    rel = safety_relation(graph, order, streams)
    items = [t for t in range(graph.n_tensors) if t % 3 != 1]
    sub = rel.restrict(items)
    for a, ta in enumerate(items):
        for b, tb in enumerate(items):
            assert bool((int(sub[a, b >> 6]) >> (b & 63)) & 1) == rel.unsafe(ta, tb)


def test_bad_streams_are_named():
    graph, order, _ = figure2()
    with pytest.raises(PlanError, match="streams lists 3 entries"):
        safety_relation(graph, order, [0, 1, 0])
    with pytest.raises(PlanError, match="safety method"):
        safety_relation(graph, order, [0] * 8, "alg9")


@pytest.mark.parametrize("seed", range(6))
def test_restrict_kernel_matches_its_reference(seed):
    graph, order, streams = random_multistream(seed, n_ops=60 + 20 * seed, n_streams=2 + seed % 3)
    rel = safety_relation(graph, order, streams)
    rng = np.random.default_rng(seed)
    items = np.sort(rng.choice(graph.n_tensors, size=max(1, graph.n_tensors * 2 // 3), replace=False))
    assert np.array_equal(rel.restrict(items), safety_reference.restrict_reference(rel, items))


def _random_residencies(rng, n_tensors, n):
    """(tensor, offset, size) of ``n`` residencies packed into few addresses (many share them)."""
    tensor = rng.integers(0, n_tensors, size=n)
    offset = rng.integers(0, 8, size=n) * 16
    size = rng.integers(0, 5, size=n) * 16  # some of size 0
    return tensor.astype(np.int64), offset.astype(np.int64), size.astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_unsafe_shared_addresses_kernel_matches_its_reference(seed):
    graph, order, streams = random_multistream(seed, n_ops=40 + 10 * seed, n_streams=2 + seed % 3)
    rel = safety_relation(graph, order, streams)
    rng = np.random.default_rng(seed)
    tensor, offset, size = _random_residencies(rng, graph.n_tensors, 80)
    by_tensor = np.argsort(tensor, kind="stable")
    ptr = np.zeros(graph.n_tensors + 1, dtype=np.int64)
    np.cumsum(np.bincount(tensor, minlength=graph.n_tensors), out=ptr[1:])
    a, b = safety_kernels.unsafe_shared_addresses(rel.bits, tensor, offset, size, ptr, by_tensor)
    found = list(zip(a.tolist(), b.tolist()))
    assert len(found) == len(set(found))
    assert set(found) == safety_reference.unsafe_shared_addresses_reference(rel.unsafe, tensor, offset, size)
    assert found  # the case exercises the check


def _overlaps_by_address_sweep(residencies, unsafe, name):
    """The validator's multi-stream overlap check as it was written (a sweep by address over
    every pair sharing addresses): the reference for its faster form."""
    out = []
    active = []
    for r in sorted((r for r in residencies if r.first <= r.last), key=lambda r: (r.offset, r.first, r.tensor)):
        active = [a for a in active if a.offset + a.size > r.offset]
        if r.size <= 0:
            continue
        for a in active:
            steps_overlap = a.first <= r.last and r.first <= a.last
            if steps_overlap or (a.tensor != r.tensor and unsafe(a.tensor, r.tensor)):
                why = "" if steps_overlap else " (an unsafe pair: they may coexist on different streams)"
                out.append(f"{name(a.tensor)!r} [{a.offset}, {a.offset + a.size}) steps {a.first}..{a.last} "
                           f"overlaps {name(r.tensor)!r} [{r.offset}, {r.offset + r.size}) steps "
                           f"{r.first}..{r.last}{why}")
        active.append(r)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_multistream_overlap_check_reports_what_the_address_sweep_reports(seed):
    from npusim.plan.model import Plan, Residency
    from npusim.plan.validate import _check_overlaps

    graph, order, streams = random_multistream(seed, n_ops=40 + 10 * seed, n_streams=2 + seed % 3)
    rel = safety_relation(graph, order, streams)
    rng = np.random.default_rng(100 + seed)
    tensor, offset, size = _random_residencies(rng, graph.n_tensors, 60)
    first = rng.integers(0, graph.n_ops, size=len(tensor))
    last = first + rng.integers(-1, 6, size=len(tensor))  # some empty (first > last)
    residencies = [Residency(int(f), int(la), int(o), int(t), int(s))
                   for f, la, o, t, s in zip(first, last, offset, tensor, size)]
    plan = Plan(graph=graph.name, capacity=1 << 20, alignment=16, order=tuple(order), streams=tuple(streams),
                residencies=tuple(residencies), transfers=())
    name = lambda t: graph.tensors[t].name  # noqa: E731
    got = []
    _check_overlaps(residencies, name, lambda kind, text: got.append(text), plan, graph)
    expected = _overlaps_by_address_sweep(residencies, rel.unsafe, name)
    assert got == expected
    assert any("unsafe pair" in e for e in expected) and any("unsafe pair" not in e for e in expected)
