"""A module imported on first use: for the Numba kernel modules that most runs never call.

Importing Numba and loading a cached kernel costs about a second of CPU; a module that holds
kernels for one path only (multi-stream safety, the MindSpore allocators) is bound at import
time as a proxy and executed when one of its attributes is first read (the recipe of
``importlib.util.LazyLoader`` in the Python documentation).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_import(name: str) -> ModuleType:
    """Module ``name``, executed when an attribute of it is first read (at once if it is
    already imported)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
