"""Timing helpers shared by the benchmark scripts (run from the repository root)."""

from __future__ import annotations

import time


def best_of(repeat: int, fn):
    """(best wall seconds over ``repeat`` runs, the last result): the least noisy figure."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result
