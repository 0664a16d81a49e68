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
from pathlib import Path

from npusim.errors import TraceError
from npusim.graph.model import TENSOR_KINDS, Graph, build_graph

FORMAT = "npusim-trace/1"


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
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(text.encode())
    else:
        path.write_text(text)
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
    for i, t in enumerate(tensors):
        where = f"{source}: tensors[{i}]"
        _require(t, "name", str, where)
        shape = _require(t, "shape", list, where)
        if any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in shape):
            raise TraceError(f"{where} ({t['name']!r}): shape {shape} must list positive integers")
        _require(t, "dtype", str, where)
        if _require(t, "itemsize", int, where) <= 0:
            raise TraceError(f"{where} ({t['name']!r}): itemsize {t['itemsize']} must be > 0")
        if _require(t, "kind", str, where) not in TENSOR_KINDS:
            raise TraceError(f"{where} ({t['name']!r}): kind {t['kind']!r}, expected one of {TENSOR_KINDS}")
    for i, o in enumerate(ops):
        where = f"{source}: ops[{i}]"
        _require(o, "name", str, where)
        _require(o, "kind", str, where)
        for key in ("inputs", "outputs"):
            refs = _require(o, key, list, where)
            if any(not isinstance(r, str) for r in refs):
                raise TraceError(f"{where} ({o['name']!r}): {key} must be tensor names")
        for key in ("macs", "vector_ops"):
            if key in o and (not isinstance(o[key], int) or o[key] < 0):
                raise TraceError(f"{where} ({o['name']!r}): {key} is {o[key]!r}, expected an integer >= 0")
        gemm = o.get("gemm")
        if gemm is not None:
            if not isinstance(gemm, dict) or set(gemm) != {"m", "n", "k", "batch"} or any(
                not isinstance(v, int) or v <= 0 for v in gemm.values()
            ):
                raise TraceError(f"{where} ({o['name']!r}): gemm {gemm!r}, expected m, n, k, batch > 0")
    graph = build_graph(name, tensors, ops, meta=data.get("meta") or {})
    return graph


def load_trace(path: str | Path) -> Graph:
    """Read a trace file (``.json`` or ``.json.gz``); every problem is a TraceError naming it."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not valid JSON: {exc}") from None
    try:
        return graph_from_dict(data, str(path))
    except TraceError as exc:
        msg = str(exc)
        raise TraceError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None
