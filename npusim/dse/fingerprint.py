"""A fingerprint of the code that decides a result row: planners, simulator, dependencies.

The DSE cache (``npusim.dse.cache``) keys every row by it, so a change to a planner, to
the simulator, to a planner plugin or to a solver library makes old rows unreachable instead
of silently reused. The fingerprint is the sha256 of

- every file of the installed ``npusim`` and ``planners`` packages -- sources and package
  data alike (the CACTI SRAM table, the schemas) -- by relative path and content (an
  editable install hashes the working tree, so an uncommitted edit counts); caches
  (``__pycache__``, Numba's) and ``_builtin`` (the shipped traces and configs, whose
  contents are in every point's key already) aside;
- every plugin registering planners under the ``npusim.planners`` entry point: its name and
  target, and the files of the module it names (the package folder, or the one file),
  hashed as above -- a plugin edited without a version bump counts;
- the versions of the libraries whose numbers reach a row (``ortools``, ``simpy``,
  ``numpy``, ``numba``) and of Python itself.

It is computed once per process (about 1.5 MB of files: milliseconds).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

#: Packages whose source decides a row.
CODE_PACKAGES = ("npusim", "planners")
#: Libraries whose version can move a row's numbers (solver search, event order, kernels).
LIBRARIES = ("ortools", "simpy", "numpy", "numba")
PLUGIN_GROUP = "npusim.planners"
#: Folders under a package that hold no code or data a row depends on.
SKIPPED_FOLDERS = frozenset({"__pycache__", "_builtin"})


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
    """sha256 of every file under ``folder`` (sorted relative paths and contents), the
    folders of ``SKIPPED_FOLDERS`` and compiled files aside."""
    digest = hashlib.sha256()
    for relative in hashed_files(folder):
        data = (folder / relative).read_bytes()
        digest.update(f"{relative}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def hashed_files(folder: Path) -> list[str]:
    """The relative paths ``tree_digest`` hashes, sorted."""
    found = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if SKIPPED_FOLDERS & set(relative.parts) or path.suffix in (".pyc", ".nbi", ".nbc") or not path.is_file():
            continue
        found.append(relative.as_posix())
    return sorted(found)


def plugin_versions() -> list[str]:
    """``plugin <entry point> = <target> from <distribution> <version> files <sha256>``, sorted:
    the files of the top-level package of the module the entry point names, hashed
    (``module_digest``): a plugin's helper modules next to its entry module count too."""
    lines = []
    for ep in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        dist = getattr(ep, "dist", None)
        origin = f"{dist.name} {dist.version}" if dist is not None else "(unknown distribution)"
        top = ep.value.split(":")[0].strip().split(".")[0]  # (a dotted name's parents would be imported)
        lines.append(f"plugin {ep.name} = {ep.value} from {origin} files {module_digest(top)}")
    return sorted(lines)


def module_digest(module: str) -> str:
    """sha256 of a module's files without importing it: a package's folder (``tree_digest``)
    or a module's one file; '(not found)' when it cannot be located."""
    try:
        spec = importlib.util.find_spec(module.strip())
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return "(not found)"
    if spec.submodule_search_locations:
        return hashlib.sha256("".join(tree_digest(Path(p)) for p in spec.submodule_search_locations).encode()).hexdigest()
    if spec.origin and Path(spec.origin).is_file():
        return hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest()
    return "(no file)"


def library_versions() -> list[str]:
    lines = [f"python {sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"]
    for name in LIBRARIES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "(not installed)"
        lines.append(f"library {name} {version}")
    return lines
