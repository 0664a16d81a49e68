"""Zhong et al.: fusion preserves the optimal peak (property test vs the DP), the ILP with and
without pruning equals the DP, partitioning gives valid orders, the planner composes."""

import pytest

from npusim.graph.random_dags import chain, random_graphs
from npusim.hw.config import Hardware
from npusim.plan.validate import validate
from npusim.registry import make_plan
from npusim.workflow import load_graph
from planners.schedule.dp import min_peak_schedule
from planners.schedule.greedy import best_heuristic_order
from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import SolverOptions
from planners.schedule.zhong.fusion import check_region, fuse
from planners.schedule.zhong.ilp import solve_schedule_ilp
from planners.schedule.zhong.partition import make_acyclic, metis_parts, partition_schedule

from helpers import tensor
from npusim.graph.model import build_graph

FUSION_CASES = random_graphs(50, max_ops=18, seed=2024)


@pytest.mark.parametrize("index", range(len(FUSION_CASES)))
def test_fusion_never_changes_the_optimal_peak(index):
    g = FUSION_CASES[index]
    p = MemoryProblem.from_graph(g, 1)
    optimum = min_peak_schedule(p, max_states=300_000)
    fused = fuse(p, max_region=8).problem
    assert fused.n <= p.n
    on_fused = min_peak_schedule(fused, max_states=300_000)
    assert on_fused.peak == optimum.peak
    # the fused order, expanded, costs on the original graph exactly what it costs fused
    assert p.peak(fused.expand(on_fused.order)) == on_fused.peak
    assert sorted(fused.expand(on_fused.order)) == list(range(p.n))


def test_valley_chain_is_not_fused_but_a_hill_is():
    """x(100) -A-> a(10) -B-> b(100): a valley (stop at a, run something else) is not safe to
    fuse; x(10) -A-> a(100) -B-> b(10) is a hill: Theorem IV.2 fuses it."""
    def two_ops(xs, as_, bs):
        ts = [tensor("x", xs, "input"), tensor("a", as_), tensor("b", bs), tensor("y", 1, "output")]
        ops = [dict(name="P", kind="Relu", inputs=["x"], outputs=["a"]),
               dict(name="A", kind="Relu", inputs=["a"], outputs=["b"]),
               dict(name="B", kind="Relu", inputs=["b"], outputs=["y"])]
        return MemoryProblem.from_graph(build_graph("c", ts, ops), 1)
    hill = two_ops(10, 10, 100)   # a(10) -> b(100) -> y(1): region {A, B} from buffer a
    valley = two_ops(10, 100, 5)  # a(100) -> b(5) -> y(1): falls then... monotone: IV.1
    region = check_region(hill, [1, 2], 0, 2)
    assert region is not None and region.theorem == "IV.2"
    assert check_region(valley, [1, 2], 0, 2).theorem == "IV.1"
    ts = [tensor("x", 10, "input"), tensor("a", 100), tensor("b", 5), tensor("c", 100), tensor("y", 1, "output")]
    ops = [dict(name="P", kind="Relu", inputs=["x"], outputs=["a"]),
           dict(name="A", kind="Relu", inputs=["a"], outputs=["b"]),
           dict(name="B", kind="Relu", inputs=["b"], outputs=["c"]),
           dict(name="C", kind="Relu", inputs=["c"], outputs=["y"])]
    p = MemoryProblem.from_graph(build_graph("v", ts, ops), 1)
    assert check_region(p, [1, 2], 0, 2) is None  # a(100) -> b(5) -> c(100): a valley


def test_fusion_shrinks_a_chain_to_one_node_when_sizes_rise():
    ts = [tensor("x", 1, "input")] + [tensor(f"t{i}", 10 * (i + 1)) for i in range(6)]
    ts[-1]["kind"] = "output"
    ops = [dict(name=f"o{i}", kind="Relu", inputs=["x" if i == 0 else f"t{i - 1}"], outputs=[f"t{i}"])
           for i in range(6)]
    p = MemoryProblem.from_graph(build_graph("rise", ts, ops), 1)
    fused = fuse(p).problem
    # o0 reads only the graph input (folded into its extra bytes): regions grow from buffers,
    # so o0 stays alone and o1..o5 become one node
    assert fused.n == 2 and fused.members[1] == (1, 2, 3, 4, 5)


@pytest.mark.parametrize("index", range(0, 50, 5))
def test_ilp_with_and_without_pruning_equals_dp(index):
    g = FUSION_CASES[index]
    p = MemoryProblem.from_graph(g, 64)
    hint, _ = best_heuristic_order(p)
    optimum = min_peak_schedule(p, max_states=300_000).peak
    opts = SolverOptions(time_limit=20, workers=2)
    pruned, full = solve_schedule_ilp(p, hint, opts), solve_schedule_ilp(p, hint, opts, prune=False)
    assert pruned.status == full.status == "optimal"
    assert pruned.peak == full.peak == optimum == pruned.bound
    assert pruned.variables <= full.variables


def test_ilp_time_out_is_not_labelled_optimal():
    g = load_graph("nasnetalarge")
    p = MemoryProblem.from_graph(g, 64)
    nodes = list(range(150))
    sub = p.region(nodes)
    hint, _ = best_heuristic_order(sub)
    result = solve_schedule_ilp(sub, hint, SolverOptions(time_limit=0.3, workers=2))
    assert result.status == "timed_out"
    assert result.bound <= result.peak <= sub.peak(hint)
    assert sub.is_topological(result.order)


def test_partitioning_gives_acyclic_parts_and_a_valid_order():
    p = MemoryProblem.from_graph(load_graph("hrnet_w18_small"), 64)
    fused = fuse(p).problem
    groups = make_acyclic(fused, metis_parts(fused, 4))
    assert sorted(v for g in groups for v in g) == list(range(fused.n))
    rank = {v: i for i, g in enumerate(groups) for v in g}
    assert all(rank[u] <= rank[v] for v, preds in enumerate(fused.predecessors()) for u in preds)
    result = partition_schedule(fused, 4, SolverOptions(time_limit=20))
    assert fused.is_topological(result.order)
    assert result.solved_parts >= 1
    assert result.peak == fused.peak(result.order)


@pytest.mark.parametrize("trace", ["resnet50", "hrnet_w18_small"])
def test_zhong_pipeline_on_traces(trace):
    g = load_graph(trace)
    plan = make_plan(g, Hardware(), "zhong+arena+belady", budget=16 << 20, options={"time_limit": 20})
    assert validate(plan, g) == []
    rpo = make_plan(g, Hardware(), "rpo+arena+belady", budget=16 << 20)
    from npusim.graph.analysis import peak_live_bytes
    assert peak_live_bytes(g, list(plan.order), 64) <= peak_live_bytes(g, list(rpo.order), 64)
    assert plan.meta.bound is not None


def test_zhong_on_a_chain_is_optimal():
    g = chain(40, seed=1)
    plan = make_plan(g, Hardware(), "zhong+arena", budget=1 << 20)
    assert plan.meta.status == "optimal"
