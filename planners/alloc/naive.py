"""Naive allocation: no reuse at all; every item gets its own addresses (paper Tables 2-3).

Items are laid out in the order of their blocks' head items (contiguous blocks stay in order);
pinned items keep their offsets and everything else goes above the highest of them.
"""

from __future__ import annotations

import time

from planners.alloc.problem import OffsetProblem, OffsetResult, make_result


def naive(problem: OffsetProblem) -> OffsetResult:
    start = time.perf_counter()
    offsets = [0] * problem.n
    cursor = 0
    for t, off in problem.pinned.items():
        offsets[t] = off
        cursor = max(cursor, off + int(problem.sizes[t]))
    for block in problem.block_list():
        if block[0] in problem.pinned:
            continue
        for t in block:
            offsets[t] = cursor
            cursor += int(problem.sizes[t])
    return make_result(problem, offsets, "naive", seconds=time.perf_counter() - start)
