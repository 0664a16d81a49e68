"""Shared pieces of the loader fuzz tests (tests/test_fuzz_*.py).

``cases(ci, slow)`` is the number of Hypothesis examples of a test: ``ci`` normally, ``slow``
with ``pytest --slow`` (tests/conftest.py sets the environment variable read here).
``expect_clean`` runs a loader on one fuzzed input: it may succeed, or raise an
``NpusimError`` whose message names the file; anything else (a raw ``KeyError``, a
``RecursionError``, a hang) fails the test.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager

from hypothesis import strategies as st

from npusim.errors import NpusimError

SLOW = bool(os.environ.get("NPUSIM_SLOW_TESTS"))

#: No single fuzzed input may take longer than this (a loader must never hang).
HANG_SECONDS = 120  # generous: a loaded shared machine, a first Numba compile; a real hang never ends


def cases(ci: int, slow: int) -> int:
    return slow if SLOW else ci


class Hang(AssertionError):
    pass


@contextmanager
def no_hang(seconds: int = HANG_SECONDS):
    """Fail (instead of hanging) when the body runs longer than ``seconds`` (main thread only)."""
    def alarm(signum, frame):
        raise Hang(f"a loader ran longer than {seconds} s on one input")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def expect_clean(load, *args, names=(), **kwargs):
    """``load(*args, **kwargs)``: its result, or the NpusimError it raised (never another type).

    ``names``: strings every error message must contain (the file, a field, a value).
    """
    try:
        with no_hang():
            return load(*args, **kwargs)
    except NpusimError as error:
        message = str(error)
        assert message.strip(), f"{type(error).__name__} with an empty message"
        lines = message.splitlines()  # one line, or a bounded list (the validator's violations)
        assert len(lines) <= 25 and max(map(len, lines)) < 1000, f"unbounded error message: {message[:300]}"
        for name in names:
            assert str(name) in message, f"error message does not name {name!r}: {message}"
        return error


# --------------------------------------------------------------------- junk values

finite_numbers = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)


# --------------------------------------------------------------------- well-formed traces


def trace_doc(name: str, tensors: list[tuple], ops: list[tuple]) -> dict:
    """An npusim-trace/1 document from ``(name, shape, kind)`` tensors and
    ``(name, kind, inputs, outputs, attrs)`` ops; MACs, vector work and GEMMs from the shapes
    (``npusim.graph.ops.costs``, as the importer computes them)."""
    from npusim.graph.ops.costs import op_cost

    shapes = {t[0]: list(t[1]) for t in tensors}
    records = []
    for op_name, kind, ins, outs, attrs in ops:
        cost = op_cost(kind, attrs, [shapes[i] for i in ins], [shapes[o] for o in outs])
        gemm = None if cost.gemm is None else dict(m=cost.gemm.m, n=cost.gemm.n, k=cost.gemm.k, batch=cost.gemm.batch)
        records.append(dict(name=op_name, kind=kind, inputs=list(ins), outputs=list(outs), attrs=dict(attrs),
                            macs=cost.macs, vector_ops=cost.vector_ops, gemm=gemm))
    return {"format": "npusim-trace/1", "name": name, "meta": {},
            "tensors": [dict(name=n, shape=list(s), dtype="int8", itemsize=1, kind=k) for n, s, k in tensors],
            "ops": records}


def small_cnn() -> dict:
    """Conv (bias, pads), Relu, MaxPool, residual Add, Reshape, Gemm, Softmax: 7 ops."""
    return trace_doc("small_cnn", [
        ("x", [1, 3, 8, 8], "input"), ("w", [4, 3, 3, 3], "weight"), ("b", [4], "weight"),
        ("c", [1, 4, 8, 8], "activation"), ("r", [1, 4, 8, 8], "activation"), ("p", [1, 4, 4, 4], "activation"),
        ("s", [1, 4, 4, 4], "activation"), ("shape", [2], "weight"), ("f", [1, 64], "activation"),
        ("fw", [10, 64], "weight"), ("fb", [10], "weight"), ("g", [1, 10], "activation"), ("y", [1, 10], "output"),
    ], [
        ("conv", "Conv", ["x", "w", "b"], ["c"], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]}),
        ("relu", "Relu", ["c"], ["r"], {}),
        ("pool", "MaxPool", ["r"], ["p"], {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("add", "Add", ["p", "p"], ["s"], {}),
        ("flat", "Reshape", ["s", "shape"], ["f"], {}),
        ("fc", "Gemm", ["f", "fw", "fb"], ["g"], {"transB": 1}),
        ("soft", "Softmax", ["g"], ["y"], {"axis": -1}),
    ])


def small_attention() -> dict:
    """MatMul (batched and linear), Transpose, Concat, Gather, LayerNormalization, a custom op."""
    return trace_doc("small_attention", [
        ("ids", [1, 4], "input"), ("table", [32, 8], "weight"), ("e", [1, 4, 8], "activation"),
        ("g", [8], "weight"), ("n", [1, 4, 8], "activation"), ("wq", [8, 8], "weight"),
        ("q", [1, 4, 8], "activation"), ("kt", [1, 8, 4], "activation"), ("s", [1, 4, 4], "activation"),
        ("v", [1, 4, 8], "activation"), ("o", [1, 4, 8], "activation"), ("cat", [1, 4, 16], "activation"),
        ("y", [1, 4, 16], "output"),
    ], [
        ("embed", "Gather", ["table", "ids"], ["e"], {"axis": 0}),
        ("norm", "LayerNormalization", ["e", "g"], ["n"], {"axis": -1}),
        ("proj", "MatMul", ["n", "wq"], ["q"], {}),
        ("keys", "Transpose", ["q"], ["kt"], {"perm": [0, 2, 1]}),
        ("scores", "MatMul", ["q", "kt"], ["s"], {}),
        ("mix", "MatMul", ["s", "n"], ["v"], {}),
        ("fancy", "FancyOp", ["v"], ["o"], {"colour": "blue"}),
        ("join", "Concat", ["o", "q"], ["cat"], {"axis": 2}),
        ("out", "Relu", ["cat"], ["y"], {}),
    ])


WELL_FORMED = {"small_cnn": small_cnn, "small_attention": small_attention}
