"""npusim's C kernels: the hot loops that must not pay Numba's start-up.

Numba costs a run ~0.1 s to import and ~0.15 s to load its first cached kernel (its type
registries are rebuilt in every process), more than a whole quick start's simulation. The
kernels every ``simulate`` can reach are therefore C: each ``<name>.c`` here is built at
install into the extension module ``npusim.native._<name>`` (``setup.py``), takes numpy arrays
through the buffer protocol (``buffers.h``; no numpy C API, so the build needs only a C
compiler and Python's headers), and has a pure-Python reference that a test holds it equal to.
Planners' kernels stay Numba: a planner's own run dwarfs the import.

``load`` imports one and, in a source checkout, refuses a build older than its sources (a
``git pull`` that changed the C without a rebuild would otherwise run the old kernel).
"""

from __future__ import annotations

import importlib
import os

from npusim.errors import InternalError

_HERE = os.path.dirname(os.path.abspath(__file__))
_REBUILD = "rebuild it with `pip install -e .` in the checkout (or reinstall npusim)"


def load(name: str):
    """The extension module ``npusim.native._<name>``, built from ``<name>.c``."""
    try:
        module = importlib.import_module(f"npusim.native._{name}")
    except ImportError as exc:
        raise InternalError(f"npusim's C kernel npusim.native._{name} is not built ({exc}): {_REBUILD}") from None
    source = os.path.join(_HERE, f"{name}.c")
    if os.path.exists(source):  # a source checkout: the build must be newer than what it was built from
        built = os.path.getmtime(module.__file__)
        newest = max(os.path.getmtime(os.path.join(_HERE, f)) for f in os.listdir(_HERE)
                     if f == f"{name}.c" or f.endswith(".h"))
        if int(newest) > int(built):  # whole seconds: setuptools copies the built module with its mtime truncated
            raise InternalError(f"npusim's C kernel {module.__file__} is older than its source {name}.c: {_REBUILD}")
    return module
