"""A small hand-made graph and a hand-written valid Plan for it (not made by any planner).

Each validator or plan-I/O test breaks one thing of ``valid_plan()`` with
``dataclasses.replace`` (or the ``replace_residency`` / ``without_transfer`` helpers) and checks
what is reported.

The graph ``tiny`` (int8, so bytes = elements; the scratchpad alignment is 16 B)::

    x (input, 64) ──┐
    w1 (weight, 32) ┴─ conv ── a (64) ──┬── left ─── b (64) ──┐
                                        └── right ── c (32) ──┴── join ── y (output, 40)
                       w2 (weight, 16) ─────┘

``a`` fans out to ``left`` and ``right``, so it lives across steps 0..2. Working sets with
sizes rounded up to 16 B: conv 160, left 128, right 112, join 144, so M_R = 160 (op ``conv``).
In the definition order a, b, w2 and c are all live at step 2 (176 B = M_P), so a budget
in [160, 176) forces a spill.

The plan (order conv, left, right, join; capacity 256 B; one stream)::

    step 0 conv : load x, w1 (compulsory)
    step 1 left : store b (spill) after the op; b's first residency ends here
    step 2 right: load w2 (compulsory)
    step 3 join : load b (retrieve) into a second residency at another offset;
                  store y (writeback) after the op

    tensor  offset  bytes  steps
    x          0     64    0..0
    w1        64     32    0..0
    a         96     64    0..2
    b        160     64    1..1   (spilled)
    w2         0     16    2..2
    c         16     32    2..3
    b         48     64    3..3   (retrieved)
    y        112     48    3..3   (40 B rounded up to the 16 B alignment)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from npusim.graph.model import Graph, build_graph
from npusim.plan.model import Plan, PlanMeta, Residency, Transfer

GRAPH_NAME = "tiny"
CAPACITY = 256
ALIGNMENT = 16
M_R = 160
M_R_OP = "conv"
M_P = 176
HW_YAML = Path(__file__).resolve().parent / "fixtures" / "tiny-npu.yaml"

# step of each op in the plan's order (the definition order, so also the op ids)
CONV, LEFT, RIGHT, JOIN = 0, 1, 2, 3


def _tensor(name: str, n: int, kind: str) -> dict:
    return {"name": name, "shape": [n], "dtype": "int8", "itemsize": 1, "kind": kind}


def tiny_graph() -> Graph:
    """Four ops of custom kinds (their sizes fit no ONNX op: the trace contract checks them
    generically when the graph is saved and loaded)."""
    tensors = [
        _tensor("x", 64, "input"),
        _tensor("w1", 32, "weight"),
        _tensor("a", 64, "activation"),
        _tensor("b", 64, "activation"),
        _tensor("w2", 16, "weight"),
        _tensor("c", 32, "activation"),
        _tensor("y", 40, "output"),
    ]
    ops = [
        {"name": "conv", "kind": "Mix", "inputs": ["x", "w1"], "outputs": ["a"]},
        {"name": "left", "kind": "Relu", "inputs": ["a"], "outputs": ["b"]},
        {"name": "right", "kind": "Scale", "inputs": ["a", "w2"], "outputs": ["c"]},
        {"name": "join", "kind": "Merge", "inputs": ["b", "c"], "outputs": ["y"]},
    ]
    return build_graph(GRAPH_NAME, tensors, ops)


def tid(graph: Graph, name: str) -> int:
    return graph.tensor_by_name[name].id


def res(graph: Graph, name: str, offset: int, first: int, last: int, size: int | None = None) -> Residency:
    """A residency of tensor ``name``; ``size`` defaults to the tensor size rounded up to 16 B."""
    t = graph.tensor_by_name[name]
    if size is None:
        size = -(-t.size // ALIGNMENT) * ALIGNMENT
    return Residency(first=first, last=last, offset=offset, tensor=t.id, size=size)


def xfer(graph: Graph, step: int, kind: str, name: str, cause: str) -> Transfer:
    """A transfer of the whole tensor ``name``."""
    t = graph.tensor_by_name[name]
    return Transfer(step=step, kind=kind, tensor=t.id, cause=cause, size=t.size)


def transfer_key(t: Transfer):
    """Canonical order (as the plan JSON reader sorts): by step, loads before stores, tensor."""
    return (t.step, t.kind != "load", t.tensor)


@pytest.fixture(scope="module", name="graph")
def graph_fixture() -> Graph:
    """``tiny_graph()`` as a fixture, once per module (``from plan_fixtures import graph``)."""
    return tiny_graph()


@pytest.fixture(scope="module", name="plan")
def plan_fixture(graph: Graph) -> Plan:
    """``valid_plan()`` for the ``graph`` fixture, once per module."""
    return valid_plan(graph)


def valid_plan(graph: Graph | None = None) -> Plan:
    g = graph or tiny_graph()
    residencies = [
        res(g, "x", 0, 0, 0),
        res(g, "w1", 64, 0, 0),
        res(g, "a", 96, 0, 2),
        res(g, "b", 160, 1, 1),
        res(g, "w2", 0, 2, 2),
        res(g, "c", 16, 2, 3),
        res(g, "b", 48, 3, 3),
        res(g, "y", 112, 3, 3),
    ]
    transfers = [
        xfer(g, CONV, "load", "x", "compulsory"),
        xfer(g, CONV, "load", "w1", "compulsory"),
        xfer(g, LEFT, "store", "b", "spill"),
        xfer(g, RIGHT, "load", "w2", "compulsory"),
        xfer(g, JOIN, "load", "b", "retrieve"),
        xfer(g, JOIN, "store", "y", "writeback"),
    ]
    return Plan(
        graph=g.name, capacity=CAPACITY, alignment=ALIGNMENT,
        order=tuple(g.op_by_name[n].id for n in ("conv", "left", "right", "join")),
        streams=(0,) * g.n_ops,
        residencies=tuple(sorted(residencies)),
        transfers=tuple(sorted(transfers, key=transfer_key)),
        meta=PlanMeta(planner="hand", status="hand_written"),
    )


# -- helpers to break one thing ------------------------------------------------------------------
def find_residency(plan: Plan, graph: Graph, name: str, starting: int, /) -> Residency:
    """The residency of tensor ``name`` whose first step is ``starting``."""
    t = tid(graph, name)
    return next(r for r in plan.residencies if r.tensor == t and r.first == starting)


def replace_residency(plan: Plan, graph: Graph, name: str, starting: int, /, **changes) -> Plan:
    """The plan with the residency of ``name`` first at step ``starting`` changed by ``changes``."""
    old = find_residency(plan, graph, name, starting)
    rest = [r for r in plan.residencies if r != old]
    return replace(plan, residencies=tuple(sorted(rest + [replace(old, **changes)])))


def without_residency(plan: Plan, graph: Graph, name: str, starting: int, /) -> Plan:
    old = find_residency(plan, graph, name, starting)
    return replace(plan, residencies=tuple(r for r in plan.residencies if r != old))


def find_transfer(plan: Plan, graph: Graph, kind: str, name: str, /, step: int | None = None) -> Transfer:
    """The (first) ``kind`` transfer of tensor ``name``, at ``step`` if given."""
    t = tid(graph, name)
    return next(tr for tr in plan.transfers
                if tr.kind == kind and tr.tensor == t and step in (None, tr.step))


def without_transfer(plan: Plan, graph: Graph, kind: str, name: str, /) -> Plan:
    old = find_transfer(plan, graph, kind, name)
    return replace(plan, transfers=tuple(tr for tr in plan.transfers if tr != old))


def replace_transfer(plan: Plan, graph: Graph, kind: str, name: str, /, **changes) -> Plan:
    """The plan with the (first) ``kind`` transfer of ``name`` changed by ``changes``."""
    old = find_transfer(plan, graph, kind, name)
    rest = [tr for tr in plan.transfers if tr != old]
    return replace(plan, transfers=tuple(sorted(rest + [replace(old, **changes)], key=transfer_key)))


def with_residency(plan: Plan, extra: Residency) -> Plan:
    return replace(plan, residencies=tuple(sorted(plan.residencies + (extra,))))


def with_transfer(plan: Plan, extra: Transfer) -> Plan:
    return replace(plan, transfers=tuple(sorted(plan.transfers + (extra,), key=transfer_key)))
