"""One-op graphs, and the tiler's estimate of an op beside its simulated time.

Used by ``tests/test_tile_estimate.py`` and ``benchmarks/bench_tile_estimate.py``: the
tiler ranks tile specs by ``planners.tiling.estimate``, so the estimate of the spec it
picks must agree with what the simulator then measures for that op alone.

- ``matmul_graph(m, n, k)``: C = A·B with A a graph input, B a weight, C the output;
- ``conv_graph(...)``: one Conv (input, weight, output);
- ``add_graph(shape)``: C = A + B, both inputs;
- ``estimate_and_simulate(graph, hw, budget)``: (the estimate of the plan the default
  pipeline makes at ``budget``, the simulated cycles of that plan).
"""

from __future__ import annotations

from npusim.graph.model import Graph, build_graph
from npusim.graph.op_costs import op_cost


def _graph(name: str, kind: str, attrs: dict, inputs: list[tuple[str, list[int], str]],
           output: list[int], dtype: str = "int8", itemsize: int = 1) -> Graph:
    cost = op_cost(kind, attrs, [tuple(shape) for _, shape, _ in inputs], [tuple(output)])
    tensors = [dict(name=n, shape=list(shape), dtype=dtype, itemsize=itemsize, kind=k) for n, shape, k in inputs]
    tensors.append(dict(name="y", shape=list(output), dtype=dtype, itemsize=itemsize, kind="output"))
    ops = [dict(name="op", kind=kind, inputs=[n for n, _, _ in inputs], outputs=["y"], attrs=attrs,
                macs=cost.macs, vector_ops=cost.vector_ops, gemm=cost.gemm)]
    return build_graph(name, tensors, ops)


def matmul_graph(m: int, n: int, k: int, dtype: str = "int8", itemsize: int = 1) -> Graph:
    return _graph(f"matmul{m}x{n}x{k}", "MatMul", {}, [("a", [m, k], "input"), ("b", [k, n], "weight")],
                  [m, n], dtype, itemsize)


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


def estimate_and_simulate(graph: Graph, hw, budget: int, pipeline: str = "tile+default+arena+belady"):
    """(estimated cycles, simulated cycles, the op's tile spec or None) of ``graph``'s one op
    planned at ``budget`` B on ``hw`` (whose scratchpad is set to the budget)."""
    from npusim.workflow import plan_graph, simulate_plan
    from planners.tiling.tiler import estimate_spec

    hw = hw.with_scratchpad_size(budget)
    plan = plan_graph(graph, hw, pipeline, budget)
    report = simulate_plan(plan, graph, hw, validated=True)
    (op,) = graph.ops
    spec = plan.tiling.get(op.name)
    return estimate_spec(op, graph, spec, hw, hw.scratchpad.alignment, budget), report.cycles, spec
