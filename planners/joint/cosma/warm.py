"""COSMA's warm start: a feasible solution of a part for a given order, built online.

It walks the order like the ``arena`` allocator (best-fit placement; when a block does not
fit, evict the cheapest contiguous window, ``greedy_ilp.cheapest_window``, or Belady's
furthest-next-use order) but records the solution in the ILP's terms (``Actions``), so it can
hint CP-SAT and is a valid answer if the solver finds nothing better. It follows the model's
rules — loads only where a reader runs, spills right before the step that needs the room,
tensors freed after their last reader — so the hint is feasible for the model except when an
op's own inputs fragment memory (then they are moved through DRAM, which (1) forbids).
"""

from __future__ import annotations

import bisect

from npusim.errors import InternalError, PlanningError
from planners.joint.cosma.model import Actions
from planners.joint.cosma.problem import COMPULSORY, MAKE, RESIDENT, CosmaPart
from planners.spill.greedy_ilp import cheapest_window

RULES = ("greedy", "belady")


def warm_start(part: CosmaPart, order: list[int], rule: str = "greedy") -> Actions:
    n, cap = part.steps, part.capacity
    pos = {v: s for s, v in enumerate(order)}
    uses = [sorted(pos[c] for c in part.consumers[a]) for a in range(part.n_tensors)]
    actions = Actions(order=list(order))
    where: dict[int, int] = {}  # resident tensor -> offset (units)
    stored = {a for a in range(part.n_tensors) if part.in_dram[a]}
    loaded = set()
    for a in range(part.n_tensors):
        if part.entry[a] == RESIDENT:
            where[a] = part.entry_offset[a]

    def next_use(a: int, t: int) -> float:
        i = bisect.bisect_left(uses[a], t)
        if i < len(uses[a]):
            return uses[a][i]
        return n if part.needed_after[a] else float("inf")

    def evict(a: int, t: int) -> None:
        if a not in stored and next_use(a, t) != float("inf"):
            actions.spills.add((a, t))
            stored.add(a)
        del where[a]

    def find(size: int) -> int | None:  # best fit among the gaps
        best, best_gap, cursor = None, None, 0
        for off, a in sorted((o, a) for a, o in where.items()) + [(cap, -1)]:
            gap = off - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            if a >= 0:
                cursor = max(cursor, off + part.size[a])
        return best

    def make_room(a: int, pinned: set, t: int) -> int | None:
        off = find(part.size[a])
        if off is not None:
            return off
        if rule == "greedy":
            cost = lambda b: ((0 if b in stored or next_use(b, t) == float("inf") else part.nbytes[b])  # noqa: E731
                              + (part.nbytes[b] if next_use(b, t) != float("inf") else 0))
            found = cheapest_window([(o, part.size[b], b) for b, o in where.items()], cap, part.size[a], cost,
                                    lambda b: b not in pinned, lambda b: next_use(b, t))
            if found is None:
                return None
            for b in found[1]:
                evict(b, t)
            return find(part.size[a])
        for b in sorted((b for b in where if b not in pinned), key=lambda b: (-next_use(b, t), -part.size[b], b)):
            evict(b, t)
            off = find(part.size[a])
            if off is not None:
                return off
        return None

    for t, v in enumerate(order):
        needed = list(dict.fromkeys(part.op_inputs[v] + part.op_outputs[v]))
        pinned = set(needed)
        present = {a for a in needed if a in where}
        for a in needed:
            if a in present:
                continue
            off = make_room(a, pinned, t)
            if off is None:  # the op's own resident inputs fragment memory: move them through DRAM
                for b in list(where):
                    evict(b, t)
                present.clear()
                where.clear()
                for b in needed:
                    off_b = find(part.size[b])
                    if off_b is None:
                        raise PlanningError(f"cosma: op {part.ops[v]} does not fit the budget on its own")
                    where[b] = off_b
                break
            where[a] = off
        for a in needed:
            if a in present:
                actions.cells[a, t] = ("P", where[a])
            elif a in part.op_outputs[v]:
                actions.cells[a, t] = ("C", where[a])
            elif part.entry[a] == COMPULSORY and a not in loaded:
                actions.cells[a, t] = ("C", where[a])
            else:
                actions.cells[a, t] = ("R", where[a])
            if part.entry[a] == COMPULSORY:
                loaded.add(a)
        for a, off in where.items():  # kept from the previous step
            if (a, t) not in actions.cells:
                actions.cells[a, t] = ("P", off)
        for a in list(where):  # free what no later step reads
            if next_use(a, t + 1) == float("inf"):
                del where[a]
    for (a, t), (act, _) in list(actions.cells.items()):
        if act == "C" and part.entry[a] == MAKE and part.producer[a] != order[t]:
            raise InternalError("warm start created a tensor away from its producer")
    return actions


def best_warm_start(part: CosmaPart, orders: list[list[int]]) -> Actions:
    """The cheapest warm start over the given orders and both eviction rules."""
    best = None
    for order in orders:
        for rule in RULES:
            cand = warm_start(part, order, rule)
            if best is None or cand.traffic(part) < best.traffic(part):
                best = cand
    return best
