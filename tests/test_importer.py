"""The ONNX importer: tensor kinds and sizes, per-op GEMM mappings and costs, trace round trips,
and errors that name the file, tensor and node.

Checks against the public model corpus (``shared/models`` beside the repository, with a JSON
summary per model) are skipped when that directory is absent.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from npusim.errors import TraceError
from npusim.graph.model import Gemm
from npusim.graph.ops.costs import op_cost
from npusim.graph.trace_io import graph_to_dict, load_trace, save_trace

onnx = pytest.importorskip("onnx", reason="the ONNX importer needs the onnx package (npusim[onnx])")
from onnx import TensorProto, helper  # noqa: E402

from npusim.graph.onnx_import import import_onnx  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = Path(__file__).resolve().parents[2] / "shared" / "models"
TRACES_DIR = REPO / "traces"
MODEL_NAMES = sorted(p.stem for p in MODELS_DIR.glob("*.onnx")) if MODELS_DIR.is_dir() else []

needs_models = pytest.mark.skipif(
    not MODEL_NAMES, reason=f"public model corpus not found at {MODELS_DIR} (expected shared/ beside the repo)"
)
ACTIVATION_KINDS = ("input", "activation", "output")


@lru_cache(maxsize=None)
def imported(model: str, dtype: str = "int8"):
    return import_onnx(MODELS_DIR / f"{model}.onnx", dtype=dtype)


def summary(model: str) -> dict:
    return json.loads((MODELS_DIR / f"{model}.json").read_text())


def first_op(graph, kind: str, where=lambda op: True):
    return next(op for op in graph.ops if op.kind == kind and where(op))


# --- GEMM mappings on the real models ---------------------------------------------------------


@needs_models
def test_resnet50_first_conv_is_the_scalesim_implicit_gemm():
    conv = first_op(imported("resnet50"), "Conv")
    assert conv.macs == 118_013_952
    assert conv.gemm == Gemm(m=112 * 112, n=64, k=7 * 7 * 3, batch=1)
    assert conv.vector_ops == 64 * 112 * 112  # the folded-BatchNorm bias


@needs_models
def test_mobilenet_v2_depthwise_conv_maps_groups_to_batch():
    graph = imported("mobilenet_v2")
    depthwise = first_op(graph, "Conv", lambda op: op.attrs["group"] > 1)
    x, w = (graph.tensors[t] for t in depthwise.inputs[:2])
    y = graph.tensors[depthwise.outputs[0]]
    group = depthwise.attrs["group"]
    assert group == x.shape[1] == y.shape[1] and w.shape[1] == 1  # one channel per group
    assert depthwise.gemm == Gemm(m=y.shape[2] * y.shape[3], n=1, k=3 * 3, batch=group)
    assert depthwise.macs == y.elements * 9


@needs_models
def test_bert_attention_matmul_is_batched_over_heads():
    graph = imported("bert_tiny")
    scores = first_op(graph, "MatMul", lambda op: graph.tensors[op.inputs[1]].kind != "weight")
    assert [graph.tensors[t].shape for t in scores.inputs] == [(1, 2, 128, 64), (1, 2, 64, 128)]
    assert scores.gemm == Gemm(m=128, n=128, k=64, batch=2)
    assert scores.macs == 2 * 128 * 128 * 64 and scores.vector_ops == 0


@needs_models
def test_transformer_matmuls_batch_heads_and_fold_linear_layers():
    graph = imported("transformer")
    scores = graph.op("/t/encoder/layers.0/self_attn/MatMul_1")  # (32,8,10,64) x (32,8,64,10)
    assert scores.gemm == Gemm(m=10, n=10, k=64, batch=32 * 8)
    linear = graph.op("/t/encoder/layers.0/linear1/MatMul")  # (10,32,512) x weight (512,2048)
    assert graph.tensors[linear.inputs[0]].shape == (10, 32, 512)
    assert linear.gemm == Gemm(m=10 * 32, n=2048, k=512, batch=1)


@needs_models
def test_resnet18_fc_gemm_honours_transB():
    fc = first_op(imported("resnet18"), "Gemm")
    assert fc.attrs["transB"] == 1
    assert fc.gemm == Gemm(m=1, n=1000, k=512, batch=1)
    assert fc.macs == 512_000 and fc.vector_ops == 1000  # bias C


# --- tensor kinds and sizes -------------------------------------------------------------------


@needs_models
def test_bert_tiny_data_inputs_weights_and_outputs():
    graph, info = imported("bert_tiny"), summary("bert_tiny")
    inputs = [t for t in graph.tensors if t.kind == "input"]
    assert [(t.name, t.shape, t.dtype, t.itemsize) for t in inputs] == [
        ("input_ids", (1, 128), "int64", 8),
        ("attention_mask", (1, 128), "int64", 8),
        ("token_type_ids", (1, 128), "int64", 8),
    ]
    weights = [t for t in graph.tensors if t.kind == "weight"]
    assert len(weights) == info["num_weight_inputs"] + info["num_constant_nodes"]
    assert graph.meta["constant_nodes_as_weights"] == info["num_constant_nodes"] == 25
    embedding = graph.tensor("m.embeddings.word_embeddings.weight")
    assert (embedding.kind, embedding.dtype, embedding.itemsize) == ("weight", "int8", 1)
    position_ids = graph.tensor("/m/embeddings/Constant_1_output_0")  # int64 buffer made an input
    assert (position_ids.kind, position_ids.itemsize) == ("weight", 8)
    assert {t.name for t in graph.tensors if t.kind == "output"} == {"last_hidden_state", "pooler_output"}
    assert graph.meta["onnx_metadata"]["data_inputs"] == "input_ids,attention_mask,token_type_ids"
    assert graph.meta["opset"] == 17 and graph.meta["source"] == "bert_tiny.onnx"


@needs_models
def test_dtype_option_sizes_float_tensors_only():
    int8, fp16 = imported("bert_tiny", "int8"), imported("bert_tiny", "fp16")
    for a, b in zip(int8.tensors, fp16.tensors):
        if a.dtype == "int8":
            assert (b.dtype, b.itemsize) == ("fp16", 2)
        else:
            assert (b.dtype, b.itemsize) == (a.dtype, a.itemsize)


@needs_models
@pytest.mark.parametrize("model", MODEL_NAMES)
def test_every_model_matches_its_json_summary(model):
    graph, info = imported(model), summary(model)
    assert graph.name == model
    assert graph.n_ops == info["num_nodes"] - info["num_constant_nodes"]
    assert graph.meta["constant_nodes_as_weights"] == info["num_constant_nodes"]
    assert sum(1 for t in graph.tensors if t.kind == "weight") == (
        info["num_weight_inputs"] + info["num_constant_nodes"])
    assert [t.name for t in graph.tensors if t.kind == "input"] == [i["name"] for i in info["inputs"]]
    assert [t.name for t in graph.tensors if t.kind == "output"] == [o["name"] for o in info["outputs"]]
    activations = [t for t in graph.tensors if t.kind in ACTIVATION_KINDS]
    # Float tensors are 1 byte at int8; the rest keep their ONNX size, so:
    # elements add up to the summary's, and fp32-for-floats-plus-native-for-the-rest bytes too.
    float_elements = sum(t.elements for t in activations if t.dtype == "int8")
    native_bytes = sum(t.size for t in activations if t.dtype != "int8")
    assert sum(t.elements for t in activations) == info["activation_elements"]
    assert 4 * float_elements + native_bytes == info["activation_bytes_native_dtype"]
    assert float_elements + native_bytes == graph.bytes_of(ACTIVATION_KINDS)
    if not native_bytes:
        assert graph.bytes_of(ACTIVATION_KINDS) == info["activation_bytes_int8"]
    gemm_ops = [op for op in graph.ops if op.gemm is not None]
    assert all(op.macs == op.gemm.macs > 0 for op in gemm_ops)
    assert all(op.macs == 0 for op in graph.ops if op.gemm is None)


# --- traces -----------------------------------------------------------------------------------


@needs_models
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_trace_round_trip_gives_an_equal_graph(tmp_path, suffix):
    graph = imported("bert_tiny")
    loaded = load_trace(save_trace(graph, tmp_path / f"bert_tiny{suffix}"))
    assert loaded == graph
    assert graph_to_dict(loaded) == graph_to_dict(graph)  # meta and attrs too


@needs_models
@pytest.mark.parametrize("model", MODEL_NAMES)
def test_shipped_trace_matches_a_fresh_import(model):
    candidates = [TRACES_DIR / f"{model}.json", TRACES_DIR / f"{model}.json.gz"]
    shipped = [p for p in candidates if p.exists()]
    assert len(shipped) == 1, f"expected exactly one of {candidates}; run scripts/import_models.py"
    assert graph_to_dict(load_trace(shipped[0])) == graph_to_dict(imported(model))


# --- small hand-built models ------------------------------------------------------------------


def value(name, shape, elem_type=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem_type, shape)


def write_model(path, nodes, inputs, outputs, value_info=(), initializers=(), metadata=None):
    graph = helper.make_graph(nodes, "tiny", inputs, outputs, initializer=list(initializers),
                              value_info=list(value_info))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if metadata:
        helper.set_model_props(model, metadata)
    onnx.save(model, str(path))
    return path


def test_without_metadata_initializers_are_weights_and_constants_are_not_ops(tmp_path):
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], [0.0] * 12)
    nodes = [
        helper.make_node("Constant", [], ["scale"], name="c",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [], [2.0])),
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Mul", ["h", "scale"], ["s"], name=""),  # unnamed
        helper.make_node("Resize", ["s", "", "sizes_or_scales"], ["r"], name="mm", mode="nearest"),
        helper.make_node("FancyOp", ["r"], ["y", ""], name="", domain="my.domain", note="hi"),
    ]
    path = write_model(
        tmp_path / "tiny.onnx", nodes,
        inputs=[value("x", [2, 4]), value("sizes_or_scales", [2])],
        outputs=[value("y", [2, 3])],
        value_info=[value("h", [2, 3]), value("s", [2, 3]), value("r", [2, 3]), value("scale", [])],
        initializers=[w],
    )
    graph = import_onnx(path)
    kinds = {t.name: t.kind for t in graph.tensors}
    assert kinds == {"x": "input", "sizes_or_scales": "input", "w": "weight", "scale": "weight",
                     "h": "activation", "s": "activation", "r": "activation", "y": "output"}
    assert graph.tensor("scale").shape == () and graph.tensor("scale").size == 1  # a scalar
    assert graph.meta["constant_nodes_as_weights"] == 1
    assert [op.name for op in graph.ops] == ["mm", "Mul_1", "Resize_2", "FancyOp_3"]
    assert [op.kind for op in graph.ops] == ["MatMul", "Mul", "Resize", "FancyOp"]
    assert graph.op("mm").gemm == Gemm(m=2, n=3, k=4, batch=1)
    resize = graph.op("Resize_2")
    assert [graph.tensors[t].name for t in resize.inputs] == ["s", "sizes_or_scales"]  # "" skipped
    fancy = graph.op("FancyOp_3")
    assert fancy.vector_ops == 6 and [graph.tensors[t].name for t in fancy.outputs] == ["y"]
    assert fancy.attrs == {"note": "hi", "domain": "my.domain"}


def test_constant_without_value_info_takes_its_shape_from_the_value(tmp_path):
    nodes = [
        helper.make_node("Constant", [], ["k"], value_ints=[1, 2, 3]),
        helper.make_node("Add", ["x", "k"], ["y"]),
    ]
    path = write_model(tmp_path / "c.onnx", nodes, [value("x", [3])], [value("y", [3])])
    k = import_onnx(path).tensor("k")
    assert (k.shape, k.dtype, k.itemsize, k.kind) == ((3,), "int64", 8, "weight")


def test_metadata_data_inputs_decides_inputs_versus_weights(tmp_path):
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="fc", transA=1)]
    path = write_model(
        tmp_path / "m.onnx", nodes,
        inputs=[value("a", [8, 2]), value("b", [8, 5]), value("c", [5])], outputs=[value("y", [2, 5])],
        metadata={"data_inputs": "a"},
    )
    graph = import_onnx(path)
    assert [t.kind for t in graph.tensors[:3]] == ["input", "weight", "weight"]
    fc = graph.op("fc")
    assert fc.gemm == Gemm(m=2, n=5, k=8, batch=1) and fc.vector_ops == 10
    assert fc.attrs == {"transA": 1}


# --- cost formulas ----------------------------------------------------------------------------


def test_conv_costs_cover_1d_3d_and_grouped():
    one_d = op_cost("Conv", {"group": 1}, [(1, 4, 10), (8, 4, 3)], [(1, 8, 8)])
    assert one_d.gemm == Gemm(m=8, n=8, k=12, batch=1) and one_d.vector_ops == 0
    three_d = op_cost("Conv", {}, [(2, 3, 4, 8, 8), (16, 3, 1, 3, 3), (16,)], [(2, 16, 4, 8, 8)])
    assert three_d.gemm == Gemm(m=2 * 4 * 8 * 8, n=16, k=27, batch=1)
    assert three_d.vector_ops == 2 * 16 * 4 * 8 * 8
    grouped = op_cost("Conv", {"group": 4}, [(1, 8, 5, 5), (12, 2, 3, 3)], [(1, 12, 5, 5)])
    assert grouped.gemm == Gemm(m=25, n=3, k=18, batch=4)
    with pytest.raises(ValueError, match="group=3"):
        op_cost("Conv", {"group": 3}, [(1, 8, 5, 5), (12, 2, 3, 3)], [(1, 12, 5, 5)])


def test_conv_transpose_uses_the_col2im_gemm():
    cost = op_cost("ConvTranspose", {"group": 1}, [(1, 8, 4, 4), (8, 3, 2, 2)], [(1, 3, 8, 8)])
    assert cost.gemm == Gemm(m=16, n=3 * 4, k=8, batch=1)
    assert cost.macs == 16 * 8 * 3 * 4  # every input pixel × every weight


def test_matmul_follows_numpy_rules():
    assert op_cost("MatMul", {}, [(4,), (4, 6)], [(6,)]).gemm == Gemm(m=1, n=6, k=4, batch=1)
    assert op_cost("MatMul", {}, [(5, 4), (4,)], [(5,)]).gemm == Gemm(m=5, n=1, k=4, batch=1)
    assert op_cost("MatMul", {}, [(3, 1, 5, 4), (2, 4, 6)], [(3, 2, 5, 6)]).gemm == Gemm(5, 6, 4, 6)
    assert op_cost("MatMul", {}, [(5, 4), (7, 4, 6)], [(7, 5, 6)]).gemm == Gemm(5, 6, 4, 7)
    with pytest.raises(ValueError, match="inner dims"):
        op_cost("MatMul", {}, [(5, 4), (3, 6)], [(5, 6)])
    with pytest.raises(ValueError, match="broadcast"):
        op_cost("MatMul", {}, [(2, 5, 4), (3, 4, 6)], [(3, 5, 6)])


def test_vector_op_counts():
    assert op_cost("MaxPool", {"kernel_shape": [3, 3]}, [(1, 2, 8, 8)], [(1, 2, 4, 4)]).vector_ops == 32 * 9
    assert op_cost("GlobalAveragePool", {}, [(1, 2, 8, 8)], [(1, 2, 1, 1)]).vector_ops == 128
    assert op_cost("Softmax", {}, [(4, 10)], [(4, 10)]).vector_ops == 200
    assert op_cost("Resize", {"mode": "linear"}, [(1, 2, 4, 4), None, (4,)], [(1, 2, 8, 8)]).vector_ops == 128 * 4
    assert op_cost("Split", {}, [(4, 10)], [(4, 5), (4, 5)]).vector_ops == 40
    assert op_cost("NoSuchOp", {}, [(3,)], [(7,)]).vector_ops == 7


# --- errors -----------------------------------------------------------------------------------


@needs_models
def test_truncated_file_is_a_trace_error_naming_it(tmp_path):
    data = (MODELS_DIR / "resnet18.onnx").read_bytes()
    for cut in (len(data) // 2, len(data) // 3, 100):
        path = tmp_path / f"cut_{cut}.onnx"
        path.write_bytes(data[:cut])
        with pytest.raises(TraceError, match=f"cut_{cut}.onnx"):
            import_onnx(path)


def test_not_an_onnx_file(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\xff\xfe this is not protobuf \x00\x01")
    with pytest.raises(TraceError, match="junk.onnx"):
        import_onnx(path)
    with pytest.raises(TraceError, match="missing.onnx"):
        import_onnx(tmp_path / "missing.onnx")


def test_missing_intermediate_shape_is_inferred(tmp_path):
    """No value_info for 'z': ONNX shape inference gives it from the input (it used to be an error)."""
    nodes = [helper.make_node("Relu", ["x"], ["z"], name="first_relu"),
             helper.make_node("Relu", ["z"], ["y"], name="second_relu")]
    path = write_model(tmp_path / "noshape.onnx", nodes, [value("x", [1, 4])], [value("y", [1, 4])])
    assert import_onnx(path).tensor("z").shape == (1, 4)


def test_a_shape_nothing_can_infer_names_tensor_node_and_file(tmp_path):
    """An op of an unknown domain: inference cannot give its output a shape."""
    nodes = [helper.make_node("Mystery", ["x"], ["z"], name="first_op", domain="com.example"),
             helper.make_node("Relu", ["z"], ["y"], name="second_relu")]
    path = write_model(tmp_path / "noshape.onnx", nodes, [value("x", [1, 4])], [value("y", [1, 4])])
    with pytest.raises(TraceError, match=r"noshape\.onnx.*'z'.*first_op"):
        import_onnx(path)


@pytest.mark.parametrize("op, inputs", [("NonMaxSuppression", ["x"]), ("Relu", ["x", "x"])])
def test_a_standard_op_with_inputs_its_schema_forbids_is_refused(tmp_path, op, inputs):
    """ONNX's schemas give each standard operator its number of inputs: a NonMaxSuppression
    without scores, or a Relu of two tensors, is not a model to cost as a generic op (found
    by a new-user audit)."""
    nodes = [helper.make_node(op, inputs, ["y"], name="odd")]
    path = write_model(tmp_path / "odd.onnx", nodes, [value("x", [1, 4])], [value("y", [1, 4])])
    with pytest.raises(TraceError, match=rf"odd\.onnx: node 'odd' \({op}\) has {len(inputs)} input\(s\), expected"):
        import_onnx(path)


def test_symbolic_dim_names_tensor_dim_and_file(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    path = write_model(tmp_path / "dyn.onnx", nodes, [value("x", ["N", 4])], [value("y", ["N", 4])])
    with pytest.raises(TraceError, match=r"dyn\.onnx.*not bound: N \(tensor 'x'\).*--dim N=<size>"):
        import_onnx(path)
    assert import_onnx(path, dims={"N": 3}).tensor("x").shape == (3, 4)


def test_bad_dtype_option(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    path = write_model(tmp_path / "ok.onnx", nodes, [value("x", [2])], [value("y", [2])])
    with pytest.raises(TraceError, match=r"ok\.onnx.*'bf8'.*fp16"):
        import_onnx(path, dtype="bf8")


def test_metadata_naming_an_unknown_input(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    path = write_model(tmp_path / "meta.onnx", nodes, [value("x", [2])], [value("y", [2])],
                       metadata={"data_inputs": "x,ghost"})
    with pytest.raises(TraceError, match=r"meta\.onnx.*ghost"):
        import_onnx(path)


def test_inconsistent_conv_shapes_name_the_node(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="bad_conv")]
    path = write_model(tmp_path / "conv.onnx", nodes,
                       [value("x", [1, 3, 4, 4]), value("w", [8, 2, 1, 1])], [value("y", [1, 8, 4, 4])])
    with pytest.raises(TraceError, match=r"conv\.onnx.*bad_conv.*Cin=3"):
        import_onnx(path)


def test_missing_onnx_package_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` raise ImportError
    with pytest.raises(TraceError, match=r"install npusim\[onnx\]"):
        import_onnx(tmp_path / "any.onnx")
