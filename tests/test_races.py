"""Race detection: the happens-before check and the jitter schedules of the timed run."""

import json
import itertools
import random
from dataclasses import replace

import pytest

from npusim.errors import SimulationError
from npusim.plan.lower import Access, Command, Program, lower
from npusim.sim.engine import simulate
from npusim.sim.jitter import MODES, STALL_FACTOR, JitterSchedule
from npusim.sim.races import HappensBefore, find_race
from npusim.testing.seeded_races import KINDS, ordered, seeded_cases

GRAPHS = 6


@pytest.fixture(scope="module")
def cases():
    """Seeded small multi-stream graphs: (graph, hw, safe plan, {kind: (plan, program)})."""
    return list(seeded_cases(GRAPHS, random.Random(1), sizes=(8, 18)))


def first_catch(program, plan, graph, hw, seeds, check_races=True):
    """0 if caught without jitter, k if first caught by seed k of ``seeds``, None if never."""
    for seed in [0, *seeds]:
        try:
            simulate(program, hw, jitter=4.0 if seed else 0.0, seed=seed, check_races=check_races)
        except SimulationError:
            return seed
    return None


def test_every_seeded_race_is_caught_in_one_run(cases):
    counts = dict.fromkeys(KINDS, 0)
    for graph, hw, _, injected in cases:
        for kind, case in injected.items():
            if case is None:
                continue
            plan, program = case
            counts[kind] += 1
            race = find_race(program, hw.dma.channels, str, str)  # the timing-independent check alone
            assert race is not None and ("overwrite of live data" in race or "reads" in race), (graph.name, kind)
            with pytest.raises(SimulationError):  # the simulator: timed run, then that check
                simulate(program, hw)
    assert all(n >= GRAPHS - 2 for n in counts.values()), counts  # every kind really exercised


def test_jitter_modes_alone_catch_every_seeded_race_within_five_seeds_per_queue(cases):
    missed_without_jitter = 0
    for graph, hw, _, injected in cases:
        for case in filter(None, injected.values()):
            plan, program = case
            seeds = range(1, len(MODES) * len(program.queues) + 1)  # stall and rush every queue once
            seed = first_catch(program, plan, graph, hw, seeds, check_races=False)
            assert seed is not None, f"{graph.name}: not caught by the timed run in {len(seeds)} seeds"
            missed_without_jitter += seed > 0
    assert missed_without_jitter  # the timed run needs jitter for some; the happens-before check never does


def test_safe_plans_are_never_flagged(cases):
    for graph, hw, plan, _ in cases:
        program = lower(plan, hw, graph)
        assert find_race(program, hw.dma.channels, str, str) is None
        for seed in range(len(MODES) * 2):
            simulate(program, hw, jitter=4.0 if seed else 0.0, seed=seed)


def test_vector_clocks_agree_with_a_plain_graph_search(cases):
    """``HappensBefore.ends_before`` against ``seeded_races.ordered`` (BFS over the semaphore
    and queue edges), on every pair of commands of safe and unsafe programs."""
    for graph, hw, plan, injected in cases[:3]:
        programs = [lower(plan, hw, graph)] + [case[1] for case in injected.values() if case is not None]
        for program in programs:
            hb = HappensBefore(program, dma_channels=2)
            for a, b in itertools.combinations(range(program.n_commands), 2):
                assert hb.ends_before(a, b) == ordered(program, a, b), (graph.name, a, b)
                assert not hb.ends_before(b, a)


def tiny_program(waits_of_compute: tuple[int, ...]) -> Program:
    """Two loads on one DMA queue (into regions 0 and 1), then an op reading both."""
    r0, r1 = Access(0, 0, 0, 64), Access(1, 1, 64, 64)
    commands = (
        Command(0, "dma.load", "load", 0, tensor=0, nbytes=64, writes=(r0,)),
        Command(1, "dma.load", "load", 0, tensor=1, nbytes=64, writes=(r1,)),
        Command(2, "stream0", "compute", 0, op=0, reads=(r0, r1), waits=waits_of_compute),
    )
    return Program("tiny", {"dma.load": (0, 1), "stream0": (2,)}, commands, ((0, 2), (1, 2)), 128, 1)


def test_dma_queue_orders_issue_not_completion():
    names = dict(who=lambda c: f"command {c}", tensor=lambda t: f"t{t}")
    assert find_race(tiny_program((0, 1)), 2, **names) is None
    # Waiting for the second load only: the first may still be in flight on the other channel.
    race = find_race(tiny_program((1,)), 2, **names)
    assert race is not None and "command 2: reads 't0' at [0, 64)" in race and "command 0" in race
    # With one channel the queue transfers one at a time: the wait for the second load suffices.
    assert find_race(tiny_program((1,)), 1, **names) is None


def test_reuse_across_streams_is_named(cases):
    graph, hw, _, injected = next((c for c in cases if c[3]["reuse"] is not None))
    plan, program = injected["reuse"]
    race = find_race(program, hw.dma.channels, str, lambda t: graph.tensors[t].name)
    assert race is not None and "overwrite of live data" in race
    # Both tensors given the same offset are named.
    shared = [r for r in plan.residencies if sum(s.offset == r.offset for s in plan.residencies) > 1]
    assert sum(f"'{graph.tensors[r.tensor].name}'" in race for r in shared) >= 2


def test_check_races_off_keeps_the_timed_run_alone(cases):
    """A race the unjittered timed run misses passes with ``check_races=False`` and is caught with it."""
    for graph, hw, _, injected in cases:
        for case in filter(None, injected.values()):
            plan, program = case
            try:
                report = simulate(program, hw, check_races=False)
            except SimulationError:
                continue
            assert report.cycles > 0
            with pytest.raises(SimulationError, match="happens-before"):
                simulate(program, hw)
            return
    pytest.fail("every seeded race was caught without jitter: no case for this test")


def test_jitter_schedules_cycle_modes_and_victims_and_are_seeded():
    queues = ["dma.load", "dma.store", "stream0", "stream1"]
    modes = [JitterSchedule(queues, 0.5, seed).mode for seed in range(2 * len(MODES))]
    assert modes == list(MODES) * 2
    stalled = {JitterSchedule(queues, 0.5, seed).victim for seed in range(1, len(MODES) * len(queues), len(MODES))}
    assert stalled == set(queues)
    stall = JitterSchedule(queues, 0.5, 1)
    assert stall.mode == "stall" and stall.speed[stall.victim] == STALL_FACTOR
    assert all(stall.stretch(q) < 1.5 for q in queues if q != stall.victim)
    a, b = JitterSchedule(queues, 0.5, 3), JitterSchedule(queues, 0.5, 3)
    assert [a.stretch(q) for q in queues * 3] == [b.stretch(q) for q in queues * 3]
    assert all(1.0 <= JitterSchedule(queues, 0.5, 4).stretch("stream0") < STALL_FACTOR for _ in range(50))


def test_an_out_of_order_write_to_one_residency_is_a_race():
    """Two writers of one residency with nothing between them: flagged as a write/write race."""
    program = tiny_program((0, 1))
    twice = replace(program.commands[1], writes=(Access(0, 0, 0, 64),))
    commands = (program.commands[0], twice, program.commands[2])
    program = replace(program, commands=commands, residency_users=((0, 1, 2), ()))
    race = find_race(program, 2, who=lambda c: f"command {c}", tensor=lambda t: f"t{t}")
    assert race is not None and "both write" in race


def test_a_jittered_run_says_so_in_text_and_json(capsys):
    """A jittered latency is a race test's, not the design's: the first line and the JSON say
    so, with the seed and the amount; an unjittered report has no such field."""
    from npusim.cli import main

    assert main(["simulate", "squeezenet1_0", "--jitter", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jitter"] == {"seed": 3, "amount": 0.5}
    assert main(["simulate", "squeezenet1_0", "--jitter", "3", "--jitter-amount", "0.25"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("-- JITTERED (seed 3, amount 0.25): a race test, not a timing")
    assert main(["simulate", "squeezenet1_0", "--json"]) == 0
    assert "jitter" not in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("amount", ["0", "-0.5", "nan", "inf", "half", "1e150", "100.5", "1e-300", "0.0009"])
def test_a_jitter_amount_that_stretches_nothing_or_is_no_number_is_refused(amount, capsys):
    """0 ran no jitter at all (the seed's schedule included) while the report looked like a race
    test's, and so did 1e-300 (1 + 1e-300 is 1); a negative amount shrank times; 1e150
    overflowed (an internal error): each is refused in one line, exit 2. The upper bound is the
    stalled queue's factor."""
    from npusim.cli.parser import MAX_JITTER_AMOUNT
    from npusim.sim.jitter import STALL_FACTOR

    assert MAX_JITTER_AMOUNT == STALL_FACTOR
    from npusim.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "squeezenet1_0", "--jitter", "3", "--jitter-amount", amount])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--jitter-amount: expected a number from 0.001 to 100, got '{amount}'" in err[0]


def test_a_race_the_timed_run_exposes_is_reported_by_the_run(cases):
    """The happens-before check runs before the timed run (to keep its memory off the run's
    peak) but raises after it: a race the run exposes keeps the run's own message, and one it
    misses gets the check's."""
    by_run = by_check = 0
    for _, hw, _, injected in cases:
        for plan, program in filter(None, injected.values()):
            try:
                simulate(program, hw, check_races=False)
                run_message = None
            except SimulationError as e:
                run_message = str(e)
            with pytest.raises(SimulationError) as caught:
                simulate(program, hw)
            if run_message is None:
                by_check += 1
                assert str(caught.value).startswith("race (happens-before check")
            else:
                by_run += 1
                assert str(caught.value) == run_message
    assert by_run and by_check  # both ways exercised
