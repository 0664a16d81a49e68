"""Shared test helpers: where things are, and small graphs built by hand."""

from pathlib import Path

from npusim.graph.model import build_graph

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TRACE_NAMES = sorted(p.name.split(".")[0] for p in (REPO / "traces").glob("*.json*"))


def tensor(name, n, kind="activation"):
    return dict(name=name, shape=[n], dtype="int8", itemsize=1, kind=kind)


def chain_with_skip():
    """x -A-> a -B(w)-> b -C-> c -E-> e -D(a, e)-> y: tensor a lives across B, C and E.

    With 64-B alignment M_R = 2112 B (op B: a + w + b) while the live peak is 3072 B (a, b, c
    at step C), so budgets in between force a spill of a.
    """
    tensors = [tensor("x", 1000, "input"), tensor("w", 64, "weight"), tensor("a", 1000),
               tensor("b", 1000), tensor("c", 1000), tensor("e", 1000), tensor("y", 64, "output")]
    ops = [dict(name="A", kind="Relu", inputs=["x"], outputs=["a"], vector_ops=1000),
           dict(name="B", kind="Mul", inputs=["a", "w"], outputs=["b"], vector_ops=1000),
           dict(name="C", kind="Relu", inputs=["b"], outputs=["c"], vector_ops=1000),
           dict(name="E", kind="Relu", inputs=["c"], outputs=["e"], vector_ops=1000),
           dict(name="D", kind="Add", inputs=["a", "e"], outputs=["y"], vector_ops=64)]
    return build_graph("chain_with_skip", tensors, ops)
