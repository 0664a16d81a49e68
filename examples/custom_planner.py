"""A custom planner plugin in about 30 lines: a memory-aware greedy schedule.

A planner is an object with ``name``, ``stage``, ``description`` and ``run(ctx)``, and it
declares what it takes: ``options`` (``npusim.planner_options.Option`` values; none here) and
the context fields it ``reads`` and ``writes`` (docs/architecture.md); a schedule stage sets
``ctx.order``. This one is the classic greedy list schedule: among the
ops whose inputs are ready, run the one whose outputs are smallest (ties: definition
order), so big intermediates are produced as late as possible. The allocator and the
spill policy of the pipeline are the built-in ones.

In a package of your own, register it through the entry point npusim reads:

    # pyproject.toml
    [project.entry-points."npusim.planners"]
    smallest = "my_planners:register"

after which ``npusim simulate resnet50 --hw mid-npu --planner smallest-first+arena+belady``
finds it. Here we register it programmatically on a fresh registry instead.

Run: python examples/custom_planner.py
"""

import heapq

import planners  # the built-in planners, for the allocator and the spill policy
from npusim import Registry, load_graph, load_hw, make_plan, resolve_budget, simulate_plan, validate
from npusim.graph.analysis import peak_live_bytes, predecessors


class SmallestOutputFirst:
    name = "smallest-first"
    stage = "schedule"
    description = "greedy list schedule: the ready op with the smallest outputs runs next"
    options = ()
    reads = ("graph",)
    writes = ("order",)

    def run(self, ctx) -> None:
        graph = ctx.graph
        waiting = [len(set(p)) for p in predecessors(graph)]
        users = [[] for _ in graph.ops]
        for op, preds in enumerate(predecessors(graph)):
            for p in set(preds):
                users[p].append(op)
        out_bytes = [sum(graph.tensors[t].size for t in op.outputs) for op in graph.ops]
        ready = [(out_bytes[o], o) for o in range(graph.n_ops) if waiting[o] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, op = heapq.heappop(ready)
            order.append(op)
            for user in users[op]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    heapq.heappush(ready, (out_bytes[user], user))
        ctx.order = order


def register(registry) -> None:
    """The entry point: what ``my_planners:register`` would be."""
    registry.add(SmallestOutputFirst())


registry = Registry()
planners.register(registry)  # the built-ins, as their own entry point does
register(registry)

hw = load_hw("edge-npu")
print(f"{'trace':<14} {'pipeline':<30} {'peak live B':>12} {'budget B':>10} {'spill B':>10} {'cycles':>12}")
for trace in ("nasnetalarge", "resnet50"):
    graph = load_graph(trace)
    # The COSMA paper's tightest budget, M_R, is over edge-npu's 1 MiB for these models: model
    # a scratchpad of exactly that size (a larger budget than the hardware's is refused).
    budget = resolve_budget("MR", graph, hw, allow_oversize=True)
    sized = hw.with_scratchpad_size(budget)
    for pipeline in ("default+arena+belady", "smallest-first+arena+belady"):
        plan = make_plan(graph, sized, pipeline, budget=budget, registry=registry)
        assert validate(plan) == [], "every plan goes through the independent validator"
        report = simulate_plan(plan, sized, validated=True)
        peak = peak_live_bytes(graph, list(plan.order), hw.scratchpad.alignment)
        print(f"{trace:<14} {pipeline:<30} {peak:>12,} {budget:>10,} {report.offchip_bytes['spill']:>10,} "
              f"{report.cycles:>12,.0f}")
