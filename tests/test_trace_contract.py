"""The trace contract (npusim.graph.contract): every trace npusim makes satisfies it, and each
class of malformed trace an outside structural fuzzer found is refused in one line, at load."""

from __future__ import annotations

import copy
import json
import math

import pytest

from npusim.cli import main
from npusim.errors import TraceError
from npusim.graph import contract
from npusim.graph.contract import check_trace
from npusim.graph.trace_io import graph_to_dict, load_trace
from npusim.util.schema_check import load_schema

from fuzz_support import WELL_FORMED, small_attention, small_cnn
from helpers import REPO, SHARED, TRACE_NAMES


def _write(tmp_path, doc, name="t.json"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def _refused(capsys, tmp_path, doc, *words, command=("plan",)):
    """The CLI refuses ``doc`` with exit 2 and one line containing ``words``."""
    path = _write(tmp_path, doc)
    code = main([*command, path, "--hw", "edge-npu"] + (["-o", str(tmp_path / "p.json")] if command == ("plan",) else []))
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npusim: error: ") and path in lines[0], err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


# --------------------------------------------------------------------- what npusim makes passes


@pytest.mark.parametrize("name", TRACE_NAMES)
def test_every_shipped_trace_satisfies_the_contract(name):
    path = next((REPO / "traces").glob(f"{name}.json*"))
    graph = load_trace(path)
    assert "reordered" not in graph.meta
    assert check_trace(graph_to_dict(graph), name).n_ops == graph.n_ops


MODELS = sorted((SHARED / "models").glob("*.onnx")) if (SHARED / "models").is_dir() else []


@pytest.mark.skipif(not MODELS, reason="../shared/models is absent")
def test_every_imported_model_and_its_training_graph_satisfies_the_contract():
    """The importer's output (and `npusim import --training`'s) satisfies the contract by
    construction: its gemm and macs come from the same op_costs the contract recomputes."""
    from npusim.graph.onnx_import import import_onnx
    from npusim.graph.training import make_training_graph

    for model in MODELS:
        graph = import_onnx(model)
        for made in (graph, make_training_graph(graph)):
            assert check_trace(graph_to_dict(made), str(model)).n_ops == made.n_ops


def test_fused_and_generated_graphs_satisfy_the_contract():
    from npusim.graph.decoder import graph_from_name
    from npusim.graph.fusion import fuse
    from planners.fusion import epilogue_chains

    graph = load_trace(REPO / "traces" / "resnet18.json")
    fused = fuse(graph, epilogue_chains(graph))
    assert any("epilogue" in op.attrs for op in fused.ops)
    for made in (fused, graph_from_name("llm:llama-3.2-1b:decode=8"), graph_from_name("llm:gpt2-small:prefill=4")):
        assert check_trace(graph_to_dict(made), made.name).n_ops == made.n_ops
    for build in WELL_FORMED.values():
        check_trace(build(), "well-formed")


def test_the_schema_is_valid_and_agrees_with_the_reference_validator():
    jsonschema = pytest.importorskip("jsonschema")
    schema = load_schema("trace.schema.json")
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for name in ("resnet18", "transformer"):
        validator.validate(json.loads((REPO / "traces" / f"{name}.json").read_text()))
    # the schema's bounds are the ones the code states
    defs = schema["$defs"]
    assert defs["shape"]["maxItems"] == contract.MAX_RANK
    assert defs["count"]["maximum"] == contract.MAX_COUNT
    assert defs["dim"]["maximum"] == contract.MAX_TENSOR_BYTES
    # what the pure-Python check refuses, the reference refuses too
    bad = small_cnn()
    bad["ops"][0]["attrs"]["pads"] = [[1, 1], [1, 1]]
    bad["tensors"][0]["shape"] = [1, 0, 8, 8]
    assert not validator.is_valid(bad)


# --------------------------------------------------------------------- the classes


def test_a_trace_without_ops(capsys, tmp_path):
    doc = small_cnn()
    doc["ops"] = []
    assert _refused(capsys, tmp_path, doc, "field ops is []", "at least one op", command=("info",))


def test_ops_out_of_topological_order_are_reordered_with_a_note(capsys, tmp_path):
    doc = small_cnn()
    doc["ops"][0], doc["ops"][1] = doc["ops"][1], doc["ops"][0]  # relu listed before the conv it reads
    path = _write(tmp_path, doc)
    assert main(["plan", path, "--hw", "edge-npu", "-o", str(tmp_path / "p.json")]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "reordered into a topological order" in err and "'relu'" in err
    graph = load_trace(path)
    assert [op.name for op in graph.ops][:2] == ["conv", "relu"] and "reordered" in graph.meta


def test_a_matmul_with_three_inputs(capsys, tmp_path):
    doc = small_attention()
    doc["ops"][2]["inputs"].append("g")
    assert _refused(capsys, tmp_path, doc, "op 'proj' (MatMul)", "inputs is 3 tensors", "exactly 2")


def test_a_matmul_whose_shapes_disagree_with_its_gemm(capsys, tmp_path):
    doc = small_attention()
    doc["ops"][2]["gemm"]["k"] = 16
    doc["ops"][2]["macs"] = math.prod(doc["ops"][2]["gemm"].values())
    assert _refused(capsys, tmp_path, doc, "op 'proj' (MatMul)", "gemm is", "what its shapes give")
    doc = small_attention()
    doc["tensors"][5]["shape"] = [16, 8]  # wq: K = 16 against n's 8
    assert _refused(capsys, tmp_path, doc, "op 'proj' (MatMul)", "inputs[1] shape is [16, 8]", "inner dimension of 8")


def test_macs_that_are_not_the_gemms(capsys, tmp_path):
    doc = small_attention()
    doc["ops"][2]["macs"] += 1
    assert _refused(capsys, tmp_path, doc, "op 'proj' (MatMul)", "macs is", "batch x m x n x k")


@pytest.mark.parametrize("pads, phrase", [([[1, 1], [1, 1]], "expected a list of integers"),
                                          ({"top": 1}, "attrs.pads is {'top': 1}, expected a string, a number"), ([1, 1], "list of 4 integers")])
def test_conv_attributes_of_the_wrong_type(capsys, tmp_path, pads, phrase):
    doc = small_cnn()
    doc["ops"][0]["attrs"]["pads"] = pads
    assert _refused(capsys, tmp_path, doc, "op 'conv' (Conv)", "attrs.pads", phrase)


@pytest.mark.parametrize("name, value", [("strides", 2), ("dilations", "1"), ("group", [1])])
def test_conv_loop_attributes_of_the_wrong_type(capsys, tmp_path, name, value):
    """Found by the slow structure fuzz: the graph derives a Conv's loop nest from these before
    the contract judges them; a wrong type was an internal error (``'int' object is not iterable``)."""
    doc = small_cnn()
    doc["ops"][0]["attrs"][name] = value
    assert _refused(capsys, tmp_path, doc, "op 'conv' (Conv)", f"attrs.{name}", "expected")


@pytest.mark.parametrize("key", ["R\u2028x", "a\rb", "a\x85b", "x" * 200])
def test_an_attribute_name_that_would_break_the_line(capsys, tmp_path, key):
    """Found by the slow CLI fuzz: an attribute named with a line separator split the one error
    line in two (the name is shown as its bounded repr)."""
    doc = small_cnn()
    doc["ops"][0]["attrs"][key] = {"nested": {"too": "deep"}}  # a value no attribute may have
    line = _refused(capsys, tmp_path, doc, "op 'conv' (Conv)", "attrs[")
    assert len(line.splitlines()) == 1 and len(line) < 400, line


def test_a_dict_where_an_int_belongs(capsys, tmp_path):
    doc = small_cnn()
    doc["ops"][0]["attrs"]["group"] = {"value": 1}
    assert _refused(capsys, tmp_path, doc, "op 'conv' (Conv)", "attrs.group", "expected")


def test_conv_shapes_that_no_convolution_has(capsys, tmp_path):
    doc = small_cnn()
    doc["tensors"][3]["shape"] = doc["tensors"][4]["shape"] = [1, 4, 9, 8]
    assert _refused(capsys, tmp_path, doc, "op 'conv' (Conv)", "outputs[0] shape[2] is 9", "expected 8")
    doc = small_cnn()
    doc["ops"][0]["attrs"]["strides"] = [2, 2]
    assert _refused(capsys, tmp_path, doc, "op 'conv' (Conv)", "expected 4")


def test_a_tile_of_naming_an_op_that_does_not_exist(capsys, tmp_path):
    doc = small_cnn()
    doc["ops"][1]["attrs"]["tile_of"] = "nowhere"
    assert _refused(capsys, tmp_path, doc, "op 'relu' (Relu)", "attrs.tile_of is 'nowhere'", "tile stage")


def test_a_5001_digit_integer(capsys, tmp_path):
    text = json.dumps(small_cnn()).replace('"macs": 0', '"macs": ' + "9" * 5001, 1)
    assert _refused(capsys, tmp_path, text, "not valid JSON", command=("info",))
    doc = small_cnn()
    doc["ops"][1]["vector_ops"] = 10 ** 40
    assert _refused(capsys, tmp_path, doc, "op 'relu' (Relu): field ops[1].vector_ops is an integer of 41 digits",
             command=("info",))


def test_broadcasting_views_and_references(capsys, tmp_path):
    doc = small_cnn()
    doc["tensors"][6]["shape"] = [1, 4, 4, 3]  # s = p + p cannot be [.., 3]
    assert _refused(capsys, tmp_path, doc, "op 'add' (Add)", "outputs[0] shape is [1, 4, 4, 3]", "broadcast")
    doc = small_cnn()
    doc["tensors"].append(dict(name="v", shape=[4], dtype="int8", itemsize=1, kind="weight",
                               view=dict(base="ghost", offset=0, shape=[4], strides=[1])))
    assert _refused(capsys, tmp_path, doc, "tensor 'v'", "view.base is 'ghost'")


def test_unknown_kinds_stay_accepted(capsys, tmp_path):
    path = _write(tmp_path, small_attention())
    assert main(["simulate", path, "--hw", "edge-npu"]) == 0, capsys.readouterr().err


def test_every_error_is_one_line_naming_the_file():
    doc = small_cnn()
    doc["ops"][4]["attrs"]["perm"] = "x"  # an attribute Reshape does not declare: accepted as a plain value
    check_trace(copy.deepcopy(doc), "t")
    doc["ops"][2]["attrs"]["kernel_shape"] = [2]
    with pytest.raises(TraceError) as info:
        check_trace(doc, "file.json")
    assert str(info.value).startswith("file.json: op 'pool' (MaxPool): attrs.kernel_shape is [2]")


# --------------------------------------------------------------------- plans under the same discipline


@pytest.fixture()
def planned(tmp_path):
    trace = _write(tmp_path, small_cnn(), "cnn.json")
    plan = tmp_path / "plan.json"
    assert main(["plan", trace, "--hw", "edge-npu", "-o", str(plan)]) == 0
    return trace, plan


def _simulate_plan(capsys, trace, plan, doc, *extra):
    plan.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    code = main(["simulate", trace, "--hw", "edge-npu", "--plan", str(plan), *extra])
    err = capsys.readouterr().err
    return code, err.strip().splitlines()


def test_plan_integers_are_bounded(capsys, planned):
    trace, plan = planned
    doc = json.loads(plan.read_text())
    code, lines = _simulate_plan(capsys, trace, plan, dict(doc, capacity=10 ** 57))
    assert code == 2 and len(lines) == 1 and "field capacity is an integer of 58 digits" in lines[0], lines
    text = json.dumps(doc).replace('"alignment": 64', '"alignment": ' + "1" * 5001)
    code, lines = _simulate_plan(capsys, trace, plan, text)
    assert code == 2 and len(lines) == 1 and "not a readable JSON plan" in lines[0], lines


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_number_is_refused_naming_its_field(capsys, tmp_path, planned, constant):
    """Found by the slow plan fuzz: ``"format": Infinity`` was refused without saying where."""
    trace, plan = planned
    text = json.dumps(dict(json.loads(plan.read_text()), format="PLACE")).replace('"PLACE"', constant)
    code, lines = _simulate_plan(capsys, trace, plan, text)
    assert code == 2 and len(lines) == 1 and f"field format is {constant}, which is not a JSON number" in lines[0]
    doc = small_cnn()
    doc["ops"][1]["vector_ops"] = "PLACE"
    path = _write(tmp_path, json.dumps(doc).replace('"PLACE"', constant), "nan.json")
    assert main(["info", path]) == 2
    err = capsys.readouterr().err.strip()
    assert f"field ops[1].vector_ops is {constant}" in err and len(err.splitlines()) == 1, err


def test_plan_streams_and_alignment_are_checked_against_the_hardware(capsys, planned):
    trace, plan = planned
    doc = json.loads(plan.read_text())
    code, lines = _simulate_plan(capsys, trace, plan, dict(doc, streams={"pool": 3}))
    assert code == 2 and "op 'pool' runs on stream 3, but edge-npu has 1 stream(s)" in lines[0], lines
    code, lines = _simulate_plan(capsys, trace, plan, dict(doc, alignment=16))
    assert code == 2 and "alignment = 16 B is not a multiple of edge-npu's scratchpad.alignment (64 B)" in lines[0]
    code, lines = _simulate_plan(capsys, trace, plan, dict(doc, streams={"pool": 3}), "--set", "streams=4")
    assert code == 0, lines


def test_the_plan_schema_is_valid():
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(load_schema("plan.schema.json"))


def test_the_format_reference_is_generated_from_the_schemas():
    import runpy

    checker = runpy.run_path(str(REPO / "scripts" / "schema_docs.py"))
    assert checker["main"](["--check"]) == 0, "docs/trace-format.md is out of date: python scripts/schema_docs.py"
