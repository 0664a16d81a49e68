"""Every pipeline family at the NPU's own scratchpad (issue: planners compose with tiling).

Each family x shipped trace x {the config's scratchpad, half of it} on edge-npu and mid-npu
either gives a plan that the independent validator accepts and the simulator runs, or a
refusal: a user-facing error (exit 2) whose reason is one of ``REFUSALS``. An internal error
(a planner's bug, exit 3: an invalid plan, a lost tensor) fails the test. CI runs
``FAST_TRACES`` on edge-npu at half its scratchpad (but the ``SLOW_IN_FAST`` cases);
``--slow`` runs the whole matrix.
"""

import re

import pytest

from npusim.errors import InternalError, NpusimError
from npusim.workflow import load_graph, load_hw, plan_graph, simulate_plan

#: One pipeline per planner family, each with the tile stage in front.
FAMILIES = (
    "tile+default+arena+belady",
    "tile+rpo+arena+lru",
    "tile+greedy-mem+arena+belady",
    "tile+zhong+arena+belady",
    "tile+zhong+arena+greedy-ilp",
    "tile+olla-order+arena+belady",
    "tile+dp+arena+belady",
    "tile+default+tflite-arena",
    "tile+default+so-size",
    "tile+default+streams-rr+mindspore-mo:size,best-fit",
    "tile+default+streams-category+mindspore-so:size,first-fit",
    "tile+olla",
    "tile+cosma-dnc",
    "tile+zhong+cosma-fs",
    "tile+cosma",
    "tile+default+arena+belady+taa",
    # the same planners on the fused graph (npusim.graph.fusion): fused ops are tiled and planned
    "fuse+tile+default+arena+belady",
    "fuse+tile+zhong+arena+belady",
    "fuse+tile+cosma-dnc",
    "fuse+tile+default+streams-rr+mindspore-mo:size,best-fit",
)
#: The documented refusals: a reason the user can act on, raised by the stage named.
REFUSALS = {
    "cosma model size": r"cosma: the exact model of .* cells, above the limit max_cells",  # before the ILP
    "dp size": r"dp: .*ops",  # dp: graphs above max_ops, before the DP
    "no spill": r"does not fit: needs .* never spills",  # whole-lifetime allocators and olla
    "olla no spill": r"olla: (the arena needs|its order keeps) .* does not spill",
}
OPTIONS = {"time_limit": 5}
FAST_TRACES = ("resnet18", "squeezenet1_0", "bert_tiny", "hrnet_w18_small")
ALL_TRACES = ("bert_tiny", "densenet121", "fcn_resnet50", "googlenet", "hrnet_w18_small", "inception_v3",
              "mnasnet1_0", "mobilenet_v2", "nasnetalarge", "r2plus1d_18", "resnet18", "resnet50",
              "squeezenet1_0", "transformer", "vit_b_16")


def run_case(trace: str, hardware: str, budget: int, pipeline: str) -> tuple[str, str]:
    """("ok", "") for a validated plan that simulates, ("refused", kind) for a documented
    refusal; anything else raises."""
    graph, hw = load_graph(trace), load_hw(hardware)
    try:
        plan = plan_graph(graph, hw, pipeline, budget, options=dict(OPTIONS))  # validated inside
    except InternalError:
        raise
    except NpusimError as exc:
        kind = next((k for k, pattern in REFUSALS.items() if re.search(pattern, str(exc))), None)
        assert kind is not None, f"{trace}/{hardware}/{budget}/{pipeline}: undocumented refusal: {exc}"
        return "refused", kind
    report = simulate_plan(plan, hw, graph, validated=True)
    assert report.cycles > 0 and not report.oversize
    return "ok", ""


#: Fast-matrix cases of 20 s or more (the exact COSMA models on hrnet_w18_small's 512 KiB budget):
#: they run with --slow; CI keeps each family on the other fast traces.
SLOW_IN_FAST = {"hrnet_w18_small-edge-npu-512K-fuse+tile+cosma-dnc", "hrnet_w18_small-edge-npu-512K-tile+zhong+cosma-fs",
                "hrnet_w18_small-edge-npu-512K-tile+cosma-dnc"}


def cases(traces, hardwares, slow_full_budget=False):
    """The matrix's cases; ``slow_full_budget``: those at the config's whole scratchpad run with
    --slow only (CI keeps the half budget, where more ops are tiled and every family is harder)."""
    for trace in traces:
        for hardware in hardwares:
            size = load_hw(hardware).scratchpad.size
            for budget in (size, size // 2):
                for pipeline in FAMILIES:
                    case_id = f"{trace}-{hardware}-{budget >> 10}K-{pipeline}"
                    slow = case_id in SLOW_IN_FAST or (slow_full_budget and budget == size)
                    marks = [pytest.mark.slow] if slow else []
                    yield pytest.param(trace, hardware, budget, pipeline, id=case_id, marks=marks)


@pytest.mark.parametrize("trace,hardware,budget,pipeline", list(cases(FAST_TRACES, ("edge-npu",), slow_full_budget=True)))
def test_fast_matrix(trace, hardware, budget, pipeline):
    outcome, kind = run_case(trace, hardware, budget, pipeline)
    assert (outcome, kind) == ("ok", "") or (outcome == "refused" and kind in REFUSALS)
    if pipeline in ("tile+default+arena+belady", "tile+zhong+arena+belady", "tile+greedy-mem+arena+belady",
                    "tile+rpo+arena+lru", "tile+olla-order+arena+belady", "tile+default+arena+belady+taa"):
        assert outcome == "ok"  # the arena spills: these always have a plan


SLOW = [c for c in cases(ALL_TRACES, ("edge-npu", "mid-npu"))
        if not (c.values[0] in FAST_TRACES and c.values[1] == "edge-npu")]


@pytest.mark.slow
@pytest.mark.parametrize("trace,hardware,budget,pipeline", SLOW)
def test_whole_matrix(trace, hardware, budget, pipeline):
    outcome, kind = run_case(trace, hardware, budget, pipeline)
    assert (outcome, kind) == ("ok", "") or (outcome == "refused" and kind in REFUSALS)
