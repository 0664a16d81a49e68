"""A plan's residencies and transfers as columns (``npusim.plan.records``): the tables give
back the records they were made from, sort as ``sorted`` sorts the objects, survive pickling
and ``dataclasses.replace``, keep records no column can hold as a tuple; and the validator's
column path (``_nothing_else_to_report``) passes only plans whose loops report nothing but
overlaps (by the reference validator's loops)."""

import dataclasses
import pickle
import random

import numpy as np

import reference_validate as reference

from npusim.plan.bound import as_bound
from npusim.plan.model import CAUSES, TRANSFER_KINDS, Plan, Residency, Transfer
from npusim.plan.records import ResidencyTable, TransferTable, field_lists, sorted_records, table_of
from npusim.plan.validate import _nothing_else_to_report, _sound_columns
from test_validate_columns import mutants  # noqa: F401 (a fixture)


def _records(rng, n):
    residencies = [Residency(*(rng.randrange(4) for _ in range(3)), rng.randrange(3), rng.randrange(1, 3) * 64)
                   for _ in range(n)]
    transfers = [Transfer(rng.randrange(4), rng.choice(TRANSFER_KINDS), rng.randrange(3), rng.choice(CAUSES),
                          rng.randrange(1, 3)) for _ in range(n)]
    return residencies, transfers


def test_a_table_gives_back_its_records():
    rng = random.Random(1)
    for n in (0, 1, 7, 300):
        residencies, transfers = _records(rng, n)
        for records, table in ((residencies, ResidencyTable), (transfers, TransferTable)):
            made = table.from_records(records)
            assert len(made) == n and list(made) == records and made == tuple(records) and made == records
            assert [made[i] for i in range(-n, n)] == records + records and made[1:4] == records[1:4]
            for name in table.FIELDS:
                assert field_lists(made, name) == field_lists(records, name) == [[getattr(r, name) for r in records]]
            assert made.column(table.FIELDS[0]).tolist() == [getattr(r, table.FIELDS[0]) for r in records]
            assert pickle.loads(pickle.dumps(made)) == made
            if n:
                assert made != records[:-1] and made + (records[0],) == (*records, records[0])


def test_tables_sort_as_the_objects_do():
    rng = random.Random(2)
    for _ in range(50):
        residencies, transfers = _records(rng, rng.randrange(1, 40))
        assert list(sorted_records(residencies, ResidencyTable)) == sorted(residencies)
        # stable on ties of (step, kind, tensor), as sorted() is
        assert list(sorted_records(transfers, TransferTable)) == sorted(transfers, key=TransferTable.sort_key)


def test_appending_equals_making_from_records():
    rng = random.Random(3)
    residencies, transfers = _records(rng, 50)
    rs, ts = ResidencyTable(), TransferTable()
    for r in residencies:
        rs.add(r.first, r.last, r.offset, r.tensor, r.size)
    for t in transfers:
        ts.add(t.step, TRANSFER_KINDS.index(t.kind), t.tensor, CAUSES.index(t.cause), t.size)
    assert rs == ResidencyTable.from_records(residencies) and ts == TransferTable.from_records(transfers)


def test_a_plan_keeps_its_records_as_tables_or_as_given():
    residencies, transfers = _records(random.Random(4), 20)
    plan = Plan("g", 1024, 64, (0, 1), (0, 0), residencies, transfers)
    assert isinstance(plan.residencies, ResidencyTable) and isinstance(plan.transfers, TransferTable)
    assert list(plan.residencies) == residencies and pickle.loads(pickle.dumps(plan)) == plan
    edited = dataclasses.replace(plan, residencies=plan.residencies[:5])
    assert isinstance(edited.residencies, ResidencyTable) and list(edited.residencies) == residencies[:5]
    assert edited != plan and dataclasses.replace(plan, residencies=list(residencies)) == plan
    r = residencies[0]
    for odd in (dataclasses.replace(r, offset=1 << 70), dataclasses.replace(r, first=True),
                dataclasses.replace(r, size=np.int64(64)), dataclasses.replace(r, tensor="x")):
        kept = table_of(residencies + [odd], ResidencyTable)
        assert kept.__class__ is tuple and kept[-1] is odd
    t = transfers[0]
    for odd in (dataclasses.replace(t, kind="copy"), dataclasses.replace(t, cause="bogus"),
                dataclasses.replace(t, cause=None)):
        odd_plan = dataclasses.replace(plan, transfers=plan.transfers + (odd,))
        assert odd_plan.transfers.__class__ is tuple and odd_plan.transfers[-1] is odd


def test_the_column_path_passes_only_plans_with_nothing_else_to_report(mutants):  # noqa: F811
    taken = declined = 0
    for plan in mutants:
        plan = as_bound(plan, None)
        graph = plan.bound_graph
        if _nothing_else_to_report(plan, graph, _sound_columns(plan, graph)):
            taken += 1
            assert {v.kind for v in reference.validate(plan)} <= {"overlap", "dram"}  # the loops, not this path
        else:
            declined += 1
    assert taken >= 3 and declined >= 5 and _nothing_else_to_report(mutants[0], mutants[0].bound_graph,
                                                                     _sound_columns(mutants[0], mutants[0].bound_graph))
