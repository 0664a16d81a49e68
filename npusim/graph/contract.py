"""The trace contract: what a ``npusim-trace/1`` document must be before anything reads it.

``check_trace(data, source)`` is the one place a loaded trace is judged (``trace_io``
calls it for every file, before any analysis or planner runs), and returns the ``Graph``:

1. the JSON Schema ``npusim/schemas/trace.schema.json``: fields, types, integer bounds, at
   least one op (``docs/trace-format.md`` is written from it);
2. references: tensor names unique, every op input/output and view ``base``/``sources`` names
   a tensor of the trace, one producer per tensor, none for inputs and weights, no cycle
   (``npusim.graph.model``);
3. sizes: a tensor of at most ``MAX_TENSOR_BYTES``; a view of its base's itemsize and inside
   it; a GEMM of at most ``MAX_COUNT`` MACs;
4. each op by its kind (``npusim.graph.ops.rules``): arity, attribute types, shape relations,
   ``gemm`` and ``macs`` as its shapes give them; a fused op's core and epilogue inputs;
5. the tiling stage's own attributes (``tile_of``, ``box``, ``k``) are not in a trace: tiles
   are derived from a plan's ``tiling`` and the untiled trace, never read from a file;
6. ops in a topological order: a file that lists an op before a producer of its inputs is
   reordered (the first ready op in file order first) with a warning and ``meta["reordered"]``.

Every violation is a ``TraceError`` of one line naming the file, the op or tensor, the field,
its value and what was expected. Op kinds without a rule (custom ops) get 1-3 and 5-6 only.
"""

from __future__ import annotations

import math
import sys

from npusim.errors import TraceError
from npusim.graph.analysis import topological
from npusim.graph.fusion import EPILOGUE_KINDS
from npusim.graph.model import Graph, build_graph
from npusim.graph.ops.rules import RULES, check_op
from npusim.graph.ops.shapes import Bad, unidirectional
from npusim.util.schema_check import SchemaViolation, check, load_schema, short

FORMAT = "npusim-trace/1"
SCHEMA = "trace.schema.json"
MAX_RANK = 32
MAX_TENSOR_BYTES = 1 << 40  # 1 TiB: beyond any NPU's DRAM; keeps every byte sum far from int64
MAX_COUNT = 1 << 62  # macs, vector_ops
#: Attributes only the tiling stage writes, on the tiled graphs it derives (npusim.graph.tiling).
TILE_ATTRS = ("tile_of", "box", "k")


def check_trace(data, source: str = "<trace>", warn=None) -> Graph:
    """The Graph of a trace document, or a one-line TraceError (see the module docstring)."""
    _check_schema(data, source)
    ops = data["ops"]
    _check_unique_ops(ops, source)
    graph = _build(data, ops, source)
    order = _topological_order(graph)
    if order != list(range(graph.n_ops)):
        graph = _reordered(data, graph, order, source, warn)
    for t in graph.tensors:
        _check_tensor(graph, t, source)
    for op in graph.ops:
        try:
            _check_op(graph, op)
        except Bad as bad:
            raise TraceError(_op_problem(op, bad, source)) from None
    return graph


def graph_from_records(name: str, tensors: list[dict], ops: list[dict], meta: dict | None = None) -> Graph:
    """The Graph of records a user builds in Python (``tensors`` and ``ops`` as a trace holds
    them, docs/trace-format.md), held to the trace contract as a file is: ``build_graph``
    alone checks references and cycles, not values (a negative ``macs`` gave negative energy)."""
    data = {"format": FORMAT, "name": name, "tensors": tensors, "ops": ops, **({"meta": meta} if meta else {})}
    return check_trace(data, source=f"graph {name!r}")


def _op_problem(op, bad: Bad, source: str) -> str:
    return f"{source}: op {short(op.name, 60)} ({_clip(op.kind)}): {bad.field} is {short(bad.value)}, expected {bad.expected}"


def trace_problems(data, source: str = "<trace>") -> list[str]:
    """Every problem of a trace document, one line each (``npusim doctor``): the fields first
    (a document whose fields are wrong stops there: nothing else can be read), then every
    tensor and every op, each on its own."""
    try:
        _check_schema(data, source)
        _check_unique_ops(data["ops"], source)
        graph = _build(data, data["ops"], source)
    except TraceError as exc:
        return [str(exc)]
    order = _topological_order(graph)
    if order != list(range(graph.n_ops)):
        graph = _reordered(data, graph, order, source, None)
    problems = []
    for t in graph.tensors:
        try:
            _check_tensor(graph, t, source)
        except TraceError as exc:
            problems.append(str(exc))
    for op in graph.ops:
        try:
            _check_op(graph, op)
        except Bad as bad:
            problems.append(_op_problem(op, bad, source))
    return problems


def _check_schema(data, source: str) -> None:
    try:
        check(data, load_schema(SCHEMA))
    except SchemaViolation as v:
        raise TraceError(f"{source}: {_record_label(data, v.path)}{v}") from None


def _record_label(data, path: tuple) -> str:
    """'op 'conv1' (Conv): ' for a path into ops[i], 'tensor 'x': ' into tensors[i], else ''."""
    if len(path) >= 2 and path[0] in ("ops", "tensors") and isinstance(path[1], int):
        record = data[path[0]][path[1]]
        if isinstance(record, dict) and isinstance(record.get("name"), str) and len(path) > 2:
            kind = f" ({_clip(record['kind'])})" if isinstance(record.get("kind"), str) else ""
            return f"{path[0][:-1]} {short(record['name'], 60)}{kind}: "
    return ""


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_unique_ops(ops: list, source: str) -> None:
    seen: dict[str, int] = {}
    for i, o in enumerate(ops):  # plans name ops: two ops with one name would be ambiguous
        if o["name"] in seen:
            raise TraceError(f"{source}: ops[{i}]: name {short(o['name'])} is already used by ops[{seen[o['name']]}]")
        seen[o["name"]] = i


def _build(data: dict, ops: list, source: str) -> Graph:
    try:
        return build_graph(data["name"], data["tensors"], ops, meta=data.get("meta") or {})
    except TraceError as exc:
        raise TraceError(f"{source}: {exc}") from None


def _topological_order(graph: Graph) -> list[int]:
    """Ops in file order where they may run so; else the first ready op in file order first."""
    preds = [set() for _ in graph.ops]
    for op in graph.ops:
        for t in op.inputs:
            tensor = graph.tensors[t]
            for p in ([tensor.producer] if tensor.producer is not None else []) + \
                     [graph.tensors[s].producer for s in tensor.sources]:
                if p is not None:
                    preds[op.id].add(p)
    if all(p < op for op, ps in enumerate(preds) for p in ps):
        return list(range(graph.n_ops))
    return topological(preds)  # complete: build_graph refused cycles


def _reordered(data: dict, graph: Graph, order: list[int], source: str, warn) -> Graph:
    first = next(i for i, op in enumerate(order) if op != i)
    late = graph.ops[order[first]]
    note = (f"ops reordered into a topological order: the file lists {short(graph.ops[first].name, 60)} before "
            f"{short(late.name, 60)}, which it depends on")
    (warn or (lambda m: print(f"npusim: warning: {m}", file=sys.stderr)))(f"{source}: {note}")
    ops = [data["ops"][i] for i in order]
    return build_graph(graph.name, data["tensors"], ops, meta={**graph.meta, "reordered": note})


def _check_tensor(graph: Graph, t, source: str) -> None:
    where = f"{source}: tensor {short(t.name, 60)}"
    size = math.prod(t.shape) * t.itemsize
    if size > MAX_TENSOR_BYTES:
        raise TraceError(f"{where}: shape {short(list(t.shape))} x itemsize {t.itemsize} is {size:,} bytes, "
                         f"expected at most {MAX_TENSOR_BYTES:,} (1 TiB)")
    if t.view is not None:
        base = graph.tensor_by_name.get(t.view.base)
        if base is None or base.view is not None:
            raise TraceError(f"{where}: field view.base is {short(t.view.base)}, expected the name of a tensor of the "
                             "trace that is not itself a view")
        if base.itemsize != t.itemsize or tuple(t.view.shape) != t.shape or len(t.view.strides) != len(t.shape):
            raise TraceError(f"{where}: field view is shape {list(t.view.shape)}, strides {list(t.view.strides)} of "
                             f"{base.name!r} (itemsize {base.itemsize}), expected the tensor's shape {list(t.shape)}, "
                             f"one stride per dim and its itemsize {t.itemsize}")
        last = t.view.offset + sum((n - 1) * s for n, s in zip(t.view.shape, t.view.strides))
        if last >= base.elements:
            raise TraceError(f"{where}: field view reaches element {last:,} of {base.name!r}, which has "
                             f"{base.elements:,}; expected a view inside its base")
    for s in t.sources:
        src = graph.tensors[s]
        if t.view is None or (src.view.base if src.view is not None else src.name) != t.view.base:
            raise TraceError(f"{where}: field sources names {src.name!r}, expected tensors whose DRAM copy the "
                             "view reads (its base, or views of its base)")


def _check_op(graph: Graph, op) -> None:
    attrs = op.attrs
    for name in TILE_ATTRS:
        if name in attrs:
            raise Bad(f"attrs.{name}", attrs[name], "no such attribute in a trace: the tile stage writes it on the "
                                                    "tiled graphs it derives from a plan's tiling")
    if "marker" in attrs and attrs["marker"] is not True:
        raise Bad("attrs.marker", attrs["marker"], "true (a liveness marker) or no such attribute")
    if op.gemm is not None:
        macs = op.gemm.batch * op.gemm.m * op.gemm.n * op.gemm.k
        if macs > MAX_COUNT or op.macs != macs:
            raise Bad("macs", op.macs, f"gemm's batch x m x n x k = {macs:,} (at most {MAX_COUNT:,})")
    elif op.macs:
        raise Bad("macs", op.macs, "0: an op without gemm does no work on the PE array")
    shape = [graph.tensors[t].shape for t in op.inputs]
    outs = [graph.tensors[t].shape for t in op.outputs]
    core = _fused_core(op, shape, outs)
    gemm = None if op.gemm is None else {"m": op.gemm.m, "n": op.gemm.n, "k": op.gemm.k, "batch": op.gemm.batch}
    check_op(op.kind, attrs, shape[:core], outs, gemm)


def _fused_core(op, ins: list, outs: list) -> int:
    """How many inputs the op itself reads: all, or up to ``epilogue_from`` for a fused op
    (``npusim.graph.fusion``), whose epilogue attributes and inputs are checked here."""
    if not any(k in op.attrs for k in ("epilogue", "epilogue_from", "epilogue_input_kinds")):
        return len(ins)
    attrs = op.attrs
    start, chain, kinds = attrs.get("epilogue_from"), attrs.get("epilogue"), attrs.get("epilogue_input_kinds", [])
    if op.kind not in RULES or op.gemm is None:
        raise Bad("attrs.epilogue", chain, "no epilogue: only GEMM-like ops (Conv, Gemm, MatMul) are fused")
    if not isinstance(start, int) or isinstance(start, bool) or not 1 <= start <= len(ins):
        raise Bad("attrs.epilogue_from", start, f"the index of the first epilogue input, from 1 to {len(ins)}")
    if not isinstance(chain, list) or not chain or any(k not in EPILOGUE_KINDS for k in chain):
        raise Bad("attrs.epilogue", chain, f"a list of element-wise kinds ({', '.join(sorted(EPILOGUE_KINDS))})")
    if not isinstance(kinds, list) or len(kinds) != len(ins) - start or any(k not in chain for k in kinds):
        raise Bad("attrs.epilogue_input_kinds", kinds, f"{len(ins) - start} kinds of the epilogue, one per input "
                                                       f"from {start}")
    for i, (shape, kind) in enumerate(zip(ins[start:], kinds), start):
        if kind == "BatchNormalization" and len(shape) == 1 and len(outs[0]) > 1:
            if shape[0] != outs[0][1]:
                raise Bad(f"inputs[{i}] shape", list(shape), f"[{outs[0][1]}] (one value per output channel)")
        else:
            unidirectional(f"inputs[{i}] shape", shape, outs[0])
    return start
