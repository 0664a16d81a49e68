"""The DRAM the simulator drives with ``dram.model: banks``: DMA bursts at their planned addresses.

``BankedDram`` has the interface of ``npusim.sim.bandwidth.SharedBandwidth`` (``transfer``
returns a SimPy event that fires when the bytes have moved; ``busy_cycles``), but a transfer
is the device accesses of its DMA command's chunks (``access_addresses``: every DMA burst its
chunks touch, at its physical address), and the controller of ``npusim.dram.controller``
times them on the banks, ranks and channels of ``dram.device``.

How a run is advanced: every transfer is one *flow* of the controller. When a transfer
starts, the controller is brought to the present (``run(now)``: every access whose column
command falls before now is committed) and the flow is added; then a copy of the controller
runs ahead until the first flow in flight would complete, and one SimPy timeout is set for
that moment. A transfer starting before then invalidates the prediction (the new flow
competes for the banks from its start); otherwise, at that moment, the controller is brought
there and the finished flows' events fire. So a descriptor's thousands of accesses cost a few
kernel calls and one SimPy event, and the flows of several DMA channels interleave in the
banks as the controller issues them. Controller time is in ns, SimPy's in core cycles.

Addresses: with a DRAM layout (``plan.dram``, an off-chip planner) a DMA's chunks are where
the plan put them. Without one, every buffer starts at 0 in the plan, so the model places
the buffers itself, as a bump allocator that never reuses memory would (the DRAM of SCALE-Sim
and ONNXim): in the order the program first moves them, each aligned to the DMA burst
(``bump_layout``; ``dram.placement: pages`` puts each on a row boundary, consecutive ones in
different banks; ``rows`` keeps the bump order but lets no buffer cross more row boundaries
than its size needs and starts buffers moved in the same step in far-apart banks,
``row_layout``).

Latency: the device's own latency (tRCD, tCL, the burst) is in the controller's timing, so
of ``dram.latency`` (what one isolated read costs end to end) only the part beyond an
isolated read of the device — interconnect, controller front end, PHY — is added as a fixed
latency (``front_end_ns``), and an isolated read costs ``dram.latency`` in both models (a
``dram.latency`` below the device's own isolated read cannot be met: the front end adds nothing
and the read takes the device's tRCD + tCL + burst).

Energy (``energy_pj``), from the controller's counts and the device's per-operation energies
(``npusim.dram.presets.device_energy``, Micron TN-41-01 / DRAMPower):
``activate`` = activations x E_act, ``read``/``write`` = accesses x E_rd/E_wr, ``refresh`` =
refreshes owed over the run x E_ref per rank (HBM3's stack IDs: each refreshed by the REFab of
their channel; ``refreshes`` counts those commands), ``background`` = per rank, time with a row open
x P(IDD3N) + the rest x P(IDD2N) (power-down at IDD3P/IDD2P when ``powerdown_after`` is set),
for every rank of every channel.
"""

from __future__ import annotations

import itertools
import math
from array import array
from dataclasses import replace

import numpy as np

from npusim.dram.controller import Controller, ControllerConfig, queue_depths, timings
from npusim.dram.kernel import access_addresses, view_chunks
from npusim.dram.mapping import MAX_CHANNELS, check_own, parse_mapping
from npusim.dram.presets import PRESETS, default_mapping, device_energy
from npusim.plan.command_table import KIND_CODES
from npusim.graph.model import buffer_names, tensor_view_getter
from npusim.plan.dram import buffer_of
from npusim.errors import SimulationError
from npusim.util.env_knobs import memory_limit
from npusim.util.units import format_bytes

#: Column commands a channel may issue before the first flow could end, when the model starts
#: looking for that exact end (``BankedDram._predict``; the compiled loop's ``TAIL``).
TAIL = 4

STAT_KEYS = ("row_hits", "row_misses", "row_conflicts", "row_hit_rate", "activations", "refreshes",
             "reads", "writes", "avg_read_latency_ns", "bank_delay_ns")


def channels_for(hw) -> int:
    """``dram.channels``, or (0) the power of two of channels ``dram.bandwidth`` needs at the
    device's nominal rate (at least 1)."""
    d = hw.dram
    if d.channels:
        return d.channels
    device = PRESETS[d.device]
    need = max(1.0, d.bandwidth / device.channel_bandwidth)
    return 1 << int(np.ceil(np.log2(need) - 1e-9))


def write_watermarks(write_queue: int) -> tuple[int, int]:
    """The write drain of a write queue of ``write_queue`` entries: writes are served from more
    than 0.8 of it pending until fewer than 0.2 are (Ramulator 2's ``wr_high_watermark`` and
    ``wr_low_watermark``, the controller ``benchmarks/dram_validation.py`` holds npusim to), as
    the kernel's ``write_high`` (pending writes that start the drain) and ``write_low`` (that end it)."""
    return min(write_queue, 4 * write_queue // 5 + 1), max(0, (write_queue + 4) // 5 - 1)


#: The most rows per bank ``sized_to`` gives a part (the controller's pool holds rows as int32).
MAX_ROWS = 1 << 30


def sized_to(device, capacity: int, channels: int):
    """``device`` with as many rows per bank (a power of two, at least the preset's) as
    ``capacity`` bytes over ``channels`` channels need: a plan's DRAM addresses up to
    ``dram.capacity`` decode to rows of their own instead of wrapping onto the preset's
    (the presets are the densities their sources give; edge-npu's 4 GiB is twice its two
    LPDDR4 channels'). A denser part of the same timing: tRFC stays the preset's."""
    per_row = channels * device.ranks * device.banks * device.page_bytes
    rows = min(1 << max(-(-int(capacity) // per_row) - 1, 0).bit_length(), MAX_ROWS)
    return device if rows <= device.rows else replace(device, rows=rows)


def controller_config(hw) -> ControllerConfig:
    """The controller of ``hw.dram``: pins at the rate that gives ``dram.bandwidth``, a part
    with the rows ``dram.capacity`` needs (``sized_to``)."""
    d = hw.dram
    channels = channels_for(hw)
    device = sized_to(PRESETS[d.device], d.capacity, channels)
    rate = d.bandwidth / (channels * device.bus_bits / 8) / 1e6  # MT/s per pin
    wq = d.write_queue
    high, low = write_watermarks(wq)
    return ControllerConfig(device=device, channels=channels, ranks=device.ranks,
                            mapping=d.mapping or default_mapping(device), policy=d.page_policy,
                            scheduler=d.scheduler, row_hit_cap=d.row_hit_cap, read_queue=d.read_queue,
                            write_queue=wq, write_high=high, write_low=low, data_rate=rate,
                            bank_queue=d.bank_queue,
                            powerdown_after=d.powerdown_after * 1e9 if d.powerdown_after > 0 else -1.0)


def device_power_w(hw) -> tuple[float, float]:
    """(W at the peak read bandwidth, W idle: every rank in precharged standby and refreshing
    every tREFI) of the part ``dram.model: banks`` times, from its currents (``device_energy``;
    a run charges the same as ``dram_read``, ``dram_background`` and ``dram_refresh``): what
    ``npusim info`` shows for the DRAM instead of ``energy.dram_read_byte``, which banks leaves unused."""
    cfg = controller_config(hw)
    e = device_energy(cfg.device)
    peak = hw.dram.bandwidth / cfg.device.access_bytes * e.read * 1e-12
    idle = cfg.channels * cfg.ranks * (e.precharged_standby + e.refresh * 1e-12 / (cfg.device.tREFI * 1e-9))
    return peak, idle


#: Bytes per flow slot and channel of the controller's flow table (next, end and accesses left
#: of each flow in each channel: three int64, and a margin for what else grows with them)
FLOW_CHANNEL_BYTES = 32


def check_controller_memory(hw, cfg: ControllerConfig) -> None:
    """Refuse a controller whose flow table (``flow_slots`` x channels, ``FLOW_CHANNEL_BYTES``
    each) needs more memory than a simulation may use (``memory_limit``): every queue entry
    may hold another flow's access, so 512 channels with 64-deep bank queues asked 19 GB and
    the kernel killed the run (a fuzzing audit)."""
    limit = memory_limit()
    need = flow_slots(hw, cfg) * cfg.channels * FLOW_CHANNEL_BYTES
    if limit is not None and need > limit:
        depth = "dram.write_queue" + (" and dram.bank_queue" if cfg.bank_queue > 0 else "")
        raise SimulationError(f"dram.model: banks with {cfg.channels} channels and these queues needs about "
                              f"{format_bytes(need)} for its controller, more than the {format_bytes(limit)} available "
                              f"(NPUSIM_MEMORY_LIMIT, or the machine's free memory): fewer dram.channels, shallower "
                              f"{depth}, or dram.model: bandwidth")


def flow_slots(hw, cfg: ControllerConfig) -> int:
    """Flows a controller can hold at once: one per DMA channel in flight, and the write flows
    done (posted) whose accesses are still queued, one per write-queue entry at most (with
    per-bank command queues, those entries too)."""
    return hw.dma.channels + cfg.channels * queue_depths(cfg)[1]


#: The fields of ``dram`` only ``dram.model: banks`` reads (the bandwidth model ignores them)
BANKS_ONLY_FIELDS = ("dram.device", "dram.channels", "dram.mapping", "dram.page_policy", "dram.scheduler",
                     "dram.row_hit_cap", "dram.placement", "dram.read_queue", "dram.write_queue", "dram.bank_queue",
                     "dram.powerdown_after")


def unused_banks_settings(keys, model: str) -> str:
    """A note when ``keys`` (settings the user gave) name banks-only fields but the run uses the
    bandwidth model: they would be dropped silently otherwise. Empty when there is nothing to say."""
    unused = [k for k in dict.fromkeys(keys) if k in BANKS_ONLY_FIELDS]
    if not unused or model == "banks":
        return ""
    verb, them = ("applies", "it") if len(unused) == 1 else ("apply", "them")
    return (f"{', '.join(unused)} only {verb} with dram.model: banks (--set dram.model=banks); this run uses the "
            f"bandwidth model, which does not read {them}")


def check_dram(hw):
    """None, or (dotted field, value, what was expected) for the loader's one-line error."""
    d = hw.dram
    try:
        check_own("dram.channels", d.channels)
    except ValueError as error:
        return "dram.channels", d.channels, str(error)
    device = PRESETS[d.device]
    if channels_for(hw) > MAX_CHANNELS:
        return ("dram.bandwidth", d.bandwidth, f"needs {channels_for(hw):,} channels of {d.device}; the banks model "
                                               f"takes at most {MAX_CHANNELS}: pick a faster dram.device")
    try:
        parse_mapping(d.mapping or default_mapping(device), device, channels_for(hw), device.ranks)
    except ValueError as error:
        return "dram.mapping", d.mapping, str(error)
    rate = controller_config(hw).rate
    if not 0.25 * device.data_rate <= rate <= 2.0 * device.data_rate:
        channels = channels_for(hw)
        low, high = d.bandwidth / (2.0 * device.data_rate * 1e6 * device.bus_bits / 8), \
            d.bandwidth / (0.25 * device.data_rate * 1e6 * device.bus_bits / 8)
        fits = [2 ** k for k in range(0, 12) if low <= 2 ** k <= high]  # channel counts within 0.25x-2x
        fix = (f"dram.channels {fits[0]}" + (f" to {fits[-1]}" if len(fits) > 1 else "") if fits
               else _other_devices(d.bandwidth))
        where = ("dram.channels", d.channels) if d.channels else ("dram.bandwidth", d.bandwidth)
        pins = f"{rate:.0f}" if rate >= 10 else f"{rate:.2g}"  # (0.2 MT/s, not 0)
        return (*where, f"{d.bandwidth / 1e9:g} GB/s needs {pins} MT/s per pin on {channels} channel(s) of "
                        f"{d.device} (nominal {device.data_rate:.0f}), outside 0.25x-2x of nominal: use {fix}")
    return None


def _other_devices(bandwidth: float) -> str:
    """What to do when no channel count of the configured part gives ``bandwidth`` (B/s) within
    0.25x-2x of its nominal rate: the parts some power of two of whose channels do, or none."""
    def fits(dev) -> bool:
        return any(0.25 * dev.channel_bandwidth <= bandwidth / 2 ** k <= 2.0 * dev.channel_bandwidth
                   for k in range(0, MAX_CHANNELS.bit_length()))
    names = [name for name, dev in PRESETS.items() if fits(dev)]
    if names:
        return "another dram.device: " + ", ".join(names)
    slowest = min(PRESETS.values(), key=lambda dev: dev.channel_bandwidth)
    return (f"dram.model: bandwidth (no part runs that slowly; the slowest, {slowest.name}, needs at least "
            f"{0.25 * slowest.channel_bandwidth / 1e9:g} GB/s)")


def front_end_ns(hw, cfg: ControllerConfig | None = None) -> float:
    """The fixed latency outside the device: ``dram.latency`` minus an isolated read's
    tRCD + tCL + tBurst (module docstring), at least 0."""
    t = timings(cfg or controller_config(hw))
    return max(0.0, hw.dram.latency * 1e9 - (t["tRCD"] + t["tCL"] + t["tBurst"]))


def first_moves(program):
    """(buffer name, bytes it spans) of every buffer the program's DMAs move, in the order of
    each one's first DMA command. A buffer moved through views (tiles) spans its whole base."""
    for name, extent, _ in _first_moves(program):
        yield name, extent


def _first_moves(program):
    """``first_moves`` with the step of each buffer's first DMA."""
    seen: set[str] = set()
    graph, table = program.graph, program.commands
    view_extents = None
    # the first load or store of each tensor, in command order, read from the table's columns
    transfers = np.flatnonzero(table.column("kind") != KIND_CODES["compute"])
    _, first = np.unique(table.column("tensor")[transfers], return_index=True)
    steps, tensor_of = table.step, table.tensor
    buffers = buffer_names(graph)  # (no Tensor made per transfer: npusim.graph.columns)
    view_of = tensor_view_getter(graph)
    for c in transfers[np.sort(first)].tolist():
        t = tensor_of[c]
        name = buffers[t]
        if name in seen:
            continue
        seen.add(name)
        if view_of(t) is None:
            extent = _view_end(table.dram[c])
        elif name in graph.tensor_by_name:
            extent = graph.tensor_by_name[name].size  # (once per buffer)
        else:  # a base known only through its views (buffer_size)
            if view_extents is None:
                view_extents = _view_extents(graph)
            extent = view_extents.get(name, 0)
        yield name, max(extent, 1), steps[c]


def bump_layout(program, stripe: int = 64, banks: int = 1) -> dict[str, int]:
    """Buffer name -> base address when the plan has no DRAM layout: buffers in the order the
    program first moves them, each after the previous one.

    ``stripe`` = 64 (``dram.placement: bump``): 64 B aligned, as a bump allocator. With
    ``pages``, ``stripe`` is the bytes one row of a bank covers across the channels (page x
    channels under a mapping with the bank above the columns) and ``banks`` the banks: each
    buffer starts on a row boundary, in the bank after the previous buffer's first bank, so
    the tensors an op streams together (its inputs, weights and outputs, moved one after the
    other) start their rows in different banks instead of fighting over one."""
    base: dict[str, int] = {}
    top = 0
    for name, extent in first_moves(program):
        if banks > 1:  # next row boundary whose bank is the one after the previous buffer's
            want = (len(base) % banks)
            top = (top + stripe - 1) // stripe * stripe
            while (top // stripe) % banks != want:
                top += stripe
        base[name] = top
        top = (top + extent + stripe - 1) // stripe * stripe if banks > 1 else (top + extent + 63) // 64 * 64
    return base


def row_stripe(mapping) -> int:
    """Bytes of the smallest aligned address block made of whole rows: everything below the
    row-selecting fields (Ro, Ra, Bg or Ba above the columns), i.e. the column bits, the
    fields interleaved below them (channels, bank groups of ``RoRaBaCoBgCh``) and the access
    offset. Under the default ``RoRaBaCoCh`` of ``edge-npu`` (2 KiB pages, 2 channels) 4 KiB:
    one row of one bank in each channel. A buffer inside one such block opens one row per
    bank it touches; crossing a block boundary opens another set."""
    return 1 << (mapping.offset_bits + mapping.shift["Co"] + mapping.bits["Co"])


def bank_cycle(mapping) -> int:
    """Consecutive row blocks (``row_stripe``) before the row index changes: the blocks of one
    row of every bank (and rank, bank group, channel) mapped between the columns and the row
    -- 8 under ``RoRaBaCoCh`` with 8 banks. A sequential stream walks them in turn; 1 when the
    row sits right above the columns (no other bank to stagger into)."""
    return 1 << max(0, mapping.shift["Ro"] - mapping.shift["Co"] - mapping.bits["Co"])


def moved_together(program) -> dict[str, set[str]]:
    """Buffer name -> the other buffers a DMA of the same step moves. An op's inputs, weights
    and results are moved in its step, one after the other on the DMA queues, and with two
    DMA channels or more (and a load and a store queue) they stream at the same time."""
    by_step: dict[int, set[str]] = {}
    buffers = buffer_names(program.graph)
    for cmd in program.commands.transfers():
        by_step.setdefault(cmd.step, set()).add(buffers[cmd.tensor])
    partners: dict[str, set[str]] = {}
    for names in by_step.values():
        for name in names:
            partners.setdefault(name, set()).update(names)
    for name, others in partners.items():
        others.discard(name)
    return partners


def row_layout(program, stripe: int, cycle: int = 1) -> dict[str, int]:
    """Buffer name -> base address for ``dram.placement: rows``: the bump placement (first-move
    order, 64 B aligned) with two rules, each removing activations ``bump`` pays for.

    1. *No needless boundary.* A buffer of ``size`` bytes touches no more row blocks
       (``row_stripe``: ``stripe`` bytes) than ``ceil(size / stripe)``: if starting at the bump
       pointer would cross one boundary more, it starts at the next block boundary. A buffer
       that fits in what is left of the current block still shares that block's rows with the
       buffers placed just before it (first moved just before it, usually with it: open rows,
       hits, as with ``bump``), and every DMA of a buffer opens the fewest rows its bytes
       allow, which pays on every re-load of a weight, retrieve of a spill and tile of one
       (under ``bump`` a buffer crosses one boundary more with a chance of about
       ``(size mod stripe) / stripe``, and then every DMA of it opens an extra row per channel).
    2. *Streams moved together start in different banks.* A sequential stream walks the
       ``cycle`` blocks of a row group (``bank_cycle``: one per bank) in turn, so two streams
       in flight at once that start in the same bank walk the banks in step, on different
       rows, and evict each other's rows (a 64 KiB weight and its bias right after it, under
       ``bump``: the bias's block is in the weight's first bank). A buffer that starts a new
       block is moved on by up to ``cycle - 1`` blocks so that its first block's bank is as far
       as the cycle allows (the smallest cyclic distance, largest) from the first banks of the
       buffers already placed that it is moved together with (``moved_together``: the same
       step); ties take the fewest blocks of padding. A buffer packed into a block already
       open stays there: it shares that block's row instead of fighting for the bank.

    The padding is under ``cycle`` blocks per buffer (address space only: DRAM capacity is not
    modelled as scarce here). What neither rule can remove, from the activations of ``bump``
    named by ``benchmarks/dram_row_causes.py`` (figures in ``hw_configs/README.md``): a
    command's first touch of a row, reopenings after an all-bank refresh closed every row, and
    reopenings of rows another tile of the same tensor had opened (a tensor stored in one
    tiling and loaded in another reads part of every row per tile: only the tiler changes that).
    ``pages`` staggers every buffer by one bank from the previous one and aligns every buffer
    to a row boundary: it spreads small buffers over half-empty rows and loses more row
    sharing than it gains."""
    partners = moved_together(program) if cycle > 1 else {}
    base: dict[str, int] = {}
    phase: dict[str, int] = {}  # buffer -> position of its first block in the bank cycle
    top = 0
    for name, size, _ in _first_moves(program):
        fewest = -(-size // stripe)
        start = top
        if top % stripe + size > fewest * stripe:  # would cross one boundary more than it needs
            start = -(-top // stripe) * stripe
        taken = [phase[p] for p in partners.get(name, ()) if p in phase]
        if taken and start % stripe == 0:  # a new block: its bank away from the streams moved with it
            start += _farthest(start // stripe % cycle, taken, cycle) * stripe
        base[name] = start
        phase[name] = start // stripe % cycle
        top = (start + size + 63) // 64 * 64
    return base


def _farthest(first: int, taken: list[int], cycle: int) -> int:
    """Blocks to move on (0 .. cycle - 1) so that position ``first + k`` of the bank cycle is as
    far as possible from every position in ``taken`` (cyclic distance); ties: the fewest."""
    def spread(k: int) -> int:
        p = (first + k) % cycle
        return min(min((p - q) % cycle, (q - p) % cycle) for q in taken)
    return max(range(cycle), key=lambda k: (spread(k), -k))


def rounded_to_hundredths(values: np.ndarray) -> list[float]:
    """``[round(v, 2) for v in values]`` for all at once: Python's ``round`` rounds the exact
    value of ``v`` half to even at two decimals, then takes the float nearest; ``rint(v * 100)
    / 100`` does the same whenever ``v * 100``'s own rounding (under 1e-9 below 1e7) cannot
    cross a half (NumPy's ``round`` is that formula everywhere). Values within 1e-6 of a half,
    1e7 or more, or not finite are left to ``round``, one at a time (a DRAM run samples its
    row hit rate 74,000 times on a Llama decode step)."""
    scaled = values * 100.0
    found = (np.rint(scaled) / 100.0).tolist()
    with np.errstate(invalid="ignore"):
        doubtful = ~(np.abs(values) < 1e7) | (np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6)
    for k in np.flatnonzero(doubtful).tolist():
        found[k] = round(float(values[k]), 2)
    return found


def _view_end(view) -> int:
    last = sum((n - 1) * s for n, s in zip(view.shape, view.strides))
    return (last + 1) * view.itemsize


def _view_extents(graph) -> dict[str, int]:
    """``buffer_size`` of every base known through views, in one pass over the tensors:
    ``buffer_size`` scans every tensor of the graph for each base it is asked (11 ms per base
    of a tiled transformer's 250,000 commands: 7.4 s for its 688 tiled bases)."""
    if hasattr(graph.tensors, "view_extents"):  # columns (npusim.graph.columns)
        return graph.tensors.view_extents()
    ends: dict[str, int] = {}
    get = ends.get
    spans: dict[tuple, int] = {}  # (shape, strides) -> the last element's offset from the first
    for t in graph.tensors:
        v = t.view
        if v is not None:
            key = (v.shape, v.strides)  # (41,000 tiles of a decode step have 25 of them)
            span = spans.get(key)
            if span is None:
                span = spans[key] = sum((n - 1) * s for n, s in zip(v.shape, v.strides))
            end = (v.offset + span + 1) * t.itemsize
            if end > get(v.base, 0):
                ends[v.base] = end
    return ends


class BankedDram:
    """DRAM with banks and rows for the SimPy model (module docstring)."""

    def __init__(self, env, hw, program=None, backend: str = "compiled") -> None:
        self.env = env
        self.hw = hw
        self.cfg = controller_config(hw)
        check_controller_memory(hw, self.cfg)
        self.ctrl = Controller(self.cfg, backend)
        self.ns_per_cycle = 1e9 / hw.clock
        self.front_end_cycles = front_end_ns(hw, self.cfg) / self.ns_per_cycle
        self.burst = hw.dma.burst_bytes
        self.access = self.cfg.device.access_bytes
        self.program = program
        self.bump = None
        if program is not None and not program.dram_planned:
            if hw.dram.placement == "rows":
                self.bump = row_layout(program, row_stripe(self.ctrl.mapping), bank_cycle(self.ctrl.mapping))
            elif hw.dram.placement == "pages":
                m = self.ctrl.mapping
                stripe = self.cfg.device.page_bytes * self.cfg.channels  # a row of one bank, every channel
                self.bump = bump_layout(program, stripe, self.cfg.device.banks)
                if m.shift["Ba"] < m.shift["Co"]:  # banks below the columns: a row boundary is per access
                    self.bump = bump_layout(program)
            else:
                self.bump = bump_layout(program)
        self._events: dict[int, object] = {}
        self._cursor: dict[int, int] = {}   # command id -> accesses already issued
        self._moved: dict[int, float] = {}  # command id -> bus bytes asked for so far
        self._addresses: dict[int, np.ndarray] = {}
        self._prepared: dict[int, tuple] = {}
        self._generation = 0
        self._now_ns = 0.0
        self._ahead = None
        self.delay_ns: dict[int, float] = {}  # command id -> bank delay of its flows (ns, summed)
        self._flow_cmd: dict[int, int] = {}
        self._draining: list[int] = []  # write flows done whose accesses are still queued (posted writes)
        self._finished = False  # every access issued (``finish``)
        self.busy_cycles = 0.0
        self.hit_samples: list[tuple[float, float]] = []  # (cycle, row hit rate % so far): a Perfetto counter

    # -- addresses ---------------------------------------------------------------------------
    def addresses(self, cmd) -> np.ndarray:
        """Device access addresses of a DMA command, in issue order (``kernel.access_addresses``)."""
        found = self._addresses.get(cmd.id)
        if found is None:
            view = cmd.dram  # its chunks (view.chunks(), without building the tuples)
            offsets, sizes = view_chunks(np.array(view.shape, dtype=np.int64), np.array(view.strides, dtype=np.int64),
                                         view.itemsize)
            shift = view.address
            if self.bump is not None:
                shift += self.bump[buffer_of(self.program.graph.tensors[cmd.tensor])]
            found = access_addresses(offsets + shift, sizes, self.burst, self.access)
            self._addresses[cmd.id] = found
        return found

    # -- the SharedBandwidth interface -------------------------------------------------------
    def transfer(self, nbytes: float, priority: float = 0.0, cmd=None):
        """An event that fires when the next ``nbytes`` of ``cmd``'s bus bytes have moved (its
        accesses in proportion: a band of a banded transfer is a share of its accesses)."""
        done = self.env.event()
        addresses = self.addresses(cmd)
        total = max(cmd.cost.bus_bytes, 1)
        lo = self._cursor.get(cmd.id, 0)
        moved = self._moved.get(cmd.id, 0.0) + max(nbytes, 0.0)
        self._moved[cmd.id] = moved
        hi = len(addresses) if moved >= total - 1e-6 else min(len(addresses), int(round(moved / total * len(addresses))))
        self._cursor[cmd.id] = hi
        if hi <= lo:
            done.succeed()
            return done
        now = self._bring_to(self.env.now * self.ns_per_cycle)
        self._release_drained()
        prepared = self._prepared.get(cmd.id)
        if prepared is None:  # decoded once for the command's bands
            prepared = self._prepared[cmd.id] = self.ctrl.prepare(addresses)
        fid = self.ctrl.add_prepared(prepared, lo, hi, cmd.kind == "store", priority, now)
        self._events[fid] = done
        self._flow_cmd[fid] = cmd.id
        self._predict()
        return done

    def _predict(self) -> None:
        """Set the next SimPy timeout of the DRAM: the completion of the first flow in flight.

        While some channel must issue more than ``TAIL`` column commands before any flow can
        end (``commands_before_end``), none ends before the time those commands take at the
        full bus;
        the controller is advanced to that moment (``_advance``: it only ever moves forward,
        nothing is redone) and asked again. Once a flow is in its tail, a copy of the
        controller runs ahead to the first completion (the exact end, data included), kept
        for the timeout to adopt (``_wake``); a transfer starting before then advances the
        controller itself to its start (``_bring_to``) and the copy is dropped."""
        self._generation += 1
        if not self._events:
            return
        now = self._now_ns
        live = list(self._events)
        t = self.ctrl.t
        channels = self.cfg.channels
        fewest = self.ctrl.commands_before_end(live)  # (not the draining writes: done already)
        generation = self._generation
        if fewest > TAIL:
            when = now + (fewest - TAIL) * max(t["tBurst"], t["tCCD_S"])
            delay = max(0.0, when / self.ns_per_cycle - self.env.now)
            self.env.timeout(delay).callbacks.append(lambda _e: self._advance(generation, when))
            return
        state = self.ctrl.copy(reuse=True)
        when = min((state.end(f) for f in live if state.done(f)), default=math.inf)
        while state.run(when if when < math.inf else 1e300, until_complete=True):
            when = min(when, min(state.end(f) for f in live if state.done(f)))
        self._ahead = (when, state)
        delay = max(0.0, when / self.ns_per_cycle - self.env.now)
        # URGENT: the flows it completes are done before the moment's other events run, whatever
        # else was scheduled for that moment since -- else the order of two transfers starting
        # then (and their flows' ids, the scheduler's tie-break) would follow where the
        # look-ahead began, which TAIL and the bound move
        from simpy.events import URGENT, Event  # lazy: hardware loading imports this module, not SimPy

        wake = Event(self.env)
        wake._ok, wake._value = True, None
        wake.callbacks.append(lambda _e: self._wake(generation))
        self.env.schedule(wake, URGENT, delay)

    def _release_drained(self) -> None:
        """Release the write flows done (posted) whose accesses have all been issued since, in
        the order they were done: a flow's slot is kept while the controller still holds its
        accesses."""
        if self._draining:
            for fid in [f for f in self._draining if self.ctrl.remaining(f) == 0]:
                self.ctrl.release(fid)
            self._draining = [f for f in self._draining if self.ctrl.remaining(f) > 0]

    def finish(self) -> None:
        """Issue the posted writes the controller still holds when the program ends, so that
        the counts, the energy and the utilisation include them (``banks_result`` does the same
        in the compiled loop)."""
        if not self._finished:
            self._finished = True
            self.ctrl.run(math.inf)

    def _advance(self, generation: int, when: float) -> None:
        if generation != self._generation:
            return
        self._bring_to(when)
        self._predict()

    def _bring_to(self, now: float) -> float:
        """The controller brought to ``now`` ns (no later than the predicted completion); the
        controller's present. SimPy's clock counts cycles, so a moment the model set in ns comes
        back as cycles x ns per cycle, which can fall an ulp before it (58255.000799999994 for
        58255.0008): such a moment is the present, the controller never goes back."""
        now = max(now, self._now_ns)
        self.ctrl.run(now)
        self._now_ns = now
        return now

    def _wake(self, generation: int) -> None:
        if generation != self._generation:
            return
        when, self.ctrl = self._ahead
        self._now_ns = when
        for fid in [f for f in self._events if self.ctrl.done(f) and self.ctrl.end(f) <= when + 1e-9]:
            cid = self._flow_cmd.pop(fid)
            if self._cursor.get(cid) == len(self._addresses.get(cid, ())):  # its last band: drop its caches
                self._prepared.pop(cid, None)
            self.delay_ns[cid] = self.delay_ns.get(cid, 0.0) + self.ctrl.delay(fid)
            self._draining.append(fid)  # (released below once its accesses are issued)
            self._events.pop(fid).succeed()
        self._release_drained()
        self.busy_cycles = float(self.ctrl.channel_busy().sum()) / self.cfg.channels / self.ns_per_cycle
        c = self.ctrl.counts()
        n = c["hits"] + c["misses"] + c["conflicts"]
        if n:
            self.hit_samples.append((self.env.now, round(100.0 * c["hits"] / n, 2)))
        self._predict()

    # -- the compiled event loop ---------------------------------------------------------------
    def compiled_arguments(self, kind: np.ndarray, store: int) -> tuple:
        """What the compiled event loop (``npusim/native/event_loop.c``, its ``Banks``) needs to
        be this model: the controller's timings, geometry and packed state (``Controller._pack``,
        with room for a flow per DMA channel: no more are in flight), every DMA command's DRAM
        view (shape, strides, item size, and its byte address with the placement's shift, as
        ``addresses`` takes them; the loop decodes its accesses itself, at its first band), the
        address mapping's fields, and the constants of ``_predict``. ``kind``: every command's
        kind code, ``store`` the code of a store."""
        ctrl, program, m = self.ctrl, self.program, self.ctrl.mapping
        ctrl._ensure_flow(flow_slots(self.hw, self.cfg))  # the lowest free slot is taken: no more are needed
        n = len(kind)
        table = program.commands
        buffers = buffer_names(program.graph) if self.bump is not None else None
        shapes, strides = [()] * n, [()] * n
        itemsize, base = [0] * n, [0] * n  # (lists filled, then arrays: an item set into numpy costs more)
        tensor_of, bump = table.column("tensor").tolist(), self.bump
        for c, view in enumerate(table.dram):
            if view is None:  # (not a transfer)
                continue
            shapes[c], strides[c] = view.shape, view.strides
            itemsize[c] = view.itemsize
            base[c] = view.address if bump is None else view.address + bump[buffers[tensor_of[c]]]
        itemsize, base = np.array(itemsize, np.int64), np.array(base, np.int64)
        view_ptr = np.zeros(n + 1, np.int64)
        np.cumsum([len(s) for s in shapes], out=view_ptr[1:])
        flat = lambda rows: np.fromiter(itertools.chain.from_iterable(rows), np.int64, int(view_ptr[-1]))  # noqa: E731
        ctrl.prepare(np.zeros(0, np.int64))  # (sets ctrl._decode: the mapping's shifts and masks)
        shifts, masks = ctrl._decode
        d = self.cfg.device
        depth, write_depth = queue_depths(self.cfg)
        ints = np.array([m.offset_bits, m.rows, self.cfg.ranks, d.bankgroups, d.banks_per_group, self.burst,
                         self.access, depth, ctrl.compact_from, write_depth], np.int64)
        floats = np.array([self.ns_per_cycle, max(ctrl.t["tBurst"], ctrl.t["tCCD_S"])])
        fbuf, ibuf = ctrl._buffers
        return (ctrl.T, ctrl.G, ctrl._offsets, fbuf, ibuf, view_ptr, flat(shapes), flat(strides), itemsize, base,
                (kind == store).astype(np.int64), shifts, masks, ints, floats)

    def adopt_compiled(self, result) -> np.ndarray:
        """Take the compiled loop's results (``banks_result`` in event_loop.c; the controller's
        final state is in ``self.ctrl``'s buffers already) as ``_wake`` would have left them:
        ``busy_cycles``, ``hit_samples``; returns each command's bank delay (ns; ``delay_ns``)."""
        delay, hit_time, hit_hits, hit_total, last_busy, woke = result
        self._finished = True  # (the loop issued the writes still queued: banks_result)
        if woke:
            busy = np.frombuffer(last_busy, np.float64).copy()  # the channel_busy() of the last wake
            self.busy_cycles = float(busy.sum()) / self.cfg.channels / self.ns_per_cycle
        rate = 100.0 * np.frombuffer(hit_hits, np.int64) / np.frombuffer(hit_total, np.int64)  # (_wake's operations)
        self.hit_samples = list(zip(array("d", hit_time).tolist(), rounded_to_hundredths(rate)))
        return np.frombuffer(delay, np.float64)

    # -- statistics ----------------------------------------------------------------------------
    def bank_cycles(self, cmd) -> float:
        """Cycles of ``cmd``'s data phase lost to bank timing (ACT/PRE/refresh beyond the bus),
        its flows' bank delays spread over the channels."""
        return self.delay_ns.get(cmd.id, 0.0) / self.cfg.channels / self.ns_per_cycle

    def stats(self, end_cycles: float) -> dict:
        """Row statistics, utilisation and the energy split at the end of a run of ``end_cycles``."""
        self.finish()
        end = end_cycles * self.ns_per_cycle
        c = self.ctrl.counts()
        hits, misses, conflicts = c["hits"], c["misses"], c["conflicts"]
        accesses = max(hits + misses + conflicts, 1)
        read_lat, write_lat, delay = self.ctrl.latency_sums()
        chan = self.ctrl.channel_busy() / max(end, 1e-9)
        bank = self.ctrl.bank_busy() / max(end, 1e-9)
        e = device_energy(self.cfg.device)
        ranks = self.ctrl.rank_times(end)
        refreshes = self.ctrl.refreshes_until(end)
        # a rank's time: a row open (``active``) or not; asleep with one open is active power-down
        # (within ``active``), asleep with none precharged power-down (outside it)
        active, pd_act, pd_pre = ranks["active"], ranks["pd_active"], ranks["pd_precharged"]
        standby = np.maximum(active - pd_act, 0.0)
        precharged = np.maximum(end - active - pd_pre, 0.0)
        background = float(np.sum(standby * e.active_standby + precharged * e.precharged_standby
                                  + pd_act * e.active_powerdown + pd_pre * e.precharged_powerdown)) * 1e3  # W x ns = nJ
        energy = {"dram_activate": c["acts"] * e.activate, "dram_read": c["reads"] * e.read,
                  "dram_write": c["writes"] * e.write, "dram_refresh": refreshes * e.refresh,
                  "dram_background": background}
        return {
            "device": self.cfg.device.name, "channels": self.cfg.channels, "rate_mts": self.cfg.rate,
            "mapping": self.cfg.mapping,
            "page_policy": self.cfg.policy, "row_hits": hits, "row_misses": misses, "row_conflicts": conflicts,
            "row_hit_rate": hits / accesses, "activations": c["acts"], "precharges": c["pres"],
            # REF commands: HBM3's stack IDs refresh together, one REFab for the ranks of a channel
            "refreshes": refreshes // self.cfg.ranks if self.cfg.device.stack_ids else refreshes,
            "reads": c["reads"], "writes": c["writes"],
            "avg_read_latency_ns": read_lat / max(c["reads"], 1),
            "avg_write_latency_ns": write_lat / max(c["writes"], 1), "bank_delay_ns": delay,
            "channel_utilisation": [round(float(x), 4) for x in chan],
            "bank_utilisation": [round(float(x), 4) for x in bank],
            "energy_pj": energy,
        }
