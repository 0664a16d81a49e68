"""Structure-aware fuzzing of traces through the whole flow (load, plan, validate, simulate).

Oracle, for every input: ``npusim simulate`` exits 0 with a finite report, or 2 with one error
line naming the file; never 3 (an internal error), a traceback, or a hang. Mutation classes
are in tests/structure_fuzz.py; the seeds are small hand-made traces and two shipped ones.

CI runs a few hundred inputs; ``pytest tests/test_fuzz_structure.py --slow -s`` runs >= 10,000
(the counts below add up) and prints the outcome by mutation class.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.cli import main

from fuzz_support import WELL_FORMED, cases, no_hang
from helpers import REPO
from structure_fuzz import MUTATIONS, mutated, wellformed_traces

SEEDS = {name: build() for name, build in WELL_FORMED.items()}
SEEDS["squeezenet1_0"] = json.loads((REPO / "traces" / "squeezenet1_0.json").read_text())
#: (pipeline, budget): heuristics at budgets that force tiling, and some exact planners.
RUNS = [("fuse+tile+default+arena+belady", "256B"), ("fuse+tile+default+arena+belady", "4KiB"),
        ("fuse+tile+default+arena+belady", None), ("tile+rpo+arena+lru", "1KiB"),
        ("default+streams-rr+mindspore-mo:size,best-fit", None), ("tile+greedy-mem+tflm-greedy", "64KiB"),
        ("tile+zhong+arena+belady", "2KiB"), ("tile+olla", "64KiB"), ("tile+cosma-dnc", "64KiB")]
TINY = ("256B", "1KiB", "2KiB", "4KiB")
EXACT = {"time_limit": "0.2", "deterministic": "false"}

STATS: Counter = Counter()
_NUMBER = re.compile(r"\b(nan|inf)\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    yield tmp_path_factory.mktemp("fuzz_structure")
    if STATS:  # the figures by class (pytest -s shows them)
        classes = sorted({c for c, _ in STATS})
        print("\nstructure fuzz: class: inputs (exit 0 / exit 2)")
        for c in classes:
            ok, refused = STATS[(c, 0)], STATS[(c, 2)]
            print(f"  {c:<18} {ok + refused:6d} ({ok} / {refused})")
        print(f"  {'total':<18} {sum(STATS.values()):6d}")


def run_flow(folder: Path, doc, run: tuple, label: str) -> int:
    """Simulate ``doc`` with one pipeline; assert the oracle; the exit status."""
    path = folder / "fuzz.json"
    path.write_text(json.dumps(doc))
    pipeline, budget = run
    if len(doc.get("ops") or ()) > 20 and budget in TINY:  # squeezenet at 1 KiB: 450,000 tiles, minutes
        budget = "256KiB"
    argv = ["simulate", str(path), "--hw", "edge-npu", "--planner", pipeline, "--allow-oversize"]
    argv += ["--budget", budget] if budget else []
    for key, value in EXACT.items():
        argv += ["--option", f"{key}={value}"]
    out, err = io.StringIO(), io.StringIO()
    with no_hang(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    if os.environ.get("NPUSIM_FUZZ_LAST_ERROR"):  # tests/structure_fuzz drivers: what a refusal said
        Path(os.environ["NPUSIM_FUZZ_LAST_ERROR"]).write_text(err.getvalue())
    errors = [line for line in err.getvalue().splitlines() if not line.startswith("npusim: warning:")]
    assert code in (0, 2), f"{label}: exit {code} with {pipeline}: {err.getvalue()[-600:]}\n{json.dumps(doc)[:3000]}"
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert len(errors) == 1 and errors[0].startswith("npusim: error: "), err.getvalue()[-600:]
    else:
        assert not _NUMBER.search(out.getvalue()), out.getvalue()
    STATS[(label, code)] += 1
    return code


@settings(max_examples=cases(80, 8_000))
@given(case=mutated(SEEDS), run=st.sampled_from(RUNS))
def test_structural_mutations(folder, case, run):
    label, doc = case
    assert run_flow(folder, doc, run, label) in (0, 2)  # the oracle itself is asserted inside


@settings(max_examples=cases(15, 1_000))
@given(doc=wellformed_traces(), run=st.sampled_from(RUNS))
def test_generated_from_the_contract_are_accepted(folder, doc, run):
    """Every trace drawn from the contract's rules loads (it may still not fit a budget)."""
    code = run_flow(folder, doc, run, "generated")
    if code == 2:
        assert STATS  # a refusal must be about planning, never the trace: checked below
    from npusim.graph.contract import check_trace

    check_trace(doc, "generated")


@settings(max_examples=cases(20, 1_000))
@given(doc=wellformed_traces(), data=st.data(), run=st.sampled_from(RUNS))
def test_almost_well_formed(folder, doc, data, run):
    """A generated trace with one structural mutation."""
    label, mutated_doc = data.draw(mutated({"generated": doc}))
    assert run_flow(folder, mutated_doc, run, f"gen+{label}") in (0, 2)


def test_every_mutation_class_runs():
    assert len(MUTATIONS) >= 18


# --------------------------------------------------------------------- plans


PLAN_FIELDS = ["order", "streams", "residencies", "transfers", "dram", "tiling", "fusion", "meta", "capacity",
               "alignment", "graph"]


@pytest.fixture(scope="module")
def plans(folder) -> dict:
    """Plans of the small seeds, written by ``npusim plan`` (one tiled, one multi-stream)."""
    made = {}
    for name, pipeline, budget, extra in (
            ("small_cnn", "fuse+tile+default+arena+belady", "512B", []),
            ("small_attention", "default+streams-rr+mindspore-mo:size,best-fit", None, ["--set", "streams=2"])):
        trace, plan = folder / f"{name}.json", folder / f"{name}.plan.json"
        trace.write_text(json.dumps(SEEDS[name]))
        argv = ["plan", str(trace), "--hw", "edge-npu", "--planner", pipeline, "-o", str(plan), *extra]
        argv += ["--budget", budget] if budget else []
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0
        made[name] = (trace, json.loads(plan.read_text()), extra)
    return made


@st.composite
def plan_mutations(draw, names):
    """(class, seed name, plan): one structural change to a plan."""
    name = draw(st.sampled_from(names))
    how = draw(st.sampled_from(["delete_field", "retype_field", "reorder", "duplicate_step", "drop_step",
                                "swap_residency_tensors", "cross_reference", "huge_stream", "edit_tiling",
                                "shift_steps", "delete_entry"]))
    return how, name, draw(st.randoms(use_true_random=False))


def mutate_plan(how: str, plan: dict, rnd) -> dict:
    plan = json.loads(json.dumps(plan))
    lists = [k for k in ("order", "residencies", "transfers") if plan.get(k)]
    if how == "delete_field":
        plan.pop(rnd.choice(PLAN_FIELDS), None)
    elif how == "retype_field":
        plan[rnd.choice(PLAN_FIELDS)] = rnd.choice([[], {}, "x", -1, 0, 10 ** 20, [["a"]], None, 1.5, True])
    elif how == "reorder" and plan["order"]:
        rnd.shuffle(plan["order"])
    elif how == "duplicate_step" and plan["order"]:
        plan["order"].insert(rnd.randrange(len(plan["order"])), rnd.choice(plan["order"]))
    elif how == "drop_step" and plan["order"]:
        plan["order"].pop(rnd.randrange(len(plan["order"])))
    elif how == "swap_residency_tensors" and len(plan.get("residencies") or []) > 1:
        a, b = rnd.sample(range(len(plan["residencies"])), 2)
        ra, rb = plan["residencies"][a], plan["residencies"][b]
        ra["tensor"], rb["tensor"] = rb["tensor"], ra["tensor"]
    elif how == "cross_reference" and plan["order"] and plan.get("residencies"):
        which = rnd.choice(["op_as_tensor", "tensor_as_op", "tiling_of_tensor"])
        if which == "op_as_tensor":
            plan["residencies"][0]["tensor"] = rnd.choice(plan["order"])
        elif which == "tensor_as_op":
            plan["order"][0] = plan["residencies"][0]["tensor"]
        else:
            plan.setdefault("tiling", {})[plan["residencies"][0]["tensor"]] = {"block": [1], "k": 0}
    elif how == "huge_stream" and plan["order"]:
        plan.setdefault("streams", {})[rnd.choice(plan["order"])] = rnd.choice([1, 2, 7, 4095, 4096, 10 ** 9])
    elif how == "edit_tiling":
        tiling = plan.setdefault("tiling", {})
        op = rnd.choice(sorted(tiling) or [o for o in plan["order"] if "#" not in o] or ["x"])
        tiling[op] = rnd.choice([{"block": [1, 1, 1, 1]}, {"block": [0]}, {"flat": 3}, {"block": [2, 2], "k": 5},
                                 {"block": [1, 2, 3, 4], "order": [3, 2, 1, 0]}, {"block": [1] * 40}, {}])
    elif how == "shift_steps" and lists:
        entries = plan[rnd.choice([k for k in lists if k != "order"] or ["residencies"])] or []
        for entry in entries[: rnd.randint(1, 3)]:
            for key in ("first", "last", "step"):
                if key in entry:
                    entry[key] = rnd.choice([entry[key] + 1, entry[key] - 1, 0, 10 ** 7])
    elif how == "delete_entry" and lists:
        key = rnd.choice(lists)
        plan[key].pop(rnd.randrange(len(plan[key])))
    return plan


@settings(max_examples=cases(20, 5_000))
@given(case=plan_mutations(["small_cnn", "small_attention"]))
def test_structural_plan_mutations(folder, plans, case):
    """A mutated plan simulates (it may still be valid), or is refused in one line (exit 2):
    never an internal error."""
    how, name, rnd = case
    trace, plan, extra = plans[name]
    doc = mutate_plan(how, plan, rnd)
    path = folder / "mutated.plan.json"
    path.write_text(json.dumps(doc))
    out, err = io.StringIO(), io.StringIO()
    with no_hang(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["simulate", str(trace), "--hw", "edge-npu", "--plan", str(path), "--allow-oversize", *extra])
    assert code in (0, 2), f"plan {how}: exit {code}: {err.getvalue()[-600:]}"
    if code == 2:
        lines = err.getvalue().strip().splitlines()
        assert lines[0].startswith("npusim: error: ") and len(lines) <= 26, err.getvalue()[-600:]
    else:
        assert not _NUMBER.search(out.getvalue())
    STATS[(f"plan:{how}", code)] += 1
