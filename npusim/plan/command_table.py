"""A Program's commands stored as columns (``CommandTable``), and the ``Command`` and ``Access``
each one reads back as.

Why columns: a tiled plan lowers to up to a million commands. As one ``Command`` object each,
with tuples of waits and accesses, they took ~500 bytes a command (fcn_resnet50 at 64 KiB:
~490 MiB for 980,000 commands) and a Python step per command for every consumer that asks
one question of all of them. As columns they take ~100 bytes a command, and the simulator's
bulk readers (the compiled loop, the race check, the accounting) read whole columns as NumPy
arrays without making an object per command. ``table[i]`` still gives command i as a
``Command``, made when asked and equal to the one lowering described, for the readers that
look at a few (the critical path, the timeline) and for the SimPy model of small programs.

Columns (command c is row c; its id is c):
- ``queue`` and ``kind``: codes into ``queue_names`` and ``KINDS``;
- ``step``, ``op``, ``tensor``, ``nbytes``: integers, ``NONE`` (-1) for an op or tensor a
  command has not;
- ``cause``, ``dram``, ``cost``: lists of the objects (``None`` for a compute);
- ``reads``, ``writes``, ``waits``, ``streamed``: compressed rows (``Rows``); reads and writes
  hold indices into ``accesses`` (lowering makes one Access per residency, so an index is the
  residency).

Integer columns are ``array.array`` (8 bytes an entry, read back as Python ints at list speed);
``column(name)`` views one as a NumPy array without copying it.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from itertools import chain

import numpy as np

from npusim.plan.records import ResidencyTable
from npusim.util.fast_init import twin_constructor

#: Command kinds by code (the compiled loop's ``COMPUTE, LOAD, STORE`` are these codes).
KINDS = ("compute", "load", "store")
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
NONE = -1  # an op or tensor a command has not


@dataclass(frozen=True, slots=True)
class Access:
    """A command's read or write of one residency's scratchpad region."""

    residency: int
    tensor: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Command:
    id: int
    queue: str
    kind: str  # compute | load | store
    step: int
    op: int | None = None
    tensor: int | None = None
    cause: str | None = None
    nbytes: int = 0
    dram: "DramView | None" = None  # noqa: F821 (npusim.plan.lower.DramView)
    cost: "TransferCost | None" = None  # noqa: F821 DMA commands: descriptors, chunks, bursts, bus bytes
    reads: tuple[Access, ...] = ()
    writes: tuple[Access, ...] = ()
    waits: tuple[int, ...] = ()
    streamed: tuple[int, ...] = ()  # waits satisfied by the first band of that command (npusim.plan.lower)


#: ``Command(...)`` and ``Access(...)`` with every field given, made faster (``npusim.util.fast_init``).
new_command = twin_constructor(Command)
new_access = twin_constructor(Access)


class Rows:
    """Rows of integers, compressed: row r is ``values[pointers[r]:pointers[r + 1]]``."""

    __slots__ = ("pointers", "values")

    def __init__(self, pointers: array | None = None, values: array | None = None) -> None:
        self.pointers = array("q", [0]) if pointers is None else pointers
        self.values = array("q") if values is None else values

    def add(self, row) -> None:
        """Append a row (an iterable of ints)."""
        self.values.extend(row)
        self.pointers.append(len(self.values))

    def __len__(self) -> int:
        return len(self.pointers) - 1

    def __getitem__(self, r):
        """Row ``r`` as a tuple, indexed as a tuple of the rows is (negative from the end, a
        slice a tuple of rows)."""
        if isinstance(r, slice):
            return tuple(map(self.__getitem__, range(*r.indices(len(self)))))
        pointers = self.pointers
        if r < 0:
            r += len(pointers) - 1
        if r < 0 or r >= len(pointers) - 1:
            raise IndexError("Rows index out of range")
        return tuple(self.values[pointers[r]:pointers[r + 1]])

    def lengths(self) -> np.ndarray:
        return np.diff(np.frombuffer(self.pointers, np.int64))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(pointers, values) as NumPy arrays (views, not copies)."""
        return np.frombuffer(self.pointers, np.int64), np.frombuffer(self.values, np.int64)

    def __iter__(self):
        return map(self.__getitem__, range(len(self)))

    def __eq__(self, other) -> bool:
        """Equal to Rows of the same rows, or to a tuple or list of them (a Program's
        ``residency_users`` made by hand)."""
        if isinstance(other, Rows):
            return self.pointers == other.pointers and self.values == other.values
        return (isinstance(other, (tuple, list)) and len(other) == len(self)
                and all(mine == tuple(theirs) for mine, theirs in zip(self, other)))

    __hash__ = None

    def __reduce__(self):
        return Rows, (self.pointers, self.values)


def rows_as_arrays(rows) -> tuple[np.ndarray, np.ndarray]:
    """(each row's length, the rows' values one after the other) of ``Rows`` (its columns) or
    of any sequence of sequences of ints (a Program made by hand)."""
    if isinstance(rows, Rows):
        return rows.lengths(), rows.arrays()[1]
    counts = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    return counts, np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(counts.sum()))


class AccessColumns(Sequence):
    """The Accesses of a table as columns (residency, tensor, offset, size): ``accesses[k]`` is
    made when asked. Lowering's, one per residency in plan order (so k is the residency): a
    tiled plan has up to a million, read by the simulator as whole columns (``field``)."""

    __slots__ = ("residency", "tensor", "offset", "size")

    def __init__(self, residency: array, tensor: array, offset: array, size: array) -> None:
        self.residency, self.tensor, self.offset, self.size = residency, tensor, offset, size

    @classmethod
    def of_residencies(cls, residencies) -> AccessColumns:
        """One Access per residency, its index the residency's (a ResidencyTable's columns
        shared, not copied: neither changes)."""
        if isinstance(residencies, ResidencyTable):
            return cls(array("q", range(len(residencies))),
                       *(residencies.columns[residencies.FIELDS.index(name)] for name in ("tensor", "offset", "size")))
        return cls(array("q", range(len(residencies))), array("q", map(attrgetter("tensor"), residencies)),
                   array("q", map(attrgetter("offset"), residencies)), array("q", map(attrgetter("size"), residencies)))

    def __len__(self) -> int:
        return len(self.residency)

    def __getitem__(self, k: int) -> Access:
        return new_access(self.residency[k], self.tensor[k], self.offset[k], self.size[k])

    def field(self, name: str) -> np.ndarray:
        """A column (``residency``, ``tensor``, ``offset``, ``size``) as a NumPy view."""
        return np.frombuffer(getattr(self, name), np.int64)

    def __reduce__(self):
        return AccessColumns, (self.residency, self.tensor, self.offset, self.size)


def access_field(accesses, name: str) -> np.ndarray:
    """One field of every access, as int64: the column of an ``AccessColumns``, else read from
    each Access (raises OverflowError for a value beyond int64)."""
    if isinstance(accesses, AccessColumns):
        return accesses.field(name)
    return np.fromiter(map(attrgetter(name), accesses), np.int64, len(accesses))


_INT_COLUMNS = ("step", "op", "tensor", "nbytes")


class CommandTable(Sequence):
    """A Program's commands as columns (module docstring); ``table[i]`` is command i."""

    __slots__ = ("queue_names", "queue", "kind", "step", "op", "tensor", "nbytes", "cause", "dram", "cost",
                 "accesses", "reads", "writes", "waits", "streamed")

    def __init__(self, queue_names=(), accesses=()) -> None:
        """``accesses``: Access objects, or an ``AccessColumns``."""
        self.queue_names = list(queue_names)
        self.queue, self.kind = array("b"), array("b")
        self.step, self.op, self.tensor, self.nbytes = array("q"), array("q"), array("q"), array("q")
        self.cause, self.dram, self.cost = [], [], []
        self.accesses = accesses if isinstance(accesses, AccessColumns) else list(accesses)
        self.reads, self.writes, self.waits, self.streamed = Rows(), Rows(), Rows(), Rows()

    @classmethod
    def from_commands(cls, commands) -> CommandTable:
        """The table of a sequence of ``Command`` objects (ids 0, 1, ... in order)."""
        table = cls()
        queue_code: dict[str, int] = {}
        access_index: dict[Access, int] = {}

        def indices(accesses):
            return [access_index.setdefault(a, len(access_index)) for a in accesses]

        for i, c in enumerate(commands):
            if c.id != i:
                raise ValueError(f"command {i} has id {c.id}: a Program's commands are numbered 0, 1, ... in order")
            code = queue_code.setdefault(c.queue, len(queue_code))
            table.append(code, KIND_CODES[c.kind], c.step, c.op, c.tensor, c.cause, c.nbytes, c.dram, c.cost,
                         indices(c.reads), indices(c.writes), c.waits, c.streamed)
        table.queue_names = list(queue_code)
        table.accesses = list(access_index)
        return table

    def append(self, queue: int, kind: int, step: int, op, tensor, cause, nbytes: int, dram, cost,
               reads, writes, waits, streamed) -> None:
        """Add the next command (queue and kind as codes, reads and writes as access indices)."""
        self.queue.append(queue)
        self.kind.append(kind)
        self.step.append(step)
        self.op.append(NONE if op is None else op)
        self.tensor.append(NONE if tensor is None else tensor)
        self.nbytes.append(nbytes)
        self.cause.append(cause)
        self.dram.append(dram)
        self.cost.append(cost)
        self.reads.add(reads)
        self.writes.add(writes)
        self.waits.add(waits)
        self.streamed.add(streamed)

    def __len__(self) -> int:
        return len(self.kind)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self.kind)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"command {i} out of range ({n} commands)")
        op, tensor, accesses = self.op[i], self.tensor[i], self.accesses
        return new_command(i, self.queue_names[self.queue[i]], KINDS[self.kind[i]], self.step[i],
                           None if op == NONE else op, None if tensor == NONE else tensor, self.cause[i],
                           self.nbytes[i], self.dram[i], self.cost[i],
                           tuple(map(accesses.__getitem__, self.reads[i])),
                           tuple(map(accesses.__getitem__, self.writes[i])), self.waits[i], self.streamed[i])

    def __iter__(self):
        return map(self.__getitem__, range(len(self.kind)))

    def transfers(self):
        """The loads and stores, as Commands, in command order."""
        return map(self.__getitem__, np.flatnonzero(self.column("kind") != KIND_CODES["compute"]).tolist())

    def column(self, name: str) -> np.ndarray:
        """An integer column (``queue``, ``kind``, ``step``, ``op``, ``tensor``, ``nbytes``) as a
        NumPy array: a view of the column, not a copy."""
        values = getattr(self, name)
        return np.frombuffer(values, np.int8 if values.typecode == "b" else np.int64)

    def queue_of(self, i: int) -> str:
        return self.queue_names[self.queue[i]]

    def kind_of(self, i: int) -> str:
        return KINDS[self.kind[i]]

    def access_columns(self, which: str) -> tuple[np.ndarray, ...]:
        """(pointers, residencies, offsets, sizes) of every command's ``reads`` or ``writes``."""
        pointers, index = getattr(self, which).arrays()
        return (pointers, *(access_field(self.accesses, name)[index] for name in ("residency", "offset", "size")))

    def __eq__(self, other) -> bool:
        if not isinstance(other, CommandTable):
            return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))
        if len(self) != len(other) or self.kind != other.kind:
            return False
        if [self.queue_names[q] for q in self.queue] != [other.queue_names[q] for q in other.queue]:
            return False
        if any(getattr(self, name) != getattr(other, name) for name in (*_INT_COLUMNS, "cause", "dram", "cost")):
            return False
        if self.waits != other.waits or self.streamed != other.streamed:
            return False
        return all(getattr(self, which).pointers == getattr(other, which).pointers
                   and list(map(self.accesses.__getitem__, getattr(self, which).values))
                   == list(map(other.accesses.__getitem__, getattr(other, which).values))
                   for which in ("reads", "writes"))

    __hash__ = None

    def __reduce__(self):
        return _rebuilt, (tuple(getattr(self, name) for name in self.__slots__),)


def _rebuilt(values: tuple) -> CommandTable:
    table = CommandTable.__new__(CommandTable)
    for name, value in zip(CommandTable.__slots__, values):
        setattr(table, name, value)
    return table
