"""A fingerprint of the code that decides a result row: planners, simulator, dependencies.

The DSE cache (``npusim.result_cache``) keys every row by it, so a change to a planner, to
the simulator, to a planner plugin or to a solver library makes old rows unreachable instead
of silently reused. The fingerprint is the sha256 of

- every ``.py`` file of the installed ``npusim`` and ``planners`` packages (relative path
  and content; an editable install hashes the working tree, so an uncommitted edit counts);
- the distribution name and version of every plugin registering planners under the
  ``npusim.planners`` entry point (with the entry point's name and target);
- the versions of the libraries whose numbers reach a row (``ortools``, ``simpy``,
  ``numpy``, ``numba``) and of Python itself.

It is computed once per process (about 1 MB of source: milliseconds).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import sys
from pathlib import Path

#: Packages whose source decides a row.
CODE_PACKAGES = ("npusim", "planners")
#: Libraries whose version can move a row's numbers (solver search, event order, kernels).
LIBRARIES = ("ortools", "simpy", "numpy", "numba")
PLUGIN_GROUP = "npusim.planners"


@functools.cache
def code_fingerprint() -> str:
    """The sha256 (hex) of the planner and simulator code as installed in this process."""
    digest = hashlib.sha256()
    for package in CODE_PACKAGES:
        module = __import__(package)
        digest.update(f"package {package}\n".encode())
        digest.update(tree_digest(Path(module.__file__).resolve().parent).encode())
    for line in plugin_versions() + library_versions():
        digest.update(f"{line}\n".encode())
    return digest.hexdigest()


def tree_digest(folder: Path) -> str:
    """sha256 of every ``.py`` file under ``folder`` (sorted relative paths and contents)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        relative = path.relative_to(folder).as_posix()
        data = path.read_bytes()
        digest.update(f"{relative}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def plugin_versions() -> list[str]:
    """``plugin <entry point> = <target> from <distribution> <version>``, sorted."""
    lines = []
    for ep in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        dist = getattr(ep, "dist", None)
        origin = f"{dist.name} {dist.version}" if dist is not None else "(unknown distribution)"
        lines.append(f"plugin {ep.name} = {ep.value} from {origin}")
    return sorted(lines)


def library_versions() -> list[str]:
    lines = [f"python {sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"]
    for name in LIBRARIES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "(not installed)"
        lines.append(f"library {name} {version}")
    return lines
