"""Lowering's fast paths against their plain definitions: the command builder, the
address painter, and the one-pass waits against the two-pass rules of npusim.plan.lower's
module docstring."""

import itertools
import random
from collections import defaultdict
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from npusim import workflow as W
from npusim.graph.tiling import view_region
from npusim.plan.layout import DramLayout, storage_view
from npusim.plan.command_table import new_command
from npusim.plan.lower import Access, Command, DramView, _previous_occupants, _residencies_at, lower
from npusim.plan.model import Residency
from npusim.plan.painting import AddressPainter
from npusim.plan.transfer_cost import TransferCost
from npusim.testing.seeded_races import seeded_cases


def test_new_command_builds_what_the_constructor_builds():
    access = Access(3, 7, 128, 64)
    view = DramView(4096, (2, 8), (16, 1), 1)
    cost = TransferCost(16, 2, 2, 1, 64)
    values = (5, "dma.load", "load", 2, None, 7, "spill", 64, view, cost, (), (access,), (1, 4), (4,))
    built = new_command(*values)
    assert built == Command(*values) and repr(built) == repr(Command(*values))
    assert hash(built) == hash(Command(*values))
    assert replace(built, waits=()) == Command(*values[:-2], (), (4,))
    with pytest.raises(AttributeError):
        built.waits = ()  # still frozen


def test_painter_reports_the_owners_a_byte_map_has():
    rng = random.Random(7)
    for _ in range(20):
        painter, owner_of = AddressPainter(), {}
        for owner in range(60):
            lo = rng.randrange(0, 200)
            hi = lo + rng.choice([0, 1, 3, 8, 30, 90])
            expected = {owner_of[b] for b in range(lo, hi) if b in owner_of}
            assert painter.paint(lo, hi, owner) == expected
            owner_of.update(dict.fromkeys(range(lo, hi), owner))


def test_painting_each_range_finds_what_painting_them_one_by_one_does():
    """``paint_each`` (the race check's loop) against ``paint`` called per range, with ranges
    that repeat a segment exactly (its fast path), cover several, or are empty."""
    rng = random.Random(11)
    for _ in range(20):
        ranges = []
        for owner in range(80):
            if ranges and rng.random() < 0.4:  # an allocator reusing a block
                lo, hi, _ = rng.choice(ranges)
            else:
                lo = rng.randrange(0, 200)
                hi = lo + rng.choice([0, 1, 3, 8, 30, 90])
            ranges.append((lo, hi, owner))
        one_by_one, each = AddressPainter(), AddressPainter()
        expected = [one_by_one.paint(lo, hi, owner) for lo, hi, owner in ranges]
        counts, found = each.paint_each(*map(list, zip(*ranges)))
        assert counts == [len(e) for e in expected]
        ends = list(itertools.accumulate(counts))
        assert [set(found[end - c:end]) for c, end in zip(counts, ends)] == expected
        assert (each._starts, each._ends, each._owners) == (one_by_one._starts, one_by_one._ends, one_by_one._owners)


def test_previous_occupants_are_what_a_byte_map_has():
    """Residencies painted by (first step, offset, plan order): each one's previous occupants
    are the latest owners of its bytes then, those released before it begins, ascending."""
    rng = random.Random(5)
    for _ in range(30):
        residencies = []
        for t in range(rng.randrange(1, 40)):
            first = rng.randrange(12)
            residencies.append(Residency(first, first + rng.randrange(-1, 6), rng.randrange(0, 64),
                                         t, rng.choice([0, 1, 4, 8, 24])))
        ptr, occupants = _previous_occupants(residencies)
        owner_of, expected = {}, {}
        for i in sorted(range(len(residencies)), key=lambda i: (residencies[i].first, residencies[i].offset, i)):
            r = residencies[i]
            found = {owner_of[b] for b in range(r.offset, r.offset + r.size) if b in owner_of}
            expected[i] = sorted(q for q in found if residencies[q].last < r.first)
            owner_of.update(dict.fromkeys(range(r.offset, r.offset + r.size), i))
        assert [occupants[ptr[i]:ptr[i + 1]].tolist() for i in range(len(residencies))] == \
            [expected[i] for i in range(len(residencies))]


def test_residencies_at_finds_what_a_scan_in_plan_order_finds():
    """One residency, several disjoint ones (searched) and overlapping or empty ones (scanned),
    in shuffled plan order: the first residency in plan order holding the step, else an error."""
    rng = random.Random(11)
    for _ in range(40):
        residencies = []
        for t in range(6):
            if t % 3 == 0:  # disjoint, with gaps
                step = rng.randrange(3)
                for _ in range(rng.randrange(1, 6)):
                    length = rng.randrange(4)
                    residencies.append(Residency(step, step + length, rng.randrange(100), t, 8))
                    step += length + 1 + rng.randrange(3)
            else:  # anything: overlapping, empty (last < first), or one
                for _ in range(rng.randrange(1, 4) if t % 3 == 1 else 1):
                    first = rng.randrange(20)
                    residencies.append(Residency(first, first + rng.randrange(-1, 8), rng.randrange(100), t, 8))
        rng.shuffle(residencies)
        graph = SimpleNamespace(tensors=[SimpleNamespace(name=f"t{t}") for t in range(7)])  # t6: never resident
        plan = SimpleNamespace(residencies=residencies)

        def access_at(t, s):
            return int(_residencies_at(plan, graph, np.array([t]), np.array([s]))[0])

        expected = []
        for t in range(7):
            for s in range(30):
                held = [i for i, r in enumerate(residencies) if r.tensor == t and r.first <= s <= r.last]
                if not held:
                    with pytest.raises(ValueError, match="not resident"):
                        access_at(t, s)
                    continue
                assert access_at(t, s) == held[0]
                expected.append((t, s, held[0]))
        tensors, steps, found = (np.array(column) for column in zip(*expected))  # all at once
        assert (_residencies_at(plan, graph, tensors, steps) == found).all()


def reference_waits(commands, previous, dram_reused, graph):
    """The waits (and streamed waits) of the module docstring computed the plain way: the
    users and fillers of every residency over the whole program first, then each command's
    waits, keeping only earlier commands. Returns (waits, streamed, users) per command."""
    users, filler = defaultdict(list), {}
    for c in commands:
        for a in c.reads + c.writes:
            users[a.residency].append(c.id)
        for a in c.writes:
            filler.setdefault(a.residency, c.id)
    compute_at = {c.step: c.id for c in commands if c.kind == "compute"}
    loads_at = defaultdict(list)
    for c in commands:
        if c.kind == "load":
            loads_at[c.step].append(c.id)
    last_store_of, out = {}, []
    for c in commands:
        waits, streamed = set(), set()
        if c.kind == "compute":
            for a in c.reads:
                f = filler.get(a.residency)
                if f is not None and commands[f].queue != c.queue:
                    waits.add(f)
                    if commands[f].kind == "load":
                        streamed.add(f)
            for a in c.writes:
                for q in previous[a.residency]:
                    waits.update(u for u in users[q] if commands[u].kind != "compute")
        elif c.kind == "load":
            for a in c.writes:
                for q in previous[a.residency]:
                    waits.update(users[q])
            for t in (c.tensor,) + graph.tensors[c.tensor].sources:
                if t in last_store_of:
                    waits.add(last_store_of[t])
        else:
            for a in c.reads:
                f = filler.get(a.residency)
                if f is not None:
                    waits.add(f)
                    if commands[f].kind == "compute" and commands[f].step == c.step:
                        streamed.add(f)
            if dram_reused:
                waits.add(compute_at[c.step])
                waits.update(loads_at[c.step])
            last_store_of[c.tensor] = c.id
        out.append((tuple(sorted(w for w in waits if w < c.id)), tuple(sorted(w for w in streamed if w < c.id))))
    return out, users


def plans():
    """Multi-stream plans (seeded, with the races injected into them too), a plan with spills
    and a tiled plan with a DRAM layout."""
    for _, hw, plan, injected in seeded_cases(3, random.Random(3), sizes=(8, 18)):
        yield plan, hw
        yield from ((p, hw) for p, _ in filter(None, injected.values()))
    hw = W.load_hw("edge-npu")
    graph = W.load_graph("bert_tiny")
    yield W.plan_graph(graph, hw, budget=W.resolve_budget("256KiB", graph, hw)), hw
    graph = W.load_graph("squeezenet1_0")
    tiled = W.plan_graph(graph, hw, "tile+default+arena+belady+taa")
    assert tiled.dram
    yield tiled, hw


def test_waits_are_the_plain_definition():
    for plan, hw in plans():
        program = lower(plan, hw)
        ptr, occupants = _previous_occupants(plan.residencies)
        previous = [occupants[a:b].tolist() for a, b in zip(ptr[:-1], ptr[1:])]
        expected, users = reference_waits(program.commands, previous,
                                          bool(plan.dram), program.graph)
        assert [(c.waits, c.streamed) for c in program.commands] == expected
        assert program.residency_users == tuple(tuple(users[r]) for r in range(len(plan.residencies)))


def test_dram_views_are_the_layouts():
    graph = W.load_graph("squeezenet1_0")
    hw = W.load_hw("edge-npu")
    plan = W.plan_graph(graph, hw, "tile+default+arena+belady+taa")
    layout = DramLayout(plan.base_graph, hw.dram.layout)
    program = lower(plan, hw)
    for c in program.commands:
        if c.kind != "compute":
            tensor = program.graph.tensors[c.tensor]
            offset, shape, strides = layout.view_of(tensor)
            base = plan.dram.get(tensor.view.base if tensor.view else tensor.name, 0)
            assert c.dram == DramView(base + offset * tensor.itemsize, shape, strides, tensor.itemsize)


def plain_view_of(layout, tensor):
    """DramLayout.view_of computed per tensor, with no memo: the box of the view decoded from
    its row-major offset, re-expressed in the base's storage order."""
    if tensor.view is None:
        return 0, (tensor.elements,), (1,)
    v = tensor.view
    if tensor.kind == "weight":
        return v.offset, (tensor.elements,), (1,)
    base_shape = layout._shapes.get(v.base)
    if base_shape is None or len(v.shape) != len(base_shape) or len(base_shape) < 2:
        return v.offset, tuple(v.shape), tuple(v.strides)
    order = layout.order_of(v.base, len(base_shape))
    if order == tuple(range(len(base_shape))):
        return v.offset, tuple(v.shape), tuple(v.strides)
    region = view_region(v, base_shape)
    box = [(a, a + (n - 1) * g + 1) for a, n, g in region]
    return storage_view(base_shape, box, order, tuple(g for _, _, g in region))


@pytest.mark.parametrize("layout_name", ["nhwc", "nchw"])
def test_memoised_storage_views_are_the_plain_ones(layout_name):
    hw = W.load_hw("edge-npu", {"dram.layout": layout_name})
    for trace, pipeline in (("resnet18", "tile+default+arena+belady"), ("squeezenet1_0", "fuse+tile+default+arena+belady")):
        plan = W.plan_graph(W.load_graph(trace), hw, pipeline)
        layout = DramLayout(plan.base_graph, layout_name)
        views = [t for t in plan.bound_graph.tensors if t.view is not None and t.kind != "weight"]
        assert len({(t.view.shape, t.view.strides) for t in views}) < len(views)  # the memo is shared
        for t in plan.bound_graph.tensors:
            assert layout.view_of(t) == plain_view_of(layout, t), t.name
