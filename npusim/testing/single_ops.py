"""One-op graphs, for the tests and benchmarks that run an op alone (the tiler's estimate
against the simulator: ``tests/test_tile_estimate.py``; the execution model's cases:
``tests/test_execution_model.py``).

- ``matmul_graph(m, n, k)``: C = A·B with A a graph input, B a weight, C the output
  (``npusim.graph.generators.matmul_graph``);
- ``conv_graph(...)``: one Conv (input, weight, output);
- ``add_graph(shape)``: C = A + B, both inputs;
- ``many_input_graph(kind, n)``: n 1x1 Convs of one input feeding one op that reads all n
  (a ``Concat`` along the channels, or a ``Sum``): the many-input cases of issue 28.
"""

from __future__ import annotations

from npusim.graph.generators import matmul_graph  # noqa: F401  (re-exported: one-op graphs live here)
from npusim.graph.model import Graph, build_graph
from npusim.graph.ops.costs import op_cost


def _graph(name: str, kind: str, attrs: dict, inputs: list[tuple[str, list[int], str]],
           output: list[int], dtype: str = "int8", itemsize: int = 1) -> Graph:
    cost = op_cost(kind, attrs, [tuple(shape) for _, shape, _ in inputs], [tuple(output)])
    tensors = [dict(name=n, shape=list(shape), dtype=dtype, itemsize=itemsize, kind=k) for n, shape, k in inputs]
    tensors.append(dict(name="y", shape=list(output), dtype=dtype, itemsize=itemsize, kind="output"))
    ops = [dict(name="op", kind=kind, inputs=[n for n, _, _ in inputs], outputs=["y"], attrs=attrs,
                macs=cost.macs, vector_ops=cost.vector_ops, gemm=cost.gemm)]
    return build_graph(name, tensors, ops)


def conv_graph(c_in: int, c_out: int, size: int, kernel: int = 3, stride: int = 1) -> Graph:
    pad = kernel // 2
    out = (size + 2 * pad - kernel) // stride + 1
    attrs = {"kernel_shape": [kernel, kernel], "strides": [stride, stride], "pads": [pad] * 4}
    return _graph(f"conv{c_in}x{c_out}x{size}k{kernel}s{stride}", "Conv", attrs,
                  [("x", [1, c_in, size, size], "input"), ("w", [c_out, c_in, kernel, kernel], "weight")],
                  [1, c_out, out, out])


def add_graph(shape: list[int]) -> Graph:
    return _graph("add" + "x".join(map(str, shape)), "Add", {}, [("a", shape, "input"), ("b", shape, "input")],
                  shape)


def many_input_graph(kind: str, n: int, channels: int = 8, size: int = 28) -> Graph:
    """N 1x1 Convs of one input [1, C, S, S] (each output [1, C, S, S] int8, image-like:
    stored channels-last on an ``nhwc`` config) feeding one ``kind`` op named ``many``
    (``Concat`` along axis 1, or ``Sum`` of all N) whose output is the graph's output."""
    shape = [1, channels, size, size]
    weight = [channels, channels, 1, 1]
    conv = {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0, 0, 0, 0]}
    tensors = [dict(name="x", shape=shape, dtype="int8", itemsize=1, kind="input")]
    ops = []
    for i in range(n):
        tensors.append(dict(name=f"w{i}", shape=weight, dtype="int8", itemsize=1, kind="weight"))
        tensors.append(dict(name=f"t{i}", shape=shape, dtype="int8", itemsize=1, kind="activation"))
        cost = op_cost("Conv", conv, [tuple(shape), tuple(weight)], [tuple(shape)])
        ops.append(dict(name=f"conv{i}", kind="Conv", inputs=["x", f"w{i}"], outputs=[f"t{i}"], attrs=conv,
                        macs=cost.macs, vector_ops=cost.vector_ops, gemm=cost.gemm))
    out = [1, channels * n, size, size] if kind == "Concat" else shape
    attrs = {"axis": 1} if kind == "Concat" else {}
    tensors.append(dict(name="y", shape=out, dtype="int8", itemsize=1, kind="output"))
    cost = op_cost(kind, attrs, [tuple(shape)] * n, [tuple(out)])
    ops.append(dict(name="many", kind=kind, inputs=[f"t{i}" for i in range(n)], outputs=["y"], attrs=attrs,
                    macs=cost.macs, vector_ops=cost.vector_ops, gemm=cost.gemm))
    return build_graph(f"{kind.lower()}{n}", tensors, ops)
