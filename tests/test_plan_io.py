"""Plan JSON (npusim.plan.io): round trips, hand-editing defaults, and errors that name the
file, the field and the value."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from npusim.errors import PlanError
from npusim.plan.io import FORMAT, _rows as _ROWS, load_plan, plan_from_dict, plan_to_dict, save_plan
from npusim.plan.model import PlanMeta
from npusim.plan.validate import require_valid, validate
from plan_fixtures import JOIN, LEFT, find_residency, graph_fixture, plan_fixture, tiny_graph  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def full_plan(graph, plan):
    """The valid plan with every optional part filled in: streams, DRAM offsets, meta.

    (Tiled plans refer to a tiled graph; their round trip is in tests/test_tiling.py.)"""
    return replace(
        plan,
        streams=(0, 1, 0, 2),
        dram={"x": 0, "w1": 64, "b": 128, "y": 192},  # keyed by DRAM buffer (npusim.plan.dram)
        meta=PlanMeta(planner="default+arena+belady", options={"seed": 3, "limit": 1.5},
                      solve_seconds=0.25, status="feasible", objective=128.0, bound=64.0),
    )


def through_json(data: dict) -> dict:
    return json.loads(json.dumps(data))


# -- round trips ---------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["plan", "full_plan"])
def test_dict_round_trip_gives_an_equal_plan(graph, which, request):
    original = request.getfixturevalue(which)
    assert plan_from_dict(through_json(plan_to_dict(original, graph)), graph) == original


@pytest.mark.parametrize("which", ["plan", "full_plan"])
def test_file_round_trip_gives_an_equal_plan(graph, which, request, tmp_path):
    original = request.getfixturevalue(which)
    path = tmp_path / "plan.json"
    save_plan(original, path, graph)
    loaded = load_plan(path, graph)
    assert loaded == original
    save_plan(loaded, tmp_path / "again.json", graph)
    assert (tmp_path / "again.json").read_text() == path.read_text()


def test_the_file_is_the_indented_json_of_the_plan_record(graph, plan, full_plan, tmp_path, monkeypatch):
    """save_plan streams the residencies and transfers (a tiled plan has millions) in chunks,
    and writes exactly ``json.dumps(plan_to_dict(plan), indent=1)``: plans whose records are
    columns and plans whose records are tuples, no transfers at all, chunks smaller than the
    records."""
    import functools

    import npusim.plan.io as plan_io
    from npusim.plan.records import RecordTable

    monkeypatch.setattr(plan_io, "_rows", functools.partial(_ROWS, chunk=2))
    as_tuples = replace(full_plan, transfers=())
    object.__setattr__(as_tuples, "residencies", tuple(full_plan.residencies))  # as a hand-edited plan may hold them
    assert isinstance(plan.residencies, RecordTable) and not isinstance(as_tuples.residencies, RecordTable)
    for which in (plan, full_plan, as_tuples):
        path = tmp_path / "plan.json"
        save_plan(which, path, graph)
        assert path.read_text() == json.dumps(plan_to_dict(which, graph), indent=1) + "\n"


def test_the_file_names_tensors_and_ops(graph, full_plan, tmp_path):
    path = tmp_path / "plan.json"
    save_plan(full_plan, path, graph)
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT and data["graph"] == "tiny"
    assert data["order"] == ["conv", "left", "right", "join"]
    assert data["streams"] == {"left": 1, "join": 2}  # stream 0 is left out
    assert {"tensor": "b", "offset": 48, "first": 3, "last": 3, "size": 64} in data["residencies"]
    assert {"step": 1, "kind": "store", "tensor": "b", "cause": "spill"} in data["transfers"]
    assert data["dram"] == {"x": 0, "w1": 64, "b": 128, "y": 192}
    assert data["tiling"] == {}


def test_a_round_tripped_plan_stays_valid(graph, plan, tmp_path):
    save_plan(plan, tmp_path / "plan.json", graph)
    assert validate(load_plan(tmp_path / "plan.json", graph), graph) == []


# -- hand-editing --------------------------------------------------------------------------------
HAND_WRITTEN = """{
 "format": "npusim-plan/1", "graph": "tiny", "capacity": 256, "alignment": 16,
 "order": ["conv", "left", "right", "join"],
 "residencies": [
  {"tensor": "x",  "offset": 0,   "first": 0, "last": 0},
  {"tensor": "w1", "offset": 64,  "first": 0, "last": 0},
  {"tensor": "a",  "offset": 96,  "first": 0, "last": 2},
  {"tensor": "b",  "offset": 160, "first": 1, "last": 1},
  {"tensor": "w2", "offset": 0,   "first": 2, "last": 2},
  {"tensor": "c",  "offset": 16,  "first": 2, "last": 3},
  {"tensor": "b",  "offset": 48,  "first": 3, "last": 3},
  {"tensor": "y",  "offset": 112, "first": 3, "last": 3}
 ],
 "transfers": [
  {"step": 3, "kind": "store", "tensor": "y",  "cause": "writeback"},
  {"step": 3, "kind": "load",  "tensor": "b",  "cause": "retrieve"},
  {"step": 0, "kind": "load",  "tensor": "x",  "cause": "compulsory"},
  {"step": 0, "kind": "load",  "tensor": "w1", "cause": "compulsory"},
  {"step": 1, "kind": "store", "tensor": "b",  "cause": "spill"},
  {"step": 2, "kind": "load",  "tensor": "w2", "cause": "compulsory"}
 ]
}
"""


def test_a_hand_written_file_loads_with_defaults(graph, plan, tmp_path):
    path = tmp_path / "hand.json"
    path.write_text(HAND_WRITTEN)
    loaded = load_plan(path, graph)
    # residency sizes default to the tensor size rounded up to the alignment: y is 40 B -> 48
    y = find_residency(loaded, graph, "y", JOIN)
    assert graph.tensor_by_name["y"].size == 40 and y.size == 48
    assert find_residency(loaded, graph, "b", LEFT).size == 64
    assert loaded.streams == (0, 0, 0, 0)  # streams omitted: every op on stream 0
    assert loaded.dram == {} and loaded.tiling == {}
    assert loaded.meta.status == "hand_written"
    # transfers are put in step order (loads before stores) and carry the whole tensor size
    assert loaded.transfers == plan.transfers
    assert loaded == replace(plan, meta=PlanMeta(status="hand_written"))
    assert validate(loaded, graph) == []


def test_an_explicit_size_overrides_the_default(graph, plan):
    data = plan_to_dict(plan, graph)
    data["residencies"][-1]["size"] = 40  # y's residency: exactly its 40 bytes
    loaded = plan_from_dict(data, graph)
    assert find_residency(loaded, graph, "y", JOIN).size == 40


def test_a_hand_edited_but_broken_plan_loads_and_fails_validation(graph, tmp_path):
    path = tmp_path / "edited.json"
    path.write_text(HAND_WRITTEN.replace('"offset": 16,  "first": 2', '"offset": 0,  "first": 2'))
    loaded = load_plan(path, graph)  # well-formed JSON: I/O does not judge the plan
    with pytest.raises(PlanError, match=r"(?s)edited\.json: 1 violation.*\[overlap\] 'w2' \[0, 16\)"):
        require_valid(loaded, graph, source=str(path))


# -- errors --------------------------------------------------------------------------------------
def edited(graph, plan, edit) -> dict:
    data = copy.deepcopy(plan_to_dict(plan, graph))
    edit(data)
    return data


def load_error(tmp_path, data) -> str:
    path = tmp_path / "bad.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(PlanError) as exc:
        load_plan(path, tiny_graph())
    msg = str(exc.value)
    assert msg.startswith(f"{path}: "), msg  # every error names the file
    return msg


def set_in(path: tuple, value):
    def edit(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


ERRORS = {
    "unknown tensor in a residency": (
        set_in(("residencies", 2, "tensor"), "zz"),
        ["residencies[2]", "unknown tensor 'zz'", "'tiny'"]),
    "unknown tensor in a transfer": (
        set_in(("transfers", 1, "tensor"), "zz"),
        ["transfers[1]", "unknown tensor 'zz'"]),
    "unknown tensor in dram": (
        set_in(("dram",), {"zz": 0}),
        ["dram", "unknown tensor 'zz'"]),
    "unknown op in the order": (
        set_in(("order", 1), "lft"),
        ["order[1]", "unknown op 'lft'", "'tiny'"]),
    "unknown op in streams": (
        set_in(("streams",), {"lft": 1}),
        ["streams", "unknown op 'lft'"]),
    "unknown op in tiling": (
        set_in(("tiling",), {"lft": {"block": [4]}}),
        ["tiling", "unknown op 'lft'"]),
    "wrong format string": (
        set_in(("format",), "npusim-plan/2"),
        ["field 'format' is 'npusim-plan/2'", f"expected '{FORMAT}'"]),
    "missing format string": (
        lambda d: d.pop("format"),
        ["no field 'format'", f"expected 'format': '{FORMAT}'"]),
    "plan for another graph": (
        set_in(("graph",), "resnet50"),
        ["plan is for graph 'resnet50', not 'tiny'"]),
    "another model's fused plan": (  # (its fusion names ops 'tiny' lacks: the graph is named first)
        lambda d: d.update(graph="resnet50@fused@tiled", fusion={"/conv1/Conv": ["/relu/Relu"]}),
        ["plan is for graph 'resnet50@fused@tiled', not 'tiny'"]),
    "negative offset": (
        set_in(("residencies", 0, "offset"), -16),
        ["field residencies[0].offset is -16", "expected an integer from 0 to"]),
    "negative step": (
        set_in(("transfers", 3, "step"), -1),
        ["field transfers[3].step is -1", "expected an integer from 0 to"]),
    "non-integer first step": (
        set_in(("residencies", 1, "first"), "0"),
        ["field residencies[1].first is '0'", "expected an integer"]),
    "missing last step": (
        lambda d: d["residencies"][4].pop("last"),
        ["field residencies[4].last is missing", "(a required field)"]),
    "zero size": (
        set_in(("residencies", 5, "size"), 0),
        ["field residencies[5].size is 0", "expected an integer from 1 to"]),
    "negative DRAM offset": (
        set_in(("dram",), {"x": -64}),
        ["field dram.x is -64", "expected an integer from 0 to"]),
    "zero capacity": (
        set_in(("capacity",), 0),
        ["field capacity is 0", "expected an integer from 1 to"]),
    "negative stream": (
        set_in(("streams",), {"left": -1}),
        ["field streams.left is -1", "expected an integer from 0 to 4,095"]),
    "bad kind": (
        set_in(("transfers", 0, "kind"), "copy"),
        ["transfers[0]", "kind is 'copy'", "'load'", "'store'"]),
    "bad cause": (
        set_in(("transfers", 2, "cause"), "evict"),
        ["transfers[2]", "cause is 'evict'", "'spill'", "'retrieve'"]),
    "bad status": (
        set_in(("meta", "status"), "done"),
        ["meta.status is 'done'", "'optimal'", "'timed_out'"]),
    "order not a list": (
        set_in(("order",), "conv left right join"),
        ["field order is 'conv left right join'", "expected a list"]),
    "residencies not a list": (
        set_in(("residencies",), {"x": 0}),
        ["field residencies is {'x': 0}", "expected a list"]),
    "residency not an object": (
        set_in(("residencies", 3), ["b", 160, 1, 1]),
        ["residencies[3]", "expected an object"]),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_name_the_file_field_and_value(graph, plan, tmp_path, case):
    edit, parts = ERRORS[case]
    msg = load_error(tmp_path, edited(graph, plan, edit))
    for part in parts:
        assert part in msg, f"{part!r} not in {msg!r}"


def test_error_from_a_dict_names_the_source(graph, plan):
    data = edited(graph, plan, set_in(("transfers", 0, "kind"), "copy"))
    with pytest.raises(PlanError, match=r"^my-plan: field transfers\[0\].kind is 'copy', expected one of 'load', 'store'"):
        plan_from_dict(data, graph, source="my-plan")


def test_not_json(tmp_path):
    msg = load_error(tmp_path, '{"format": "npusim-plan/1", "graph": "tiny",,}')
    assert "not a readable JSON plan" in msg and "line 1" in msg


@pytest.mark.parametrize("text, holds", [("[1, 2, 3]", "a JSON array"), ("null", "null"), ('"plan"', "a JSON string"),
                                         ("7", "a JSON number")])
def test_json_but_not_an_object(tmp_path, text, holds):
    """Named for what the file holds in JSON's words (it said "field 'format' is 'list'")."""
    msg = load_error(tmp_path, text)
    assert f"the file holds {holds}, expected a plan: a JSON object with \"format\": \"{FORMAT}\"" in msg


def test_missing_file(tmp_path, graph):
    path = tmp_path / "nowhere" / "plan.json"
    with pytest.raises(PlanError, match="no such plan file") as exc:
        load_plan(path, graph)
    assert str(path) in str(exc.value)


# Malformed optional sections are PlanErrors naming the field, not TypeErrors from deep inside.
IO_GAPS = {
    "tiling shape not a list": set_in(("tiling",), {"conv": 5}),
    "dram not an object": set_in(("dram",), [["x", 0]]),
    "meta not an object": set_in(("meta",), "heuristic"),
    "meta.options not an object": set_in(("meta", "options"), "seed=3"),
    "meta.solve_seconds not a number": set_in(("meta", "solve_seconds"), "fast"),
}


@pytest.mark.parametrize("case", list(IO_GAPS))
def test_malformed_optional_sections_are_plan_errors(graph, plan, tmp_path, case):
    msg = load_error(tmp_path, edited(graph, plan, IO_GAPS[case]))
    assert case.split()[0].split(".")[0] in msg
