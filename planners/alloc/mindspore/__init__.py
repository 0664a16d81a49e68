"""Single Object and Many Objects offset assignment (MindSpore paper, Section 4, Appendix D).

Both take *blocks* (a contiguous block, or one item alone) and a conflict relation and place
blocks one by one in a *sort* order:

- Single Object (Algorithm 6): one memory object; each block goes where ``Fit`` says among
  the offsets ``Avoid`` leaves free of unsafe neighbours;
- Many Objects (Algorithm 7): the buffer is a list of objects, each as large as the block that
  opened it; a block goes into the first object where it fits (an object whose head block is
  unsafe with it is skipped at once, lines 7-10), or opens a new object at the end.

Subroutines, in the paper's words: ``avoid`` (Algorithm 8) lists forbidden intervals for the
block's head, ``merge`` (Algorithm 9) merges them into a stack by decreasing right end,
``fit`` (Algorithm 10) scans the gaps and picks one by First-Fit (Algorithm 11: lowest offset)
or Best-Fit (Algorithm 12: smallest gap), ``set_offsets`` (Algorithm 13) lays out a block.
Intervals are half-open ``[left, right)``.

Sorts (Section 5.2): ``breadth`` (decreasing live bytes at the block's first step), ``size``
(decreasing bytes), ``source`` (increasing first step), ``unsafe`` (decreasing number of unsafe
pairs). Ties go to the block with the lower head item, so results are deterministic.

This module is the readable reference. ``planners.alloc.mindspore.kernels`` runs the same
algorithms in Numba kernels; the tests check both give identical offsets.
"""

from __future__ import annotations

import time

import numpy as np

from npusim.errors import PlanningError
from planners.alloc.problem import OffsetProblem, OffsetResult, make_result

SORTS = ("breadth", "size", "source", "unsafe")
FITS = ("best-fit", "first-fit")
INFINITY = 1 << 62  # the right end of the Single Object


# --------------------------------------------------------------------------------------------
# Sorting
# --------------------------------------------------------------------------------------------

def breadths(problem: OffsetProblem) -> np.ndarray:
    """Per item: bytes of the items live at its first step (the breadth of its source node)."""
    problem.require_lifetimes("the breadth sort")
    steps = np.unique(np.concatenate([problem.first, problem.last + 1]))
    delta = np.zeros(len(steps) + 1, dtype=np.int64)
    np.add.at(delta, np.searchsorted(steps, problem.first), problem.sizes)
    np.add.at(delta, np.searchsorted(steps, problem.last + 1), -problem.sizes)
    live = np.cumsum(delta)
    return live[np.searchsorted(steps, problem.first)]


def sort_blocks(problem: OffsetProblem, sort: str, blocks=None) -> list[tuple[int, ...]]:
    """The blocks in the order the allocator considers them."""
    blocks = problem.block_list() if blocks is None else blocks
    sizes = problem.sizes
    if sort == "size":
        keys = [(-int(sizes[list(b)].sum()),) for b in blocks]
    elif sort == "breadth":
        br = breadths(problem)
        keys = [(-int(br[list(b)].max()),) for b in blocks]
    elif sort == "source":
        problem.require_lifetimes("the source sort")
        keys = [(int(problem.first[list(b)].min()),) for b in blocks]
    elif sort == "unsafe":
        deg = problem.relation.degrees()
        keys = [(-int(deg[list(b)].sum()),) for b in blocks]
    else:
        raise PlanningError(f"sort {sort!r}: expected one of {SORTS}")
    ranked = sorted(range(len(blocks)), key=lambda k: keys[k] + (blocks[k][0],))
    return [blocks[k] for k in ranked]


# --------------------------------------------------------------------------------------------
# Subroutines (Algorithms 8-13)
# --------------------------------------------------------------------------------------------

def avoid(new_block, placed_blocks, offsets, sizes, unsafe, object_offset: int) -> list[tuple[int, int]]:
    """Algorithm 8: intervals where the head of ``new_block`` must not start (or, for a single
    item, the intervals its unsafe neighbours occupy)."""
    intervals = []
    if len(new_block) == 1:
        new = new_block[0]
        for block in placed_blocks:
            for t in block:
                if unsafe(new, t):
                    intervals.append((offsets[t], offsets[t] + sizes[t]))
        return intervals
    for block in placed_blocks:
        for t in block:
            acc = 0
            for new in new_block:
                if unsafe(new, t):
                    start = offsets[t] - sizes[new] + 1 - acc
                    end = offsets[t] + sizes[t] - acc
                    if start >= object_offset:
                        intervals.append((start, end))
                    elif end > object_offset:
                        intervals.append((object_offset, end))
                acc += sizes[new]
    return intervals


def merge(intervals) -> list[list[int]]:
    """Algorithm 9: a stack (top = last element) of disjoint intervals by decreasing right end."""
    if not intervals:
        return []
    ordered = sorted(intervals)
    stack = [list(ordered[0])]
    for left, right in ordered[1:]:
        top = stack[-1]
        if top[1] < left:
            stack.append([left, right])
        elif top[1] < right:
            top[1] = right
    return stack


def fit(block, stack, object_offset: int, object_right: int, sizes, fitter: str) -> int | None:
    """Algorithm 10 with First-Fit (Algorithm 11) or Best-Fit (Algorithm 12)."""
    compare_size = sizes[block[0]]
    block_size = sum(sizes[t] for t in block)
    candidates = []
    upper = object_right
    stack = [list(iv) for iv in stack]
    while stack:
        left, right = stack.pop()
        lower = right
        if lower + compare_size <= upper and lower + block_size <= object_right:
            candidates.append((lower, upper - lower))
        upper = left
    lower = object_offset
    if lower + compare_size <= upper and lower + block_size <= object_right:
        candidates.append((lower, upper - lower))
    if not candidates:
        return None
    if fitter == "first-fit":
        candidates.sort(key=lambda c: (c[0], c[1]))
    elif fitter == "best-fit":
        candidates.sort(key=lambda c: (c[1], c[0]))
    else:
        raise PlanningError(f"fit {fitter!r}: expected one of {FITS}")
    return candidates[0][0]


def set_offsets(block, start: int, offsets, sizes) -> None:
    """Algorithm 13."""
    current = start
    for t in block:
        offsets[t] = current
        current += sizes[t]


# --------------------------------------------------------------------------------------------
# Algorithms 6 and 7
# --------------------------------------------------------------------------------------------

def _check_options(sort: str, fitter: str) -> None:
    if sort not in SORTS:
        raise PlanningError(f"sort {sort!r}: expected one of {SORTS}")
    if fitter not in FITS:
        raise PlanningError(f"fit {fitter!r}: expected one of {FITS}")


def _pinned_blocks(problem: OffsetProblem, offsets) -> list[tuple[int, ...]]:
    for t, off in sorted(problem.pinned.items()):
        offsets[t] = off
    return [(t,) for t in sorted(problem.pinned)]


def single_object(problem: OffsetProblem, sort: str = "size", fitter: str = "first-fit",
                  order=None, name: str | None = None) -> OffsetResult:
    """Algorithm 6. ``order`` (a list of blocks) overrides ``sort``."""
    start_time = time.perf_counter()
    _check_options(sort, fitter)
    sizes = [int(s) for s in problem.sizes]
    unsafe = problem.relation.has
    offsets = [0] * problem.n
    placed = _pinned_blocks(problem, offsets)
    pinned = set(problem.pinned)
    blocks = order if order is not None else sort_blocks(problem, sort)
    for block in blocks:
        if block[0] in pinned:
            continue
        stack = merge(avoid(block, placed, offsets, sizes, unsafe, 0))
        start = fit(block, stack, 0, INFINITY, sizes, fitter)
        placed.append(block)
        set_offsets(block, start, offsets, sizes)
    return make_result(problem, offsets, name or f"mindspore-so:{sort},{fitter}",
                       seconds=time.perf_counter() - start_time)


def many_objects(problem: OffsetProblem, sort: str = "size", fitter: str = "first-fit",
                 order=None, name: str | None = None) -> OffsetResult:
    """Algorithm 7. Pinned items form a first object spanning [0, their highest end)."""
    start_time = time.perf_counter()
    _check_options(sort, fitter)
    sizes = [int(s) for s in problem.sizes]
    unsafe = problem.relation.has
    offsets = [0] * problem.n
    objects = []  # [offset, right, blocks, has_head]: the pinned object has no head block
    pinned_blocks = _pinned_blocks(problem, offsets)
    mem_end = max((offsets[t] + sizes[t] for (t,) in pinned_blocks), default=0)
    if pinned_blocks:
        objects.append([0, mem_end, pinned_blocks, False])
    pinned = set(problem.pinned)
    blocks = order if order is not None else sort_blocks(problem, sort)
    for block in blocks:
        if block[0] in pinned:
            continue
        allocated = False
        for obj_offset, obj_right, obj_blocks, has_head in objects:
            head = obj_blocks[0]
            if has_head and len(block) == 1 and len(head) == 1 and unsafe(block[0], head[0]):
                continue
            stack = merge(avoid(block, obj_blocks, offsets, sizes, unsafe, obj_offset))
            start = fit(block, stack, obj_offset, obj_right, sizes, fitter)
            if start is not None:
                allocated = True
                obj_blocks.append(block)
                set_offsets(block, start, offsets, sizes)
                break
        if not allocated:
            size = sum(sizes[t] for t in block)
            objects.append([mem_end, mem_end + size, [block], True])
            set_offsets(block, mem_end, offsets, sizes)
            mem_end += size
    return make_result(problem, offsets, name or f"mindspore-mo:{sort},{fitter}",
                       seconds=time.perf_counter() - start_time)
