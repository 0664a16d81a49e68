"""A plan's residencies and transfers stored as columns (``ResidencyTable``, ``TransferTable``).

Why columns: a tiled plan has up to a million residencies and as many transfers. As one
slotted object each, with an int object per field past 256, they took ~200 MiB for
fcn_resnet50 at 64 KiB (896,000 residencies, 641,000 transfers); as columns ~50 MiB, and the
bulk readers (the validator, lowering, plan files, sorting) read whole columns as NumPy
arrays without an object per record. ``table[i]`` and iteration still give ``Residency`` and
``Transfer`` objects, made when asked and equal to the ones a planner made, for the many
readers that look at a few (and for hand-made plans in tests).

Columns are ``array.array``: ``int64`` for the integer fields, ``int8`` codes for a
transfer's ``kind`` and ``cause`` (into ``TRANSFER_KINDS`` and ``CAUSES``). ``column(name)``
views one as a NumPy array without copying it.

A plan may say anything (a hand edit, a fuzzer): a field that is not a plain ``int`` within
int64, or a kind or cause outside the known names, has no column to go in. ``table_of`` then
returns the records as they are (a tuple), and ``Plan`` keeps that: only the validator meets
such plans, and it reports them.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import chain
from operator import attrgetter

import numpy as np

from npusim.plan.model import CAUSES, TRANSFER_KINDS, Residency, Transfer, residency_key
from npusim.util.fast_init import twin_constructor

#: a transfer's kind and cause by name, as a TransferTable codes them
KIND_CODE = {kind: code for code, kind in enumerate(TRANSFER_KINDS)}
CAUSE_CODE = {cause: code for code, cause in enumerate(CAUSES)}
_CHUNK = 1 << 16  # records made at a time when iterating: bounds the lists of Python ints held


class RecordTable(Sequence):
    """Records of one slotted dataclass (``RECORD``) as columns, one per field in declaration
    order; ``CODES``: field -> the names its int8 codes stand for; ``sort_key``: the key
    ``sorted`` puts records in a plan's order by (None: their natural order)."""

    RECORD: type
    FIELDS: tuple[str, ...]
    CODES: dict[str, tuple[str, ...]] = {}
    sort_key = None
    __slots__ = ("columns",)
    _new = None  # the record's constructor, every field given (set per subclass)

    def __init__(self, columns: tuple[array, ...] | None = None) -> None:
        self.columns = columns if columns is not None else tuple(
            array("b" if name in self.CODES else "q") for name in self.FIELDS)

    @classmethod
    def from_records(cls, records) -> "RecordTable":
        """The table of a sequence of records; ValueError when one has a field no column can
        hold (module docstring)."""
        records = records if isinstance(records, (list, tuple)) else list(records)
        columns = []
        for name in cls.FIELDS:
            values = list(map(attrgetter(name), records))
            names = cls.CODES.get(name)
            if names is not None:
                code = {n: k for k, n in enumerate(names)}
                if set(map(type, values)) - {str} or not set(values) <= code.keys():
                    raise ValueError(f"a {cls.RECORD.__name__}'s {name} outside {names}")
                columns.append(array("b", map(code.__getitem__, values)))
                continue
            if set(map(type, values)) - {int}:
                raise ValueError(f"a {cls.RECORD.__name__}'s {name} that is not an int")
            try:
                columns.append(array("q", values))
            except OverflowError:
                raise ValueError(f"a {cls.RECORD.__name__}'s {name} past int64") from None
        return cls(tuple(columns))

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"record {i} out of range ({n} records)")
        return self._row(i)

    def _row(self, i: int):
        """Record ``i`` (``0 <= i < len``)."""
        raise NotImplementedError

    def __iter__(self):
        """The records in order, made a chunk at a time (no list of every field's values)."""
        return chain.from_iterable(map(self._chunk, range(0, len(self), _CHUNK)))

    def _chunk(self, start: int):
        return map(self._new, *(decoded_list(self, name, start, start + _CHUNK) for name in self.FIELDS))

    def column(self, name: str) -> np.ndarray:
        """One field as a NumPy view (int64; int8 codes for a coded field), not a copy."""
        values = self.columns[self.FIELDS.index(name)]
        return np.frombuffer(values, np.int8 if values.typecode == "b" else np.int64)

    def take(self, rows) -> "RecordTable":
        """The table of these rows (an int array), in that order."""
        rows = np.asarray(rows, dtype=np.intp)
        return type(self)(tuple(array(column.typecode, np.frombuffer(column, _DTYPE[column.typecode])[rows].tobytes())
                                for column in self.columns))

    def __eq__(self, other) -> bool:
        if isinstance(other, RecordTable):
            return type(other) is type(self) and self.columns == other.columns
        if isinstance(other, (tuple, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __add__(self, other):
        """A tuple of the records then ``other``'s (a hand edit of a plan adds one)."""
        return (*self, *other)

    def __radd__(self, other):
        return (*other, *self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} records)"

    def __reduce__(self):
        return type(self), (self.columns,)


_DTYPE = {"q": np.int64, "b": np.int8}


class ResidencyTable(RecordTable):
    """A plan's residencies as columns (``first``, ``last``, ``offset``, ``tensor``, ``size``)."""

    RECORD = Residency
    FIELDS = ("first", "last", "offset", "tensor", "size")
    __slots__ = ()
    _new = staticmethod(twin_constructor(Residency))

    def add(self, first: int, last: int, offset: int, tensor: int, size: int) -> None:
        """Append a residency (a planner's, without making its object)."""
        columns = self.columns
        columns[0].append(first)
        columns[1].append(last)
        columns[2].append(offset)
        columns[3].append(tensor)
        columns[4].append(size)

    def _row(self, i: int) -> Residency:
        first, last, offset, tensor, size = self.columns
        return self._new(first[i], last[i], offset[i], tensor[i], size[i])

    sort_key = staticmethod(residency_key)  # Residency objects sort by their fields

    def sorted(self) -> "ResidencyTable":
        """In the order ``sorted`` puts Residency objects: by their fields, in order."""
        return self.take(np.lexsort(tuple(self.column(name) for name in reversed(self.FIELDS))))


class TransferTable(RecordTable):
    """A plan's transfers as columns (``step``, ``kind``, ``tensor``, ``cause``, ``size``)."""

    RECORD = Transfer
    FIELDS = ("step", "kind", "tensor", "cause", "size")
    CODES = {"kind": TRANSFER_KINDS, "cause": CAUSES}
    __slots__ = ()
    _new = staticmethod(twin_constructor(Transfer))

    def add(self, step: int, kind: int, tensor: int, cause: int, size: int) -> None:
        """Append a transfer (a planner's, without making its object): ``kind`` and ``cause``
        as codes (``KIND_CODE``, ``CAUSE_CODE``)."""
        columns = self.columns
        columns[0].append(step)
        columns[1].append(kind)
        columns[2].append(tensor)
        columns[3].append(cause)
        columns[4].append(size)

    def _row(self, i: int) -> Transfer:
        step, kind, tensor, cause, size = self.columns
        return self._new(step[i], TRANSFER_KINDS[kind[i]], tensor[i], CAUSES[cause[i]], size[i])

    @staticmethod
    def sort_key(tr: Transfer) -> tuple:
        """A plan's order of transfers: by step, loads (before the op) before stores, tensor."""
        return tr.step, tr.kind != "load", tr.tensor

    def sorted(self) -> "TransferTable":
        """By (step, loads before stores, tensor), ties in table order: a plan's order of
        transfers (``sort_key``)."""
        store = self.column("kind") != TRANSFER_KINDS.index("load")
        return self.take(np.lexsort((self.column("tensor"), store, self.column("step"))))


def table_of(records, table: type[RecordTable]):
    """``records`` as a ``table`` (itself if it is one), or as a tuple of the records when one
    has a field no column can hold (module docstring)."""
    if isinstance(records, table):
        return records
    records = tuple(records)
    try:
        return table.from_records(records)
    except ValueError:
        return records


def field_lists(records, *names: str) -> list[list]:
    """Each named field of every record, as a list (in record order): from the columns of a
    table (a coded field as its names), else read from each record."""
    if isinstance(records, RecordTable):
        return [decoded_list(records, name) for name in names]
    return [list(map(attrgetter(name), records)) for name in names]


def decoded_list(table: RecordTable, name: str, start: int = 0, stop: int | None = None) -> list:
    """Rows ``start:stop`` of a field as a list (a coded field as its names)."""
    column = table.columns[table.FIELDS.index(name)]
    values = (column if start == 0 and stop is None else column[start:stop]).tolist()
    names = table.CODES.get(name)
    return values if names is None else list(map(names.__getitem__, values))


def sorted_records(records, table: type[RecordTable]):
    """``records`` in a plan's order (``table.sorted``) as a ``table``, or as a sorted tuple
    when one has a field no column can hold."""
    records = table_of(records, table)
    if isinstance(records, RecordTable):
        return records.sorted()
    return tuple(sorted(records, key=table.sort_key))
