"""Fuzzing the hardware YAML loader: every input loads or ends in a ConfigError naming the file,
the key and the value; YAML is read with a safe loader only.

A few hundred cases in CI; ``pytest tests/test_fuzz_hw.py --slow`` runs >= 10,000
cases (the per-test counts add up to 10,000).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import npusim.hw.loader as loader
import npusim.hw.yaml_file as yaml_file
from npusim.errors import ConfigError, NpusimError
from npusim.hw.config import Hardware
from npusim.hw.loader import iter_knobs, load_hardware, nest_dotted

from fuzz_support import cases, expect_clean, json_values

KNOBS = [dotted for dotted, _ in iter_knobs()]
UNITS = ["B", "KiB", "kib", "KB", "MiB", "MB", "GiB", "Mb", "MB/s", "GB/s", "B/cycle", "Hz", "MHz", "mhz",
         "GHz", "ns", "us", "ms", "s", "pJ", "nJ", "W", "mW", "cycles", "KiBs", "bytes", "", " ", "%", "e"]
unit_values = st.builds(lambda n, u, sep: f"{n}{sep}{u}", st.one_of(st.integers(-10**30, 10**30),
                        st.floats(allow_nan=True, allow_infinity=True)),
                        st.sampled_from(UNITS), st.sampled_from(["", " ", "  "]))
junk = st.one_of(json_values, unit_values, st.integers(-(2**80), 2**80))

BASE = {"name": "fuzz", "clock": "1GHz", "cores": {"count": 1, "pe_rows": 16, "pe_cols": 16},
        "scratchpad": {"size": "1MiB", "alignment": 64}, "dram": {"bandwidth": "25.6GB/s"}}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_hw")


def _write(folder: Path, text: str | bytes, name: str = "fuzz.yaml") -> Path:
    path = folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return path


def _with(mapping: dict, dotted: str, value) -> dict:
    import copy

    data = copy.deepcopy(mapping)
    target = data
    *blocks, leaf = dotted.split(".")
    for block in blocks:
        target = target.setdefault(block, {})
    target[leaf] = value
    return data


@settings(max_examples=cases(150, 2_500))
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_arbitrary_bytes(folder, text):
    path = _write(folder, text)
    result = expect_clean(load_hardware, path, names=[path.name])
    assert isinstance(result, (Hardware, NpusimError)), type(result)


@settings(max_examples=cases(200, 3_000))
@given(dotted=st.sampled_from(KNOBS), value=junk)
def test_one_bad_value_names_the_key(folder, dotted, value):
    path = _write(folder, yaml.safe_dump(_with(BASE, dotted, value)))
    result = expect_clean(load_hardware, path, names=[path.name])
    if isinstance(result, ConfigError):
        related = {dotted, "scratchpad.alignment", "dma.burst_bytes"}  # cross-checked with each other
        assert any(key in str(result) for key in related), str(result)


@settings(max_examples=cases(100, 1_500))
@given(dotted=st.sampled_from(KNOBS), value=junk)
def test_bad_override_names_the_key(dotted, value):
    result = expect_clean(load_hardware, "edge-npu", overrides={dotted: value})
    if isinstance(result, ConfigError):
        assert dotted in str(result) or "scratchpad.alignment" in str(result), str(result)


@settings(max_examples=cases(100, 1_000))
@given(block=st.sampled_from([None, "cores", "scratchpad", "dma", "dram", "energy"]),
       key=st.one_of(st.text(min_size=1, max_size=12), st.integers(), st.booleans(), st.none()))
def test_unknown_keys_are_named(folder, block, key):
    data = dict(BASE) if block is None else _with(BASE, f"{block}.placeholder", 1)
    if block is None:
        data[key] = 1
    else:
        data[block].pop("placeholder")
        data[block][key] = 1
    try:
        text = yaml.safe_dump(data)
    except yaml.YAMLError:
        return
    path = _write(folder, text)
    result = expect_clean(load_hardware, path, names=[path.name])
    known = {f.split(".")[-1] for f in KNOBS} | {"extends", "cores", "scratchpad", "dma", "dram", "energy"}
    if str(key) not in known:
        assert isinstance(result, ConfigError), result


@settings(max_examples=cases(40, 500))
@given(length=st.integers(1, 6), entry=st.integers(0, 5))
def test_extends_cycles_are_reported(tmp_path_factory, length, entry):
    folder = tmp_path_factory.mktemp("cycle")
    for i in range(length):
        _write(folder, f"extends: c{(i + 1) % length}\nclock: 1GHz\n", f"c{i}.yaml")
    start = folder / f"c{entry % length}.yaml"
    result = expect_clean(load_hardware, start, names=["extends", "cycle", start.name])
    assert isinstance(result, ConfigError)


@settings(max_examples=cases(40, 500))
@given(dotted=st.sampled_from(KNOBS), depth=st.integers(3, 30), width=st.integers(2, 12),
       leaf=st.sampled_from(['"lol"', "1", "[]", "{a: 1}"]))
def test_alias_bombs_end_quickly(folder, dotted, depth, width, leaf):
    """A billion-laughs document (width^depth leaves by reference) must not be expanded."""
    lines = [f"x0: &a0 {leaf}"]
    for level in range(1, depth):
        lines.append(f"x{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    bomb = "\n".join(lines)
    *blocks, leaf_key = dotted.split(".")
    body = f"{leaf_key}: *a{depth - 1}"
    for block in reversed(blocks):
        body = f"{block}: {{{body}}}"
    path = _write(folder, bomb + "\n" + body + "\n")
    result = expect_clean(load_hardware, path, names=[path.name])
    assert isinstance(result, ConfigError)


@settings(max_examples=cases(20, 300))
@given(depth=st.integers(50, 3_000), opener=st.sampled_from(["[", "{a: ", "- "]))
def test_deep_nesting(folder, depth, opener):
    path = _write(folder, "clock: " + opener * depth + "\n")
    result = expect_clean(load_hardware, path, names=[path.name])
    assert isinstance(result, ConfigError)


@settings(max_examples=cases(50, 1_200))
@given(keys=st.dictionaries(st.text(alphabet="abc.", max_size=8), json_values, max_size=4))
def test_dotted_override_keys(keys):
    assert isinstance(expect_clean(nest_dotted, keys, "overrides"), (dict, NpusimError))
    result = expect_clean(load_hardware, "edge-npu", overrides=keys)
    assert isinstance(result, (Hardware, NpusimError)), type(result)


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system ['echo pwned']",
                                 "!!python/name:os.system", "!!python/object/new:builtins.list []"])
def test_python_tags_are_refused(folder, tag):
    path = _write(folder, f"name: {tag}\n")
    result = expect_clean(load_hardware, path, names=[path.name])
    assert isinstance(result, ConfigError)


def test_yaml_is_read_safely_and_nothing_is_unpickled():
    """Only a SafeLoader subclass reads YAML; no module of npusim or planners unpickles."""
    assert issubclass(yaml_file._UniqueKeySafeLoader, yaml.SafeLoader)
    root = Path(inspect.getfile(loader)).parents[2]
    unsafe = []
    for path in [*root.joinpath("npusim").rglob("*.py"), *root.joinpath("planners").rglob("*.py")]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if any(n.split(".")[0] in ("pickle", "cPickle", "dill", "marshal", "shelve", "joblib")
                       for n in names):
                    unsafe.append(f"{path}:{node.lineno} imports {names}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                call = node.func
                owner = call.value.id if isinstance(call.value, ast.Name) else ""
                if owner == "yaml" and call.attr in ("load", "load_all", "unsafe_load", "full_load"):
                    kinds = [kw.arg for kw in node.keywords]
                    if "Loader" not in kinds:
                        unsafe.append(f"{path}:{node.lineno} yaml.{call.attr} without a Loader")
                    elif not any(isinstance(kw.value, ast.Name) and "Safe" in kw.value.id
                                 for kw in node.keywords if kw.arg == "Loader"):
                        unsafe.append(f"{path}:{node.lineno} yaml.{call.attr} with a non-safe Loader")
                if owner == "np" and call.attr == "load" and not any(
                        kw.arg == "allow_pickle" and isinstance(kw.value, ast.Constant) and kw.value.value is False
                        for kw in node.keywords):
                    unsafe.append(f"{path}:{node.lineno} np.load without allow_pickle=False")
    assert unsafe == []
