"""A tiled graph's tensors and ops stored as columns (``TensorColumns``, ``OpColumns``).

Why columns: a tiled graph has one op per tile and one tensor per view a tile reads or
writes, hundreds of thousands of each (fcn_resnet50 at 64 KiB: 338,599 ops and 388,856
tensors). As one slotted object each, with its tuples of ids, its ``View``, and a dict of
attributes per tile holding a box of tuples, they took ~330 MiB, ~450 bytes a record. As
columns they take about a quarter of that, and the bulk readers (``Graph.arrays``, the
order check, the validator's and the cost model's passes) read whole columns as NumPy arrays
without an object per record. ``graph.tensors[i]`` and ``graph.ops[i]`` still give the
``Tensor`` and ``Op`` the tiled expansion described, made when asked and equal to the ones an
object graph holds, for the readers that look at a few, and iteration gives them all.

What is stored, per tensor: its name, shape (an index into the distinct shapes), dtype and
item size (an index into the distinct pairs), kind (a code into ``TENSOR_KINDS`` and
``TILED_KINDS``), producer (-1: none), consumers and sources (compressed rows), and its view
(the base's name by index, -1 for none; the offset; the shape and strides by index).

Per op: its name, kind (an index into the distinct kinds), inputs and outputs (compressed
rows), MACs, vector operations, Gemm (an index into the distinct Gemm objects, kept by
identity: a Gemm's loop nest does not take part in its equality) and attributes. A tile's
attributes (``npusim.graph.tiling``: ``tile_of``, ``box``, ``k``, with a core accumulator's
``acc`` and ``k_last``, the op's ``epilogue`` and the ``runs`` a GEMM-like op's tiles share)
are columns: the tiled op by index, the box as a compressed row of its bounds, the slice's
bounds, and two small codes. Any other op keeps its attributes dict as given.

A record whose fields no column can hold (an integer past int64, attributes of a tile that
are not the tiler's) makes ``columns_of`` return None; the graph then keeps objects.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import accumulate, chain, islice
from operator import itemgetter

import numpy as np

from npusim.graph.model import TENSOR_KINDS, TILED_KINDS, Op, Tensor, View
from npusim.util.fast_init import twin_constructor

KIND_NAMES = TENSOR_KINDS + TILED_KINDS
_KIND_CODE = {kind: code for code, kind in enumerate(KIND_NAMES)}
#: where a tile stands in a run of tiles sharing an operand (``tiling._mark_runs``), by code
RUN_CODES = (None, "first", "middle", "last")
_RUN_CODE = {name: code for code, name in enumerate(RUN_CODES) if name}
_NONE = -1
_new_tensor = twin_constructor(Tensor)
_new_op = twin_constructor(Op)
_new_view = twin_constructor(View)


def _interned(table: dict, values: list):
    """The index of ``value`` in ``values``, adding it the first time (``table``: value -> index)."""
    def index(value) -> int:
        found = table.get(value)
        if found is None:
            found = table[value] = len(values)
            values.append(value)
        return found
    return index


def _rows(lists) -> tuple[array, array]:
    """Compressed rows (ptr, idx) of int lists."""
    lists = lists if isinstance(lists, list) else list(lists)
    ptr = array("q", [0])
    ptr.extend(accumulate(map(len, lists)))
    return ptr, array("q", chain.from_iterable(lists))


class _Columns(Sequence):
    """What both tables share: a sequence of records made when asked, compared and pickled by
    their columns."""

    __slots__ = ()

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(k) for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"{type(self).__name__} index {i} out of range ({n} records)")
        return self._row(i)

    def __iter__(self):
        return map(self._row, range(len(self)))

    def __eq__(self, other) -> bool:
        if isinstance(other, type(self)) and self._state() == other._state():
            return True
        if isinstance(other, (Sequence)) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} records)"

    def __reduce__(self):
        return type(self)._from_state, (self._state(),)

    @classmethod
    def _from_state(cls, state):
        table = object.__new__(cls)
        for name, value in zip(cls.__slots__, state):
            object.__setattr__(table, name, value)
        return table

    def _state(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def column(self, name: str) -> np.ndarray:
        """One integer column as a NumPy view (not a copy)."""
        values = getattr(self, name)
        return np.frombuffer(values, {"q": np.int64, "i": np.int32, "b": np.int8}[values.typecode])


class TensorColumns(_Columns):
    """A graph's tensors as columns (module docstring)."""

    __slots__ = ("names", "shapes", "shape", "dtypes", "dtype", "kind", "producer", "consumer_ptr", "consumers",
                 "source_ptr", "sources", "bases", "view_base", "view_offset", "view_shape", "strides", "view_strides")

    def __len__(self) -> int:
        return len(self.names)

    def _row(self, i: int) -> Tensor:
        base, producer, shapes = self.view_base[i], self.producer[i], self.shapes
        dtype, itemsize = self.dtypes[self.dtype[i]]
        consumer_ptr, source_ptr = self.consumer_ptr, self.source_ptr
        start, stop = source_ptr[i], source_ptr[i + 1]
        return _new_tensor(i, self.names[i], shapes[self.shape[i]], dtype, itemsize, KIND_NAMES[self.kind[i]],
                           None if producer < 0 else producer,
                           tuple(self.consumers[consumer_ptr[i]:consumer_ptr[i + 1]]),
                           None if base < 0 else _new_view(self.bases[base], self.view_offset[i],
                                                           shapes[self.view_shape[i]],
                                                           self.strides[self.view_strides[i]]),
                           tuple(self.sources[start:stop]) if stop > start else ())

    def field_lists(self, names) -> list[list]:
        """Each named ``Tensor`` field of every tensor, as a list (``model.tensor_fields``)."""
        return [self._field_list(name) for name in names]

    def _field_list(self, name: str) -> list:
        if name == "name":
            return self.names
        if name in ("shape", "kind"):
            return list(map((self.shapes if name == "shape" else KIND_NAMES).__getitem__, getattr(self, name)))
        if name in ("dtype", "itemsize"):
            return [pair[name == "itemsize"] for pair in map(self.dtypes.__getitem__, self.dtype)]
        if name == "producer":
            return [None if p < 0 else p for p in self.producer]
        if name in ("consumers", "sources"):
            ptr, idx = (self.consumer_ptr, self.consumers) if name == "consumers" else (self.source_ptr, self.sources)
            return row_tuples(ptr, idx)
        if name == "id":
            return list(range(len(self)))
        return [getattr(t, name) for t in self]

    def buffers(self) -> list[str]:
        """Per tensor, its view's base, else its own name (``model.buffer_names``)."""
        bases, names = self.bases, self.names
        return [names[i] if b < 0 else bases[b] for i, b in enumerate(self.view_base)]

    def view_at(self, i: int) -> View | None:
        """Tensor i's view (``Tensor.view``), without making the tensor."""
        base = self.view_base[i]
        return None if base < 0 else _new_view(self.bases[base], self.view_offset[i], self.shapes[self.view_shape[i]],
                                               self.strides[self.view_strides[i]])

    def view_extents(self) -> dict[str, int]:
        """Per base some view addresses, the bytes to the end of the furthest view's last
        element (``npusim.dram.model._view_extents``, by array)."""
        viewed = np.flatnonzero(self.column("view_base") >= 0)
        if not len(viewed):
            return {}
        n_strides = len(self.strides)
        pair = self.column("view_shape")[viewed].astype(np.int64) * n_strides + self.column("view_strides")[viewed]
        pairs, which = np.unique(pair, return_inverse=True)
        span = np.array([sum((n - 1) * s for n, s in zip(self.shapes[p // n_strides], self.strides[p % n_strides]))
                         for p in pairs.tolist()], dtype=np.int64)
        itemsize = np.array([size for _, size in self.dtypes], dtype=np.int64)[self.column("dtype")[viewed]]
        end = (self.column("view_offset")[viewed] + span[which] + 1) * itemsize
        base = self.column("view_base")[viewed]
        furthest = np.zeros(len(self.bases), dtype=np.int64)
        np.maximum.at(furthest, base, end)
        return {self.bases[b]: int(furthest[b]) for b in np.unique(base).tolist()}

    def sizes(self) -> np.ndarray:
        """Every tensor's bytes (``Tensor.size``: none for a core's accumulators), int64."""
        per_shape = np.array([_elements(s) for s in self.shapes], dtype=np.int64)
        itemsize = np.array([size for _, size in self.dtypes], dtype=np.int64)
        size = per_shape[self.column("shape")] * itemsize[self.column("dtype")]
        size[self.column("kind") == _KIND_CODE["accumulator"]] = 0
        return size

    @classmethod
    def of_records(cls, records: list[tuple], producer: list, consumers: tuple[array, array]) -> "TensorColumns | None":
        """The columns of ``graph_from_ids``'s tensor records (name, shape, dtype, itemsize,
        kind, view, sources) with these producers and consumers (rows: ptr, ops); None when one does not fit
        (a kind no code has, a view that is no ``View``, an offset past int64)."""
        table = object.__new__(cls)
        shapes, strides, dtypes, bases = [], [], [], []
        shape_of, strides_of = _interned({}, shapes), _interned({}, strides)
        dtype_of, base_of = _interned({}, dtypes), _interned({}, bases)
        n = len(records)
        names, views = list(map(itemgetter(0), records)), list(map(itemgetter(5), records))
        try:
            shape = array("i", map(shape_of, map(itemgetter(1), records)))
            dtype = array("i", map(dtype_of, map(itemgetter(2, 3), records)))
            kind = array("b", map(_KIND_CODE.__getitem__, map(itemgetter(4), records)))
            viewed = [i for i, view in enumerate(views) if view is not None]
            view_base, view_shape, view_strides = (array("i", [_NONE]) * n for _ in range(3))
            view_offset = array("q", bytes(8 * n))
            for i in viewed:
                view = views[i]
                if type(view) is not View or type(view.offset) is not int:
                    return None
                view_base[i] = base_of(view.base)
                view_offset[i] = view.offset
                view_shape[i] = shape_of(view.shape)
                view_strides[i] = strides_of(view.strides)
            consumer_ptr, consumers_idx = consumers
            source_ptr, sources = _rows(map(itemgetter(6), records))
            producers = (array("q", producer.astype(np.int64).tobytes()) if isinstance(producer, np.ndarray)
                         else array("q", [_NONE if p is None else p for p in producer]))
        except (KeyError, TypeError, OverflowError):
            return None
        for slot, value in (("names", names), ("shapes", shapes), ("shape", shape), ("dtypes", dtypes),
                            ("dtype", dtype), ("kind", kind), ("producer", producers),
                            ("consumer_ptr", consumer_ptr), ("consumers", consumers_idx), ("source_ptr", source_ptr),
                            ("sources", sources), ("bases", bases), ("view_base", view_base),
                            ("view_offset", view_offset), ("view_shape", view_shape), ("strides", strides),
                            ("view_strides", view_strides)):
            object.__setattr__(table, slot, value)
        return table


def row_tuples(ptr: array, idx: array) -> list[tuple]:
    """Each compressed row as a tuple (the empty ones the one empty tuple)."""
    entries, empty = iter(idx), ()
    return [tuple(islice(entries, n)) if n else empty for n in np.diff(np.frombuffer(ptr, np.int64)).tolist()]


def _elements(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class OpColumns(_Columns):
    """A graph's ops as columns (module docstring)."""

    __slots__ = ("names", "kinds", "kind", "input_ptr", "inputs", "output_ptr", "outputs", "macs", "vector_ops",
                 "gemms", "gemm", "attrs", "tiled_ops", "tile_of", "box_ptr", "box", "k_start", "k_stop", "acc",
                 "runs")

    def __len__(self) -> int:
        return len(self.names)

    def _row(self, i: int) -> Op:
        gemm = self.gemm[i]
        input_ptr, output_ptr = self.input_ptr, self.output_ptr
        return _new_op(i, self.names[i], self.kinds[self.kind[i]], tuple(self.inputs[input_ptr[i]:input_ptr[i + 1]]),
                       tuple(self.outputs[output_ptr[i]:output_ptr[i + 1]]), self.attributes(i), self.macs[i],
                       self.vector_ops[i], None if gemm < 0 else self.gemms[gemm])

    def field_lists(self, names) -> list[list]:
        """Each named ``Op`` field of every op, as a list (``model.op_fields``)."""
        return [self._field_list(name) for name in names]

    def _field_list(self, name: str) -> list:
        if name == "name":
            return self.names
        if name == "kind":
            return list(map(self.kinds.__getitem__, self.kind))
        if name in ("macs", "vector_ops"):
            return getattr(self, name).tolist()
        if name == "gemm":
            gemms = self.gemms
            return [None if g < 0 else gemms[g] for g in self.gemm]
        if name in ("inputs", "outputs"):
            return row_tuples(getattr(self, name[:-1] + "_ptr"), getattr(self, name))
        if name == "attrs":
            return list(map(self.attributes, range(len(self))))
        if name == "id":
            return list(range(len(self)))
        return [getattr(op, name) for op in self]

    def origins(self) -> list[str]:
        """Per op, the op it stands for: a tile's ``tile_of``, else its own name (``model.op_origins``)."""
        tiled, names, attrs = self.tiled_ops, self.names, self.attrs
        return [tiled[t][0] if t >= 0 else attrs[i].get("tile_of", names[i]) if attrs[i] else names[i]
                for i, t in enumerate(self.tile_of)]

    def attributes(self, i: int) -> dict:
        """Op i's attributes: a tile's made from its columns, in the order the tiler writes
        them (``npusim.graph.tiling._add_tiles``), any other op's dict as given."""
        tiled = self.tile_of[i]
        if tiled < 0:
            return self.attrs[i]
        box = self.box[self.box_ptr[i]:self.box_ptr[i + 1]]
        start = self.k_start[i]
        return _tile_dict(self.tiled_ops[tiled], tuple(zip(box[::2], box[1::2])),
                          None if start < 0 else (start, self.k_stop[i]), self.acc[i], self.runs[i])

    @classmethod
    def of_records(cls, records: list[tuple]) -> "OpColumns | None":
        """The columns of ``graph_from_ids``'s op records (name, kind, inputs, outputs, attrs,
        macs, vector_ops, gemm); None when one does not fit (module docstring)."""
        builder = OpColumnsBuilder()
        for record in records:
            builder.append(record)
        return builder.build()


class OpColumnsBuilder:
    """``OpColumns`` made op by op: the tiled expansion appends each op to it (``append``, a
    ``graph_from_ids`` record), and no record is kept. An op no column holds (module
    docstring) turns it into the list of records so far (``overflow``), which ``build``
    answers with None and ``graph_from_ids`` keeps as objects."""

    def __init__(self) -> None:
        self.names, self.kinds, self.gemms, self.tiled_ops, self.attrs = [], [], [], [], []
        self._kind_of = _interned({}, self.kinds)
        # Gemms and epilogues by identity (kept alive in their lists): a Gemm's loop nest takes
        # no part in its equality, and an epilogue is a list
        self._gemm_index: dict[int, int] = {}  # id(gemm) -> index
        self._tiled_index: dict[tuple, int] = {}  # (tiled op, id(epilogue)) -> index
        self.kind, self.gemm, self.tile_of = array("i"), array("i"), array("i")
        self.input_ptr, self.inputs, self.output_ptr, self.outputs = array("q", [0]), array("q"), array("q", [0]), array("q")
        self.macs, self.vector_ops, self.k_start, self.k_stop = array("q"), array("q"), array("q"), array("q")
        self.box_ptr, self.box, self.acc, self.runs = array("q", [0]), array("q"), array("b"), array("b")
        self.overflow: list[tuple] | None = None

    def __len__(self) -> int:
        return len(self.names) if self.overflow is None else len(self.overflow)

    def append(self, record: tuple) -> None:
        """Add op ``len(self)``: a ``graph_from_ids`` record."""
        if self.overflow is not None:
            self.overflow.append(record)
            return
        name, kind, inputs, outputs, attrs, macs, vector_ops, gemm = record
        try:  # everything that may not fit, before any column grows
            kind = self._kind_of(kind)
            counts, inputs, outputs = array("q", (macs, vector_ops)), array("q", inputs), array("q", outputs)
            tile = _tile_attributes(attrs)
            if tile is not None:
                bounds, k_range = array("q", tile[1]), tile[2]
        except (TypeError, OverflowError):
            self.overflow = [self.record(i) for i in range(len(self.names))] + [record]
            return
        self.names.append(name)
        self.kind.append(kind)
        self.macs.append(counts[0])
        self.vector_ops.append(counts[1])
        self.inputs.extend(inputs)
        self.input_ptr.append(len(self.inputs))
        self.outputs.extend(outputs)
        self.output_ptr.append(len(self.outputs))
        if gemm is None:
            self.gemm.append(_NONE)
        else:
            found = self._gemm_index.get(id(gemm))
            if found is None:
                found = self._gemm_index[id(gemm)] = len(self.gemms)
                self.gemms.append(gemm)
            self.gemm.append(found)
        if tile is None:
            self.attrs.append(attrs)
            self.tile_of.append(_NONE)
            self.k_start.append(_NONE)
            self.k_stop.append(_NONE)
            self.acc.append(0)
            self.runs.append(0)
        else:
            tiled = tile[0]
            key = (tiled[0], id(tiled[1]))
            found = self._tiled_index.get(key)
            if found is None:
                found = self._tiled_index[key] = len(self.tiled_ops)
                self.tiled_ops.append(tiled)
            self.attrs.append(None)
            self.tile_of.append(found)
            self.box.extend(bounds)
            self.k_start.append(_NONE if k_range is None else k_range[0])
            self.k_stop.append(_NONE if k_range is None else k_range[1])
            self.acc.append(tile[3])
            self.runs.append(tile[4])
        self.box_ptr.append(len(self.box))

    def inputs_of(self, i: int) -> tuple[int, ...]:
        if self.overflow is not None:
            return tuple(self.overflow[i][2])
        return tuple(self.inputs[self.input_ptr[i]:self.input_ptr[i + 1]])

    def mark_run(self, i: int, operand: str, position: str) -> None:
        """Set where op i, a tile, stands in a run of tiles sharing ``operand`` ("a" or "b")."""
        if self.overflow is not None:
            attrs = self.overflow[i][4]
            if type(attrs) is dict:
                attrs["runs"] = {**attrs.get("runs", {}), operand: position}  # each tile's attrs are its own
            else:
                attrs.mark_run(operand, position)
            return
        shift = 0 if operand == "a" else 2
        self.runs[i] = self.runs[i] & ~(3 << shift) | _RUN_CODE[position] << shift

    def set_gemm(self, i: int, gemm) -> None:
        """Give op i another Gemm (a Conv's with its loop nest, ``graph_from_ids``)."""
        if self.overflow is not None:
            self.overflow[i] = (*self.overflow[i][:7], gemm)
            return
        self.gemm[i] = len(self.gemms)
        self.gemms.append(gemm)

    def record(self, i: int) -> tuple:
        """Op i as a ``graph_from_ids`` record (its attributes as the graph gives them back)."""
        if self.overflow is not None:
            return self.overflow[i]
        gemm = self.gemm[i]
        return (self.names[i], self.kinds[self.kind[i]], list(self.inputs[self.input_ptr[i]:self.input_ptr[i + 1]]),
                list(self.outputs[self.output_ptr[i]:self.output_ptr[i + 1]]), self._attributes(i), self.macs[i],
                self.vector_ops[i], None if gemm < 0 else self.gemms[gemm])

    def records(self) -> list[tuple]:
        return self.overflow if self.overflow is not None else [self.record(i) for i in range(len(self))]

    def _attributes(self, i: int) -> dict:
        return OpColumns.attributes(self, i)  # (the same columns under the same names)

    def build(self) -> "OpColumns | None":
        """The columns, or None when an op fits no column (``overflow``)."""
        if self.overflow is not None:
            return None
        return OpColumns._from_state(tuple(getattr(self, name) for name in OpColumns.__slots__))


def _tile_dict(tiled: tuple, box: tuple, k, acc: int, runs: int) -> dict:
    """A tile's attributes dict, keys in the tiler's order, from its tiled op (name, epilogue
    or None), box, reduction slice and acc and runs codes (``OpColumns``)."""
    name, epilogue = tiled
    attrs = {"tile_of": name, "box": box, "k": k}
    if acc:
        attrs["acc"] = "core"
        attrs["k_last"] = acc == 2
    if epilogue is not None:
        attrs["epilogue"] = epilogue
    if runs:
        attrs["runs"] = {operand: RUN_CODES[code] for operand, code in (("a", runs & 3), ("b", runs >> 2)) if code}
    return attrs


class TileAttrs:
    """A tile's attributes as the tiler makes them (``npusim.graph.tiling._add_tiles``), the
    fields ``OpColumns`` stores: no dict per tile while a graph is expanded (hundreds of
    thousands of them), and nothing to parse. ``tiled``: (the tiled op's name, its epilogue or
    None), one tuple per op; ``box``: a tuple of (start, stop) pairs; ``k``: the reduction
    slice or None; ``acc``: 0, or 1/2 for partial sums in the core's accumulators (2 on the
    last slice); ``runs``: the codes ``mark_run`` sets. ``as_dict()`` is the dict the graph
    gives back."""

    __slots__ = ("tiled", "box", "k", "acc", "runs")

    def __init__(self, tiled: tuple, box: tuple, k, acc: int = 0) -> None:
        self.tiled, self.box, self.k, self.acc, self.runs = tiled, box, k, acc, 0

    def mark_run(self, operand: str, position: str) -> None:
        """Set where this tile stands in a run of tiles sharing ``operand`` ("a" or "b")."""
        shift = 0 if operand == "a" else 2
        self.runs = self.runs & ~(3 << shift) | _RUN_CODE[position] << shift

    def as_dict(self) -> dict:
        return _tile_dict(self.tiled, self.box, self.k, self.acc, self.runs)

    def columns(self) -> tuple:
        """What ``_tile_attributes`` gives for ``as_dict()``."""
        return self.tiled, list(chain.from_iterable(self.box)), self.k, self.acc, self.runs


_TILE_KEYS = ("tile_of", "box", "k")


def _tile_attributes(attrs) -> tuple | None:
    """A tile's attributes as (tiled op and epilogue, box bounds, slice, acc code, runs code),
    or None unless ``attrs`` is exactly what the tiler writes (``OpColumns.attributes`` gives
    back an equal dict, its keys in the same order)."""
    if type(attrs) is TileAttrs:
        return attrs.columns()
    if type(attrs) is not dict or len(attrs) < 3:
        return None
    keys = list(attrs)
    if keys[:3] != list(_TILE_KEYS) or type(attrs["tile_of"]) is not str:
        return None
    box, k = attrs["box"], attrs["k"]
    if type(box) is not tuple or not all(type(r) is tuple and len(r) == 2 and type(r[0]) is int
                                         and type(r[1]) is int for r in box):
        return None
    if k is not None and not (type(k) is tuple and len(k) == 2 and type(k[0]) is int and type(k[1]) is int
                              and k[0] >= 0):
        return None
    rest = keys[3:]
    acc = 0
    if rest[:2] == ["acc", "k_last"]:
        if attrs["acc"] != "core" or type(attrs["k_last"]) is not bool:
            return None
        acc = 2 if attrs["k_last"] else 1
        rest = rest[2:]
    epilogue = None
    if rest[:1] == ["epilogue"]:
        epilogue = attrs["epilogue"]
        if epilogue is None:
            return None
        rest = rest[1:]
    runs = 0
    if rest[:1] == ["runs"]:
        given = attrs["runs"]
        if type(given) is not dict or not given or list(given) not in (["a"], ["b"], ["a", "b"]):
            return None
        code = {operand: _RUN_CODE.get(position) if type(position) is str else None
                for operand, position in given.items()}
        if None in code.values():
            return None
        runs = code.get("a", 0) | code.get("b", 0) << 2
        rest = rest[1:]
    if rest:
        return None
    return ((attrs["tile_of"], epilogue), list(chain.from_iterable(box)), k, acc, runs)
