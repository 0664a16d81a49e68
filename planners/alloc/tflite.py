"""TensorFlow Lite baselines: the arena planner and TFLite-Micro's greedy planner.

- ``tflite_arena``: TFLite's ``ArenaPlanner`` order (largest first, ties by first use) with
  best fit among the gaps left by the already-placed items that conflict with the new one
  (``SimpleMemoryArena``: the smallest gap that holds it, else above the highest conflicting item);
- ``tflm_greedy``: TFLite-Micro's ``GreedyMemoryPlanner``: largest first, first fit (the
  lowest gap between conflicting items that holds it).

Both are Single Object allocations (MindSpore paper, Algorithm 6) with a fixed order, so they
run on the same kernel and honour contiguous blocks and pinned items the same way.
"""

from __future__ import annotations

from npusim.util.lazy_import import lazy_import
from planners.alloc.problem import OffsetProblem, OffsetResult

mindspore_kernels = lazy_import("planners.alloc.mindspore.kernels")  # Numba: loaded when first used


def _largest_first(problem: OffsetProblem, tie_by_first_use: bool):
    blocks = [b for b in problem.block_list() if b[0] not in problem.pinned]

    def key(b):
        size = -int(problem.sizes[list(b)].sum())
        first = int(problem.first[list(b)].min()) if (tie_by_first_use and problem.has_lifetimes) else 0
        return (size, first, b[0])

    return sorted(blocks, key=key)


def tflite_arena(problem: OffsetProblem) -> OffsetResult:
    return mindspore_kernels.single_object(problem, "size", "best-fit", order=_largest_first(problem, True),
                                        name="tflite-arena")


def tflm_greedy(problem: OffsetProblem) -> OffsetResult:
    return mindspore_kernels.single_object(problem, "size", "first-fit", order=_largest_first(problem, False),
                                        name="tflm-greedy")
