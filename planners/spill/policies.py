"""Replacement policies: which resident tensors to evict when an allocation does not fit.

A policy is a stage of the pipeline that hands the allocator an object with
``rank(candidates, step, uses) -> candidates in eviction order``, where ``uses`` knows each
tensor's next and last use (``planners.alloc.arena.UseTimes``: ``next_use``, ``next_uses`` of
many at once, ``last_access``, ``size``). Ties are broken by size (larger first, frees more),
then id, so plans are deterministic.

A policy whose order depends only on each candidate's last use before ``step`` and its next
use after it may also give ``victim_keys(uses)``: per use of a tensor (each entry of
``uses.used``, in step order), a number; the candidates sorted by the number of their last
use are in ``rank``'s order. The allocator then sorts by those numbers, picked up as it walks
the steps, instead of asking ``rank`` (which makes and sorts tuples of every candidate's uses
at every eviction). tests/test_arena_fast_paths.py checks the two orders equal.
"""

import numpy as np


def _dense_rank(order) -> list[int]:
    """The position of each entry in ``order`` (an argsort): its rank as a sort key."""
    keys = np.empty(len(order), dtype=np.int64)
    keys[order] = np.arange(len(order), dtype=np.int64)
    return keys.tolist()


class Belady:
    """Belady's MIN: evict the tensor whose next use is furthest in the future."""

    name = "belady"
    stage = "spill"
    description = "evict the tensor whose next use is furthest in the future (ties: larger first)"
    reads = ()
    writes = ("spill_policy",)

    def run(self, ctx) -> None:
        ctx.spill_policy = self

    def rank(self, candidates, step, uses):
        size = uses.size
        ranked = sorted([(-n, -size[t], t) for n, t in zip(uses.next_uses(candidates, step), candidates)])
        return [t for _, _, t in ranked]

    def victim_keys(self, uses) -> list[int]:
        """``rank``'s key (next use, size, id) after each use (module docstring), as one number:
        the rank of the triple among those of all uses, by one ``np.lexsort``. A tensor's next
        use after ``step`` is its next use after its last use, as it is not used in between."""
        size = np.asarray(uses.size, dtype=np.int64)[uses.used]
        return _dense_rank(np.lexsort((uses.used, -size, -uses.next_step)))


class LeastRecentlyUsed:
    """Evict the tensor used longest ago."""

    name = "lru"
    stage = "spill"
    description = "evict the least recently used tensor (ties: larger first)"
    reads = ()
    writes = ("spill_policy",)

    def run(self, ctx) -> None:
        ctx.spill_policy = self

    def rank(self, candidates, step, uses):
        last_access, size = uses.last_access, uses.size
        ranked = sorted([(last_access[t], -size[t], t) for t in candidates])  # keys made inline, no key call
        return [t for _, _, t in ranked]

    def victim_keys(self, uses) -> list[int]:
        """``rank``'s key (last use, size, id) of each use (module docstring), as one number:
        the rank of the triple among those of all uses, by one ``np.lexsort``."""
        size = np.asarray(uses.size, dtype=np.int64)[uses.used]
        return _dense_rank(np.lexsort((uses.used, -size, uses.use_step)))
