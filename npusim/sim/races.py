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
directly: a waiter of A, or A's successor on a serial queue. Only the earliest such follower
on each queue matters (a later one on the same queue starts after it), so each command also
gets ``first_follower[a][q]``, the position of that follower on queue ``q``, and A's end HB B's
start exactly when ``clock[B][q] >= first_follower[A][q]`` for some queue ``q``.

Which pairs are checked (conflicts are transitive, so this is enough):

- within a residency: every writer and every other command touching it must be ordered (a
  read may otherwise see the region before it is filled);
- across residencies: painting the residencies that are written onto the address space in
  order of their first write, each one's previous occupants (per byte) must be done (every
  command touching them ended) before any of its writers start (else live data may be
  overwritten, or freed early).

Cost: every command is read once (its waits, its writes), then all is array work with NumPy.
The clocks are the fixed point of a few rounds over all commands at once
(``HappensBefore._vector_clocks``); every pair above is listed in the order a plain nested
loop would visit it (residency, writer, user; then written residency, previous occupant,
user, writer), tested a slice of about 260,000 at a time in that order (``PAIRS_AT_ONCE``:
the temporaries stay ~25 MB on a program of millions of commands), and the first unordered
one is the race reported. The
only Python loop left is the painting, one paint per written residency. Assumed of a
Program, as lowering makes them: command ``c`` is ``commands[c]``, and every access to a
residency names the residency's region. ``tests/test_races_reference.py`` keeps the plain
algorithm (a clock per command in id order, a nested loop stopping at the first race) and
checks both find the same first race on mutated programs.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from operator import attrgetter

import numpy as np

from npusim.errors import SimulationError
from npusim.plan.command_table import AccessColumns, rows_as_arrays
from npusim.plan.lower import Program
from npusim.plan.painting import AddressPainter

NO_FOLLOWER = np.iinfo(np.int64).max  # first_follower where no follower is on that queue: no clock reaches it


class HappensBefore:
    """The HB order of a Program's commands (see the module docstring); command ``c`` is
    ``program.commands[c]``. Arrays are indexed [queue, command]."""

    def __init__(self, program: Program, dma_channels: int) -> None:
        n, names = len(program.commands), list(program.queues)
        self.serial = [not name.startswith("dma.") or dma_channels == 1 for name in names]
        self.ids_on = [np.asarray(program.queues[name], dtype=np.int64) for name in names]
        self.queue = np.zeros(n, dtype=np.int64)  # a command on no queue counts as position 0 of queue 0
        self.position = np.zeros(n, dtype=np.int64)
        for q, ids in enumerate(self.ids_on):
            self.queue[ids], self.position[ids] = q, np.arange(len(ids))
        # Two commands on one serial queue are ordered (the earlier ends first) without the
        # clocks; a command of a non-serial queue gets a line of its own (-1 - id).
        serial = np.array(self.serial + [False], dtype=bool)[self.queue]
        self.line = np.where(serial, self.queue, -1 - np.arange(n))
        pointers, waited = program.wait_lists  # one entry per semaphore wait, in command order
        waiter = np.repeat(np.arange(n, dtype=np.int64), np.diff(pointers))
        self.first_follower = self._first_followers(n, waiter, waited)
        self.clock = self._vector_clocks(n, waiter, waited)

    def _first_followers(self, n: int, waiter: np.ndarray, waited: np.ndarray) -> np.ndarray:
        """[q, a]: position of the earliest command on queue ``q`` that starts after the end
        of ``a`` directly (a waiter, or its successor on a serial queue)."""
        first = np.full(len(self.serial) * n, NO_FOLLOWER, dtype=np.int64)
        for q, ids in enumerate(self.ids_on):
            if self.serial[q]:
                np.minimum.at(first, q * n + ids[:-1], np.arange(1, len(ids)))
        np.minimum.at(first, self.queue[waiter] * n + waited, self.position[waiter])
        return first.reshape(-1, n)

    def _vector_clocks(self, n: int, waiter: np.ndarray, waited: np.ndarray) -> np.ndarray:
        """[q, c]: ``clock[c][q]`` of the module docstring.

        A command's clock is the largest of its own position (on its queue), its queue
        predecessor's clock and the clocks of the commands it waits for; of those on one
        queue only the latest counts (a command's clock covers every earlier one's on its
        queue). The clocks are the fixed point of that rule, reached by rounds of array work:
        each round merges every command's waits with the clocks of the previous round, then
        carries the maximum along each queue (a running maximum). A chain of waits that
        leaves a queue and comes back to it is overtaken by that queue's own order, so round
        k has every clock a chain through k queues gives: a Program that can run needs at
        most one round per queue, plus one to see nothing change (3 on a one-stream plan)."""
        n_queues = len(self.serial)
        latest = np.full(n_queues * n, -1, dtype=np.int64)  # [q, c]: the latest position c waits for on q
        np.maximum.at(latest, self.queue[waited] * n + waiter, self.position[waited])
        latest = latest.reshape(n_queues, n)
        waits_on = []  # per queue: (the commands waiting for one of its commands, the latest such command)
        for q, ids in enumerate(self.ids_on):
            waiting = np.flatnonzero(latest[q] >= 0)
            waits_on.append((waiting, ids[latest[q, waiting]]))
        own = np.full((n_queues, n), -1, dtype=np.int64)
        own[self.queue, np.arange(n)] = self.position
        clock = own
        while True:  # the clocks only grow, and are bounded: this ends
            updated = own.copy()
            for waiting, waited_for in waits_on:
                updated[:, waiting] = np.maximum(updated[:, waiting], clock[:, waited_for])
            for ids in self.ids_on:
                updated[:, ids] = np.maximum.accumulate(updated[:, ids], axis=1)
            if np.array_equal(updated, clock):
                return clock
            clock = updated

    def ends_before_all(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``ends_before`` of every pair ``(a[i], b[i])`` at once."""
        reached = (self.clock[:, b] >= self.first_follower[:, a]).any(axis=0)
        return (a < b) & ((self.line[a] == self.line[b]) | reached)

    def ends_before(self, a: int, b: int) -> bool:
        """Does ``a`` complete before ``b`` starts, in every timing?"""
        return bool(self.ends_before_all(np.array([a]), np.array([b]))[0])

    def ordered(self, a: int, b: int) -> bool:
        return self.ends_before(a, b) if a < b else self.ends_before(b, a)


class _Residencies:
    """Who touches each residency of a Program and where it is: ``users`` and ``writers`` as
    flat arrays with per-residency bounds (``*_start[r]:*_start[r + 1]``), both in command
    order (a command writing a residency twice counts once), and where each written residency
    lies (``offset``, ``size``: those of its first write; every access to a residency names
    the residency's region). Each command's writes are read from the Program's table: write
    k (in command order) is of ``accesses[access_of[k]]``."""

    def __init__(self, program: Program) -> None:
        users = program.residency_users
        self.user_count, self.users = rows_as_arrays(users)
        self.user_start = _starts(self.user_count)
        table = program.commands
        counts = table.writes.lengths()
        self.access_of, self.accesses = table.writes.arrays()[1], table.accesses
        if isinstance(self.accesses, AccessColumns):  # lowering's: columns already
            fields = np.stack([self.accesses.field(name) for name in ("residency", "offset", "size")], axis=1)
        else:
            values = list(chain.from_iterable(map(attrgetter("residency", "offset", "size"), self.accesses)))
            fits = not values or -(1 << 62) < min(values) and max(values) < 1 << 62  # else exact Python ints
            fields = np.array(values, dtype=np.int64 if fits else object).reshape(-1, 3)
        fields = fields[self.access_of]
        by_residency = np.argsort(fields[:, 0].astype(np.int64), kind="stable")  # command order kept within a residency
        residency = fields[by_residency, 0].astype(np.int64)
        command = np.repeat(np.arange(len(counts)), counts)[by_residency]
        first = np.ones(len(residency), dtype=bool)  # first write of its residency
        first[1:] = residency[1:] != residency[:-1]
        again = np.zeros(len(residency), dtype=bool)  # the same command writing it again
        again[1:] = ~first[1:] & (command[1:] == command[:-1])
        self.writers = command[~again]
        self.writer_count = np.bincount(residency[~again], minlength=len(users)).astype(np.int64)
        self.writer_start = _starts(self.writer_count)
        self.first_write = np.full(len(users), -1, dtype=np.int64)  # index in accesses, -1 if never written
        self.first_write[residency[first]] = by_residency[first]
        self.offset = np.zeros(len(users), dtype=fields.dtype)
        self.size = np.zeros(len(users), dtype=fields.dtype)
        self.offset[residency[first]] = fields[by_residency[first], 1]
        self.size[residency[first]] = fields[by_residency[first], 2]

    def where(self, r: int, tensor: Callable[[int], str]) -> str:
        a = self.accesses[self.access_of[self.first_write[r]]]
        return f"{tensor(a.tensor)!r} at [{a.offset}, {a.offset + a.size})"


def _starts(counts: np.ndarray) -> np.ndarray:
    starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    return starts


def _expand(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Indices ``starts[i] .. starts[i] + counts[i] - 1`` for every i, concatenated."""
    total = int(counts.sum())
    group_start = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + (np.arange(total, dtype=np.int64) - group_start)


def find_race(program: Program, dma_channels: int, who: Callable[[int], str],
              tensor: Callable[[int], str]) -> str | None:
    """A description of the first race of ``program`` (module docstring), or None.

    ``who(command id)`` and ``tensor(tensor id)`` name things in the message."""
    hb = HappensBefore(program, dma_channels)
    res = _Residencies(program)
    return (_unordered_within(program, hb, res, who, tensor)
            or _overwrite_of_live_data(hb, res, who, tensor))


#: Pairs tested at once (2**18: ~25 MB of temporaries, ~100 bytes a pair). A large tiled program has tens
#: of millions; tested in slices of whole items (writers, residency pairs) in order, so the
#: first unordered pair is still the first in the nested loop's order.
PAIRS_AT_ONCE = 1 << 18


def _slices(pairs: np.ndarray):
    """[lo, hi) ranges of items, in order, each holding ``PAIRS_AT_ONCE`` pairs at most (or
    one item): ``pairs[i]`` is item i's number of pairs."""
    limit, ends = PAIRS_AT_ONCE, np.cumsum(pairs)
    lo = 0
    while lo < len(pairs):
        base = int(ends[lo - 1]) if lo else 0
        hi = max(int(np.searchsorted(ends, base + limit, side="right")), lo + 1)
        yield lo, hi
        lo = hi


def _unordered_within(program, hb, res, who, tensor) -> str | None:
    """The first writer and other user of one residency that are not ordered (residency,
    writer, user in order), as a message."""
    residencies = np.repeat(np.arange(len(res.writer_count)), res.writer_count)  # one per writer
    for lo, hi in _slices(res.user_count[residencies]):
        residency, writers = residencies[lo:hi], res.writers[lo:hi]
        pairs = res.user_count[residency]
        w = np.repeat(writers, pairs)
        r = np.repeat(residency, pairs)
        u = res.users[_expand(res.user_start[residency], pairs)]
        checked = (u != w) & (hb.line[u] != hb.line[w])
        unordered = checked & ~(hb.ends_before_all(np.minimum(w, u), np.maximum(w, u)))
        if unordered.any():
            i = int(np.argmax(unordered))
            return _unordered_message(program, res, int(r[i]), int(w[i]), int(u[i]), who, tensor)
    return None


def _unordered_message(program, res, r: int, w: int, u: int, who, tensor) -> str:
    where = res.where(r, tensor)
    if any(a.residency == r for a in program.commands[u].writes):
        return f"{who(u)} and {who(w)} both write {where} with no semaphore or queue order"
    return (f"{who(u)}: reads {where} with no semaphore or queue order after {who(w)}, "
            f"which writes it: under some timing it reads before the data is there "
            f"(a missing semaphore)")


def _overwrite_of_live_data(hb, res, who, tensor) -> str | None:
    """The first user of a previous occupant that may still run when a writer of the new
    residency starts (written residency, previous occupant, user, writer in order), as a message."""
    all_new, all_old = _previous_occupants(res)
    all_pairs = res.user_count[all_old] * res.writer_count[all_new]
    for lo, hi in _slices(all_pairs):
        new, old, pairs = all_new[lo:hi], all_old[lo:hi], all_pairs[lo:hi]
        writers = res.writer_count[new]
        edge = np.repeat(np.arange(len(new)), pairs)
        k = np.arange(len(edge), dtype=np.int64) - np.repeat(np.cumsum(pairs) - pairs, pairs)  # index in the edge's pairs
        u = res.users[res.user_start[old[edge]] + k // writers[edge]]
        w = res.writers[res.writer_start[new[edge]] + k % writers[edge]]
        exempt = (u < w) & (hb.line[u] == hb.line[w])
        unordered = ~exempt & ~hb.ends_before_all(u, w)
        if unordered.any():
            i = int(np.argmax(unordered))
            return _overwrite_message(res, int(new[edge[i]]), int(old[edge[i]]), int(u[i]), int(w[i]), who, tensor)
    return None


def _overwrite_message(res, r: int, p: int, u: int, w: int, who, tensor) -> str:
    return (f"{who(w)}: writes {res.where(r, tensor)}, overlapping {res.where(p, tensor)} which {who(u)} still "
            f"uses: no semaphore or queue order makes it finish first, so under some "
            f"timing this is an overwrite of live data (reuse across unordered "
            f"commands, or an early free)")


def _previous_occupants(res: _Residencies) -> tuple[np.ndarray, np.ndarray]:
    """(residency, previous occupant) pairs: the residencies that held any of a written
    residency's bytes just before it, painted onto the address space in order of first
    write; by residency in that order, then by occupant."""
    written = np.flatnonzero(res.writer_count)
    written = written[np.lexsort((written, res.writers[res.writer_start[written]]))]
    lows = res.offset[written]
    counts, found = AddressPainter().paint_each(lows.tolist(), (lows + res.size[written]).tolist(), written.tolist())
    # the pairs as arrays, then by painting order and occupant (a residency is painted once:
    # it is never its own previous occupant)
    counts = np.array(counts, dtype=np.int64)
    new = np.repeat(written, counts)
    old = np.array(found, dtype=np.int64)
    order = np.lexsort((old, np.repeat(np.arange(len(counts)), counts)))
    new, old = new[order], old[order]
    other = new != old
    return new[other], old[other]


def check_races(program: Program, dma_channels: int, who: Callable[[int], str],
                tensor: Callable[[int], str]) -> None:
    """Raise ``SimulationError`` naming the first race of ``program``, if any."""
    raise_race(find_race(program, dma_channels, who, tensor))


def raise_race(race: str | None) -> None:
    """Raise ``SimulationError`` for a race ``find_race`` described (nothing for None)."""
    if race is not None:
        raise SimulationError(f"race (happens-before check, timing-independent): {race}")
