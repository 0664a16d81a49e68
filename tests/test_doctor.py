"""``npusim doctor``: every problem of a config or plan, each with a fix."""

from __future__ import annotations

import json

import pytest
from pathlib import Path

from npusim.cli import main
from npusim.cli.doctor import FIXES, diagnose

from plan_fixtures import tiny_graph, valid_plan


def test_every_bad_hardware_key_is_listed(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("clock: 1 GHZ\nscratchpad: {size: -5KiB, alignment: 48}\ncores: {pe_rowz: 16, count: two}\n")
    problems = diagnose([str(path)])
    text = "\n".join(map(str, problems))
    for key in ("cores.pe_rowz", "clock", "cores.count", "scratchpad.size", "scratchpad.alignment"):
        assert key in text, text
    assert "rename it to 'cores.pe_rows'" in text
    assert main(["doctor", str(path)]) == 1
    assert "5 problem(s) found" in capsys.readouterr().out


def test_every_plan_violation_gets_its_fix(tmp_path):
    from npusim.graph.trace_io import save_trace
    from npusim.plan.io import plan_to_dict

    graph = tiny_graph()
    trace = tmp_path / "tiny.json"
    save_trace(graph, trace)
    data = plan_to_dict(valid_plan(graph), graph)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(data))
    tiny_npu = str(Path(__file__).parent / "fixtures" / "tiny-npu.yaml")  # 16-B alignment, as the plan
    assert diagnose([str(good)], trace=str(trace), hw=tiny_npu) == []
    assert "not a multiple of edge-npu's scratchpad.alignment" in diagnose([str(good)], trace=str(trace),
                                                                            hw="edge-npu")[0].message
    data["residencies"][0]["offset"] = 3  # misaligned and overlapping
    data["transfers"] = [t for t in data["transfers"] if t["cause"] != "writeback"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    problems = diagnose([str(bad)], trace=str(trace))
    kinds = {p.message.split("]")[0].strip("[") for p in problems}
    assert {"alignment", "not_written_back"} <= kinds
    assert all(p.fix == FIXES[p.message.split("]")[0].strip("[")] for p in problems)


def test_unreadable_files_are_problems_not_crashes(tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\x00\xff{")
    problems = diagnose([str(junk), str(tmp_path / "missing.json")])
    assert len(problems) == 2 and all(p.fix for p in problems)


def test_a_file_doctor_does_not_check_is_named_as_such(tmp_path):
    """A figure given to doctor was read as a trace ("not valid JSON ... re-import the model")."""
    figure = tmp_path / "plan.png"
    figure.write_bytes(b"\x89PNG\r\n\x1a\n")
    (problem,) = diagnose([str(figure)])
    assert "not a file doctor checks (.png)" in str(problem) and "re-import" not in str(problem)


def test_shipped_names_are_diagnosed_like_files(capsys):
    """doctor takes a shipped trace or hardware config by name, as every other command does."""
    assert diagnose(["edge-npu", "squeezenet1_0"]) == []
    assert main(["doctor", "edge-npu", "no-such-config"]) == 1
    out = capsys.readouterr().out
    assert "no-such-config: no such file, shipped trace or hardware config" in out and "edge-npu:" not in out


def test_every_problem_of_a_trace_is_listed(tmp_path):
    """Two convolutions with attributes of the wrong type in one trace: doctor lists both, each
    with the fix (loading stops at the first)."""
    from npusim.graph.trace_io import graph_to_dict, load_trace
    from npusim.workflow import load_graph

    data = graph_to_dict(load_graph("squeezenet1_0"))
    convs = [op for op in data["ops"] if op["kind"] == "Conv"]
    convs[0]["attrs"]["strides"] = "one"
    convs[3]["attrs"]["pads"] = [[0, 0]]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    problems = diagnose([str(path)])
    assert len(problems) == 2 and all(p.fix.startswith("fix the field") for p in problems)
    assert "attrs.strides is 'one'" in problems[0].message and "attrs.pads is [[0, 0]]" in problems[1].message
    with pytest.raises(Exception, match="attrs.strides is 'one'"):
        load_trace(path)  # the loader's one-line error is the first of them
