"""Builds npusim's C kernels (``npusim/native/*.c``, see ``npusim/native/__init__.py``); the
rest of the package is described in pyproject.toml.

``-ffp-contract=off``: no fused multiply-add, whatever the target (``-march=native``): the kernels
make the float operations of their Python references, rounded as those round them."""

from setuptools import Extension, setup

KERNELS: list[str] = ["event_loop", "dram_contents"]  # each name: npusim/native/<name>.c -> npusim.native._<name>

setup(ext_modules=[Extension(f"npusim.native._{name}", [f"npusim/native/{name}.c"],
                             depends=["npusim/native/buffers.h"], extra_compile_args=["-O2", "-ffp-contract=off"])
                   for name in KERNELS])
