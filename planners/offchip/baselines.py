"""Off-chip baselines at whole-tensor granularity: each buffer is live from its first tile's
birth to its last tile's death (no tile is freed early), on the generic ``OffsetProblem``.

- ``naive``: no reuse, every buffer its own addresses;
- ``shared_objects``: Shared Objects (Pisarchyk & Lee 2020) greedy by breadth, by size and
  by size improved, keeping the smallest footprint as the TAA paper does (ties: that order);
- ``offsets``: the generic offset assignment (TFLite's arena: largest first, best fit).
"""

from __future__ import annotations

import time

import numpy as np

from planners.alloc import naive as naive_alloc
from planners.alloc import shared_objects, tflite
from planners.alloc.problem import OffsetProblem, check_assignment
from planners.offchip.lifetimes import Buffer
from planners.offchip.taa import ArenaResult


def whole_buffer_problem(buffers: list[Buffer], alignment: int = 1) -> OffsetProblem:
    return OffsetProblem(sizes=np.array([b.size for b in buffers], dtype=np.int64),
                         first=np.array([b.first for b in buffers], dtype=np.int64),
                         last=np.array([b.last for b in buffers], dtype=np.int64),
                         alignment=alignment, names=tuple(b.name for b in buffers))


def _solve(buffers, alignment, algorithms) -> ArenaResult:
    start = time.perf_counter()
    problem = whole_buffer_problem(buffers, alignment)
    best = None
    for algorithm in algorithms:
        result = algorithm(problem)
        if best is None or result.total < best.total:
            best = result
    broken = check_assignment(problem, best.offsets)
    assert not broken, broken  # the generic checker: a baseline bug must not reach a plan
    offsets = {b.name: int(o) for b, o in zip(buffers, best.offsets)}
    return ArenaResult(offsets, int(best.total), best.algorithm, time.perf_counter() - start)


def naive(buffers: list[Buffer], alignment: int = 1) -> ArenaResult:
    return _solve(buffers, alignment, [naive_alloc.naive])


def shared_objects_best(buffers: list[Buffer], alignment: int = 1) -> ArenaResult:
    return _solve(buffers, alignment, [shared_objects.greedy_by_breadth, shared_objects.greedy_by_size,
                                       shared_objects.greedy_by_size_improved])


def offsets(buffers: list[Buffer], alignment: int = 1) -> ArenaResult:
    return _solve(buffers, alignment, [tflite.tflite_arena])
