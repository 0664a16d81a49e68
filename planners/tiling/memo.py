"""Memos of one op's tile search.

The tiler ranks dozens of candidate blocks per op, and they ask for the same tiles again and
again: in the quick start's search, 18,153 input boxes for 10,971 distinct ones, 3,312 tile
compute costs for 2,384. Every table here holds what was computed for one graph, op and
hardware: ``table(name, graph, op, hw)`` returns the named table, emptied first when it is
asked for with another graph, op or hardware object than the tables were filled for. Those
objects are held here, so no new object can take their ids while an entry lives (a sweep
builds and frees a fused graph per point); ``forget`` lets them go.
"""

from __future__ import annotations


class _Scope:
    def __init__(self) -> None:
        self.graph = self.hw = None
        self.op_id = -1
        self.tables: dict[str, dict] = {}


_scope = _Scope()


def table(name: str, graph, op, hw=None) -> dict:
    """The memo ``name`` of ``op`` of ``graph`` (and ``hw``, for costs that depend on it)."""
    scope = _scope
    if graph is not scope.graph or op.id != scope.op_id:
        scope.graph, scope.op_id, scope.hw, scope.tables = graph, op.id, hw, {}
    elif hw is not None and hw is not scope.hw:
        if scope.hw is not None:  # the same op on other hardware: its costs differ
            scope.tables = {}
        scope.hw = hw
    found = scope.tables.get(name)
    if found is None:
        found = scope.tables[name] = {}
    return found


def cached(name: str, graph, op, key, compute, hw=None):
    """``compute()`` once per ``key`` in the memo ``name`` of ``op`` (``table``)."""
    scope = _scope
    if graph is scope.graph and op.id == scope.op_id and (hw is None or hw is scope.hw):
        entries = scope.tables.get(name)  # the tables are this op's: no need to check them again
        if entries is None:
            entries = scope.tables[name] = {}
    else:
        entries = table(name, graph, op, hw)
    found = entries.get(key, _MISSING)
    if found is _MISSING:
        found = entries[key] = compute()
    return found


#: Stands for an entry not in a memo (None may be a memoised value).
_MISSING = object()


def forget() -> None:
    """Empty every table and let go of the graph and hardware they were for."""
    global _scope
    _scope = _Scope()
