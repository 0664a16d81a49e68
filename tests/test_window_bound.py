"""Window lower bounds on the minimum peak (planners.schedule.window_bound)."""

import random

import pytest

from npusim.testing.random_dags import random_graphs
from npusim.workflow import load_graph
from planners.schedule.dp import DPLimitError, min_peak_schedule
from planners.schedule.greedy import best_heuristic_order, reverse_post_order
from planners.schedule.problem import MemoryProblem
from planners.schedule.window_bound import relaxed_problem, window_lower_bound, window_peak
from planners.schedule.zhong.planner import zhong_schedule

from helpers import random_memory_problem


def _problems():
    rng = random.Random(11)
    yield from (MemoryProblem.from_graph(g, 1) for g in random_graphs(25, max_ops=14, seed=7))
    yield from (random_memory_problem(rng, rng.randint(3, 12)) for _ in range(60))


PROBLEMS = list(_problems())


@pytest.mark.parametrize("index", range(len(PROBLEMS)))
def test_every_window_bounds_the_optimum_and_the_whole_graph_is_exact(index):
    """Any node set (intervals of an order, and arbitrary subsets, which lose precedences
    and so relax further) gives at most the DP's optimum of the whole problem; the whole
    node set gives exactly it."""
    p = PROBLEMS[index]
    optimum = min_peak_schedule(p).peak
    rng = random.Random(index)
    order = p.topological_order()
    windows = [tuple(range(p.n))]
    for _ in range(6):
        a = rng.randrange(p.n)
        windows.append(tuple(order[a:rng.randint(a + 1, p.n)]))
        windows.append(tuple(sorted(rng.sample(range(p.n), rng.randint(1, p.n)))))
    for window in windows:
        value, how = window_peak(p, window)
        assert how == "dp" and value <= optimum, (window, value, optimum)
    assert window_peak(p, tuple(range(p.n))) == (optimum, "dp")


def test_relaxed_problem_keeps_a_buffer_live_across_a_window_it_passes_through():
    """x feeds a long branch and a final join: in a window of the branch's middle, x is not
    touched but every order must hold it there (made before, read after)."""
    from helpers import tensor
    from npusim.graph.model import build_graph

    tensors = [tensor("in", 10, "input"), tensor("x", 100)] + [tensor(f"b{i}", 10) for i in range(5)] + [
        tensor("y", 10, "output")]
    ops = [dict(name="X", kind="Relu", inputs=["in"], outputs=["x"], vector_ops=1)]
    ops += [dict(name=f"B{i}", kind="Relu", inputs=["in" if i == 0 else f"b{i - 1}"], outputs=[f"b{i}"],
                 vector_ops=1) for i in range(5)]
    ops += [dict(name="J", kind="Add", inputs=["x", "b4"], outputs=["y"], vector_ops=1)]
    p = MemoryProblem.from_graph(build_graph("pass", tensors, ops), 1)
    names = list(p.names)
    window = (names.index("B2"),)
    relaxed = relaxed_problem(p, window)
    assert 100 not in relaxed.sizes  # x may not exist yet when B2 runs (X is not its ancestor)
    # once X is an ancestor of every window node, x must be counted
    ops[1]["inputs"] = ["x"]
    p = MemoryProblem.from_graph(build_graph("pass", tensors, ops), 1)
    relaxed = relaxed_problem(p, (list(p.names).index("B2"),))
    assert 100 in relaxed.sizes
    assert window_peak(p, (list(p.names).index("B2"),))[0] >= 100 + 10 + 10


@pytest.mark.parametrize("trace", ["hrnet_w18_small", "transformer"])
def test_window_bound_proves_zhong_optimal_on_traces(trace):
    """The working-set bound is below the optimum on both; a window around the peak of
    Zhong's order meets its peak, so ``zhong`` reports the order optimal."""
    p = MemoryProblem.from_graph(load_graph(trace), 64)
    out = zhong_schedule(p, {"time_limit": 20})
    assert p.lower_bound() < out["peak"]
    bound = window_lower_bound(p, out["order"])
    assert bound.value == out["peak"] and bound.window
    assert out["status"] == "optimal" and out["bound"] == out["peak"]
    # the bound is a bound: no heuristic order goes below it
    assert p.peak(reverse_post_order(p)) >= bound.value
    assert best_heuristic_order(p)[1] >= bound.value


def test_window_bound_stops_at_its_state_limit_with_a_valid_bound():
    p = MemoryProblem.from_graph(load_graph("hrnet_w18_small"), 64)
    order = reverse_post_order(p)
    small = window_lower_bound(p, order, max_states=1)
    assert small.value == p.lower_bound() and small.windows_tried == 0
    assert window_lower_bound(p, order, max_states=20_000).value >= small.value


def test_a_passed_deadline_stops_the_dp_and_leaves_the_working_set_bound():
    from planners.schedule.dp import DPLimitError

    p = PROBLEMS[0]
    with pytest.raises(DPLimitError, match="out of time"):
        min_peak_schedule(p, deadline=0.0)
    bound = window_lower_bound(p, p.topological_order(), deadline=0.0)
    assert bound.value == p.lower_bound() and bound.windows_tried == 0


@pytest.mark.parametrize("index", range(25, 85, 4))
def test_the_ilp_gives_the_dp_s_window_value_when_the_dp_may_not(index):
    """With no DP states allowed, Zhong's ILP solves the relaxed window: the same minimum
    peak as the DP (so its model matches the relaxed problems' semantics: buffers without
    a producer, live at the start or at the end)."""
    from planners.schedule.solver import SolverOptions
    from planners.schedule.zhong.budget import Budget

    p = PROBLEMS[index]
    rng = random.Random(index)
    order = p.topological_order()
    a = rng.randrange(p.n)
    for window in (tuple(range(p.n)), tuple(order[a:rng.randint(a + 1, p.n)])):
        exact = window_peak(p, window)[0]
        budget = Budget(SolverOptions(time_limit=20, workers=2))
        assert window_peak(p, window, max_states=1, ilp_budget=budget) == (exact, "ilp")
    with pytest.raises(DPLimitError):
        window_peak(p, tuple(range(p.n)), max_states=1)  # no ILP allowed


def test_windows_too_wide_for_the_dp_go_to_the_ilp():
    from planners.schedule.solver import SolverOptions

    p = MemoryProblem.from_graph(load_graph("hrnet_w18_small"), 64)
    out = zhong_schedule(p, {"time_limit": 20})
    dp_only = window_lower_bound(p, out["order"], max_states=50)
    with_ilp = window_lower_bound(p, out["order"], max_states=50, ilp=SolverOptions(time_limit=20, workers=2))
    assert dp_only.value < out["peak"] == with_ilp.value


def test_zhong_returns_a_warm_start_proven_optimal_without_any_ilp():
    """transformer's training graph: the best heuristic order is already optimal, and a quick
    DP-only window shows it, so no ILP runs (it took a minute to build and time out)."""
    from npusim.graph.training import make_training_graph

    p = MemoryProblem.from_graph(make_training_graph(load_graph("transformer")), 64)
    order, peak = best_heuristic_order(p)
    out = zhong_schedule(p, {"time_limit": 60})
    assert out["status"] == "optimal" and out["stats"]["variables"] == 0
    assert out["peak"] == peak == out["bound"] and p.is_topological(out["order"])
    assert window_lower_bound(p, order, max_states=20_000).value == peak
