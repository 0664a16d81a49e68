"""The simulator's event loop compiled (C: ``npusim/native/event_loop.c``): the same run as ``npusim.sim.engine``'s SimPy
model, event for event, without one Python object per event and per command.

Why it exists: a tiled plan runs tens of thousands to a million commands, and the SimPy model
spends ~80 µs of Python per command on events, generators and bookkeeping (issue 28). This
kernel holds the same model as arrays: the command queues, DMA transfers, DMA channels and
shared cores, the shared DRAM bandwidth (``npusim.sim.bandwidth``) or the DRAM with banks
(``npusim.dram.model``), and the tagged scratchpad
(``npusim.sim.scratchpad``), and processes SimPy's events in SimPy's order — by (time,
priority, scheduling order), the callbacks of an event in the order they were added — so every
time, tie and float operation is the one the SimPy model makes. Its reference is the SimPy
model itself: ``tests/test_compiled_loop.py`` runs both on plans of every kind (tiled,
streamed, multi-stream, shared and split cores) and requires identical reports.

How the SimPy processes map onto it: each generator of ``engine._Machine`` (a compute queue,
a DMA queue, one DMA transfer) is a task with a ``phase`` (where its generator stands) that
runs until it must wait for an event not processed yet, then registers itself on that event's
callback list. Events are integers: ``done`` of command c is event c, its first-band event
n + c; the others (timeouts, channel requests and releases, bandwidth wake-ups) come from a
pool and are recycled once processed (nothing refers to them after that).

Why C and not Numba (which it was): Numba costs every process ~0.1 s to import and ~0.15 s to
load a cached kernel, more than the loop itself takes on an LLM decode step; a C extension
loads in a millisecond (``npusim.native``). The C is this model's code function for function
(each named as the Numba function it was), with the same float operations in the same order.

With ``dram.model: banks`` the bus is the DRAM of ``npusim.dram.model.BankedDram`` instead,
in C (``Banks`` in event_loop.c, driving the controller of ``npusim/native/bank_core.h``, the
code ``npusim.dram.controller`` runs): a band starts a flow of its command's accesses (decoded
in C from the command's DRAM view at its first band), and the model's prediction timeouts
(``_advance``, ``_wake``, with the look-ahead copy of the controller) are events of this loop,
scheduled and processed where SimPy's are; the run returns each command's bank delay, the row
hit rate's samples and the controller's final state for the report (``record``,
``BankedDram.adopt_compiled``).

What it does not do (``engine.simulate`` keeps SimPy for these): jitter; nor progress reports or a stop at the wall-clock guard midway (the engine checks the
guard once, at the end). A plan with a DRAM layout runs on it, its DRAM contents checked
after the run from the order of its transfers (``engine._Machine.dram_contents_hold``). On any
error (a scratchpad check failing, a deadlock, the event budget) it stops and returns a status;
the caller then runs the SimPy model, which raises the same error with its message. A pool of
events too small is not an error: ``run`` repeats the run with a larger one.

It returns what the run recorded per command (ready/start/end/band times, binding
predecessor, DMA data-phase times, channel), the completion order (energy and busy times are
summed in that order by the caller, as the SimPy model sums them, so totals agree to the
last bit), and the occupancy and DRAM-flow samples.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Sequence
from itertools import chain

import numpy as np

from npusim import native
from npusim.errors import SimulationError
from npusim.graph.model import op_fields, record_name
from npusim.plan.command_table import KIND_CODES, KINDS, rows_as_arrays
from npusim.sim.critical_path import CAUSES, CommandTiming, channel_holders
from npusim.sim.engine import BOUND_CAUSE, DMA_CAUSES
from npusim.sim.report import Pairs, TimelineEntry
from npusim.util.fast_init import twin_constructor

_kernel = native.load("event_loop")  # npusim/native/event_loop.c

# Statuses, binding_at codes (CommandTiming.binding_at) and the bits of ``int_mask`` (which
# recorded times SimPy held as int: an event chain from time 0 of zero delays only, SimPy's
# clock starting at int 0, so reports print them alike): the kernel's own
OK, SCRATCHPAD_ERROR, DEADLOCK, EVENT_BUDGET, POOL_FULL, BANKS_FAILED = (
    _kernel.OK, _kernel.SCRATCHPAD_ERROR, _kernel.DEADLOCK, _kernel.EVENT_BUDGET, _kernel.POOL_FULL,
    _kernel.BANKS_FAILED)
AT_END, AT_START, AT_BAND = _kernel.AT_END, _kernel.AT_START, _kernel.AT_BAND
READY_INT, START_INT, END_INT, BAND_INT = _kernel.READY_INT, _kernel.START_INT, _kernel.END_INT, _kernel.BAND_INT

# Command kinds: the codes of the Program's kind column
COMPUTE, LOAD, STORE = KIND_CODES["compute"], KIND_CODES["load"], KIND_CODES["store"]


#: Pool events per queue and per DMA channel to start with (timeouts, requests, releases and
#: bandwidth wake-ups in flight); a run that needs more is repeated with twice as many.
POOL_PER_QUEUE = 64


def _pointers(rows) -> np.ndarray:
    """Where each row of a list of sequences starts in their concatenation (and its end)."""
    pointers = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, rows), np.int64, len(rows)), out=pointers[1:])
    return pointers


def _csr(rows) -> tuple[np.ndarray, np.ndarray]:
    """(row pointers, values) of a list of integer sequences."""
    pointers = _pointers(rows)
    return pointers, np.fromiter(chain.from_iterable(rows), np.int64, int(pointers[-1]))


def _int64(column) -> np.ndarray:
    """A column as the kernel's int64 array (no copy when it is one already)."""
    return np.ascontiguousarray(column, dtype=np.int64)


def run(machine, cores_of_queue: dict, max_events: int):
    """Run ``machine``'s program (an ``engine._Machine``) with the compiled loop: the status,
    and the recorded arrays (``record``'s ``result``) when it is ``OK``."""
    program, hw = machine.program, machine.hw
    table = program.commands
    n = len(table)
    kind = table.column("kind").astype(np.int64)
    ids = np.flatnonzero(kind != COMPUTE)  # the transfers (command c is table[c])
    # the same float operations as the engine's (descriptors * setup + latency, chunks * chunk_cycles,
    # step + 0.5 for a store); a compute's are 0 (its cost column's)
    bus = machine.cost_column("bus_bytes", np.float64)
    setup_latency = machine.cost_column("descriptors", np.float64) * machine.dma_setup_cycles + machine.dram_latency
    addr_cycles = machine.cost_column("chunks", np.float64) * hw.dma.chunk_cycles  # transfer_cost.address_cycles
    urgency = np.zeros(n)
    urgency[ids] = table.column("step")[ids]
    urgency += np.where(kind == STORE, 0.5, 0.0)
    compute_ids = np.flatnonzero(kind == COMPUTE)
    classes = machine._class_array[table.column("op")[compute_ids]]  # each compute's cost class
    by_class = machine.cycles_by_class()
    cycles = np.zeros(n)
    cycles[compute_ids] = np.array(by_class, dtype=np.float64)[classes]
    cycles_int = np.zeros(n, np.int64)  # flags as int64: the kernel takes 8-byte items
    cycles_int[compute_ids] = np.array([isinstance(v, int) for v in by_class], dtype=np.int64)[classes]
    has_band = np.zeros(n, np.int64)
    has_band[list(machine.band_done)] = 1
    bands = np.asarray(machine.bands, np.int64)
    wait_ptr, wait_list = map(_int64, program.wait_lists)
    stream_ptr, stream_list = _csr(machine.streams_from)
    read = list(map(_int64, table.access_columns("reads")))
    write = list(map(_int64, table.access_columns("writes")))
    users_left = rows_as_arrays(program.residency_users)[0]
    queue_ptr, queue_cmds = _csr(list(program.queues.values()))
    queue_compute = np.array([q.startswith("stream") for q in program.queues], np.int64)
    queue_core = np.array([cores_of_queue.get(q, 0) for q in program.queues], np.int64)
    shared = program.streams > len(machine.cores)
    pool = POOL_PER_QUEUE * (len(program.queues) + hw.dma.channels)
    banks = machine.dram.compiled_arguments(kind, STORE) if machine.banked else None
    rate = 0.0 if machine.banked else float(machine.dram.rate)
    while True:
        if 3 * n + pool + len(program.queues) + 8 >= 2 ** 31:  # the kernel's 4-byte event and node ids
            raise SimulationError(f"{n:,} commands are more than the compiled event loop holds")
        (status, now, now_int, n_processed, peak, busy_cycles), arrays, banked = _kernel.run_program(
            kind, bands, has_band, cycles, cycles_int, bus, setup_latency, addr_cycles, urgency,
            wait_ptr, wait_list, stream_ptr, stream_list, *read, *write, users_left,
            queue_ptr, queue_cmds, queue_compute, queue_core,
            hw.dma.channels, len(machine.cores), shared, rate, program.capacity, max_events, pool, banks)
        if status != POOL_FULL:
            break
        pool *= 2
    (ready, start, end, band, binding, binding_at, tail, flowing, data_end, mark, last_start, channel_of,
     int_mask, order, occ_time, occ_used, occ_int, dram_time, dram_flows, dram_int, dma_steps) = (
        np.frombuffer(a, dtype) for a, dtype in zip(arrays, _RESULT_TYPES))
    return status, (now, now_int, n_processed, ready, start, end, band, binding, binding_at, tail, flowing,
                    data_end, mark, last_start, channel_of, int_mask, order, occ_time, occ_used, occ_int,
                    dram_time, dram_flows, dram_int, peak, busy_cycles, dma_steps, banked)


_F, _I, _B = np.float64, np.int64, np.bool_
#: The types of the kernel's arrays (bytearrays), in ``run``'s order.
_RESULT_TYPES = (_F, _F, _F, _F, _I, _I, _I, _F, _F, _F, _F, _I, _I, _I,  # ready ... order
                 _F, _I, _B, _F, _I, _B, _I)  # the occupancy, DRAM-flow samples; dma_steps


class HeldTimes(Sequence):
    """A recorded time column as SimPy held it: ``times[i]`` is an int where the run marked it
    one (a chain of zero delays from time 0; SimPy's clock starts at int 0), else a float.

    Kept as the column's 8-byte floats and the run's int marks, not as a list of Python
    numbers (32 bytes an entry): a run of a million commands keeps its starts and ends for
    the report (~60 MB less). ``array()`` views the floats for the questions asked of all."""

    __slots__ = ("values", "int_mask", "bit")

    def __init__(self, times: np.ndarray, int_mask: array, bit: int) -> None:
        self.values, self.int_mask, self.bit = _packed(times), int_mask, bit

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        value = self.values[i]
        return int(value) if self.int_mask[i] & self.bit else value

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self) -> list:
        found = self.values.tolist()
        mask = np.frombuffer(self.int_mask, np.int64) & self.bit
        for i in np.flatnonzero(mask).tolist():
            found[i] = int(found[i])
        return found

    def array(self) -> np.ndarray:
        return np.frombuffer(self.values, np.float64)

    def last_of_largest(self) -> int:
        """The index of the last entry equal to the largest (``critical_path``'s start)."""
        values = self.array()
        if np.abs(values).max() >= 2.0 ** 53:  # floats would merge distinct int times: as a list
            found = self.tolist()
            return len(found) - 1 - found[::-1].index(max(found))
        return int(np.flatnonzero(values == values.max())[-1])

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and self.tolist() == list(other)

    __hash__ = None


#: ``CommandTiming(...)`` and ``TimelineEntry(...)`` with every field given, made faster
#: (``npusim.util.fast_init``): one of each per command.
new_timing = twin_constructor(CommandTiming)
new_entry = twin_constructor(TimelineEntry)


class RecordedTimings:
    """What the compiled run recorded per command, as columns: ``timings[i]`` is command i's
    ``CommandTiming``, made when asked, equal to the one the SimPy run records.

    Why columns: a run of a million commands would otherwise hold a million CommandTimings
    with three dicts each (~0.5 GB), of which the report reads only the critical path's and
    the computes' (``npusim.sim.critical_path``); those read the columns ``ends`` and
    ``starts`` for the questions about every command (which ends last, the computes in start
    order). The columns a CommandTiming alone reads are kept as ``array.array``s of the
    kernel's arrays (8 bytes an entry, not a Python number's 32, and read back as Python
    numbers at list speed); a time SimPy held as an int is given back as one."""

    def __init__(self, machine, ready, start, end, band, int_mask, binding, binding_at, tail, flowing, data_end,
                 mark, last_start, channel_of, bank_delay=None) -> None:
        # A proxy: the machine holds its timings, and a cycle would keep a run of a million
        # commands alive until the next full collection.
        self.machine = weakref.proxy(machine)
        self.ready, self.band, self.int_mask = _packed(ready), _packed(band), _packed(int_mask)
        self.starts, self.ends = HeldTimes(start, self.int_mask, START_INT), HeldTimes(end, self.int_mask, END_INT)
        self.binding, self.binding_at, self.tail = _packed(binding), _packed(binding_at), _packed(tail)
        self.flowing, self.data_end = _packed(flowing), _packed(data_end)
        self.mark, self.last_start, self.channel_of = _packed(mark), _packed(last_start), _packed(channel_of)
        # dram.model: banks: each command's bank delay (ns, its flows' summed; BankedDram.delay_ns)
        self.bank_delay = None if bank_delay is None else _packed(bank_delay)
        if bank_delay is not None:
            self.bank_channels, self.ns_per_cycle = machine.dram.cfg.channels, machine.dram.ns_per_cycle
        self.lanes = {q: machine._cores_of(q) for q in machine.program.queues if q.startswith("stream")}
        self.chunk_cycles = machine.hw.dma.chunk_cycles
        # read on every item (the machine's own objects, which refer to nothing of it)
        self.commands, self.ops, self.tensors, self.bands, self.band_done = (
            machine.program.commands, machine.graph.ops, machine.graph.tensors, machine.bands, machine.band_done)

    def __len__(self) -> int:
        return len(self.ends)

    def __iter__(self):
        return (self[i] for i in range(len(self.ends)))

    def channel_lanes(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(the DMA lanes' names, each command's lane among them, -1 for a compute, every
        command's end as a float): ``critical_path``'s question of which transfer freed a
        channel, from the columns."""
        lane_of = np.frombuffer(self.channel_of, np.int64).copy()
        lane_of[np.frombuffer(self.commands.kind, np.int8) == COMPUTE] = -1
        return list(self.machine.dma_lanes), lane_of, self.ends.array()

    def lane(self, i: int) -> str:
        """The core or DMA channel command ``i`` ran on."""
        table = self.commands
        if table.kind[i] == COMPUTE:
            return self.lanes[table.queue_of(i)][1]
        return self.machine.dma_lanes[self.channel_of[i]]

    def _held(self, times: array, i: int, bit: int) -> int | float:
        """Entry i of a recorded time column as SimPy held it (``_as_simpy_held``)."""
        return int(times[i]) if self.int_mask[i] & bit else times[i]

    def compute_rows(self, ids):
        """(start, end, binding, lane, bound cause) of each of compute commands ``ids``: what
        ``critical_path.op_breakdown`` reads of their CommandTimings, without making them, read
        from the columns for all of them at once (the breakdown asks it of every compute)."""
        machine, table, lanes = self.machine, self.commands, self.lanes
        ids = np.asarray(ids, dtype=np.int64)
        mask = np.frombuffer(self.int_mask, np.int64)[ids]
        binding = np.frombuffer(self.binding, np.int64)[ids].tolist()
        lane_of = [lanes[name][1] if name in lanes else None for name in table.queue_names]
        cause_of = [BOUND_CAUSE[machine._class_cycles(key)[0][1]] for key in range(len(machine._class_ops))]
        causes = machine._class_array[table.column("op")[ids]].tolist()
        return zip(_as_held(self.starts.array()[ids], mask & START_INT), _as_held(self.ends.array()[ids], mask & END_INT),
                   [None if b < 0 else b for b in binding], map(lane_of.__getitem__, table.column("queue")[ids].tolist()),
                   map(cause_of.__getitem__, causes))

    def walk_critical_path(self, current: int, guard: int) -> tuple[dict, list[int]] | None:
        """``critical_path.critical_path`` from command ``current`` (its walk, ``guard`` steps at
        most), read from the columns: the walk first, on the times and bindings, then the parts
        of the commands on it (those ``__getitem__`` makes) for all of them at once, each cause's
        summed in path order one term at a time (as the walk's ``+=`` adds them). None when
        some time is 2**53 or more (floats would merge distinct int times): the caller then
        walks the CommandTimings."""
        starts, ready = self.starts.values, self.ready
        times = np.concatenate([self.starts.array(), self.ends.array(), np.frombuffer(ready, np.float64)])
        if len(times) and np.abs(times).max() >= 2.0 ** 53:
            return None
        kind, tail, binding, binding_at, channel_of = (self.commands.kind, self.tail, self.binding, self.binding_at,
                                                       self.channel_of)
        dma_lanes = self.machine.dma_lanes
        holders = None
        at, path, visits, parts_of = AT_END, [], [], []  # parts_of: which parts each visit adds (_PARTS, ...)
        waits: list[tuple[int, int, float]] = []  # (visit, cause, cycles)
        idle = None
        while current is not None and guard:
            guard -= 1
            path.append(current)
            if at == AT_END and tail[current] >= 0:
                visits.append(current)
                parts_of.append(_TAIL)
                current = tail[current]
                continue
            if at != AT_START:  # (a command bound at its start adds none of its parts)
                visits.append(current)
                parts_of.append(_PARTS if at == AT_END else _BAND)
            start = starts[current]
            wait = start - ready[current]
            if wait > 0:
                on_core = kind[current] == COMPUTE
                if not on_core:
                    if holders is None:
                        holders = channel_holders(self)
                    held_by = holders.get(dma_lanes[channel_of[current]], {}).get(start)
                    if held_by is not None and held_by != current:  # the channel's previous transfer: on the path
                        current, at = held_by, AT_END
                        continue
                waits.append((len(visits), _CORE_WAIT if on_core else _CHANNEL_WAIT, wait))
            if binding[current] < 0:
                idle = ready[current]
                break
            at, current = binding_at[current], binding[current]
        stalls = self._stalls(np.array(visits, dtype=np.int64), np.array(parts_of, dtype=np.int64), waits)
        if idle is not None:
            stalls["idle"] += idle
        return stalls, path

    def _stalls(self, visits: np.ndarray, parts_of: np.ndarray, waits: list) -> dict[str, float]:
        """The cycles by cause the walk's visits add (``__getitem__``'s parts, band parts or tail
        parts of each, as ``parts_of`` says) and its waits ((visit it follows, cause, cycles)),
        each cause's terms added in path order."""
        machine, table = self.machine, self.commands
        n_causes = len(CAUSES)
        position, cause, value = [], [], []  # the terms

        def add(mask: np.ndarray, causes: np.ndarray, values: np.ndarray) -> None:
            position.append(np.flatnonzero(mask))
            cause.append(np.broadcast_to(causes, mask.shape)[mask])
            value.append(np.broadcast_to(values, mask.shape)[mask])

        kind = np.frombuffer(table.kind, np.int8)[visits]
        compute = kind == COMPUTE
        has_band = np.zeros(len(table), dtype=bool)
        has_band[list(self.band_done)] = True
        # computes: {cause: cycles}, or {cause: cycles / bands} up to the first band and after a late input
        by_class = machine.cycles_by_class()
        class_of = machine._class_array[np.where(compute, table.column("op")[visits], 0)] if len(by_class) else 0
        cycles = np.array(by_class + [0.0], dtype=np.float64)[np.where(compute, class_of, -1)]
        bound = np.array([_CAUSE_NUMBER[BOUND_CAUSE[machine._class_cycles(k)[0][1]]] for k in range(len(by_class))]
                         + [0], dtype=np.int64)[np.where(compute, class_of, -1)]
        bands = np.asarray(machine.bands, dtype=np.float64)[visits]
        add(compute & (parts_of == _PARTS), bound, cycles)
        add(compute & ((parts_of == _TAIL) | (parts_of == _BAND) & has_band[visits]), bound, cycles / bands)
        # transfers (engine._dma's parts): overhead, latency, bandwidth and bank timing
        dma = ~compute
        store = kind == STORE
        overhead, waiting, moving_cause, bank_cause = (
            np.where(store, _CAUSE_NUMBER[DMA_CAUSES["store"][k]], _CAUSE_NUMBER[DMA_CAUSES["load"][k]]) for k in range(4))
        flowing, data_end = np.frombuffer(self.flowing, np.float64)[visits], np.frombuffer(self.data_end, np.float64)[visits]
        setup = machine.cost_column("descriptors", np.float64)[visits] * machine.dma_setup_cycles
        latency = np.full(len(visits), float(machine.dram_latency))
        addresses_left = flowing + machine.cost_column("chunks", np.float64)[visits] * self.chunk_cycles - data_end
        moving = data_end - flowing
        bank = np.zeros(len(visits))
        if self.bank_delay is not None:
            bank = np.minimum(moving, np.frombuffer(self.bank_delay, np.float64)[visits] / self.bank_channels
                              / self.ns_per_cycle)
        banked = bank > 0
        whole = dma & (parts_of == _PARTS)
        add(whole, overhead, setup + np.maximum(addresses_left, 0.0))
        add(whole, waiting, latency)
        add(whole, moving_cause, np.where(banked, moving - bank, moving))
        add(whole & banked, bank_cause, bank)
        first = dma & (parts_of == _BAND) & has_band[visits]  # (band parts: only a command with a first band has them)
        add(first, overhead, setup)
        add(first, waiting, latency)
        add(first, moving_cause, np.frombuffer(self.band, np.float64)[visits] - flowing)
        late = dma & (parts_of == _TAIL)
        add(late & (data_end > np.frombuffer(self.mark, np.float64)[visits]), moving_cause,
            data_end - np.frombuffer(self.last_start, np.float64)[visits])
        add(late & (addresses_left > 0), overhead, addresses_left)
        if waits:  # (after the parts of the visit before them: of other causes, their order is no matter)
            at, wait_cause, wait = map(np.array, zip(*waits))
            position.append(at.astype(np.int64) - 1)
            cause.append(wait_cause.astype(np.int64))
            value.append(wait.astype(np.float64))
        position, cause, value = np.concatenate(position), np.concatenate(cause), np.concatenate(value)
        order = np.argsort(position, kind="stable")
        cause, value = cause[order], value[order]
        stalls = dict.fromkeys(CAUSES, 0.0)
        for k in np.unique(cause).tolist():
            stalls[CAUSES[k]] = _in_order(0.0, value[cause == k])
        return stalls

    def __getitem__(self, i: int) -> CommandTiming:
        machine, table = self.machine, self.commands  # columns: no Command is made
        kind = table.kind[i]
        tail = self.tail[i]
        band_at = tail_at = None
        band_parts, tail_parts = {}, {}
        if kind == COMPUTE:
            (cycles, bound), _ = machine._class_cycles(machine._class_of[table.op[i]])
            cause = BOUND_CAUSE[bound]
            parts = {cause: cycles}
            bands = self.bands[i]
            if i in self.band_done:
                band_at, band_parts = self._held(self.band, i, BAND_INT), {cause: cycles / bands}
            if tail >= 0:
                tail_at, tail_parts = tail, {cause: cycles / bands}
        else:
            flowing, data_end = self.flowing[i], self.data_end[i]
            overhead, waiting, moving_cause, _ = DMA_CAUSES[KINDS[kind]]
            cost = table.cost[i]
            setup = cost.descriptors * machine.dma_setup_cycles
            latency = machine.dram_latency
            addresses_left = flowing + cost.chunks * self.chunk_cycles - data_end  # (transfer_cost.address_cycles)
            moving = data_end - flowing
            parts = {overhead: setup + max(addresses_left, 0.0), waiting: latency, moving_cause: moving}
            if self.bank_delay is not None:  # the data phase's share lost to bank timing (engine._dma)
                bank = min(moving, self.bank_delay[i] / self.bank_channels / self.ns_per_cycle)
                if bank > 0:
                    parts[moving_cause] = moving - bank
                    parts[DMA_CAUSES[KINDS[kind]][3]] = bank
            if i in self.band_done:
                band_at = self._held(self.band, i, BAND_INT)
                band_parts = {overhead: setup, waiting: latency, moving_cause: band_at - flowing}
            if tail >= 0:
                tail_at = tail
                if data_end > self.mark[i]:
                    tail_parts = {moving_cause: data_end - self.last_start[i]}
                if addresses_left > 0:
                    tail_parts[overhead] = addresses_left
        # (``_held`` and ``lane`` inlined: the critical path asks this of every command on it)
        binding, mask = self.binding[i], self.int_mask[i]
        ready, start, end = self.ready[i], self.starts.values[i], self.ends.values[i]
        lane = self.lanes[table.queue_names[table.queue[i]]][1] if kind == COMPUTE else machine.dma_lanes[self.channel_of[i]]
        return new_timing(int(ready) if mask & READY_INT else ready, int(start) if mask & START_INT else start,
                          int(end) if mask & END_INT else end, None if binding < 0 else binding,
                          AT_NAMES[self.binding_at[i]], parts, lane, band_at, band_parts, tail_at, tail_parts)


class RecordedTimeline(Sequence):
    """The compiled run's timeline: ``timeline[k]`` is the k-th ``TimelineEntry`` in the
    report's order (by start, queue, then name; ties kept in completion order, as the SimPy
    run's ``sorted`` keeps them), made when asked from the run's columns, equal to the entry
    the SimPy run records.

    Why not the entries: a run of a million commands would hold a million entries (~130
    bytes each with their command number) and sort them by a key of three fields; here the
    order is one integer array, sorted by NumPy. Pickled, it is the tuple of its entries."""

    __slots__ = ("order", "commands", "ops", "tensors", "starts", "ends", "lanes", "dma_lanes", "channel_of")

    def __init__(self, timings: RecordedTimings, completion: np.ndarray, queues: dict, dma_lanes: list) -> None:
        self.commands, self.ops, self.tensors = timings.commands, timings.ops, timings.tensors
        self.starts, self.ends, self.lanes = timings.starts, timings.ends, timings.lanes
        self.channel_of, self.dma_lanes = timings.channel_of, list(dma_lanes)
        self.order = self._sorted(completion, queues)

    def _name(self, i: int) -> str:
        table = self.commands
        return record_name(self.ops, table.op[i]) if table.kind[i] == COMPUTE else record_name(self.tensors,
                                                                                                table.tensor[i])

    def _sorted(self, completion: np.ndarray, queues: dict) -> np.ndarray:
        """The commands in the report's order: by (start, queue) with NumPy's stable sort from
        the completion order, then each run of equal (start, queue) by name, stably."""
        start = self.starts.array() if isinstance(self.starts, HeldTimes) else np.array(self.starts, dtype=np.float64)
        if len(start) and np.abs(start).max() >= 2.0 ** 53:  # floats would merge distinct int starts
            key = lambda i: (self.starts[i], self.commands.queue_of(i), self._name(i))  # noqa: E731
            return np.array(sorted(completion.tolist(), key=key), dtype=np.int64)
        rank = np.zeros(len(start), dtype=np.int64)
        for k, name in enumerate(sorted(queues)):
            rank[np.asarray(queues[name], dtype=np.int64)] = k
        order = completion[np.lexsort((rank[completion], start[completion]))]
        s, q = start[order], rank[order]
        tied = np.flatnonzero((s[1:] == s[:-1]) & (q[1:] == q[:-1]))  # order[k] ties with order[k + 1]
        if len(tied):
            ends = np.flatnonzero(np.diff(tied) != 1)  # runs of consecutive ties
            for first, last in zip(np.r_[tied[0], tied[ends + 1]].tolist(), (np.r_[tied[ends], tied[-1]] + 2).tolist()):
                order[first:last] = sorted(order[first:last].tolist(), key=self._name)
        return order

    def _entry(self, i: int) -> TimelineEntry:
        table = self.commands
        queue, kind = table.queue_of(i), table.kind[i]
        if kind == COMPUTE:
            op = self.ops[table.op[i]]
            return new_entry(queue, op.name, op.kind, table.step[i], self.starts[i], self.ends[i], None, 0,
                             self.lanes[queue][1], i)
        return new_entry(queue, record_name(self.tensors, table.tensor[i]), KINDS[kind], table.step[i], self.starts[i],
                         self.ends[i], table.cause[i], table.nbytes[i], self.dma_lanes[self.channel_of[i]], i)

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._entry(i) for i in self.order[index].tolist()]
        return self._entry(int(self.order[index]))

    def __iter__(self):
        return map(self._entry, self.order.tolist())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None

    def __reduce__(self):
        return tuple, (tuple(self),)


def _as_held(values: np.ndarray, is_int: np.ndarray) -> list:
    """Recorded times as SimPy held them: floats, an int where ``is_int`` is set (``HeldTimes``)."""
    found = values.tolist()
    for k in np.flatnonzero(is_int).tolist():
        found[k] = int(found[k])
    return found


def _packed(column: np.ndarray) -> array:
    """A float64 or int64 column as an ``array.array`` of the same bytes."""
    packed = array("d" if column.dtype == np.float64 else "q")
    packed.frombytes(column.astype(np.float64 if column.dtype == np.float64 else np.int64, copy=False).tobytes())
    return packed


#: ``CommandTiming.binding_at`` of each binding_at code.
AT_NAMES = ("end", "start", "band")

#: Which parts a visit of the critical path adds (``RecordedTimings.walk_critical_path``): its own,
#: those up to its first band, those after a late streamed input.
_PARTS, _BAND, _TAIL = 0, 1, 2
_CAUSE_NUMBER = {name: k for k, name in enumerate(CAUSES)}
_CORE_WAIT, _CHANNEL_WAIT = _CAUSE_NUMBER["core_wait"], _CAUSE_NUMBER["dma_channel_wait"]


def _in_order(total: float, terms: np.ndarray) -> float:
    """``total`` plus each of ``terms`` in turn, as a loop of ``+=`` adds them (NumPy's
    accumulate adds one term at a time: the same float to the last bit, where a sum would
    pair them)."""
    return float(np.add.accumulate(np.concatenate(([total], terms)))[-1]) if len(terms) else total


def _account(machine, order: np.ndarray, durations: np.ndarray) -> None:
    """What the SimPy run adds up as each command completes (``engine._Machine._account_compute``
    and ``_account_transfer``), added in the same completion order ``order``: each total's
    terms as a column over the completed commands (0 where a command adds nothing to it), summed
    one term at a time (``_in_order``). ``durations``: each command's end - start."""
    program, graph, hw = machine.program, machine.graph, machine.hw
    table, ops = program.commands, graph.ops
    kind = table.column("kind")[order].astype(np.int64)
    at = {k: np.flatnonzero(kind == code) for k, code in KIND_CODES.items()}  # positions in the order
    # computes: one set of figures per (queue, cost class), the SimPy run's per op
    computes = order[at["compute"]]
    op_ids = table.column("op")[computes]
    classes = machine._class_array[op_ids]
    queue = table.column("queue")[computes].astype(np.int64)  # codes into table.queue_names
    pairs, first, pair_of = np.unique(queue * (len(machine._class_ops) + 1) + classes, return_index=True,
                                      return_inverse=True)
    lanes = {q: machine._cores_of(q)[0] for q in program.queues if q.startswith("stream")}
    terms: dict[tuple, np.ndarray] = {}  # (total, key) -> its terms over the completed commands

    def column(total: str, key) -> np.ndarray:
        found = terms.get((total, key))
        if found is None:
            found = terms[total, key] = np.zeros(len(order))
        return found

    for k, p in enumerate(first.tolist()):
        op, positions = ops[int(op_ids[p])], at["compute"][pair_of == k]
        (cycles, _), per_core = machine._op_cycles(op)
        slowest = max(per_core)  # _account_compute's figures
        for core, busy in zip(lanes[table.queue_of(int(computes[p]))], per_core):
            column("core", core)[positions] = cycles * busy / slowest if slowest > 0 else cycles
        for key, pj in machine._op_energy(op).items():
            column("energy", key)[positions] = pj
        for key, pj in machine._levels[machine._class_of[op.id]].items():
            column("level", key)[positions] = pj
    names, = op_fields(graph, "name")
    machine.energy_by_op.update(zip(map(names.__getitem__, op_ids.tolist()),
                                    map(machine._energy_total.__getitem__, classes.tolist())))
    # transfers (_account_transfer)
    e = hw.energy
    nbytes = table.column("nbytes")
    bus_bytes, descriptors = machine.cost_column("bus_bytes"), machine.cost_column("descriptors")
    for kind_name, dram, scratchpad, byte in (("load", "dram_read", "scratchpad_write", machine.scratchpad_write_byte),
                                              ("store", "dram_write", "scratchpad_read", machine.scratchpad_read_byte)):
        positions = at[kind_name]
        moved = order[positions]
        if not machine.banked:  # (with banks, the device's energy is charged at the end: engine._account_transfer)
            column("energy", dram)[positions] = (
                bus_bytes[moved] * (e.dram_read_byte if kind_name == "load" else e.dram_write_byte))
        column("energy", scratchpad)[positions] = nbytes[moved] * byte
        column("energy", "dma_descriptor")[positions] = descriptors[moved] * e.dma_descriptor
    channel = np.zeros(len(order))
    channel[kind != KIND_CODES["compute"]] = durations[order][kind != KIND_CODES["compute"]]
    machine.channel_busy = _in_order(machine.channel_busy, channel)
    for (total, key), column_terms in terms.items():
        if total == "core":
            machine.core_busy[key] = _in_order(machine.core_busy[key], column_terms)
        elif total == "energy":
            machine.energy[key] = _in_order(machine.energy[key], column_terms)
        else:
            machine.energy_by_level[key] = _in_order(machine.energy_by_level[key], column_terms)


def record(machine, result) -> float:
    """Fill ``machine`` (an ``engine._Machine``) with what the compiled run recorded, as its
    SimPy run fills it: command timings (``RecordedTimings``), the timeline, energy and busy
    times (summed in completion order), samples, peak occupancy, events; returns the run's
    cycles."""
    (now, now_int, n_processed, ready, start, end, band, binding, binding_at, tail, flowing, data_end, mark,
     last_start, channel_of, int_mask, order, occ_time, occ_used, occ_int, dram_time, dram_flows, dram_int,
     peak, busy_cycles, dma_steps, banked) = result
    program = machine.program
    _account(machine, order, end - start)
    bank_delay = machine.dram.adopt_compiled(banked) if machine.banked else None
    timings = machine.timings = RecordedTimings(machine, ready, start, end, band, int_mask, binding, binding_at, tail,
                                                flowing, data_end, mark, last_start, channel_of, bank_delay)
    machine.timeline = RecordedTimeline(timings, order, program.queues, machine.dma_lanes)
    machine.occupancy = Pairs(occ_time, occ_used, occ_int)
    machine.dram_samples = Pairs(dram_time, dram_flows, dram_int)
    machine.scratchpad.peak = int(peak)
    machine.dma_steps = dma_steps
    if not machine.banked:  # (a banked run's: adopt_compiled)
        machine.dram.busy_cycles = float(busy_cycles)
    machine.env.processed = int(n_processed) + 1  # and the empty queue's step, as SimPy's run counts it
    return int(now) if now_int else float(now)
