"""Plan JSON (``npusim-plan/1``): tensors and ops by name, so a plan can be edited by hand.

::

    {"format": "npusim-plan/1", "graph": "resnet50", "capacity": 4194304, "alignment": 64,
     "order": [op names], "streams": {op name: stream} (ops not listed run on stream 0),
     "residencies": [{"tensor": name, "offset": int, "first": step, "last": step, "size": int}],
     "transfers": [{"step": int, "kind": "load"|"store", "tensor": name,
                    "cause": "compulsory"|"writeback"|"spill"|"retrieve"}],
     "dram": {DRAM buffer name: offset}, "tiling": {op name: tile spec (npusim.graph.tiling)},
     "fusion": {GEMM op name: [element-wise op names]} (npusim.graph.fusion; only when fused),
     "meta": {"planner": str, "options": {}, "solve_seconds": float, "status": str,
              "objective": number|null, "bound": number|null, "scope": str, "notes": [str],
              "stats": {}}}  (scope, notes and stats only when not empty)

``meta.solve_seconds`` is written only with ``timings=True`` (``npusim plan --timings``): it is
a wall-clock value, and without it the same inputs give a byte-identical file.

A residency's ``size`` defaults to the tensor's size rounded up to the alignment; a transfer
always moves the whole tensor. ``dram`` is keyed by DRAM buffer (``npusim.plan.dram``): a
tensor's name, or for tiles the name of the untiled tensor they are views of.
"""

from __future__ import annotations

import json
import zlib
from itertools import islice
from operator import attrgetter
from pathlib import Path

from npusim.util.atomic_io import atomic_open
from npusim.util.bounded_read import JSON_EXPANSION, TooLarge, json_cap, read_bounded
from npusim.util.finite_json import loads_finite
from npusim.errors import PlanError
from npusim.graph.analysis import aligned
from npusim.graph.model import Graph
from npusim.graph.tiling import check_spec
from npusim.plan.dram import known_buffers
from npusim.plan.model import CAUSES, STATUSES, TRANSFER_KINDS, Plan, PlanMeta, Residency, Transfer
from npusim.plan.records import RecordTable, ResidencyTable, TransferTable, decoded_list, sorted_records
from npusim.graph.fusion import fusion_problems
from npusim.plan.bound import BindError, BoundPlan, as_bound, bound_to, fused_graph, plan_graphs, require_plan_of
from npusim.util.schema_check import SchemaViolation, check, load_schema, short

FORMAT = "npusim-plan/1"
SCHEMA = "plan.schema.json"
MAX_PLAN_BYTES = 1 << 31  # a plan of 10 million tiles is about 1.5 GB of JSON


class _Streamed(list):
    """A JSON array whose items are made as json's encoder iterates it: a tiled plan has
    millions of residencies and transfers, and ``save_plan`` then holds neither their dicts nor
    the file's text at once (it peaked at 2.8 GB writing fcn_resnet50 at 64 KiB). Empty as a
    list: only iteration (and its length) give its items, which is all the encoder asks."""

    def __init__(self, count: int, items) -> None:
        super().__init__()
        self._count, self._items = count, items

    def __iter__(self):
        return self._items()

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0


def _rows(records, names: tuple[str, ...], chunk: int = 1 << 16):
    """The named fields of every record as tuples, in record order (a table's coded field as its
    names), a chunk of its columns at a time."""
    if isinstance(records, RecordTable):
        for start in range(0, len(records), chunk):
            yield from zip(*(decoded_list(records, name, start, start + chunk) for name in names))
    else:
        yield from map(attrgetter(*names), records)


def plan_to_dict(plan: Plan, graph: Graph | None = None, *, timings: bool = False, streamed: bool = False) -> dict:
    """The plan file's record of a bound plan (``graph``: only for a plan not bound yet); with
    ``streamed``, its residencies and transfers are made as they are encoded (``_Streamed``)."""
    graph = as_bound(plan, graph).bound_graph
    tname = [t.name for t in graph.tensors]
    oname = [o.name for o in graph.ops]

    def residencies():
        return ({"tensor": tname[t], "offset": offset, "first": first, "last": last, "size": size}
                for first, last, offset, t, size in _rows(plan.residencies, ResidencyTable.FIELDS))

    def transfers():
        return ({"step": step, "kind": kind, "tensor": tname[t], "cause": cause}
                for step, kind, t, cause in _rows(plan.transfers, ("step", "kind", "tensor", "cause")))

    def array(count, items):
        return _Streamed(count, items) if streamed else list(items())

    return {
        "format": FORMAT,
        "graph": plan.graph,
        "capacity": plan.capacity,
        "alignment": plan.alignment,
        "order": [oname[o] for o in plan.order],
        "streams": {oname[o]: s for o, s in enumerate(plan.streams) if s != 0},
        "residencies": array(len(plan.residencies), residencies),
        "transfers": array(len(plan.transfers), transfers),
        "dram": dict(sorted(plan.dram.items())),
        "tiling": dict(sorted(plan.tiling.items())),
        **({"fusion": {k: list(v) for k, v in sorted(plan.fusion.items())}} if plan.fusion else {}),
        "meta": {
            "planner": plan.meta.planner, "options": plan.meta.options,
            **({"solve_seconds": plan.meta.solve_seconds} if timings else {}), "status": plan.meta.status,
            "objective": plan.meta.objective, "bound": plan.meta.bound,
            **({"scope": plan.meta.scope} if plan.meta.scope else {}),
            **({"notes": list(plan.meta.notes)} if plan.meta.notes else {}),
            **({"stats": plan.meta.stats} if plan.meta.stats else {}),
        },
    }


def save_plan(plan: Plan, path: str | Path, graph: Graph | None = None, *, timings: bool = False) -> None:
    """Write the plan file: ``json.dumps(plan_to_dict(...), indent=1)``'s bytes, streamed."""
    with atomic_open(path, "w") as handle:
        write_plan(plan, handle, graph, timings=timings)


def write_plan(plan: Plan, handle, graph: Graph | None = None, *, timings: bool = False) -> None:
    """``save_plan`` into an open text file (``npusim plan -o -``: standard output)."""
    pieces = json.JSONEncoder(indent=1).iterencode(plan_to_dict(plan, graph, timings=timings, streamed=True))
    for text in iter(lambda: "".join(islice(pieces, 1 << 14)), ""):
        handle.write(text)
    handle.write("\n")


def _int(record: dict, key: str, where: str, minimum: int = 0) -> int:
    if key not in record:
        raise PlanError(f"{where}: missing field {key!r}")
    value = record[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PlanError(f"{where}: field {key!r} is {value!r}, expected an integer >= {minimum}")
    return value


#: Python's types of parsed JSON, by JSON's names (for a file that holds no object).
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def plan_from_dict(data: dict, graph: Graph, source: str = "<plan>") -> BoundPlan:
    """The plan a ``plan_to_dict`` record describes for ``graph``, bound to it (the one time a
    loaded plan's graphs are built: ``npusim.plan.bound``); PlanError names the first field that
    is wrong (checked in the order of the record's fields)."""
    if not isinstance(data, dict):
        what = "null" if data is None else f"a JSON {_JSON_TYPES.get(type(data), type(data).__name__)}"
        raise PlanError(f"{source}: the file holds {what}, expected a plan: a JSON object with "
                        f"\"format\": \"{FORMAT}\" (written by npusim plan -o)")
    if data.get("format") != FORMAT:
        got = data.get("format")
        if got is None:
            raise PlanError(f"{source}: no field 'format', expected 'format': {FORMAT!r} (a plan written by npusim plan -o)")
        raise PlanError(f"{source}: field 'format' is {short(got)}, expected {FORMAT!r}")
    try:  # the declared contract first: fields, types, bounded integers (npusim/schemas/)
        check(data, load_schema(SCHEMA))
    except SchemaViolation as violation:
        raise PlanError(f"{source}: {violation}") from None
    given = graph
    try:
        require_plan_of(data.get("graph"), graph)
    except BindError as exc:
        raise PlanError(f"{source}: {exc}") from None
    fusion = _fusion(data, graph, source)
    base = fused_graph(graph, fusion)
    tiling = _tiling(data, base, source)
    try:
        _, graph = plan_graphs(given, fusion, tiling, data.get("graph"), base)
    except BindError as exc:
        raise PlanError(f"{source}: {exc}") from None
    capacity = _int(data, "capacity", source, 1)
    alignment = _int(data, "alignment", source, 1)
    order, streams = _order_and_streams(data, graph, source)
    residencies = _residencies(data, graph, alignment, source)
    transfers = _transfers(data, graph, source)
    dram = _dram(data, graph, source)
    meta = _meta(data, source)
    plan = Plan(graph=graph.name, capacity=capacity, alignment=alignment, order=order,
                streams=streams, residencies=sorted_records(residencies, ResidencyTable),
                transfers=sorted_records(transfers, TransferTable), dram=dram,
                tiling=dict(tiling), fusion=fusion, meta=meta)
    return bound_to(plan, graph, base, given)


def _fusion(data: dict, graph: Graph, source: str) -> dict:
    fusion = _mapping(data, "fusion", source)
    problems = fusion_problems(graph, fusion)
    if problems:
        raise PlanError(f"{source}: {problems[0]}")
    return {name: list(chain) for name, chain in fusion.items()}


def _tiling(data: dict, graph: Graph, source: str) -> dict:
    tiling = _mapping(data, "tiling", source)
    for n, spec in tiling.items():
        if n not in graph.op_by_name:
            raise PlanError(f"{source}: tiling names unknown op {n!r} (not in graph {graph.name!r})")
        check_spec(graph.op_by_name[n], graph, spec, f"{source}: tiling")
    return tiling


def _tensor_id(graph: Graph, name, where: str) -> int:
    if not isinstance(name, str) or name not in graph.tensor_by_name:
        raise PlanError(f"{where}: unknown tensor {name!r} (not in graph {graph.name!r})")
    return graph.tensor_by_name[name].id


def _op_id(graph: Graph, name, where: str) -> int:
    if not isinstance(name, str) or name not in graph.op_by_name:
        raise PlanError(f"{where}: unknown op {name!r} (not in graph {graph.name!r})")
    return graph.op_by_name[name].id


def _order_and_streams(data: dict, graph: Graph, source: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    order_names = data.get("order")
    if not isinstance(order_names, list):
        raise PlanError(f"{source}: field 'order' must be a list of op names")
    order = tuple(_op_id(graph, n, f"{source}: order[{i}]") for i, n in enumerate(order_names))
    streams = [0] * graph.n_ops
    for name, s in _mapping(data, "streams", source).items():
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise PlanError(f"{source}: streams[{name!r}] is {s!r}, expected an integer >= 0")
        streams[_op_id(graph, name, f"{source}: streams")] = s
    return order, tuple(streams)


def _residencies(data: dict, graph: Graph, alignment: int, source: str) -> list[Residency]:
    residencies = []
    for i, r in enumerate(_list(data, "residencies", source)):
        where = f"{source}: residencies[{i}]"
        if not isinstance(r, dict) or "tensor" not in r:
            raise PlanError(f"{where}: expected an object with a 'tensor' field")
        t = _tensor_id(graph, r["tensor"], where)
        size = r.get("size", aligned(graph.tensors[t].size, alignment))
        least = 0 if graph.tensors[t].kind == "accumulator" else 1  # partial sums in a core take no bytes
        residencies.append(Residency(
            first=_int(r, "first", where), last=_int(r, "last", where),
            offset=_int(r, "offset", where), tensor=t,
            size=_int({"size": size}, "size", where, least),
        ))
    return residencies


def _transfers(data: dict, graph: Graph, source: str) -> list[Transfer]:
    transfers = []
    for i, tr in enumerate(_list(data, "transfers", source)):
        where = f"{source}: transfers[{i}]"
        if not isinstance(tr, dict):
            raise PlanError(f"{where}: expected an object")
        if tr.get("kind") not in TRANSFER_KINDS:
            raise PlanError(f"{where}: kind is {tr.get('kind')!r}, expected one of {TRANSFER_KINDS}")
        if tr.get("cause") not in CAUSES:
            raise PlanError(f"{where}: cause is {tr.get('cause')!r}, expected one of {CAUSES}")
        if "tensor" not in tr:
            raise PlanError(f"{where}: missing field 'tensor'")
        t = _tensor_id(graph, tr["tensor"], where)
        transfers.append(Transfer(step=_int(tr, "step", where), kind=tr["kind"], tensor=t,
                                  cause=tr["cause"], size=graph.tensors[t].size))
    return transfers


def _dram(data: dict, graph: Graph, source: str) -> dict[str, int]:
    dram = {}
    buffers = known_buffers(graph)
    for n, off in _mapping(data, "dram", source).items():
        if n not in buffers:
            raise PlanError(f"{source}: dram: unknown tensor {n!r} (not a DRAM buffer of graph {graph.name!r}: "
                            "expected a tensor name, or the base tensor of tiles)")
        dram[n] = _int({"offset": off}, "offset", f"{source}: dram[{n!r}]")
    return dram


def _meta(data: dict, source: str) -> PlanMeta:
    m = _mapping(data, "meta", source)
    status = m.get("status", "hand_written")
    if status not in STATUSES:
        raise PlanError(f"{source}: meta.status is {status!r}, expected one of {STATUSES}")
    options = _mapping(m, "options", f"{source}: meta")
    seconds = m.get("solve_seconds") or 0.0
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
        raise PlanError(f"{source}: meta.solve_seconds is {seconds!r}, expected a number >= 0")
    for key in ("objective", "bound"):
        if m.get(key) is not None and (not isinstance(m[key], (int, float)) or isinstance(m[key], bool)):
            raise PlanError(f"{source}: meta.{key} is {m[key]!r}, expected a number or null")
    notes = m.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise PlanError(f"{source}: meta.notes is {notes!r}, expected a list of strings")
    return PlanMeta(planner=str(m.get("planner", "")), options=dict(options),
                    solve_seconds=float(seconds), status=status,
                    objective=m.get("objective"), bound=m.get("bound"), scope=str(m.get("scope", "")),
                    notes=tuple(notes), stats=dict(_mapping(m, "stats", f"{source}: meta")))


def transfer_sort_key(t: Transfer):
    # Within a step: stores (after the op) sort after loads (before the op).
    return TransferTable.sort_key(t)


def _mapping(data: dict, key: str, source: str) -> dict:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise PlanError(f"{source}: field {key!r} is {value!r}, expected an object")
    return value


def _list(data: dict, key: str, source: str) -> list:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise PlanError(f"{source}: field {key!r} must be a list")
    return value


def load_plan(path: str | Path, graph: Graph) -> BoundPlan:
    """The plan in ``path``, bound to ``graph`` (the graph it was made for, as given)."""
    path = Path(path)
    try:
        data = loads_finite(read_bounded(path, json_cap(MAX_PLAN_BYTES)))
    except TooLarge as big:
        raise PlanError(f"{path}: more than {big.cap:,} bytes of JSON{' once decompressed' if big.gzipped else ''} "
                        f"(at most {MAX_PLAN_BYTES:,}, or the memory limit / {JSON_EXPANSION}); refusing to read it") from None
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file") from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: a 5,000-digit integer
        raise PlanError(f"{path}: not a readable JSON plan: {exc}") from None
    return plan_from_dict(data, graph, str(path))
