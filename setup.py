"""Builds npusim's C kernels: each ``npusim/native/<name>.c`` into the extension module
``npusim.native._<name>`` (why C, and how they are loaded: ``npusim/native/__init__.py``). The
rest of the package is described in pyproject.toml."""

from pathlib import Path

from setuptools import Extension, setup

KERNELS = sorted(p.stem for p in Path(__file__).parent.joinpath("npusim", "native").glob("*.c"))

# -ffp-contract=off: no fused multiply-add, so every float operation rounds as Python's does
setup(ext_modules=[Extension(f"npusim.native._{name}", [f"npusim/native/{name}.c"],
                             depends=["npusim/native/buffers.h", "npusim/native/bank_core.h"], extra_compile_args=["-O2", "-ffp-contract=off"])
                   for name in KERNELS])
