"""The independent plan validator (npusim.plan.validate).

A hand-written valid plan (tests/plan_fixtures.py) has no violations; each test below breaks one
thing and checks that exactly the expected kind is reported, with a message naming the op or
tensor and the step and numbers involved. One test per kind of the validator's table.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

import pytest

from npusim.errors import PlanError, PlanningError
from npusim.hw.loader import load_hardware
from npusim.plan.validate import require_valid, validate
from npusim.registry import make_plan
from plan_fixtures import (
    CAPACITY, CONV, HW_YAML, JOIN, LEFT, M_P, M_R, M_R_OP, RIGHT, res,
    graph_fixture, plan_fixture, replace_residency, replace_transfer, tiny_graph, valid_plan, with_residency,
    with_transfer, without_residency, without_transfer, xfer,
)  # graph_fixture, plan_fixture: the graph and plan fixtures

#: Every kind in the validator's table; each must have a test below (checked at the end).
ALL_KINDS = {
    "order", "streams", "range", "size", "capacity", "alignment", "overlap", "double_residency", "empty_residency",
    "not_resident", "not_ready", "load_without_copy", "transfer_residency", "duplicate_transfer", "cause",
    "not_written_back", "tiling", "dram", "fusion",
}


def kinds(found) -> Counter:
    return Counter(v.kind for v in found)


def only(found, kind: str, count: int = 1) -> list[str]:
    """Assert ``found`` holds exactly ``count`` violations, all of ``kind``; return the messages."""
    assert kinds(found) == Counter({kind: count}), "\n".join(map(str, found))
    return [v.message for v in found]


def test_the_hand_written_plan_is_valid(graph, plan):
    assert validate(plan, graph) == []
    require_valid(plan, graph)  # does not raise


def test_the_hand_written_plan_spills_and_retrieves(plan):
    assert plan.offchip_bytes() == {"compulsory": 64 + 32 + 16, "writeback": 40, "spill": 64,
                                    "retrieve": 64}


# -- order ---------------------------------------------------------------------------------------
def test_order_not_topological(graph, plan):
    broken = replace(plan, order=(LEFT, CONV, RIGHT, JOIN))
    (msg,) = only(validate(broken, graph), "order")
    assert "'left'" in msg and "step 0" in msg
    assert "'a'" in msg and "'conv'" in msg and "step 1" in msg


def test_order_not_a_permutation(graph, plan):
    (msg,) = only(validate(replace(plan, order=(CONV, LEFT, JOIN)), graph), "order")
    assert "4 ops" in msg and "'right'" in msg


def test_order_plan_for_another_graph(graph, plan):
    (msg,) = only(validate(replace(plan, graph="other"), graph), "order")
    assert "'other'" in msg and "'tiny'" in msg


# -- streams -------------------------------------------------------------------------------------
def test_streams_negative(graph, plan):
    (msg,) = only(validate(replace(plan, streams=(0, 0, -1, 0)), graph), "streams")
    assert "'right'" in msg and "-1" in msg


def test_streams_do_not_cover_every_op(graph, plan):
    (msg,) = only(validate(replace(plan, streams=(0, 0, 0)), graph), "streams")
    assert "3" in msg and "4 ops" in msg


# -- range ---------------------------------------------------------------------------------------
def test_range_residency_past_the_last_step(graph, plan):
    broken = with_residency(plan, res(graph, "x", 0, 4, 5))
    (msg,) = only(validate(broken, graph), "range")
    assert "'x'" in msg and "steps 4..5" in msg and "< 4" in msg


def test_range_residency_first_after_last(graph, plan):
    broken = with_residency(plan, res(graph, "w2", 240, 3, 2))
    (msg,) = only(validate(broken, graph), "range")
    assert "'w2'" in msg and "steps 3..2" in msg


def test_range_transfer_outside_the_order(graph, plan):
    broken = with_transfer(plan, xfer(graph, 7, "store", "y", "writeback"))
    (msg,) = only(validate(broken, graph), "range")
    assert "store of 'y' at step 7" in msg and "0..3" in msg


# -- size, capacity, alignment -------------------------------------------------------------------
def test_size_residency_smaller_than_its_tensor(graph, plan):
    broken = replace_residency(plan, graph, "b", JOIN, size=48)
    (msg,) = only(validate(broken, graph), "size")
    assert "'b'" in msg and "steps 3..3" in msg and "size 48 < tensor size 64" in msg


def test_size_unaligned_but_large_enough_is_fine(graph, plan):
    # y is 40 B; its residency need not be rounded up to the alignment
    assert validate(replace_residency(plan, graph, "y", JOIN, size=40), graph) == []


def test_capacity_residency_past_the_end(graph, plan):
    broken = replace_residency(plan, graph, "b", LEFT, offset=224)
    (msg,) = only(validate(broken, graph), "capacity")
    assert "'b'" in msg and "[224, 288)" in msg and "steps 1..1" in msg
    assert f"ends at 288 > capacity {CAPACITY}" in msg


def test_capacity_residency_before_the_start(graph, plan):
    broken = replace_residency(plan, graph, "b", LEFT, offset=-16)
    (msg,) = only(validate(broken, graph), "capacity")
    assert "'b'" in msg and "[-16, 48)" in msg and "steps 1..1" in msg and "offset -16 < 0" in msg


def test_capacity_exactly_full_is_fine(graph, plan):
    assert validate(replace(plan, capacity=224), graph) == []
    (msg,) = only(validate(replace(plan, capacity=223), graph), "capacity")
    assert "ends at 224 > capacity 223" in msg


def test_alignment_offset_not_a_multiple(graph, plan):
    broken = replace_residency(plan, graph, "b", LEFT, offset=168)
    (msg,) = only(validate(broken, graph), "alignment")
    assert "'b'" in msg and "steps 1..1" in msg and "offset 168 is not a multiple of 16" in msg


# -- overlap -------------------------------------------------------------------------------------
def test_overlap_coexisting_residencies_share_addresses(graph, plan):
    broken = replace_residency(plan, graph, "c", RIGHT, offset=0)
    (msg,) = only(validate(broken, graph), "overlap")
    assert "'w2' [0, 16) steps 2..2" in msg and "'c' [0, 32) steps 2..3" in msg


def test_overlap_needs_coexistence_in_time(graph, plan):
    # x (steps 0..0) and w2 (steps 2..2) already share [0, 16), and c touches w2 at 16;
    # y may start where a ends (160) and take b's spilled place [160, 224) at step 3, since
    # a's residency ends at step 2 and b's first one at step 1
    assert validate(replace_residency(plan, graph, "y", JOIN, offset=160), graph) == []


def test_overlap_across_one_step_boundary(graph, plan):
    # b's first residency (step 1) moved onto a, which lives 0..2
    broken = replace_residency(plan, graph, "b", LEFT, offset=128)
    (msg,) = only(validate(broken, graph), "overlap")
    assert "'a' [96, 160) steps 0..2" in msg and "'b' [128, 192) steps 1..1" in msg


# -- double_residency ---------------------------------------------------------------------------
def test_double_residency_two_copies_of_one_tensor_at_one_step(graph, plan):
    """Found by the slow plan fuzz: b's first residency stretched to the step of its retrieve
    into a second one. Both hold step 3 at different addresses, so no rule by address saw it;
    the lowering filled one copy and the op read the other (a race in the simulator)."""
    broken = replace_residency(plan, graph, "b", LEFT, last=3)
    (msg,) = only(validate(broken, graph), "double_residency")
    assert msg == ("tensor 'b' has two residencies at step 3: steps 1..3 at offset 160 and steps 3..3 at offset 48; "
                   "expected one copy at a time")


def test_double_residency_needs_a_shared_step(graph, plan):
    # b's copies at steps 1..1 and 3..3 (the hand-written plan's spill and retrieve) are fine
    assert "double_residency" not in kinds(validate(replace_residency(plan, graph, "b", LEFT, last=2), graph))


# -- empty_residency -----------------------------------------------------------------------------
def test_empty_residency_retrieve_forgotten(graph, plan):
    broken = without_transfer(plan, graph, "load", "b")
    (msg,) = only(validate(broken, graph), "empty_residency")
    assert "'b'" in msg and "offset 48" in msg and "steps 3..3" in msg


def test_empty_residency_input_never_loaded(graph, plan):
    broken = without_transfer(plan, graph, "load", "x")
    (msg,) = only(validate(broken, graph), "empty_residency")
    assert "'x'" in msg and "offset 0" in msg and "steps 0..0" in msg


# -- not_resident --------------------------------------------------------------------------------
def test_not_resident_input_evicted_too_early(graph, plan):
    broken = replace_residency(plan, graph, "a", CONV, last=LEFT)
    (msg,) = only(validate(broken, graph), "not_resident")
    assert msg == "op 'right' at step 2: input 'a' is not resident"


def test_not_resident_output_has_no_residency(graph, plan):
    # a's residency starts a step late: conv has nowhere to write a, and what remains of the
    # residency is never filled
    broken = replace_residency(plan, graph, "a", CONV, first=LEFT)
    found = validate(broken, graph)
    assert kinds(found) == Counter({"not_resident": 1, "empty_residency": 1})
    assert "op 'conv' at step 0: output 'a' has no residency" in [v.message for v in found]


def test_not_resident_reported_per_op(graph, plan):
    broken = without_residency(plan, graph, "c", RIGHT)
    msgs = only(validate(broken, graph), "not_resident", count=2)
    assert "op 'right' at step 2: output 'c' has no residency" in msgs
    assert "op 'join' at step 3: input 'c' is not resident" in msgs


# -- not_ready -----------------------------------------------------------------------------------
def test_not_ready_input_loaded_after_its_reader(graph, plan):
    # w1 stays resident 0..1 but is only loaded at step 1, after conv (step 0) read it
    broken = replace_residency(plan, graph, "w1", CONV, last=LEFT)
    broken = replace_transfer(broken, graph, "load", "w1", step=LEFT)
    (msg,) = only(validate(broken, graph), "not_ready")
    assert msg == "op 'conv' at step 0: input 'w1' arrives only at step 1"


def test_not_ready_store_before_the_data_is_produced(graph, plan):
    # y resident 2..3 at a free place, but written back at step 2, before join produces it
    broken = replace_residency(plan, graph, "y", JOIN, first=RIGHT, offset=176)
    broken = replace_transfer(broken, graph, "store", "y", step=RIGHT)
    (msg,) = only(validate(broken, graph), "not_ready")
    assert msg == "store of 'y' at step 2: the data arrives only at step 3"


# -- load_without_copy ---------------------------------------------------------------------------
def test_load_without_copy_spill_forgotten(graph, plan):
    broken = without_transfer(plan, graph, "store", "b")
    (msg,) = only(validate(broken, graph), "load_without_copy")
    assert msg == "load of 'b' at step 3: 'b' was never stored to DRAM before"


def test_load_without_copy_store_after_the_load(graph, plan):
    # the spill moved to step 3 (after join) cannot feed the load before join at step 3;
    # b's first residency is stretched so the store still has data to store (which makes two
    # copies of b at step 3: that is reported too)
    broken = replace_residency(plan, graph, "b", LEFT, last=JOIN, offset=176)
    broken = replace_transfer(broken, graph, "store", "b", step=JOIN)
    found = validate(broken, graph)
    assert kinds(found) == Counter({"double_residency": 1, "load_without_copy": 1}), found
    assert "load of 'b' at step 3" in next(v.message for v in found if v.kind == "load_without_copy")


# -- transfer_residency --------------------------------------------------------------------------
def test_transfer_residency_store_of_a_tensor_not_resident(graph, plan):
    broken = with_transfer(plan, xfer(graph, JOIN, "store", "a", "spill"))
    (msg,) = only(validate(broken, graph), "transfer_residency")
    assert msg == "store of 'a' at step 3: the tensor is not resident to store from"


def test_transfer_residency_load_with_nowhere_to_go(graph, plan):
    broken = with_transfer(plan, xfer(graph, RIGHT, "load", "b", "retrieve"))
    (msg,) = only(validate(broken, graph), "transfer_residency")
    assert msg == "load of 'b' at step 2: the tensor has no residency to load into"


# -- duplicate_transfer -------------------------------------------------------------------------
def test_duplicate_transfer_load_twice_into_one_residency(graph, plan):
    # the same compulsory load written twice: both DMA writes race with each other and the conv
    broken = with_transfer(plan, xfer(graph, CONV, "load", "w1", "compulsory"))
    (msg,) = only(validate(broken, graph), "duplicate_transfer")
    assert msg.startswith("'w1' is loaded 2 times (steps 0, 0) into its residency at offset ")
    assert msg.endswith("expected one load per residency")


def test_duplicate_transfer_store_twice_at_one_step(graph, plan):
    broken = with_transfer(plan, xfer(graph, LEFT, "store", "b", "spill"))
    (msg,) = only(validate(broken, graph), "duplicate_transfer")
    assert msg == "'b' is stored more than once at step(s) 1; expected one store per step"


# -- cause ---------------------------------------------------------------------------------------
def test_cause_first_load_of_a_weight_is_compulsory(graph, plan):
    broken = replace_transfer(plan, graph, "load", "w1", cause="retrieve")
    (msg,) = only(validate(broken, graph), "cause")
    assert msg == "load of 'w1' at step 0: cause 'retrieve', expected 'compulsory'"


def test_cause_reload_of_an_input_is_a_retrieve(graph, plan):
    # x loaded again into [0, 64) at step 1 (free then) and wrongly called compulsory again
    broken = with_residency(plan, res(graph, "x", 0, LEFT, LEFT))
    broken = with_transfer(broken, xfer(graph, LEFT, "load", "x", "compulsory"))
    (msg,) = only(validate(broken, graph), "cause")
    assert msg == "load of 'x' at step 1: cause 'compulsory', expected 'retrieve'"
    fixed = with_transfer(plan, xfer(graph, LEFT, "load", "x", "retrieve"))
    fixed = with_residency(fixed, res(graph, "x", 0, LEFT, LEFT))
    assert validate(fixed, graph) == []


def test_cause_spill_of_an_activation(graph, plan):
    broken = replace_transfer(plan, graph, "store", "b", cause="writeback")
    (msg,) = only(validate(broken, graph), "cause")
    assert msg == "store of 'b' at step 1: cause 'writeback', expected 'spill'"


def test_cause_retrieve_of_an_activation(graph, plan):
    broken = replace_transfer(plan, graph, "load", "b", cause="compulsory")
    (msg,) = only(validate(broken, graph), "cause")
    assert msg == "load of 'b' at step 3: cause 'compulsory', expected 'retrieve'"


def test_cause_store_of_a_weight(graph, plan):
    broken = with_transfer(plan, xfer(graph, CONV, "store", "w1", "spill"))
    (msg,) = only(validate(broken, graph), "cause")
    assert msg == "store of 'w1' at step 0: weight tensors are already in DRAM"


def test_cause_output_stored_as_spill_is_not_a_writeback(graph, plan):
    broken = replace_transfer(plan, graph, "store", "y", cause="spill")
    found = validate(broken, graph)
    assert kinds(found) == Counter({"cause": 1, "not_written_back": 1})
    assert "store of 'y' at step 3: cause 'spill', expected 'writeback'" in [v.message for v in found]


# -- not_written_back ----------------------------------------------------------------------------
def test_not_written_back_output_never_stored(graph, plan):
    broken = without_transfer(plan, graph, "store", "y")
    (msg,) = only(validate(broken, graph), "not_written_back")
    assert msg == "graph output 'y' is never written back to DRAM"


def test_dram_layout_missing_unknown_or_negative(graph, plan):
    moved = sorted({graph.tensors[tr.tensor].name for tr in plan.transfers})
    layout = {name: 64 * k for k, name in enumerate(moved)}
    assert validate(replace(plan, dram=layout), graph) == []
    (msg,) = only(validate(replace(plan, dram={k: v for k, v in layout.items() if k != "b"}), graph), "dram")
    assert "'b'" in msg and "no offset" in msg
    (msg,) = only(validate(replace(plan, dram={**layout, "zz": 0}), graph), "dram")
    assert "dram['zz']" in msg
    (msg,) = only(validate(replace(plan, dram={**layout, "b": -64}), graph), "dram")
    assert "offset -64" in msg


def test_fusion_that_fuses_away_a_tensor_another_op_reads(graph, plan):
    """A fused chain is checked before anything else: its graph cannot be built otherwise.
    (tests/test_fusion.py covers each rule.)"""
    names = [o.name for o in graph.ops]
    (msg,) = only(validate(replace(plan, fusion={names[CONV]: [names[JOIN]]}), graph), "fusion")
    assert repr(names[CONV]) in msg
    (msg,) = only(validate(replace(plan, fusion={"nope": [names[JOIN]]}), graph), "fusion")
    assert "'nope'" in msg and "not in graph" in msg


# -- several violations at once ------------------------------------------------------------------
def broken_four_ways(graph, plan):
    broken = replace_residency(plan, graph, "b", LEFT, offset=168)  # alignment
    broken = replace_residency(broken, graph, "c", RIGHT, offset=0)  # overlap with w2
    broken = replace_transfer(broken, graph, "load", "w1", cause="retrieve")  # cause
    return without_transfer(broken, graph, "store", "y")  # not_written_back


def test_every_independent_violation_is_reported(graph, plan):
    found = validate(broken_four_ways(graph, plan), graph)
    assert kinds(found) == Counter({"alignment": 1, "overlap": 1, "cause": 1, "not_written_back": 1})
    text = "\n".join(map(str, found))
    for part in ("offset 168", "'w2' [0, 16)", "'w1' at step 0", "'y' is never written back"):
        assert part in text


def test_require_valid_raises_listing_every_violation(graph, plan):
    with pytest.raises(PlanError) as exc:
        require_valid(broken_four_ways(graph, plan), graph, source="broken.json")
    msg = str(exc.value)
    assert msg.startswith("broken.json: 4 violation(s):")
    for kind in ("alignment", "overlap", "cause", "not_written_back"):
        assert f"[{kind}]" in msg


def test_require_valid_caps_the_listing(graph, plan):
    extra = [res(graph, "w2", 256 + 16 * i, 0, 0) for i in range(25)]  # 25 unfilled residencies
    broken = replace(plan, residencies=tuple(sorted(plan.residencies + tuple(extra))), capacity=1024)
    found = validate(broken, graph)
    assert len(found) > 20
    with pytest.raises(PlanError, match=rf"(?s){len(found)} violation\(s\).*and {len(found) - 20} more"):
        require_valid(broken, graph)
    assert str(pytest.raises(PlanError, require_valid, broken, graph).value).count("\n  [") == 20


def test_every_kind_in_the_table_has_a_test():
    import npusim.plan.validate as v

    table = set(re.findall(r"^(\w+)\s{2,}", v.__doc__, flags=re.M)) - {"kind"}
    assert table == ALL_KINDS
    import test_tiling

    names = " ".join(n for n in list(globals()) + dir(test_tiling) if n.startswith("test_"))
    for kind in ALL_KINDS:
        assert f"test_{kind}_" in names, f"no test for violation kind {kind!r}"


# -- plans from the baseline planner -------------------------------------------------------------
@pytest.fixture(scope="module")
def hw():
    return load_hardware(HW_YAML)


@pytest.mark.parametrize("pipeline", ["default+arena+belady", "default+arena+lru"])
@pytest.mark.parametrize("budget", [M_R, M_R + 16, M_P, 256, None])
def test_arena_plans_are_valid(graph, hw, pipeline, budget):
    plan = make_plan(graph, hw, pipeline, budget=budget)
    assert validate(plan, graph) == []
    assert plan.capacity == (budget or hw.scratchpad.size)
    spilled = plan.offchip_bytes()["spill"]
    assert (spilled > 0) == (budget is not None and budget < M_P)


def test_arena_below_m_r_names_m_r_and_the_op(graph, hw):
    with pytest.raises(PlanningError) as exc:
        make_plan(graph, hw, "default+arena+belady", budget=M_R - 1)
    msg = str(exc.value)
    assert f"budget {M_R - 1} B" in msg and f"M_R = {M_R} B" in msg and f"'{M_R_OP}'" in msg


def test_unknown_tensor_ids_and_transfer_kinds_are_violations():
    from npusim.plan.model import Residency, Transfer

    g = tiny_graph()
    p = valid_plan()
    bad = replace(
        p,
        residencies=p.residencies + (Residency(first=0, last=0, offset=0, tensor=99, size=16),),
        transfers=p.transfers + (Transfer(step=0, kind="copy", tensor=0, cause="spill", size=g.tensors[0].size),),
    )
    found = validate(bad, g)
    kinds = sorted(v.kind for v in found)
    assert kinds == ["cause", "range"], found
    assert any("tensor id 99" in v.message for v in found)
    assert any("kind 'copy'" in v.message for v in found)


def test_the_residency_index_finds_what_a_scan_in_plan_order_finds():
    """``ResidencyIndex`` bisects a tensor's residencies when they are disjoint in steps and
    scans them otherwise; on random residencies, overlapping ones included, it must answer
    every (tensor, step) as the first residency in plan order holding that step."""
    import random

    from npusim.plan.model import Residency
    from npusim.plan.validate import ResidencyIndex

    rng = random.Random(7)
    for _ in range(200):
        by_tensor = {}
        for t in range(3):
            rs = []
            for _ in range(rng.randint(0, 6)):
                first = rng.randint(0, 30)
                rs.append(Residency(first, first + rng.randint(0, 5), rng.randint(0, 9) * 64, t, 64))
            by_tensor[t] = rs
        index = ResidencyIndex(by_tensor)
        for t in range(4):
            for s in range(-1, 38):
                scan = next((r for r in by_tensor.get(t, ()) if r.first <= s <= r.last), None)
                assert index(t, s) is scan, (t, s, by_tensor.get(t))
