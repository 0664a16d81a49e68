"""Structure-aware trace mutations and generation for tests/test_fuzz_structure.py.

Where tests/test_fuzz_trace.py puts junk values into well-formed records, these change a
trace's *structure*: ops, inputs, outputs and attributes deleted, duplicated, reordered and
retyped; tensors swapped between ops; ranks changed; names pointing at the wrong kind of
object. ``wellformed_traces`` draws graphs from the contract itself (each op kind built from
its shape rule), so the contract's accepted side is explored as well as its refusals.
"""

from __future__ import annotations

import copy

from hypothesis import strategies as st

from npusim.graph.ops.rules import RULES

from fuzz_support import trace_doc

#: The mutation classes, each a function (draw, doc) -> None changing ``doc`` in place.
MUTATIONS: dict = {}

KINDS = sorted(RULES) + ["FancyOp", "ConvGrad", "KVCacheKeep"]
ATTR_NAMES = sorted({name for rule in RULES.values() for name in rule.attrs}) + [
    "tile_of", "box", "k", "epilogue", "epilogue_from", "epilogue_input_kinds", "marker", "domain"]
ATTR_VALUES = st.one_of(
    st.integers(-3, 5), st.sampled_from([2**62, -(2**62), 2**40]), st.lists(st.integers(-2, 4), max_size=6),
    st.lists(st.lists(st.integers(0, 2), max_size=3), max_size=3), st.sampled_from(["", "SAME_UPPER", "nearest", "x"]),
    st.booleans(), st.none(), st.floats(-1e9, 1e9, allow_nan=False), st.sampled_from(["conv", "relu", "fc", "proj"]))


def mutation(fn):
    MUTATIONS[fn.__name__] = fn
    return fn


def _op(draw, doc) -> dict:
    if not doc["ops"]:  # an earlier mutation deleted them all
        doc["ops"].append(dict(name="lone", kind="Relu", inputs=[], outputs=[]))
    return doc["ops"][draw(st.integers(0, len(doc["ops"]) - 1))]


def _tensor(draw, doc) -> dict:
    if not doc["tensors"]:
        doc["tensors"].append(dict(name="lone", shape=[1], dtype="int8", itemsize=1, kind="input"))
    return doc["tensors"][draw(st.integers(0, len(doc["tensors"]) - 1))]


@mutation
def delete_op(draw, doc):
    if doc["ops"]:
        doc["ops"].pop(draw(st.integers(0, len(doc["ops"]) - 1)))


@mutation
def duplicate_op(draw, doc):
    op = copy.deepcopy(_op(draw, doc))
    if draw(st.booleans()):
        op["name"] += "_copy"
    doc["ops"].insert(draw(st.integers(0, len(doc["ops"]))), op)


@mutation
def reorder_ops(draw, doc):
    doc["ops"] = draw(st.permutations(doc["ops"]))


@mutation
def retype_op(draw, doc):
    _op(draw, doc)["kind"] = draw(st.sampled_from(KINDS))


@mutation
def delete_input(draw, doc):
    op = _op(draw, doc)
    if op["inputs"]:
        op["inputs"].pop(draw(st.integers(0, len(op["inputs"]) - 1)))


@mutation
def duplicate_input(draw, doc):
    op = _op(draw, doc)
    if op["inputs"]:
        op["inputs"].insert(draw(st.integers(0, len(op["inputs"]))), draw(st.sampled_from(op["inputs"])))


@mutation
def add_input(draw, doc):
    _op(draw, doc)["inputs"].append(_tensor(draw, doc)["name"])


@mutation
def reorder_inputs(draw, doc):
    op = _op(draw, doc)
    op["inputs"] = draw(st.permutations(op["inputs"]))


@mutation
def delete_output(draw, doc):
    op = _op(draw, doc)
    if op["outputs"]:
        op["outputs"].pop(draw(st.integers(0, len(op["outputs"]) - 1)))


@mutation
def add_output(draw, doc):
    op = _op(draw, doc)
    shape = draw(st.lists(st.integers(1, 9), max_size=4))
    name = f"extra{len(doc['tensors'])}"
    doc["tensors"].append(dict(name=name, shape=shape, dtype="int8", itemsize=1,
                               kind=draw(st.sampled_from(["activation", "output"]))))
    op["outputs"].append(name)


@mutation
def delete_attr(draw, doc):
    op = _op(draw, doc)
    if op.get("attrs"):
        op["attrs"].pop(draw(st.sampled_from(sorted(op["attrs"]))))


@mutation
def retype_attr(draw, doc):
    op = _op(draw, doc)
    attrs = op.setdefault("attrs", {})
    name = draw(st.sampled_from(sorted(attrs))) if attrs and draw(st.booleans()) else draw(st.sampled_from(ATTR_NAMES))
    attrs[name] = draw(ATTR_VALUES)


@mutation
def swap_tensors(draw, doc):
    a, b = _op(draw, doc), _op(draw, doc)
    side_a, side_b = draw(st.sampled_from(["inputs", "outputs"])), draw(st.sampled_from(["inputs", "outputs"]))
    if a[side_a] and b[side_b]:
        i, j = draw(st.integers(0, len(a[side_a]) - 1)), draw(st.integers(0, len(b[side_b]) - 1))
        a[side_a][i], b[side_b][j] = b[side_b][j], a[side_a][i]


@mutation
def change_rank(draw, doc):
    t = _tensor(draw, doc)
    shape = t["shape"]
    how = draw(st.sampled_from(["drop", "add", "permute", "scalar", "resize"]))
    if how == "drop" and shape:
        shape.pop(draw(st.integers(0, len(shape) - 1)))
    elif how == "add":
        shape.insert(draw(st.integers(0, len(shape))), draw(st.integers(1, 4)))
    elif how == "permute":
        t["shape"] = draw(st.permutations(shape))
    elif how == "scalar":
        t["shape"] = []
    elif shape:
        shape[draw(st.integers(0, len(shape) - 1))] = draw(st.integers(1, 64))


@mutation
def cross_reference(draw, doc):
    """A name that exists, but as another kind of object (an op's name as a tensor) or for
    another role (an input tensor as an output, a tensor as its own view's base)."""
    op, t = _op(draw, doc), _tensor(draw, doc)
    how = draw(st.sampled_from(["op_as_input", "input_as_output", "self_view", "view_of", "source", "tile_of"]))
    if how == "op_as_input":
        op["inputs"].append(_op(draw, doc)["name"])
    elif how == "input_as_output":
        op["outputs"].append(t["name"])
    elif how in ("self_view", "view_of"):
        base = t if how == "self_view" else _tensor(draw, doc)
        n = 1
        for d in t["shape"]:
            n *= d
        t["view"] = dict(base=base["name"], offset=draw(st.integers(0, 8)), shape=list(t["shape"]),
                         strides=draw(st.lists(st.integers(0, 9), min_size=len(t["shape"]), max_size=len(t["shape"]))))
    elif how == "source":
        t["sources"] = [_tensor(draw, doc)["name"]]
    else:
        op.setdefault("attrs", {})["tile_of"] = _op(draw, doc)["name"]


@mutation
def retype_tensor(draw, doc):
    t = _tensor(draw, doc)
    t["kind"] = draw(st.sampled_from(["input", "weight", "activation", "output"]))
    if draw(st.booleans()):
        t["itemsize"] = draw(st.sampled_from([1, 2, 4, 8, 16]))


@mutation
def change_gemm(draw, doc):
    op = _op(draw, doc)
    how = draw(st.sampled_from(["drop", "add", "edit"]))
    if how == "drop":
        op["gemm"] = None
    elif how == "add" or not op.get("gemm"):
        op["gemm"] = dict(m=draw(st.integers(1, 64)), n=draw(st.integers(1, 64)), k=draw(st.integers(1, 64)), batch=1)
        if draw(st.booleans()):
            g = op["gemm"]
            op["macs"] = g["m"] * g["n"] * g["k"]
    else:
        op["gemm"][draw(st.sampled_from(["m", "n", "k", "batch"]))] = draw(st.integers(1, 2**20))


@mutation
def delete_tensor(draw, doc):
    if doc["tensors"]:
        doc["tensors"].pop(draw(st.integers(0, len(doc["tensors"]) - 1)))


@st.composite
def mutated(draw, seeds: dict, classes=None):
    """(class name, document): a seed with one (sometimes two) structural mutations."""
    doc = copy.deepcopy(draw(st.sampled_from(sorted(seeds)).map(lambda k: seeds[k])))
    names = sorted(classes or MUTATIONS)
    first = draw(st.sampled_from(names))
    MUTATIONS[first](draw, doc)
    if draw(st.integers(0, 3)) == 0:
        MUTATIONS[draw(st.sampled_from(names))](draw, doc)
    return first, doc


# --------------------------------------------------------------------- generated from the contract


def _unary(draw, x):
    return draw(st.sampled_from(["Relu", "Sigmoid", "Tanh", "Erf", "Abs"])), [x], list(x[1]), {}


def _binary(draw, x):
    shape = list(x[1])
    other = [d if draw(st.booleans()) else 1 for d in shape][draw(st.integers(0, len(shape))):]
    return draw(st.sampled_from(["Add", "Mul", "Sub", "Max"])), [x, ("w", other)], shape, {}


def _conv(draw, x):
    shape = x[1]
    if len(shape) != 4:
        return None
    n, c, h, w = shape
    k, s, p = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(0, 1))
    group = draw(st.sampled_from([g for g in (1, 2, c) if c % g == 0]))
    cout = group * draw(st.integers(1, 3))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    if oh < 1 or ow < 1:
        return None
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4, "group": group}
    ins = [x, ("w", [cout, c // group, k, k])] + ([("w", [cout])] if draw(st.booleans()) else [])
    return "Conv", ins, [n, cout, oh, ow], attrs


def _pool(draw, x):
    shape = x[1]
    if len(shape) != 4 or min(shape[2:]) < 2:
        return None
    return draw(st.sampled_from(["MaxPool", "AveragePool"])), [x], shape[:2] + [d // 2 for d in shape[2:]], \
        {"kernel_shape": [2, 2], "strides": [2, 2]}


def _matmul(draw, x):
    shape = x[1]
    if not shape:
        return None
    n = draw(st.integers(1, 24))
    if len(shape) >= 2 and draw(st.booleans()):  # batched: B with the same leading dims
        b = list(shape[:-2]) + [shape[-1], n]
    else:
        b = [shape[-1], n]
    return "MatMul", [x, ("w", b)], list(shape[:-1]) + [n], {}


def _transpose(draw, x):
    perm = draw(st.permutations(range(len(x[1]))))
    return "Transpose", [x], [x[1][p] for p in perm], {"perm": list(perm)}


def _reshape(draw, x):
    n = 1
    for d in x[1]:
        n *= d
    return "Reshape", [x, ("w", [2])], [1, n], {}


def _softmax(draw, x):
    if not x[1]:
        return None
    return "Softmax", [x], list(x[1]), {"axis": draw(st.integers(-len(x[1]), len(x[1]) - 1))}


def _concat(draw, x):
    if not x[1]:
        return None
    axis = draw(st.integers(0, len(x[1]) - 1))
    extra = list(x[1])
    extra[axis] = draw(st.integers(1, 8))
    out = list(x[1])
    out[axis] += extra[axis]
    return "Concat", [x, ("w", extra)], out, {"axis": axis}


def _custom(draw, x):
    return "FancyOp", [x], draw(st.lists(st.integers(1, 16), min_size=1, max_size=3)), {"mode": "fancy"}


FAMILIES = (_unary, _binary, _conv, _pool, _matmul, _transpose, _reshape, _softmax, _concat, _custom)


@st.composite
def wellformed_traces(draw, max_ops: int = 8):
    """A trace that satisfies the contract: a chain-with-branches of ops drawn family by family
    from their shape rules, each reading one earlier activation (and weights of its own)."""
    rank = draw(st.sampled_from([2, 3, 4]))
    shape = [1] + [draw(st.integers(1, 12)) for _ in range(rank - 1)]
    tensors = [("x", shape, "input")]
    made = [("x", shape)]
    ops = []
    for i in range(draw(st.integers(1, max_ops))):
        source = draw(st.sampled_from(made[-3:]))
        built = draw(st.sampled_from(FAMILIES))(draw, source)
        if built is None:
            continue
        kind, ins, out, attrs = built
        names = []
        for j, (name, s) in enumerate(ins):
            if name == "w":
                name = f"w{i}_{j}"
                tensors.append((name, s, "weight"))
            names.append(name)
        out_name = f"t{i}"
        tensors.append((out_name, out, "activation"))
        made.append((out_name, out))
        ops.append((f"op{i}", kind, names, [out_name], attrs))
    if not ops:
        tensors.append(("t", shape, "activation"))
        ops.append(("op", "Relu", ["x"], ["t"], {}))
    consumed = {i for op in ops for i in op[2]}
    tensors = [(n, s, "output" if k == "activation" and n not in consumed else k) for n, s, k in tensors]
    return trace_doc("generated", tensors, ops)
