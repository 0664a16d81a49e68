"""Importing ONNX models with symbolic dimensions and without intermediate shapes (the LLM
issue, item 1): dims bound by name, ONNX shape inference for the rest, every dim still unbound
named in one error. The models are built here (no downloads)."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from npusim.cli import main
from npusim.errors import TraceError
from npusim.graph.onnx_import import import_onnx


def decoder_block(path, with_value_info: bool = False):
    """x[batch, seq, 64] @ w[64, 64] + b, Relu, then a Reshape whose target comes from Shape
    (data propagation), as exporters write attention reshapes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 64])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [64, 64])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4, 16])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"], name="proj"),
        helper.make_node("Add", ["xw", "b"], ["xb"], name="bias"),
        helper.make_node("Relu", ["xb"], ["h"], name="act"),
        helper.make_node("Shape", ["x"], ["xs"], name="shape", start=0, end=2),
        helper.make_node("Constant", [], ["heads"], name="heads_c",
                         value=helper.make_tensor("heads_v", TensorProto.INT64, [2], [4, 16])),
        helper.make_node("Concat", ["xs", "heads"], ["target"], name="target_c", axis=0),
        helper.make_node("Reshape", ["h", "target"], ["y"], name="split_heads"),
    ]
    graph = helper.make_graph(nodes, "block", [x, w, b], [y])
    if with_value_info:
        graph.value_info.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq", 64])
                                 for n in ("xw", "xb", "h")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    helper.set_model_props(model, {"data_inputs": "x"})
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("with_value_info", [False, True])
def test_bound_dims_and_inferred_shapes(tmp_path, with_value_info):
    graph = import_onnx(decoder_block(tmp_path / "m.onnx", with_value_info), dims={"batch": 2, "seq": 128})
    shapes = {t.name: t.shape for t in graph.tensors}
    assert shapes["x"] == (2, 128, 64) and shapes["h"] == (2, 128, 64) and shapes["y"] == (2, 128, 4, 16)
    proj = next(op for op in graph.ops if op.name == "proj")
    assert proj.macs == 2 * 128 * 64 * 64  # costs follow the bound shapes


def test_every_unbound_dim_is_named_with_the_flag(tmp_path):
    with pytest.raises(TraceError, match=r"symbolic dimensions not bound: batch \(tensor 'x'\), seq \(tensor 'x'\); "
                                         r"bind each when importing it: npusim import \S+ --dim batch=<size> --dim seq=<size> "
                                         r"-o trace.json"):
        import_onnx(decoder_block(tmp_path / "m.onnx"))
    with pytest.raises(TraceError, match=r"not bound: seq \(tensor 'x'\);"):
        import_onnx(decoder_block(tmp_path / "m.onnx"), dims={"batch": 1})


def test_a_dim_the_model_does_not_have_is_an_error(tmp_path):
    with pytest.raises(TraceError, match=r"--dim heads: the model has no such symbolic dimension \(it has batch, seq\)"):
        import_onnx(decoder_block(tmp_path / "m.onnx"), dims={"batch": 1, "seq": 8, "heads": 4})


def test_the_import_command_binds_dims(tmp_path, capsys):
    model = decoder_block(tmp_path / "m.onnx")
    out = tmp_path / "m.json"
    assert main(["import", str(model), "--dim", "batch=1", "--dim", "seq=64", "-o", str(out)]) == 0
    assert out.exists() and "6 ops" in capsys.readouterr().out  # 7 nodes; the Constant is a weight, not an op
    assert main(["simulate", str(out), "--hw", "edge-npu"]) == 0
    capsys.readouterr()
    for bad in ("seq", "seq=0", "seq=x", "=4"):
        assert main(["import", str(model), "--dim", "batch=1", "--dim", bad, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert "--dim" in err and len(err.strip().splitlines()) == 1


def test_a_shape_only_known_at_run_time_names_the_op_not_inference_names(tmp_path):
    """Every symbolic dim bound, but a Reshape whose target is computed from data: the error names
    that op, not the unk__N names shape inference makes up."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
    k = helper.make_tensor_value_info("k", TensorProto.INT64, [2])  # a target shape given at run time
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="act"),
             helper.make_node("Reshape", ["h", "k"], ["r"], name="data_reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="after")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x, k], [y]), opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(TraceError) as error:
        import_onnx(path, dims={"batch": 2})
    message = str(error.value)
    assert "unk__" not in message
    assert "shape inference cannot give op 'data_reshape' (Reshape) a static output shape for 'r'" in message
