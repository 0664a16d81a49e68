"""Loads run ahead into free space in plans made whole (planners/alloc/prefetch.py)."""

import pytest

from npusim.graph.model import build_graph
from npusim.plan.model import Residency, Transfer
from npusim.plan.validate import validate
from npusim.registry import make_plan
from npusim.workflow import load_graph, load_hw, simulate_plan
from planners.alloc.prefetch import hoist_loads


def chain():
    """w0 -> op0 -> a -> op1 (reads w1) -> b -> op2 (reads w2) -> out."""
    tensors = [dict(name=n, shape=[64], dtype="int8", itemsize=1, kind=k) for n, k in
               [("x", "input"), ("w1", "weight"), ("w2", "weight"), ("a", "activation"), ("b", "activation"),
                ("out", "output")]]
    ops = [dict(name="op0", kind="Relu", inputs=["x"], outputs=["a"], attrs={}, macs=0, vector_ops=64, gemm=None),
           dict(name="op1", kind="Add", inputs=["a", "w1"], outputs=["b"], attrs={}, macs=0, vector_ops=64, gemm=None),
           dict(name="op2", kind="Add", inputs=["b", "w2"], outputs=["out"], attrs={}, macs=0, vector_ops=64, gemm=None)]
    return build_graph("chain", tensors, ops)


def test_a_weight_load_moves_ahead_keeping_its_addresses_when_free():
    g = chain()
    res = [Residency(0, 0, 0, 0, 64), Residency(0, 1, 64, 3, 64), Residency(1, 1, 128, 1, 64),
           Residency(1, 2, 0, 4, 64), Residency(2, 2, 192, 2, 64), Residency(2, 2, 64, 5, 64)]
    tr = [Transfer(0, "load", 0, "compulsory", 64), Transfer(1, "load", 1, "compulsory", 64),
          Transfer(2, "load", 2, "compulsory", 64), Transfer(2, "store", 5, "writeback", 64)]
    new_res, new_tr = hoist_loads(g, res, tr, depth=4, capacity=256)
    loads = {t.tensor: t.step for t in new_tr if t.kind == "load"}
    assert loads == {0: 0, 1: 0, 2: 0}  # both weights' addresses are free from step 0
    assert {r.tensor: (r.first, r.offset) for r in new_res}[2] == (0, 192)


def test_a_load_relocates_when_its_addresses_are_busy_and_waits_when_nothing_is_free():
    g = chain()
    # w2 sits at 128..191 at step 2; at step 1 w1 holds those addresses, and b, a, out hold
    # 0..63, 64..127 and 192..255 over steps 1..2: only a scratchpad with 256..319 has room
    res = [Residency(0, 0, 0, 0, 64), Residency(0, 1, 64, 3, 64), Residency(1, 1, 128, 1, 64),
           Residency(1, 2, 0, 4, 64), Residency(2, 2, 192, 5, 64), Residency(2, 2, 128, 2, 64)]
    tr = [Transfer(0, "load", 0, "compulsory", 64), Transfer(1, "load", 1, "compulsory", 64),
          Transfer(2, "load", 2, "compulsory", 64)]
    roomy, roomy_tr = hoist_loads(g, res, tr, depth=1, capacity=320)
    assert {r.tensor: (r.first, r.offset) for r in roomy}[2] == (1, 256)
    assert {t.tensor: t.step for t in roomy_tr if t.kind == "load"}[2] == 1
    full, _ = hoist_loads(g, res, tr, depth=1, capacity=256)  # no free range: it stays
    assert {r.tensor: (r.first, r.offset) for r in full}[2] == (2, 128)


def test_a_retrieve_never_moves_before_its_store():
    g = chain()
    # 'a' made at step 0 and spilled after it, retrieved at step 2 (a toy: only the rules matter)
    res = [Residency(0, 0, 64, 3, 64), Residency(2, 2, 0, 3, 64)]
    tr = [Transfer(0, "store", 3, "spill", 64), Transfer(2, "load", 3, "retrieve", 64)]
    new_res, new_tr = hoist_loads(g, res, tr, depth=4, capacity=256)
    assert next(t for t in new_tr if t.kind == "load").step == 1  # after its store at 0 and its last residency


def test_several_streams_are_left_alone():
    g = chain()
    res = [Residency(2, 2, 0, 1, 64)]
    tr = [Transfer(2, "load", 1, "compulsory", 64)]
    assert hoist_loads(g, res, tr, depth=4, capacity=256, streams=[0, 1, 0]) == (res, tr)


@pytest.mark.parametrize("pipeline", ["tile+cosma-dnc", "tile+olla", "tile+default+tflite-arena"])
def test_plans_made_whole_prefetch_and_stay_valid(pipeline):
    """resnet18 at edge-npu's 1 MiB: the same bytes, loads earlier, less latency (cosma-dnc
    9.27 M -> 8.64 M cycles, olla 9.29 M -> 8.63 M; the arena 8.60 M)."""
    graph, hw = load_graph("resnet18"), load_hw("edge-npu")
    plans = {d: make_plan(graph, hw, pipeline, options={"time_limit": 5, "prefetch_depth": d}) for d in (0, 4)}
    for plan in plans.values():
        assert validate(plan, graph) == []
    assert plans[4].offchip_bytes() == plans[0].offchip_bytes()
    early = sum(t.step for t in plans[4].transfers if t.kind == "load")
    assert early < sum(t.step for t in plans[0].transfers if t.kind == "load")
    cycles = {d: simulate_plan(p, hw, graph, validated=True).cycles for d, p in plans.items()}
    assert cycles[4] < cycles[0]
