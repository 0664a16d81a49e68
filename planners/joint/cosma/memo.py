"""The last divide-and-conquer solves, so a run that asks for one twice solves it once.

``cosma`` with ``fallback=dnc`` on a model above ``max_cells`` runs exactly what ``cosma-dnc``
runs on it (``planners.joint.cosma``), so ``npusim regress`` (whose goldens hold both) or a
``compare`` of the two solved the same parts twice: 16.5 s of CPU in regress on hrnet_w18_small,
nasnetalarge and the transformer.

A solve is kept only when it is a pure function of its inputs: CP-SAT on deterministic time
with the wall-clock guard off (``wall_guard=0``, as regress runs), on an untiled graph (its
trace, ``graph_to_dict``, is all the solve reads of it; a tiled graph's views are not in it).
The key is the graph's content and every argument the solve reads; a hit returns a copy whose
``stats`` the caller may change.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import replace

from npusim.graph.trace_io import graph_to_dict
from planners.schedule.op_level import is_tiled

#: solves kept (the regress order puts a trace's cosma and cosma-dnc cases together)
SIZE = 2
_kept: OrderedDict = OrderedDict()


def graph_digest(graph) -> str:
    """sha256 of the graph's trace (names, sizes, ops, attributes)."""
    text = json.dumps(graph_to_dict(graph), sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def memo_key(ctx, graph, opts, *args) -> tuple | None:
    """The key of a solve of ``graph`` under solver options ``opts``, with ``args`` (hashable:
    the budget, flags, the option values it reads) and ``ctx``'s order, or None when it must
    not be kept (module docstring)."""
    if not opts.deterministic or opts.wall_guard > 0 or is_tiled(ctx):
        return None
    return graph_digest(graph), None if ctx.order is None else tuple(ctx.order), opts, args


def solved(key, solve):
    """``solve()``'s result, or a copy of the one kept under ``key`` (None: not kept)."""
    if key is None:
        return solve()
    if key in _kept:
        _kept.move_to_end(key)
    else:
        _kept[key] = solve()
        while len(_kept) > SIZE:
            _kept.popitem(last=False)
    result = _kept[key]
    return replace(result, stats=dict(result.stats))
