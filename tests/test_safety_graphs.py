"""Graphs for the multi-stream safety tests (helpers, no tests): the MindSpore paper's Figure 2 and random DAGs."""

import numpy as np

from npusim.graph.model import build_graph

from helpers import tensor

# Figure 2 of the MindSpore paper, rebuilt from the text of Section 3: nodes 1..8 (global order),
# streams {1, 3}, {2, 4, 5, 6}, {7, 8}; tensors a..i. a: 1 -> 2, 3; b: 1 -> 7; e: 3 -> 6, 7;
# c: 2 -> 4; d: 4 -> 5; f: 4 -> 6; g: 5 -> 8; i: 6 -> 8; h: 7 -> 8 (and 8 writes the output).
FIGURE2_OPS = {  # node: (inputs, outputs)
    1: ([], ["a", "b"]), 2: (["a"], ["c"]), 3: (["a"], ["e"]), 4: (["c"], ["d", "f"]),
    5: (["d"], ["g"]), 6: (["e", "f"], ["i"]), 7: (["b", "e"], ["h"]), 8: (["g", "h", "i"], ["out"]),
}
FIGURE2_STREAMS = {1: 0, 3: 0, 2: 1, 4: 1, 5: 1, 6: 1, 7: 2, 8: 2}


def figure2():
    """(graph, order, streams) of Figure 2; op k-1 is node k."""
    names = list("abcdefghi")
    tensors = [tensor(n, 64) for n in names] + [tensor("out", 64, "output")]
    ops = [dict(name=f"n{k}", kind="Relu", inputs=ins, outputs=outs, vector_ops=64)
           for k, (ins, outs) in sorted(FIGURE2_OPS.items())]
    graph = build_graph("figure2", tensors, ops)
    order = list(range(8))
    streams = [FIGURE2_STREAMS[k] for k in range(1, 9)]
    return graph, order, streams


def random_multistream(seed: int, n_ops: int = 14, n_streams: int = 3, p_edge: float = 0.25,
                       with_weights: bool = True):
    """A random DAG (ops in definition order), with weights/inputs, and random streams."""
    rng = np.random.default_rng(seed)
    tensors, ops = [], []
    outputs_of = []
    for k in range(n_ops):
        ins = []
        for j in range(k):
            if rng.random() < p_edge:
                ins.append(outputs_of[j][int(rng.integers(len(outputs_of[j])))])
        if with_weights and rng.random() < 0.4:
            w = f"w{k}"
            tensors.append(tensor(w, int(rng.integers(1, 100)), "weight"))
            ins.append(w)
        if k == 0 or (not ins and rng.random() < 0.5):
            x = f"x{k}"
            tensors.append(tensor(x, int(rng.integers(1, 100)), "input"))
            ins.append(x)
        outs = [f"t{k}_{m}" for m in range(1 + int(rng.random() < 0.3))]
        for o in outs:
            tensors.append(tensor(o, int(rng.integers(1, 100))))
        outputs_of.append(outs)
        ops.append(dict(name=f"op{k}", kind="Add", inputs=sorted(set(ins)), outputs=outs, vector_ops=1))
    consumed = {t for o in ops for t in o["inputs"]}
    for t in tensors:
        if t["kind"] == "activation" and t["name"] not in consumed:
            t["kind"] = "output"
    graph = build_graph(f"random{seed}", tensors, ops)
    order = list(range(n_ops))
    streams = [int(s) for s in rng.integers(0, n_streams, size=n_ops)]
    return graph, order, streams
