"""Shared test helpers: where things are, and small graphs built by hand."""

from pathlib import Path

from npusim.graph.model import build_graph
from npusim.hw.config import Hardware
from npusim.registry import default_registry
from npusim.testing import random_dags
from planners.schedule.problem import MemoryProblem

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TRACE_NAMES = sorted(p.name.split(".")[0] for p in (REPO / "traces").glob("*.json*"))


def tensor(name, n, kind="activation"):
    return dict(name=name, shape=[n], dtype="int8", itemsize=1, kind=kind)


def chain_with_skip():
    """x -A-> a -B(w)-> b -C-> c -E-> e -D(a, e)-> y: tensor a lives across B, C and E.

    B and D are custom kinds (no ONNX op reads a[1000] and w[64] into b[1000]), so the trace
    contract checks them generically when the graph is saved and loaded.

    With 64-B alignment M_R = 2112 B (op B: a + w + b) while the live peak is 3072 B (a, b, c
    at step C), so budgets in between force a spill of a.
    """
    tensors = [tensor("x", 1000, "input"), tensor("w", 64, "weight"), tensor("a", 1000),
               tensor("b", 1000), tensor("c", 1000), tensor("e", 1000), tensor("y", 64, "output")]
    ops = [dict(name="A", kind="Relu", inputs=["x"], outputs=["a"], vector_ops=1000),
           dict(name="B", kind="Scale", inputs=["a", "w"], outputs=["b"], vector_ops=1000),
           dict(name="C", kind="Relu", inputs=["b"], outputs=["c"], vector_ops=1000),
           dict(name="E", kind="Relu", inputs=["c"], outputs=["e"], vector_ops=1000),
           dict(name="D", kind="Merge", inputs=["a", "e"], outputs=["y"], vector_ops=64)]
    return build_graph("chain_with_skip", tensors, ops)


def random_memory_problem(rng, n):
    """A random MemoryProblem with what traces rarely show but fusion must survive: weights
    read by several nodes, nodes with two outputs, dead outputs, buffers live at the start
    (a part of a graph) and at the end, and extra bytes."""
    sizes, producer, consumers, node_in, node_out = [], [], [], [[] for _ in range(n)], [[] for _ in range(n)]

    def buffer(prod):
        sizes.append(rng.choice([1, 2, 3, 5, 8, 13, 40, 100]))
        producer.append(prod)
        consumers.append([])
        return len(sizes) - 1

    for _ in range(rng.randint(0, 2)):
        buffer(-1)
    made = []
    for v in range(n):
        ins = set(rng.sample(made[-6:], min(rng.choice([1, 1, 1, 2, 2, 3]), len(made[-6:]))))
        ins |= {w for w in range(len(sizes)) if producer[w] < 0 and rng.random() < 0.15}
        for x in sorted(ins):
            node_in[v].append(x)
            consumers[x].append(v)
        for _ in range(rng.choice([1, 1, 1, 2])):
            made.append(buffer(v))
            node_out[v].append(made[-1])
    keep = [b for b in range(len(sizes)) if producer[b] >= 0 or consumers[b]]
    new = {b: i for i, b in enumerate(keep)}
    return MemoryProblem(
        sizes=tuple(sizes[b] for b in keep), producer=tuple(producer[b] for b in keep),
        consumers=tuple(tuple(consumers[b]) for b in keep),
        node_inputs=tuple(tuple(new[x] for x in xs) for xs in node_in),
        node_outputs=tuple(tuple(new[x] for x in xs) for xs in node_out),
        extra=tuple(rng.choice([0, 0, 1, 5, 20, 60]) for _ in range(n)), members=tuple((v,) for v in range(n)),
        live_at_start=tuple(producer[b] < 0 and rng.random() < 0.5 for b in keep),
        live_at_end=tuple(rng.random() < 0.05 for _ in keep))


class FakeClock:
    """Stands in for the ``time`` module of code under test: ``perf_counter()`` returns
    ``now``, which only the test advances, so wall-clock budgets are checked exactly
    whatever the machine's speed."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def perf_counter(self) -> float:
        return self.now


def far_deadline(seconds: float = 60.0) -> float:
    """A deadline (on ``time.perf_counter``'s clock) that only guards against a hang."""
    import time
    return time.perf_counter() + seconds


def nine_op_cell():
    return random_dags.nas_cell(1, 3, seed=11)  # 9 ops: small enough for every exact planner


def hardware_with_two_streams() -> Hardware:
    from dataclasses import replace

    base = Hardware()
    return replace(base, streams=2, cores=replace(base.cores, count=2))


def every_planner_pipeline() -> dict[str, tuple[str, str]]:
    """Every registered planner in one pipeline: planner -> (pipeline, budget keyword)."""
    found = {}
    for p in default_registry().planners():
        if p.stage == "tiling":
            found[p.name] = (f"{p.name}+default+arena+belady", "tight")
        elif p.stage == "schedule":
            found[p.name] = (f"{p.name}+arena+belady", "MR")
        elif p.stage == "streams":
            found[p.name] = (f"default+{p.name}+mindspore-mo:size,best-fit", "roomy")
        elif p.stage == "spill":
            found[p.name] = (f"default+arena+{p.name}", "MR")
        elif p.stage == "alloc":
            found[p.name] = (f"default+{p.name}+belady" if p.name == "arena" else f"default+{p.name}", "roomy")
        elif p.stage == "offchip":
            found[p.name] = (f"default+arena+belady+{p.name}", "MR")
        else:  # joint
            found[p.name] = (p.name, "roomy")
    return found
