"""The Program's command table (``npusim.plan.command_table``) gives back the Commands it
stores, and the simulator's column readers answer as the plain per-object code did."""

import pickle
import random
from dataclasses import replace

import numpy as np
import pytest

from npusim.plan.command_table import KINDS, Access, Command, CommandTable, Rows
from npusim.plan.lower import DramView, Program
from npusim.plan.transfer_cost import TransferCost
from npusim.sim.compiled_loop import HeldTimes, _packed
from npusim.sim.critical_path import _by_start


def random_commands(rng: random.Random, n: int) -> list[Command]:
    accesses = [Access(r, rng.randrange(9), rng.randrange(0, 4096, 64), rng.choice((64, 128, 1 << 40)))
                for r in range(12)]
    commands = []
    for i in range(n):
        kind = rng.choice(KINDS)
        earlier = list(range(i))
        waits = tuple(sorted(rng.sample(earlier, min(len(earlier), rng.randrange(4)))))
        streamed = tuple(w for w in waits if rng.random() < 0.5)
        if kind == "compute":
            commands.append(Command(i, f"stream{rng.randrange(2)}", kind, rng.randrange(50), op=rng.randrange(20),
                                    reads=tuple(rng.sample(accesses, rng.randrange(4))),
                                    writes=tuple(rng.sample(accesses, rng.randrange(1, 3))),
                                    waits=waits, streamed=streamed))
        else:
            view = DramView(rng.randrange(1 << 20), (2, 8), (16, 1), 1)
            cost = TransferCost(rng.randrange(1, 4), 2, 2, 1, 64)
            access = (rng.choice(accesses),)
            commands.append(Command(i, f"dma.{kind}", kind, rng.randrange(50), tensor=rng.randrange(9),
                                    cause=rng.choice(("spill", "retrieve", None)), nbytes=rng.randrange(1 << 33),
                                    dram=view, cost=cost, reads=access if kind == "store" else (),
                                    writes=access if kind == "load" else (), waits=waits, streamed=streamed))
    return commands


def test_a_table_gives_back_the_commands_it_was_made_of():
    rng = random.Random(3)
    for n in (0, 1, 7, 200):
        commands = random_commands(rng, n)
        table = CommandTable.from_commands(commands)
        assert len(table) == n
        assert list(table) == commands
        assert [table[i] for i in range(-n, 0)] == commands
        assert table[1:5] == commands[1:5]
        assert list(table.transfers()) == [c for c in commands if c.kind != "compute"]
        assert table.column("kind").tolist() == [KINDS.index(c.kind) for c in commands]
        assert table.column("step").tolist() == [c.step for c in commands]
        assert [table.queue_of(i) for i in range(n)] == [c.queue for c in commands]
        pointers, waited = table.waits.arrays()
        assert [tuple(waited[pointers[i]:pointers[i + 1]].tolist()) for i in range(n)] == [c.waits for c in commands]
        for which in ("reads", "writes"):
            ptr, res, off, size = table.access_columns(which)
            expected = [a for c in commands for a in getattr(c, which)]
            assert ptr[-1] == len(expected)
            assert list(zip(res.tolist(), off.tolist(), size.tolist())) == [(a.residency, a.offset, a.size)
                                                                             for a in expected]
        again = pickle.loads(pickle.dumps(table))
        assert again == table and list(again) == commands
        assert table == commands and table == CommandTable.from_commands(commands)
        if n:
            assert table != CommandTable.from_commands([*commands[:-1], replace(commands[-1], step=999)])
            assert table != CommandTable.from_commands(commands[:-1])
        with pytest.raises(IndexError):
            table[n]


def test_a_program_made_of_commands_holds_them_as_a_table():
    commands = random_commands(random.Random(5), 30)
    program = Program("g", {}, commands, (), 128, 1)
    assert isinstance(program.commands, CommandTable) and list(program.commands) == commands
    pointers, waited = program.wait_lists
    assert waited.tolist() == [w for c in commands for w in c.waits]
    with pytest.raises(ValueError, match="numbered 0, 1"):
        Program("g", {}, [replace(commands[0], id=3)], (), 128, 1)


def test_rows_give_back_their_rows():
    rows, expected = Rows(), [(), (3, 1), (7,), (), (2, 2, 9)]
    for row in expected:
        rows.add(row)
    assert len(rows) == len(expected) and [rows[r] for r in range(len(rows))] == expected
    assert rows.lengths().tolist() == [len(r) for r in expected]
    assert pickle.loads(pickle.dumps(rows)) == rows
    # indexed as the tuple of rows it stands for (Program.residency_users was one): from the
    # end, by slices, and out of range refused
    as_tuple = tuple(expected)
    for r in range(-len(expected), len(expected)):
        assert rows[r] == as_tuple[r]
    for cut in (slice(1, 3), slice(None, None, -2), slice(-2, None), slice(7, 9)):
        assert rows[cut] == as_tuple[cut]
    for r in (len(expected), -len(expected) - 1):
        with pytest.raises(IndexError):
            rows[r]


def test_held_times_give_ints_where_the_run_held_ints():
    rng = random.Random(9)
    n = 300
    mask = np.array([rng.choice((0, 2, 4, 6)) for _ in range(n)], np.int64)
    # a time the run held as an int is whole (a chain of zero delays from 0)
    values = np.array([rng.choice((0.0, 1.0, 2.0, 7.0, 2.0 ** 54) if m else (0.0, 2.0, 2.5, 7.0, 2.0 ** 54))
                       for m in mask.tolist()])
    for bit in (2, 4):
        held = HeldTimes(values, _packed(mask), bit)
        expected = [int(v) if m & bit else float(v) for v, m in zip(values.tolist(), mask.tolist())]
        assert list(held) == expected and [held[i] for i in range(n)] == expected
        assert [type(x) for x in held.tolist()] == [type(x) for x in expected]
        assert held[-1] == expected[-1] and held[3:9] == expected[3:9]
        assert held.last_of_largest() == n - 1 - expected[::-1].index(max(expected))
        small = HeldTimes(np.minimum(values, 9.0), _packed(mask), bit)
        plain = small.tolist()
        assert small.last_of_largest() == n - 1 - plain[::-1].index(max(plain))
        ids = np.array(sorted(rng.sample(range(n), 120)), np.int64)
        assert _by_start(ids, small) == sorted(ids.tolist(), key=plain.__getitem__)
        assert _by_start(ids, held) == sorted(ids.tolist(), key=expected.__getitem__)


def test_access_columns_give_the_accesses_of_the_residencies():
    from npusim.plan.command_table import AccessColumns, access_field
    from npusim.plan.model import Residency

    rng = random.Random(13)
    residencies = [Residency(rng.randrange(9), rng.randrange(9, 20), rng.randrange(0, 1 << 20, 64), rng.randrange(30),
                             rng.randrange(1, 4096)) for _ in range(50)]
    columns = AccessColumns.of_residencies(residencies)
    plain = [Access(i, r.tensor, r.offset, r.size) for i, r in enumerate(residencies)]
    assert list(columns) == plain and len(columns) == len(plain)
    for name in ("residency", "tensor", "offset", "size"):
        assert access_field(columns, name).tolist() == access_field(plain, name).tolist() == [getattr(a, name) for a in plain]
    assert list(pickle.loads(pickle.dumps(columns))) == plain
    commands = [Command(0, "dma.load", "load", 0, tensor=1, writes=(plain[3],)),
                Command(1, "stream0", "compute", 1, op=0, reads=(plain[3], plain[7]), writes=(plain[9],), waits=(0,))]
    table = CommandTable(["dma.load", "stream0"], columns)
    for c in commands:
        table.append(table.queue_names.index(c.queue), KINDS.index(c.kind), c.step, c.op, c.tensor, c.cause, c.nbytes,
                     c.dram, c.cost, [a.residency for a in c.reads], [a.residency for a in c.writes], c.waits, c.streamed)
    assert list(table) == commands and table == CommandTable.from_commands(commands)
    assert [x.tolist() for x in table.access_columns("reads")] == [[0, 0, 2], [3, 7], [plain[3].offset, plain[7].offset],
                                                                    [plain[3].size, plain[7].size]]


def test_streamed_waits_are_the_streamed_rows_kept_to_the_waits():
    """``engine._streamed_waits`` (every row at once) keeps of each command's streamed row the
    waits that are among its waits, in order, as the row-by-row definition does: on tables whose
    streamed rows name waits and non-waits, repeat some, and (last) name no command."""
    from npusim.sim.engine import _streamed_waits

    rng = random.Random(11)
    for n in (0, 1, 7, 200):
        commands = random_commands(rng, n)
        for broken in (False, True):
            changed = []
            for c in commands:
                earlier = (*c.waits, *range(c.id))  # waits, and other commands before it
                streamed = tuple(rng.choice(earlier) for _ in range(rng.randrange(4) if earlier else 0))
                if broken and rng.random() < 0.1:
                    streamed += (n + 5,)
                changed.append(replace(c, streamed=streamed))
            table = CommandTable.from_commands(changed)
            expected = [(c.id, tuple(w for w in c.streamed if w in c.waits)) for c in changed]
            assert _streamed_waits(table) == [(i, s) for i, s in expected if s]
