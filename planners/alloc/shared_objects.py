"""Shared Objects (Pisarchyk & Lee 2020, "Efficient Memory Management for Deep Neural Net
Inference", the TFLite GPU delegate's memory management).

Every item is assigned to a *shared object*; an object holds at most one item at a time (no
two of its items conflict) and is as large as its largest item. Objects are laid out back to
back, so the footprint is the sum of the object sizes.

- ``greedy_by_size``: items by decreasing size (ties: first use, then id); each goes to the
  smallest suitable object (all existing objects are at least as large), else a new one;
- ``greedy_by_breadth``: steps by decreasing breadth (bytes live there); at each step, its live
  items by decreasing size; an item goes to the smallest suitable object that holds it, else
  to the largest suitable object (which grows), else a new one;
- ``greedy_by_size_improved``: TFLite's ``GreedyBySizeDistPriority``: "positional maximums"
  give each item a position; the next item is the one with the lowest position, then the
  smallest positive lifetime distance to an object, then the largest size; it joins the object
  at that distance (which may grow), else a new object.

"Suitable" uses the problem's conflict relation (lifetime overlap, or the multi-stream unsafe
pairs); lifetimes order the steps and measure distances, so they are required. Contiguous
blocks and pinned offsets are not part of this model.
"""

from __future__ import annotations

import time

import numpy as np

from npusim.errors import PlanningError
from planners.alloc.mindspore import breadths
from planners.alloc.problem import OffsetProblem, OffsetResult, make_result

NOT_ASSIGNED = np.iinfo(np.int64).max


def _check(problem: OffsetProblem, who: str) -> None:
    problem.require_lifetimes(who)
    if problem.blocks or problem.pinned:
        raise PlanningError(f"{who}: shared objects cannot honour contiguous blocks or pinned offsets; "
                            "use a Single/Many Objects allocator")


def _layout(problem: OffsetProblem, object_of: np.ndarray, object_sizes: list[int], name: str, start: float):
    bases = np.concatenate([[0], np.cumsum(object_sizes)]).astype(np.int64)
    return make_result(problem, bases[object_of], name, seconds=time.perf_counter() - start)


class _Objects:
    """Objects with their member masks, for suitability tests against the conflict relation."""

    def __init__(self, problem: OffsetProblem):
        self.relation = problem.relation
        self.sizes: list[int] = []
        self.conflict_mask: list[np.ndarray] = []  # items conflicting with some member

    def suitable(self, item: int) -> list[int]:
        return [o for o, mask in enumerate(self.conflict_mask) if not mask[item]]

    def add(self, obj: int | None, item: int, size: int) -> int:
        row = self.relation.row(item)
        if obj is None:
            self.sizes.append(size)
            self.conflict_mask.append(row.copy())
            return len(self.sizes) - 1
        self.sizes[obj] = max(self.sizes[obj], size)
        self.conflict_mask[obj] |= row
        return obj


def _best_object(objects: _Objects, candidates: list[int], size: int) -> int | None:
    """TFLite's rule: the smallest object that holds ``size``, else the largest one."""
    holding = [o for o in candidates if objects.sizes[o] >= size]
    if holding:
        return min(holding, key=lambda o: (objects.sizes[o], o))
    if candidates:
        return max(candidates, key=lambda o: (objects.sizes[o], -o))
    return None


def greedy_by_size(problem: OffsetProblem) -> OffsetResult:
    start = time.perf_counter()
    _check(problem, "so-size")
    objects = _Objects(problem)
    object_of = np.zeros(problem.n, dtype=np.int64)
    for i in sorted(range(problem.n), key=lambda i: (-int(problem.sizes[i]), int(problem.first[i]), i)):
        size = int(problem.sizes[i])
        object_of[i] = objects.add(_best_object(objects, objects.suitable(i), size), i, size)
    return _layout(problem, object_of, objects.sizes, "so-size", start)


def greedy_by_breadth(problem: OffsetProblem) -> OffsetResult:
    start = time.perf_counter()
    _check(problem, "so-breadth")
    objects = _Objects(problem)
    object_of = np.full(problem.n, -1, dtype=np.int64)
    steps = np.unique(problem.first)  # breadth changes only where an item starts
    br = breadths(problem)
    step_breadth = {int(problem.first[i]): int(br[i]) for i in range(problem.n)}
    for s in sorted(steps.tolist(), key=lambda s: (-step_breadth[s], s)):
        live = np.flatnonzero((problem.first <= s) & (problem.last >= s))
        for i in sorted(live.tolist(), key=lambda i: (-int(problem.sizes[i]), i)):
            if object_of[i] >= 0:
                continue
            size = int(problem.sizes[i])
            object_of[i] = objects.add(_best_object(objects, objects.suitable(i), size), i, size)
    return _layout(problem, object_of, objects.sizes, "so-breadth", start)


def positional_maximums(problem: OffsetProblem) -> np.ndarray:
    """pm[k] = the largest k-th largest item size live at any one step."""
    best: list[int] = []
    for s in np.unique(problem.first).tolist():
        live = np.sort(problem.sizes[(problem.first <= s) & (problem.last >= s)])[::-1]
        for k, v in enumerate(live.tolist()):
            if k == len(best):
                best.append(v)
            elif v > best[k]:
                best[k] = v
    return np.array(best, dtype=np.int64)


def greedy_by_size_improved(problem: OffsetProblem) -> OffsetResult:
    start = time.perf_counter()
    _check(problem, "so-size-improved")
    n = problem.n
    sizes, first, last = problem.sizes, problem.first, problem.last
    relation = problem.relation
    pm = positional_maximums(problem)
    # position: index of the rightmost positional maximum >= size (pm is non-increasing)
    position = np.searchsorted(-pm, -sizes, side="right") - 1
    object_of = np.full(n, -1, dtype=np.int64)
    object_sizes: list[int] = []
    dist = np.zeros((n, 0), dtype=np.int64)  # NOT_ASSIGNED: conflicts with a member of the object
    best_dist = np.full(n, NOT_ASSIGNED, dtype=np.int64)
    best_obj = np.full(n, -1, dtype=np.int64)
    for _ in range(n):
        free = np.flatnonzero(object_of < 0)
        # highest priority: lowest position, then smallest best_dist, then largest size, then id
        pick = free[np.lexsort((free, -sizes[free], best_dist[free], position[free]))[0]]
        if best_dist[pick] == NOT_ASSIGNED:
            obj = len(object_sizes)
            object_sizes.append(int(sizes[pick]))
            dist = np.concatenate([dist, np.full((n, 1), NOT_ASSIGNED, dtype=np.int64)], axis=1)
            new_object = True
        else:
            obj = int(best_obj[pick])
            object_sizes[obj] = max(object_sizes[obj], int(sizes[pick]))
            new_object = False
        object_of[pick] = obj
        rest = np.flatnonzero(object_of < 0)
        if not new_object:
            rest = rest[dist[rest, obj] != NOT_ASSIGNED]
        if rest.size == 0:
            continue
        gap = np.where(last[rest] < first[pick], first[pick] - last[rest],
                       np.where(last[pick] < first[rest], first[rest] - last[pick], NOT_ASSIGNED))
        gap = np.where(relation.row(int(pick))[rest], NOT_ASSIGNED, gap)
        if new_object:
            dist[rest, obj] = gap
        else:
            dist[rest, obj] = np.minimum(dist[rest, obj], gap)
            lost = rest[(gap == NOT_ASSIGNED) & (best_obj[rest] == obj)]
            dist[lost, obj] = NOT_ASSIGNED
            if lost.size:
                best_dist[lost] = dist[lost].min(axis=1)
                best_obj[lost] = np.where(best_dist[lost] == NOT_ASSIGNED, -1, dist[lost].argmin(axis=1))
            conflicted = rest[gap == NOT_ASSIGNED]
            dist[conflicted, obj] = NOT_ASSIGNED
        improve = rest[dist[rest, obj] < best_dist[rest]]
        best_dist[improve] = dist[improve, obj]
        best_obj[improve] = obj
    return _layout(problem, object_of, object_sizes, "so-size-improved", start)
