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
