"""The DRAM controller of one device, driven by flows of accesses: the kernel's state and its pool.

``Controller`` keeps the bank, rank and channel state of ``npusim.dram.kernel`` and the
accesses of the flows in flight (one flow per transfer or band: its access addresses, whether
it writes, its priority and start time). ``add_flow`` decodes a flow's addresses with the
address mapping and appends them, grouped by channel, to a pool; ``run(stop)`` advances the
controller to ``stop`` (ns) with the C kernel, or with the pure-Python reference
(``backend="reference"``, ``npusim.dram.reference``) for tests; ``copy`` gives an
independent controller to look ahead with (``npusim.dram.model`` predicts completions so).
Flows are slots reused once released; the pool drops released flows' accesses when they
outnumber the live ones.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from npusim.dram import kernel as K
from npusim.dram.mapping import FIELDS, Mapping, parse_mapping
from npusim.dram.presets import DramDevice
from npusim.dram.reference import ReferenceController

#: The arrays the kernel updates (``copy`` duplicates them; the accesses are shared).
_STATE = ("bank_f", "bank_i", "rank_f", "rank_i", "rank_bg_f", "chan_f", "chan_i", "sq", "sqa", "tq", "tqa", "bank_n",
          "stats_i", "stats_f", "flow_write", "flow_prio", "flow_start", "flow_remaining", "flow_end", "flow_delay",
          "fc_next", "fc_end", "flow_first", "flow_last", "bank_other", "cmd_bus", "flow_waiting", "fc_left",
          "flow_data_end")

#: The pool's rows (int32: npusim/native/bank_core.h, Ctl).
_POOL_ROWS = ("bank", "row", "flow")

POLICIES = {"open": K.OPEN, "closed": K.CLOSED, "adaptive": K.ADAPTIVE}
SCHEDULERS = ("frfcfs", "fcfs")


@dataclass(frozen=True)
class ControllerConfig:
    device: DramDevice
    channels: int
    ranks: int
    mapping: str
    policy: str = "open"
    scheduler: str = "frfcfs"
    row_hit_cap: int = 16
    read_queue: int = 32
    write_queue: int = 32
    write_high: int = 24
    write_low: int = 8
    data_rate: float = 0.0          # MT/s per pin; 0: the device's nominal rate
    powerdown_after: float = -1.0   # ns of idleness before power-down; < 0: never
    bank_queue: int = 0             # > 0: per-bank command queues of this depth behind the read/write queues

    @property
    def rate(self) -> float:
        return self.data_rate if self.data_rate > 0 else self.device.data_rate


def timings(cfg: ControllerConfig) -> dict[str, float]:
    """The kernel's timing parameters (ns) for ``cfg``.

    The device's analogue timings (tRCD, tRP, tRAS, tRC, tCL, tCWL, tRRD, tFAW, tWR, tWTR,
    tRTP, tREFI, tRFC, tXP) are kept in ns at any data rate (a faster speed bin of a part
    has about the same ns figures); those counted in clocks of the command bus (tCCD_S,
    tCCD_L) scale with the clock: ``tCK x nominal rate / rate``. tBurst = BL / rate;
    tRTW = tCL + tBurst + 2 tCK - tCWL (Ramulator 2's rule); tRTRS = 1 tCK (DRAMsim3's
    tRTRS of 1 nCK); tCCD_L_WR, where the device has none, = tCCD_L; tCMD, a tick of the command bus, = tCK / its ticks per clock."""
    d = cfg.device
    scale = d.data_rate / cfg.rate
    tck = d.tCK * scale
    burst = d.burst_length / (cfg.rate * 1e-3)
    return {
        "tRCD": d.tRCD, "tRP": d.tRP, "tRAS": d.tRAS, "tRC": d.tRC, "tCL": d.tCL, "tCWL": d.tCWL,
        "tBurst": burst, "tCCD_S": d.tCCD_S * scale, "tCCD_L": d.tCCD_L * scale, "tRRD_S": d.tRRD_S,
        "tRRD_L": d.tRRD_L, "tFAW": d.tFAW, "tWR": d.tWR, "tWTR_S": d.tWTR_S, "tWTR_L": d.tWTR_L,
        "tRTP": d.tRTP, "tRTW": max(d.tCL + burst + 2 * tck - d.tCWL, 0.0), "tREFI": d.tREFI, "tRFC": d.tRFC,
        "tRTRS": tck, "tXP": d.tXP, "tPD": max(cfg.powerdown_after, 0.0),
        "tCMD": tck / d.command_bus.ticks_per_ck, "tCCD_L_WR": (d.tCCD_L_WR or d.tCCD_L) * scale,
    }


def queue_depths(cfg: ControllerConfig) -> tuple[int, int]:
    """The most accesses a channel holds admitted without issuing a column command: in either
    queue (the larger), and in the write queue; with per-bank command queues, those too (the
    transaction queues' entries move on to them without a command)."""
    banked = cfg.ranks * cfg.device.banks * cfg.bank_queue if cfg.bank_queue > 0 else 0
    return max(cfg.read_queue, cfg.write_queue) + banked, cfg.write_queue + banked


def first_refresh_order(total_ranks: int, ranks: int, stack_ids: bool) -> np.ndarray:
    """Rank k first refreshes at tREFI x (1 + order[k] / total_ranks): ranks staggered, or with
    stack IDs (refreshed together) their channels."""
    k = np.arange(total_ranks)
    return k // ranks * ranks if stack_ids else k


class Controller:
    """One device's controller state and flows (module docstring)."""

    #: Pool size (accesses) from which released flows' accesses are dropped (``_compact_if_needed``).
    compact_from = 65536

    def __init__(self, cfg: ControllerConfig, backend: str = "compiled") -> None:
        if backend not in ("compiled", "reference"):
            raise ValueError(f"backend {backend!r}: expected 'compiled' or 'reference'")
        d = cfg.device
        self.cfg = cfg
        self.backend = backend
        self.mapping: Mapping = parse_mapping(cfg.mapping, d, cfg.channels, cfg.ranks)
        self.t = timings(cfg)
        self.T = np.array([self.t[k] for k in K.TIMING_FIELDS], dtype=np.float64)
        high = min(max(cfg.write_high, 1), cfg.write_queue)
        low = min(max(cfg.write_low, 0), high - 1)
        # the scheduler's queues: the read/write queues, or with per-bank command queues, those
        # (every bank's, of a channel), the read/write queues then being transaction queues before them
        bus = d.command_bus
        sched_r = sched_w = cfg.ranks * d.banks * cfg.bank_queue
        if cfg.bank_queue <= 0:
            sched_r, sched_w = cfg.read_queue, cfg.write_queue
        self.G = np.array([cfg.channels, cfg.ranks, d.bankgroups, d.banks_per_group, POLICIES[cfg.policy],
                           1 if cfg.scheduler == "frfcfs" else 0, cfg.row_hit_cap, sched_r, sched_w,
                           high, low, 1 if cfg.powerdown_after >= 0 else 0, max(cfg.bank_queue, 0), cfg.read_queue,
                           cfg.write_queue, bus.pre, bus.act, bus.cas, int(bus.dual), int(bus.split_act),
                           int(d.stack_ids)],
                          dtype=np.int64)
        self.n_ranks = cfg.channels * cfg.ranks
        self.n_banks = self.n_ranks * d.banks
        self._free: list[int] = []
        self._live: set[int] = set()
        self._used = 0  # accesses in the pool that belong to live flows
        self._slots = 0
        self._decode = None  # (shifts, masks) of the mapping's fields, for kernel.decode_grouped
        if backend == "reference":
            self.ref = ReferenceController(self.t, cfg.channels, cfg.ranks, d.bankgroups, d.banks_per_group,
                                           POLICIES[cfg.policy], cfg.scheduler == "frfcfs", cfg.row_hit_cap,
                                           cfg.read_queue, cfg.write_queue, high, low, cfg.powerdown_after >= 0,
                                           max(cfg.bank_queue, 0),
                                           (bus.pre, bus.act, bus.cas, bus.dual, bus.split_act), d.stack_ids)
            return
        C, R, BG = cfg.channels, self.n_ranks, d.bankgroups
        self.bank_f = np.zeros((self.n_banks, 4))
        self.bank_i = np.zeros((self.n_banks, 5), dtype=np.int64)
        self.bank_i[:, K.B_OPEN_ROW] = -1
        # global bank b = (global rank x bank groups + bank group) x banks per group + bank (decode_grouped)
        self.bank_i[:, K.B_RANK] = np.arange(self.n_banks) // d.banks
        self.bank_i[:, K.B_BG] = np.arange(self.n_banks) // d.banks_per_group % BG
        self.rank_f = np.zeros((R, K.R_FAW + 4))
        self.rank_f[:, K.R_LAST_ACT] = K.NEG
        self.rank_f[:, K.R_FAW:] = K.NEG
        self.rank_f[:, K.R_NEXT_REF] = self.t["tREFI"] * (1.0 + first_refresh_order(R, cfg.ranks, d.stack_ids) / R)
        self.rank_i = np.zeros((R, 3), dtype=np.int64)
        self.rank_bg_f = np.full((R, BG, 3), K.NEG)
        self.chan_f = np.zeros((C, 7))
        self.chan_f[:, [K.C_LAST_RD, K.C_LAST_WR, K.C_LAST_CAS, K.C_WRITE_ACK, K.C_PRESENT]] = K.NEG
        self.chan_i = np.zeros((C, K.CHAN_I_COLUMNS), dtype=np.int64)
        self.chan_i[:, K.C_LAST_RANK] = -1
        self.chan_i[:, K.C_RR_LAST] = -1
        # queue d (0 reads, 1 writes) of channel c is sq[d, c] (a ring of G[G_RQ + d] entries), the
        # transaction queue before it tq[d, c] (G[G_RT + d] slots, empty, every slot free: the
        # layout is in npusim.dram.kernel); arrivals in sqa, tqa
        self.sq = np.zeros((2, C, max(sched_r, sched_w)), dtype=np.int64)
        self.sqa = np.zeros((2, C, max(sched_r, sched_w)))
        front = max(cfg.read_queue, cfg.write_queue) if cfg.bank_queue > 0 else 1
        self.tq = np.full((2, C, front, 5), -1, dtype=np.int64)
        for d, depth in enumerate((cfg.read_queue, cfg.write_queue)):
            if cfg.bank_queue > 0:
                self.tq[d, :, :depth - 1, K.T_NEXT] = np.arange(1, depth)
        self.chan_i[:, [K.C_RT_HEAD, K.C_WT_HEAD, K.C_T_NEW, K.C_T_NEW_W, K.C_T_FREED, K.C_T_FREED_W, K.C_T_TAIL,
                        K.C_T_TAIL_W]] = -1
        self.tqa = np.zeros((2, C, front))
        # per bank, reads and writes in its command queue, then in the transaction queues, then
        # the first and last slot of its entries there (-1: none)
        self.bank_n = np.zeros((self.n_banks, 8), dtype=np.int64)
        self.bank_n[:, 4:] = -1
        # per bank, entries of the scheduler's read / write queue that miss its open row (the row-hit cap's question)
        self.bank_other = np.zeros((self.n_banks, 2), dtype=np.int64)
        self.cmd_bus = np.zeros((C, 2, K.CMD_STRIDE), dtype=np.int64)  # every tick free, windows from tick 0
        self.stats_i = np.zeros(7, dtype=np.int64)
        self.stats_f = np.zeros(3)
        # the pool of accesses
        self.n = 0
        if max(self.mapping.rows, self.n_banks) >= 2**31:
            raise ValueError(f"npusim: a DRAM of {self.mapping.rows} rows and {self.n_banks} banks does not fit the "
                             "controller's int32 pool (internal error)")
        self._set_pool(np.zeros((3, 1024), dtype=np.int32))
        cap = 16
        self.flow_write = np.zeros(cap, dtype=np.int64)
        self.flow_prio = np.zeros(cap)
        self.flow_start = np.zeros(cap)
        self.flow_remaining = np.zeros(cap, dtype=np.int64)  # accesses not yet issued
        self.flow_waiting = np.zeros(cap, dtype=np.int64)    # accesses not yet admitted
        self.flow_end = np.zeros(cap)
        self.flow_delay = np.zeros(cap)
        self.flow_data_end = np.zeros(cap)  # when the last of its data moved so far
        self.fc_next = np.zeros((cap, C), dtype=np.int64)
        self.fc_end = np.zeros((cap, C), dtype=np.int64)
        self.fc_left = np.zeros((cap, C), dtype=np.int64)  # per channel: accesses not yet issued
        self.flow_first = np.zeros(cap, dtype=np.int64)  # pool range of each flow's accesses
        self.flow_last = np.zeros(cap, dtype=np.int64)
        self._active = np.zeros(0, dtype=np.int64)
        # the kernel's scratch (``kernel.run``): shared by copies, never run at once
        self._scratch = (np.zeros(self.n_banks * 2 + 1, dtype=np.int64), np.zeros(self.n_banks * 2))
        self._pack()

    def _pack(self) -> None:
        """Put the state arrays (``_STATE``) in two buffers, one per dtype, each array a view:
        ``copy`` then copies two buffers instead of two dozen arrays."""
        layout, sizes = [], [0, 0]  # buffer 0: float64, 1: int64
        for name in _STATE:
            a = getattr(self, name)
            k = 0 if a.dtype == np.float64 else 1
            layout.append((name, k, sizes[k], sizes[k] + a.size, a.shape))
            sizes[k] += a.size
        buffers = [np.empty(sizes[0], dtype=np.float64), np.empty(sizes[1], dtype=np.int64)]
        for name, k, lo, hi, shape in layout:
            buffers[k][lo:hi] = getattr(self, name).ravel()
        self._layout = layout
        # where the kernel finds each array: its offset in its buffer, then the flows' capacity
        self._offsets = np.array([lo for _name, _k, lo, _hi, _shape in layout] + [len(self.flow_prio)],
                                 dtype=np.int64)
        self._buffers = buffers
        self._views()

    def _views(self) -> None:
        buffers = self._buffers
        self._views_of = {name: buffers[k][lo:hi].reshape(shape) for name, k, lo, hi, shape in self._layout}
        self.__dict__.update(self._views_of)

    def _set_pool(self, pool: np.ndarray) -> None:
        """The accesses' pool: rows bank, row, flow (``req``: a new dict of the rows, so a copy
        sharing the old one keeps it)."""
        self.pool = pool
        self.req = dict(zip(_POOL_ROWS, pool))

    # -- flows -----------------------------------------------------------------------------
    def _slot(self) -> int:
        if self._free:
            return self._free.pop(min(range(len(self._free)), key=self._free.__getitem__))
        self._slots += 1
        return self._slots - 1

    def prepare(self, addresses: np.ndarray) -> tuple:
        """The accesses at byte ``addresses`` (issue order) decoded once, for flows that are
        ranges of them (``add_prepared``): ``kernel.decode_grouped``'s global bank and row of
        every access grouped by channel, so that a flow's accesses are one
        slice per channel (the reference takes the mapping's fields)."""
        if self.backend == "reference":
            return (self.mapping.decode(addresses),)
        m, cfg, d = self.mapping, self.cfg, self.cfg.device
        if self._decode is None:
            self._decode = (np.array([m.shift[f] for f in FIELDS], dtype=np.int64),
                            np.array([(1 << m.bits[f]) - 1 if f != "Ro" else -1 for f in FIELDS], dtype=np.int64))
        shifts, masks = self._decode
        return K.decode_grouped(np.asarray(addresses, dtype=np.int64), m.offset_bits, shifts, masks, m.rows,
                                cfg.channels, cfg.ranks, d.bankgroups, d.banks_per_group)

    def add_flow(self, addresses: np.ndarray, write: bool, priority: float, start: float) -> int:
        """A new flow of accesses at byte ``addresses`` (in issue order) from ``start`` ns; its id."""
        return self.add_prepared(self.prepare(np.asarray(addresses, dtype=np.int64)), 0, len(addresses), write,
                                 priority, start)

    def add_prepared(self, prepared: tuple, lo: int, hi: int, write: bool, priority: float, start: float) -> int:
        """A new flow of the accesses ``lo:hi`` of ``prepared`` (``prepare``); its id."""
        if self.backend == "reference":
            fid = self._slot()
            self._live.add(fid)
            self.ref.add_flow(fid, {k: v[lo:hi] for k, v in prepared[0].items()}, bool(write), float(priority),
                              float(start))
            return fid
        grouped, prefix, offsets = prepared
        m = sum(prefix[:, hi].tolist()) - sum(prefix[:, lo].tolist())  # a few channels: no numpy reduction
        self._compact_if_needed(m)  # before the new flow is live: its slot may hold a released flow's range
        fid = self._slot()
        self._live.add(fid)
        self._ensure_flow(fid)
        self._ensure_requests(self.n + m)
        first = self.n
        K.add_accesses(self.pool, grouped, prefix, offsets, lo, hi, fid, first, self.fc_next, self.fc_end)
        self.fc_left[fid] = self.fc_end[fid] - self.fc_next[fid]
        self.flow_first[fid], self.flow_last[fid] = first, first + m
        self.flow_write[fid] = 1 if write else 0
        self.flow_prio[fid] = priority
        self.flow_start[fid] = start
        self.flow_remaining[fid] = m
        self.flow_waiting[fid] = m
        self.flow_end[fid] = start
        self.flow_delay[fid] = 0.0
        self.flow_data_end[fid] = 0.0
        self.n += m
        self._used += m
        self._active = np.array(sorted(self._live), dtype=np.int64)
        return fid

    def release(self, fid: int) -> None:
        """Forget a finished flow (its id may be given to a new one)."""
        self._live.discard(fid)
        self._free.append(fid)
        if self.backend == "compiled":
            self._used -= int(self.flow_last[fid] - self.flow_first[fid])
            self._active = np.array(sorted(self._live), dtype=np.int64)
            self.fc_next[fid] = self.fc_end[fid]

    def remaining(self, fid: int) -> int:
        """Accesses of the flow not yet issued."""
        return self.ref.flows[fid].remaining if self.backend == "reference" else int(self.flow_remaining[fid])

    def done(self, fid: int) -> bool:
        """Whether the flow is done: a read once its data has moved, a write once its last access
        is in the write queue (posted writes; ``npusim.dram.kernel``)."""
        if self.backend == "reference":
            f = self.ref.flows[fid]
            return f.waiting == 0 if f.write else f.remaining == 0
        return bool(self.flow_waiting[fid] == 0 if self.flow_write[fid] else self.flow_remaining[fid] == 0)

    def end(self, fid: int) -> float:
        """When the flow is done (``done``): its last read's data, or its last write's admission."""
        return self.ref.flows[fid].end if self.backend == "reference" else float(self.flow_end[fid])

    def data_end(self, fid: int) -> float:
        """When the last of the flow's data has moved (for writes: reached the device), once all
        its accesses are issued."""
        if self.backend == "reference":
            return max((r["end"] for r in self.ref.req.values() if r["flow"] == fid), default=self.end(fid))
        lo, hi = int(self.flow_first[fid]), int(self.flow_last[fid])
        return float(self.flow_data_end[fid]) if hi > lo else self.end(fid)

    def delay(self, fid: int) -> float:
        """ns the flow's column commands waited for bank timing beyond the bus (summed)."""
        return self.ref.flows[fid].delay if self.backend == "reference" else float(self.flow_delay[fid])

    @property
    def live(self) -> list[int]:
        return sorted(self._live)

    # -- running ---------------------------------------------------------------------------
    def run(self, stop: float, until_complete: bool = False) -> int:
        """Advance every channel to ``stop`` ns (``npusim.dram.kernel.run``); with
        ``until_complete`` (compiled only) stop earlier, just after the access that makes a flow
        done (returns 1 then)."""
        if self.backend == "reference":
            self.ref.run(stop)
            return 0
        fbuf, ibuf = self._buffers
        return K.run(self.T, self.G, float(stop), until_complete, fbuf, ibuf, self._offsets, self.pool, self._active,
                     *self._scratch)

    def commands_before_end(self, flows: list[int] | None = None) -> int:
        """A lower bound on the column commands one channel issues before the first of
        ``flows`` (default: every live flow) ends (``kernel.commands_before_end``)."""
        flows = self._active if flows is None else np.asarray(flows, dtype=np.int64)
        depth, write_depth = queue_depths(self.cfg)
        return int(K.commands_before_end(flows, self.fc_next, self.fc_end, self.fc_left, self.flow_prio, self.flow_write,
                                         depth,
                                         write_depth))

    def copy(self, reuse: bool = False) -> "Controller":
        """An independent controller in the same state. With ``reuse``, the copy may be the
        controller this one was last copied from or to with ``reuse`` (its buffers written over:
        the caller no longer uses it), which spares allocating state and views."""
        if self.backend == "reference":
            return copy.deepcopy(self)
        other = getattr(self, "_twin", None) if reuse else None
        if other is not None and other._twin is self and other._layout is self._layout:
            buffers, views = other._buffers, other._views_of
            other.__dict__.update(self.__dict__)
            for mine, theirs in zip(buffers, self._buffers):
                np.copyto(mine, theirs)
            other._buffers, other._views_of = buffers, views
            other.__dict__.update(views)
        else:
            other = copy.copy(self)
            other._buffers = [b.copy() for b in self._buffers]
            other._views()
        if reuse:
            self._twin, other._twin = other, self
        # the accesses themselves are shared: the kernel only reads them; a copy must not add
        # flows while the original lives on
        other._free = list(self._free)
        other._live = set(self._live)
        return other

    # -- statistics --------------------------------------------------------------------------
    def counts(self) -> dict:
        """Command and access counts so far."""
        if self.backend == "reference":
            s = dict(self.ref.stats)
            s["refreshes"] = sum(r.refreshes for r in self.ref.ranks)
            return s
        names = ("reads", "writes", "hits", "misses", "conflicts", "acts", "pres")
        s = {k: int(v) for k, v in zip(names, self.stats_i)}
        s["refreshes"] = int(self.rank_i[:, K.R_REFRESHES].sum())
        return s

    def latency_sums(self) -> tuple[float, float, float]:
        """(sum of read latencies, of write latencies, of bank delays), ns."""
        if self.backend == "reference":
            return self.ref.read_latency, self.ref.write_latency, self.ref.delay
        return float(self.stats_f[0]), float(self.stats_f[1]), float(self.stats_f[2])

    def channel_busy(self) -> np.ndarray:
        """ns each channel's data bus carried data."""
        if self.backend == "reference":
            return np.array([c.bus_busy for c in self.ref.channels])
        return self.chan_f[:, K.C_BUS_BUSY].copy()

    def bank_busy(self) -> np.ndarray:
        """ns each bank spent moving data, activating or precharging (channel, rank, bank order)."""
        if self.backend == "reference":
            return np.array([b.busy for b in self.ref.banks])
        return self.bank_f[:, K.B_BUSY].copy()

    def rank_times(self, end: float) -> dict[str, np.ndarray]:
        """Per rank, ns with a row open (standby or power-down), and in each power-down, up to ``end``."""
        if self.backend == "reference":
            rows = [(r.open_count, r.active_since, r.active_time, r.last_busy, r.pd_act, r.pd_pre, r.next_ref)
                    for r in self.ref.ranks]
        else:
            f, i = self.rank_f, self.rank_i
            rows = [(i[k, K.R_OPEN_COUNT], f[k, K.R_ACTIVE_SINCE], f[k, K.R_ACTIVE_TIME], f[k, K.R_LAST_BUSY],
                     f[k, K.R_PD_ACT], f[k, K.R_PD_PRE], f[k, K.R_NEXT_REF]) for k in range(self.n_ranks)]
        active, pd_act, pd_pre = [], [], []
        for open_count, since, act_time, last_busy, pa, pp, next_ref in rows:
            tail_open = open_count > 0
            a = act_time + (max(0.0, min(end, next_ref) - since) if tail_open else 0.0)
            if self.cfg.powerdown_after >= 0:  # idle since the last data: asleep after powerdown_after
                asleep = max(0.0, end - (last_busy + self.cfg.powerdown_after))
                if tail_open and end <= next_ref:
                    pa += asleep
                else:
                    pp += asleep
            active.append(min(a, end))
            pd_act.append(pa)
            pd_pre.append(pp)
        return {"active": np.array(active), "pd_active": np.array(pd_act), "pd_precharged": np.array(pd_pre)}

    def refreshes_until(self, end: float) -> int:
        """All-bank refreshes every rank owes by ``end`` (done, or due while idle)."""
        t = self.t["tREFI"]
        first = t * (1.0 + first_refresh_order(self.n_ranks, self.cfg.ranks, self.cfg.device.stack_ids) / self.n_ranks)
        return int(np.sum(np.where(end >= first, np.floor((end - first) / t) + 1, 0)))

    # -- pool management ---------------------------------------------------------------------
    def _ensure_flow(self, fid: int) -> None:
        cap = len(self.flow_prio)
        if fid < cap:
            return
        new = max(cap * 2, fid + 1)
        for name in ("flow_write", "flow_prio", "flow_start", "flow_remaining", "flow_end", "flow_delay",
                     "flow_first", "flow_last", "flow_waiting", "flow_data_end"):
            old = getattr(self, name)
            grown = np.zeros(new, dtype=old.dtype)
            grown[:cap] = old
            setattr(self, name, grown)
        for name in ("fc_next", "fc_end", "fc_left"):
            old = getattr(self, name)
            grown = np.zeros((new, old.shape[1]), dtype=old.dtype)
            grown[:cap] = old
            setattr(self, name, grown)
        self._pack()

    def _ensure_requests(self, n: int) -> None:
        cap = self.pool.shape[1]
        if n <= cap:
            return
        new = max(cap * 2, n)
        # past self.n nothing is read before add_accesses writes it: no zeroing (the pages are
        # touched only as accesses arrive), and only the accesses so far are copied
        pool = np.empty((3, new), dtype=np.int32)
        pool[:, :self.n] = self.pool[:, :self.n]
        self._set_pool(pool)

    def _compact_if_needed(self, incoming: int) -> None:
        """Drop released flows' accesses when they are most of the pool."""
        used = self._used  # accesses of the live flows
        if self.n < self.compact_from or self.n - used < used + incoming:
            return
        live = sorted(self._live)
        remap = np.full(self.n, -1, dtype=np.int64)
        new_pool = np.empty((3, max(self.pool.shape[1], 2 * (used + incoming))), dtype=np.int32)  # no smaller
        pos = 0
        for f in live:
            lo, hi = int(self.flow_first[f]), int(self.flow_last[f])
            if hi <= lo:
                continue
            m = hi - lo
            new_pool[:, pos:pos + m] = self.pool[:, lo:hi]
            remap[lo:hi] = np.arange(pos, pos + m)
            shift = pos - lo
            self.fc_next[f] += shift
            self.fc_end[f] += shift
            self.flow_first[f], self.flow_last[f] = pos, pos + m
            pos += m
        G = self.G
        for c in range(self.cfg.channels):
            for d in range(2):  # ring positions of the scheduler's queues' entries
                at = (self.chan_i[c, K.C_RQ_HEAD + d] + np.arange(self.chan_i[c, K.C_RQ_N + d])) % G[K.G_RQ + d]
                self.sq[d, c, at] = remap[self.sq[d, c, at]]
        used = self.tq[..., K.T_ACCESS] >= 0  # the transaction queues' slots in use
        self.tq[..., K.T_ACCESS][used] = remap[self.tq[..., K.T_ACCESS][used]]
        self._set_pool(new_pool)
        self.n = pos
