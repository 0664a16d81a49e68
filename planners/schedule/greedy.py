"""A fast memory-aware list scheduler, for graphs too large for the exact ones.

At every step it runs, among the ready nodes, the one that leaves the fewest bytes live after
it ("frees the most bytes net": outputs made minus inputs released); ties go to the smaller
footprint of the step itself, then to the smaller node id, so the result is deterministic.
A second rule (smallest step footprint first) is tried too and the lower peak kept. Cost:
O(n · ready-set · degree), milliseconds on every trace.

``best_heuristic_order`` is the warm start of the exact planners: the best of the definition
order, reverse post-order and the greedy rules.
"""

from __future__ import annotations

from planners.schedule.op_level import op_graph, set_order
from planners.schedule.problem import MemoryProblem
from npusim.graph.analysis import dfs_reverse_post_order

RULES = ("net_freed", "smallest_step")


def greedy_order(problem: MemoryProblem, rule: str = "net_freed") -> list[int]:
    p = problem
    n = p.n
    preds = p.predecessors()
    succ = p.successors()
    missing = [len(x) for x in preds]
    remaining_consumers = [len(c) for c in p.consumers]
    started = [p.live_at_start[b] for b in range(p.n_buffers)]
    ready = {v for v in range(n) if missing[v] == 0}
    live = sum(s for s, on in zip(p.sizes, p.live_at_start) if on)
    order = []
    while ready:
        best_key, best_v = None, -1
        for v in ready:
            new = sum(p.sizes[b] for b in p.node_inputs[v] if p.producer[b] < 0 and not started[b])
            out = sum(p.sizes[b] for b in p.node_outputs[v])
            step = live + new + out + p.extra[v]
            freed = sum(p.sizes[b] for b in p.node_inputs[v]
                        if remaining_consumers[b] == 1 and not p.live_at_end[b])
            freed += sum(p.sizes[b] for b in p.node_outputs[v] if not p.consumers[b] and not p.live_at_end[b])
            after = step - p.extra[v] - freed
            key = (after - live, step, v) if rule == "net_freed" else (step, after - live, v)
            if best_key is None or key < best_key:
                best_key, best_v, best_after = key, v, after
        v = best_v
        ready.remove(v)
        order.append(v)
        live = best_after
        for b in p.node_inputs[v]:
            started[b] = True
            remaining_consumers[b] -= 1
        for s in succ[v]:
            missing[s] -= 1
            if missing[s] == 0:
                ready.add(s)
    return order


def reverse_post_order(problem: MemoryProblem) -> list[int]:
    """Reverse post-order of a DFS from the source nodes (as npusim.graph.analysis does)."""
    return dfs_reverse_post_order(problem.successors(), problem.predecessors())


def best_heuristic_order(problem: MemoryProblem) -> tuple[list[int], int]:
    """(order, peak): the best of topological (definition), RPO and the greedy rules."""
    candidates = [problem.topological_order(), reverse_post_order(problem)]
    if problem.is_topological(list(range(problem.n))):
        candidates.insert(0, list(range(problem.n)))  # the definition order
    candidates += [greedy_order(problem, rule) for rule in RULES]
    best = min(candidates, key=problem.peak)  # first of equals: deterministic
    return best, problem.peak(best)


class GreedyMemory:
    name = "greedy-mem"
    stage = "schedule"
    description = "memory-aware list scheduler: run the ready op that frees the most bytes net"
    reads = ("graph", "untiled", "alignment")
    writes = ("order",)

    def run(self, ctx) -> None:
        problem = MemoryProblem.from_graph(op_graph(ctx), ctx.alignment)
        orders = [greedy_order(problem, rule) for rule in RULES]
        set_order(ctx, problem.expand(min(orders, key=problem.peak)))
