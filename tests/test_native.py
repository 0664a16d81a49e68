"""npusim's C kernels (npusim/native): built at install, and refused when older than their
source, so a checkout whose C changed without a rebuild stops with a one-line error naming the
changed file and the fix, instead of running the old kernel. An installed copy is not checked:
its files' times say nothing about the build."""

import os
import shutil

import pytest

from npusim import native
from npusim.errors import InstallError, NpusimError


def test_every_c_source_is_built_and_loads():
    """setup.py builds every npusim/native/*.c; each loads under its name."""
    names = sorted(f[:-2] for f in os.listdir(os.path.dirname(native.__file__)) if f.endswith(".c"))
    assert {"bank_kernel", "event_loop", "dram_contents"} <= set(names)
    for name in names:
        assert native.load(name).__name__ == f"npusim.native._{name}"


@pytest.fixture
def sources(tmp_path, monkeypatch):
    """A copy of the C sources in a folder standing for npusim/native, all older than the build."""
    here = tmp_path / "native"
    shutil.copytree(os.path.dirname(native.__file__), here, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    built = os.path.getmtime(native.load("bank_kernel").__file__)
    for path in here.iterdir():
        os.utime(path, (built - 10, built - 10))
    monkeypatch.setattr(native, "_HERE", str(here))
    monkeypatch.setattr(native, "_CHECKOUT", True)
    return here, built


@pytest.mark.parametrize("changed", ["bank_kernel.c", "bank_core.h", "buffers.h"])
def test_a_build_older_than_a_source_it_includes_is_refused_naming_it(sources, changed):
    here, built = sources
    os.utime(here / changed, (built + 10, built + 10))
    with pytest.raises(InstallError, match=rf"older than its source {changed.replace('.', r'[.]')}: rebuild it "
                                           r"with `pip install -e \.`"):
        native.load("bank_kernel")


def test_a_header_a_kernel_does_not_include_does_not_stop_it(sources):
    here, built = sources
    os.utime(here / "bank_core.h", (built + 10, built + 10))  # dram_contents.c includes buffers.h only
    assert native.load("dram_contents").__name__ == "npusim.native._dram_contents"


def test_an_installed_copy_is_not_checked(sources, monkeypatch):
    """A wheel carries the sources beside the modules, written after them by the installer: a
    second boundary between the two must not stop every run."""
    here, built = sources
    os.utime(here / "bank_kernel.c", (built + 10, built + 10))
    monkeypatch.setattr(native, "_CHECKOUT", False)
    assert native.load("bank_kernel").__name__ == "npusim.native._bank_kernel"


def test_a_kernel_that_is_not_built_names_the_fix():
    with pytest.raises(InstallError, match=r"npusim\.native\._no_such_kernel is not built .*pip install -e \."):
        native.load("no_such_kernel")


def test_the_command_says_an_install_error_in_one_line_as_the_users_to_fix(monkeypatch, capsys):
    """``npusim: error: ...`` and exit 2, not "internal error ... please report it" (exit 3)."""
    import npusim.cli as cli

    def stale(*args, **kwargs):
        raise InstallError("npusim's C kernel _event_loop.so is older than its source event_loop.c: rebuild it")

    monkeypatch.setattr(cli, "simulate_program", stale)
    assert cli.main(["simulate", "squeezenet1_0", "--hw", "edge-npu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["npusim: error: npusim's C kernel _event_loop.so is older than its source event_loop.c: rebuild it"]
