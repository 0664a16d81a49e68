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
import re

from npusim.errors import InstallError

_HERE = os.path.dirname(os.path.abspath(__file__))
#: A source checkout has the build script two levels up; an installed copy (a wheel) carries the
#: sources beside the modules too, but with file times that say nothing about the build's age.
_CHECKOUT = os.path.exists(os.path.join(_HERE, os.pardir, os.pardir, "setup.py"))
_REBUILD = "rebuild it with `pip install -e .` in the checkout (or reinstall npusim)"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def load(name: str):
    """The extension module ``npusim.native._<name>``, built from ``<name>.c``."""
    try:
        module = importlib.import_module(f"npusim.native._{name}")
    except ImportError as exc:
        raise InstallError(f"npusim's C kernel npusim.native._{name} is not built ({exc}): {_REBUILD}") from None
    if _CHECKOUT:
        changed = _changed_since(f"{name}.c", os.path.getmtime(module.__file__))
        if changed:
            raise InstallError(f"npusim's C kernel {module.__file__} is older than its source {changed}: {_REBUILD}")
    return module


def _changed_since(source: str, built: float) -> str | None:
    """The first of ``source`` and the files it includes (transitively, from this folder) written
    after ``built``, or None. Whole seconds: setuptools copies the built module with its mtime
    truncated."""
    seen, todo = set(), [source]
    while todo:
        name = todo.pop(0)
        path = os.path.join(_HERE, name)
        if name in seen or not os.path.exists(path):
            continue
        seen.add(name)
        if int(os.path.getmtime(path)) > int(built):
            return name
        with open(path, encoding="utf-8") as handle:
            todo += _INCLUDE.findall(handle.read())
    return None
