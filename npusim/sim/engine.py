"""The SimPy model: command queues driving cores, a DMA engine, shared DRAM and a tagged
scratchpad; it executes a Program and returns a Report.

- Each compute queue (one per stream) runs its commands in order on core ``stream mod
  cores.count`` (a resource, ``_Units``, when streams share a core), for ``op_cycles``
  (``npusim.hw.costs``); with fewer streams than cores (and ``cores.split_ops``) stream s
  drives cores s·g … s·g + g − 1, g = ``cores_per_stream``, and every op of it is split
  across them (``core_parts``).
- Each DMA queue issues in order; a command takes one of ``dma.channels`` channels, pays
  descriptor setup and the DRAM latency, then moves its bytes on the bus (the bursts its
  chunks touch, counted in lowering: ``npusim.plan.transfer_cost``) at the share of DRAM
  bandwidth it gets (``SharedBandwidth``), and ends no earlier than its address generator
  (one address per chunk, pipelined with the data).
- Semaphores: a command starts only after every command in its ``waits`` has completed.
- The scratchpad checks every read and write against the residency that should be there;
  with a DRAM layout (``plan.dram``) DRAM contents are checked too (``npusim.sim.dram_memory``).

Time is counted in core clock cycles.

Programs of ``COMPILED_LOOP_MIN_COMMANDS`` commands or more run the same model, event for
event, in ``npusim.sim.compiled_loop`` (a C kernel: ~2 us per command against ~80 us here);
``tests/test_compiled_loop.py`` holds the two to the same report, ``dram.model: banks``
included (the loop drives the DRAM controller from C). Jitter stays here. A DRAM layout's contents are checked after a compiled run, in the order
its transfers started and ended (``_Machine.dram_contents_hold``); a check that fails there
reruns the program here, which raises the error.

Cost: the run is SimPy's event order exactly (time, then priority, then the order events were
scheduled in), kept with less Python per event: the loop inlines SimPy's ``step``
(``CountingEnvironment.run``), queues and transfers are generators driven without
``simpy.Process`` (``_Task``: no end event nobody waits for), DMA channels and shared cores
are ``_Units`` (``simpy.Resource``'s grant order without its bookkeeping), and what a
command needs that does not depend on time (its scratchpad accesses, an op's cycles,
scratchpad bytes and energy) is computed once. ``tests/test_simulator.py`` holds ``_Task``
and ``_Units`` to SimPy's order.
"""

from __future__ import annotations

import math
import time
from collections import deque
from heapq import heappop
from operator import attrgetter

import numpy as np
import simpy
from simpy.events import Event, Timeout  # built directly: env.event() and env.timeout() go through a descriptor

from npusim.errors import SimulationError
from npusim.util.env_knobs import sim_loop, sim_max_seconds
from npusim.hw.config import Hardware
from npusim.plan.command_table import KIND_CODES, rows_as_arrays
from npusim.plan.lower import Command, Program, dma_settings
from npusim.plan.model import CAUSES
from npusim.plan.rereads import move_rereads
from npusim.plan.transfer_cost import address_cycles, unloaded_cycles
from npusim.util.progress import silent
from npusim.sim.bandwidth import SharedBandwidth
from npusim.sim import races
from npusim.sim.jitter import JitterSchedule
from npusim.hw.costs import (
    array_macs, array_pes, cores_per_stream, cost_classes, level_energy, op_core_cycles, register_accesses,
    scratchpad_bytes, stream_bands,
)
from npusim.hw.silicon import area_mm2, scratchpad_byte_energy, static_energy_pj
from npusim.sim.critical_path import CommandTiming, critical_path, op_breakdown
from npusim.sim.report import DYNAMIC_COMPONENTS, Pairs, Report, TimelineEntry
from npusim.sim.scratchpad import TaggedScratchpad


#: The critical-path causes of a DMA command's parts, by kind: overhead, latency, bandwidth,
#: bank timing (``npusim.sim.critical_path``).
DMA_CAUSES = {kind: (f"{kind}_overhead", f"{kind}_latency", f"{kind}_bandwidth", f"{kind}_bank_timing")
              for kind in ("load", "store")}

#: The critical-path cause of each bound ``op_cycles`` reports.
BOUND_CAUSE = {"array": "array", "vector": "vector", "scratchpad": "scratchpad_bandwidth",
               "scratchpad_port": "scratchpad_port"}

#: Resource guards: a run may process at most this many events per command (a correct run
#: needs about ten), and may take at most this much wall time (env NPUSIM_SIM_MAX_SECONDS).
MAX_EVENTS_PER_COMMAND = 256
MIN_EVENT_BUDGET = 10_000
MAX_WALL_SECONDS: float | None = None  # None: NPUSIM_SIM_MAX_SECONDS (default 3600), checked per run


#: Events between two progress reports of a simulation (``npusim.util.progress``).
PROGRESS_EVERY = 4096


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes and enforces the guards."""

    def __init__(self, max_events: int | None = None, max_seconds: float | None = None, progress=silent) -> None:
        super().__init__()
        self.progress = progress
        self.processed = 0
        self.max_events = max_events
        self.max_seconds = max_seconds
        self.deadline = None if max_seconds is None else time.monotonic() + max_seconds

    def _check_guards(self) -> None:
        """The per-event guards (event budget, progress report, wall clock), run on every event."""
        if self.max_events is not None and self.processed > self.max_events:
            raise SimulationError(f"simulation stopped at cycle {self.now:,.0f}: more than {self.max_events:,} "
                                  f"events (MAX_EVENTS_PER_COMMAND = {MAX_EVENTS_PER_COMMAND} per command); "
                                  "the run is not making progress: please report it with the plan")
        if self.processed % PROGRESS_EVERY == 0:
            self.progress("simulating: cycle", self.now, None, f"{self.processed:,} events")
        if self.processed % 256 == 0:
            self.check_wall_clock()

    def check_wall_clock(self) -> None:
        """Raise if the run is past its wall-clock guard."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise SimulationError(f"simulation stopped at cycle {self.now:,.0f} after {self.processed:,} events: "
                                  f"over the wall-clock guard of {self.max_seconds:g} s; raise it with "
                                  "NPUSIM_SIM_MAX_SECONDS or simulate a smaller budget/graph")

    def step(self) -> None:
        self.processed += 1
        self._check_guards()
        super().step()

    def run(self, until=None):
        """Process every event, as ``simpy.Environment.run()`` with no ``until`` does.

        The loop is SimPy's ``step`` inlined (pop the earliest (time, priority, id), run its
        callbacks, crash on a failed event nobody defused), so the events run in exactly
        SimPy's order; only the events a guard can act on (every 256th, the one past the
        budget) go through ``step`` and its guards: a method call per event is most of what
        the wrapper cost."""
        if until is not None:
            return super().run(until)
        queue = self._queue
        every = math.gcd(256, PROGRESS_EVERY)  # the guards act only on multiples of this count ...
        budget = self.max_events if self.max_events is not None else math.inf  # ... or past the budget
        processed = self.processed
        try:
            while True:
                guarded = min(processed - processed % every + every, budget + 1)
                while processed + 1 < guarded and queue:
                    self._now, _, _, event = heappop(queue)
                    processed += 1
                    callbacks, event.callbacks = event.callbacks, None
                    for callback in callbacks:
                        callback(event)
                    if not event._ok and not hasattr(event, "_defused"):
                        self.processed = processed
                        _crash(event)
                # the event a guard may act on, or the empty queue: through step(), which
                # counts and checks it first (the empty queue's step too, as SimPy's run does)
                self.processed = processed
                self.step()
                processed = self.processed
        except simpy.core.EmptySchedule:
            return None


def _crash(event) -> None:
    """Raise a failed event's exception, as ``simpy.Environment.step`` does."""
    exc = type(event._value)(*event._value.args)
    exc.__cause__ = event._value
    raise exc


class _Task:
    """A SimPy process nobody waits for (a command queue, a DMA transfer), driven without
    ``simpy.Process``.

    It starts as a Process does (an URGENT event scheduled now, so it runs at the same point
    of the event order), resumes its generator on each event it yields, and simply stops at
    the end: a Process would also schedule its own end, an event with no callbacks, one per
    queue and per transfer. Every event the generator yields succeeds (no failure to throw
    in); an error in it propagates from the event loop at once, where a Process would raise
    it when its failed end event came up."""

    __slots__ = ("generator",)

    def __init__(self, env: simpy.Environment, generator) -> None:
        self.generator = generator
        start = simpy.Event(env)
        start._ok, start._value = True, None
        start.callbacks.append(self._resume)
        env.schedule(start, simpy.events.URGENT)

    def _resume(self, event) -> None:
        send = self.generator.send
        while True:
            try:
                event = send(event._value)
            except StopIteration:
                return
            if event.callbacks is not None:  # not processed yet: resume when it is
                event.callbacks.append(self._resume)
                return


class _Units:
    """``simpy.Resource(env, capacity)`` as the engine uses it (``request()``, yield it,
    ``release(request)``), with SimPy's event order and none of its bookkeeping:

    - a request joins the queue and the head of the queue is granted if a unit is free (SimPy's
      ``_trigger_put`` looks at the head only), its event succeeding now;
    - a release frees the unit at once and schedules a release event (now, as SimPy's
      ``Release`` succeeds), which grants the head of the queue when it is processed."""

    __slots__ = ("capacity", "env", "in_use", "queue")

    def __init__(self, env: simpy.Environment, capacity: int) -> None:
        self.env, self.capacity, self.in_use, self.queue = env, capacity, 0, deque()

    def request(self) -> Event:
        request = Event(self.env)
        self.queue.append(request)
        self._grant()
        return request

    def release(self, request: Event) -> None:
        self.in_use -= 1
        released = Event(self.env)
        released.callbacks.append(self._grant)
        released.succeed()

    def _grant(self, _event=None) -> None:
        if self.queue and self.in_use < self.capacity:
            self.in_use += 1
            self.queue.popleft().succeed()


class _Machine:
    def __init__(self, program: Program, hw: Hardware, jitter: float, seed: int | None, progress=silent):
        self.program, self.graph, self.hw = program, program.graph, hw
        self.env = CountingEnvironment(MAX_EVENTS_PER_COMMAND * len(program.commands) + MIN_EVENT_BUDGET,
                                       MAX_WALL_SECONDS if MAX_WALL_SECONDS is not None else sim_max_seconds(),
                                       progress)
        self.cores = [_Units(self.env, 1) for _ in range(hw.cores.count)]
        self.channels = _Units(self.env, hw.dma.channels)
        if hw.dram.model == "banks":  # a device with banks and rows at the DMA's addresses (npusim.dram.model)
            from npusim.dram.model import BankedDram  # lazy: the device model, only when used

            self.dram = BankedDram(self.env, hw, program)
            self.dram_latency = self.dram.front_end_cycles
        else:
            self.dram = SharedBandwidth(self.env, hw.dram_bytes_per_cycle)
            self.dram_latency = hw.dram_latency_cycles
        self.scratchpad = TaggedScratchpad(program.capacity)
        self.done: list[Event] = []  # a completion event per command, made by run() (SimPy's loop)
        self.users_left = rows_as_arrays(program.residency_users)[0].tolist()
        self.timeline: list[TimelineEntry] = []
        self.timings: list[CommandTiming] = []  # made by run(), or recorded by the compiled loop
        self.free_channels = list(range(hw.dma.channels))
        self.dma_lanes = [f"dma{channel}" for channel in range(hw.dma.channels)]
        self.dma_setup_cycles = hw.dma.setup_cycles
        self.occupancy: list[tuple[float, int]] = []  # (cycle, scratchpad bytes claimed); Pairs after a compiled run
        self.dram_samples: list[tuple[float, int]] = []  # (cycle, transfers moving data); as above
        self.dram_flows = 0
        self.schedule = JitterSchedule(list(program.queues), jitter, seed) if jitter > 0 else None
        self.dram_memory = None  # a DramContents, set by simulate() for a plan with a DRAM layout
        self.dma_steps = None  # a compiled run's transfer starts (c) and ends (n + c), in order
        self.jitter = jitter
        self.group = cores_per_stream(hw, program.streams)  # cores each stream drives
        self.core_busy = [0.0] * hw.cores.count
        self.channel_busy = 0.0
        self.banked = hw.dram.model == "banks"
        self.energy = dict.fromkeys(DYNAMIC_COMPONENTS, 0.0)
        self.scratchpad_read_byte, self.scratchpad_write_byte = scratchpad_byte_energy(hw)
        self.energy_by_op: dict[str, float] = {}
        self.energy_by_level = {lv.name: 0.0 for lv in hw.cores.levels}  # cores.levels (register_file's parts)
        # Per-op figures, computed once per cost class (``cost_classes``), not once per tile:
        self._class_of, self._class_ops = cost_classes(self.graph)  # op id -> its class; class -> its first op
        self._class_array = np.array(self._class_of, dtype=np.int64)  # (the same, for many ops at once)
        self._levels: dict[int, dict] = {}
        self._cycles: dict[int, tuple] = {}
        self._bytes: dict[int, tuple[int, int]] = {}
        self._energy: dict[int, dict] = {}
        self._energy_total: dict[int, float] = {}  # cost class -> the sum of its energy parts
        self._bands: dict[int, int] = {}
        self._cost_numbers = None  # (transfer_costs)
        self._streaming(program)

    def _streaming(self, program: Program) -> None:
        """Which waits stream (``Command.streamed``) and in how many bands: an op in its
        ``stream_bands``, a load in those of the first op streaming from it, a store in those
        of the op whose results it stores. A wait streams only when there are two bands or
        more; ``band_done`` holds the first-band event of every command streamed from (made by
        ``run()``: the compiled loop asks only which commands have one)."""
        table = program.commands
        n = len(table)
        kind_of = table.kind
        computes = np.flatnonzero(table.column("kind") == KIND_CODES["compute"])
        classes = self._class_array[table.column("op")[computes]]
        bands_of_class = np.ones(len(self._class_ops), dtype=np.int64)
        for key in np.unique(classes).tolist():  # (only the classes that run: stream_bands of those)
            bands_of_class[key] = self._class_bands(key)
        bands = np.ones(n, dtype=np.int64)
        bands[computes] = bands_of_class[classes]
        self.bands = bands.tolist()
        self.streams_from: list[tuple[int, ...]] = [()] * n
        self.band_done: dict[int, simpy.Event | None] = {}
        compute = KIND_CODES["compute"]
        for i, streamed in _streamed_waits(table):
            if kind_of[i] == compute:
                if self.bands[i] < 2:
                    continue
                for w in streamed:
                    if w not in self.band_done:
                        self.bands[w] = self.bands[i]
                        self.band_done[w] = None
                self.streams_from[i] = streamed
            else:  # a store streams from the op that produced what it stores
                producer = streamed[0]
                if self.bands[producer] >= 2:
                    self.bands[i] = self.bands[producer]
                    self.band_done.setdefault(producer, None)
                    self.streams_from[i] = streamed

    def _accesses(self, table) -> None:
        """Each command's scratchpad accesses as the tuples the scratchpad checks take
        (residency, tensor name, offset, size), and the residencies it touches (released
        when their last user completes): built once, not on every run of the command, from the
        Program's table (one tuple per access of the table)."""
        tensors, accesses = self.graph.tensors, table.accesses
        built = {}  # the table's access index -> its tuple

        def args(indices):
            found = []
            for k in indices:
                one = built.get(k)
                if one is None:
                    a = accesses[k]
                    one = built[k] = (a.residency, tensors[a.tensor].name, a.offset, a.size)
                found.append(one)
            return tuple(found)

        n = len(table)
        self.reads_of = [args(table.reads[i]) for i in range(n)]
        self.writes_of = [args(table.writes[i]) for i in range(n)]
        self.touched = [tuple(a[0] for a in r + w) for r, w in zip(self.reads_of, self.writes_of)]

    # -- helpers -----------------------------------------------------------------------------
    def _who(self, cmd: Command) -> str:
        if cmd.kind == "compute":
            return f"op {self.graph.ops[cmd.op].name!r} at step {cmd.step} ({cmd.queue})"
        return f"{cmd.kind} of {self.graph.tensors[cmd.tensor].name!r} at step {cmd.step} ({cmd.queue})"

    def _complete(self, cmd: Command) -> None:
        self.done[cmd.id].succeed()
        users_left = self.users_left
        for r in self.touched[cmd.id]:
            users_left[r] -= 1
            if users_left[r] == 0:
                self.scratchpad.release(r)
        self._sample_occupancy()

    def _tensor(self, t: int) -> str:
        return self.graph.tensors[t].name

    # -- queues ------------------------------------------------------------------------------
    def _bind(self, cmd: Command, previous: int | None, previous_at_start: bool) -> None:
        """Record when ``cmd`` became ready and which command made it so (``critical_path``):
        the queue's previous command (at its end, or at its start for an in-order DMA queue)
        or the semaphore signalled last (at its first band for a streamed wait); ties go to
        the queue."""
        timings, done = self.timings, self.done
        timing = timings[cmd.id]
        timing.ready = self.env._now
        best, best_time, at = None, -1.0, "end"
        if previous is not None:
            p = timings[previous]
            at = "start" if previous_at_start else "end"
            best, best_time = previous, (p.start if previous_at_start else p.end)
        for w in cmd.waits:
            t = timings[w]
            if done[w].callbacks is None:  # processed (Event.processed, without the property call)
                when, how = t.end, "end"
            else:  # a streamed wait: its band
                when, how = t.band, "band"
            if when > best_time:
                best, best_time, at = w, when, how
        timing.binding, timing.binding_at = best, at

    def _stream_tail(self, cmd: Command, late: list[int], own_last_band: dict):
        """After ``cmd`` did all but its last band: wait for the streamed commands in ``late``
        still running, then record which one held it up (``CommandTiming.tail``)."""
        before = self.env.now
        for w in late:
            if not self.done[w].processed:
                yield self.done[w]
        if self.env.now > before:
            timing = self.timings[cmd.id]
            timing.tail = max(late, key=lambda w: (self.timings[w].end, w))
            timing.tail_parts = own_last_band

    def _sample_occupancy(self) -> None:
        samples, now = self.occupancy, self.env._now  # Environment.now without the property call
        if samples and samples[-1][0] == now:
            samples[-1] = (now, self.scratchpad.used)
        else:
            samples.append((now, self.scratchpad.used))

    def compute_queue(self, commands: list[Command]):
        if not commands:
            return
        mine, lane = self._cores_of(commands[0].queue)
        core = self.cores[mine[0]]
        # A core that serves only this stream needs no arbitration (saves two events per op).
        shared = self.program.streams > len(self.cores)
        env, done, scratchpad, ops = self.env, self.done, self.scratchpad, self.graph.ops
        reads_of, writes_of = self.reads_of, self.writes_of
        previous = None
        for cmd in commands:
            streamed = self.streams_from[cmd.id]
            for w in cmd.waits:  # _wait_ready, inlined: one generator less per op
                if done[w].callbacks is not None:  # not processed yet
                    yield self.band_done[w] if w in streamed else done[w]
            self._bind(cmd, previous, False)
            if shared:
                req = core.request()
                yield req
            timing = self.timings[cmd.id]
            timing.start, timing.lane = env.now, lane
            op = ops[cmd.op]
            who = lambda cmd=cmd: self._who(cmd)  # noqa: E731  (formatted only for an error)
            arriving = [w for w in streamed if done[w].callbacks is not None]  # streamed, not processed
            streaming = {a[0] for w in arriving for a in writes_of[w]}
            for r, name, offset, size in reads_of[cmd.id]:
                if r not in streaming:  # a band-streamed input is checked when it has all arrived
                    scratchpad.check_read(r, name, offset, size, who)
            for r, name, offset, size in writes_of[cmd.id]:
                scratchpad.claim(r, name, offset, size, who)
            self._sample_occupancy()
            (cycles, bound), per_core = self._op_cycles(op)
            if self.schedule is not None:
                cycles *= self.schedule.stretch(cmd.queue)
            cause = BOUND_CAUSE[bound]
            bands = self.bands[cmd.id]
            start = self.env.now
            if cmd.id in self.band_done:  # a store streams out its results: signal the first band
                timing.band, timing.band_parts = start + cycles / bands, {cause: cycles / bands}
                self.env.timeout(cycles / bands).callbacks.append(
                    lambda _e, ev=self.band_done[cmd.id]: ev.succeed())
            if arriving:  # inputs still arriving: all bands but the last, then wait for them
                yield self.env.timeout(cycles * (bands - 1) / bands)
                yield from self._stream_tail(cmd, arriving, {cause: cycles / bands})
                for r, name, offset, size in reads_of[cmd.id]:
                    if r in streaming:
                        scratchpad.check_read(r, name, offset, size, who)
                yield self.env.timeout(cycles / bands)
            else:
                yield Timeout(env, cycles)
            for a in writes_of[cmd.id]:
                scratchpad.fill(a[0])
            self._account_compute(op, cycles, per_core, mine)
            timing.end, timing.parts = self.env.now, {cause: cycles}
            self.timeline.append(TimelineEntry(cmd.queue, op.name, op.kind, cmd.step, start, self.env.now,
                                               lane=lane, command=cmd.id))
            if shared:
                core.release(req)
            self._complete(cmd)
            previous = cmd.id

    def _cores_of(self, queue: str) -> tuple[list[int], str]:
        """(the cores a compute queue drives, its timeline lane)."""
        stream = int(queue.removeprefix("stream"))
        if self.group > 1:  # this stream's own cores, every op split across them
            first = stream * self.group
            return list(range(first, first + self.group)), f"core{first}-{first + self.group - 1}"
        return [stream % len(self.cores)], f"core{stream % len(self.cores)}"

    def _account_compute(self, op, cycles: float, per_core: list[float], mine: list[int]) -> None:
        """Busy time of the cores that ran ``op`` for ``cycles``, and its energy."""
        slowest = max(per_core)  # a core computes its slice, stretched as the whole op is
        for c, busy in zip(mine, per_core):
            self.core_busy[c] += cycles * busy / slowest if slowest > 0 else cycles
        self._account_op(op)

    def _cost_class(self, op) -> int:
        """A number shared by the ops whose per-op figures are equal (their ``cost_signature``,
        ``cost_classes``): the tiles of one op share theirs, so a tiled graph's figures are
        computed once per class, not once per tile."""
        return self._class_of[op.id]

    def _op_cycles(self, op) -> tuple[tuple[float, str], list[float]]:
        """((cycles, bound), cycles of each of the stream's cores), computed once per cost class."""
        return self._class_cycles(self._class_of[op.id])

    def _class_cycles(self, key: int) -> tuple[tuple[float, str], list[float]]:
        """``_op_cycles`` of the ops of cost class ``key`` (those of its first op: equal for all)."""
        found = self._cycles.get(key)
        if found is None:
            op = self.graph.ops[self._class_ops[key]]
            found = self._cycles[key] = op_core_cycles(op, self.graph, self.hw, self.group, self._scratchpad_bytes(op))
        return found

    def cycles_by_class(self) -> list:
        """The cycles of every cost class's ops (``_op_cycles``' first figure), by class."""
        return [self._class_cycles(key)[0][0] for key in range(len(self._class_ops))]

    def _scratchpad_bytes(self, op) -> tuple[int, int]:
        """``scratchpad_bytes`` of ``op``, computed once per cost class for its cycles and its energy."""
        key = self._cost_class(op)
        found = self._bytes.get(key)
        if found is None:
            found = self._bytes[key] = scratchpad_bytes(op, self.graph, self.hw, self.group)
        return found

    def transfer_costs(self) -> tuple[np.ndarray, list]:
        """(every command's ``TransferCost`` as a number, -1 for a compute; the distinct
        TransferCosts, by number). Lowering shares one per view shape, so what the run, its
        energy and the report read of every transfer's cost is read once per TransferCost."""
        if self._cost_numbers is None:
            table = self.program.commands
            ids = np.flatnonzero(table.column("kind") != KIND_CODES["compute"])
            costs = list(map(table.cost.__getitem__, ids.tolist()))
            distinct = {id(cost): cost for cost in costs}
            number_of = {key: k for k, key in enumerate(distinct)}
            numbers = np.full(len(table), -1, dtype=np.int64)
            numbers[ids] = np.fromiter(map(number_of.__getitem__, map(id, costs)), np.int64, len(costs))
            self._cost_numbers = numbers, list(distinct.values())
        return self._cost_numbers

    def cost_column(self, field: str, dtype=np.int64) -> np.ndarray:
        """``field`` of every command's TransferCost (``transfer_costs``), 0 for a compute."""
        numbers, distinct = self.transfer_costs()
        values = np.array([getattr(cost, field) for cost in distinct] + [0], dtype=dtype)  # (number -1: the 0)
        return values[numbers]

    def _class_bands(self, key: int) -> int:
        """``stream_bands`` of the ops of cost class ``key``, computed once per class."""
        found = self._bands.get(key)
        if found is None:
            found = self._bands[key] = stream_bands(self.graph.ops[self._class_ops[key]], self.graph, self.hw,
                                                    self.group)
        return found

    def dma_queue(self, commands: list[Command]):
        previous = None
        done = self.done
        for cmd in commands:
            streamed = self.streams_from[cmd.id]
            for w in cmd.waits:  # _wait_ready, inlined: one generator less per transfer
                if done[w].callbacks is not None:  # not processed yet
                    yield self.band_done[w] if w in streamed else done[w]
            self._bind(cmd, previous, True)
            req = self.channels.request()
            yield req
            self.timings[cmd.id].start = self.env._now
            _Task(self.env, self._dma(cmd, req))
            previous = cmd.id

    def _dma(self, cmd: Command, req):
        who = lambda: self._who(cmd)  # noqa: E731  (formatted only for an error)
        done, scratchpad, env = self.done, self.scratchpad, self.env
        streamed = self.streams_from[cmd.id]
        producing = [w for w in streamed if done[w].callbacks is not None] if streamed else streamed  # results still being computed
        for access in self.writes_of[cmd.id]:
            scratchpad.claim(*access, who)
        if not producing:
            for access in self.reads_of[cmd.id]:
                scratchpad.check_read(*access, who)
        self._sample_occupancy()
        if self.dram_memory is not None:  # plans with a DRAM layout: live DRAM data is checked too
            self.dram_memory.start(cmd, who)
        channel = self.free_channels.pop(0)
        lane = self.dma_lanes[channel]
        start = env._now  # Environment.now without the property call (here and below)
        cost = cmd.cost
        bus = cost.bus_bytes
        setup = cost.descriptors * self.dma_setup_cycles
        latency = self.dram_latency
        if self.schedule is not None:  # delay DMAs too (by their unloaded time x (stretch - 1)): races with loads show
            setup += (self.schedule.stretch(cmd.queue) - 1.0) * unloaded_cycles(cost, self.hw)
        yield Timeout(env, setup + latency)
        flowing = env._now
        self._sample_dram(+1)
        urgency = cmd.step + (0.5 if cmd.kind == "store" else 0.0)  # the bus serves earlier steps first
        timing = self.timings[cmd.id]
        overhead, waiting, moving_cause, bank_cause = DMA_CAUSES[cmd.kind]
        transfer = self.dram.transfer
        banded = self.band_done.get(cmd.id)  # a consumer streams from this transfer's first band
        if producing or banded is not None:
            # in bands: the first signals a streaming consumer; a store's last waits for the op
            first = bus / self.bands[cmd.id]
            yield transfer(first, urgency, cmd)
            if banded is not None:
                timing.band = env._now
                timing.band_parts = {overhead: setup, waiting: latency, moving_cause: env._now - flowing}
                banded.succeed()
            if producing:  # all but the last band, then (after the op's last band) the last one
                yield transfer(bus - 2 * first, urgency, cmd)
                self._sample_dram(-1)
                mark = env._now
                yield from self._stream_tail(cmd, producing, {})
                self._sample_dram(+1)
                last_start = env._now
                yield transfer(first, urgency, cmd)
                if env._now > mark and timing.tail is not None:  # held up by the op's last band
                    timing.tail_parts = {moving_cause: env._now - last_start}
            else:
                yield transfer(bus - first, urgency, cmd)
        else:
            yield transfer(bus, urgency, cmd)
        self._sample_dram(-1)
        if producing:
            for access in self.reads_of[cmd.id]:
                scratchpad.check_read(*access, who)
        now = env._now
        moving = now - flowing
        addresses_left = flowing + address_cycles(cost, self.hw) - now
        if addresses_left > 0:  # the address generator, not the bus, was the bottleneck
            yield Timeout(env, addresses_left)
            now = env._now
            if timing.tail is not None:
                timing.tail_parts[overhead] = addresses_left
        if self.dram_memory is not None:
            self.dram_memory.finish(cmd)
        for access in self.writes_of[cmd.id]:
            scratchpad.fill(access[0])
        self.channels.release(req)
        self.free_channels.append(channel)
        self.free_channels.sort()
        self.channel_busy += now - start
        timing.end, timing.lane = now, lane
        timing.parts = {overhead: setup + max(addresses_left, 0.0), waiting: latency, moving_cause: moving}
        if self.banked:  # the data phase's share lost to ACT/PRE/refresh beyond the bus
            bank = min(moving, self.dram.bank_cycles(cmd))
            if bank > 0:
                timing.parts[moving_cause] = moving - bank
                timing.parts[bank_cause] = bank
        self._account_transfer(cmd)
        self.timeline.append(TimelineEntry(cmd.queue, self._tensor(cmd.tensor), cmd.kind, cmd.step, start,
                                           now, cmd.cause, cmd.nbytes, lane=lane, command=cmd.id))
        self._complete(cmd)

    def _account_transfer(self, cmd: Command) -> None:
        """The energy of a transfer: DRAM energy on what crosses the bus (whole bursts), as the
        timing; a load reads DRAM and writes the scratchpad, a store the reverse (with
        ``dram.model: banks`` the device's energy is charged at the end, from its commands)."""
        e, energy, cost = self.hw.energy, self.energy, cmd.cost
        if cmd.kind == "load":
            if not self.banked:
                energy["dram_read"] += cost.bus_bytes * e.dram_read_byte
            energy["scratchpad_write"] += cmd.nbytes * self.scratchpad_write_byte
        else:
            if not self.banked:
                energy["dram_write"] += cost.bus_bytes * e.dram_write_byte
            energy["scratchpad_read"] += cmd.nbytes * self.scratchpad_read_byte
        energy["dma_descriptor"] += cost.descriptors * e.dma_descriptor

    def _sample_dram(self, change: int) -> None:
        self.dram_flows += change
        samples, now = self.dram_samples, self.env._now  # Environment.now without the property call
        if samples and samples[-1][0] == now:
            samples[-1] = (now, self.dram_flows)
        else:
            samples.append((now, self.dram_flows))

    def _account_op(self, op) -> None:
        parts = self._op_energy(op)
        for k, v in parts.items():
            self.energy[k] += v
        key = self._class_of[op.id]  # (_op_energy found it)
        for k, v in self._levels[key].items():
            self.energy_by_level[k] += v
        self.energy_by_op[op.name] = self._energy_total[key]

    def _op_energy(self, op) -> dict:
        """Dynamic energy of one run of ``op`` by component (pJ), computed once per cost class."""
        key = self._cost_class(op)
        parts = self._energy.get(key)
        if parts is None:
            e = self.hw.energy
            read, written = self._scratchpad_bytes(op)
            stationary, accumulator = register_accesses(op, self.hw, self.group)
            levels = self._levels[key] = level_energy(op, self.graph, self.hw, self.group)
            dtype = self.graph.tensors[op.outputs[0]].dtype
            parts = self._energy[key] = {
                "mac": op.macs * e.mac(dtype),
                "vector": op.vector_ops * e.vector_op,
                "register_file": stationary * e.stationary_register_access
                + accumulator * e.accumulator_register_access + sum(levels.values()),
                "scratchpad_read": read * self.scratchpad_read_byte,
                "scratchpad_write": written * self.scratchpad_write_byte,
            }
            self._energy_total[key] = sum(parts.values())
        return parts

    def run_compiled(self) -> float | None:
        """The run of ``run()``, by the compiled event loop (``npusim.sim.compiled_loop``): the
        cycles, or None when that loop stopped on an error (``run()`` then raises it)."""
        from npusim.sim import compiled_loop  # lazy: only programs large enough to pay for it load it

        cores = {q: self._cores_of(q)[0][0] for q in self.program.queues if q.startswith("stream")}
        status, result = compiled_loop.run(self, cores, self.env.max_events)
        if status != compiled_loop.OK:
            return None
        cycles = self.env._now = compiled_loop.record(self, result)
        self.env.check_wall_clock()  # (checked once, at the end: the compiled loop cannot stop midway)
        return cycles

    def dram_contents_hold(self) -> bool:
        """After a compiled run of a plan with a DRAM layout: the checks of ``npusim.sim.dram_memory``
        replayed in the order the run started and ended its transfers (``dma_steps``: the order
        the SimPy model checks and releases DRAM contents in), False when one fails; the SimPy run
        then raises it with its own message. The checks do not change the timing."""
        table, n = self.program.commands, len(self.program.commands)
        start, finish = self.dram_memory.start_command, self.dram_memory.finish_command
        store, tensor = (table.column("kind") == KIND_CODES["store"]).tolist(), table.column("tensor").tolist()
        try:
            for step in self.dma_steps.tolist():
                if step < n:
                    start(step, store[step], tensor[step], "")
                else:
                    finish(step - n, store[step - n])
        except SimulationError:
            return False
        return True

    def run(self) -> float:
        commands = list(self.program.commands)  # made once: the table makes a Command on each read
        self.done = [Event(self.env) for _ in commands]
        for c in self.band_done:
            self.band_done[c] = Event(self.env)
        self.timings = [CommandTiming() for _ in commands]
        self._accesses(self.program.commands)
        for queue, ids in self.program.queues.items():
            cmds = [commands[i] for i in ids]
            _Task(self.env, self.compute_queue(cmds) if queue.startswith("stream") else self.dma_queue(cmds))
        self.env.run()
        unfinished = [c for c in commands if not self.done[c.id].triggered]
        if unfinished:
            c = unfinished[0]
            raise SimulationError(f"deadlock: {len(unfinished)} commands never ran, first {self._who(c)} "
                                  f"waiting for commands {list(c.waits)}")
        return self.env.now


def _by_level(energy: dict, machine: _Machine) -> dict:
    """Dynamic energy of every on-chip memory level (pJ), innermost first: the PE register files
    of an R x C core (``register_file``) or each of ``cores.levels``, then the scratchpad (reads
    and writes, the cores' and the DMA's)."""
    levels = dict(machine.energy_by_level) or {"register_file": energy["register_file"]}
    levels["scratchpad"] = energy["scratchpad_read"] + energy["scratchpad_write"]
    return levels


def _transfer_totals(machine: _Machine) -> tuple[dict, int, int, int, float]:
    """(logical bytes by cause, bytes read, bytes written, bytes on the bus, unloaded DMA
    cycles) of the program's loads and stores. Compulsory loads of overlapping tiles of one
    input or weight read some bytes twice: those count as retrieve (``npusim.plan.rereads``).

    As array work over the transfers' columns: the byte counts are integers (any order sums
    them alike), the unloaded cycles are added in command order (``np.add.accumulate`` adds
    one term at a time, as a loop of ``+=`` does)."""
    program, hw = machine.program, machine.hw
    table = program.commands
    transfers = np.flatnonzero(table.column("kind") != KIND_CODES["compute"])
    ids = transfers.tolist()
    causes = list(map(table.cause.__getitem__, ids))
    cause = np.fromiter(map(_CAUSE_CODE.__getitem__, causes), np.int64, len(ids))
    moved = table.column("nbytes")[transfers]
    offchip = {name: int(moved[cause == k].sum()) for k, name in enumerate(CAUSES)}
    compulsory = table.column("tensor")[transfers[cause == _CAUSE_CODE["compulsory"]]].tolist()
    is_load = table.column("kind")[transfers] == KIND_CODES["load"]
    read, write = int(moved[is_load].sum()), int(moved[~is_load].sum())
    # per distinct TransferCost (lowering shares one per view shape): its bus bytes and unloaded cycles
    numbers, distinct = machine.transfer_costs()
    code = numbers[transfers]
    bus_of = np.array([cost.bus_bytes for cost in distinct], dtype=np.int64)
    cycles_of = np.array([unloaded_cycles(cost, hw) for cost in distinct], dtype=np.float64)
    bus = int(bus_of[code].sum())
    dma_work = float(np.add.accumulate(cycles_of[code])[-1]) if len(code) else 0.0
    return move_rereads(offchip, program.graph, compulsory), read, write, bus, dma_work


#: a transfer's cause by name, as a number (its position in ``CAUSES``)
_CAUSE_CODE = {name: k for k, name in enumerate(CAUSES)}


def _semaphores(program: Program) -> Pairs:
    """(signalling command, waiting command) of every wait across queues, by waiting command,
    then in the order of its waits."""
    n = len(program.commands)
    queue = program.commands.column("queue")
    pointers, signal = program.wait_lists
    ids = np.int32 if n < 2**31 else np.int64  # held by the report: a large run has millions of waits
    wait = np.repeat(np.arange(n, dtype=ids), np.diff(pointers))
    across = queue[signal] != queue[wait]
    return Pairs(signal[across].astype(ids), wait[across])


def _in_report_order(timeline):
    """A SimPy run's timeline entries (in completion order) by start, queue, then name; a
    compiled run's timeline is in that order already (``compiled_loop.RecordedTimeline``)."""
    if isinstance(timeline, list):
        return tuple(sorted(timeline, key=attrgetter("start", "queue", "name")))
    return timeline


def _samples(samples) -> Pairs:
    """A counter's samples as ``Pairs``: the compiled loop's arrays as they are, a SimPy run's
    list of (cycle, value) converted."""
    return samples if isinstance(samples, Pairs) else Pairs.of_samples(samples)


#: Programs of at least this many commands run on the compiled event loop: below it, packing
#: its arrays and unpacking its results cost more than SimPy's ~80 us per command save.
COMPILED_LOOP_MIN_COMMANDS = 500


def _new_machine(program: Program, hw: Hardware, jitter: float, seed: int | None, progress) -> _Machine:
    """A machine to run ``program`` on, with a DRAM contents tracker when the plan has a DRAM layout."""
    machine = _Machine(program, hw, jitter, seed, progress)
    if program.dram_planned:
        from npusim.sim.dram_memory import DramContents  # lazy: only plans with a DRAM layout need it

        machine.dram_memory = DramContents(program, program.graph)
    return machine


def _streamed_waits(table) -> list[tuple[int, tuple[int, ...]]]:
    """(command, its streamed waits that are among its waits, in their order) of every
    command with any, in command order: a streamed wait is still a wait (lowering streams
    only waits it makes; a Program made by hand may name others). Tested for every command
    at once, by the (command, wait) pairs of both rows as one integer each."""
    n = len(table)
    s_ptr, s_val = table.streamed.arrays()
    w_ptr, w_val = table.waits.arrays()
    if len(s_val) == 0:
        return []
    if min(s_val.min(), w_val.min(initial=0)) < 0 or max(s_val.max(), w_val.max(initial=0)) >= n:
        # a row naming no command (a Program made by hand): tested row by row
        found = ((i, tuple(w for w in table.streamed[i] if w in table.waits[i]))
                 for i in np.flatnonzero(table.streamed.lengths()).tolist())
        return [(i, streamed) for i, streamed in found if streamed]
    s_row = np.repeat(np.arange(n, dtype=np.int64), np.diff(s_ptr))
    w_row = np.repeat(np.arange(n, dtype=np.int64), np.diff(w_ptr))
    wanted, held = s_row * n + s_val, np.sort(w_row * n + w_val)  # sorted already for lowering's tables
    at = np.minimum(np.searchsorted(held, wanted), max(len(held) - 1, 0))
    kept = held[at] == wanted if len(held) else np.zeros(len(wanted), dtype=bool)
    rows, values = s_row[kept], s_val[kept].tolist()
    if not len(rows):
        return []
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])  # each row's first kept wait
    ends = np.r_[starts[1:], len(rows)].tolist()
    return [(i, tuple(values[a:b])) for i, a, b in zip(rows[starts].tolist(), starts.tolist(), ends)]


def _compiled_loop_fits(program: Program, hw: Hardware, jitter: float) -> bool:
    """Whether the compiled event loop runs ``program`` (``npusim.sim.compiled_loop``): one it
    models (no jitter), large enough to pay for packing its arrays unless
    ``NPUSIM_SIM_LOOP`` asks for one loop. A run with ``dram.model: banks`` takes it at any size:
    the SimPy model's Python per transfer (its ``BankedDram``) costs more than the packing even
    on a program of 68 commands (resnet18 at 5 MiB: 0.20 against 0.22 s CPU; the 20-point DSE
    of ``benchmarks/bench_banks_cost.py``: 1.56 against 2.0 s, 66 against 177 MiB)."""
    choice = sim_loop()
    if choice == "simpy" or jitter != 0:
        return False
    if choice == "compiled" or hw.dram.model == "banks":
        return True
    return len(program.commands) >= COMPILED_LOOP_MIN_COMMANDS


def simulate(program: Program, hw: Hardware, *, jitter: float = 0.0, seed: int | None = None,
             check_races: bool = True, progress=silent) -> Report:
    """Run ``program`` (``npusim.plan.lower``) on ``hw`` and measure it.

    ``check_races`` (default) also runs the timing-independent happens-before check
    (``npusim.sim.races``): a race no timing drawn here exposed still raises
    ``SimulationError``, after the timed run (which reports a race it exposes itself).

    ``jitter`` > 0 stretches every compute by a random factor in [1, 1 + jitter) and delays
    every DMA by up to ``jitter`` x its unloaded time, drawn from ``seed``, to explore other
    interleavings of the streams and the DMA queues; the seed also picks an adversarial
    schedule (stall or rush one queue, per-queue speeds, wide delays: ``npusim.sim.jitter``).

    The report's lower bounds are bounds of this model: no run can beat the compute of every
    op spread over the cores in use, the bytes on the bus at peak DRAM bandwidth, or the
    unloaded time of every DMA spread over the channels.
    """
    graph = program.graph
    if program.lowered_for and dma_settings(hw) != program.lowered_for:
        mine, theirs = dict(dma_settings(hw)), dict(program.lowered_for)
        key = next(k for k in mine if mine[k] != theirs.get(k))
        raise SimulationError(f"the program was lowered for {key} = {theirs.get(key)}, but {hw.name!r} has "
                              f"{mine[key]}: lower the plan again for this hardware")
    if program.offchip_peak > hw.dram.capacity:  # the off-chip data would not fit: no meaningful run
        raise SimulationError(f"{graph.name}: the plan keeps up to {program.offchip_peak:,} B in DRAM (inputs, "
                              f"weights, outputs and spilled tensors at its peak), above dram.capacity = "
                              f"{hw.dram.capacity:,} B of {hw.name!r}")
    machine = _new_machine(program, hw, jitter, seed, progress)
    # The race check does not depend on the timing: it is done before the run (whose arrays then
    # do not yet take memory: a run of a million commands peaks ~100 MB lower) and raised after
    # it, so that a race the timed run exposes is still reported by the run.
    race = races.find_race(program, hw.dma.channels, lambda c: machine._who(program.commands[c]),
                           lambda t: graph.tensors[t].name) if check_races else None
    cycles = None
    if _compiled_loop_fits(program, hw, jitter):
        progress("simulating", detail=f"{len(program.commands):,} commands, compiled loop")
        cycles = machine.run_compiled()
        if cycles is not None and machine.dram_memory is not None and not machine.dram_contents_hold():
            machine, cycles = _new_machine(program, hw, jitter, seed, progress), None  # SimPy says what failed
    if cycles is None:
        cycles = machine.run()
    races.raise_race(race)
    seconds = cycles / hw.clock
    energy = dict(machine.energy)
    dram_stats = {}
    if machine.banked:
        dram_stats = machine.dram.stats(cycles)
        energy.update(dram_stats["energy_pj"])
    busy_seconds = tuple(busy / hw.clock for busy in machine.core_busy)
    for part, pj in static_energy_pj(hw, seconds, busy_seconds).items():
        energy[f"static_{part}"] = pj
    offchip, read, write, bus, dma_work = _transfer_totals(machine)
    # op_cycles of every op: the run's own (cached per op, op_core_cycles) for the ops it ran
    compute_bound = (sum(map(machine.cycles_by_class().__getitem__, machine._class_of))  # (in op order)
                     / min(hw.cores.count, program.streams))
    stalls, _ = critical_path(machine.timings)
    semaphores = _semaphores(program)
    span = max(cycles, 1e-9)
    return Report(
        graph=graph.name, hardware=hw.name, planner=program.planner, plan_status=program.plan_status,
        plan_scope=program.plan_scope, plan_notes=program.plan_notes, scratchpad_size=hw.scratchpad.size,
        capacity=program.capacity, clock_hz=hw.clock, cycles=cycles, seconds=seconds,
        energy_pj=energy, energy_by_op_pj=machine.energy_by_op, energy_by_level_pj=_by_level(energy, machine),
        offchip_bytes=offchip,
        offchip_read_bytes=read, offchip_write_bytes=write, offchip_bus_bytes=bus,
        onchip_peak_bytes=machine.scratchpad.peak, offchip_peak_bytes=program.offchip_peak,
        utilisation={
            "core": sum(machine.core_busy) / (span * len(machine.cores)),
            "dma": machine.channel_busy / (span * hw.dma.channels),
            "dram": machine.dram.busy_cycles / span,
            "array": array_macs(graph, hw) / (span * array_pes(hw)),
        },
        lower_bounds={"compute_cycles": compute_bound, "dram_cycles": bus / hw.dram_bytes_per_cycle,
                      "dma_cycles": dma_work / hw.dma.channels},
        commands=program.n_commands, events=machine.env.processed,
        stalls={k: v for k, v in stalls.items() if v > 0},
        timeline=_in_report_order(machine.timeline),
        op_breakdown=tuple(op_breakdown(program, machine.timings)),
        counters={"scratchpad bytes": _samples(machine.occupancy),
                  "DRAM transfers moving data": _samples(machine.dram_samples),
                  **({"DRAM row hit rate %": tuple(machine.dram.hit_samples)} if machine.banked else {})},
        dram_stats=dram_stats,
        semaphores=semaphores,
        core_utilisation=tuple(busy / span for busy in machine.core_busy),
        cores_per_stream=machine.group, streams=program.streams, core_pes=hw.cores.pes,
        area_mm2=area_mm2(hw),
        jitter={"seed": seed, "amount": jitter} if jitter > 0 else {},
    )
