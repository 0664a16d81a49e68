"""JSON documents of finite numbers: what every file npusim reads (traces, plans, cache entries) holds.

Python's ``json`` reads ``NaN``, ``Infinity`` and ``-Infinity``, which JSON does not have and
no field of ours may hold. ``loads_finite`` refuses them with a ``ValueError`` naming the field
they sit in (``field ops[3].macs is Infinity: ...``), so the one-line error says where to look.
"""

from __future__ import annotations

import json

from npusim.util.schema_check import format_path


class _NonFinite:
    """Where the parser met ``NaN`` or ``(-)Infinity`` (found again by identity)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def loads_finite(text: str | bytes):
    """``json.loads(text)``; a ``ValueError`` naming the first field that holds a non-finite
    number (the whole document is walked only when there is one)."""
    found: list[_NonFinite] = []

    def constant(name: str) -> _NonFinite:
        found.append(_NonFinite(name))
        return found[-1]

    data = json.loads(text, parse_constant=constant)
    if found:
        raise ValueError(f"{format_path(_path_to(data, found[0]))} is {found[0].name}, which is not a JSON "
                         "number (expected a finite number)")
    return data


def _path_to(data, target) -> tuple:
    """The path (keys and indices) from ``data`` to the object ``target``, depth first in document order."""
    stack = [(data, ())]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, dict):
            stack.extend((value, path + (key,)) for key, value in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((value, path + (i,)) for i, value in reversed(list(enumerate(node))))
    return ()
