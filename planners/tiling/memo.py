"""Memos of one op's tile search.

The tiler ranks dozens of candidate blocks per op, and they ask for the same tiles again and
again: in the quick start's search, 7,454 input boxes for 4,899 distinct ones, 3,312 tile
compute costs for 2,384 (before the search gave up early on ops that cannot pay). Every
table here holds what was computed for one graph, op and
hardware: ``table(name, graph, op, hw)`` returns the named table, emptied first when it is
asked for with another graph, op or hardware object than the tables were filled for. Those
objects are held here, so no new object can take their ids while an entry lives (a sweep
builds and frees a fused graph per point); ``forget`` lets them go.

Some costs depend on the hardware and a few plain values only, not on the op: the cost of
moving a box of a tensor of a given shape (``estimate._transfer_cycles``). Those live in
``hw_cached`` tables, kept across the ops of one tile stage (a network's layers move views
of the same shapes again: 1,358 transfers costed for 546 distinct ones in the quick start),
emptied when asked for with another hardware object, when one grows past
``HW_MEMO_SIZE`` entries, and by ``forget``.
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


#: Entries a hardware-wide table holds before it is emptied (a bound on its memory).
HW_MEMO_SIZE = 1 << 16


class _HwScope:
    def __init__(self) -> None:
        self.hw = None
        self.tables: dict[str, dict] = {}


_hw_scope = _HwScope()


def hw_cached(name: str, hw, key, compute):
    """``compute()`` once per ``key`` in the memo ``name`` of ``hw`` (module docstring): for
    costs that depend on the hardware and on ``key`` alone, whatever the op."""
    scope = _hw_scope
    if hw is not scope.hw:
        scope.hw, scope.tables = hw, {}
    entries = scope.tables.get(name)
    if entries is None or len(entries) > HW_MEMO_SIZE:
        entries = scope.tables[name] = {}
    found = entries.get(key, _MISSING)
    if found is _MISSING:
        found = entries[key] = compute()
    return found


def forget_op() -> None:
    """Empty the tables of the op (not the hardware-wide ones) and let go of its graph."""
    global _scope
    _scope = _Scope()


def forget() -> None:
    """Empty every table and let go of the graph and hardware they were for."""
    global _hw_scope
    forget_op()
    _hw_scope = _HwScope()
