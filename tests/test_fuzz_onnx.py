"""Fuzzing the ONNX importer: truncated and corrupted files, missing or symbolic shapes,
unsupported or mistyped ops, dangling references and absurd attributes all end in a
TraceError naming the file (and the tensor or node), never a raw traceback; a model that
imports can be analysed and planned.

A few hundred cases in CI; ``pytest tests/test_fuzz_onnx.py --slow`` runs >= 10,000
cases (the per-test counts add up to 10,000).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from npusim.errors import TraceError  # noqa: E402
from npusim.graph.onnx_import import import_onnx  # noqa: E402
from npusim.graph.model import Graph  # noqa: E402
from npusim.hw.config import Hardware  # noqa: E402
from npusim.workflow import memory_bounds, plan_graph  # noqa: E402

from fuzz_support import cases, expect_clean  # noqa: E402

F = TensorProto.FLOAT
OP_TYPES = ["Conv", "Relu", "Add", "MatMul", "Gemm", "GlobalAveragePool", "Flatten", "Concat", "Reshape",
            "MaxPool", "AveragePool", "BatchNormalization", "Softmax", "Transpose", "LSTM", "If", "Loop",
            "Einsum", "ConvTranspose", "Resize", "Split", "Slice", "Gather", "NoSuchOp", "", "conv"]


def _model() -> onnx.ModelProto:
    """x[1,4,8,8] -Conv- c -Relu- r -Add(x)- a -GAP- g -Flatten- f -Gemm- y[1,10]."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[1, 1], group=1),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "x"], ["a"], name="add"),
        helper.make_node("GlobalAveragePool", ["a"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "w2"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "fuzznet",
        [helper.make_tensor_value_info("x", F, [1, 4, 8, 8]), helper.make_tensor_value_info("w", F, [4, 4, 3, 3]),
         helper.make_tensor_value_info("w2", F, [10, 4])],
        [helper.make_tensor_value_info("y", F, [1, 10])],
        value_info=[helper.make_tensor_value_info("c", F, [1, 4, 8, 8]),
                    helper.make_tensor_value_info("r", F, [1, 4, 8, 8]),
                    helper.make_tensor_value_info("a", F, [1, 4, 8, 8]),
                    helper.make_tensor_value_info("g", F, [1, 4, 1, 1]),
                    helper.make_tensor_value_info("f", F, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.metadata_props.add(key="data_inputs", value="x")
    return model


VALID = _model().SerializeToString()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_onnx")


def _import(folder: Path, raw: bytes):
    path = folder / "fuzz.onnx"
    path.write_bytes(raw)
    result = expect_clean(import_onnx, path, names=[path.name])
    if not isinstance(result, TraceError):  # a model that imports must plan
        bounds = memory_bounds(result, 64)
        expect_clean(plan_graph, result, Hardware(), "tile+default+arena+belady", max(bounds.m_p, 64))
    return result


def test_the_seed_model_imports(folder):
    graph = _import(folder, VALID)
    assert not isinstance(graph, TraceError) and graph.n_ops == 6


@settings(max_examples=cases(60, 2_000))
@given(cut=st.integers(0, len(VALID) - 1))
def test_truncated_files(folder, cut):
    assert isinstance(_import(folder, VALID[:cut]), (Graph, TraceError))


@settings(max_examples=cases(60, 3_500))  # truncation has only ~520 distinct cases
@given(flips=st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=6))
def test_corrupted_bytes(folder, flips):
    raw = bytearray(VALID)
    for at, value in flips:
        raw[at] = value
    assert isinstance(_import(folder, bytes(raw)), (Graph, TraceError))


@settings(max_examples=cases(30, 1_000))
@given(raw=st.binary(max_size=300))
def test_random_bytes(folder, raw):
    assert isinstance(_import(folder, raw), TraceError)


dims = st.one_of(st.integers(-3, 20), st.sampled_from([2**31, 2**40, 2**62]), st.sampled_from(["N", "", None]))


@st.composite
def proto_mutations(draw):
    model = _model()
    g = model.graph
    node = g.node[draw(st.integers(0, len(g.node) - 1))]
    values = list(g.input) + list(g.output) + list(g.value_info)
    value = values[draw(st.integers(0, len(values) - 1))]
    kind = draw(st.sampled_from(["drop_value_info", "dim", "rank", "op_type", "dangling_input", "drop_node",
                                 "elem_type", "attr", "domain", "no_outputs", "dup_output", "no_shape",
                                 "extra_output", "metadata"]))
    if kind == "drop_value_info" and len(g.value_info):
        del g.value_info[draw(st.integers(0, len(g.value_info) - 1))]
    elif kind == "dim":
        dim = value.type.tensor_type.shape.dim
        d = dim[draw(st.integers(0, len(dim) - 1))]
        new = draw(dims)
        if isinstance(new, int):
            d.dim_value = new
        elif new:
            d.dim_param = new
        else:
            d.Clear()
    elif kind == "rank":
        shape = value.type.tensor_type.shape
        for _ in range(draw(st.integers(1, 40))):
            shape.dim.add().dim_value = draw(st.integers(1, 3))
    elif kind == "op_type":
        node.op_type = draw(st.one_of(st.sampled_from(OP_TYPES), st.text(max_size=8)))
    elif kind == "dangling_input":
        node.input.append(draw(st.sampled_from(["ghost", "y", node.output[0]])))
    elif kind == "drop_node":
        del g.node[draw(st.integers(0, len(g.node) - 1))]
    elif kind == "elem_type":
        value.type.tensor_type.elem_type = draw(st.sampled_from([0, 8, 14, 16, 21, 23, 30, 999]))
    elif kind == "attr":
        name = draw(st.sampled_from(["kernel_shape", "pads", "strides", "group", "axis", "transB", "dilations",
                                     "perm", "auto_pad"]))
        attr_value = draw(st.one_of(st.integers(-2**40, 2**40), st.lists(st.integers(-5, 2**33), min_size=1, max_size=6),
                                    st.text(max_size=6), st.floats(allow_nan=True)))
        for existing in list(node.attribute):
            if existing.name == name:
                node.attribute.remove(existing)
        node.attribute.append(helper.make_attribute(name, attr_value))
    elif kind == "domain":
        node.domain = draw(st.sampled_from(["com.microsoft", "ai.onnx.ml", "x"]))
    elif kind == "no_outputs":
        del node.output[:]
    elif kind == "dup_output":
        node.output[0] = g.node[0].output[0] if node is not g.node[0] else "x"
    elif kind == "no_shape":
        value.type.tensor_type.ClearField("shape")
        if value.name in {v.name for v in g.input}:  # nothing can infer a graph input's shape
            kind = "no_input_shape"
    elif kind == "extra_output":
        g.output.append(helper.make_tensor_value_info(draw(st.sampled_from(["ghost", "c", "x"])), F, [1]))
    elif kind == "metadata":
        model.metadata_props[0].value = draw(st.sampled_from(["", "ghost", "x,w", "w,w2", ",,,"]))
    return model.SerializeToString(), kind


@settings(max_examples=cases(250, 5_000))
@given(case=proto_mutations())
def test_broken_models(folder, case):
    raw, kind = case
    result = _import(folder, raw)
    if kind in ("dangling_input", "no_outputs", "no_input_shape") and isinstance(result, TraceError) is False:
        pytest.fail(f"{kind}: imported a broken model")
    if kind == "no_shape" and not isinstance(result, TraceError):
        # an intermediate or output shape dropped: ONNX shape inference restores the same one
        assert [t.shape for t in result.tensors] == [t.shape for t in _import(folder, VALID).tensors]
