"""The online arena's fast paths against their plain versions (planners/alloc/arena.py, best_fit.py).

``BestFitArena`` keeps its blocks as sorted lists and simulates the placement look-ahead on
list copies; ``_ArenaRun._place_ahead`` skips offsets and simulations that cannot change its
answer (bounds on the steps any offset can fit, the future built from per-step last uses).
Eviction for the next op's loads picks its candidates from each tensor's last and next
access, and orders them by the policy's keys per use (``victim_keys``) rather than ``rank``.
Each is compared here with the straightforward version it replaced, kept below as reference:
an arena that scans a list of blocks, a simulation on a copy of the arena, a look-ahead
that builds the whole future from the on-chip set and simulates every gap end, candidates
from the sets of the next steps' tensors, and the policy's ``rank``.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from npusim.hw.config import Hardware
from npusim.registry import make_plan
from npusim.testing import random_dags
from npusim.workflow import load_graph, load_hw, memory_bounds
from planners.alloc import arena
from planners.alloc.best_fit import BestFitArena


class PlainArena:
    """Best fit by one scan of the live blocks (the reference of ``BestFitArena``)."""

    def __init__(self, capacity: int, alignment: int) -> None:
        self.capacity, self.alignment = capacity, alignment
        self.blocks: dict[int, tuple[int, int]] = {}  # owner -> (offset, size); sizes > 0 only
        self.empty: set[int] = set()

    def _sorted(self):
        return sorted((off, size, owner) for owner, (off, size) in self.blocks.items())

    def _align(self, x: int) -> int:
        return -(-x // self.alignment) * self.alignment

    def gaps(self, removable=()) -> list[tuple[int, int]]:
        found, cursor = [], 0
        for off, size, owner in self._sorted() + [(self.capacity, 0, None)]:
            if owner in removable:
                continue
            start = self._align(cursor)
            if off > start:
                found.append((start, off))
            if owner is not None:
                cursor = max(cursor, off + size)
        return found

    def find(self, size: int) -> int | None:
        if size <= 0:
            return 0
        fitting = [(end - start, start) for start, end in self.gaps() if end - start >= size]
        return min(fitting)[1] if fitting else None

    def place(self, owner: int, offset: int, size: int) -> None:
        if size <= 0:
            self.empty.add(owner)
        else:
            self.blocks[owner] = (offset, size)

    def free(self, owner: int) -> None:
        if owner in self.empty:
            self.empty.discard(owner)
        else:
            del self.blocks[owner]

    def copy(self) -> PlainArena:
        other = PlainArena(self.capacity, self.alignment)
        other.blocks, other.empty = dict(self.blocks), set(self.empty)
        return other

    def steps_fitting(self, owner: int, offset: int, size: int, steps) -> int:
        sim = self.copy()
        sim.place(owner, offset, size)
        for n, (new, freed) in enumerate(steps):
            for x in freed:
                sim.free(x)
            for x, nbytes in new:
                at = sim.find(nbytes)
                if at is None:
                    return n
                sim.place(x, at, nbytes)
        return len(steps)


def _random_offset(rng: random.Random, plain: PlainArena, size: int) -> int | None:
    """Best fit, or the low or high end of a random gap that holds ``size`` (as the look-ahead tries)."""
    fitting = [(start, end) for start, end in plain.gaps() if end - start >= size]
    if not fitting or rng.random() < 0.5:
        return plain.find(size)
    start, end = rng.choice(fitting)
    return rng.choice([start, (end - size) // plain.alignment * plain.alignment])


@pytest.mark.parametrize("seed", range(40))
def test_best_fit_arena_answers_as_a_plain_scan(seed):
    rng = random.Random(seed)
    alignment = rng.choice([1, 8, 64])
    capacity = rng.choice([alignment * rng.randint(8, 64), rng.randint(300, 5000)])
    fast, plain = BestFitArena(capacity, alignment), PlainArena(capacity, alignment)
    live, owner = [], 0
    for _ in range(200):
        if live and rng.random() < 0.4:
            victim = live.pop(rng.randrange(len(live)))
            assert fast.offset_of(victim) == fast.free(victim)
            plain.free(victim)
        else:
            size = rng.choice([0, alignment, rng.randint(1, capacity // 3)])
            if rng.random() < 0.7:
                size = -(-size // alignment) * alignment  # the allocator's sizes are aligned
            offset = _random_offset(rng, plain, size)
            if offset is None:
                continue
            owner += 1
            fast.place(owner, offset, size)
            plain.place(owner, offset, size)
            live.append(owner)
        size = rng.randint(1, capacity)
        assert fast.find(size) == plain.find(size)
        assert fast.gaps() == plain.gaps()
        assert fast.largest_gap() == max((end - start for start, end in plain.gaps()), default=0)
        assert fast.used == sum(size for _, size in plain.blocks.values())
        removable = set(rng.sample(live, k=rng.randint(0, len(live))))
        sizes = sorted((end - start for start, end in plain.gaps(removable)), reverse=True) + [0, 0]
        assert fast.largest_gaps_without(removable) == (sizes[0], sizes[1])
        kept = [o for o in live if o not in removable and fast.size_of(o) > 0]
        assert fast.fits_keeping(size, kept) == (sizes[0] >= size)
        _check_steps_fitting(rng, fast, plain, live, owner + 1)


def _check_steps_fitting(rng, fast, plain, live, first_new):
    """A random look-ahead: blocks placed over a few steps, live ones freed between them."""
    size = rng.choice([0, fast.alignment, rng.randint(1, fast.capacity // 4)])
    offset = _random_offset(rng, plain, size)
    if offset is None:
        return
    placed, steps, owner = [*live, first_new], [], first_new
    for _ in range(rng.randint(1, 5)):
        freed = rng.sample(placed, k=rng.randint(0, len(placed) // 2))
        placed = [x for x in placed if x not in freed]
        new = []
        for _ in range(rng.randint(0, 3)):
            owner += 1
            new.append((owner, rng.choice([0, fast.alignment, rng.randint(1, fast.capacity // 4)])))
        placed += [x for x, _ in new]
        steps.append((new, freed))
    assert fast.steps_fitting(first_new, offset, size, steps) == plain.steps_fitting(first_new, offset, size, steps)


# -- the look-ahead: the plain search, as it was before its shortcuts ---------------------------
def plain_future(run, s: int, t: int, pending: list[int]):
    """Per step s..s+lookahead: (blocks to place, tensors freed before), from the on-chip set."""
    horizon = min(len(run.order), s + 1 + run.lookahead)
    placed = set(run.arena.owners()) | set(pending) | {t}
    freed_at = defaultdict(list)
    future = [([(x, run.alloc_size[x]) for x in pending], [])]
    for u in range(s + 1, horizon):
        new = [x for x in dict.fromkeys(run.graph.ops[run.order[u]].tensors) if x not in placed]
        placed.update(new)
        future.append(([(x, run.alloc_size[x]) for x in new], []))
    for x in placed:
        last = max(run.uses.last_use(x), s if x in run.held else -1)
        if s <= last < horizon - 1:
            freed_at[last + 1].append(x)
    return [(new, sorted(freed_at.get(s + k, ()))) for k, (new, _) in enumerate(future)]


def plain_place_ahead(run, t: int, best_fit: int, s: int, pending: list[int]) -> int:
    """Every gap end tried by a simulation on a copy of the arena; the most steps win."""
    plain = PlainArena(run.arena.capacity, run.arena.alignment)
    for owner in run.arena.owners():
        plain.place(owner, run.arena.offset_of(owner), run.arena.size_of(owner))
    size = run.alloc_size[t]
    future = plain_future(run, s, t, pending)
    need = sum(nbytes for new, _ in future for _, nbytes in new)
    if any(end - start >= size + need for start, end in plain.gaps()):
        return best_fit
    steps = len(future)
    score = plain.steps_fitting(t, best_fit, size, future)
    if score == steps:
        return best_fit
    for start, end in plain.gaps():
        if end - start < size:
            continue
        top = (end - size) // plain.alignment * plain.alignment
        for offset in dict.fromkeys((start, top)):
            if offset != best_fit:
                n = plain.steps_fitting(t, offset, size, future)
                if n > score:
                    best_fit, score = offset, n
                    if n == steps:
                        return best_fit
    return best_fit


class CheckedRun(arena._ArenaRun):
    """The arena's run, each placement also chosen by the plain search and compared; the
    future it builds and its bounds are checked against every offset's plain simulation."""

    calls = 0

    def _place_ahead(self, t, best_fit, s, pending):
        self._check_bounds(t, best_fit, s, pending)
        chosen = super()._place_ahead(t, best_fit, s, pending)
        assert chosen == plain_place_ahead(self, t, best_fit, s, pending), (s, t)
        CheckedRun.calls += 1
        return chosen

    def _check_bounds(self, t, best_fit, s, pending):
        plain = plain_future(self, s, t, pending)
        future, most, _ = self._future_blocks(s, t, pending)
        assert len(future) == min(len(plain), most + 1)
        for (new, freed), (plain_new, plain_freed) in zip(future, plain):
            assert new == plain_new and {x for x in freed if self.alloc_size[x]} == \
                {x for x in plain_freed if self.alloc_size[x]}
        size, arena_now = self.alloc_size[t], self.arena
        offsets = {best_fit, *(x for start, end in arena_now.gaps() if end - start >= size
                               for x in (start, (end - size) // arena_now.alignment * arena_now.alignment))}
        scores = [arena_now.steps_fitting(t, offset, size, plain) for offset in offsets]
        assert max(scores) <= most  # no offset fits a step over the budget
        for k in range(len(plain)):
            if not self._may_fit(t, plain, k):  # then no offset fits step k
                assert max(scores) <= k, (s, t, k)


GRAPHS = [("random_dag", 60), ("diamonds", 20), ("nas_cell", 6), ("wide_fanout", 12), ("chain", 50)]


def _budgets(graph, hw, rng, count: int = 4):
    """``count`` random budgets from the graph's least (m_r) to halfway to its peak (m_p)."""
    bounds = memory_bounds(graph, hw.scratchpad.alignment)
    for _ in range(count):
        yield rng.randint(bounds.m_r, max(bounds.m_r, (bounds.m_r + bounds.m_p) // 2))


@pytest.mark.parametrize("generator, n", GRAPHS)
@pytest.mark.parametrize("seed", range(3))
def test_look_ahead_places_as_the_plain_search(monkeypatch, generator, n, seed):
    monkeypatch.setattr(arena, "_ArenaRun", CheckedRun)
    rng = random.Random(seed)
    graph, hw = getattr(random_dags, generator)(n, seed=seed), Hardware()
    calls = CheckedRun.calls
    for budget in _budgets(graph, hw, rng):
        options = {"placement_lookahead": rng.choice([1, 2, 4, 6]), "prefetch_depth": rng.choice([0, 1, 2, 4])}
        make_plan(graph, hw, rng.choice(["default+arena+belady", "rpo+arena+lru"]), budget=budget,
                  options=options)
    assert CheckedRun.calls > calls  # the look-ahead ran


@pytest.mark.parametrize("budget", [32 << 10, 48 << 10])
def test_look_ahead_places_as_the_plain_search_on_tiles(monkeypatch, budget):
    """Tiled ops: tiles stored as soon as produced and held a step (double buffering), loads
    reserved ahead, many blocks per op."""
    monkeypatch.setattr(arena, "_ArenaRun", CheckedRun)
    calls = CheckedRun.calls
    make_plan(load_graph("squeezenet1_0"), load_hw("edge-npu"), "fuse+tile+default+arena+belady", budget=budget)
    assert CheckedRun.calls > calls


def plain_overlap_candidates(run, s):
    """The cached tensors and reservations ``_evict_for_next`` may give up at step s, from the
    tensors of steps s .. s+1+prefetch (the reference of ``_overlap_candidates``)."""
    steps = run.step_tensors
    pinned = {*steps[s], *steps[s + 1]}
    window = {x for u in range(s + 2, min(s + 2 + run.prefetch, len(steps))) for x in steps[u]}
    reserved, cached, kept = [], [], []
    for x in run.arena.owners():
        if x in pinned:
            kept.append(x)
        elif x in run.prefetched:
            reserved.append(x)
        elif x not in run.held and x not in window and x in run.in_dram and run.resident_since[x] < s:
            cached.append(x)
        else:
            kept.append(x)
    return reserved, cached, kept


class CheckedEvictions(arena._ArenaRun):
    """An arena run whose eviction candidates and their order are checked against the plain ones."""

    ranked = candidates = looked = 0

    def _overlap_candidates(self, s):
        found = super()._overlap_candidates(s)
        assert found == plain_overlap_candidates(self, s), s
        CheckedEvictions.looked += 1
        CheckedEvictions.candidates += bool(found[1])
        return found

    def _ranked(self, candidates, step):
        expected = self.policy.rank(list(candidates), step, self.uses)
        assert super()._ranked(candidates, step) == expected, step
        CheckedEvictions.ranked += 1
        return expected


#: The random graphs whose arena evicts at all (a chain's and a fan-out's tensors are read once
#: or all at once: at these budgets nothing cached is given up, so those cases checked nothing).
EVICTING_GRAPHS = [g for g in GRAPHS if g[0] in ("random_dag", "diamonds", "nas_cell")]


@pytest.mark.parametrize("generator, n", EVICTING_GRAPHS)
@pytest.mark.parametrize("policy", ["belady", "lru"])
def test_evictions_as_the_plain_candidates_and_rank(monkeypatch, generator, n, policy):
    """Random graphs at budgets between their least and their peak: every eviction's
    candidates and order are those of the plain selection and ``rank`` (checked inside
    ``CheckedEvictions``), and the check ran: candidates for the next op's loads, or victims
    ranked to make room."""
    monkeypatch.setattr(arena, "_ArenaRun", CheckedEvictions)
    rng = random.Random(n)
    graph, hw = getattr(random_dags, generator)(n, seed=n), Hardware()
    checked = CheckedEvictions.looked + CheckedEvictions.ranked
    least = memory_bounds(graph, hw.scratchpad.alignment).m_r  # the tightest budget evicts most
    for budget in [least, *_budgets(graph, hw, rng)]:
        options = {"placement_lookahead": rng.choice([0, 2]), "prefetch_depth": rng.choice([1, 2, 4])}
        make_plan(graph, hw, f"default+arena+{policy}", budget=budget, options=options)
    assert CheckedEvictions.looked + CheckedEvictions.ranked > checked  # some eviction was compared


@pytest.mark.parametrize("policy", ["belady", "lru"])
def test_evictions_as_the_plain_candidates_and_rank_on_tiles(monkeypatch, policy):
    """Tiles stored as produced (so cached with a copy in DRAM), loads reserved ahead: most
    steps evict for the next op's loads."""
    monkeypatch.setattr(arena, "_ArenaRun", CheckedEvictions)
    ranked, candidates = CheckedEvictions.ranked, CheckedEvictions.candidates
    make_plan(load_graph("squeezenet1_0"), load_hw("edge-npu"), f"fuse+tile+default+arena+{policy}", budget=48 << 10)
    assert CheckedEvictions.ranked > ranked and CheckedEvictions.candidates > candidates
