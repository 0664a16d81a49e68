"""Graphs and maps the product generates from a few numbers (the seeded random graphs of the
tests and benchmarks live in ``npusim.testing.random_dags``).

- ``assign_streams``: a MindSpore-like stream map (Section 5.1): ops are split by category
  (GEMM, vector), and a category opens a new stream when its current one has ``per_stream``
  ops;
- ``matmul_graph``: one MatMul, its operands and result in DRAM (a GEMM kernel);
- ``fc_stack``: a chain of equal square fully connected layers (int8), each a MatMul and its
  nonlinearity, with a given weight count and batch: the TPU v1 workloads of Jouppi et al.
  (``TPU_V1_WORKLOADS``, ``tpuv1:<name>`` wherever a trace name goes).
"""

from __future__ import annotations

import math

import numpy as np

from npusim.errors import TraceError
from npusim.graph.model import Graph, build_graph
from npusim.graph.ops.kinds import GEMM_KINDS
from npusim.graph.ops.costs import op_cost


def _tensor(name: str, n: int, kind: str = "activation") -> dict:
    return dict(name=name, shape=[int(n)], dtype="int8", itemsize=1, kind=kind)


def finish_graph(name: str, tensors: list[dict], ops: list[dict], meta: dict | None = None) -> Graph:
    """``build_graph`` after marking every activation no op reads as a graph output (a sink)."""
    consumed = {t for o in ops for t in o["inputs"]}
    for t in tensors:
        if t["kind"] == "activation" and t["name"] not in consumed:
            t["kind"] = "output"
    return build_graph(name, tensors, ops, meta=meta)


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


def matmul_graph(m: int, n: int, k: int, dtype: str = "int8", itemsize: int = 1, name: str | None = None) -> Graph:
    """One MatMul ``C[m, n] = A[m, k] @ B[k, n]``: A a graph input, B a weight, C the output,
    all in DRAM when the graph starts and ends (a GEMM kernel as a benchmark runs it)."""
    tensors = [dict(name="a", shape=[m, k], dtype=dtype, itemsize=itemsize, kind="input"),
               dict(name="b", shape=[k, n], dtype=dtype, itemsize=itemsize, kind="weight"),
               dict(name="c", shape=[m, n], dtype=dtype, itemsize=itemsize, kind="output")]
    cost = op_cost("MatMul", {}, [[m, k], [k, n]], [[m, n]])
    ops = [dict(name="matmul", kind="MatMul", inputs=["a", "b"], outputs=["c"], attrs={}, macs=cost.macs,
                vector_ops=cost.vector_ops, gemm=cost.gemm)]
    return build_graph(name or f"matmul_{m}x{n}x{k}", tensors, ops, dict(generator="matmul_graph"))


def fc_stack(name: str, layers: int, weights: int, batch: int, activation: str = "Relu") -> Graph:
    """``layers`` equal square fully connected layers holding ``weights`` weights in all, run on
    ``batch`` inputs: layer i is ``MatMul([batch, d] x [d, d])`` then ``activation``, with
    d = round(sqrt(weights / layers)) (so the layers hold layers·d² ≈ ``weights``); int8 weights
    and activations, the input and the last layer's output in DRAM. Each weight is used
    ``batch`` times: 2·batch operations per weight byte, the operational intensity the roofline
    of a weight-streaming accelerator turns into a bound."""
    for what, value in (("layers", layers), ("weights", weights), ("batch", batch)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise TraceError(f"fc_stack {name!r}: {what} = {value!r}, expected a positive integer")
    d = max(1, round(math.sqrt(weights / layers)))
    tensors = [dict(name="x", shape=[batch, d], dtype="int8", itemsize=1, kind="input")]
    ops = []
    x = "x"
    for i in range(layers):
        w, y, a = f"fc{i}.weight", f"fc{i}.out", f"fc{i}.act"
        tensors += [dict(name=w, shape=[d, d], dtype="int8", itemsize=1, kind="weight"),
                    dict(name=y, shape=[batch, d], dtype="int8", itemsize=1, kind="activation"),
                    dict(name=a, shape=[batch, d], dtype="int8", itemsize=1, kind="activation")]
        for kind, op_name, inputs, shapes, out in (("MatMul", f"fc{i}", [x, w], [[batch, d], [d, d]], y),
                                                   (activation, f"fc{i}.{activation.lower()}", [y], [[batch, d]], a)):
            cost = op_cost(kind, {}, shapes, [[batch, d]])
            ops.append(dict(name=op_name, kind=kind, inputs=inputs, outputs=[out], attrs={}, macs=cost.macs,
                            vector_ops=cost.vector_ops, gemm=cost.gemm))
        x = a
    return finish_graph(name, tensors, ops, dict(generator="fc_stack", layers=layers, weights=weights, batch=batch,
                                                 width=d))


#: The four TPU v1 workloads of Jouppi et al., "In-Datacenter Performance Analysis of a Tensor
#: Processing Unit", ISCA 2017, Table 1 (layers, weights, batch size, nonlinearity) with the
#: TeraOps/s the TPU measured on them (Table 3), each modelled as ``fc_stack``: equal square
#: FC layers summing to the table's weights. The LSTMs' recurrence and gate arithmetic are
#: not modelled (docs/validation.md says what that leaves out).
TPU_V1_WORKLOADS = {
    "mlp0": dict(layers=5, weights=20_000_000, batch=200, activation="Relu", measured_tops=12.3),
    "mlp1": dict(layers=4, weights=5_000_000, batch=168, activation="Relu", measured_tops=9.7),
    "lstm0": dict(layers=58, weights=52_000_000, batch=64, activation="Sigmoid", measured_tops=3.7),
    "lstm1": dict(layers=56, weights=34_000_000, batch=96, activation="Sigmoid", measured_tops=2.8),
}


def tpu_v1_workload(name: str) -> Graph:
    """``TPU_V1_WORKLOADS[name]`` as an ``fc_stack`` graph called ``tpuv1-<name>``."""
    if name not in TPU_V1_WORKLOADS:
        raise TraceError(f"tpuv1:{name}: no such TPU v1 workload; expected one of {', '.join(TPU_V1_WORKLOADS)}")
    w = TPU_V1_WORKLOADS[name]
    return fc_stack(f"tpuv1-{name}", w["layers"], w["weights"], w["batch"], w["activation"])
