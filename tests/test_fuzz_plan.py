"""Fuzzing the plan loader, validator and simulator (npusim-plan/1 JSON): every input either
loads, validates and simulates, or ends in an NpusimError naming the file, the field and the
value (steps out of range, unknown tensors, overlapping residencies included).

A few hundred cases in CI; ``pytest tests/test_fuzz_plan.py --slow`` runs >= 10,000
cases (the per-test counts add up to 10,000).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.errors import NpusimError, PlanError
from npusim.graph.model import build_graph
from npusim.hw.config import Hardware
from npusim.plan.io import load_plan, plan_to_dict
from npusim.sim.report import Report
from npusim.testing import random_dags
from npusim.workflow import memory_bounds, plan_graph, simulate_plan

from fuzz_support import cases, expect_clean, json_values
from plan_fixtures import tiny_graph, valid_plan

HW = Hardware()


def _conv_graph():
    t = lambda name, shape, kind="activation": dict(name=name, shape=shape, dtype="int8", itemsize=1, kind=kind)  # noqa: E731
    tensors = [t("x", [1, 8, 20, 20], "input"), t("w", [8, 8, 3, 3], "weight"), t("y", [1, 8, 20, 20]),
               t("z", [1, 8, 20, 20], "output")]
    conv = dict(name="conv", kind="Conv", inputs=["x", "w"], outputs=["y"],
                attrs=dict(group=1, kernel_shape=[3, 3], pads=[1] * 4, strides=[1, 1]), macs=400 * 8 * 8 * 9)
    relu = dict(name="relu", kind="Relu", inputs=["y"], outputs=["z"], vector_ops=3200)
    return build_graph("convnet", tensors, [conv, relu])


def _seeds():
    """(graph, plan dict) pairs: hand-written, spilling, multi-stream and tiled plans."""
    tiny = tiny_graph()
    seeds = [(tiny, plan_to_dict(valid_plan(tiny), tiny))]
    g = random_dags.diamonds(3, 2, 4)
    b = memory_bounds(g, 64)
    seeds.append((g, plan_to_dict(plan_graph(g, HW, "default+arena+belady", b.m_r), g)))
    seeds.append((g, plan_to_dict(plan_graph(g, HW, "rpo+streams-rr+mindspore-mo:size,best-fit", 1 << 20), g)))
    conv = _conv_graph()
    seeds.append((conv, plan_to_dict(plan_graph(conv, HW, "tile+default+arena+belady", 4096), conv)))
    return seeds


SEEDS = _seeds()
TOP_FIELDS = ["format", "graph", "capacity", "alignment", "order", "streams", "residencies", "transfers",
              "dram", "tiling", "meta"]
RES_FIELDS = ["tensor", "offset", "first", "last", "size"]
XFER_FIELDS = ["step", "kind", "tensor", "cause"]
META_FIELDS = ["planner", "options", "status", "objective", "bound", "solve_seconds"]

numbers = st.one_of(st.integers(-5, 70), st.integers(-(2**80), 2**80), st.sampled_from([2**31, 2**63, 2**64]),
                    st.floats(allow_nan=True, allow_infinity=True))
junk = st.one_of(json_values, numbers, st.sampled_from(["", "nope", "x", "a", "y", "conv", "load", "store",
                                                        "spill", "optimal", [], {}, None, True, [["x"]], {"a": 1}]))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_plan")


def _write(folder: Path, data) -> Path:
    path = folder / "plan.json"
    text = data if isinstance(data, (str, bytes)) else json.dumps(data, allow_nan=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return path


def _load_validate_simulate(path: Path, graph):
    """What ``npusim simulate --plan`` does: load, validate, lower, simulate."""
    plan = load_plan(path, graph)
    return simulate_plan(plan, HW, graph, source=str(path))


def _run(folder, data, graph, key=None):
    path = _write(folder, data)
    result = expect_clean(_load_validate_simulate, path, graph, names=[path.name])
    if isinstance(result, NpusimError) and key is not None:
        message = str(result)
        assert key in message or repr(key) in message or "violation" in message, message
    return result


@settings(max_examples=cases(60, 2_000))
@given(data=st.one_of(st.text(max_size=100), st.binary(max_size=100), json_values), seed=st.sampled_from(SEEDS))
def test_arbitrary_input(folder, data, seed):
    result = _run(folder, data, seed[0])
    assert isinstance(result, PlanError)


@st.composite
def field_mutations(draw):
    graph, valid = draw(st.sampled_from(SEEDS))
    data = copy.deepcopy(valid)
    part = draw(st.sampled_from(["top", "residencies", "transfers", "meta", "order", "streams", "tiling", "dram"]))
    value = draw(junk)
    delete = draw(st.integers(0, 4)) == 0
    if part == "top" or not data.get(part):
        record, key = data, draw(st.sampled_from(TOP_FIELDS))
    elif part in ("residencies", "transfers"):
        record = data[part][draw(st.integers(0, len(data[part]) - 1))]
        key = draw(st.sampled_from(RES_FIELDS if part == "residencies" else XFER_FIELDS))
    elif part == "meta":
        record, key = data["meta"], draw(st.sampled_from(META_FIELDS))
    elif part == "order":
        record, key = data["order"], draw(st.integers(0, len(data["order"]) - 1))
    else:  # a mapping: streams, tiling, dram
        record = data[part]
        names = sorted(record)
        key = draw(st.sampled_from(names)) if names and draw(st.booleans()) else draw(st.text(max_size=4))
        if part == "tiling" and key in record and isinstance(record[key], dict) and draw(st.booleans()):
            record = record[key]
            key = draw(st.sampled_from(["block", "k", "order", "flat"]))
    if delete and isinstance(record, dict):
        record.pop(key, None)
    else:
        record[key] = value
    return graph, data, key


@settings(max_examples=cases(250, 5_000))
@given(case=field_mutations())
def test_one_bad_field(folder, case):
    graph, data, key = case
    result = _run(folder, data, graph, key if isinstance(key, str) else None)
    assert isinstance(result, (Report, NpusimError)), type(result)


@st.composite
def semantic_damage(draw):
    """Well-typed plans that are wrong: steps out of range, unknown tensors, overlaps, ..."""
    graph, valid = draw(st.sampled_from(SEEDS))
    data = copy.deepcopy(valid)
    residencies, transfers = data["residencies"], data["transfers"]
    kind = draw(st.sampled_from(["step_range", "unknown_tensor", "overlap", "drop_residency", "drop_transfer",
                                 "swap_order", "tiny_capacity", "misalign", "huge_offset", "shrink",
                                 "duplicate_op", "stream_split"]))
    r = draw(st.integers(0, len(residencies) - 1))
    t = draw(st.integers(0, max(0, len(transfers) - 1)))
    n_steps = len(data["order"])
    if kind == "step_range":
        field = draw(st.sampled_from(["first", "last"]))
        residencies[r][field] = n_steps + draw(st.integers(0, 2**40))
    elif kind == "unknown_tensor":
        target = residencies[r] if draw(st.booleans()) or not transfers else transfers[t]
        target["tensor"] = "no_such_tensor"
    elif kind == "overlap":
        other = residencies[draw(st.integers(0, len(residencies) - 1))]
        residencies[r]["offset"] = other["offset"]
    elif kind == "drop_residency":
        residencies.pop(r)
    elif kind == "drop_transfer" and transfers:
        transfers.pop(t)
    elif kind == "swap_order" and n_steps > 1:
        i = draw(st.integers(0, n_steps - 2))
        data["order"][i], data["order"][i + 1] = data["order"][i + 1], data["order"][i]
    elif kind == "tiny_capacity":  # below the top of the highest residency
        data["capacity"] = draw(st.integers(1, max(r["offset"] + r["size"] for r in residencies) - 1))
    elif kind == "misalign":
        residencies[r]["offset"] += draw(st.integers(1, data["alignment"] + 1))
    elif kind == "huge_offset":
        residencies[r]["offset"] = draw(st.sampled_from([2**40, 2**62, 2**63 - 1, 2**64, 2**80]))
    elif kind == "shrink":
        residencies[r]["size"] = max(1, residencies[r]["size"] // 2)
    elif kind == "duplicate_op":
        data["order"].append(data["order"][0])
    elif kind == "stream_split":
        data["streams"] = {name: draw(st.integers(0, 3)) for name in data["order"]}
    return graph, data, kind


@settings(max_examples=cases(200, 3_000))
@given(case=semantic_damage())
def test_wrong_plans_are_refused_or_simulated(folder, case):
    graph, data, kind = case
    result = _run(folder, data, graph)
    if kind in ("step_range", "unknown_tensor", "tiny_capacity", "huge_offset", "duplicate_op"):
        assert isinstance(result, PlanError), kind
