"""The validator's column fast paths (``_sound_columns``, ``_rows_sorted``, ``_load_columns``,
``_filled_fast``) against the per-object loops they stand in for, on a planned network and
on copies of it broken at random (``test_validate_reference``'s mutations): each fast path
either gives what the loop gives or declines (None / False) exactly when the loop reports."""

import random
from collections import Counter

import numpy as np
import pytest

from npusim.plan.bound import as_bound
from npusim.plan.model import Residency
from npusim.plan.validate import (
    ResidencyIndex, _check_filled, _check_residencies, _filled_fast, _known_tensor, _load_columns, _ResidencyTable,
    _rows_sorted, _sound_columns, _transfers_by_tensor)
from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget
from test_validate_reference import break_residencies, break_transfers


@pytest.fixture(scope="module")
def mutants():
    graph = load_graph("squeezenet1_0")
    hw = load_hw("edge-npu")
    plan = plan_graph(graph, hw, budget=resolve_budget("64KiB", graph, hw))
    rng = random.Random(11)
    found = [plan]
    for _ in range(40):
        mutant = plan
        for _ in range(rng.randint(1, 3)):
            mutant = (break_residencies if rng.random() < 0.6 else break_transfers)(mutant, rng)
        found.append(as_bound(mutant, None))
    return found


def _loops(plan, residencies):
    """What the loops give: reports, residencies by tensor, loads and stores, fill (keyed by
    the objects of ``residencies``, the plan's: a table makes new ones each time it is read)."""
    graph, reports = plan.bound_graph, []
    report = lambda kind, msg: reports.append((kind, msg))  # noqa: E731
    name = lambda t: graph.tensors[t].name  # noqa: E731
    residencies = [r for r in residencies if _known_tensor(r.tensor, graph.n_tensors, "residency", report)]
    by_tensor = _check_residencies(plan, graph, residencies, name, report)
    residency_reports = list(reports)
    loads, stores = _transfers_by_tensor(plan, graph, name, report)
    transfer_reports = reports[len(residency_reports):]
    fill = _check_filled(plan, graph, by_tensor, loads, name, report)
    return residency_reports, transfer_reports, by_tensor, loads, stores, fill, reports


def test_column_fast_paths_match_the_loops(mutants):
    declined = taken = 0
    for plan in mutants:
        graph = plan.bound_graph
        residencies = list(plan.residencies)
        residency_reports, transfer_reports, by_tensor, loads, stores, fill, reports = _loops(plan, residencies)
        columns = _sound_columns(plan, graph)
        assert (columns is None) == bool(residency_reports or not plan.residencies)
        load_columns = _load_columns(plan, graph)
        kept = sum(map(len, loads.values())) + sum(map(len, stores.values()))
        if load_columns is not None:
            assert not transfer_reports and kept == len(plan.transfers)
            assert Counter(zip(*(c.tolist() for c in load_columns[:2]))) == Counter(
                (tr.tensor, tr.step) for trs in loads.values() for tr in trs)
        else:
            assert transfer_reports or kept < len(plan.transfers) or not loads
        fast_fill, table = _filled_fast(plan, graph, residencies, columns, load_columns)
        if fast_fill is None:
            declined += 1
            assert columns is None or load_columns is None or any(k == "empty_residency" for k, _ in reports)
            continue
        taken += 1
        assert fast_fill == fill and not any(k == "empty_residency" for k, _ in reports)
        slow_table = _ResidencyTable.of(ResidencyIndex(by_tensor), fill, plan.n_steps)
        assert (table is None) == (slow_table is None)
        if table is not None:  # both find the same residency (by its steps) with the same fill
            for t, s in [(r.tensor, step) for r in plan.residencies[::7] for step in (r.first, r.last, r.last + 1)]:
                a, i = table.find(np.array([t]), np.array([s]))
                b, j = slow_table.find(np.array([t]), np.array([s]))
                assert a == b
                if a:
                    assert (table.first[i], table.last[i], table.filled[i]) == (
                        slow_table.first[j], slow_table.last[j], slow_table.filled[j])
    assert declined >= 5 and taken >= 5  # both sides of each test are seen


def test_rows_sorted_is_sorted_as_the_dataclass_compares():
    rng = random.Random(3)
    seen = Counter()
    for _ in range(400):
        rs = [Residency(*(rng.randint(0, 2) for _ in range(5))) for _ in range(rng.randint(2, 6))]
        if rng.random() < 0.5:
            rs.sort()
        columns = np.array([[getattr(r, f) for r in rs] for f in ("first", "last", "offset", "tensor", "size")])
        expected = rs == sorted(rs)
        assert _rows_sorted(columns) == expected
        seen[expected] += 1
    assert seen[True] > 50 and seen[False] > 50
