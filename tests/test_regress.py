"""Golden-traffic regression: files are written, checked, diffed, filtered and updated."""

import pytest
import yaml

from npusim.cli import regress
from npusim.cli import main

TRACE = "squeezenet1_0"
PIPELINES = ("default+arena+belady", "rpo+arena+lru")


@pytest.fixture()
def golden_dir(tmp_path, monkeypatch):
    """A folder of goldens for one small trace, two pipelines, budgets MR and MP."""
    monkeypatch.setattr(regress, "default_matrix",
                        lambda: [(TRACE, "edge-npu", p, b) for p in PIPELINES for b in ("MR", "MP")])
    cases, files = regress.update_goldens(tmp_path)
    assert cases == 4 and [f.name for f in files] == [f"{TRACE}.edge-npu.yaml"]
    return tmp_path


def edit(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_written_goldens_hold_numbers_and_provenance(golden_dir):
    data = yaml.safe_load((golden_dir / f"{TRACE}.edge-npu.yaml").read_text())
    assert data["format"] == regress.FORMAT and data["tolerances"]["bytes"] == {"abs": 0}
    prov = data["provenance"]
    assert prov["npusim_version"] and prov["date"] and len(prov["trace_sha256"]) == 64
    assert prov["hardware"]["name"] == "edge-npu" and prov["hardware"]["scratchpad"]["size"] == 1 << 20
    assert "solve_seconds" not in str(data)  # no wall-clock value in a golden
    case = data["cases"][0]
    assert (case["planner"], case["budget"]) == ("default+arena+belady", "MR")
    expected = case["expected"]
    assert set(expected["offchip_read"]) == {"compulsory", "retrieve"}
    assert set(expected["offchip_write"]) == {"writeback", "spill"}
    assert expected["cycles"] > 0 and expected["energy_pj"] > 0 and expected["budget_bytes"] > 0


def test_fresh_goldens_match(golden_dir):
    checked, mismatches = regress.check(golden_dir)
    assert checked == 4 and mismatches == []


def test_a_moved_byte_is_a_mismatch_with_a_diff_table(golden_dir, capsys):
    path = golden_dir / f"{TRACE}.edge-npu.yaml"
    edit(path, lambda d: d["cases"][1]["expected"]["offchip_read"].update(compulsory=d["cases"][1]["expected"]
                                                                          ["offchip_read"]["compulsory"] + 1))
    checked, mismatches = regress.check(golden_dir)
    assert [(m.case, m.metric) for m in mismatches] == [(f"{TRACE}/edge-npu/default+arena+belady/MP",
                                                         "offchip_read.compulsory")]
    assert mismatches[0].actual == mismatches[0].expected - 1
    table = regress.format_diff(mismatches)
    assert "offchip_read.compulsory" in table and "-1" in table and "abs 0" in table

    code = main(["regress", "--dir", str(golden_dir)])
    out = capsys.readouterr().out
    assert code == 1 and "offchip_read.compulsory" in out and "1 mismatched" in out
    # --only picks cases by glob or substring; the untouched case passes.
    assert main(["regress", "--dir", str(golden_dir), "--only", "*/rpo+arena+lru/MR"]) == 0
    assert "1 golden case(s): all match" in capsys.readouterr().out
    assert main(["regress", "--dir", str(golden_dir), "--only", "belady/MP"]) == 1
    capsys.readouterr()


def test_tolerances_apply_per_metric_and_per_case(golden_dir):
    path = golden_dir / f"{TRACE}.edge-npu.yaml"

    def nudge(data):
        case = data["cases"][0]
        case["expected"]["cycles"] *= 1 + 1e-6
        case["expected"]["energy_pj"] *= 1 + 1e-12  # within the default 1e-9
    edit(path, nudge)
    _, mismatches = regress.check(golden_dir)
    assert [m.metric for m in mismatches] == ["cycles"]
    edit(path, lambda d: d["cases"][0].update(tolerances={"cycles": {"rel": 1e-5}}))
    assert regress.check(golden_dir)[1] == []


def test_update_fixes_numbers_and_keeps_hand_set_tolerances(golden_dir):
    path = golden_dir / f"{TRACE}.edge-npu.yaml"

    def tamper(data):
        data["cases"][0]["expected"]["onchip_peak_bytes"] += 64
        data["cases"][0]["tolerances"] = {"cycles": {"rel": 1e-3}}
        data["cases"][3]["expected"]["cycles"] += 1000
    edit(path, tamper)
    assert len(regress.check(golden_dir)[1]) == 2
    # Updating only case 0 leaves case 3's (wrong) number alone.
    cases, _ = regress.update_goldens(golden_dir, only="default+arena+belady/MR")
    assert cases == 1
    remaining = regress.check(golden_dir)[1]
    assert [m.case for m in remaining] == [f"{TRACE}/edge-npu/rpo+arena+lru/MP"]
    assert yaml.safe_load(path.read_text())["cases"][0]["tolerances"] == {"cycles": {"rel": 1e-3}}
    assert main(["regress", "--dir", str(golden_dir), "--update"]) == 0
    assert regress.check(golden_dir)[1] == []


def test_infeasible_expectation_is_checked_by_status(golden_dir):
    path = golden_dir / f"{TRACE}.edge-npu.yaml"
    edit(path, lambda d: d["cases"][0].update(expected={"status": "infeasible", "reason": "below M_R"}))
    (mismatch,) = regress.check(golden_dir)[1]
    assert mismatch.metric == "status" and mismatch.expected == "infeasible" and mismatch.actual.startswith("ok")


@pytest.mark.parametrize("text, message", [
    ("format: other/1\n", "expected a mapping with format"),
    ("format: npusim-golden/1\ntrace: x\n", "missing key 'hardware'"),
    ("format: npusim-golden/1\ntrace: x\nhardware: y\ncases: [{planner: a}]\n", "cases[0]"),
    ("[unclosed\n", "cannot read golden file"),
])
def test_malformed_golden_is_a_one_line_error(tmp_path, capsys, text, message):
    (tmp_path / "bad.yaml").write_text(text)
    assert main(["regress", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "bad.yaml" in err and err.count("\n") == 1


def test_no_goldens_says_how_to_make_them(tmp_path, capsys):
    assert main(["regress", "--dir", str(tmp_path)]) == 2
    assert "npusim regress --update" in capsys.readouterr().err


@pytest.mark.parametrize("expected, actual, tol, ok", [
    (100, 100, {"abs": 0}, True), (100, 101, {"abs": 0}, False), (100, 101, {"abs": 1}, True),
    (1e9, 1e9 + 0.5, {"rel": 1e-9}, True), (1e9, 1e9 + 2, {"rel": 1e-9}, False),
    ("heuristic", "optimal", None, False), (5, "<missing>", {"abs": 0}, False),
])
def test_within(expected, actual, tol, ok):
    assert regress.within(expected, actual, tol) is ok


def test_matches():
    cid = "resnet50/edge-npu/rpo+arena+lru/MR"
    assert regress.matches(cid, None) and regress.matches(cid, "rpo+arena") and regress.matches(cid, "resnet50/*/MR")
    assert not regress.matches(cid, "resnet18") and not regress.matches(cid, "*/MP")
