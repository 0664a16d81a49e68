"""The COSMA paper's "greedy" replacement (§V-A2): at each replacement, evict the set of
tensors that makes room with the fewest off-chip bytes *now*.

Making room for a block of ``need`` bytes in a scratchpad means emptying one contiguous
window of ``need`` bytes; the tensors to evict are exactly the resident blocks that window
overlaps. So the locally optimal choice — the paper solves it as a small ILP — is a minimum
over windows, solved here exactly by ``cheapest_window``: an optimal window can always slide
down until it starts at 0 or at the end of a block without overlapping any new block, so only
those starts need checking (O(k²) for k resident blocks). The cost of evicting tensor t is
its spill (if DRAM has no copy of it) plus the retrieve it will need, i.e. 0, 1 or 2 × its
size; ties go to fewer bytes evicted, then to the window whose tensors are needed latest
(Belady), then to the lowest address, so the choice is deterministic.

``GreedyReplacement`` (``greedy-ilp``) is the pipeline's spill stage: the ``arena`` allocator
asks it for ``choose(blocks, need, step, uses)`` when a block does not fit.
"""

from __future__ import annotations


def cheapest_window(blocks: list[tuple[int, int, int]], capacity: int, need: int, cost, evictable,
                    later=None, align: int = 1) -> tuple[int, list[int]] | None:
    """(offset, owners to evict) of the cheapest window of ``need`` bytes, or None.

    ``blocks``: (offset, size, owner) of every resident block; ``cost(owner)``: bytes moved
    if it is evicted now; ``evictable(owner)``: False for blocks that must stay; ``later(owner)``:
    its next use (ties prefer evicting what is needed latest)."""
    blocks = sorted(blocks)
    starts = sorted({0} | {-(-(off + size) // align) * align for off, size, _ in blocks})
    best_key, best = None, None
    for s in starts:
        end = s + need
        if end > capacity:
            break
        hit = [owner for off, size, owner in blocks if off < end and s < off + size]
        if not all(evictable(o) for o in hit):
            continue
        soonest = min((later(o) for o in hit), default=float("inf")) if later else 0
        key = (sum(cost(o) for o in hit), sum(size for off, size, o in blocks if o in hit), -soonest, s)
        if best_key is None or key < best_key:
            best_key, best = key, (s, hit)
    return best


class GreedyReplacement:
    name = "greedy-ilp"
    stage = "spill"
    description = "COSMA's greedy replacement: evict the set of tensors that frees room with the fewest off-chip bytes now"
    reads = ()
    writes = ("spill_policy",)

    def run(self, ctx) -> None:
        ctx.spill_policy = self

    def rank(self, candidates, step, uses):
        """Fallback order when no layout is given: cheapest per byte first, then Belady."""
        return sorted(candidates, key=lambda t: (uses.next_use(t, step) == float("inf"),
                                                 -uses.next_use(t, step), -uses.size[t], t))

    def choose(self, arena, need: int, candidates, step: int, uses, in_dram) -> list[int] | None:
        """Owners to evict so that a block of ``need`` bytes fits, at the fewest bytes moved."""
        movable = set(candidates)
        blocks = [(arena.offset_of(o), arena.size_of(o), o) for o in arena.owners()]

        def cost(t):
            needed = uses.next_use(t, step - 1) != float("inf")
            return (0 if t in in_dram or not needed else uses.size[t]) + (uses.size[t] if needed else 0)

        found = cheapest_window(blocks, arena.capacity, need, cost, movable.__contains__,
                                lambda t: uses.next_use(t, step - 1), arena.alignment)
        return None if found is None else found[1]
