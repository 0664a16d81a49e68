"""The report's compact columns stand for the tuples and dicts they replace: ``Pairs`` (counter
samples, semaphores) and ``BreakdownRow`` (a row of the per-tile breakdown)."""

import copy
import pickle

import pytest

from npusim.sim.critical_path import BreakdownRow
from npusim.sim.report import Pairs


def test_pairs_read_as_the_tuple_of_pairs_they_hold():
    samples = [(0, 5), (1.5, 7), (3, 0), (4.25, 2)]
    pairs = Pairs.of_samples(samples)
    assert tuple(pairs) == tuple(samples) and pairs == tuple(samples) and pairs == samples
    assert [type(c) for c, _ in pairs] == [int, float, int, float]  # ints stay ints (SimPy's clock)
    assert all(type(v) is int for _, v in pairs)
    assert pairs[0] == (0, 5) and type(pairs[0][0]) is int and pairs[-1] == (4.25, 2)
    assert pairs[::2] == [(0, 5), (3, 0)] and pairs[1:3] == [(1.5, 7), (3, 0)]
    assert len(pairs) == 4 and pairs != samples[:3] and pairs != Pairs.of_samples(samples[:3])
    assert copy.deepcopy(pairs) == pairs and pickle.loads(pickle.dumps(pairs)) == pairs
    with pytest.raises(IndexError):
        pairs[4]
    assert Pairs([3, 4], [1, 2]) == ((3, 1), (4, 2)) and Pairs.of_samples([]) == ()


def test_a_breakdown_row_is_the_dict_of_its_columns():
    values = ("t0", "conv", "Conv", 3, "stream0", "core0", 1.0, 4.5, 3.5, "array", 0.0, "", 10, 20, 30)
    row = BreakdownRow(*values)
    as_dict = dict(zip(BreakdownRow.__dataclass_fields__, values))
    assert row == as_dict and as_dict == row and dict(row) == as_dict
    assert list(row) == list(as_dict) and list(row.items()) == list(as_dict.items())
    assert row["stalled_on"] == "" and row.get("of") == "conv" and row.get("missing", 1) == 1
    assert row != dict(as_dict, op="t1")
    with pytest.raises(KeyError):
        row["missing"]
    with pytest.raises(AttributeError):
        row.op = "t1"
    assert copy.deepcopy(row) == row and pickle.loads(pickle.dumps(row)) == row


def test_breakdown_bytes_are_each_ops_distinct_inputs_and_its_outputs():
    """``bytes_in`` / ``bytes_out`` of every tile's row (summed for all ops at once over the
    graph's arrays) against the sizes of the op's distinct input and output tensors, on a
    tiled run (views, weights shared by tiles) and an untiled one."""
    from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget, simulate_plan

    hw = load_hw("edge-npu")
    graph = load_graph("squeezenet1_0")
    for plan in (plan_graph(graph, hw, budget=resolve_budget("64KiB", graph, hw)), plan_graph(graph, hw)):
        report = simulate_plan(plan, hw, validated=True)
        ops = {op.name: op for op in plan.bound_graph.ops}
        tensors = plan.bound_graph.tensors
        assert len(report.op_breakdown) == len(ops)
        for row in report.op_breakdown:
            op = ops[row["op"]]
            assert row["bytes_in"] == sum(tensors[t].size for t in set(op.inputs))
            assert row["bytes_out"] == sum(tensors[t].size for t in op.outputs)
