"""Orders, lifetimes, live-bytes profiles and the bounds M_R / M_P."""

import random

import numpy as np
import pytest

from npusim.errors import PlanError, TraceError
from npusim.graph.analysis import (
    check_order, default_order, lifetimes, live_profile, min_required, peak_live_bytes,
    reverse_post_order,
)
from npusim.graph.model import build_graph, graph_from_ids
from npusim.workflow import load_graph


def tensor(name, n, kind="activation"):
    return dict(name=name, shape=[n], dtype="int8", itemsize=1, kind=kind)


def diamond():
    """x -> a -> {b, c} -> y, with a weight on b."""
    tensors = [tensor("x", 10, "input"), tensor("w", 5, "weight"), tensor("a", 100), tensor("b", 20),
               tensor("c", 30), tensor("y", 7, "output")]
    ops = [dict(name="A", kind="Relu", inputs=["x"], outputs=["a"]),
           dict(name="B", kind="Mul", inputs=["a", "w"], outputs=["b"]),
           dict(name="C", kind="Relu", inputs=["a"], outputs=["c"]),
           dict(name="D", kind="Add", inputs=["b", "c"], outputs=["y"])]
    return build_graph("diamond", tensors, ops)


def test_lifetimes_and_profile_by_hand():
    g = diamond()
    life = lifetimes(g, [0, 1, 2, 3])
    assert list(life.first) == [0, 1, 0, 1, 2, 3]
    assert list(life.last) == [0, 1, 2, 3, 3, 3]
    # step0: x a = 110; step1: w a b = 125; step2: a b c = 150; step3: b c y = 57
    assert list(live_profile(g, [0, 1, 2, 3])) == [110, 125, 150, 57]
    assert peak_live_bytes(g, [0, 1, 2, 3]) == 150
    assert min_required(g) == (130, 2)  # op C: a + c (B needs a + w + b = 125)
    # Alignment rounds every tensor up: B = 128 + 64 + 64
    assert min_required(g, 64) == (256, 1)


def test_order_changes_peak():
    g = diamond()
    assert list(live_profile(g, [0, 2, 1, 3])) == [110, 130, 155, 57]


def test_rpo_is_topological_on_every_trace():
    for name in ("resnet50", "nasnetalarge", "bert_tiny", "hrnet_w18_small"):
        g = load_graph(name)
        order = reverse_post_order(g)
        check_order(g, order)  # raises if not
        assert sorted(order) == default_order(g)


def test_check_order_names_the_offending_op():
    g = diamond()
    with pytest.raises(PlanError, match=r"'B'.*'a'.*'A'"):
        check_order(g, [1, 0, 2, 3])
    with pytest.raises(PlanError, match="permutation"):
        check_order(g, [0, 1, 2])


def test_graph_checks_reject_cycles_and_bad_shapes():
    tensors = [tensor("x", 4, "input"), tensor("a", 4), tensor("b", 4)]
    ops = [dict(name="P", kind="Add", inputs=["x", "b"], outputs=["a"]),
           dict(name="Q", kind="Relu", inputs=["a"], outputs=["b"])]
    with pytest.raises(TraceError, match="cycle"):
        build_graph("loop", tensors, ops)
    with pytest.raises(TraceError, match="shape"):
        build_graph("bad", [dict(tensor("x", 4, "input"), shape=[0, 3])], [])


def test_graph_check_accepts_ops_listed_before_their_producers():
    # check_graph looks for a cycle only when some op comes before a producer it reads from:
    # such a graph without a cycle is accepted, and one with a self-loop is not
    tensors = [tensor("x", 4, "input"), tensor("a", 4), tensor("b", 4)]
    ops = [dict(name="Q", kind="Relu", inputs=["a"], outputs=["b"]),
           dict(name="P", kind="Relu", inputs=["x"], outputs=["a"])]
    assert [o.name for o in build_graph("late", tensors, ops).ops] == ["Q", "P"]
    with pytest.raises(TraceError, match="cycle through op 'S'"):
        build_graph("self", tensors[:2], [dict(name="S", kind="Add", inputs=["x", "a"], outputs=["a"])])


def test_graph_from_ids_builds_what_build_graph_builds():
    tensors = [tensor("x", 4, "input"), tensor("w", 4, "weight"), tensor("a", 4), tensor("b", 4, "output")]
    ops = [dict(name="P", kind="Add", inputs=["x", "w"], outputs=["a"], attrs={"k": 1}, macs=3),
           dict(name="Q", kind="Relu", inputs=["a", "a"], outputs=["b"], vector_ops=4)]
    ids = {t["name"]: i for i, t in enumerate(tensors)}
    records = [(t["name"], tuple(t["shape"]), t["dtype"], t["itemsize"], t["kind"], None, ()) for t in tensors]
    numbered = [(o["name"], o["kind"], [ids[t] for t in o["inputs"]], [ids[t] for t in o["outputs"]],
                 dict(o.get("attrs", {})), o.get("macs", 0), o.get("vector_ops", 0), None) for o in ops]
    by_name, by_id = build_graph("g", tensors, ops), graph_from_ids("g", records, numbered)
    assert (by_id.tensors, by_id.ops) == (by_name.tensors, by_name.ops)
    assert [o.attrs for o in by_id.ops] == [o.attrs for o in by_name.ops]
    # (tuple: a graph of records stores them as columns, npusim.graph.columns)
    assert repr(tuple(by_id.tensors)) == repr(by_name.tensors) and repr(tuple(by_id.ops)) == repr(by_name.ops)
    with pytest.raises(TraceError, match="'x' is used twice"):
        graph_from_ids("g", records + [records[0]], numbered)


def test_resnet50_bounds():
    g = load_graph("resnet50")
    m_r, op = min_required(g)
    # layer4.0 3x3 stride-2 conv: 512*512*9 weights + 512 bias + 14x14x512 in + 7x7x512 out (int8)
    assert (m_r, g.ops[op].name) == (512 * 512 * 9 + 512 + 14 * 14 * 512 + 7 * 7 * 512, "/layer4/layer4.0/conv2/Conv")
    assert peak_live_bytes(g, default_order(g)) >= m_r
    assert np.all(live_profile(g, default_order(g)) >= 0)


def test_graph_from_ids_rejects_what_check_graph_rejects():
    # graph_from_ids checks only what its construction does not make true (_check_tensors,
    # _check_order, ids in range, an output per op): the verdicts are check_graph's
    x, w, a, b = tensor("x", 4, "input"), tensor("w", 4, "weight"), tensor("a", 4), tensor("b", 4)

    def both(tensors, ops):
        ids = {t["name"]: i for i, t in enumerate(tensors)}
        records = [(t["name"], tuple(t["shape"]), t["dtype"], t["itemsize"], t["kind"], None, ()) for t in tensors]
        numbered = [(o["name"], o["kind"], [ids.get(t, t) for t in o["inputs"]], [ids.get(t, t) for t in o["outputs"]],
                     {}, 0, 0, None) for o in ops]
        verdicts = []
        for build in (lambda: build_graph("g", tensors, ops), lambda: graph_from_ids("g", records, numbered)):
            try:
                verdicts.append([o.name for o in build().ops])
            except TraceError as error:
                verdicts.append(str(error).split(":")[1].split("'")[0])  # what is wrong, without names
        return verdicts

    def op(name, inputs, outputs):
        return dict(name=name, kind="Add", inputs=inputs, outputs=outputs)

    cases = [
        ([x, w, a, b], [op("P", ["x", "w"], ["a"]), op("Q", ["a", "a"], ["b"])]),  # well formed
        ([x, a, b], [op("Q", ["a"], ["b"]), op("P", ["x"], ["a"])]),  # a consumer before its producer, no cycle
        ([x, a, b], [op("P", ["x", "b"], ["a"]), op("Q", ["a"], ["b"])]),  # a cycle
        ([x, a], [op("S", ["x", "a"], ["a"])]),  # an op reading its own output
        ([x], [op("P", ["x"], [])]),  # no output
        ([x, a], [op("P", ["x"], ["a"]), op("Q", ["x"], ["a"])]),  # produced twice
        ([x, w, a], [op("P", ["x"], ["w"])]),  # a weight with a producer
        ([x, a, b], [op("P", ["x"], ["a"])]),  # an activation nobody produces
        ([dict(x, shape=[0])], []),  # a bad shape
    ]
    for tensors, ops in cases:
        by_name, by_id = both(tensors, ops)
        assert by_name == by_id, (tensors, ops)
    by_name, by_id = both([x, a], [op("P", [-1], ["a"])])  # ids are positions: -1 names no tensor
    assert by_id == " op " and by_name != ["P"]


def test_graph_from_ids_tests_tensor_columns_as_check_graph_tests_each_tensor():
    # graph_from_ids tests the tensors' columns as arrays (_tensor_columns_hold), running the
    # per-tensor check only to name a fault: the verdicts must be the per-tensor check's
    from npusim.graph.model import _check_tensors, _tensor_columns_hold, _unchecked_graph, _new_tensor
    good = [("x", (4,), "int8", 1, "input", None, ()), ("w", (2, 2), "int8", 1, "weight", None, ()),
            ("a", (4,), "int8", 1, "activation", None, ()), ("r", (2,), "int8", 1, "activation", None, (2,)),
            ("p", (4,), "int32", 4, "accumulator", None, ())]
    producer = [None, None, 0, None, 1]
    changes = [{}, {1: {4: "wieght"}}, {0: {1: (0,)}}, {0: {1: (4, -1)}}, {1: {3: 0}}, {2: {3: -4}},
               {0: {4: "activation"}}, {3: {6: ()}}, {3: {6: (0,)}}, {3: {6: (9,)}}, {3: {6: (-1,)}},
               {3: {6: (2, 4)}}, {2: {4: "output"}}, {1: {1: (2, True)}}, {1: {1: (2, 2.0)}}]
    for change in changes:
        for tiled in (True, False):
            records = [tuple(change.get(i, {}).get(f, v) for f, v in enumerate(r)) for i, r in enumerate(good)]
            built = tuple(_new_tensor(i, *r[:5], producer[i], (), r[5], r[6]) for i, r in enumerate(records))
            graph = _unchecked_graph("g", built, (object(),) * 2, {"tiled_from": "f"} if tiled else {})
            try:
                _check_tensors(graph, "g")
                held = True
            except TraceError:
                held = False
            assert _tensor_columns_hold(records, producer, tiled) == held, change


@pytest.mark.parametrize("seed", range(4))
def test_graph_arrays_list_each_ops_distinct_tensors_in_order(seed):
    # Graph.arrays dedups every op's tensors at once (distinct_csr): the lists are each op's
    # distinct inputs then outputs (Op.tensors) and distinct inputs, in the order they first appear
    rng = random.Random(seed)
    tensors = [tensor("x", 4, "input"), tensor("w", 2, "weight"), tensor("first", 4)]
    ops = [dict(name="first", kind="Add", inputs=["w", "x", "w"], outputs=["first"])]  # a repeat, ids descending
    for i in range(rng.randint(1, 30)):
        tensors.append(tensor(f"a{i}", rng.randint(1, 9), rng.choice(["activation", "output"])))
        earlier = [t["name"] for t in tensors[:-1]]
        inputs = [rng.choice(earlier) for _ in range(rng.randint(1, 4))]  # repeats, sometimes
        ops.append(dict(name=f"op{i}", kind="Add", inputs=inputs, outputs=[tensors[-1]["name"]]))
    graph = build_graph("g", tensors, ops)
    arrays = graph.arrays

    def lists(ptr, idx):
        return [idx[ptr[i]:ptr[i + 1]].tolist() for i in range(len(ptr) - 1)]

    assert lists(arrays.op_tensor_ptr, arrays.op_tensor_idx) == [list(o.tensors) for o in graph.ops]
    assert lists(arrays.op_input_ptr, arrays.op_input_idx) == [list(dict.fromkeys(o.inputs)) for o in graph.ops]
    assert lists(arrays.op_output_ptr, arrays.op_output_idx) == [list(o.outputs) for o in graph.ops]
    assert arrays.tensor_size.tolist() == [t.size for t in graph.tensors]
    assert all(a.dtype == np.int64 for a in (arrays.op_tensor_ptr, arrays.op_tensor_idx, arrays.op_input_idx))
