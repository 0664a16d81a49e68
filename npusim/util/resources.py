"""Finding shipped resources: hardware configs and workload traces.

A resource is a file of one *kind* (``hw_configs`` or ``traces``) found by name,
e.g. ``find_resource("hw_configs", "edge-npu")`` -> ``.../hw_configs/edge-npu.yaml``.
Folders are searched in this order, so a user's own copy wins over a shipped one:

1. ``./<kind>/`` in the current working directory;
2. ``<repo>/<kind>/`` of a source checkout (what an editable install uses);
3. ``npusim/_builtin/<kind>/`` inside the installed package (what a wheel ships).

In the source tree ``npusim/_builtin/<kind>`` is a symlink to ``../../<kind>``;
building a wheel or sdist copies the files behind it, so there is one copy of
every config and trace in git and a real one in every installed package.
"""

from __future__ import annotations

import sys
from pathlib import Path

import npusim
from npusim.errors import did_you_mean

# File suffixes of every kind, in preference order (tried in turn when a name has none).
SUFFIXES: dict[str, tuple[str, ...]] = {
    "hw_configs": (".yaml", ".yml"),
    "traces": (".json", ".json.gz"),
}

_PACKAGE_DIR = Path(npusim.__file__).resolve().parent


def search_dirs(kind: str) -> list[Path]:
    """Existing folders that may hold resources of ``kind``, first match wins."""
    _check_kind(kind)
    candidates = [Path.cwd() / kind]
    repo_root = _PACKAGE_DIR.parent
    # Only a real checkout counts: site-packages/<kind> would belong to someone else.
    if (repo_root / "pyproject.toml").is_file():
        candidates.append(repo_root / kind)
    candidates.append(_PACKAGE_DIR / "_builtin" / kind)
    return _existing_unique(candidates)


def find_resource(kind: str, name: str) -> Path | None:
    """The file called ``name`` (with or without its suffix) of ``kind``, or None.

    A file in ``./<kind>/`` of the working directory that hides a shipped one of the same
    name wins, as documented, but is named in a one-line warning on stderr (once per
    process): results that silently come from another file than the shipped one surprise.
    """
    folders = search_dirs(kind)
    for index, folder in enumerate(folders):
        for file_name in _file_names(kind, name):
            candidate = folder / file_name
            if candidate.is_file():
                if index == 0 and folder == Path.cwd() / kind:
                    _warn_if_shadowing(kind, name, candidate, folders[1:])
                return candidate
    return None


_warned: set[str] = set()  # local files already named


def _warn_if_shadowing(kind: str, name: str, local: Path, shipped_folders: list[Path]) -> None:
    for folder in shipped_folders:
        for file_name in _file_names(kind, name):
            shipped = folder / file_name
            if shipped.is_file() and str(local) not in _warned:
                _warned.add(str(local))
                print(f"npusim: warning: {kind}/{local.name} in the working directory shadows the shipped "
                      f"{shipped}; using the local file (rename it to use the shipped one)", file=sys.stderr)
                return


def list_resources(kind: str, *, include_private: bool = False) -> list[str]:
    """Sorted names (without suffix) of every resource of ``kind`` in the search folders.

    Names starting with ``_`` (shared bases such as ``_base-npu``) are left out unless
    ``include_private``.
    """
    names: set[str] = set()
    for folder in search_dirs(kind):
        for path in folder.iterdir():
            name = _strip_suffix(kind, path.name)
            if name is not None and path.is_file() and (include_private or not name.startswith("_")):
                names.add(name)
    return sorted(names)


def missing_resource_message(kind: str, name: str) -> str:
    """A message for a name that matched nothing: what exists and where we looked."""
    names = list_resources(kind)
    hint = did_you_mean(name, names)
    available = ", ".join(names) or "(none)"
    searched = ", ".join(str(folder) for folder in search_dirs(kind)) or "(no folder exists)"
    return f"no {kind} entry named {name!r}{hint}; available: {available}; searched: {searched}"


def _file_names(kind: str, name: str) -> list[str]:
    if _strip_suffix(kind, name) is not None:
        return [name]
    return [name + suffix for suffix in SUFFIXES[kind]]


def _strip_suffix(kind: str, file_name: str) -> str | None:
    for suffix in SUFFIXES[kind]:
        if file_name.endswith(suffix) and len(file_name) > len(suffix):
            return file_name[: -len(suffix)]
    return None


def _existing_unique(folders: list[Path]) -> list[Path]:
    seen: set[Path] = set()
    unique = []
    for folder in folders:
        if not folder.is_dir():
            continue
        # The _builtin symlink and the repo folder are the same place in a checkout.
        real = folder.resolve()
        if real not in seen:
            seen.add(real)
            unique.append(folder)
    return unique


def _check_kind(kind: str) -> None:
    if kind not in SUFFIXES:
        raise ValueError(f"unknown resource kind {kind!r}; expected one of {', '.join(SUFFIXES)}")
