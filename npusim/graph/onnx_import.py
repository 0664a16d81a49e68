"""Import an ONNX model as a ``Graph``: tensors with static shapes, ops in definition order.

``import_onnx(path, dtype="int8")`` reads only the graph structure and shapes; weight data is
never needed (the public models are weight-free) and external data is not loaded.

Tensor kinds
    - graph inputs listed in the model metadata ``data_inputs`` (comma-separated) are ``input``;
      every other graph input is a ``weight``. Without that metadata, graph inputs that have an
      initializer are weights and the rest are inputs. Initializers that are not graph inputs
      are weights too.
    - outputs of ``Constant`` nodes (small shape operands, scalars) are ``weight`` tensors: the
      constant data lives in DRAM like a parameter. Constant nodes are not ops; their number is
      ``graph.meta["constant_nodes_as_weights"]``.
    - outputs of every other node are ``output`` if they are graph outputs, else ``activation``.
      (A graph output that is itself a graph input or a constant keeps its input/weight kind.)

Ops
    Every non-Constant node becomes one op, in ONNX node order; unknown op types are imported
    generically. Empty input/output names (omitted optional arguments) are skipped. An op is
    named after its node, or ``<OpType>_<index>`` (index = op position) when the node name is
    empty or already taken. ``attrs`` holds the node attributes as plain JSON values (bytes
    decoded, non-finite floats as strings, lists over 64 values summarised); tensor and graph
    attributes are recorded by presence only, e.g. ``{"value": "<tensor>"}``. A node of a
    non-default domain also gets ``attrs["domain"]``. Sub-graphs (If/Loop/Scan bodies) are not
    expanded. MACs, vector ops and GEMM mappings come from ``npusim.graph.ops.costs`` (see the
    table there).

Sizes
    Float tensors (FLOAT, FLOAT16, DOUBLE, BFLOAT16) take the ``dtype`` option: ``int8`` (1
    byte), ``fp16`` (2) or ``fp32`` (4). Other tensors keep their ONNX element type and size
    (int64 ids 8 bytes, bool masks 1, int32 4, 4-bit types rounded up to 1 byte).

Symbolic dimensions
    Exports of transformers name their variable dims (``batch``, ``seq``, ``past_len``) and often
    carry no intermediate shapes. ``dims={"batch": 1, "seq": 128}`` (``npusim import --dim
    batch=1``) binds named dims wherever they appear (inputs, outputs, value_info); then, when a
    tensor still has no static shape, ONNX shape inference (``onnx.shape_inference.infer_shapes``
    with data propagation, so Shape/Reshape chains resolve) fills the intermediate shapes from
    the bound inputs. A dim name given that the model does not use is an error; the dims still
    unbound after inference are all named in one error, with the flag that binds them.

Every problem is a ``TraceError`` naming the file, and the tensor and node when there is one:
unreadable or truncated files, tensors without a full static positive shape (scalars ``[]``
are fine: one element), string tensors, dangling references, a bad ``dtype`` option.
"""

from __future__ import annotations

import math
from pathlib import Path

from npusim.util.env_knobs import memory_limit
from npusim.errors import TraceError
from npusim.graph.model import Graph, build_graph
from npusim.graph.ops.costs import op_cost
from npusim.graph.contract import check_trace
from npusim.graph.trace_io import MAX_RANK, MAX_TENSOR_BYTES, graph_to_dict

IMPORTER = "npusim.graph.onnx_import"

#: The ``dtype`` option: bytes per element given to float tensors.
FLOAT_DTYPES = {"int8": 1, "fp16": 2, "fp32": 4}

# ONNX TensorProto element types (stable enum values, so onnx need not be imported here).
_FLOAT_ELEMENT_TYPES = {1: "FLOAT", 10: "FLOAT16", 11: "DOUBLE", 16: "BFLOAT16"}
_NATIVE_ELEMENT_TYPES = {  # element type -> (dtype name, bytes per element)
    2: ("uint8", 1), 3: ("int8", 1), 4: ("uint16", 2), 5: ("int16", 2), 6: ("int32", 4),
    7: ("int64", 8), 9: ("bool", 1), 12: ("uint32", 4), 13: ("uint64", 8),
    14: ("complex64", 8), 15: ("complex128", 16),
    17: ("float8e4m3fn", 1), 18: ("float8e4m3fnuz", 1), 19: ("float8e5m2", 1),
    20: ("float8e5m2fnuz", 1), 21: ("uint4", 1), 22: ("int4", 1), 23: ("float4e2m1", 1),
}
_STRING, _UNDEFINED = 8, 0

_MAX_ATTR_LIST = 64
#: Memory per byte of an ONNX file while it is read (the bytes, then the parsed protobuf).
PROTO_EXPANSION = 4  # longer attribute lists are summarised to keep traces small


def import_onnx(path: str | Path, dtype: str = "int8", dims: dict[str, int] | None = None) -> Graph:
    """Read an ONNX model file into a Graph (see the module docstring for the rules);
    ``dims`` binds symbolic dimensions by name."""
    path = Path(path)
    if dtype not in FLOAT_DTYPES:
        raise TraceError(
            f"{path}: dtype option {dtype!r} is not supported, expected one of {sorted(FLOAT_DTYPES)}"
        )
    model = _load_model(path)
    model = _with_static_shapes(model, path, dict(dims or {}))
    graph = _GraphBuilder(model, path, dtype).build()
    # A well-formed model gives a graph that satisfies the trace contract by construction; a
    # malformed one (a MatMul node with three inputs, value_info shapes no Conv gives) is
    # refused here as a trace file would be, before any planner reads it.
    return check_trace(graph_to_dict(graph), str(path))


def _with_static_shapes(model, path: Path, dims: dict[str, int]):
    """The model with ``dims`` bound and, if any tensor still lacks a static shape, ONNX shape
    inference run over it (see "Symbolic dimensions" in the module docstring)."""
    for name, value in dims.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise TraceError(f"{path}: --dim {name}={value!r}: expected a positive integer")
    g = model.graph
    values = list(g.input) + list(g.output) + list(g.value_info)
    used = set()
    for value in values:
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            for d in value.type.tensor_type.shape.dim:
                if not d.HasField("dim_value") and d.dim_param:
                    used.add(d.dim_param)
                    if d.dim_param in dims:
                        d.dim_value = dims[d.dim_param]  # clears dim_param (a oneof)
    unknown = sorted(set(dims) - used)
    if unknown:
        raise TraceError(f"{path}: --dim {', '.join(unknown)}: the model has no such symbolic dimension "
                         f"(it has {', '.join(sorted(used)) or 'none'})")
    if _all_static(model):
        return model
    import onnx  # lazy: optional dependency (the onnx extra); _load_model says how to install it

    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 -- an op inference does not know (a custom domain), a malformed
        # model: import what is declared, and the tensor still without a shape is named below
        return model
    first_use: dict[str, str] = {}  # unbound dim -> the first tensor that has it
    for value in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        if value.type.HasField("tensor_type"):
            for d in value.type.tensor_type.shape.dim:
                if not d.HasField("dim_value") and d.dim_param:
                    first_use.setdefault(d.dim_param, value.name)
    declared = {d.dim_param for value in list(model.graph.input) + list(model.graph.value_info)
                + list(model.graph.output) if value.type.HasField("tensor_type")
                for d in value.type.tensor_type.shape.dim if d.dim_param}
    unbound = sorted(name for name in first_use if name in declared)  # the model's own names, the user's to bind
    if unbound:
        where = ", ".join(f"{name} (tensor {first_use[name]!r})" for name in unbound)
        raise TraceError(f"{path}: symbolic dimensions not bound: {where}; bind each when importing it: "
                         f"npusim import {path} " + " ".join(f"--dim {name}=<size>" for name in unbound)
                         + " -o trace.json")
    if first_use:  # only names inference made up (unk__N): say which op it could not follow
        producer = {out: node for node in inferred.graph.node for out in node.output}
        order = {node.name or id(node): k for k, node in enumerate(inferred.graph.node)}
        tensors = [t for t in first_use.values() if t in producer]
        first = min(tensors, key=lambda t: order[producer[t].name or id(producer[t])], default=None)
        if first is not None:
            node = producer[first]
            raise TraceError(f"{path}: shape inference cannot give op {node.name or '(unnamed)'!r} "
                             f"({node.op_type}) a static output shape for {first!r} (and {len(first_use) - 1} more "
                             "dims follow from it): its shape depends on values known only at run time; bind the "
                             "model's symbolic dims with --dim, or export it with static shapes")
    return inferred


def _all_static(model) -> bool:
    """Whether every node output and graph input has a declared full static shape."""
    known = {name for name, (_, shape) in _declared_types(model.graph).items()
             if shape is not None and all(isinstance(d, int) and d > 0 for d in shape)}
    names = [v.name for v in model.graph.input] + [o for n in model.graph.node if n.op_type != "Constant"
                                                    for o in n.output if o]
    return all(name in known for name in names)


def _load_model(path: Path):
    try:
        import onnx  # lazy: optional dependency (the onnx extra)
    except ImportError:
        raise TraceError(
            f"{path}: reading ONNX models needs the onnx package: install npusim[onnx] (pip install onnx)"
        ) from None
    if not path.is_file():
        raise TraceError(f"{path}: no such ONNX file")
    limit, size = memory_limit(), path.stat().st_size
    if limit is not None and size * PROTO_EXPANSION > limit:  # onnx.load holds the file and its parse
        raise TraceError(f"{path}: {size:,} bytes of ONNX take about {size * PROTO_EXPANSION:,} bytes to read, more "
                         f"than the {limit:,} available (NPUSIM_MEMORY_LIMIT, or the free memory)")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError and friends: the file is not a valid model
        raise TraceError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    if not model.HasField("graph") or not model.graph.node:
        raise TraceError(f"{path}: not a usable ONNX model: it has no graph nodes (truncated or empty file?)")
    _check_names_are_text(model, path)
    _check_input_counts(model, path)
    return model


def _check_input_counts(model, path: Path) -> None:
    """Each standard operator's node has as many inputs as its ONNX schema allows (an op with
    too few would be costed as something it is not). Other domains and unknown operators are
    left to the importer, which treats them as generic ops."""
    import onnx  # lazy: optional dependency (the onnx extra)

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        return
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, "")
        except onnx.defs.SchemaError:
            continue
        if not schema.min_input <= len(node.input) <= schema.max_input:
            raise TraceError(f"{path}: node {node.name or node.op_type!r} ({node.op_type}) has {len(node.input)} "
                             f"input(s), expected {schema.min_input} to {schema.max_input} (ONNX opset {opset})")


def _check_names_are_text(model, path: Path) -> None:
    """Protobuf hands back invalid UTF-8 strings as bytes (a corrupted file): refuse them here,
    naming where, instead of failing later on a name that is not text."""
    g = model.graph
    values = [("graph input", v.name) for v in g.input] + [("graph output", v.name) for v in g.output]
    values += [("value_info", v.name) for v in g.value_info] + [("initializer", t.name) for t in g.initializer]
    values += [("metadata key", p.key) for p in model.metadata_props]
    values += [("metadata value", p.value) for p in model.metadata_props]
    for i, node in enumerate(g.node):
        values += [(f"node #{i} name", node.name), (f"node #{i} op_type", node.op_type),
                   (f"node #{i} domain", node.domain)]
        values += [(f"node #{i} input", n) for n in node.input] + [(f"node #{i} output", n) for n in node.output]
        values += [(f"node #{i} attribute name", a.name) for a in node.attribute]
    for where, name in values:
        if not isinstance(name, str):
            raise TraceError(f"{path}: {where} {name!r} is not valid UTF-8 text (corrupted file?)")


class _GraphBuilder:
    """One import: collects tensor and op records, then hands them to ``build_graph``."""

    def __init__(self, model, path: Path, dtype: str):
        self.model = model
        self.onnx_graph = model.graph
        self.path = path
        self.dtype = dtype
        self.types = _declared_types(self.onnx_graph)
        self.graph_outputs = {v.name for v in self.onnx_graph.output}
        self.tensors: dict[str, dict] = {}  # name -> record, in definition order
        self.ops: list[dict] = []
        self.constant_nodes = 0
        self.first_reader = {}  # tensor name -> first node reading it, to name it in errors
        for node in reversed(self.onnx_graph.node):
            for name in node.input:
                self.first_reader[name] = node

    # --- the steps --------------------------------------------------------------------------

    def build(self) -> Graph:
        self._add_graph_inputs()
        self._add_nodes()
        self._check_references()
        meta = {
            "source": self.path.name,
            "importer": IMPORTER,
            "dtype": self.dtype,
            "opset": _default_opset(self.model),
            "onnx_metadata": self._metadata(),
            "constant_nodes_as_weights": self.constant_nodes,
        }
        try:
            return build_graph(self.path.stem, list(self.tensors.values()), self.ops, meta=meta)
        except TraceError as exc:
            raise TraceError(f"{self.path}: {exc}") from None

    def _metadata(self) -> dict[str, str]:
        return {p.key: p.value for p in self.model.metadata_props}

    def _add_graph_inputs(self) -> None:
        initializers = {t.name for t in self.onnx_graph.initializer}
        data_inputs = self._data_inputs()
        for value in self.onnx_graph.input:
            if data_inputs is not None:
                kind = "input" if value.name in data_inputs else "weight"
            else:
                kind = "weight" if value.name in initializers else "input"
            self._add_tensor(value.name, kind, where=self._read_by("graph input", value.name))
        for init in self.onnx_graph.initializer:
            if init.name not in self.tensors:
                self._add_tensor(init.name, "weight", where=self._read_by("initializer", init.name))

    def _read_by(self, what: str, name: str) -> str:
        reader = self.first_reader.get(name)
        return f"{what} read by {_node_label(reader)}" if reader is not None else f"{what}, read by no node"

    def _data_inputs(self) -> set[str] | None:
        listed = self._metadata().get("data_inputs")
        if listed is None:
            return None
        names = {n.strip() for n in listed.split(",") if n.strip()}
        graph_inputs = {v.name for v in self.onnx_graph.input}
        unknown = sorted(names - graph_inputs)
        if unknown:
            raise TraceError(
                f"{self.path}: metadata data_inputs names {unknown}, which are not graph inputs "
                f"(graph inputs: {sorted(graph_inputs)[:10]}...)"
            )
        return names

    def _add_nodes(self) -> None:
        op_names = _unique_op_names([n for n in self.onnx_graph.node if not _is_constant(n)])
        for node in self.onnx_graph.node:
            if _is_constant(node):
                self._add_constant(node)
            else:
                self._add_op(node, op_names[len(self.ops)])

    def _add_constant(self, node) -> None:
        self.constant_nodes += 1
        for name in node.output:
            if name:
                fallback = _constant_type(node)
                self._add_tensor(name, "weight", where=f"output of {_node_label(node)}", fallback=fallback)

    def _add_op(self, node, name: str) -> None:
        label = _node_label(node)
        outputs = [o for o in node.output if o]
        if not outputs:
            raise TraceError(f"{self.path}: {label} has no outputs")
        # Inputs first, so a node cannot read its own output.
        input_shapes = [self._shape_of_input(i, label) if i else None for i in node.input]
        for out in outputs:
            kind = "output" if out in self.graph_outputs else "activation"
            self._add_tensor(out, kind, where=f"output of {label}")
        output_shapes = [self.tensors[o]["shape"] for o in outputs]
        attrs = node_attrs(node)
        try:
            cost = op_cost(node.op_type, attrs, input_shapes, output_shapes)
        except ValueError as exc:
            raise TraceError(f"{self.path}: {label}: {exc}") from None
        except (TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError) as exc:
            # an attribute of the wrong type or arity (e.g. group = [0]) in a corrupted model
            raise TraceError(f"{self.path}: {label}: attributes {attrs} do not fit the op "
                             f"({type(exc).__name__}: {exc})") from None
        if node.domain not in ("", "ai.onnx"):
            attrs["domain"] = node.domain
        self.ops.append({
            "name": name, "kind": node.op_type,
            "inputs": [i for i in node.input if i], "outputs": outputs,
            "attrs": attrs, "macs": cost.macs, "vector_ops": cost.vector_ops, "gemm": cost.gemm,
        })

    def _shape_of_input(self, name: str, label: str) -> list[int]:
        record = self.tensors.get(name)
        if record is None:
            raise TraceError(
                f"{self.path}: {label} reads tensor {name!r}, which is not a graph input, an "
                "initializer or the output of an earlier node"
            )
        return record["shape"]

    def _check_references(self) -> None:
        for name in self.graph_outputs:
            if name not in self.tensors:
                raise TraceError(f"{self.path}: graph output {name!r} is not produced by any node")

    # --- one tensor -------------------------------------------------------------------------

    def _add_tensor(self, name: str, kind: str, where: str, fallback=None) -> None:
        if name in self.tensors:
            raise TraceError(f"{self.path}: tensor {name!r} ({where}) is defined twice")
        elem_type, dims = self.types.get(name) or fallback or (None, None)
        shape = self._static_shape(name, dims, where)
        dtype, itemsize = self._element(name, elem_type, where)
        if len(shape) > MAX_RANK or math.prod(shape) * itemsize > MAX_TENSOR_BYTES:
            raise TraceError(f"{self.path}: tensor {name!r} ({where}) has shape {shape[:MAX_RANK]}"
                             f"{'...' if len(shape) > MAX_RANK else ''}: expected rank <= {MAX_RANK} and at most "
                             f"{MAX_TENSOR_BYTES} bytes")
        self.tensors[name] = {"name": name, "shape": shape, "dtype": dtype, "itemsize": itemsize, "kind": kind}

    def _static_shape(self, name: str, dims, where: str) -> list[int]:
        if dims is None:
            raise TraceError(
                f"{self.path}: tensor {name!r} ({where}) has no shape in the model "
                "(value_info/inputs/outputs); expected a full static shape"
            )
        if any(not isinstance(d, int) or d <= 0 for d in dims):
            shown = [d if isinstance(d, int) else (d or "?") for d in dims]
            raise TraceError(
                f"{self.path}: tensor {name!r} ({where}) has shape {shown}; expected a full static "
                "shape of positive integers"
            )
        return list(dims)

    def _element(self, name: str, elem_type, where: str) -> tuple[str, int]:
        if elem_type in _FLOAT_ELEMENT_TYPES:
            return self.dtype, FLOAT_DTYPES[self.dtype]
        if elem_type in _NATIVE_ELEMENT_TYPES:
            return _NATIVE_ELEMENT_TYPES[elem_type]
        what = {_STRING: "STRING (no fixed size)", _UNDEFINED: "undefined", None: "unknown"}.get(
            elem_type, f"unsupported ({elem_type})")
        raise TraceError(
            f"{self.path}: tensor {name!r} ({where}) has element type {what}; expected a numeric "
            "or bool type"
        )


# --- helpers that read ONNX protos ------------------------------------------------------------


def _declared_types(onnx_graph) -> dict[str, tuple[int, list | None]]:
    """Element type and dims of every tensor the graph declares (dims None if unknown).

    A dim is an int when static, else its symbolic name or None. Later declarations win
    (value_info, then outputs, then inputs), but never replace known dims with unknown ones.
    """
    types: dict[str, tuple[int, list | None]] = {}
    for init in onnx_graph.initializer:
        types[init.name] = (init.data_type, list(init.dims))
    for value in list(onnx_graph.value_info) + list(onnx_graph.output) + list(onnx_graph.input):
        declared = _value_type(value)
        if declared[1] is not None or value.name not in types:
            types[value.name] = declared
    return types


def _value_type(value) -> tuple[int, list | None]:
    if not value.type.HasField("tensor_type"):
        return (0, None)
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):
        return (tensor_type.elem_type, None)
    dims = [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
        for d in tensor_type.shape.dim
    ]
    return (tensor_type.elem_type, dims)


def _constant_type(node) -> tuple[int, list] | None:
    """Element type and dims of a Constant node's value, read from its attribute."""
    for attr in node.attribute:
        if attr.name == "value":
            return (attr.t.data_type, list(attr.t.dims))
        if attr.name == "sparse_value":
            return (attr.sparse_tensor.values.data_type, list(attr.sparse_tensor.dims))
        if attr.name == "value_float":
            return (1, [])
        if attr.name == "value_floats":
            return (1, [len(attr.floats)])
        if attr.name == "value_int":
            return (7, [])
        if attr.name == "value_ints":
            return (7, [len(attr.ints)])
        if attr.name in ("value_string", "value_strings"):
            return (_STRING, [] if attr.name == "value_string" else [len(attr.strings)])
    return None


def _is_constant(node) -> bool:
    return node.op_type == "Constant" and node.domain in ("", "ai.onnx")


def _node_label(node) -> str:
    return f"node {node.name!r} ({node.op_type})" if node.name else f"unnamed {node.op_type} node"


def _unique_op_names(nodes) -> list[str]:
    """Node names, with ``<OpType>_<index>`` for empty or repeated ones (never colliding)."""
    taken = {n.name for n in nodes if n.name}
    seen: set[str] = set()
    names = []
    for index, node in enumerate(nodes):
        name = node.name
        if not name or name in seen:
            name = f"{node.op_type}_{index}"
            suffix = 1
            while name in taken or name in seen:
                name = f"{node.op_type}_{index}_{suffix}"
                suffix += 1
        seen.add(name)
        names.append(name)
    return names


def _default_opset(model) -> int | None:
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return int(opset.version)
    return None


# AttributeProto.type values.
_FLOAT, _INT, _STR, _TENSOR, _GRAPH = 1, 2, 3, 4, 5
_FLOATS, _INTS, _STRS, _TENSORS, _GRAPHS = 6, 7, 8, 9, 10
_SPARSE, _SPARSES, _TYPE, _TYPES = 11, 12, 13, 14
_PRESENCE_ONLY = {_TENSOR: "<tensor>", _GRAPH: "<graph>", _SPARSE: "<sparse_tensor>", _TYPE: "<type>",
                  _TENSORS: "<tensors>", _GRAPHS: "<graphs>", _SPARSES: "<sparse_tensors>",
                  _TYPES: "<types>"}


def node_attrs(node) -> dict:
    """A node's attributes as plain JSON values (see the module docstring)."""
    attrs = {}
    for attr in node.attribute:
        if attr.type in _PRESENCE_ONLY:
            attrs[attr.name] = _PRESENCE_ONLY[attr.type]
        elif attr.type == _FLOAT:
            attrs[attr.name] = _json_float(attr.f)
        elif attr.type == _INT:
            attrs[attr.name] = int(attr.i)
        elif attr.type == _STR:
            attrs[attr.name] = attr.s.decode("utf-8", errors="replace")
        elif attr.type in (_FLOATS, _INTS, _STRS):
            attrs[attr.name] = _json_list(attr)
    return attrs


def _json_list(attr) -> list | str:
    if attr.type == _FLOATS:
        values = attr.floats
    elif attr.type == _INTS:
        values = attr.ints
    else:
        values = attr.strings
    if len(values) > _MAX_ATTR_LIST:
        return f"<{len(values)} values>"
    if attr.type == _FLOATS:
        return [_json_float(v) for v in values]
    if attr.type == _INTS:
        return [int(v) for v in values]
    return [v.decode("utf-8", errors="replace") for v in values]


def _json_float(value: float) -> float | str:
    # JSON has no inf/nan literals; keep them readable as strings.
    return float(value) if math.isfinite(value) else str(value)
