"""The fast happens-before check (``npusim.sim.races``: array work, clocks by rounds) against
the plain algorithm it replaced, kept here as a readable reference: one vector clock per
command in id order, and a nested loop over the pairs that stops at the first race.

Both run on programs with races made by mutating safe ones (dropping semaphore waits, moving
a residency's region onto another's), so the first race found (its message) must agree, not
only the verdict."""

import bisect
import random
from dataclasses import replace

import pytest

from npusim.plan.lower import lower
from npusim.plan.painting import AddressPainter
from npusim.sim import races as races_module
from npusim.sim.races import find_race
from npusim.testing.seeded_races import seeded_cases
from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget


# --- the reference: the previous implementation, unchanged but for names ---------------------

class ReferencePainter:
    """The address painter as a dict of segments, walked one segment at a time."""

    def __init__(self):
        self.starts, self.segments = [], {}  # sorted starts; start -> (end, owner)

    def paint(self, lo, hi, owner):
        if hi <= lo:
            return set()
        starts, segments = self.starts, self.segments
        k = bisect.bisect_right(starts, lo) - 1
        if k < 0 or segments[starts[k]][0] <= lo:
            k += 1
        found, pieces = set(), []
        while k < len(starts) and starts[k] < hi:
            start = starts[k]
            end, previous = segments.pop(start)
            starts.pop(k)
            found.add(previous)
            if start < lo:
                pieces.append((start, lo, previous))
            if end > hi:
                pieces.append((hi, end, previous))
        for a, b, who in pieces + [(lo, hi, owner)]:
            bisect.insort(starts, a)
            segments[a] = (b, who)
        return found


class ReferenceHappensBefore:
    def __init__(self, program, dma_channels):
        commands, names = program.commands, list(program.queues)
        self.queue, self.position = [0] * len(commands), [0] * len(commands)
        self.followers = [[] for _ in commands]
        previous = [-1] * len(commands)
        self.serial = [not name.startswith("dma.") or dma_channels == 1 for name in names]
        for q, name in enumerate(names):
            ids = program.queues[name]
            for k, c in enumerate(ids):
                self.queue[c], self.position[c] = q, k
                if k:
                    previous[c] = ids[k - 1]
                    if self.serial[q]:
                        self.followers[ids[k - 1]].append(c)
        for c in commands:
            for w in c.waits:
                self.followers[w].append(c.id)
        self.clock = []
        for c in commands:
            clock = list(self.clock[previous[c.id]]) if previous[c.id] >= 0 else [-1] * len(names)
            for w in c.waits:
                if self.position[w] > clock[self.queue[w]]:
                    clock = list(map(max, clock, self.clock[w]))
            clock[self.queue[c.id]] = self.position[c.id]
            self.clock.append(clock)

    def ends_before(self, a, b):
        if a >= b:
            return False
        if self.queue[a] == self.queue[b] and self.serial[self.queue[a]]:
            return True
        clock = self.clock[b]
        return any(f == b or clock[self.queue[f]] >= self.position[f] for f in self.followers[a])

    def ordered(self, a, b):
        return self.ends_before(a, b) if a < b else self.ends_before(b, a)


def reference_find_race(program, dma_channels, who, tensor):
    hb = ReferenceHappensBefore(program, dma_channels)
    commands, users = program.commands, program.residency_users
    writers = [[] for _ in users]
    region = {}
    for c in commands:
        for a in c.writes:
            if not writers[a.residency] or writers[a.residency][-1] != c.id:
                writers[a.residency].append(c.id)
        for a in c.reads + c.writes:
            region.setdefault(a.residency, (a.offset, a.size, a.tensor))

    def where(r):
        offset, size, t = region[r]
        return f"{tensor(t)!r} at [{offset}, {offset + size})"

    line = [q if hb.serial[q] else -1 - c for c, q in enumerate(hb.queue)]
    for r, ws in enumerate(writers):
        for w in ws:
            for u in users[r]:
                if u == w or line[u] == line[w]:
                    continue
                if not hb.ordered(w, u):
                    if any(a.residency == r for a in commands[u].writes):
                        return f"{who(u)} and {who(w)} both write {where(r)} with no semaphore or queue order"
                    return (f"{who(u)}: reads {where(r)} with no semaphore or queue order after {who(w)}, "
                            f"which writes it: under some timing it reads before the data is there "
                            f"(a missing semaphore)")
    painter = ReferencePainter()
    for r in sorted((r for r, ws in enumerate(writers) if ws), key=lambda r: (writers[r][0], r)):
        lo, size, _ = region[r]
        found = painter.paint(lo, lo + size, r)
        found.discard(r)
        for p in sorted(found):
            for u in users[p]:
                for w in writers[r]:
                    if not (u < w and line[u] == line[w]) and not hb.ends_before(u, w):
                        return (f"{who(w)}: writes {where(r)}, overlapping {where(p)} which {who(u)} still "
                                f"uses: no semaphore or queue order makes it finish first, so under some "
                                f"timing this is an overwrite of live data (reuse across unordered "
                                f"commands, or an early free)")
    return None


# --- mutations of a safe program -------------------------------------------------------------

def drop_waits(program, rng, k):
    """``program`` with ``k`` semaphore waits, drawn at random, removed."""
    waits = [(c.id, w) for c in program.commands for w in c.waits]
    dropped = set(rng.sample(waits, min(k, len(waits))))
    commands = tuple(replace(c, waits=tuple(w for w in c.waits if (c.id, w) not in dropped))
                     if any((c.id, w) in dropped for w in c.waits) else c for c in program.commands)
    return replace(program, commands=commands)


def move_region(program, rng):
    """``program`` with every access to one residency moved onto another's offset (reuse of
    bytes nothing orders)."""
    offsets = {a.residency: a.offset for c in program.commands for a in c.reads + c.writes}
    moved, onto = rng.sample(sorted(offsets), 2)

    def shift(accesses):
        return tuple(replace(a, offset=offsets[onto]) if a.residency == moved else a for a in accesses)

    commands = tuple(replace(c, reads=shift(c.reads), writes=shift(c.writes)) for c in program.commands)
    return replace(program, commands=commands)


def mutants(program, rng, count):
    for i in range(count):
        if i % 3 == 2:
            yield move_region(program, rng)
        else:
            yield drop_waits(program, rng, rng.choice((1, 2, 5, 20)))


NAMES = dict(who=lambda c: f"command {c}", tensor=lambda t: f"t{t}")


def agree(program, channels):
    race = find_race(program, channels, **NAMES)
    assert race == reference_find_race(program, channels, **NAMES)
    return race


@pytest.fixture(scope="module")
def tiled_single_stream():
    """A real network, tiled and spilling (one stream): squeezenet at 64 KiB."""
    hw = load_hw("edge-npu")
    graph = load_graph("squeezenet1_0")
    return lower(plan_graph(graph, hw, budget=resolve_budget("64KiB", graph, hw)), hw)


@pytest.mark.parametrize("pairs_at_once", [races_module.PAIRS_AT_ONCE, 5])
def test_the_fast_check_finds_the_races_the_reference_finds(tiled_single_stream, pairs_at_once, monkeypatch):
    """Also with pairs tested a few at a time: the slices must find the same first race."""
    monkeypatch.setattr(races_module, "PAIRS_AT_ONCE", pairs_at_once)
    rng = random.Random(7)
    programs = [(tiled_single_stream, 2)]
    for graph, hw, plan, injected in seeded_cases(4, random.Random(3), sizes=(8, 18)):
        programs.append((lower(plan, hw, graph), hw.dma.channels))
        programs += [(case[1], hw.dma.channels) for case in injected.values() if case is not None]
    races, kinds = 0, set()
    for program, channels in programs:
        for candidate in [program, *mutants(program, rng, 12)]:
            for dma_channels in (channels, 1):
                race = agree(candidate, dma_channels)
                if race is not None:
                    races += 1
                    kinds.add("overwrite" if "overwrite of live data" in race else
                              "write/write" if "both write" in race else "read")
    assert races >= len(programs) * 6  # most mutants race: the messages compared are real ones
    assert {"overwrite", "read"} <= kinds


def test_the_painter_reports_the_previous_occupants_the_reference_does():
    rng = random.Random(11)
    for _ in range(200):
        fast, reference = AddressPainter(), ReferencePainter()
        for owner in range(rng.randint(0, 150)):
            lo = rng.randint(0, 90)
            hi = lo + rng.choice((rng.randint(-2, 40), 8, 16))  # empty, arbitrary, and repeated slots
            assert fast.paint(lo, hi, owner) == reference.paint(lo, hi, owner)


def test_offsets_past_int64_are_painted_exactly():
    """Two loads into overlapping regions with nothing ordering them, far past any int64 and
    near 0: the same race, with the same addresses, as the reference."""
    from npusim.plan.lower import Access, Command, Program

    for base in (0, 1 << 64):
        r0, r1 = Access(0, 0, base, 64), Access(1, 1, base + 32, 64)
        commands = (Command(0, "dma.load", "load", 0, tensor=0, nbytes=64, writes=(r0,)),
                    Command(1, "dma.load", "load", 0, tensor=1, nbytes=64, writes=(r1,)),
                    Command(2, "stream0", "compute", 0, op=0, reads=(r0, r1), waits=(0, 1)))
        program = Program("tiny", {"dma.load": (0, 1), "stream0": (2,)}, commands, ((0, 2), (1, 2)), 128, 1)
        race = agree(program, 2)
        assert race is not None and f"[{base + 32}, {base + 96})" in race
