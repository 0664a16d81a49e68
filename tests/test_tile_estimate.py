"""The tiler's estimate of the tiling it picks against the simulated time of that op alone.

The tiler ranks its candidate tile specs by ``planners.tiling.estimate``; candidates are only
ranked by what will happen if the estimate of the one it picks agrees with the simulator
(issue 27: within 10 % on single-op cases). Each case plans one op — GEMMs (square, wide,
a transformer projection, a GEMV), convolutions (3×3, a deep one, conv1's 7×7 stride 2) and
an element-wise Add — at ¼, ½ and all of its working set, on a shipped config, and compares
the estimate (``estimate_spec``; an op left whole has the untiled estimate) with the
simulated latency. CI runs the cheap cases on every config; ``--slow`` every case.

The simulation runs on the bandwidth model, the one the estimate is of (DRAM at its peak rate
after a fixed latency). The banks model (the shipped NPUs' default) is slower on memory-bound
ops whose loads and stores share the DRAM: the Add at a quarter of its working set takes 1.10x
the estimate on edge-npu's LPDDR4, 1.21x on mid-npu's LPDDR5 and 1.44x on datacenter-npu's
HBM2E (read/write turnarounds and row conflicts between its three streams, 83-98 % row hits),
which the estimate does not model.
"""

from __future__ import annotations

import pytest

from npusim.graph.analysis import op_working_set
from npusim.testing.single_ops import add_graph, conv_graph, matmul_graph
from npusim.workflow import load_hw, plan_graph, simulate_plan
from planners.tiling.tiler import estimate_spec

CONFIGS = ("edge-npu", "mid-npu", "datacenter-npu", "tpu-like")
OPS = {
    "gemm2048": lambda: matmul_graph(2048, 2048, 2048),
    "gemm64x4096": lambda: matmul_graph(64, 4096, 4096),
    "gemm512x768": lambda: matmul_graph(512, 768, 768),
    "gemv768x3072": lambda: matmul_graph(1, 3072, 768),
    "conv3x3": lambda: conv_graph(64, 64, 56),
    "conv3x3deep": lambda: conv_graph(256, 256, 14),
    "conv7x7s2": lambda: conv_graph(3, 64, 224, 7, 2),
    "add": lambda: add_graph([1, 64, 112, 112]),
}
#: (op, config) pairs whose simulation takes more than a few seconds: --slow only
SLOW = {("gemm2048", "edge-npu"), ("gemm2048", "mid-npu"), ("gemm2048", "tpu-like"), ("gemm64x4096", "edge-npu"),
        ("gemm64x4096", "tpu-like"), ("conv3x3", "edge-npu"), ("conv7x7s2", "edge-npu"), ("add", "edge-npu"),
        ("conv3x3deep", "edge-npu"), ("gemm512x768", "tpu-like")}
FRACTIONS = (0.25, 0.5, 1.0)


def _cases():
    for config in CONFIGS:
        for name in OPS:
            for fraction in FRACTIONS:
                # CI: every op and config once, at a quarter of its working set (tiled), plus
                # the cheap pairs at every fraction
                slow = (name, config) in SLOW or (fraction != 0.25 and config != "datacenter-npu")
                marks = [pytest.mark.slow] if slow else []
                yield pytest.param(config, name, fraction, id=f"{config}-{name}-{fraction}", marks=marks)


def estimate_and_simulate(graph, hw, budget: int, pipeline: str = "tile+default+arena+belady"):
    """(estimated cycles, simulated cycles, the op's tile spec or None) of ``graph``'s one op
    planned at ``budget`` B on ``hw`` (whose scratchpad is set to the budget)."""
    hw = hw.with_scratchpad_size(budget)
    plan = plan_graph(graph, hw, pipeline, budget)
    report = simulate_plan(plan, hw, graph, validated=True)
    (op,) = graph.ops
    spec = plan.tiling.get(op.name)
    return estimate_spec(op, graph, spec, hw, hw.scratchpad.alignment, budget), report.cycles, spec


@pytest.mark.parametrize("config, name, fraction", list(_cases()))
def test_estimate_of_the_chosen_tiling_agrees_with_the_simulation(config, name, fraction):
    graph = OPS[name]()
    hw = load_hw(config, {"dram.model": "bandwidth"})
    align = hw.scratchpad.alignment
    need = int(op_working_set(graph, align)[0])
    budget = max(align, int(need * fraction) // align * align)
    estimated, simulated, spec = estimate_and_simulate(graph, hw, budget)
    assert estimated == pytest.approx(simulated, rel=0.10), (spec, estimated, simulated)
