"""Every golden case in traces/expected/ is a test: a changed number fails with the diff table.

Regenerate after an intended change with ``npusim regress --update`` (and commit the YAML).
Exact planners' cases on the largest graphs are marked slow (run them with ``--slow``).
"""

import functools

import pytest

from helpers import REPO
from npusim.cli import regress
from npusim.workflow import load_graph

CASES = regress.load_goldens(REPO / "traces" / "expected")
#: These cases take tens of seconds to minutes each, so they run only with --slow: exact
#: planners on graphs above SLOW_EXACT_OPS ops, off-chip arenas (whose simulation checks
#: every DRAM chunk) on traces with more than SLOW_OFFCHIP_MIB of activations, and there the
#: tiled pipeline without ``fuse`` too (5–15 s each; CI runs the default one, fuse+tile+...).
SLOW_EXACT_OPS = 200
SLOW_OFFCHIP_MIB = 100
EXACT_PLANNERS = ("zhong", "olla", "exact-offsets", "cosma")
OFFCHIP_PLANNERS = ("taa", "offchip-")


@functools.lru_cache(maxsize=None)
def _size(trace: str) -> tuple[int, float]:
    graph = load_graph(trace)
    return graph.n_ops, sum(t.size for t in graph.tensors if t.kind == "activation") / 2**20


def _param(case):
    names = case.pipeline.split("+")
    ops, mib = _size(case.trace)
    slow = (any(n.startswith(EXACT_PLANNERS) for n in names) and ops > SLOW_EXACT_OPS
            or any(n.startswith(OFFCHIP_PLANNERS) for n in names) and mib > SLOW_OFFCHIP_MIB
            or names[0] == "tile" and mib > SLOW_OFFCHIP_MIB)
    return pytest.param(case, id=case.id, marks=[pytest.mark.slow] if slow else [])


def test_goldens_cover_every_trace_pipeline_and_budget():
    from helpers import TRACE_NAMES

    ids = {c.id for c in CASES}
    wanted = {f"{t}/{h}/{p}/{b}" for t, h, p, b in regress.default_matrix()}
    assert {t for t, *_ in regress.default_matrix()} == set(TRACE_NAMES)
    assert wanted <= ids, f"missing {sorted(wanted - ids)[:3]}: run npusim regress --update"


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_golden(case):
    mismatches = regress.check_case(case)
    if mismatches:
        pytest.fail(f"{case.file.name}: numbers moved (npusim regress --update if intended)\n"
                    + regress.format_diff(mismatches), pytrace=False)
