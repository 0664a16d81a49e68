"""Synthetic graphs with a seed: random layered DAGs and NAS-like cells, plus stream maps.

Used by the safety and offset-assignment benchmarks and tests, where real traces are either
too small or single-stream. Same arguments, same graph (numpy ``default_rng(seed)``).

- ``random_dag``: ops in layers; each op reads 1-3 tensors of the previous ``window`` ops
  (or the graph input), 40 % of ops also read a weight; sinks become graph outputs;
- ``nas_cells``: a chain of cells; each cell has ``nodes`` intermediate nodes, each the sum of
  two transformed earlier states (the cell's two inputs or earlier nodes), and ends in a
  concatenation, as in NASNet/DARTS cells;
- ``assign_streams``: a MindSpore-like stream map (Section 5.1): ops are split by category
  (GEMM, vector), and a category opens a new stream when its current one has ``per_stream``
  ops.
"""

from __future__ import annotations

import numpy as np

from npusim.graph.model import GEMM_KINDS, Graph, build_graph


def _tensor(name: str, n: int, kind: str = "activation") -> dict:
    return dict(name=name, shape=[int(n)], dtype="int8", itemsize=1, kind=kind)


def finish_graph(name: str, tensors: list[dict], ops: list[dict], meta: dict | None = None) -> Graph:
    """``build_graph`` after marking every activation no op reads as a graph output (a sink)."""
    consumed = {t for o in ops for t in o["inputs"]}
    for t in tensors:
        if t["kind"] == "activation" and t["name"] not in consumed:
            t["kind"] = "output"
    return build_graph(name, tensors, ops, meta=meta)


def random_dag(n_ops: int, seed: int = 0, window: int = 8, min_size: int = 256,
               max_size: int = 65536) -> Graph:
    rng = np.random.default_rng(seed)
    tensors = [_tensor("x", int(rng.integers(min_size, max_size)), "input")]
    ops, outputs = [], []
    for k in range(n_ops):
        lo = max(0, k - window)
        choices = list(range(lo, k))
        n_in = min(len(choices), int(rng.integers(1, 4)))
        picked = sorted(set(rng.choice(choices, size=n_in, replace=False).tolist())) if n_in else []
        ins = [outputs[j][int(rng.integers(len(outputs[j])))] for j in picked] or ["x"]
        kind = "Conv" if rng.random() < 0.4 else "Add"
        if kind == "Conv":
            w = f"w{k}"
            tensors.append(_tensor(w, int(rng.integers(min_size, max_size)), "weight"))
            ins.append(w)
        outs = [f"t{k}_{m}" for m in range(1 + int(rng.random() < 0.2))]
        for o in outs:
            tensors.append(_tensor(o, int(rng.integers(min_size, max_size))))
        outputs.append(outs)
        ops.append(dict(name=f"op{k}", kind=kind, inputs=sorted(set(ins)), outputs=outs,
                        vector_ops=1000, macs=10000 if kind == "Conv" else 0))
    return finish_graph(f"random_dag_{n_ops}_{seed}", tensors, ops, dict(generator="random_dag", seed=seed))


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


def assign_streams(graph: Graph, order, per_stream: int = 64) -> list[int]:
    """Op -> stream: GEMM and vector ops in separate streams, a new one every ``per_stream`` ops."""
    streams = [0] * graph.n_ops
    current = {}  # category -> (stream, count)
    next_stream = 0
    for op in order:
        category = graph.ops[op].kind in GEMM_KINDS
        stream, count = current.get(category, (None, per_stream))
        if count >= per_stream:
            stream, count = next_stream, 0
            next_stream += 1
        streams[op] = stream
        current[category] = (stream, count + 1)
    return streams
