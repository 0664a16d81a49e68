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
import zlib
from pathlib import Path

from npusim.util.atomic_io import atomic_open, atomic_write_text
from npusim.util.bounded_read import JSON_EXPANSION, TooLarge, json_cap, read_bounded
from npusim.util.finite_json import loads_finite
from npusim.errors import TraceError
from npusim.graph.contract import FORMAT, MAX_COUNT, MAX_RANK, MAX_TENSOR_BYTES, check_trace
from npusim.graph.model import Graph

__all__ = ["FORMAT", "MAX_COUNT", "MAX_RANK", "MAX_TENSOR_BYTES", "MAX_TRACE_BYTES", "graph_from_dict",
           "graph_to_dict", "load_trace", "save_trace"]

# Limit that keeps a hostile or corrupt file from exhausting memory (the contract bounds the rest).
MAX_TRACE_BYTES = 1 << 30  # decompressed JSON text


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


def graph_from_dict(data: dict, source: str = "<trace>", warn=None) -> Graph:
    """The Graph of a trace document, checked against the trace contract
    (``npusim.graph.contract.check_trace``; ``warn`` gets the note of a reordering)."""
    return check_trace(data, source, warn)


def load_trace(path: str | Path) -> Graph:
    """Read a trace file (``.json`` or ``.json.gz``); every problem is a TraceError naming it."""
    path = Path(path)
    data = read_trace_document(path)
    try:
        return graph_from_dict(data, str(path))
    except TraceError as exc:
        msg = str(exc)
        raise TraceError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None


def read_trace_document(path: Path):
    """A trace file's JSON document, unchecked (bounded read, gunzipped; TraceError naming the
    file when it cannot be read or parsed)."""
    try:
        raw = _read_capped(path)
        data = loads_finite(raw)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:  # ValueError: also a 5,000-digit integer, NaN
        raise TraceError(f"{path}: not valid JSON: {exc}") from None
    except RecursionError:
        raise TraceError(f"{path}: not valid JSON: nested too deeply") from None
    return data


def _read_capped(path: Path) -> bytes:
    """The file's bytes, gunzipped if gzipped, refusing more than MAX_TRACE_BYTES (or what the
    memory limit lets a parse hold) while it expands: a gzip bomb stops at the cap."""
    cap = json_cap(MAX_TRACE_BYTES)
    try:
        return read_bounded(path, cap)
    except TooLarge as big:
        raise TraceError(f"{path}: more than {big.cap:,} bytes of JSON{' once decompressed' if big.gzipped else ''} "
                         f"(MAX_TRACE_BYTES = {MAX_TRACE_BYTES:,}, or the memory limit / {JSON_EXPANSION}: "
                         "NPUSIM_MEMORY_LIMIT); refusing to read it") from None
