"""``npusim.hw.costs.cost_signature``: the simulator computes an op's figures (cycles, scratchpad
bytes, register accesses, local-level energy, stream bands) once per signature, not once per
tile (``engine._Machine._cost_class``). That is exact only if ops with equal signatures have
equal figures: checked here on every op of tiled graphs on R x C arrays (os, ws, is), on an
unrolled array with local levels, split over several cores and with partial sums in the core."""

import dataclasses
from collections import defaultdict

import pytest

from npusim.graph.model import Gemm
from npusim.hw.costs import (cost_signature, cores_per_stream, level_energy, op_core_cycles, register_accesses,
                             scratchpad_bytes, stream_bands, tensor_figures)
from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget


def figures(op, graph, hw, cores):
    return (op_core_cycles(op, graph, hw, cores), scratchpad_bytes(op, graph, hw, cores),
            register_accesses(op, hw, cores), level_energy(op, graph, hw, cores), stream_bands(op, graph, hw, cores))


@pytest.mark.parametrize("trace, hw_name, budget, overrides", [
    ("resnet18", "edge-npu", "64KiB", {}),
    ("bert_tiny", "edge-npu", "128KiB", {}),
    ("mobilenet_v2", "tpu-like", "128KiB", {}),
    ("squeezenet1_0", "zigzag-tpu-like", "64KiB", {}),  # an unrolled array with local levels
    ("resnet18", "edge-npu", "128KiB", {"cores.count": "4"}),  # every op split over 4 cores
    ("llm:gpt2-small:decode=64", "edge-npu", "64KiB", {}),  # partial sums in the core, runs
])
def test_ops_with_one_signature_have_the_same_figures(trace, hw_name, budget, overrides):
    hw = load_hw(hw_name, overrides or None)
    graph = load_graph(trace)
    plan = plan_graph(graph, hw, budget=resolve_budget(budget, graph, hw))
    tiled = plan.bound_graph
    cores = cores_per_stream(hw, max(plan.streams) + 1)
    first = {}
    classes = defaultdict(int)
    read_once = tensor_figures(tiled)
    for op in tiled.ops:
        signature = cost_signature(op, tiled)
        assert cost_signature(op, tiled, read_once) == signature  # the simulator's way
        mine = figures(op, tiled, hw, cores)
        assert first.setdefault(signature, (op.name, mine))[1] == mine, (op.name, first[signature][0])
        classes[signature] += 1
    assert len(classes) < len(tiled.ops)  # the tiles of an op share a signature: the memo pays


def test_the_loop_nest_is_part_of_the_signature():
    """``Gemm`` compares without its loop nest; an unrolled array's cycles depend on it."""
    graph = load_graph("resnet18")
    conv = next(op for op in graph.ops if op.kind == "Conv" and op.gemm.loops is not None)
    other_loops = dataclasses.replace(conv.gemm.loops, fy=conv.gemm.loops.fy + 2)
    twin = dataclasses.replace(conv, gemm=Gemm(conv.gemm.m, conv.gemm.n, conv.gemm.k, conv.gemm.batch, other_loops))
    assert twin.gemm == conv.gemm
    assert cost_signature(twin, graph) != cost_signature(conv, graph)


@pytest.mark.parametrize("attrs", [{"epilogue": ["Relu"]}, {"marker": True}, {"acc": "core", "k_last": True},
                                   {"runs": {"b": "middle"}}])
def test_the_attributes_the_figures_read_are_part_of_the_signature(attrs):
    graph = load_graph("resnet18")
    conv = next(op for op in graph.ops if op.kind == "Conv")
    marked = dataclasses.replace(conv, attrs={**conv.attrs, **attrs})
    assert cost_signature(marked, graph) != cost_signature(conv, graph)


@pytest.mark.parametrize("trace, budget", [("resnet18", "64KiB"), ("llm:gpt2-small:decode=64", "64KiB")])
def test_cost_classes_group_the_ops_as_their_signatures_do(trace, budget):
    """``cost_classes`` (the simulator's: figures numbered, all ops at once) puts two ops in one
    class exactly when their ``cost_signature``s are equal, classes numbered by first op."""
    from npusim.hw.costs import cost_classes

    hw = load_hw("edge-npu")
    graph = load_graph(trace)
    tiled = plan_graph(graph, hw, budget=resolve_budget(budget, graph, hw)).bound_graph
    class_of, first = cost_classes(tiled)
    numbers = {}
    assert class_of == [numbers.setdefault(cost_signature(op, tiled), len(numbers)) for op in tiled.ops]
    assert first == [class_of.index(k) for k in range(len(numbers))]
