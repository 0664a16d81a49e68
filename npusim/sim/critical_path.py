"""Where the time went: every cycle of the critical path attributed to a cause.

The simulator records, for every command, when it became *ready* (its queue let it go and
every semaphore it waits for was signalled), which command made it ready last (its *binding*
predecessor, and whether at that command's end — a semaphore or the compute queue's previous
op — or at its start — a DMA queue issues in order, so a transfer cannot be issued before the
previous one got its channel), when it *started* (it got its core or DMA channel) and how its
own time splits into parts.

The critical path is walked back from the command that ends last: its own parts, then the
wait for its resource (``start - ready``), then its binding predecessor, and so on until
cycle 0. A transfer that waited for a DMA channel started when the transfer before it on that
channel ended: the path goes on through that transfer (its bandwidth, DRAM latency and bank
timing are then what held the channel), and ``dma_channel_wait`` keeps only waits no
transfer's end explains. Each cycle of the run lands in exactly one cause, so the causes add
up to the latency.

Ops stream (``npusim.sim.engine``): a compute may start when the first band of a load it
reads has arrived, and a store when the first band of the op it stores has been computed.
Such a predecessor binds *at its band*: only its parts up to that band (``band_parts``) lie
on the path. A command held up at its end by a streamed predecessor that finished late
(its last band arrived after the command had done everything else) has a *tail*: the path
takes its parts after that arrival (``tail_parts``), then the predecessor at its end.

=========================  ==============================================================
cause                      cycles of
=========================  ==============================================================
array                      a compute bound by the PE array (fold formula)
vector                     a compute on the vector unit
scratchpad_bandwidth       a compute bound by scratchpad bytes per cycle
scratchpad_port            an unrolled array's compute bound by the scratchpad's port, which
                           serves one operand's word a cycle however wide (ZigZag's ports):
                           more bytes per cycle do not help, local levels or ports do
load_overhead              descriptor setup of a load, and address generation beyond its data
load_latency               the DRAM latency of a load
load_bandwidth             a load's bursts moving at the bandwidth DRAM granted it
store_overhead / _latency / _bandwidth  the same for stores (write-backs, spills)
load_bank_timing / store_bank_timing  dram.model: banks only: the part of the data phase the
                           banks' ACT/PRE/refresh and bank-group (tCCD_L) timing added beyond
                           the bus (npusim.dram.model)
dma_channel_wait           a ready transfer waiting for a free DMA channel (beyond the end of
                           the transfer before it on the channel, which the path follows)
core_wait                  a ready op waiting for a core another stream holds
idle                       nothing on the path (before the first command can start)
=========================  ==============================================================

A load on the critical path means the compute after it waited for data: its parts say
whether bandwidth, DMA overhead or DRAM latency is to blame. A load whose binding
predecessor is a compute waited for free space (the op using its region had to finish).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from npusim.graph.model import op_fields, op_origins
from npusim.plan.command_table import KIND_CODES
from npusim.util.fast_init import twin_constructor

CAUSES = ("array", "vector", "scratchpad_bandwidth", "scratchpad_port", "load_overhead", "load_latency", "load_bandwidth",
          "store_overhead", "store_latency", "store_bandwidth", "load_bank_timing", "store_bank_timing", "dma_channel_wait", "core_wait", "idle")


@dataclass(slots=True)
class CommandTiming:
    """What the simulator recorded about one command."""

    ready: float = 0.0
    start: float = 0.0
    end: float = 0.0
    binding: int | None = None  # the command that made it ready last
    binding_at: str = "end"  # bound at that command's end, start (DMA issue order) or first band
    parts: dict = field(default_factory=dict)  # cause -> cycles of the command itself
    lane: str = ""
    band: float | None = None  # when its first band was ready (a streamed load or compute)
    band_parts: dict = field(default_factory=dict)  # its parts up to then
    tail: int | None = None  # a streamed predecessor whose late end held up this command's end
    tail_parts: dict = field(default_factory=dict)  # its parts after that predecessor ended


def critical_path(timings: list[CommandTiming]) -> tuple[dict[str, float], list[int]]:
    """(cycles by cause along the critical path, the path's command ids, last first)."""
    stalls = dict.fromkeys(CAUSES, 0.0)
    if not timings:
        return stalls, []
    ends = _column(timings, "ends", "end")
    if hasattr(ends, "last_of_largest"):  # a recorded column (compiled_loop.HeldTimes)
        current = ends.last_of_largest()
    else:
        current = len(ends) - 1 - ends[::-1].index(max(ends))  # the last command of those ending last
    guard = 3 * len(timings) + 2
    walk = getattr(timings, "walk_critical_path", None)  # the compiled run's: this walk over its columns
    found = walk(current, guard) if walk is not None else None
    if found is not None:
        return found
    at = "end"
    path = []
    holders = None  # made at the first transfer on the path that waited for its channel
    while current is not None and guard:
        guard -= 1
        t = timings[current]
        path.append(current)
        if at == "end" and t.tail is not None:
            for cause, cycles in t.tail_parts.items():
                stalls[cause] += cycles
            current = t.tail
            continue
        own = t.parts if at == "end" else t.band_parts if at == "band" else None  # (none from its start)
        if own:
            for cause, cycles in own.items():
                stalls[cause] += cycles
        wait = t.start - t.ready
        if wait > 0:
            on_core = t.lane.startswith("core")
            if not on_core:
                if holders is None:
                    holders = _ChannelHolders(timings)
                held_by = holders.ended_at(t.lane, t.start)
                if held_by is not None and held_by != current:  # the channel's previous transfer: on the path
                    current, at = held_by, "end"
                    continue
            stalls["core_wait" if on_core else "dma_channel_wait"] += wait
        if t.binding is None:
            stalls["idle"] += t.ready
            break
        at = t.binding_at
        current = t.binding
    return stalls, path


class _ChannelHolders:
    """Which transfer ended on a DMA channel at a given time: per channel, a dict of the
    transfers' ends (columns of the compiled run's timings, ``channel_lanes``, or read from
    each CommandTiming), each to the last of the transfers ending then. A dict, not a search
    in the sorted ends: a long path asks it of thousands of transfers (18,000 on a Llama
    decode step)."""

    def __init__(self, timings) -> None:
        columns = getattr(timings, "channel_lanes", None)
        if columns is not None:
            names, lane_of, ends = columns()
        else:
            codes: dict[str, int] = {}
            lane_of = np.array([-1 if t.lane.startswith("core") or not t.lane else codes.setdefault(t.lane, len(codes))
                                for t in timings], dtype=np.int64)
            ends = np.array([float(t.end) for t in timings])
            names = list(codes)
        self.by_lane = _by_lane(names, lane_of, ends)

    def ended_at(self, lane: str, time: float) -> int | None:
        """The transfer on ``lane`` that ended at ``time`` (the last of them), or None."""
        ends = self.by_lane.get(lane)
        return None if ends is None else ends.get(float(time))


def _by_lane(names: list[str], lane_of: np.ndarray, ends: np.ndarray) -> dict[str, dict[float, int]]:
    """Per DMA lane, its transfers' ends, each to the last transfer ending then."""
    by_lane = {}
    for c, name in enumerate(names):
        ids = np.flatnonzero(lane_of == c)  # in id order: of equal ends the last is written last
        by_lane[name] = dict(zip(ends[ids].tolist(), ids.tolist()))
    return by_lane


def channel_holders(timings) -> dict[str, dict[float, int]]:
    """``_ChannelHolders`` of a compiled run's timings as the dict of its lanes (their
    ``channel_lanes``): lane -> end -> the last transfer ending then."""
    return _by_lane(*timings.channel_lanes())


def _column(timings, column: str, field: str) -> list:
    """One field of every command's timing: the column itself when ``timings`` keeps its
    fields as columns (``npusim.sim.compiled_loop.RecordedTimings``: no CommandTiming is made
    for the question), else read from each CommandTiming."""
    found = getattr(timings, column, None)
    return found if found is not None else [getattr(t, field) for t in timings]


def _by_start(ids: np.ndarray, starts) -> list[int]:
    """``ids`` sorted by their starts, stably: by the recorded float column when ``starts`` is
    one (``compiled_loop.HeldTimes``; an int start sorts as its float while below 2**53)."""
    if hasattr(starts, "array"):
        values = starts.array()[ids]
        if not len(values) or np.abs(values).max() < 2.0 ** 53:
            return ids[np.argsort(values, kind="stable")].tolist()
    return sorted(ids.tolist(), key=starts.__getitem__)


def _waited_for_space(program, timing: CommandTiming, load: int) -> bool:
    """Whether command ``load`` (whose timing is ``timing``) started late because its scratchpad
    region was still in use (its binding predecessor touched the previous occupant: an op, or
    a transfer other than the store that put its data in DRAM), not for bandwidth or for its data."""
    binding = timing.binding
    if binding is None or timing.binding_at == "start":
        return False
    table = program.commands
    kind = table.kind_of(binding)
    if kind == "compute":
        return True
    loaded = table.tensor[load]
    return kind == "store" and table.tensor[binding] not in (loaded,) + program.graph.tensors[loaded].sources


def _bank_bound(timing: CommandTiming, kind: str) -> bool:
    """Whether a transfer's data phase lost at least a quarter of its time to DRAM bank timing
    (ACT/PRE/refresh beyond the bus; ``dram.model: banks`` only)."""
    bank = timing.parts.get(f"{kind}_bank_timing", 0.0)
    return bank > 0 and bank >= 0.25 * (bank + timing.parts.get(f"{kind}_bandwidth", 0.0))


@dataclass(frozen=True, slots=True, eq=False)
class BreakdownRow(Mapping):
    """One row of ``op_breakdown``: a read-only mapping of its columns, as a dict of them
    would be (``row["op"]``, ``row.get``, ``row.items()``, equal to that dict: ``Mapping``'s
    equality, not a dataclass's).

    Why not a dict: a tiled run has a row per tile, 100,000s of them; a dict of 15 keys takes
    ~650 bytes, these slots ~150."""

    op: str
    of: str
    kind: str
    step: int
    queue: str
    lane: str
    start: float
    end: float
    cycles: float
    bound: str
    stall_cycles: float
    stalled_on: str
    bytes_in: int
    bytes_out: int
    macs: int

    def __getitem__(self, key: str):
        if key not in _ROW_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(_ROW_COLUMNS)

    def __len__(self) -> int:
        return len(_ROW_COLUMNS)

    def __repr__(self) -> str:
        return repr(dict(self))


_ROW_COLUMNS = tuple(BreakdownRow.__dataclass_fields__)  # in order: a row iterates as its dict would
_ROW_KEYS = frozenset(_ROW_COLUMNS)
#: ``BreakdownRow(...)`` with every column given, made faster (``npusim.util.fast_init``).
new_row = twin_constructor(BreakdownRow)


def _compute_row(t: CommandTiming) -> tuple:
    """(start, end, binding, lane, bound cause) of a compute's timing: what ``op_breakdown``
    reads of it (a timings store may give these without making the CommandTimings:
    ``compute_rows``)."""
    return t.start, t.end, t.binding, t.lane, next(iter(t.parts), "")


def _per_op_sums(sizes: np.ndarray, pointers: np.ndarray, tensors: np.ndarray) -> list[int]:
    """Per op, the sum of ``sizes`` over its tensors (a CSR list: op i's are
    ``tensors[pointers[i]:pointers[i + 1]]``), for every op at once."""
    running = np.concatenate(([0], np.cumsum(sizes[tensors], dtype=np.int64)))
    return (running[pointers[1:]] - running[pointers[:-1]]).tolist()


def op_breakdown(program, timings: list[CommandTiming]) -> list[BreakdownRow]:
    """One row per compute command: when it ran, what bound it, and how long its stream sat
    idle before it and why (the kind of command it waited for last; ``load (space)``: a load
    that itself waited for its scratchpad region to be released; ``load (DRAM banks)``: a load
    whose data phase lost a quarter or more to DRAM bank timing, ``dram.model: banks``)."""
    graph = program.graph
    arrays = graph.arrays
    bytes_in = _per_op_sums(arrays.tensor_size, arrays.op_input_ptr, arrays.op_input_idx)  # distinct inputs
    bytes_out = _per_op_sums(arrays.tensor_size, arrays.op_output_ptr, arrays.op_output_idx)
    rows = []
    previous_end: dict[str, float] = {}
    starts = _column(timings, "starts", "start")
    table = program.commands
    computes = np.flatnonzero(table.column("kind") == KIND_CODES["compute"])
    computes = _by_start(computes, starts)
    rows_of = getattr(timings, "compute_rows", None)  # the compiled run's columns, no CommandTiming made
    found = rows_of(computes) if rows_of is not None else (_compute_row(timings[i]) for i in computes)
    op_of, step_of, queue_of, queue_names, queue_code = table.op, table.step, table.queue_of, table.queue_names, table.queue
    names, kinds, macs, gemms = op_fields(graph, "name", "kind", "macs", "gemm")  # (no Op made per row)
    origins = op_origins(graph)
    for i, (start, end, binding, lane, bound) in zip(computes, found):
        op_id, queue = op_of[i], queue_names[queue_code[i]]
        idle = max(start - previous_end.get(queue, 0.0), 0.0)
        previous_end[queue] = end
        waited_for = ""
        if idle > 0 and binding is not None:
            kind = table.kind_of(binding)
            waited_for = kind if queue_of(binding) != queue else "queue"
            if kind == "compute":
                waited_for = "semaphore"
            else:
                timing = timings[binding]
                if kind == "load" and _waited_for_space(program, timing, binding):
                    waited_for = "load (space)"
                elif _bank_bound(timing, kind):
                    waited_for = f"{kind} (DRAM banks)"
        rows.append(new_row(
            names[op_id], origins[op_id], kinds[op_id],
            step_of[i], queue, lane, start, end, end - start, bound, idle, waited_for,
            bytes_in[op_id], bytes_out[op_id],
            macs[op_id] if gemms[op_id] is not None else 0,
        ))
    return rows
