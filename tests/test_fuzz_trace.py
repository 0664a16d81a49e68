"""Fuzzing the trace loader (npusim-trace/1 JSON, optionally gzipped): every input loads, or
ends in a TraceError naming the file and the field or record at fault; a graph that loads
can be analysed and planned.

A few hundred cases in CI; ``pytest tests/test_fuzz_trace.py --slow`` runs >= 10,000
cases (the per-test counts add up to 10,000).
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.errors import TraceError
from npusim.graph import trace_io
from npusim.graph.trace_io import graph_to_dict, load_trace
from npusim.hw.config import Hardware
from npusim.testing import random_dags
from npusim.workflow import memory_bounds, plan_graph

from fuzz_support import cases, expect_clean, json_values

SEEDS = [random_dags.chain(4, 1), random_dags.diamonds(2, 2, 3), random_dags.nas_cell(1, 2, 5),
         random_dags.wide_fanout(3, 1, 7)]
VALID = [graph_to_dict(g) for g in SEEDS]
TENSOR_FIELDS = ["name", "shape", "dtype", "itemsize", "kind", "view", "sources"]
OP_FIELDS = ["name", "kind", "inputs", "outputs", "attrs", "macs", "vector_ops", "gemm"]
TOP_FIELDS = ["format", "name", "meta", "tensors", "ops"]

junk = st.one_of(json_values, st.sampled_from([0, -1, -(2**40), 2**62, 2**80, [], [0], [-3, 4], [1] * 100,
                                               [2**40, 2**40], [1.5], ["x"], "", "nope", {}, None, True]))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_trace")


def _write(folder: Path, data, name: str = "fuzz.json") -> Path:
    path = folder / name
    text = data if isinstance(data, (str, bytes)) else json.dumps(data, allow_nan=True)
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    path.write_bytes(gzip.compress(raw, mtime=0) if name.endswith(".gz") else raw)
    return path


def _check_loaded(result) -> None:
    """A graph that loads must also be analysable and plannable (or refuse cleanly)."""
    if isinstance(result, TraceError) or result is None:
        return
    bounds = memory_bounds(result, 64)
    expect_clean(plan_graph, result, Hardware(), "default+arena+belady", max(bounds.m_p, 64))


@settings(max_examples=cases(100, 1_500))
@given(data=st.one_of(st.text(max_size=200), st.binary(max_size=200)), gz=st.booleans())
def test_arbitrary_bytes(folder, data, gz):
    path = _write(folder, data, "fuzz.json.gz" if gz else "fuzz.json")
    result = expect_clean(load_trace, path, names=[path.name])
    assert isinstance(result, TraceError)


@settings(max_examples=cases(100, 1_500))
@given(data=json_values)
def test_arbitrary_json(folder, data):
    path = _write(folder, data)
    result = expect_clean(load_trace, path, names=[path.name])
    assert isinstance(result, TraceError)


@st.composite
def field_mutations(draw):
    """A valid trace with one field of one record replaced by junk or deleted."""
    data = copy.deepcopy(draw(st.sampled_from(VALID)))
    where = draw(st.sampled_from(["top", "tensors", "ops"]))
    delete = draw(st.booleans())
    value = draw(junk)
    if where == "top":
        record, key, label = data, draw(st.sampled_from(TOP_FIELDS)), None
    else:
        i = draw(st.integers(0, len(data[where]) - 1))
        record = data[where][i]
        key = draw(st.sampled_from(TENSOR_FIELDS if where == "tensors" else OP_FIELDS))
        label = record["name"]
    if delete:
        record.pop(key, None)
    else:
        record[key] = value
    return data, key, label


@settings(max_examples=cases(250, 4_000))
@given(case=field_mutations())
def test_one_bad_field_names_the_field(folder, case):
    data, key, label = case
    path = _write(folder, data)
    result = expect_clean(load_trace, path, names=[path.name])
    if isinstance(result, TraceError):
        message = str(result)
        names = {repr(r.get("name")) for part in ("tensors", "ops") if isinstance(data.get(part), list)
                 for r in data[part] if isinstance(r, dict)}
        # the field, or the record at fault, or the tensor or op it broke
        assert key in message or any(name in message for name in names), message
    _check_loaded(result)


def _descendants(ops: list[dict], i: int) -> set[int]:
    producer = {t: k for k, o in enumerate(ops) for t in o["outputs"]}
    found: set[int] = set()
    for k in range(i + 1, len(ops)):  # ops are in a topological order
        if any(producer.get(t) in found | {i} for t in ops[k]["inputs"]):
            found.add(k)
    return found


@st.composite
def graph_surgery(draw):
    """Structural damage: dangling names, cycles, duplicates, producers of inputs, no outputs."""
    data = copy.deepcopy(draw(st.sampled_from(VALID)))
    ops, tensors = data["ops"], data["tensors"]
    kind = draw(st.sampled_from(["dangling", "cycle", "dup_tensor", "dup_op", "produce_input",
                                 "two_producers", "no_outputs", "orphan_activation", "self_loop",
                                 "huge_rank", "huge_size", "drop_op", "bad_source"]))
    i = draw(st.integers(0, len(ops) - 1))
    j = draw(st.integers(0, len(ops) - 1))
    if kind == "dangling":
        ops[i]["inputs"].append(draw(st.text(min_size=1, max_size=6)))
    elif kind == "cycle":  # op i reads the output of one of its descendants
        below = _descendants(ops, i)
        ops[i]["inputs"].append(ops[draw(st.sampled_from(sorted(below)))]["outputs"][0] if below
                                else ops[i]["outputs"][0])
    elif kind == "dup_tensor":
        tensors.append(dict(tensors[draw(st.integers(0, len(tensors) - 1))]))
    elif kind == "dup_op":
        ops[j]["name"] = ops[i]["name"]
    elif kind == "produce_input":
        ops[i]["outputs"].append(tensors[0]["name"])
    elif kind == "two_producers":
        ops[i]["outputs"].append(ops[j]["outputs"][0])
    elif kind == "no_outputs":
        ops[i]["outputs"] = []
    elif kind == "orphan_activation":
        tensors.append(dict(name="orphan", shape=[4], dtype="int8", itemsize=1, kind="activation"))
        ops[i]["inputs"].append("orphan")
    elif kind == "self_loop":
        ops[i]["inputs"].append(ops[i]["outputs"][0])
    elif kind == "huge_rank":
        tensors[draw(st.integers(0, len(tensors) - 1))]["shape"] = [1] * draw(st.integers(33, 100_000))
    elif kind == "huge_size":
        tensors[draw(st.integers(0, len(tensors) - 1))]["shape"] = [2**20] * draw(st.integers(3, 8))
    elif kind == "drop_op":
        ops.pop(i)
    elif kind == "bad_source":
        tensors[draw(st.integers(0, len(tensors) - 1))]["sources"] = [draw(st.text(max_size=4))]
    return data, kind


@settings(max_examples=cases(200, 2_500))
@given(case=graph_surgery())
def test_broken_graphs_are_refused(folder, case):
    data, kind = case
    path = _write(folder, data)
    result = expect_clean(load_trace, path, names=[path.name])
    if kind not in ("dup_op",):  # renaming an op onto another name may keep the graph valid
        assert isinstance(result, TraceError), kind


@settings(max_examples=cases(20, 500))
@given(depth=st.integers(100, 100_000))
def test_deep_json(folder, depth):
    path = _write(folder, '{"format": "npusim-trace/1", "meta": ' + "[" * depth + "]" * depth + "}")
    result = expect_clean(load_trace, path, names=[path.name])
    assert isinstance(result, TraceError)


def test_gzip_bomb_is_refused(folder, monkeypatch):
    """A small .gz that inflates past the cap is refused before it is held in memory."""
    monkeypatch.setattr(trace_io, "MAX_TRACE_BYTES", 1 << 20)
    path = folder / "bomb.json.gz"
    path.write_bytes(gzip.compress(b" " * (8 << 20), mtime=0))
    result = expect_clean(load_trace, path, names=[path.name, "MAX_TRACE_BYTES"])
    assert isinstance(result, TraceError)


def test_truncated_gzip(folder):
    raw = gzip.compress(json.dumps(VALID[0]).encode(), mtime=0)
    for cut in (1, 10, len(raw) // 2, len(raw) - 1):
        path = folder / "cut.json.gz"
        path.write_bytes(raw[:cut])
        assert isinstance(expect_clean(load_trace, path, names=[path.name]), TraceError)
