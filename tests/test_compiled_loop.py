"""The compiled event loop (``npusim.sim.compiled_loop``) against its reference, the SimPy
model (``npusim.sim.engine``): the same program must give the same report, field for field
and byte for byte in JSON (timeline, samples, timings, energy, event count), on every kind of
program — tiled and streamed, several DMA channels, several streams on shared cores, one
stream split over several cores — and the same error where the SimPy model raises one."""

import dataclasses
import functools
import json
from dataclasses import replace

import pytest

from npusim.errors import SimulationError
from npusim.plan.lower import lower
from npusim.sim import compiled_loop, engine
from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget


def run(program, hw, compiled: bool, monkeypatch, **kw):
    monkeypatch.setenv("NPUSIM_SIM_LOOP", "compiled" if compiled else "simpy")
    return engine.simulate(program, hw, **kw)


def assert_same(program, hw, monkeypatch):
    reference = run(program, hw, False, monkeypatch)
    compiled = run(program, hw, True, monkeypatch)
    differing = [f.name for f in dataclasses.fields(reference)
                 if getattr(reference, f.name) != getattr(compiled, f.name)]
    assert differing == []
    # ints stay ints (SimPy's clock starts at int 0): the JSON files are the same bytes
    assert json.dumps(reference.to_dict(timeline=True)) == json.dumps(compiled.to_dict(timeline=True))
    assert json.dumps(reference.chrome_trace()) == json.dumps(compiled.chrome_trace())
    return reference


@functools.lru_cache(maxsize=None)
def _planned(trace, hw_name, overrides, budget, pipeline):
    hw = load_hw(hw_name, dict(overrides))
    graph = load_graph(trace)
    extra = {} if pipeline is None else {"pipeline": pipeline}
    plan = plan_graph(graph, hw, budget=resolve_budget(budget, graph, hw) if budget else None, **extra)
    return lower(plan, hw), hw


def program_of(trace, hw_name="edge-npu", overrides=None, budget=None, pipeline=None):
    """(the lowered program, the hardware), planned once per test session; on the bandwidth
    model unless ``overrides`` name one (the shipped NPUs' default is banks: the tests of the
    banks model below ask for it by name, those above hold the shared bus's loop to SimPy's)."""
    overrides = {"dram.model": "bandwidth", **(overrides or {})}
    return _planned(trace, hw_name, tuple(sorted(overrides.items())), budget, pipeline)


@pytest.mark.parametrize("trace, hw_name, budget, overrides", [
    ("resnet18", "edge-npu", "64KiB", {}),  # tiled, streamed loads and stores, 2 channels
    ("mobilenet_v2", "edge-npu", "128KiB", {"dma.channels": "4"}),
    ("bert_tiny", "edge-npu", "256KiB", {"dma.channels": "1"}),
    ("squeezenet1_0", "tpu-like", None, {}),
    ("resnet18", "edge-npu", None, {"cores.count": "4"}),  # one stream split over 4 cores
    ("googlenet", "mid-npu", "256KiB", {}),
])
def test_a_program_gives_the_simpy_models_report(trace, hw_name, budget, overrides, monkeypatch):
    program, hw = program_of(trace, hw_name, overrides, budget)
    report = assert_same(program, hw, monkeypatch)
    assert report.cycles > 0


def test_streams_sharing_cores_give_the_simpy_models_report(monkeypatch):
    """Three streams on two cores: the cores are arbitrated (``_Units``), as the channels are."""
    program, hw = program_of("googlenet", "edge-npu", {"streams": "3", "cores.count": "2", "scratchpad.size": "8MiB"},
                             pipeline="default+streams-rr+mindspore-mo:size,best-fit")
    assert program.streams == 3
    assert_same(program, hw, monkeypatch)


def test_streams_on_their_own_cores_give_the_simpy_models_report(monkeypatch):
    program, hw = program_of("inception_v3", "edge-npu", {"streams": "2", "cores.count": "2", "scratchpad.size": "8MiB"},
                             pipeline="default+streams-rr+mindspore-mo:size,best-fit")
    assert_same(program, hw, monkeypatch)


def test_a_pool_too_small_is_grown_and_the_report_is_the_same(monkeypatch):
    program, hw = program_of("resnet18", budget="64KiB")
    monkeypatch.setattr(compiled_loop, "POOL_PER_QUEUE", 1)
    assert_same(program, hw, monkeypatch)


def _without_a_wait(program):
    """The program with the first op's semaphores dropped: it starts at once, before its loads."""
    commands = list(program.commands)
    first = next(c for c in commands if c.kind == "compute")
    assert any(commands[w].kind == "load" for w in first.waits)
    commands[first.id] = replace(first, waits=(), streamed=())
    return replace(program, commands=tuple(commands))


def _same_error(program, hw, monkeypatch) -> str:
    """The error both loops raise on ``program`` (the same message)."""
    messages = []
    for compiled in (False, True):
        with pytest.raises(SimulationError) as error:
            run(program, hw, compiled, monkeypatch, check_races=False)
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    return messages[0]


def test_a_program_that_reads_too_early_fails_with_the_simpy_models_message(monkeypatch):
    program, hw = program_of("resnet18", budget="64KiB")
    assert "reads" in _same_error(_without_a_wait(program), hw, monkeypatch)


def test_a_deadlock_fails_with_the_simpy_models_message(monkeypatch):
    program, hw = program_of("resnet18", budget="64KiB")
    commands = list(program.commands)
    first, last = commands[0], commands[-1]
    commands[0] = replace(first, waits=first.waits + (last.id,))  # the first waits for the last: none runs
    assert "deadlock" in _same_error(replace(program, commands=tuple(commands)), hw, monkeypatch)


TILED_TAA = "tile+default+arena+belady+taa"


@pytest.mark.parametrize("trace, budget", [("squeezenet1_0", "64KiB"), ("resnet18", "128KiB")])
def test_a_plan_with_a_dram_layout_gives_the_simpy_models_report(trace, budget, monkeypatch):
    """DRAM contents are checked after the compiled run, from its DMA times (no failure here)."""
    program, hw = program_of(trace, budget=budget, pipeline=TILED_TAA)
    assert program.dram_planned
    assert_same(program, hw, monkeypatch)


def _overwriting_plan():
    """squeezenet's TAA plan with one DRAM buffer moved onto another that is live with it."""
    from npusim.plan.bound import as_bound
    from planners.offchip.lifetimes import dram_buffers

    graph, hw = load_graph("squeezenet1_0"), load_hw("edge-npu")
    plan = plan_graph(graph, hw, TILED_TAA, 64 << 10)
    tiled = as_bound(plan, graph).bound_graph
    buffers = [b for b in dram_buffers(tiled, plan.order, plan.transfers, None, graph, 64) if not b.weight]
    a, b = max(((x, y) for i, x in enumerate(buffers) for y in buffers[i + 1:]),
               key=lambda p: min(p[0].last, p[1].last) - max(p[0].first, p[1].first))
    return lower(as_bound(replace(plan.unbound, dram={**plan.dram, b.name: plan.dram[a.name]}), graph), hw), hw


def test_an_overwrite_of_live_dram_data_fails_with_the_simpy_models_message(monkeypatch):
    program, hw = _overwriting_plan()
    assert "overwrite of live data" in _same_error(program, hw, monkeypatch)


def test_the_dram_check_on_recorded_times_fails_where_simpys_does(monkeypatch):
    """The check after a compiled run finds the overwrite itself (it is what sends the run back
    to SimPy), and passes the plan as planned."""
    bad, hw = _overwriting_plan()
    good, _ = program_of("squeezenet1_0", budget="64KiB", pipeline=TILED_TAA)
    for program, holds in ((good, True), (bad, False)):
        machine = engine._new_machine(program, hw, 0.0, None, engine.silent)
        assert machine.run_compiled() is not None
        assert machine.dram_contents_hold() is holds


BANKS = {"dram.model": "banks"}


@pytest.mark.parametrize("trace, budget, overrides, pipeline", [
    ("squeezenet1_0", "64KiB", {}, None),  # tiled, streamed loads and stores, 2 channels
    ("resnet18", "64KiB", {"dram.device": "lpddr5-6400"}, None),  # bank groups
    ("mobilenet_v2", "128KiB", {"dram.device": "ddr4-3200", "dram.page_policy": "closed", "dma.channels": "4"}, None),
    ("bert_tiny", "256KiB", {"dram.device": "hbm2-2000", "dram.page_policy": "adaptive", "dma.channels": "3"}, None),
    ("squeezenet1_0", "64KiB", {"dram.scheduler": "fcfs", "dram.placement": "pages"}, None),
    ("squeezenet1_0", "64KiB", {"dram.powerdown_after": "50ns"}, None),  # ranks powering down and up
    ("resnet18", "128KiB", {"dram.bank_queue": "0", "dram.placement": "rows", "dma.channels": "1"}, None),
    ("squeezenet1_0", "64KiB", {"dram.device": "ddr5-4800"}, TILED_TAA),  # a DRAM layout: the plan's addresses
    ("resnet18", None, {"cores.count": "4"}, None),  # one stream split over 4 cores
])
def test_a_program_on_dram_with_banks_gives_the_simpy_models_report(trace, budget, overrides, pipeline, monkeypatch):
    """``dram.model: banks`` on the compiled loop (its ``Banks``: flows, the look-ahead copy, the
    prediction's timeouts) gives the SimPy run's report: row statistics, the DRAM energy, the
    row hit rate's samples, the bank timing on the critical path, the event count."""
    program, hw = program_of(trace, "edge-npu", {**BANKS, **overrides}, budget, pipeline)
    report = assert_same(program, hw, monkeypatch)
    assert report.dram_stats["row_hits"] > 0 and report.counters["DRAM row hit rate %"]


def test_streams_sharing_cores_on_dram_with_banks_give_the_simpy_models_report(monkeypatch):
    program, hw = program_of("googlenet", "edge-npu", {**BANKS, "streams": "3", "cores.count": "2",
                                                       "scratchpad.size": "8MiB", "dram.placement": "rows"},
                             pipeline="default+streams-rr+mindspore-mo:size,best-fit")
    assert program.streams == 3
    assert_same(program, hw, monkeypatch)


def test_the_pool_of_accesses_compacts_alike_in_both_loops(monkeypatch):
    """Released flows' accesses are dropped from the pool (``Controller._compact_if_needed``,
    the loop's ``banks_compact``) from ``compact_from`` accesses on; with a low threshold they
    are, many times over, and the report stays the SimPy run's."""
    from npusim.dram.controller import Controller

    monkeypatch.setattr(Controller, "compact_from", 256)
    program, hw = program_of("squeezenet1_0", "edge-npu", BANKS, "64KiB")
    assert_same(program, hw, monkeypatch)


def test_a_pool_too_small_on_dram_with_banks_is_grown_and_the_report_is_the_same(monkeypatch):
    """The banks' stale prediction timeouts take pool events too."""
    program, hw = program_of("squeezenet1_0", "edge-npu", BANKS, "64KiB")
    monkeypatch.setattr(compiled_loop, "POOL_PER_QUEUE", 1)
    assert_same(program, hw, monkeypatch)


def _repeated(program, times: int):
    """``program`` with its commands ``times`` over (renumbered): a long program, for the
    questions asked of its length only."""
    commands = [replace(c, id=i) for i, c in enumerate(list(program.commands) * times)]
    return replace(program, commands=commands)


def test_only_large_plain_runs_take_the_compiled_loop(monkeypatch):
    """Small programs stay on SimPy (packing the loop's arrays would cost more than the loop
    saves); so do runs with jitter, which the compiled loop does not model. Banked DRAM runs on
    it at any size (SimPy's banks model costs more per transfer than the packing)."""
    monkeypatch.delenv("NPUSIM_SIM_LOOP", raising=False)
    program, hw = program_of("bert_tiny", budget="256KiB")
    assert len(program.commands) < engine.COMPILED_LOOP_MIN_COMMANDS
    assert not engine._compiled_loop_fits(program, hw, 0.0)
    big = _repeated(program, engine.COMPILED_LOOP_MIN_COMMANDS // len(program.commands) + 1)
    assert engine._compiled_loop_fits(big, hw, 0.0)
    assert not engine._compiled_loop_fits(big, hw, 0.1)
    assert engine._compiled_loop_fits(big, load_hw("edge-npu", BANKS), 0.0)
    assert engine._compiled_loop_fits(program, load_hw("edge-npu", BANKS), 0.0)
    assert not engine._compiled_loop_fits(program, load_hw("edge-npu", BANKS), 0.1)


def test_the_loop_knob_picks_the_loop_and_refuses_a_bad_value(monkeypatch):
    from npusim.util.env_knobs import EnvironmentKnobError

    program, hw = program_of("bert_tiny", budget="256KiB")
    monkeypatch.setenv("NPUSIM_SIM_LOOP", "compiled")
    assert engine._compiled_loop_fits(program, hw, 0.0)
    assert not engine._compiled_loop_fits(program, hw, 0.1)  # jitter: SimPy whatever is asked
    monkeypatch.setenv("NPUSIM_SIM_LOOP", "simpy")
    big = _repeated(program, engine.COMPILED_LOOP_MIN_COMMANDS // len(program.commands) + 1)
    assert not engine._compiled_loop_fits(big, hw, 0.0)
    monkeypatch.setenv("NPUSIM_SIM_LOOP", "fast")
    with pytest.raises(EnvironmentKnobError, match="NPUSIM_SIM_LOOP='fast': expected one of auto, simpy, compiled"):
        engine._compiled_loop_fits(program, hw, 0.0)


def test_the_wall_clock_guard_holds_on_the_compiled_loop(monkeypatch):
    """The compiled loop cannot stop midway: a run past the guard fails at its end, with the
    SimPy model's message."""
    program, hw = program_of("resnet18", budget="64KiB")
    monkeypatch.setattr(engine, "MAX_WALL_SECONDS", 0.0)
    with pytest.raises(SimulationError, match="wall-clock guard of 0 s.*NPUSIM_SIM_MAX_SECONDS"):
        run(program, hw, True, monkeypatch)


def test_the_choice_does_not_depend_on_what_the_process_loaded(monkeypatch):
    """The loop is C (no Numba to load, ~1 ms to import): programs from
    COMPILED_LOOP_MIN_COMMANDS on take it, before and after a first compiled run alike."""
    program, hw = program_of("bert_tiny", budget="256KiB")
    least = engine.COMPILED_LOOP_MIN_COMMANDS

    def choices():
        monkeypatch.delenv("NPUSIM_SIM_LOOP", raising=False)
        return (engine._compiled_loop_fits(_repeated(program, least // len(program.commands) + 1), hw, 0.0),
                engine._compiled_loop_fits(replace(program, commands=program.commands[:least - 1]), hw, 0.0))

    before = choices()
    run(program, hw, True, monkeypatch)  # the loop is loaded now
    assert choices() == before == (True, False)


def test_recorded_timings_are_the_simpy_runs_command_timings():
    """Every ``CommandTiming`` the compiled run makes on demand (``RecordedTimings``) equals the
    one the SimPy run records, types included (an int where SimPy's clock held one)."""
    program, hw = program_of("resnet18", budget="64KiB")
    simpy_run = engine._new_machine(program, hw, 0.0, None, engine.silent)
    simpy_run.run()
    compiled = engine._new_machine(program, hw, 0.0, None, engine.silent)
    assert compiled.run_compiled() is not None
    assert isinstance(compiled.timings, compiled_loop.RecordedTimings)
    assert len(compiled.timings) == len(simpy_run.timings)
    for i, expected in enumerate(simpy_run.timings):
        got = compiled.timings[i]
        assert got == expected, i
        assert [type(getattr(got, f)) for f in ("ready", "start", "end", "band")] == \
            [type(getattr(expected, f)) for f in ("ready", "start", "end", "band")], i
    assert compiled.timings.ends == [t.end for t in simpy_run.timings]


@pytest.mark.parametrize("trace, budget, overrides, pipeline", [
    ("resnet18", "64KiB", {}, None),  # streamed loads and stores: bands and tails on the path
    ("mobilenet_v2", "128KiB", {"dma.channels": "4"}, None),  # transfers waiting for a channel
    ("squeezenet1_0", "64KiB", {**BANKS, "dram.device": "lpddr5-6400"}, None),  # bank timing
    ("resnet18", None, {"cores.count": "4"}, None),
    ("googlenet", None, {"streams": "4", "cores.count": "1", "scratchpad.size": "8MiB"},  # core waits on the path
     "default+streams-rr+mindspore-mo:size,best-fit"),
])
def test_the_critical_path_over_the_columns_is_the_walk_over_command_timings(trace, budget, overrides, pipeline):
    """``RecordedTimings.walk_critical_path`` (array work on the columns) against the walk over
    the CommandTimings the run records: the same path, every cause's cycles to the last bit."""
    from npusim.sim.critical_path import critical_path

    program, hw = program_of(trace, "edge-npu", overrides, budget, pipeline)
    machine = engine._new_machine(program, hw, 0.0, None, engine.silent)
    assert machine.run_compiled() is not None
    stalls, path = critical_path(machine.timings)
    assert (stalls, path) == critical_path(list(machine.timings))
    assert len(path) > 1 and sum(stalls.values()) > 0


def test_recorded_timeline_orders_ties_as_a_sort_of_the_entries():
    """The compiled run's timeline is ordered by NumPy with Python's tie-break by name;
    starts here tie often (few values, ints and floats mixed), so runs of equal (start,
    queue) must come out as ``sorted`` of the entries in completion order puts them."""
    import pickle
    import random
    from types import SimpleNamespace

    import numpy as np

    from npusim.plan.command_table import Command, CommandTable

    rng = random.Random(7)
    n = 600
    queues = {q: [] for q in ("stream0", "dma.load", "dma.store", "stream1")}
    commands, ops, tensors = [], [], []
    for i in range(n):
        queue = rng.choice(list(queues))
        queues[queue].append(i)
        if queue.startswith("stream"):
            ops.append(SimpleNamespace(name=rng.choice("abcde"), kind="Conv"))
            commands.append(Command(i, queue, "compute", i, op=len(ops) - 1))
        else:
            tensors.append(SimpleNamespace(name=rng.choice("xyz")))
            commands.append(Command(i, queue, "load", i, tensor=len(tensors) - 1, cause="input", nbytes=64))
    starts = [rng.choice([0, 1.0, 2, 2.0, 3.5]) for _ in range(n)]
    timings = SimpleNamespace(commands=CommandTable.from_commands(commands), ops=ops, tensors=tensors, starts=starts,
                              ends=[s + 1 for s in starts], channel_of=[0] * n,
                              lanes={"stream0": ([0], "core0"), "stream1": ([1], "core1")})
    completion = np.array(rng.sample(range(n), n), dtype=np.int64)
    timeline = compiled_loop.RecordedTimeline(timings, completion, queues, ["dma0"])
    entries = [timeline._entry(i) for i in completion.tolist()]
    expected = sorted(entries, key=lambda e: (e.start, e.queue, e.name))
    assert list(timeline) == expected
    assert timeline == tuple(expected) and timeline[5] == expected[5] and timeline[2:9] == expected[2:9]
    assert pickle.loads(pickle.dumps(timeline)) == tuple(expected)


def _status(program, hw) -> int:
    """The status the compiled loop itself stops with on ``program``."""
    machine = engine._new_machine(program, hw, 0.0, None, engine.silent)
    cores = {q: machine._cores_of(q)[0][0] for q in program.queues if q.startswith("stream")}
    return compiled_loop.run(machine, cores, machine.env.max_events)[0]


def test_the_kernel_stops_with_the_status_of_the_error(monkeypatch):
    """Each error stops the C kernel with its own status (the engine then reruns SimPy, which
    words it): a read too early, a deadlock, the event budget; a plain run is OK."""
    program, hw = program_of("resnet18", budget="64KiB")
    assert _status(program, hw) == compiled_loop.OK
    assert _status(_without_a_wait(program), hw) == compiled_loop.SCRATCHPAD_ERROR
    commands = list(program.commands)
    commands[0] = replace(commands[0], waits=commands[0].waits + (commands[-1].id,))
    assert _status(replace(program, commands=tuple(commands)), hw) == compiled_loop.DEADLOCK
    monkeypatch.setattr(engine, "MAX_EVENTS_PER_COMMAND", 1)
    monkeypatch.setattr(engine, "MIN_EVENT_BUDGET", 0)
    assert _status(program, hw) == compiled_loop.EVENT_BUDGET


def test_the_event_budget_fails_with_the_simpy_models_message(monkeypatch):
    program, hw = program_of("resnet18", budget="64KiB")
    monkeypatch.setattr(engine, "MAX_EVENTS_PER_COMMAND", 1)
    monkeypatch.setattr(engine, "MIN_EVENT_BUDGET", 0)
    assert "events" in _same_error(program, hw, monkeypatch)


def test_a_run_stopped_by_a_full_pool_is_repeated_from_the_program(monkeypatch):
    """A small pool: runs stop with POOL_FULL and are repeated with twice as many events, each
    from the program (the kernel changes none of its arguments, e.g. the residencies' user
    counts), to the SimPy model's report."""
    program, hw = program_of("bert_tiny", budget="256KiB")
    calls = []
    kernel = compiled_loop._kernel

    class Counting:
        def __getattr__(self, name):
            return getattr(kernel, name)

        def run_program(self, *args):
            calls.append(args[-2])  # the pool (then the banks: None)
            return kernel.run_program(*args)

    monkeypatch.setattr(compiled_loop, "_kernel", Counting())
    monkeypatch.setattr(compiled_loop, "POOL_PER_QUEUE", 1)
    assert_same(program, hw, monkeypatch)
    assert len(calls) > 1 and calls[-1] == calls[0] * 2 ** (len(calls) - 1)


def test_the_kernel_refuses_arrays_it_cannot_read():
    """An argument of the wrong type or count is a TypeError naming it (the Python side builds
    every array, so this is an internal error, never a wrong run)."""
    import numpy as np

    ints, floats = np.zeros(3, np.int64), np.zeros(3)
    args = [ints, ints, ints, floats, ints, floats, floats, floats, floats] + [ints] * 17 + [1, 1, False, 1.0, 0,
                                                                                             10, 8, None]
    with pytest.raises(TypeError, match="argument cycles has format"):
        compiled_loop._kernel.run_program(*args[:3], ints, *args[4:])
    with pytest.raises(TypeError, match="argument kind has format"):
        compiled_loop._kernel.run_program(np.zeros(3, np.int32), *args[1:])
    with pytest.raises(TypeError, match="arguments, expected"):
        compiled_loop._kernel.run_program(*args[:-1])
    with pytest.raises(TypeError, match="banks is not a tuple of its arrays"):
        compiled_loop._kernel.run_program(*args[:-1], (ints, ints))
