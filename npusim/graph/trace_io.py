"""The native trace format, ``npusim-trace/1``: a graph as JSON (optionally gzipped).

::

    {
      "format": "npusim-trace/1",
      "name": "resnet50",
      "meta": {...provenance: source file, importer options...},
      "tensors": [ {"name": str, "shape": [int...], "dtype": "int8", "itemsize": 1,
                    "kind": "input"|"weight"|"activation"|"output"}, ... ],
      "ops": [ {"name": str, "kind": "Conv", "inputs": [tensor names], "outputs": [...],
                "attrs": {...}, "macs": int, "vector_ops": int,
                "gemm": {"m": int, "n": int, "k": int, "batch": int} | null}, ... ]
    }

The op list is in the model's definition order (the default schedule). Producers and
consumers are derived, not stored, so they cannot disagree.
"""

from __future__ import annotations

import gzip
import json
import math
import reprlib
import zlib
from pathlib import Path

from npusim.atomic_io import atomic_open, atomic_write_text
from npusim.errors import TraceError
from npusim.graph.model import TENSOR_KINDS, Graph, build_graph

FORMAT = "npusim-trace/1"

# Limits that keep a hostile or corrupt file from exhausting memory or overflowing int64
# arithmetic downstream (numpy sizes, byte sums); real networks are far below them.
MAX_TRACE_BYTES = 1 << 30  # decompressed JSON text
MAX_RANK = 32
MAX_TENSOR_BYTES = 1 << 48  # 256 TiB
MAX_COUNT = 1 << 62  # macs, vector_ops, gemm dimensions, view offsets and strides


def graph_to_dict(graph: Graph) -> dict:
    names = [t.name for t in graph.tensors]
    return {
        "format": FORMAT,
        "name": graph.name,
        "meta": graph.meta,
        "tensors": [_tensor_record(t, names) for t in graph.tensors],
        "ops": [
            {
                "name": o.name, "kind": o.kind,
                "inputs": [names[t] for t in o.inputs],
                "outputs": [names[t] for t in o.outputs],
                "attrs": o.attrs, "macs": o.macs, "vector_ops": o.vector_ops,
                "gemm": None if o.gemm is None else {
                    "m": o.gemm.m, "n": o.gemm.n, "k": o.gemm.k, "batch": o.gemm.batch},
            }
            for o in graph.ops
        ],
    }


def _tensor_record(t, names: list[str]) -> dict:
    record = {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "itemsize": t.itemsize, "kind": t.kind}
    if t.view is not None:
        record["view"] = {"base": t.view.base, "offset": t.view.offset, "shape": list(t.view.shape),
                          "strides": list(t.view.strides)}
    if t.sources:
        record["sources"] = [names[s] for s in t.sources]
    return record


def save_trace(graph: Graph, path: str | Path) -> Path:
    """Write ``graph``; a path ending in ``.gz`` is gzipped (deterministically: mtime 0)."""
    path = Path(path)
    text = json.dumps(graph_to_dict(graph), separators=(",", ":"), sort_keys=False)
    if path.suffix == ".gz":
        with atomic_open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(text.encode())
    else:
        atomic_write_text(path, text)
    return path


def _require(record: dict, key: str, types, where: str):
    if not isinstance(record, dict):
        raise TraceError(f"{where}: expected an object, got {type(record).__name__}")
    if key not in record:
        raise TraceError(f"{where}: missing field {key!r}")
    value = record[key]
    if not isinstance(value, types) or isinstance(value, bool):
        names = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise TraceError(f"{where}: field {key!r} is {value!r}, expected {names}")
    return value


def graph_from_dict(data: dict, source: str = "<trace>") -> Graph:
    if not isinstance(data, dict):
        raise TraceError(f"{source}: expected a JSON object at the top level")
    fmt = data.get("format")
    if fmt != FORMAT:
        raise TraceError(f"{source}: field 'format' is {fmt!r}, expected {FORMAT!r}")
    name = _require(data, "name", str, source)
    tensors = _require(data, "tensors", list, source)
    ops = _require(data, "ops", list, source)
    if data.get("meta") is not None and not isinstance(data["meta"], dict):
        raise TraceError(f"{source}: field 'meta' is {_short(data['meta'])}, expected an object or null")
    for i, t in enumerate(tensors):
        where = f"{source}: tensors[{i}]"
        _require(t, "name", str, where)
        shape = _require(t, "shape", list, where)
        if len(shape) > MAX_RANK:
            raise TraceError(f"{where} ({t['name']!r}): shape has rank {len(shape)}, expected at most {MAX_RANK}")
        if any(not _is_int(d) or d <= 0 for d in shape):
            raise TraceError(f"{where} ({t['name']!r}): shape {_short(shape)} must list positive integers")
        _require(t, "dtype", str, where)
        if _require(t, "itemsize", int, where) <= 0:
            raise TraceError(f"{where} ({t['name']!r}): itemsize {t['itemsize']} must be > 0")
        if math.prod(shape) * t["itemsize"] > MAX_TENSOR_BYTES:
            raise TraceError(f"{where} ({t['name']!r}): shape {_short(shape)} x itemsize {t['itemsize']} is "
                             f"{math.prod(shape) * t['itemsize']:.3g} bytes, expected at most {MAX_TENSOR_BYTES}")
        if _require(t, "kind", str, where) not in TENSOR_KINDS:
            raise TraceError(f"{where} ({t['name']!r}): kind {t['kind']!r}, expected one of {TENSOR_KINDS}")
        if t.get("view") is not None:
            _check_view(t["view"], f"{where} ({t['name']!r}): view")
        sources = t.get("sources", [])
        if not isinstance(sources, list) or any(not isinstance(n, str) for n in sources):
            raise TraceError(f"{where} ({t['name']!r}): sources is {_short(sources)}, expected a list of tensor names")
    for i, o in enumerate(ops):
        where = f"{source}: ops[{i}]"
        _require(o, "name", str, where)
        _require(o, "kind", str, where)
        for key in ("inputs", "outputs"):
            refs = _require(o, key, list, where)
            if any(not isinstance(r, str) for r in refs):
                raise TraceError(f"{where} ({o['name']!r}): {key} must be tensor names")
        for key in ("macs", "vector_ops"):
            if key in o and (not _is_int(o[key]) or not 0 <= o[key] <= MAX_COUNT):
                raise TraceError(f"{where} ({o['name']!r}): {key} is {_short(o[key])}, expected an integer "
                                 f"from 0 to {MAX_COUNT}")
        if not isinstance(o.get("attrs", {}), dict):
            raise TraceError(f"{where} ({o['name']!r}): attrs is {_short(o['attrs'])}, expected an object")
        gemm = o.get("gemm")
        if gemm is not None:
            if not isinstance(gemm, dict) or set(gemm) != {"m", "n", "k", "batch"} or any(
                not _is_int(v) or not 0 < v <= MAX_COUNT for v in gemm.values()
            ):
                raise TraceError(f"{where} ({o['name']!r}): gemm {_short(gemm)}, expected m, n, k, batch > 0")
    _check_views_fit(tensors, source)
    seen_ops: dict[str, int] = {}
    for i, o in enumerate(ops):
        if o["name"] in seen_ops:  # plans name ops: two ops with one name would be ambiguous
            raise TraceError(f"{source}: ops[{i}]: name {o['name']!r} is already used by ops[{seen_ops[o['name']]}]")
        seen_ops[o["name"]] = i
    graph = build_graph(name, tensors, ops, meta=data.get("meta") or {})
    return graph


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_view(view, where: str) -> None:
    if not isinstance(view, dict) or set(view) != {"base", "offset", "shape", "strides"}:
        raise TraceError(f"{where} is {_short(view)}, expected an object with base, offset, shape, strides")
    if not isinstance(view["base"], str):
        raise TraceError(f"{where}: base is {_short(view['base'])}, expected a tensor name")
    if not _is_int(view["offset"]) or not 0 <= view["offset"] <= MAX_COUNT:
        raise TraceError(f"{where}: offset is {_short(view['offset'])}, expected an integer >= 0")
    shape, strides = view["shape"], view["strides"]
    if (not isinstance(shape, list) or not isinstance(strides, list) or len(shape) != len(strides)
            or len(shape) > MAX_RANK or any(not _is_int(d) or not 0 < d <= MAX_COUNT for d in shape)
            or any(not _is_int(d) or not 0 <= d <= MAX_COUNT for d in strides)):
        raise TraceError(f"{where}: shape {_short(shape)} and strides {_short(strides)}, expected lists of equal "
                         f"length (at most {MAX_RANK}) of positive dims and strides >= 0")


def _check_views_fit(tensors: list, source: str) -> None:
    """A view has its tensor's shape and addresses only elements of its base: what lowering
    renders (one chunk per contiguous run) is then bounded by the base's size, not by
    whatever shape a file states (a [2**31, 2**31] view of an 8-element tensor)."""
    elements = {t["name"]: math.prod(t["shape"]) for t in tensors}
    for i, t in enumerate(tensors):
        view = t.get("view")
        if view is None:
            continue
        where = f"{source}: tensors[{i}] ({t['name']!r}): view"
        if list(view["shape"]) != list(t["shape"]):
            raise TraceError(f"{where}: shape {_short(view['shape'])} differs from the tensor's shape "
                             f"{_short(t['shape'])}, expected the same")
        last = view["offset"] + sum((n - 1) * st for n, st in zip(view["shape"], view["strides"]))
        base = elements.get(view["base"])
        limit = base if base is not None else MAX_TENSOR_BYTES // t["itemsize"]
        if last >= limit:
            what = (f"base {view['base']!r} has {base:,} elements" if base is not None
                    else f"at most {limit:,} elements fit {MAX_TENSOR_BYTES:,} bytes")
            raise TraceError(f"{where}: reaches element {last:,} of its base, but {what}; expected a view "
                             "inside its base tensor")


def _short(value, limit: int = 80) -> str:
    text = reprlib.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_trace(path: str | Path) -> Graph:
    """Read a trace file (``.json`` or ``.json.gz``); every problem is a TraceError naming it."""
    path = Path(path)
    try:
        raw = _read_capped(path)
        data = json.loads(raw)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not valid JSON: {exc}") from None
    except RecursionError:
        raise TraceError(f"{path}: not valid JSON: nested too deeply") from None
    try:
        return graph_from_dict(data, str(path))
    except TraceError as exc:
        msg = str(exc)
        raise TraceError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None


def _read_capped(path: Path) -> bytes:
    """The file's bytes, gunzipped if gzipped, refusing more than MAX_TRACE_BYTES (a gzip bomb)."""
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
        chunks, total = [], 0
        while total <= MAX_TRACE_BYTES:  # in chunks: read(MAX_TRACE_BYTES) would allocate it all
            chunk = stream.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        data = b"".join(chunks)
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(f"{path}: more than MAX_TRACE_BYTES = {MAX_TRACE_BYTES} bytes of JSON"
                         f"{' once decompressed' if gzipped else ''}; refusing to read it")
    return data
