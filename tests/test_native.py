"""npusim's C kernels (npusim/native): built at install, and refused when older than their
source, so a checkout whose C changed without a rebuild stops with a clear error instead of
running the old kernel."""

import os

import pytest

from npusim import native
from npusim.errors import InternalError


def test_every_c_source_is_built_and_loads():
    """setup.py builds every npusim/native/*.c; each loads under its name."""
    names = sorted(f[:-2] for f in os.listdir(os.path.dirname(native.__file__)) if f.endswith(".c"))
    assert "bank_kernel" in names
    for name in names:
        assert native.load(name).__name__ == f"npusim.native._{name}"


def test_a_build_older_than_its_source_is_refused(tmp_path, monkeypatch):
    """A copy of the package directory whose C source is touched after the build."""
    module = native.load("bank_kernel")
    here = tmp_path / "native"
    here.mkdir()
    source = here / "bank_kernel.c"
    source.write_text("/* newer */")
    built = os.path.getmtime(module.__file__)
    os.utime(source, (built + 10, built + 10))
    monkeypatch.setattr(native, "_HERE", str(here))
    with pytest.raises(InternalError, match=r"older than its source bank_kernel\.c: rebuild it with `pip install -e \.`"):
        native.load("bank_kernel")
    os.utime(source, (built - 10, built - 10))
    assert native.load("bank_kernel") is module


def test_a_kernel_that_is_not_built_names_the_fix():
    with pytest.raises(InternalError, match=r"npusim\.native\._no_such_kernel is not built .*pip install -e \."):
        native.load("no_such_kernel")
