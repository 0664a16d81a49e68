"""Replacement policies: which resident tensors to evict when an allocation does not fit.

A policy is a stage of the pipeline that hands the allocator an object with
``rank(candidates, step, uses) -> candidates in eviction order``, where ``uses`` knows each
tensor's next and last use (``planners.alloc.arena.UseTimes``: ``next_use``, ``next_uses`` of
many at once, ``last_access``, ``size``). Ties are broken by size (larger first, frees more),
then id, so plans are deterministic.
"""


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
