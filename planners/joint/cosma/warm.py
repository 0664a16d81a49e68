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


class _WarmStart:
    """The state of one walk: where each resident tensor sits (``where``: tensor -> offset in
    units), which tensors have a copy in DRAM (``stored``) and which compulsory ones were
    loaded, and the ``Actions`` recorded so far."""

    def __init__(self, part: CosmaPart, order: list[int], rule: str):
        self.part, self.order, self.rule = part, order, rule
        pos = {v: s for s, v in enumerate(order)}
        self.uses = [sorted(pos[c] for c in part.consumers[a]) for a in range(part.n_tensors)]
        self.actions = Actions(order=list(order))
        self.where: dict[int, int] = {}  # resident tensor -> offset (units)
        self.stored = {a for a in range(part.n_tensors) if part.in_dram[a]}
        self.loaded = set()
        for a in range(part.n_tensors):
            if part.entry[a] == RESIDENT:
                self.where[a] = part.entry_offset[a]

    def next_use(self, a: int, t: int) -> float:
        i = bisect.bisect_left(self.uses[a], t)
        if i < len(self.uses[a]):
            return self.uses[a][i]
        return self.part.steps if self.part.needed_after[a] else float("inf")

    def evict(self, a: int, t: int) -> None:
        if a not in self.stored and self.next_use(a, t) != float("inf"):
            self.actions.spills.add((a, t))
            self.stored.add(a)
        del self.where[a]

    def find(self, size: int) -> int | None:
        """Best fit among the gaps."""
        best, best_gap, cursor = None, None, 0
        for off, a in sorted((o, a) for a, o in self.where.items()) + [(self.part.capacity, -1)]:
            gap = off - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            if a >= 0:
                cursor = max(cursor, off + self.part.size[a])
        return best

    def make_room(self, a: int, pinned: set, t: int) -> int | None:
        """An offset for ``a`` at step t, evicting unpinned tensors by the rule if needed."""
        part = self.part
        off = self.find(part.size[a])
        if off is not None:
            return off
        if self.rule == "greedy":
            next_use, stored = self.next_use, self.stored
            cost = lambda b: ((0 if b in stored or next_use(b, t) == float("inf") else part.nbytes[b])  # noqa: E731
                              + (part.nbytes[b] if next_use(b, t) != float("inf") else 0))
            found = cheapest_window([(o, part.size[b], b) for b, o in self.where.items()], part.capacity,
                                    part.size[a], cost, lambda b: b not in pinned, lambda b: next_use(b, t))
            if found is None:
                return None
            for b in found[1]:
                self.evict(b, t)
            return self.find(part.size[a])
        for b in sorted((b for b in self.where if b not in pinned),
                        key=lambda b: (-self.next_use(b, t), -part.size[b], b)):
            self.evict(b, t)
            off = self.find(part.size[a])
            if off is not None:
                return off
        return None

    def place(self, t: int, v: int, needed: list[int]) -> set[int]:
        """Make op v's tensors resident at step t; returns those that already were."""
        pinned = set(needed)
        present = {a for a in needed if a in self.where}
        for a in needed:
            if a in present:
                continue
            off = self.make_room(a, pinned, t)
            if off is None:  # the op's own resident inputs fragment memory: move them through DRAM
                for b in list(self.where):
                    self.evict(b, t)
                present.clear()
                self.where.clear()
                for b in needed:
                    off_b = self.find(self.part.size[b])
                    if off_b is None:
                        raise PlanningError(f"cosma: op {self.part.ops[v]} does not fit the budget on its own")
                    self.where[b] = off_b
                break
            self.where[a] = off
        return present

    def record(self, t: int, v: int, needed: list[int], present: set[int]) -> None:
        """The cells of step t: op v's tensors preserved, created or retrieved, every other
        resident tensor preserved; then free what no later step reads."""
        part, cells = self.part, self.actions.cells
        for a in needed:
            if a in present:
                cells[a, t] = ("P", self.where[a])
            elif a in part.op_outputs[v]:
                cells[a, t] = ("C", self.where[a])
            elif part.entry[a] == COMPULSORY and a not in self.loaded:
                cells[a, t] = ("C", self.where[a])
            else:
                cells[a, t] = ("R", self.where[a])
            if part.entry[a] == COMPULSORY:
                self.loaded.add(a)
        for a, off in self.where.items():  # kept from the previous step
            if (a, t) not in cells:
                cells[a, t] = ("P", off)
        for a in list(self.where):  # free what no later step reads
            if self.next_use(a, t + 1) == float("inf"):
                del self.where[a]


def warm_start(part: CosmaPart, order: list[int], rule: str = "greedy") -> Actions:
    """The warm start of ``part`` for ``order``, evicting by ``rule`` (one of ``RULES``)."""
    walk = _WarmStart(part, order, rule)
    for t, v in enumerate(order):
        needed = list(dict.fromkeys(part.op_inputs[v] + part.op_outputs[v]))
        walk.record(t, v, needed, walk.place(t, v, needed))
    for (a, t), (act, _) in list(walk.actions.cells.items()):
        if act == "C" and part.entry[a] == MAKE and part.producer[a] != order[t]:
            raise InternalError("warm start created a tensor away from its producer")
    return walk.actions


def best_warm_start(part: CosmaPart, orders: list[list[int]]) -> Actions:
    """The cheapest warm start over the given orders and both eviction rules."""
    best = None
    for order in orders:
        for rule in RULES:
            cand = warm_start(part, order, rule)
            if best is None or cand.traffic(part) < best.traffic(part):
                best = cand
    return best
