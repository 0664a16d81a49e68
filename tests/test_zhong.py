"""Zhong et al.: fusion preserves the optimal peak (property test vs the DP), the ILP with and
without pruning equals the DP, partitioning gives valid orders, the planner composes."""

import pytest

from npusim.hw.config import Hardware
from npusim.plan.validate import validate
from npusim.registry import make_plan
from npusim.testing.random_dags import chain, random_graphs
from npusim.workflow import load_graph
from planners.schedule.dp import min_peak_schedule
from planners.schedule.greedy import best_heuristic_order
from planners.schedule.problem import MemoryProblem
from planners.schedule.solver import SolverOptions
from planners.schedule.zhong.fusion import check_region, fuse
from planners.schedule.zhong.ilp import solve_schedule_ilp
from planners.schedule.zhong.partition import make_acyclic, metis_parts, partition_schedule

from helpers import random_memory_problem, tensor
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
    # o0 reads only the graph input (folded into its extra bytes): regions grow from buffers,
    # so the paper's isolated regions leave o0 alone and make o1..o5 one node; the monotonic
    # (rising) edge o0 -> {o1..o5} then fuses it too
    regions_only = fuse(p, edges=False).problem
    assert regions_only.n == 2 and regions_only.members[1] == (1, 2, 3, 4, 5)
    fused = fuse(p).problem
    assert fused.n == 1 and fused.members[0] == (0, 1, 2, 3, 4, 5)
    assert fused.extra[0] + fused.sizes[0] == p.peak(list(range(6)))


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


def test_fusion_never_changes_the_optimal_peak_on_odd_problems():
    import random

    rng = random.Random(5)
    shrunk = 0
    for _ in range(150):
        p = random_memory_problem(rng, rng.randint(3, 12))
        optimum = min_peak_schedule(p).peak
        fused = fuse(p, max_region=8).problem
        on_fused = min_peak_schedule(fused)
        order = fused.expand(on_fused.order)
        assert on_fused.peak == optimum
        assert p.is_topological(order) and p.peak(order) == on_fused.peak
        shrunk += fused.n < p.n
    assert shrunk >= 30  # the test exercises fusion, not only graphs nothing fuses in


def _chain(sizes, extras=None):
    """x -> op0 -> t0 -> op1 -> t1 ...: op i writes sizes[i]; weights as extra bytes."""
    ts = [tensor("x", 4, "input")] + [tensor(f"t{i}", s) for i, s in enumerate(sizes)]
    ts[-1]["kind"] = "output"
    ops = [dict(name=f"o{i}", kind="Relu", inputs=["x" if i == 0 else f"t{i - 1}"], outputs=[f"t{i}"])
           for i in range(len(sizes))]
    for i, e in enumerate(extras or []):
        if e:
            ts.append(tensor(f"w{i}", e, "weight"))
            ops[i]["inputs"].append(f"w{i}")
    return MemoryProblem.from_graph(build_graph("c", ts, ops), 1)


def test_monotonic_edges_fuse_and_valleys_do_not():
    from planners.schedule.zhong.fusion import check_edge

    falling = _chain([4, 100, 50])  # o1 -> o2: 100 -> 50, o2's step (150) below o1's (104 + 100)
    region = check_edge(falling, 1, 2)
    assert region is not None and region.nodes == (1, 2)
    # the graph input is folded into o0 (one reader), so buffers are t0, t1, t2
    assert region.extra + falling.sizes[0] + falling.sizes[2] == max(falling.profile([0, 1, 2])[1:])
    rising = _chain([4, 10, 50])  # o1 -> o2: 4 -> 10 -> 50, the last step the largest
    assert check_edge(rising, 1, 2) is not None
    valley = _chain([4, 100, 5, 100])  # o2 -> o3: 100 -> 5 -> 100 is a valley either way
    assert check_edge(valley, 2, 3) is None
    heavy = _chain([4, 100, 50], extras=[0, 0, 500])  # o2's weight makes its step the largest: not
    region = check_edge(heavy, 1, 2)  # falling, but rising (4 <= 100, o1's step below o2's)
    assert region is not None
    assert region.extra + heavy.sizes[0] + heavy.sizes[2] == max(heavy.profile([0, 1, 2])[1:])


def test_edge_with_a_shared_input_is_not_fused_rising():
    """u reads x, which another op reads too: whether x is still live when v runs depends on
    the rest of the order, so one hyper-node cannot cost it exactly and the edge stays."""
    from planners.schedule.zhong.fusion import check_edge

    ts = [tensor("i", 4, "input"), tensor("x", 10), tensor("a", 20), tensor("b", 40), tensor("c", 4),
          tensor("y", 1, "output")]
    ops = [dict(name="P", kind="Relu", inputs=["i"], outputs=["x"]),
           dict(name="U", kind="Relu", inputs=["x"], outputs=["a"]),
           dict(name="V", kind="Relu", inputs=["a"], outputs=["b"]),
           dict(name="W", kind="Relu", inputs=["x"], outputs=["c"]),
           dict(name="J", kind="Add", inputs=["b", "c"], outputs=["y"])]
    p = MemoryProblem.from_graph(build_graph("s", ts, ops), 1)
    assert check_edge(p, 1, 2) is None
    assert min_peak_schedule(fuse(p).problem).peak == min_peak_schedule(p).peak


def test_timed_out_budget_returns_the_warm_start_marked_timed_out():
    from planners.schedule.zhong.budget import Budget

    p = MemoryProblem.from_graph(load_graph("hrnet_w18_small"), 64)
    sub = p.region(list(range(40)))
    hint, peak = best_heuristic_order(sub)
    opts = SolverOptions(time_limit=1, deterministic=False)
    budget = Budget(opts, start=0.0)  # started long ago: nothing is left
    result = solve_schedule_ilp(sub, hint, opts, budget=budget)
    assert result.status == "timed_out" and result.order == hint and result.peak == peak
    assert result.bound <= result.peak


def test_zhong_time_limit_covers_the_whole_call_and_is_never_optimal_when_it_binds():
    from planners.schedule.greedy import reverse_post_order
    from planners.schedule.zhong.planner import zhong_schedule

    p = MemoryProblem.from_graph(load_graph("nasnetalarge"), 64)
    out = zhong_schedule(p, {"time_limit": 0.05, "deterministic": False})
    assert out["status"] == "timed_out"
    assert p.is_topological(out["order"]) and out["peak"] == p.peak(out["order"])
    assert out["peak"] <= p.peak(reverse_post_order(p))


def test_metis_call_uses_the_current_pymetis_api():
    import warnings

    p = MemoryProblem.from_graph(load_graph("hrnet_w18_small"), 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        parts = metis_parts(p, 3)
    assert len(parts) == p.n and len(set(parts)) == 3


@pytest.mark.parametrize("index", range(1, 50, 7))
def test_ilp_floor_stops_at_the_bound_and_never_goes_above_the_optimum(index):
    p = MemoryProblem.from_graph(FUSION_CASES[index], 64)
    hint, hint_peak = best_heuristic_order(p)
    optimum = min_peak_schedule(p, max_states=300_000).peak
    opts = SolverOptions(time_limit=20, workers=2)
    at_optimum = solve_schedule_ilp(p, hint, opts, floor=optimum)
    assert at_optimum.status == "optimal" and at_optimum.peak == optimum
    # a floor at the hint's peak: the hint is returned at once, as good as it gets
    at_hint = solve_schedule_ilp(p, hint, opts, floor=hint_peak)
    assert at_hint.order == hint and at_hint.status == "optimal" and at_hint.variables == 0


def test_partitioning_asks_prove_once_and_stops_at_its_bound():
    p = MemoryProblem.from_graph(load_graph("hrnet_w18_small"), 64)
    fused = fuse(p).problem
    asked = []

    def prove(order):
        asked.append(list(order))
        return fused.peak(order)  # claims the first order optimal: the work must end there

    result = partition_schedule(fused, 4, SolverOptions(time_limit=20), prove=prove)
    assert len(asked) == 1 and result.order == asked[0] and result.bound == result.peak
    # a bound that proves nothing: the peak's part is solved again with the rest of the time
    again = partition_schedule(fused, 4, SolverOptions(time_limit=20), prove=lambda order: 0)
    assert again.solved_parts >= 1 and again.bound == 0 and again.peak <= result.peak


def test_budget_slice_is_charged_back():
    from planners.schedule.zhong.budget import Budget

    parent = Budget(SolverOptions(time_limit=10))
    part = parent.slice(2.0)
    assert part.remaining() <= 2.0
    part.charge(1.5)
    parent.charge(part.deterministic_used)
    assert parent.remaining() == pytest.approx(8.5)
    assert parent.slice(100).remaining() <= 8.5
