"""Happens-before race detection: scratchpad accesses no semaphore or queue order sequences.

The timed run (``npusim.sim.engine``) flags a race only when, under the timing it happened to
draw, data is really overwritten while live or read before it is filled. This check is
timing-independent: it flags every pair of commands that touch overlapping scratchpad bytes,
at least one of them writing, that *some* legal timing of the machine can overlap. It finds
every such race of a Program in one pass, and never flags a Program whose accesses are all
ordered (a safe plan), whatever the durations.

Happens-before (HB) edges are exactly the orders the engine guarantees:

- a command starts after every command in its ``waits`` has completed (semaphores);
- a compute queue (and a DMA queue when ``dma.channels`` is 1: one transfer at a time) starts
  a command after the previous one completed;
- any other DMA queue only *issues* in order: a command starts after the previous one started.

A command's accesses last from its start (claims, read checks) to its end (fill, release),
so command A is ordered before command B when A's end HB B's start. Starts on every queue are
totally ordered, so each command gets a vector clock ``clock[c][q]``: the position on queue
``q`` of the last command whose start HB (or is) the start of ``c``. The end of A HB the start
of B exactly when B is, or starts after the start of, some command that follows A's end
directly: a waiter of A, or A's successor on a serial queue.

Which pairs are checked (conflicts are transitive, so this is enough):

- within a residency: every writer and every other command touching it must be ordered (a
  read may otherwise see the region before it is filled);
- across residencies: painting the residencies that are written onto the address space in
  order of their first write, each one's previous occupants (per byte) must be done (every
  command touching them ended) before any of its writers start (else live data may be
  overwritten, or freed early).
"""

from __future__ import annotations

from collections.abc import Callable

from npusim.errors import SimulationError
from npusim.plan.lower import Program
from npusim.plan.painting import AddressPainter


class HappensBefore:
    """The HB order of a Program's commands (see the module docstring)."""

    def __init__(self, program: Program, dma_channels: int) -> None:
        commands = program.commands
        names = list(program.queues)
        self.queue = [0] * len(commands)
        self.position = [0] * len(commands)
        self.followers: list[list[int]] = [[] for _ in commands]  # commands right after a command's end
        previous = [-1] * len(commands)
        self.serial = [not name.startswith("dma.") or dma_channels == 1 for name in names]
        for q, name in enumerate(names):
            ids = program.queues[name]
            serial = self.serial[q]
            for k, c in enumerate(ids):
                self.queue[c], self.position[c] = q, k
                if k:
                    previous[c] = ids[k - 1]
                    if serial:
                        self.followers[ids[k - 1]].append(c)
        for c in commands:
            for w in c.waits:
                self.followers[w].append(c.id)
        # Every edge goes from a lower command id to a higher one: ids are a topological order.
        # A wait at or before a position the clock already holds on its queue adds nothing: the
        # clock of the command there (merged whole) already covers every earlier one's.
        self.clock: list[list[int]] = []
        queue, position, clocks = self.queue, self.position, self.clock
        for c in commands:
            clock = list(clocks[previous[c.id]]) if previous[c.id] >= 0 else [-1] * len(names)
            for w in c.waits:
                if position[w] > clock[queue[w]]:
                    clock = list(map(max, clock, clocks[w]))
            clock[queue[c.id]] = position[c.id]
            clocks.append(clock)

    def ends_before(self, a: int, b: int) -> bool:
        """Does ``a`` complete before ``b`` starts, in every timing?"""
        if a >= b:
            return False
        q = self.queue[a]
        if q == self.queue[b] and self.serial[q]:
            return True  # the common case, answered without the clocks
        clock, queue, position = self.clock[b], self.queue, self.position
        for f in self.followers[a]:
            if f == b or clock[queue[f]] >= position[f]:
                return True
        return False

    def ordered(self, a: int, b: int) -> bool:
        return self.ends_before(a, b) if a < b else self.ends_before(b, a)


def find_race(program: Program, dma_channels: int, who: Callable[[int], str],
              tensor: Callable[[int], str]) -> str | None:
    """A description of the first race of ``program`` (module docstring), or None.

    ``who(command id)`` and ``tensor(tensor id)`` name things in the message."""
    hb = HappensBefore(program, dma_channels)
    commands = program.commands
    users = program.residency_users
    writers: list[list[int]] = [[] for _ in users]
    region: dict[int, tuple[int, int, int]] = {}  # residency -> (offset, size, tensor)
    for c in commands:
        for a in c.writes:
            if not writers[a.residency] or writers[a.residency][-1] != c.id:
                writers[a.residency].append(c.id)
        for a in c.reads + c.writes:
            region.setdefault(a.residency, (a.offset, a.size, a.tensor))

    def where(r: int) -> str:
        offset, size, t = region[r]
        return f"{tensor(t)!r} at [{offset}, {offset + size})"

    # ends_before's common case answered inline: two commands of one serial queue are ordered
    # (the earlier ends first); a command of a non-serial queue gets a line of its own (-1 - id)
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
    for r, previous in _previous_occupants(writers, region):
        for p in previous:
            for u in users[p]:
                for w in writers[r]:
                    if not (u < w and line[u] == line[w]) and not hb.ends_before(u, w):
                        return (f"{who(w)}: writes {where(r)}, overlapping {where(p)} which {who(u)} still "
                                f"uses: no semaphore or queue order makes it finish first, so under some "
                                f"timing this is an overwrite of live data (reuse across unordered "
                                f"commands, or an early free)")
    return None


def _previous_occupants(writers, region):
    """(residency, the residencies that held any of its bytes just before it), for every
    written residency, painted onto the address space in order of first write."""
    painter = AddressPainter()
    for r in sorted((r for r, ws in enumerate(writers) if ws), key=lambda r: (writers[r][0], r)):
        lo, size, _ = region[r]
        found = painter.paint(lo, lo + size, r)
        found.discard(r)
        if found:
            yield r, sorted(found)


def check_races(program: Program, dma_channels: int, who: Callable[[int], str],
                tensor: Callable[[int], str]) -> None:
    """Raise ``SimulationError`` naming the first race of ``program``, if any."""
    race = find_race(program, dma_channels, who, tensor)
    if race is not None:
        raise SimulationError(f"race (happens-before check, timing-independent): {race}")
