"""Seeded random DAGs for property tests and benchmarks of the schedulers.

Every generator returns a valid ``Graph`` (int8 tensors, one output tensor per op, a weight
per op with probability ``weight_prob``) and is deterministic in its ``seed``:

- ``chain``: a linear sequence (one legal order);
- ``diamonds``: a chain of fork-join blocks (Zhong et al. Fig. 2b/2c);
- ``nas_cell``: NASNet-like cells, each combining the two previous cell outputs through a few
  two-input nodes whose unused results are concatenated at the end of the cell;
- ``wide_fanout``: one tensor read by many parallel branches joined at the end;
- ``random_dag``: Erdos-Renyi-style: each op reads 1-3 earlier tensors (the one random DAG:
  the scaling benchmark's 50k-op graphs too);
- ``nas_cells``: a chain of DARTS-like cells with large tensors (4096 B by default): each cell
  has ``nodes`` intermediate nodes, each the sum of two transformed earlier states, and ends
  in a concatenation (the multi-stream offset benchmark's synthetic graphs; numpy's seeded
  generator).
Sizes are drawn from ``sizes`` (bytes), so memory-aware orders differ from naive ones.
"""

from __future__ import annotations

import random

import numpy as np

from npusim.graph.generators import finish_graph
from npusim.graph.model import Graph, build_graph

__all__ = ["GENERATORS", "chain", "diamonds", "nas_cell", "nas_cells", "random_dag", "wide_fanout", "with_custom_kinds"]

DEFAULT_SIZES = (64, 128, 256, 512, 1024, 2048)


class _Builder:
    def __init__(self, name: str, seed: int, sizes, weight_prob: float):
        self.name, self.rng, self.sizes, self.weight_prob = name, random.Random(seed), sizes, weight_prob
        self.tensors: list[dict] = []
        self.ops: list[dict] = []
        self.add_tensor("x", "input")

    def add_tensor(self, name: str, kind: str = "activation", size: int | None = None) -> str:
        size = size if size is not None else self.rng.choice(self.sizes)
        self.tensors.append(dict(name=name, shape=[size], dtype="int8", itemsize=1, kind=kind))
        return name

    def op(self, kind: str, inputs: list[str]) -> str:
        i = len(self.ops)
        out = self.add_tensor(f"t{i}")
        ins = list(dict.fromkeys(inputs))
        if self.rng.random() < self.weight_prob:
            ins.append(self.add_tensor(f"w{i}", "weight", self.rng.choice(self.sizes) // 4 or 1))
        self.ops.append(dict(name=f"op{i}", kind=kind, inputs=ins, outputs=[out], vector_ops=1))
        return out

    def graph(self) -> Graph:
        return finish_graph(self.name, self.tensors, self.ops)


def chain(n: int, seed: int = 0, sizes=DEFAULT_SIZES, weight_prob: float = 0.5) -> Graph:
    b = _Builder(f"chain{n}_s{seed}", seed, sizes, weight_prob)
    t = "x"
    for _ in range(n):
        t = b.op("Relu", [t])
    return b.graph()


def diamonds(blocks: int, width: int = 2, seed: int = 0, sizes=DEFAULT_SIZES, weight_prob: float = 0.5) -> Graph:
    b = _Builder(f"diamonds{blocks}x{width}_s{seed}", seed, sizes, weight_prob)
    t = b.op("Conv", ["x"])
    for _ in range(blocks):
        branches = []
        for _ in range(width):
            u = b.op("Conv", [t])
            if b.rng.random() < 0.5:
                u = b.op("Relu", [u])
            branches.append(u)
        t = b.op("Add", branches)
    return b.graph()


def nas_cell(cells: int, nodes: int = 3, seed: int = 0, sizes=DEFAULT_SIZES, weight_prob: float = 0.3) -> Graph:
    b = _Builder(f"nas{cells}x{nodes}_s{seed}", seed, sizes, weight_prob)
    prev, cur = "x", b.op("Conv", ["x"])
    for _ in range(cells):
        pool = [prev, cur]
        made = []
        for _ in range(nodes):
            a, c = b.rng.sample(pool, 2) if len(pool) > 1 else (pool[0], pool[0])
            left = b.op("Conv", [a])
            node = b.op("Add", [left, c])
            pool.append(node)
            made.append(node)
        prev, cur = cur, b.op("Concat", made)
    return b.graph()


def wide_fanout(width: int, depth: int = 1, seed: int = 0, sizes=DEFAULT_SIZES, weight_prob: float = 0.3) -> Graph:
    b = _Builder(f"fanout{width}x{depth}_s{seed}", seed, sizes, weight_prob)
    t = b.op("Conv", ["x"])
    ends = []
    for _ in range(width):
        u = t
        for _ in range(depth):
            u = b.op("Conv", [u])
        ends.append(u)
    b.op("Concat", ends)
    return b.graph()


def random_dag(n: int, seed: int = 0, sizes=DEFAULT_SIZES, weight_prob: float = 0.4,
               max_inputs: int = 3, shared_input_prob: float = 0.1) -> Graph:
    """``n`` ops; op i reads 1..max_inputs tensors made by ops among the last few (locality,
    as in real networks) and, sometimes, the graph input ``x`` again (a shared input)."""
    b = _Builder(f"random{n}_s{seed}", seed, sizes, weight_prob)
    made = [b.op("Conv", ["x"])]
    for _ in range(n - 1):
        window = made[-6:]
        k = b.rng.randint(1, min(max_inputs, len(window)))
        ins = b.rng.sample(window, k)
        if b.rng.random() < shared_input_prob:
            ins.append("x")
        made.append(b.op("Add" if len(ins) > 1 else "Relu", ins))
    return b.graph()


def with_custom_kinds(graph: Graph) -> Graph:
    """The graph with each op kind renamed ``<kind>Like`` (a custom kind), for saving as a trace.

    The generated DAGs (here and in ``npusim.graph.generators``) name their ops Conv, Add,
    Relu, Concat (``streams-category`` groups the GEMM kinds) over 1-D tensors of random sizes
    that no such ONNX op has; a trace file must honour the shapes of the kinds it names
    (``npusim.graph.contract``), a custom kind only the generic rules -- among them, no MACs
    without a ``gemm``, so an op's MACs without one are dropped."""
    records = []
    for op in graph.ops:
        records.append(dict(name=op.name, kind=op.kind + "Like", inputs=[graph.tensors[t].name for t in op.inputs],
                            outputs=[graph.tensors[t].name for t in op.outputs], attrs=dict(op.attrs),
                            macs=op.macs if op.gemm is not None else 0, vector_ops=op.vector_ops, gemm=op.gemm))
    tensors = [dict(name=t.name, shape=list(t.shape), dtype=t.dtype, itemsize=t.itemsize, kind=t.kind)
               for t in graph.tensors]
    return build_graph(graph.name, tensors, records, graph.meta)


GENERATORS = {
    "chain": lambda seed, size: chain(size, seed),
    "diamonds": lambda seed, size: diamonds(max(1, size // 4), 2 + seed % 2, seed),
    "nas_cell": lambda seed, size: nas_cell(max(1, size // 8), 3, seed),
    "wide_fanout": lambda seed, size: wide_fanout(max(2, (size - 2) // 2), 2, seed),
    "random_dag": lambda seed, size: random_dag(size, seed),
}


def random_graphs(count: int, max_ops: int = 16, seed: int = 0) -> list[Graph]:
    """``count`` graphs cycling through every generator, at most about ``max_ops`` ops each."""
    rng = random.Random(seed)
    names = sorted(GENERATORS)
    out = []
    for i in range(count):
        size = rng.randint(4, max_ops)
        out.append(GENERATORS[names[i % len(names)]](rng.randrange(1 << 30), size))
    return out


def _tensor(name: str, n: int, kind: str = "activation") -> dict:
    return dict(name=name, shape=[int(n)], dtype="int8", itemsize=1, kind=kind)


def nas_cells(n_cells: int, nodes: int = 5, seed: int = 0, channels: int = 4096) -> Graph:
    rng = np.random.default_rng(seed)
    tensors = [_tensor("x", channels, "input")]
    ops: list[dict] = []
    prev, prev_prev = "x", "x"

    def op(name, kind, ins, size, weight=False):
        ins = list(dict.fromkeys(ins))
        if weight:
            tensors.append(_tensor(f"{name}.w", int(size // 4), "weight"))
            ins.append(f"{name}.w")
        tensors.append(_tensor(f"{name}.y", int(size)))
        ops.append(dict(name=name, kind=kind, inputs=ins, outputs=[f"{name}.y"], vector_ops=int(size),
                        macs=int(size) * 9 if weight else 0))
        return f"{name}.y"

    for c in range(n_cells):
        size = channels * (1 + int(rng.integers(0, 3)))
        states = [op(f"c{c}.pre0", "Conv", [prev_prev], size, True), op(f"c{c}.pre1", "Conv", [prev], size, True)]
        for k in range(nodes):
            a, b = rng.choice(len(states), size=2, replace=True).tolist()
            left = op(f"c{c}.n{k}.l", "Conv" if rng.random() < 0.5 else "MaxPool", [states[a]], size,
                      weight=rng.random() < 0.5)
            right = op(f"c{c}.n{k}.r", "Conv" if rng.random() < 0.5 else "AveragePool", [states[b]], size,
                       weight=rng.random() < 0.5)
            states.append(op(f"c{c}.n{k}.add", "Add", [left, right], size))
        prev_prev, prev = prev, op(f"c{c}.concat", "Concat", states[2:], size * nodes)
    return finish_graph(f"nas_{n_cells}x{nodes}_{seed}", tensors, ops, dict(generator="nas_cells", seed=seed))
