"""COSMA: the ILP against exhaustive search, the schemes, M_P, timed-out status, DnC, the
greedy replacement; every plan validated and simulated."""

import heapq
import itertools
import math

import pytest

from npusim.errors import PlanningError
from npusim.graph.analysis import aligned
from npusim.hw.config import Hardware
from npusim.plan.validate import validate
from npusim.registry import ALIASES, default_registry, make_plan
from npusim.testing.random_dags import diamonds, nas_cell, random_dag, random_graphs
from npusim.workflow import memory_bounds, simulate_plan
from planners.joint.cosma.dnc import choose_cuts
from planners.joint.cosma.overlap import analyse, coexisting_pairs
from planners.joint.cosma.problem import whole_graph_part
from planners.spill.greedy_ilp import cheapest_window

HW = Hardware()
ALIGN = HW.scratchpad.alignment
SCHEMES = sorted(ALIASES)
SMALL_SIZES = (64, 128, 192)


def non_compulsory(plan) -> int:
    oc = plan.offchip_bytes()
    return oc["spill"] + oc["retrieve"]


def checked_plan(graph, pipeline, budget, **options):
    plan = make_plan(graph, HW, pipeline, budget=budget, options={"time_limit": 5, **options})
    assert validate(plan, graph) == [], pipeline
    simulate_plan(plan, HW, graph, validated=True)
    return plan


# -- exhaustive search ----------------------------------------------------------------------
def exhaustive_min_traffic(graph, capacity: int) -> int:
    """Fewest spill + retrieve bytes over every order, keep/evict choice and address.

    Dijkstra over states (ops done, resident tensors with offsets, tensors with a DRAM copy,
    inputs loaded once): the model of the paper, written independently of planners.joint. An
    op's inputs are kept or loaded when it runs (loads only then); an evicted tensor is
    stored first if DRAM has no copy and it is still needed, and then cannot be reloaded at
    the same step; tensors are freed after their last reader. Addresses are multiples of
    the gcd of the aligned sizes (placements can be rounded down to those without overlap)."""
    ids = [t.id for t in graph.tensors if t.producer is not None or t.consumers]
    size = {t: int(aligned(graph.tensors[t].size, ALIGN)) for t in ids}
    unit = math.gcd(*size.values())
    size = {t: s // unit for t, s in size.items()}
    cap = capacity // unit
    nbytes = {t: graph.tensors[t].size for t in ids}
    preds = [{graph.tensors[t].producer for t in op.inputs} - {None} for op in graph.ops]
    n = graph.n_ops

    def placements(fixed, new):
        if not new:
            yield ()
            return
        t = new[0]
        for off in range(cap - size[t] + 1):
            if all(off + size[t] <= o or o + size[u] <= off for u, o in fixed):
                for rest in placements(fixed + ((t, off),), new[1:]):
                    yield ((t, off),) + rest

    start = (0, frozenset(), frozenset(t for t in ids if graph.tensors[t].in_dram_initially), frozenset())
    best = {start: 0}
    heap = [(0, 0, start)]
    counter = itertools.count(1)
    while heap:
        cost, _, state = heapq.heappop(heap)
        done, resident, dram, loaded = state
        if best.get(state, float("inf")) < cost:
            continue
        if done == (1 << n) - 1:
            return cost
        for v in range(n):
            if done >> v & 1 or any(not done >> p & 1 for p in preds[v]):
                continue
            op = graph.ops[v]
            after = done | 1 << v
            needed_later = lambda t: any(not done >> c & 1 for c in graph.tensors[t].consumers)  # noqa: E731
            res = dict(resident)
            inputs = [t for t in dict.fromkeys(op.inputs) if t in size]
            options = []  # per resident tensor: (keep?, extra cost)
            for t in sorted(res):
                choices = [(True, 0)]
                if t in dram or not needed_later(t):
                    if t not in inputs or t in dram:
                        choices.append((False, 0))
                elif t not in inputs:
                    choices.append((False, nbytes[t]))  # spill
                options.append([(t, keep, c) for keep, c in choices])
            for combo in itertools.product(*options):
                kept = tuple((t, res[t]) for t, keep, _ in combo if keep)
                extra = sum(c for _, _, c in combo)
                new_dram = dram | {t for t, keep, c in combo if not keep and c}
                kept_ids = {t for t, _ in kept}
                new = [t for t in inputs if t not in kept_ids] + [t for t in op.outputs if t in size]
                load_cost = sum(nbytes[t] for t in inputs if t not in kept_ids
                                and not (graph.tensors[t].in_dram_initially and t not in loaded))
                new_loaded = loaded | {t for t in inputs if graph.tensors[t].in_dram_initially}
                out_dram = new_dram | {t for t in op.outputs if graph.tensors[t].kind == "output"}
                seen_layouts = set()
                for placed in placements(kept, new):
                    layout = kept + placed
                    survivors = frozenset((t, o) for t, o in layout
                                          if any(not after >> c & 1 for c in graph.tensors[t].consumers))
                    if survivors in seen_layouts:
                        continue
                    seen_layouts.add(survivors)
                    nxt = (after, survivors, frozenset(out_dram), frozenset(new_loaded))
                    c = cost + extra + load_cost
                    if c < best.get(nxt, float("inf")):
                        best[nxt] = c
                        heapq.heappush(heap, (c, next(counter), nxt))
    raise AssertionError("no plan found")


def _small_cases():
    from tests.helpers import chain_with_skip

    rd = lambda n, seed: random_dag(n, seed, sizes=SMALL_SIZES, weight_prob=0.3)  # noqa: E731
    return [(chain_with_skip(), "MR"), (chain_with_skip(), "MH"), (nas_cell(1, 2, seed=6, sizes=SMALL_SIZES), "MR"),
            (rd(6, 5), "MR"), (rd(6, 8), "MR"), (rd(6, 8), "MH"), (rd(7, 5), "MR"),
            (diamonds(1, 3, seed=5, sizes=SMALL_SIZES), "MR")]


SMALL = _small_cases()


@pytest.mark.parametrize("index", range(len(SMALL)))
def test_cosma_equals_exhaustive_search_on_small_dags(index):
    g, key = SMALL[index]
    assert g.n_ops <= 8
    bounds = memory_bounds(g, ALIGN)
    budget = bounds.m_r if key == "MR" else bounds.m_h
    plan = checked_plan(g, "cosma", budget)
    assert plan.meta.status == "optimal"
    assert non_compulsory(plan) == plan.meta.objective == exhaustive_min_traffic(g, budget), (g.name, budget)


@pytest.mark.parametrize("overlap", ["bigm", "nooverlap2d"])
def test_both_overlap_encodings_agree(overlap):
    g = random_dag(10, 7, weight_prob=0.3)
    budget = memory_bounds(g, ALIGN).m_r
    fs = checked_plan(g, "cosma-fs", budget, overlap=overlap)
    free = checked_plan(g, "cosma", budget, overlap=overlap)
    assert fs.meta.status == free.meta.status == "optimal"
    ref_fs = checked_plan(g, "cosma-fs", budget, overlap="nooverlap2d" if overlap == "bigm" else "bigm")
    assert fs.meta.objective == ref_fs.meta.objective
    assert free.meta.objective <= fs.meta.objective


CASES = random_graphs(6, max_ops=14, seed=11)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_cosma_beats_every_scheme_and_is_spill_free_at_mp(index):
    g = CASES[index]
    bounds = memory_bounds(g, ALIGN)
    for budget in (bounds.m_r, bounds.m_h):
        plan = checked_plan(g, "cosma", budget)
        if plan.meta.status == "optimal":
            for scheme in SCHEMES:
                assert non_compulsory(plan) <= non_compulsory(checked_plan(g, scheme, budget)), scheme
        fs = checked_plan(g, "default+cosma-fs", budget)
        assert non_compulsory(fs) <= non_compulsory(checked_plan(g, "scheme-default-greedy", budget))
    at_mp = checked_plan(g, "cosma", bounds.m_p)
    assert non_compulsory(at_mp) == 0


def test_every_variant_and_params_false_plan_validates():
    g = nas_cell(2, 3, seed=4)
    bounds = memory_bounds(g, ALIGN)
    for pipeline in ("cosma", "cosma-fs", "rpo+cosma-fs", "cosma-mpmf", "cosma-dnc"):
        plan = checked_plan(g, pipeline, bounds.m_h, part_ops=6)
        assert plan.meta.planner == pipeline
    from planners.joint.cosma.plan import weight_region

    plan = checked_plan(g, "cosma", bounds.m_r + weight_region(g, ALIGN), params="false")
    loads = [tr for tr in plan.transfers if g.tensors[tr.tensor].kind == "weight"]
    assert loads and all(tr.cause == "compulsory" for tr in loads)


def test_timed_out_cosma_reports_its_bound():
    g = nas_cell(4, 4, seed=2)
    budget = memory_bounds(g, ALIGN).m_r
    plan = make_plan(g, HW, "cosma", budget=budget, options={"time_limit": 0.05, "workers": 1})
    assert plan.meta.status == "timed_out"
    assert plan.meta.bound is not None and 0 <= plan.meta.bound <= plan.meta.objective
    assert non_compulsory(plan) == plan.meta.objective
    assert validate(plan, g) == []


def test_dnc_cuts_where_few_bytes_cross():
    cut = [0, 5, 5, 1, 5, 5, 5, 0, 5, 5, 5]
    assert choose_cuts(cut, 10, 4) == [3, 7, 10]  # the cheap cuts within 2..6 ops of the last
    g = nas_cell(6, 3, seed=1)
    bounds = memory_bounds(g, ALIGN)
    whole = checked_plan(g, "cosma", bounds.m_h, time_limit=10)
    dnc = checked_plan(g, "cosma-dnc", bounds.m_h, part_ops=8)
    # stitched parts are never 'optimal' unless they move no byte beyond the compulsory ones
    assert dnc.meta.status in ("feasible", "timed_out") or (dnc.meta.status == "optimal" and non_compulsory(dnc) == 0)
    assert non_compulsory(dnc) >= whole.meta.bound  # the single-shot bound holds for DnC too
    assert len(dnc.meta.stats["break_nodes"]) >= 2


def test_dnc_that_moves_no_extra_byte_is_optimal():
    """Stitched parts are a heuristic, but a plan with no spill or retrieve cannot be beaten:
    at the live-bytes peak of its order cosma-dnc says 'optimal' (it said 'feasible')."""
    g = nas_cell(6, 3, seed=1)
    bounds = memory_bounds(g, ALIGN)
    dnc = checked_plan(g, "cosma-dnc", bounds.m_p, part_ops=8)
    assert len(dnc.meta.stats["break_nodes"]) >= 2  # several parts
    assert non_compulsory(dnc) == 0 and dnc.meta.status == "optimal"


def test_overlap_analysis_prunes_pairs_by_precedence():
    g = random_dag(12, 3)
    part = whole_graph_part(g, 1 << 20, ALIGN)
    free = analyse(part)
    fixed = analyse(part, list(range(g.n_ops)), fixed=True)
    assert fixed.cells() <= free.cells()
    free_pairs, fixed_pairs = coexisting_pairs(part, free), coexisting_pairs(part, fixed)
    assert set(fixed_pairs) <= set(free_pairs)
    n = part.n_tensors
    assert len(free_pairs) < n * (n - 1) // 2


def test_cheapest_window_is_exact():
    blocks = [(0, 4, "a"), (4, 2, "b"), (6, 4, "c"), (12, 2, "d")]
    cost = {"a": 8, "b": 1, "c": 2, "d": 5}.get
    # 4 bytes: c alone (2) at 6 beats b+c (3) at 4, d (5) at 10 and a (8) at 0
    assert cheapest_window(blocks, 16, 4, cost, lambda o: True) == (6, ["c"])
    assert cheapest_window(blocks, 16, 4, cost, lambda o: o != "c") == (10, ["d"])
    assert cheapest_window(blocks, 16, 2, cost, lambda o: True) == (10, [])
    assert cheapest_window(blocks, 16, 17, cost, lambda o: True) is None


def test_greedy_ilp_policy_never_moves_more_than_belady_on_a_chain_with_a_skip():
    from tests.helpers import chain_with_skip

    g = chain_with_skip()
    budget = memory_bounds(g, ALIGN).m_r
    greedy = checked_plan(g, "scheme-default-greedy", budget)
    belady = checked_plan(g, "scheme-default-belady", budget)
    assert non_compulsory(greedy) <= non_compulsory(belady)


def test_schemes_are_named_pipelines_and_bad_options_are_clear():
    reg = default_registry()
    assert [p.name for p in reg.pipeline("scheme-mpmf-greedy")] == ["zhong", "greedy-ilp", "arena"]
    g = random_dag(6, 1)
    with pytest.raises(PlanningError, match="below M_R"):
        make_plan(g, HW, "cosma", budget=64)
    with pytest.raises(PlanningError, match="overlap"):
        make_plan(g, HW, "cosma", budget=1 << 20, options={"overlap": "sat"})
    with pytest.raises(PlanningError, match="params"):
        make_plan(g, HW, "cosma", budget=1 << 20, options={"params": "maybe"})
