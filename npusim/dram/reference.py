"""Pure-Python reference of the bank-state kernel (``npusim.dram.kernel``), written for clarity.

It implements the controller of ``npusim.dram.kernel``'s docstring with objects (a ``Bank``,
a ``Rank``, a ``Channel`` with its read and write queues) instead of arrays, and shares no
code with the kernel: ``tests/test_dram.py`` drives both with the same flows and stop times
and requires identical completion times and counts. Times in ns.
"""

from __future__ import annotations

import math

NEG = -math.inf
HIT, MISS, CONFLICT = 0, 1, 2
REFRESH_BACKLOG = 65536  # refreshes owed at once taken in one step (bank_core.h)
OPEN, CLOSED, ADAPTIVE = 0, 1, 2


class Bank:
    def __init__(self):
        self.open_row = -1
        self.next_act = 0.0
        self.next_pre = 0.0
        self.next_cas = 0.0
        self.busy = 0.0
        self.streak = 0
        self.acts = 0


class Rank:
    def __init__(self, bankgroups: int, first_refresh: float):
        self.last_act = NEG
        self.faw = [NEG, NEG, NEG, NEG]
        self.faw_pos = 0
        self.bg_last_act = [NEG] * bankgroups
        self.bg_last_rd = [NEG] * bankgroups
        self.bg_last_wr = [NEG] * bankgroups
        self.next_ref = first_refresh
        self.refreshes = 0
        self.open_count = 0
        self.active_since = 0.0
        self.active_time = 0.0
        self.last_busy = 0.0
        self.pd_act = 0.0
        self.pd_pre = 0.0


class Channel:
    def __init__(self):
        self.last_rd = NEG
        self.last_wr = NEG
        self.last_cas = NEG
        self.last_rank = -1
        self.last_issue = 0.0
        self.bus_busy = 0.0
        self.write_ack = NEG  # the last write acknowledged (posted writes)
        self.present = NEG  # the latest time the channel was run to: no admission is earlier
        self.write_mode = False
        self.rq: list[tuple[int, float]] = []  # (request, arrival), oldest first
        self.wq: list[tuple[int, float]] = []
        self.rr_last = -1
        self.rtq: list[tuple[int, float]] = []  # transaction queues, with per-bank command queues
        self.wtq: list[tuple[int, float]] = []
        self.row_bus = CommandBus()
        self.column_bus = CommandBus()  # used for column commands only with separate buses


class CommandBus:
    """The ticks a channel's command bus has given out, from ``base`` (``npusim.dram.kernel``:
    "Command bus"): when a command ends past ``base + WINDOW``, ``base`` moves to half a window
    before its end, and earlier ticks are forgotten."""

    WINDOW = 1024

    def __init__(self):
        self.base = 0  # the first tick remembered
        self.taken: set[int] = set()

    def free(self, first: int, n: int) -> bool:
        return all(j < self.base or j not in self.taken for j in range(first, first + n))

    def place(self, time: float, n: int, tick: float) -> tuple[float, int]:
        """The earliest start from ``time`` with ``n`` free ticks, and its tick (a time's tick:
        floor(time x (1 / tick)), as the kernel computes it)."""
        s = math.floor(time * (1.0 / tick))
        if self.free(s, n):
            return time, s
        s += 1
        while not self.free(s, n):
            s += 1
        return max(time, s * tick), s

    def take(self, first: int, n: int) -> None:
        end = first + n
        if end > self.base + self.WINDOW:  # the window moves on so that they end half way through it
            self.base = end - self.WINDOW // 2
            self.taken = {j for j in self.taken if j >= self.base}
        self.taken.update(range(max(first, self.base), end))


class Flow:
    def __init__(self, fid, requests_by_channel, write, priority, start):
        self.id = fid
        self.pending = requests_by_channel  # channel -> list of requests not yet admitted
        self.write = write
        self.priority = priority
        self.start = start
        self.remaining = sum(len(v) for v in requests_by_channel)  # not yet issued
        self.waiting = self.remaining  # not yet admitted: a write flow is done at 0 (posted writes)
        self.end = start
        self.delay = 0.0


class ReferenceController:
    """The same controller as ``npusim.dram.kernel``; ``t`` holds the timings (``TIMING_FIELDS``)."""

    def __init__(self, t: dict, channels: int, ranks: int, bankgroups: int, banks_per_group: int,
                 policy: int, frfcfs: bool, cap: int, read_queue: int, write_queue: int, high: int, low: int,
                 powerdown: bool = False, bank_queue: int = 0, command_bus: tuple = (0, 0, 0, False, False),
                 stack_ids: bool = False):
        """``command_bus``: ticks a PRE, an ACT and a column command hold the command bus (0:
        no bus), whether row and column commands have a bus each, whether the ACT's ticks are
        one-tick commands of their own. ``stack_ids``: a channel's ranks share one activation
        window (tRRD_S, tFAW) and refresh together (HBM3's stack IDs)."""
        self.stack_ids = stack_ids
        self.t = t
        self.cmd_pre, self.cmd_act, self.cmd_cas, self.cmd_dual, self.cmd_split = command_bus
        self.bank_queue = bank_queue
        self.in_bank_queue = {}  # (bank, is write) -> accesses in its command queue
        self.C, self.R, self.BG, self.BPG = channels, ranks, bankgroups, banks_per_group
        self.policy, self.frfcfs, self.cap, self.powerdown = policy, frfcfs, cap, powerdown
        self.read_queue, self.write_queue, self.high, self.low = read_queue, write_queue, high, low
        total_ranks = channels * ranks
        self.banks = [Bank() for _ in range(total_ranks * bankgroups * banks_per_group)]
        self.ranks = [Rank(bankgroups, t["tREFI"] * (1.0 + (k // ranks * ranks if stack_ids else k) / total_ranks))
                      for k in range(total_ranks)]
        self.channels = [Channel() for _ in range(channels)]
        self.flows: dict[int, Flow] = {}
        self.req: dict[int, dict] = {}  # request id -> fields
        self.stats = dict(reads=0, writes=0, hits=0, misses=0, conflicts=0, acts=0, pres=0)
        self.read_latency = 0.0
        self.write_latency = 0.0
        self.delay = 0.0
        self._next_req = 0

    # -- flows -----------------------------------------------------------------------------
    def add_flow(self, fid: int, fields: dict, write: bool, priority: float, start: float) -> None:
        """``fields``: arrays Ch, Ra, Bg, Ba, Ro of the flow's accesses, in issue order."""
        by_channel = [[] for _ in range(self.C)]
        for i in range(len(fields["Ch"])):
            rid = self._next_req
            self._next_req += 1
            c = int(fields["Ch"][i])
            rank = c * self.R + int(fields["Ra"][i])
            bg = int(fields["Bg"][i])
            bank = (rank * self.BG + bg) * self.BPG + int(fields["Ba"][i])
            self.req[rid] = dict(flow=fid, rank=rank, rank_local=int(fields["Ra"][i]), bg=bg, bank=bank,
                                 row=int(fields["Ro"][i]), end=None)
            by_channel[c].append(rid)
        self.flows[fid] = Flow(fid, by_channel, write, priority, start)

    # -- helpers -----------------------------------------------------------------------------
    def _close(self, bank: Bank, rank: Rank, when: float) -> None:
        bank.open_row = -1
        rank.open_count -= 1
        if rank.open_count == 0:
            rank.active_time += max(0.0, when - rank.active_since)

    def _group(self, rank_index: int) -> range:
        """The ranks that share rank ``rank_index``'s activation window and refresh."""
        if not self.stack_ids:
            return range(rank_index, rank_index + 1)
        first = rank_index - rank_index % self.R
        return range(first, first + self.R)

    def _act_time(self, rank_index: int, bg: int, t0: float) -> float:
        t = self.t
        rank, window = self.ranks[rank_index], self.ranks[self._group(rank_index)[0]]
        return max(t0, window.last_act + t["tRRD_S"], rank.bg_last_act[bg] + t["tRRD_L"],
                   window.faw[window.faw_pos] + t["tFAW"])

    def _asleep(self, rank: Rank, arrival: float) -> bool:
        return self.powerdown and arrival > rank.last_busy + self.t["tPD"]

    def _sleep_until(self, rank: Rank, when: float) -> None:
        """The rank woken at ``when`` (an access or a refresh): the time it slept, in active or
        precharged power-down."""
        if self._asleep(rank, when):
            slept = when - (rank.last_busy + self.t["tPD"])
            if rank.open_count > 0:
                rank.pd_act += slept
            else:
                rank.pd_pre += slept

    def _timing(self, ch: Channel, rid: int, arrival: float, write: bool):
        t = self.t
        r = self.req[rid]
        bank, rank, bg = self.banks[r["bank"]], self.ranks[r["rank"]], r["bg"]
        wake = arrival + t["tXP"] if self._asleep(rank, arrival) else arrival
        ccd_s = max(t["tCCD_S"], t["tBurst"])
        # the channel's data bus, and the bank group's timing (a wait for it is the bank's delay)
        if write:
            bus = max(arrival, ch.last_wr + ccd_s, ch.last_rd + t["tRTW"])
            group = rank.bg_last_wr[bg] + t["tCCD_L_WR"]
        else:
            bus = max(arrival, ch.last_rd + ccd_s, ch.last_wr + t["tCWL"] + t["tBurst"] + t["tWTR_S"])
            group = max(rank.bg_last_rd[bg] + t["tCCD_L"], rank.bg_last_wr[bg] + t["tCWL"] + t["tBurst"] + t["tWTR_L"])
        if ch.last_rank >= 0 and ch.last_rank != r["rank_local"]:
            bus = max(bus, ch.last_cas + t["tBurst"] + t["tRTRS"])
        pre = act = NEG
        if bank.open_row == r["row"]:
            kind, ready = HIT, max(wake, bank.next_cas)
        elif bank.open_row < 0:
            kind = MISS
            act = self._act_time(r["rank"], bg, max(wake, bank.next_act))
            ready = act + t["tRCD"]
        else:
            kind = CONFLICT
            pre = max(wake, bank.next_pre)
            act = self._act_time(r["rank"], bg, max(pre + t["tRP"], bank.next_act))
            ready = act + t["tRCD"]
        ready = max(ready, group)
        return kind, pre, act, max(bus, ready), max(0.0, ready - bus)

    def _on_bus(self, ch: Channel, kind, pre, act, cas, delay):
        """The picked access's commands moved to free ticks of the command bus, PRE, then ACT
        (tRP after it), then the column command (tRCD after the ACT); the moves add to its
        delay. Returns the new times and the ticks to take."""
        t, tick = self.t, self.t["tCMD"]
        column_bus = ch.column_bus if self.cmd_dual else ch.row_bus
        ticks = [None, None, None]
        new = cas
        if kind == CONFLICT:
            pre, ticks[0] = ch.row_bus.place(pre, self.cmd_pre, tick)
            act = max(act, pre + t["tRP"])
        if kind != HIT:
            act, ticks[1] = ch.row_bus.place(act, 1 if self.cmd_split else self.cmd_act, tick)
            new = max(new, act + t["tRCD"])
        new, ticks[2] = column_bus.place(new, self.cmd_cas, tick)
        return pre, act, new, delay + (new - cas), ticks

    def _take_bus(self, ch: Channel, kind, ticks) -> None:
        column_bus = ch.column_bus if self.cmd_dual else ch.row_bus
        if kind == CONFLICT:
            ch.row_bus.take(ticks[0], self.cmd_pre)
        if kind != HIT and self.cmd_split:  # ACT-1 where placed, each next part at the next free tick
            part = ticks[1]
            for _ in range(self.cmd_act):
                while not ch.row_bus.free(part, 1):
                    part += 1
                ch.row_bus.take(part, 1)
        elif kind != HIT:
            ch.row_bus.take(ticks[1], self.cmd_act)
        column_bus.take(ticks[2], self.cmd_cas)

    def _refresh(self, rank_index: int, start: float, due: float) -> None:
        t = self.t
        group, per = self._group(rank_index), self.BG * self.BPG
        banks = range(group[0] * per, (group[-1] + 1) * per)
        any_open = any(self.banks[b].open_row >= 0 for b in banks)
        begin = start + (t["tRP"] if any_open else 0.0)
        done = begin + t["tRFC"]
        for b in banks:
            bank = self.banks[b]
            bank.open_row = -1
            bank.streak = 0
            bank.next_act = max(bank.next_act, done)
        for k in group:
            rank = self.ranks[k]
            self._sleep_until(rank, start)  # (it leaves power-down to refresh, goes back once done)
            if rank.open_count > 0:
                rank.active_time += max(0.0, start - rank.active_since)
            rank.open_count = 0
            rank.last_busy = max(rank.last_busy, done - t["tPD"])  # asleep again once done (bank_core.h)
            rank.next_ref += t["tREFI"]
            rank.refreshes += 1
        self._refresh_backlog(group, banks, due)

    def _refresh_backlog(self, group, banks, due: float) -> None:
        """The refreshes before ``due`` (the access that found them due) in one step when they
        are REFRESH_BACKLOG or more: each starts at its due time with every bank closed, busy
        tRFC and asleep (with power-down) the tREFI - tRFC to the next (bank_core.h)."""
        t = self.t
        m = math.floor((due - self.ranks[group[0]].next_ref) / t["tREFI"])
        if m < REFRESH_BACKLOG:
            return
        done = NEG
        for k in group:
            rank = self.ranks[k]
            first = rank.next_ref
            last_done = first + (m - 1.0) * t["tREFI"] + t["tRFC"]
            self._sleep_until(rank, first)
            if self.powerdown:
                rank.pd_pre += (m - 1.0) * max(0.0, t["tREFI"] - t["tRFC"])
            rank.last_busy = max(rank.last_busy, last_done - t["tPD"])
            rank.next_ref = first + m * t["tREFI"]
            rank.refreshes += m
            done = max(done, last_done)
        for b in banks:
            self.banks[b].next_act = max(self.banks[b].next_act, done)

    def _refresh_start(self, rank_index: int) -> float:
        group, per = self._group(rank_index), self.BG * self.BPG
        start = self.ranks[rank_index].next_ref
        for b in range(group[0] * per, (group[-1] + 1) * per):
            if self.banks[b].open_row >= 0:
                start = max(start, self.banks[b].next_pre)
        return start

    def _next_flow(self, ch_index: int, ch: Channel):
        live = [f for f in self.flows.values() if f.pending[ch_index]]
        if not live:
            return None
        top = min(f.priority for f in live)
        group = sorted(f.id for f in live if f.priority == top)
        for fid in group:
            if fid > ch.rr_last:
                return self.flows[fid]
        return self.flows[group[0]]

    def _admit(self, ch_index: int, ch: Channel) -> None:
        """Flows -> the queues (most urgent first, in order, waiting when the next one's queue is
        full); with per-bank command queues, flows -> transaction queues, then each transaction
        queue's oldest accesses whose bank's command queue has room move there, and the slots
        they free are filled again at once, until nothing moves (so that working this out twice
        before the next command changes nothing: where the simulator pauses the controller
        cannot change what it does)."""
        while True:
            while True:
                flow = self._next_flow(ch_index, ch)
                if flow is None:
                    break
                if self.bank_queue:
                    queue, depth = (ch.wtq, self.write_queue) if flow.write else (ch.rtq, self.read_queue)
                else:
                    queue, depth = (ch.wq, self.write_queue) if flow.write else (ch.rq, self.read_queue)
                if len(queue) >= depth:
                    break
                rid = flow.pending[ch_index].pop(0)
                arrival = max(max(flow.start, ch.last_issue), ch.present)
                queue.append((rid, arrival))
                flow.waiting -= 1
                if flow.write:  # posted: acknowledged once queued, a burst after the channel's last at the soonest
                    ch.write_ack = max(arrival, ch.write_ack + self.t["tBurst"])
                    flow.end = max(flow.end, ch.write_ack)
                ch.rr_last = flow.id
            if not self.bank_queue:
                return
            moved = False
            for write, front, queue in ((False, ch.rtq, ch.rq), (True, ch.wtq, ch.wq)):
                for entry in list(front):
                    key = (self.req[entry[0]]["bank"], write)
                    if self.in_bank_queue.get(key, 0) < self.bank_queue:
                        front.remove(entry)
                        queue.append(entry)
                        self.in_bank_queue[key] = self.in_bank_queue.get(key, 0) + 1
                        moved = True
            if not moved:
                return

    def _pick(self, queue, write: bool, ch: Channel) -> int:
        if not self.frfcfs:
            return 0
        t = self.t
        if write:  # the channel's next column slot for this direction
            floor = max(ch.last_wr + max(t["tCCD_S"], t["tBurst"]), ch.last_rd + t["tRTW"])
        else:
            floor = max(ch.last_rd + max(t["tCCD_S"], t["tBurst"]), ch.last_wr + t["tCWL"] + t["tBurst"] + t["tWTR_S"])
        candidates = []
        for i, (rid, arrival) in enumerate(queue):
            r = self.req[rid]
            bank = self.banks[r["bank"]]
            hit = bank.open_row == r["row"]
            if hit and bank.streak >= self.cap and bank.next_pre <= floor and any(
                    self.req[o]["bank"] == r["bank"] and self.req[o]["row"] != r["row"] for o, _ in queue):
                continue  # capped: another row of the bank waits and its PRE could go
            cas = self._timing(ch, rid, arrival, write)[3]
            candidates.append((cas, i))
        return min(candidates)[1] if candidates else 0

    # -- the controller ----------------------------------------------------------------------
    def run(self, stop_time: float) -> None:
        """Issue every request whose column command falls at or before ``stop_time``."""
        for c, ch in enumerate(self.channels):
            self._run_channel(c, ch, stop_time)
            ch.present = max(ch.present, stop_time)

    def _run_channel(self, c: int, ch: Channel, stop: float) -> None:
        t = self.t
        while True:
            self._admit(c, ch)
            if not ch.rq and not ch.wq:
                return
            writes = len(ch.wq) + len(ch.wtq)  # pending, in the transaction queue too
            if ch.write_mode:
                if not ch.wq or (ch.rq and writes <= self.low):
                    ch.write_mode = False
            elif ch.wq and (writes >= self.high or not ch.rq):
                ch.write_mode = True
            queue, write = (ch.wq, True) if ch.write_mode else (ch.rq, False)
            k = self._pick(queue, write, ch)
            rid, arrival = queue[k]
            r = self.req[rid]
            kind, pre, act, cas, delay = self._timing(ch, rid, arrival, write)
            ticks = None
            if self.cmd_cas:
                pre, act, cas, delay, ticks = self._on_bus(ch, kind, pre, act, cas, delay)
            if cas >= self.ranks[r["rank"]].next_ref:  # a refresh first, then the pick again
                start = self._refresh_start(r["rank"])
                if start > stop:
                    return
                self._refresh(r["rank"], start, cas)
                continue
            if cas > stop:
                return
            if ticks is not None:
                self._take_bus(ch, kind, ticks)
            self._commit(ch, queue, k, rid, arrival, write, kind, pre, act, cas, delay)

    def _commit(self, ch, queue, k, rid, arrival, write, kind, pre, act, cas, delay) -> None:
        t = self.t
        r = self.req[rid]
        bank, rank, bg = self.banks[r["bank"]], self.ranks[r["rank"]], r["bg"]
        self._sleep_until(rank, arrival)
        if kind == CONFLICT:
            self._close(bank, rank, pre)
            self.stats["pres"] += 1
            bank.next_act = max(bank.next_act, pre + t["tRP"])
        if kind != HIT:
            bank.open_row = r["row"]
            bank.next_cas = act + t["tRCD"]
            bank.next_pre = act + t["tRAS"]
            bank.next_act = act + t["tRC"]
            bank.streak = 0
            bank.acts += 1
            self.stats["acts"] += 1
            window = self.ranks[self._group(r["rank"])[0]]
            window.last_act = act
            rank.bg_last_act[bg] = act
            window.faw[window.faw_pos] = act
            window.faw_pos = (window.faw_pos + 1) % 4
            if rank.open_count == 0:
                rank.active_since = act
            rank.open_count += 1
        if kind == HIT:
            self.stats["hits"] += 1
            bank.streak += 1
        elif kind == MISS:
            self.stats["misses"] += 1
        else:
            self.stats["conflicts"] += 1
        if write:
            bank.next_pre = max(bank.next_pre, cas + t["tCWL"] + t["tBurst"] + t["tWR"])
            end = cas + t["tCWL"] + t["tBurst"]
            ch.last_wr = cas
            rank.bg_last_wr[bg] = cas
            self.stats["writes"] += 1
            self.write_latency += end - arrival
        else:
            bank.next_pre = max(bank.next_pre, cas + t["tRTP"])
            end = cas + t["tCL"] + t["tBurst"]
            ch.last_rd = cas
            rank.bg_last_rd[bg] = cas
            self.stats["reads"] += 1
            self.read_latency += end - arrival
        rank.last_busy = max(rank.last_busy, end)
        ch.last_cas = cas
        ch.last_rank = r["rank_local"]
        ch.last_issue = cas
        ch.bus_busy += t["tBurst"]
        bank.busy += t["tBurst"] + (t["tRCD"] if kind == MISS else 0.0) + (t["tRP"] + t["tRCD"] if kind == CONFLICT else 0.0)
        self.delay += delay
        r["end"] = end
        flow = self.flows[r["flow"]]
        flow.remaining -= 1
        if not write:  # (a write flow ended at its admission)
            flow.end = max(flow.end, end)
            flow.delay += delay
        del queue[k]
        if self.bank_queue:
            self.in_bank_queue[(r["bank"], write)] -= 1
        if self.policy != OPEN:
            others = [self.req[o] for o, _ in ch.rq + ch.wq]
            hit_waits = any(o["bank"] == r["bank"] and o["row"] == r["row"] for o in others)
            miss_waits = any(o["bank"] == r["bank"] and o["row"] != r["row"] for o in others)
            if not hit_waits and (self.policy == CLOSED or miss_waits):
                when = bank.next_pre
                self._close(bank, rank, when)
                self.stats["pres"] += 1
                bank.next_act = max(bank.next_act, when + t["tRP"])
