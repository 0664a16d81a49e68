"""The bank-state kernel: a DRAM controller and its banks, run over batches of accesses (Numba).

One call (``run_channels``) advances every channel of the device up to ``stop_time``: it
admits the accesses of the flows in flight into each channel's read and write queues, picks
one at a time as the scheduler would, works out its commands' times from the bank, rank and
channel state, and commits it when its column command falls at or before ``stop_time``;
``run_until_complete`` does the same in time order across channels and stops when a flow
completes. The simulator (``npusim.dram.model``) calls them when a transfer starts and on the
way to the completion it predicts, so a descriptor's thousands of accesses cost a few calls,
not one SimPy event each.
``npusim.dram.reference`` is the same controller in plain Python; a test holds them equal.

**The controller**, per channel (channels share nothing but the flows feeding them):

- *Admission.* Each flow (one transfer, or one band of it: all reads or all writes) has its
  accesses for this channel in issue order. The front end admits them into the read queue
  (depth ``read_queue``) or the write queue (``write_queue``), taking the most urgent flows
  first (lowest priority value: the step the data is needed at), round-robin among equally
  urgent ones, one access at a time; when the queue the next access goes to is full, the
  front end waits (head-of-line blocking). An access arrives when admitted: at the column
  command that freed its slot, or at its flow's start. With per-bank command queues
  (``bank_queue`` > 0, DRAMsim3's ``PER_BANK`` structure) the read and write queues are
  transaction queues: their oldest accesses whose bank's command queue (``bank_queue``
  deep, reads and writes apart) has room move on to it, the slots they free are filled again
  at once (so pausing the controller anywhere changes nothing), and the scheduler sees the
  command queues; an access's arrival stays its admission to the transaction queue.
- *Read/write turnaround* with watermarks (DRAMsim3's and most controllers' write drain): the
  channel serves reads until ``write_high`` writes are pending (or no read is waiting), then
  writes until ``write_low`` are (or none is in a command queue).
- *Scheduling.* ``fcfs``: the oldest access of the queue served. ``frfcfs`` (Rixner et al.,
  ISCA 2000, first-ready first-come-first-served): the access whose column command can go
  first — a row hit usually, since it needs no ACT; a miss to another bank whose ACT went
  ahead while the hits streamed, as a command-level scheduler issues it —, ties to the
  oldest. A hit whose bank has served ``row_hit_cap`` hits in a row while an access to
  another row of that bank waits is not eligible once that bank could precharge (tRAS, tRTP,
  tWR met) by the channel's next column slot (the cap keeps a stream from starving others;
  as in DRAMsim3, whose limit of 4 lets the PRE go when it is ready, hits that keep the PRE
  from being ready — tRTP longer than tCCD — go on) unless nothing else is.
- *Commands.* A hit needs only its column command (RD/WR); a miss (bank precharged) an
  activation (ACT) tRCD before it; a conflict (another row open) a precharge (PRE), tRP,
  then ACT. The commands of an access go as early as these constraints allow (times in ns;
  a bank's ACT may overlap other banks' data, as a controller issues it ahead)::

      PRE  >= arrival, ACT + tRAS, RD + tRTP, WR + tCWL + tBurst + tWR      (same bank)
      ACT  >= arrival, PRE + tRP, ACT + tRC (same bank), ACT + tRRD_S (rank),
              ACT + tRRD_L (bank group), 4th-last ACT of the rank + tFAW
      RD   >= ACT + tRCD, RD + max(tCCD_S, tBurst) (channel), RD + tCCD_L (bank group),
              WR + tCWL + tBurst + tWTR_S (channel), WR + tCWL + tBurst + tWTR_L (bank group)
      WR   >= ACT + tRCD, WR + max(tCCD_S, tBurst), WR + tCCD_L (bank group), RD + tRTW
      any column command after one to another rank: + tBurst + tRTRS

  with tBurst = BL / data rate and tRTW = tCL + tBurst + 2 tCK - tCWL (Ramulator 2's LPDDR5
  read-to-write rule). Data moves tCL (reads) or tCWL (writes) after the column command, for
  tBurst; an access completes when its data has moved.
- *Page policy* after each column command: ``open`` keeps the row open; ``closed``
  precharges it (as soon as tRAS/tRTP/tWR allow) unless a queued access hits it; ``adaptive``
  precharges only when no queued access hits the row and one waits for another row of the
  bank (gem5's close-adaptive).
- *Power-down* (``dram.powerdown_after``, optional): a rank with no access for that long
  since its last data (or refresh) enters power-down (active power-down if a row is open,
  precharged power-down if not), and the next access's commands wait tXP for it to exit.
- *Refresh*: all-bank refresh of each rank every tREFI (ranks staggered by tREFI / ranks):
  when an access's column command would fall after a refresh is due, the rank's open rows are
  precharged, the rank refreshes for tRFC (rows closed, no ACT until it ends), then the
  scheduler picks again.

Every access adds to the counts (hits, misses, conflicts, activations, precharges, reads,
writes), to its bank's and channel's busy time, and to its flow's *bank delay*: how much
later its column command went than the channel's bus would have allowed (the ACT/PRE/refresh
timing the bank imposed), which the simulator reports as DRAM bank timing.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Timing parameters, in this order in the kernel's float array (ns).
TIMING_FIELDS = ("tRCD", "tRP", "tRAS", "tRC", "tCL", "tCWL", "tBurst", "tCCD_S", "tCCD_L", "tRRD_S",
                 "tRRD_L", "tFAW", "tWR", "tWTR_S", "tWTR_L", "tRTP", "tRTW", "tREFI", "tRFC", "tRTRS", "tXP", "tPD")
(T_RCD, T_RP, T_RAS, T_RC, T_CL, T_CWL, T_BURST, T_CCD_S, T_CCD_L, T_RRD_S, T_RRD_L, T_FAW, T_WR, T_WTR_S,
 T_WTR_L, T_RTP, T_RTW, T_REFI, T_RFC, T_RTRS, T_XP, T_PD) = range(len(TIMING_FIELDS))

#: Integer parameters (``G``): geometry and policies.
#: G_RQ / G_WQ: the scheduler's queues per channel; with G_BANKQ > 0 (per-bank command queues of
#: that depth, DRAMsim3's PER_BANK structure) transaction queues of G_RT / G_WT entries come first.
(G_CHANNELS, G_RANKS, G_BANKGROUPS, G_BANKS_PER_GROUP, G_POLICY, G_FRFCFS, G_CAP, G_RQ, G_WQ, G_HIGH, G_LOW,
 G_POWERDOWN, G_BANKQ, G_RT, G_WT) = range(15)
OPEN, CLOSED, ADAPTIVE = 0, 1, 2
HIT, MISS, CONFLICT = 0, 1, 2
NOTHING, ACCESS, REFRESH = 0, 1, 2  # what a channel does next (_candidate)

# Columns of the state arrays.
B_NEXT_ACT, B_NEXT_PRE, B_NEXT_CAS, B_BUSY = range(4)              # bank_f
B_OPEN_ROW, B_STREAK, B_ACTS = range(3)                             # bank_i
(R_LAST_ACT, R_NEXT_REF, R_ACTIVE_SINCE, R_ACTIVE_TIME, R_LAST_BUSY, R_PD_ACT, R_PD_PRE,
 R_FAW) = range(8)  # rank_f (R_FAW .. R_FAW + 3)
R_FAW_POS, R_OPEN_COUNT, R_REFRESHES = range(3)                     # rank_i
BG_LAST_ACT, BG_LAST_RD, BG_LAST_WR = range(3)                      # rank_bg_f
C_LAST_RD, C_LAST_WR, C_LAST_CAS, C_LAST_ISSUE, C_BUS_BUSY = range(5)  # chan_f
(C_LAST_RANK, C_WRITE_MODE, C_RQ_N, C_WQ_N, C_RR_LAST, C_RQ_HEAD, C_WQ_HEAD, C_RT_N, C_RT_HEAD, C_WT_N,
 C_WT_HEAD, C_T_NEW, C_T_NEW_W, C_T_FREED, C_T_FREED_W, C_T_TAIL, C_T_TAIL_W, C_T_FREE, C_T_FREE_W, C_T_SEQ,
 C_T_SEQ_W) = range(21)  # chan_i
CHAN_I_COLUMNS = 21
# The scheduler's queues are rings: entry i of a queue is at (head + i) mod its depth, oldest first.
# A transaction queue (per-bank command queues) is a list of slots tq[d, c, slot] = (access,
# next, previous, next of the same bank, admission number), oldest first from slot
# chan_i[C_RT_HEAD + 2d] to C_T_TAIL + d, free slots chained from C_T_FREE + d; each bank's
# entries in it are chained too, from bank_n[b, 4 + d] to bank_n[b, 6 + d] (bank_n[b, 2 + d]
# of them): an entry leaves from anywhere, and a bank's oldest is found, without a pass over
# the queue. C_T_NEW + d: the first entry admitted since the last move to the command queues
# (-1: none; every older one then waited for a full bank queue), C_T_FREED + d: the bank
# whose command queue lost an entry since (-1: none, -2: two or more banks).
T_ACCESS, T_NEXT, T_PREV, T_BANK_NEXT, T_SEQ = range(5)  # tq[d, c, slot]
S_READS, S_WRITES, S_HITS, S_MISSES, S_CONFLICTS, S_ACTS, S_PRES = range(7)  # stats_i
SF_READ_LATENCY, SF_WRITE_LATENCY, SF_DELAY = range(3)              # stats_f

NEG = -1e300


@njit(cache=True, inline="always")
def _close(bank_i, rank_f, rank_i, b, rk, when):
    bank_i[b, B_OPEN_ROW] = -1
    rank_i[rk, R_OPEN_COUNT] -= 1
    if rank_i[rk, R_OPEN_COUNT] == 0:
        rank_f[rk, R_ACTIVE_TIME] += max(0.0, when - rank_f[rk, R_ACTIVE_SINCE])


@njit(cache=True, inline="always")
def _act_time(T, rank_f, rank_i, rank_bg_f, rk, g, t0):
    pos = rank_i[rk, R_FAW_POS]
    return max(t0, rank_f[rk, R_LAST_ACT] + T[T_RRD_S], rank_bg_f[rk, g, BG_LAST_ACT] + T[T_RRD_L],
               rank_f[rk, R_FAW + pos] + T[T_FAW])


@njit(cache=True, inline="always")
def _asleep(T, G, rank_f, rk, arrival):
    """Whether rank ``rk`` went into power-down before an access arriving at ``arrival``."""
    return G[G_POWERDOWN] == 1 and arrival > rank_f[rk, R_LAST_BUSY] + T[T_PD]


@njit(cache=True, inline="always")
def _timing(T, G, c, rid, arrival, write, ranks, bank_f, bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i,
            req_bank, req_row, req_rank, req_bg):
    """(kind, pre, act, cas, bank delay) of access ``rid`` in channel ``c`` (module docstring)."""
    b = req_bank[rid]
    rk = req_rank[rid]
    g = req_bg[rid]
    wake = arrival + T[T_XP] if _asleep(T, G, rank_f, rk, arrival) else arrival
    if write:
        bus = max(arrival, chan_f[c, C_LAST_WR] + max(T[T_CCD_S], T[T_BURST]),
                  rank_bg_f[rk, g, BG_LAST_WR] + T[T_CCD_L], chan_f[c, C_LAST_RD] + T[T_RTW])
    else:
        bus = max(arrival, chan_f[c, C_LAST_RD] + max(T[T_CCD_S], T[T_BURST]),
                  rank_bg_f[rk, g, BG_LAST_RD] + T[T_CCD_L],
                  chan_f[c, C_LAST_WR] + T[T_CWL] + T[T_BURST] + T[T_WTR_S],
                  rank_bg_f[rk, g, BG_LAST_WR] + T[T_CWL] + T[T_BURST] + T[T_WTR_L])
    local = rk - c * ranks
    if chan_i[c, C_LAST_RANK] >= 0 and chan_i[c, C_LAST_RANK] != local:
        bus = max(bus, chan_f[c, C_LAST_CAS] + T[T_BURST] + T[T_RTRS])
    pre = NEG
    act = NEG
    open_row = bank_i[b, B_OPEN_ROW]
    if open_row == req_row[rid]:
        kind = HIT
        ready = max(wake, bank_f[b, B_NEXT_CAS])
    elif open_row < 0:
        kind = MISS
        act = _act_time(T, rank_f, rank_i, rank_bg_f, rk, g, max(wake, bank_f[b, B_NEXT_ACT]))
        ready = act + T[T_RCD]
    else:
        kind = CONFLICT
        pre = max(wake, bank_f[b, B_NEXT_PRE])
        act = _act_time(T, rank_f, rank_i, rank_bg_f, rk, g, max(pre + T[T_RP], bank_f[b, B_NEXT_ACT]))
        ready = act + T[T_RCD]
    return kind, pre, act, max(bus, ready), max(0.0, ready - bus)


@njit(cache=True, inline="always")
def _at(head, i, depth):
    """Position of entry ``i`` of a ring queue starting at ``head``."""
    j = head + i
    return j - depth if j >= depth else j


@njit(cache=True, inline="always")
def _remove(q, qa, d, c, head, n, i, depth):
    """Remove entry ``i`` of the ring queue ``q[d, c]`` (arrivals in ``qa``; ``n`` entries from
    ``head``), keeping the others in order; returns the new head. The shorter side moves: the
    older entries up one (the ring then starts one later) or the younger ones down one (an
    entry admitted last, moved on at once, costs nothing instead of a pass over the queue)."""
    if i < n - 1 - i:
        for m in range(i, 0, -1):
            q[d, c, _at(head, m, depth)] = q[d, c, _at(head, m - 1, depth)]
            qa[d, c, _at(head, m, depth)] = qa[d, c, _at(head, m - 1, depth)]
        return _at(head, 1, depth)
    for m in range(i, n - 1):
        q[d, c, _at(head, m, depth)] = q[d, c, _at(head, m + 1, depth)]
        qa[d, c, _at(head, m, depth)] = qa[d, c, _at(head, m + 1, depth)]
    return head


@njit(cache=True, inline="always")
def _next_flow(c, active, flow_prio, fc_next, fc_end, rr_last):
    """The flow the front end of channel ``c`` admits from next, or -1: of the most urgent
    flows with accesses left there, the first after ``rr_last`` (round robin), else the first
    (one pass: a more urgent flow found starts the choice again)."""
    top = 1e300
    first = -1
    after = -1
    for i in range(active.shape[0]):
        f = active[i]
        if fc_next[f, c] >= fc_end[f, c]:
            continue
        p = flow_prio[f]
        if p < top:
            top = p
            first = -1
            after = -1
        if p == top:
            if first < 0 or f < first:
                first = f
            if f > rr_last and (after < 0 or f < after):
                after = f
    return after if after >= 0 else first


@njit(cache=True, inline="always")
def _refresh(T, G, rk, start, bank_f, bank_i, rank_f, rank_i):
    nb = G[G_BANKGROUPS] * G[G_BANKS_PER_GROUP]
    any_open = False
    for b in range(rk * nb, rk * nb + nb):
        if bank_i[b, B_OPEN_ROW] >= 0:
            any_open = True
    begin = start + (T[T_RP] if any_open else 0.0)
    done = begin + T[T_RFC]
    for b in range(rk * nb, rk * nb + nb):
        bank_i[b, B_OPEN_ROW] = -1
        bank_i[b, B_STREAK] = 0
        bank_f[b, B_NEXT_ACT] = max(bank_f[b, B_NEXT_ACT], done)
    if rank_i[rk, R_OPEN_COUNT] > 0:
        rank_f[rk, R_ACTIVE_TIME] += max(0.0, start - rank_f[rk, R_ACTIVE_SINCE])
    rank_i[rk, R_OPEN_COUNT] = 0
    rank_f[rk, R_LAST_BUSY] = max(rank_f[rk, R_LAST_BUSY], done)
    rank_f[rk, R_NEXT_REF] += T[T_REFI]
    rank_i[rk, R_REFRESHES] += 1


@njit(cache=True, inline="always")
def _refresh_start(G, rk, bank_f, bank_i, rank_f):
    nb = G[G_BANKGROUPS] * G[G_BANKS_PER_GROUP]
    start = rank_f[rk, R_NEXT_REF]
    for b in range(rk * nb, rk * nb + nb):
        if bank_i[b, B_OPEN_ROW] >= 0:
            start = max(start, bank_f[b, B_NEXT_PRE])
    return start


@njit(cache=True, inline="always")
def _tq_append(c, d, r, arrival, chan_i, tq, tqa, bank_n, req_bank):
    """Access ``r`` into a free slot at the end of transaction queue ``d`` of channel ``c`` and
    at the end of its bank's chain (the layout is at the top of this module)."""
    s = chan_i[c, C_T_FREE + d]
    chan_i[c, C_T_FREE + d] = tq[d, c, s, T_NEXT]
    tail = chan_i[c, C_T_TAIL + d]
    tq[d, c, s, T_ACCESS] = r
    tq[d, c, s, T_NEXT] = -1
    tq[d, c, s, T_PREV] = tail
    tq[d, c, s, T_BANK_NEXT] = -1
    tq[d, c, s, T_SEQ] = chan_i[c, C_T_SEQ + d]
    tqa[d, c, s] = arrival
    chan_i[c, C_T_SEQ + d] += 1
    if tail >= 0:
        tq[d, c, tail, T_NEXT] = s
    else:
        chan_i[c, C_RT_HEAD + 2 * d] = s
    chan_i[c, C_T_TAIL + d] = s
    b = req_bank[r]
    last = bank_n[b, 6 + d]
    if last >= 0:
        tq[d, c, last, T_BANK_NEXT] = s
    else:
        bank_n[b, 4 + d] = s
    bank_n[b, 6 + d] = s
    bank_n[b, 2 + d] += 1
    if chan_i[c, C_T_NEW + d] < 0:
        chan_i[c, C_T_NEW + d] = s


@njit(cache=True, inline="always")
def _tq_to_bank_queue(c, d, s, G, chan_i, sq, sqa, tq, tqa, bank_n, req_bank):
    """The entry in slot ``s`` of transaction queue ``d`` (its bank's oldest there) moves to the
    end of the scheduler's queue (its bank's command queue); its slot is freed."""
    r = tq[d, c, s, T_ACCESS]
    b = req_bank[r]
    ns = chan_i[c, C_RQ_N + d]
    js = _at(chan_i[c, C_RQ_HEAD + d], ns, G[G_RQ + d])
    sq[d, c, js] = r
    sqa[d, c, js] = tqa[d, c, s]
    chan_i[c, C_RQ_N + d] = ns + 1
    bank_n[b, d] += 1
    prev = tq[d, c, s, T_PREV]
    nxt = tq[d, c, s, T_NEXT]
    if prev >= 0:
        tq[d, c, prev, T_NEXT] = nxt
    else:
        chan_i[c, C_RT_HEAD + 2 * d] = nxt
    if nxt >= 0:
        tq[d, c, nxt, T_PREV] = prev
    else:
        chan_i[c, C_T_TAIL + d] = prev
    bank_n[b, 4 + d] = tq[d, c, s, T_BANK_NEXT]
    if bank_n[b, 4 + d] < 0:
        bank_n[b, 6 + d] = -1
    bank_n[b, 2 + d] -= 1
    tq[d, c, s, T_ACCESS] = -1
    tq[d, c, s, T_NEXT] = chan_i[c, C_T_FREE + d]
    chan_i[c, C_T_FREE + d] = s
    chan_i[c, C_RT_N + 2 * d] -= 1


@njit(cache=True, inline="always")
def _admit(c, G, chan_f, chan_i, sq, sqa, tq, tqa, active, flow_write, flow_prio, flow_start, fc_next, fc_end,
           bank_n, req_bank):
    """Admission: the most urgent flow's next access enters its queue (the transaction queue with
    per-bank command queues), until a queue is full or no flow has one left (the front end waits).
    Queue ``d`` (0 reads, 1 writes) of channel ``c`` is ``sq[d, c]`` (``tq[d, c]`` in front)."""
    front = G[G_BANKQ] > 0
    while True:
        f = _next_flow(c, active, flow_prio, fc_next, fc_end, chan_i[c, C_RR_LAST])
        if f < 0:
            break
        arrival = max(flow_start[f], chan_f[c, C_LAST_ISSUE])
        d = flow_write[f]
        if front:
            n = chan_i[c, C_RT_N + 2 * d]
            if n >= G[G_RT + d]:
                break
            _tq_append(c, d, fc_next[f, c], arrival, chan_i, tq, tqa, bank_n, req_bank)
            chan_i[c, C_RT_N + 2 * d] = n + 1
        else:
            n = chan_i[c, C_RQ_N + d]
            depth = G[G_RQ + d]
            if n >= depth:
                break
            j = _at(chan_i[c, C_RQ_HEAD + d], n, depth)
            sq[d, c, j] = fc_next[f, c]
            sqa[d, c, j] = arrival
            chan_i[c, C_RQ_N + d] = n + 1
        fc_next[f, c] += 1
        chan_i[c, C_RR_LAST] = f


@njit(cache=True, inline="always")
def _to_command_queues(c, G, chan_i, sq, sqa, tq, tqa, bank_n, req_bank):
    """Transaction queues -> per-bank command queues: in queue order, every entry whose bank
    queue has room moves; whether any moved.

    After a pass every entry left waits for a full bank queue, and bank queues only fill up
    until one of them loses an entry (``_issue``, noted in C_T_FREED). So of the entries left
    by the last pass only the oldest of the bank noted can move, while that bank has room
    (older than every entry admitted since, they go first); then the entries admitted since
    (from C_T_NEW) are looked at in order. With two banks freed every entry is looked at. The
    moves are those of a pass over every entry."""
    cap = G[G_BANKQ]
    moved = False
    for d in range(2):
        new = chan_i[c, C_T_NEW + d]
        fb = chan_i[c, C_T_FREED + d]
        if fb == -2:
            new = chan_i[c, C_RT_HEAD + 2 * d]  # every entry
        elif fb >= 0:
            newest_old = tq[d, c, new, T_SEQ] if new >= 0 else chan_i[c, C_T_SEQ + d]
            while bank_n[fb, d] < cap:
                s = bank_n[fb, 4 + d]
                if s < 0 or tq[d, c, s, T_SEQ] >= newest_old:
                    break
                _tq_to_bank_queue(c, d, s, G, chan_i, sq, sqa, tq, tqa, bank_n, req_bank)
                moved = True
        s = new
        while s >= 0:
            nxt = tq[d, c, s, T_NEXT]
            if bank_n[req_bank[tq[d, c, s, T_ACCESS]], d] < cap:
                _tq_to_bank_queue(c, d, s, G, chan_i, sq, sqa, tq, tqa, bank_n, req_bank)
                moved = True
            s = nxt
        chan_i[c, C_T_NEW + d] = -1
        chan_i[c, C_T_FREED + d] = -1
    return moved


@njit(cache=True, inline="always")
def _candidate(c, T, G, bank_f, bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i, sq, sqa, tq, tqa, bank_n,
               btag, barr, picks, req_bank, req_row, req_rank, req_bg, active, flow_write, flow_prio, flow_start,
               fc_next, fc_end):
    """Channel ``c``'s next command: (what, k, d, kind, pre, act, time, delay, rank). ``what`` is
    NOTHING (no access queued), ACCESS (entry ``k`` of scheduler queue ``d``, its kind and
    command times, ``time`` its column command) or REFRESH (of ``rank``, starting at ``time``:
    due before the pick's column command; the pick is made again after it). Admission, the
    command queues, the read/write turnaround and the pick come first (module docstring)."""
    while True:  # a transaction queue slot freed by a move is filled again at once (reference._admit)
        _admit(c, G, chan_f, chan_i, sq, sqa, tq, tqa, active, flow_write, flow_prio, flow_start, fc_next, fc_end,
               bank_n, req_bank)
        if G[G_BANKQ] == 0 or not _to_command_queues(c, G, chan_i, sq, sqa, tq, tqa, bank_n, req_bank):
            break
    nr = chan_i[c, C_RQ_N]
    nw = chan_i[c, C_WQ_N]
    if nr == 0 and nw == 0:
        return NOTHING, 0, 0, HIT, 0.0, 0.0, 0.0, 0.0, 0
    w_all = nw + chan_i[c, C_WT_N]  # writes pending, in the transaction queue too
    if chan_i[c, C_WRITE_MODE] == 1:
        if nw == 0 or (nr > 0 and w_all <= G[G_LOW]):
            chan_i[c, C_WRITE_MODE] = 0
    elif nw > 0 and (w_all >= G[G_HIGH] or nr == 0):
        chan_i[c, C_WRITE_MODE] = 1
    d = chan_i[c, C_WRITE_MODE]
    write = d == 1
    n = chan_i[c, C_RQ_N + d]
    head = chan_i[c, C_RQ_HEAD + d]
    depth = G[G_RQ + d]
    k = -1
    kind = HIT
    pre = act = cas = delay = 0.0
    if G[G_FRFCFS] == 1:
        # btag[b, 0] == tag: an access to another row than bank b's open one waits (the cap
        # applies); marked when first needed in this pick. btag[b, 1 + miss] == tag: an access
        # to bank b that hits its open row (or misses it) was timed in this pick, arrived at
        # barr[b, miss]: the timing of an access is that of every access of its bank and kind,
        # but for the arrival, and no earlier for a later arrival, so a later one that arrived
        # no earlier cannot go first (ties go to the older) and is not timed
        picks[0] += 1
        tag = picks[0]
        marked = False
        # no column command can go before the channel's own bus constraints: the oldest
        # access that meets them is the pick, with no need to time the rest
        if write:
            floor = max(chan_f[c, C_LAST_WR] + max(T[T_CCD_S], T[T_BURST]), chan_f[c, C_LAST_RD] + T[T_RTW])
        else:
            floor = max(chan_f[c, C_LAST_RD] + max(T[T_CCD_S], T[T_BURST]),
                        chan_f[c, C_LAST_WR] + T[T_CWL] + T[T_BURST] + T[T_WTR_S])
        best = 1e300
        for i in range(n):
            j = _at(head, i, depth)
            r = sq[d, c, j]
            b = req_bank[r]
            miss = 0 if bank_i[b, B_OPEN_ROW] == req_row[r] else 1
            if miss == 0 and bank_i[b, B_STREAK] >= G[G_CAP] and bank_f[b, B_NEXT_PRE] <= floor:
                if not marked:
                    for m in range(n):
                        o = sq[d, c, _at(head, m, depth)]
                        if bank_i[req_bank[o], B_OPEN_ROW] != req_row[o]:
                            btag[req_bank[o], 0] = tag
                    marked = True
                if btag[b, 0] == tag:
                    continue  # capped: another row of the bank waits and its PRE could go
            arrival = sqa[d, c, j]
            if btag[b, 1 + miss] == tag and barr[b, miss] <= arrival:
                continue  # an older access of this bank and kind, arrived no later, was timed
            btag[b, 1 + miss] = tag
            barr[b, miss] = arrival
            kind_i, pre_i, act_i, cas_i, delay_i = _timing(T, G, c, r, arrival, write, G[G_RANKS], bank_f,
                                                           bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i,
                                                           req_bank, req_row, req_rank, req_bg)
            if cas_i < best:
                best = cas_i
                k = i
                kind, pre, act, cas, delay = kind_i, pre_i, act_i, cas_i, delay_i
                if cas_i <= floor:
                    break
    timed = k >= 0  # the pick's timing is at hand
    if k < 0:
        k = 0
    j = _at(head, k, depth)
    r = sq[d, c, j]
    rk = req_rank[r]
    if not timed:
        kind, pre, act, cas, delay = _timing(T, G, c, r, sqa[d, c, j], write, G[G_RANKS], bank_f, bank_i, rank_f,
                                             rank_i, rank_bg_f, chan_f, chan_i, req_bank, req_row, req_rank, req_bg)
    if cas >= rank_f[rk, R_NEXT_REF]:  # a refresh first, then the pick again
        return REFRESH, k, d, kind, pre, act, _refresh_start(G, rk, bank_f, bank_i, rank_f), delay, rk
    return ACCESS, k, d, kind, pre, act, cas, delay, rk


@njit(cache=True, inline="always")
def _issue(c, pick, T, G, bank_f, bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i, sq, sqa, bank_n, stats_i,
           stats_f, req_bank, req_row, req_rank, req_bg, req_flow, req_end, flow_remaining, flow_end, flow_delay):
    """Commit the access ``_candidate`` picked (``pick`` = (k, d, kind, pre, act, cas, delay):
    entry ``k`` of queue ``d`` of channel ``c``): its commands' effect on the bank, rank and
    channel, the counts, its flow, the queue, the page policy. Returns its flow. (At most 30
    arguments: CPython passes more as a tuple, which Numba cannot inline.)"""
    k, d, kind, pre, act, cas, delay = pick
    write = d == 1
    n = chan_i[c, C_RQ_N + d]
    head = chan_i[c, C_RQ_HEAD + d]
    depth = G[G_RQ + d]
    j = _at(head, k, depth)
    r = sq[d, c, j]
    arrival = sqa[d, c, j]
    rk = req_rank[r]
    b = req_bank[r]
    g = req_bg[r]
    if _asleep(T, G, rank_f, rk, arrival):
        slept = arrival - (rank_f[rk, R_LAST_BUSY] + T[T_PD])
        if rank_i[rk, R_OPEN_COUNT] > 0:
            rank_f[rk, R_PD_ACT] += slept
        else:
            rank_f[rk, R_PD_PRE] += slept
    if kind == CONFLICT:
        _close(bank_i, rank_f, rank_i, b, rk, pre)
        stats_i[S_PRES] += 1
        bank_f[b, B_NEXT_ACT] = max(bank_f[b, B_NEXT_ACT], pre + T[T_RP])
    if kind != HIT:
        bank_i[b, B_OPEN_ROW] = req_row[r]
        bank_f[b, B_NEXT_CAS] = act + T[T_RCD]
        bank_f[b, B_NEXT_PRE] = act + T[T_RAS]
        bank_f[b, B_NEXT_ACT] = act + T[T_RC]
        bank_i[b, B_STREAK] = 0
        bank_i[b, B_ACTS] += 1
        stats_i[S_ACTS] += 1
        rank_f[rk, R_LAST_ACT] = act
        rank_bg_f[rk, g, BG_LAST_ACT] = act
        pos = rank_i[rk, R_FAW_POS]
        rank_f[rk, R_FAW + pos] = act
        rank_i[rk, R_FAW_POS] = (pos + 1) % 4
        if rank_i[rk, R_OPEN_COUNT] == 0:
            rank_f[rk, R_ACTIVE_SINCE] = act
        rank_i[rk, R_OPEN_COUNT] += 1
    if kind == HIT:
        stats_i[S_HITS] += 1
        bank_i[b, B_STREAK] += 1
    elif kind == MISS:
        stats_i[S_MISSES] += 1
    else:
        stats_i[S_CONFLICTS] += 1
    if write:
        bank_f[b, B_NEXT_PRE] = max(bank_f[b, B_NEXT_PRE], cas + T[T_CWL] + T[T_BURST] + T[T_WR])
        end = cas + T[T_CWL] + T[T_BURST]
        chan_f[c, C_LAST_WR] = cas
        rank_bg_f[rk, g, BG_LAST_WR] = cas
        stats_i[S_WRITES] += 1
        stats_f[SF_WRITE_LATENCY] += end - arrival
    else:
        bank_f[b, B_NEXT_PRE] = max(bank_f[b, B_NEXT_PRE], cas + T[T_RTP])
        end = cas + T[T_CL] + T[T_BURST]
        chan_f[c, C_LAST_RD] = cas
        rank_bg_f[rk, g, BG_LAST_RD] = cas
        stats_i[S_READS] += 1
        stats_f[SF_READ_LATENCY] += end - arrival
    rank_f[rk, R_LAST_BUSY] = max(rank_f[rk, R_LAST_BUSY], end)
    chan_f[c, C_LAST_CAS] = cas
    chan_i[c, C_LAST_RANK] = rk - c * G[G_RANKS]
    chan_f[c, C_LAST_ISSUE] = cas
    chan_f[c, C_BUS_BUSY] += T[T_BURST]
    extra = 0.0
    if kind == MISS:
        extra = T[T_RCD]
    elif kind == CONFLICT:
        extra = T[T_RP] + T[T_RCD]
    bank_f[b, B_BUSY] += T[T_BURST] + extra
    stats_f[SF_DELAY] += delay
    req_end[r] = end
    if G[G_BANKQ] > 0:
        bank_n[b, d] -= 1
        freed = chan_i[c, C_T_FREED + d]
        chan_i[c, C_T_FREED + d] = b if freed == -1 or freed == b else -2  # two banks: every entry looked at
    f = req_flow[r]
    flow_remaining[f] -= 1
    flow_end[f] = max(flow_end[f], end)
    flow_delay[f] += delay
    chan_i[c, C_RQ_HEAD + d] = _remove(sq, sqa, d, c, head, n, k, depth)
    chan_i[c, C_RQ_N + d] = n - 1
    # page policy
    if G[G_POLICY] != OPEN:
        hit_waits = False
        miss_waits = False
        for e in range(2):
            for i in range(chan_i[c, C_RQ_N + e]):
                o = sq[e, c, _at(chan_i[c, C_RQ_HEAD + e], i, G[G_RQ + e])]
                if req_bank[o] == b:
                    if req_row[o] == req_row[r]:
                        hit_waits = True
                    else:
                        miss_waits = True
        if not hit_waits and (G[G_POLICY] == CLOSED or miss_waits):
            when = bank_f[b, B_NEXT_PRE]
            _close(bank_i, rank_f, rank_i, b, rk, when)
            stats_i[S_PRES] += 1
            bank_f[b, B_NEXT_ACT] = max(bank_f[b, B_NEXT_ACT], when + T[T_RP])
    return f


@njit(cache=True, _nrt=False)
def run_channels(T, G, stop_time, bank_f, bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i, sq, sqa, tq, tqa,
                 bank_n, stats_i, stats_f, req_bank, req_row, req_rank, req_bg, req_flow, req_end,
                 active, flow_write, flow_prio, flow_start, flow_remaining, flow_end, flow_delay, fc_next, fc_end,
                 btag, barr, picks, whats, ki, kf):
    """Advance every channel to ``stop_time``, channel by channel (module docstring); every
    array is updated in place. Per access: admit what the queues take, pick (FR-FCFS or FCFS),
    time it (a refresh due first goes first, then the pick is made again), issue it.

    Compiled without Numba's reference counting (``_nrt=False``): its atomic increments on
    every array handed to an inlined helper cost more than the controller's own work. So the
    kernel allocates nothing; its scratch (``btag``, ``barr``: tags and arrivals per bank, ``picks``:
    the tag counter, and ``whats``, ``ki``, ``kf``: each channel's next command) comes from the caller."""
    for c in range(G[G_CHANNELS]):
        while True:
            what, k, d, kind, pre, act, cas, delay, rk = _candidate(
                c, T, G, bank_f, bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i, sq, sqa, tq, tqa, bank_n,
                btag, barr, picks, req_bank, req_row, req_rank, req_bg, active, flow_write, flow_prio, flow_start,
                fc_next, fc_end)
            if what == NOTHING or cas > stop_time:
                break
            if what == REFRESH:
                _refresh(T, G, rk, cas, bank_f, bank_i, rank_f, rank_i)
                continue
            _issue(c, (k, d, kind, pre, act, cas, delay), T, G, bank_f, bank_i, rank_f, rank_i, rank_bg_f, chan_f,
                   chan_i, sq, sqa, bank_n, stats_i, stats_f, req_bank, req_row, req_rank, req_bg, req_flow, req_end,
                   flow_remaining, flow_end, flow_delay)
    return 0


@njit(cache=True, _nrt=False)
def run_until_complete(T, G, stop_time, bank_f, bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i, sq, sqa, tq,
                       tqa, bank_n, stats_i, stats_f, req_bank, req_row, req_rank, req_bg, req_flow, req_end,
                       active, flow_write, flow_prio, flow_start, flow_remaining, flow_end, flow_delay, fc_next,
                       fc_end, btag, barr, picks, whats, ki, kf):
    """``run_channels`` with the channels' commands issued in time order across channels:
    returns 1 just after the access that completes a flow (the state then being that at its
    column command), or 0 with every command up to ``stop_time`` issued. Channels share no
    state, so the order between them changes nothing but where the call stops. Each channel's
    next command (``_candidate``) waits until it is the earliest; only the channel that
    issued looks for its next one: ``whats[c]``, ``ki[c]`` = (k, d, kind, rank), ``kf[c]`` =
    (pre, act, time, delay)."""
    C = G[G_CHANNELS]
    for c in range(C):
        whats[c], ki[c, 0], ki[c, 1], ki[c, 2], kf[c, 0], kf[c, 1], kf[c, 2], kf[c, 3], ki[c, 3] = _candidate(
            c, T, G, bank_f, bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i, sq, sqa, tq, tqa, bank_n,
            btag, barr, picks, req_bank, req_row, req_rank, req_bg, active, flow_write, flow_prio, flow_start,
            fc_next, fc_end)
    while True:
        c = -1  # the earliest command of all channels
        for j in range(C):
            if whats[j] != NOTHING and kf[j, 2] <= stop_time and (c < 0 or kf[j, 2] < kf[c, 2]):
                c = j
        if c < 0:
            return 0
        done = False
        if whats[c] == REFRESH:
            _refresh(T, G, ki[c, 3], kf[c, 2], bank_f, bank_i, rank_f, rank_i)
        else:
            f = _issue(c, (ki[c, 0], ki[c, 1], ki[c, 2], kf[c, 0], kf[c, 1], kf[c, 2], kf[c, 3]), T, G, bank_f,
                       bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i, sq, sqa, bank_n, stats_i, stats_f,
                       req_bank, req_row, req_rank, req_bg, req_flow, req_end, flow_remaining, flow_end,
                       flow_delay)
            done = flow_remaining[f] == 0
        if done:
            return 1
        whats[c], ki[c, 0], ki[c, 1], ki[c, 2], kf[c, 0], kf[c, 1], kf[c, 2], kf[c, 3], ki[c, 3] = _candidate(
            c, T, G, bank_f, bank_i, rank_f, rank_i, rank_bg_f, chan_f, chan_i, sq, sqa, tq, tqa, bank_n,
            btag, barr, picks, req_bank, req_row, req_rank, req_bg, active, flow_write, flow_prio, flow_start,
            fc_next, fc_end)


@njit(cache=True)
def commands_before_end(flows, fc_next, fc_end, flow_prio, depth):
    """The fewest column commands one channel issues before any of ``flows`` ends: per flow
    and channel, its accesses not yet admitted, after the more urgent flows' not yet admitted
    there beyond a queue's depth (the front end admits the most urgent first); per flow the
    largest over the channels; the smallest over the flows."""
    fewest = 1 << 62
    for a in range(flows.shape[0]):
        f = flows[a]
        worst = 0
        for c in range(fc_next.shape[1]):
            ahead = 0
            for b in range(flows.shape[0]):
                g = flows[b]
                if flow_prio[g] < flow_prio[f]:
                    ahead += fc_end[g, c] - fc_next[g, c]
            worst = max(worst, fc_end[f, c] - fc_next[f, c] + max(ahead - depth, 0))
        fewest = min(fewest, worst)
    return fewest


@njit(cache=True)
def view_chunks(shape, strides, itemsize):
    """Byte offsets and sizes of the contiguous chunks of a strided view (from offset 0), in
    issue order, abutting chunks merged: ``npusim.kernels.render_chunks`` (RenderChunks, whose
    ``render_chunks_reference`` a test holds this equal to) compiled, as the banks model needs
    it for every DMA command and has Numba loaded anyway. The trailing contiguous axes form one
    block; the leading axes are walked in row-major order, each block joining the chunk it
    starts at the end of."""
    rank = shape.shape[0]
    first = rank
    expected = 1
    for k in range(rank - 1, -1, -1):  # first axis from which the view is contiguous
        if shape[k] != 1 and strides[k] != expected:
            break
        expected *= shape[k]
        first = k
    block = itemsize
    for k in range(first, rank):
        block *= shape[k]
    count = 1
    for k in range(first):
        count *= shape[k]
    if block == 0 or count == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    offsets = np.empty(count, dtype=np.int64)
    sizes = np.empty(count, dtype=np.int64)
    index = np.zeros(max(first, 1), dtype=np.int64)
    element = 0
    m = 0
    for _ in range(count):
        start = element * itemsize
        if m > 0 and offsets[m - 1] + sizes[m - 1] == start:
            sizes[m - 1] += block
        else:
            offsets[m] = start
            sizes[m] = block
            m += 1
        k = first - 1  # the next block: the last leading axis steps, carrying into earlier ones
        while k >= 0:
            index[k] += 1
            element += strides[k]
            if index[k] < shape[k]:
                break
            element -= strides[k] * shape[k]
            index[k] = 0
            k -= 1
    return offsets[:m], sizes[:m]


@njit(cache=True)
def access_addresses(offsets, sizes, burst, access):
    """Addresses of the device accesses a transfer's chunks make, in issue order.

    The DMA moves every burst of ``burst`` bytes its chunks touch, a burst shared by adjacent
    chunks once (``npusim.plan.transfer_cost``); each burst is ``burst / access`` accesses of
    the device when its access is smaller, else the access holding it (an access shared by
    consecutive bursts once)."""
    n = 0
    last = -1
    for i in range(offsets.shape[0]):
        first_b = offsets[i] // burst
        last_b = (offsets[i] + sizes[i] - 1) // burst
        n += last_b - first_b + 1
        if first_b == last:
            n -= 1
        last = last_b
    per = burst // access if burst > access else 1
    out = np.empty(n * per, dtype=np.int64)
    m = 0
    last = -1
    prev_access = -1
    for i in range(offsets.shape[0]):
        first_b = offsets[i] // burst
        last_b = (offsets[i] + sizes[i] - 1) // burst
        for bb in range(first_b, last_b + 1):
            if bb == last:
                continue
            last = bb
            if burst >= access:
                for j in range(per):
                    out[m] = bb * burst + j * access
                    m += 1
            else:
                a = (bb * burst) // access * access
                if a != prev_access:
                    out[m] = a
                    m += 1
                    prev_access = a
    return out[:m]


@njit(cache=True)
def decode_grouped(addresses, offset_bits, shifts, masks, rows, channels, ranks, bankgroups, banks_per_group):
    """The accesses at byte ``addresses`` (issue order) decoded (``npusim.dram.mapping``: field
    f is ``(address >> offset_bits >> shifts[f]) & masks[f]``, the row ``% rows``; fields in
    ``mapping.FIELDS`` order) and grouped by channel: ``grouped`` (4, n) holds each access's
    global bank, row, global rank and bank group, channel 0's accesses first, each channel's
    in issue order, channel c's from ``offsets[c]``; ``prefix[c, i]`` counts channel c's
    accesses among the first i, so the accesses lo:hi of channel c are
    ``grouped[:, offsets[c] + prefix[c, lo]:offsets[c] + prefix[c, hi]]``."""
    m = addresses.shape[0]
    prefix = np.zeros((channels, m + 1), dtype=np.int64)
    chs = np.empty(m, dtype=np.int64)
    for i in range(m):
        c = ((addresses[i] >> offset_bits) >> shifts[5]) & masks[5]
        chs[i] = c
        for cc in range(channels):
            prefix[cc, i + 1] = prefix[cc, i]
        prefix[c, i + 1] += 1
    offsets = np.zeros(channels + 1, dtype=np.int64)
    for c in range(channels):
        offsets[c + 1] = offsets[c] + prefix[c, m]
    pos = offsets[:channels].copy()
    grouped = np.empty((4, m), dtype=np.int64)
    for i in range(m):
        a = addresses[i] >> offset_bits
        c = chs[i]
        rank = c * ranks + ((a >> shifts[1]) & masks[1])
        bg = (a >> shifts[2]) & masks[2]
        j = pos[c]
        pos[c] += 1
        grouped[0, j] = (rank * bankgroups + bg) * banks_per_group + ((a >> shifts[3]) & masks[3])
        grouped[1, j] = (a >> shifts[0]) % rows
        grouped[2, j] = rank
        grouped[3, j] = bg
    return grouped, prefix, offsets


@njit(cache=True)
def add_accesses(pool, req_end, grouped, prefix, offsets, lo, hi, fid, first, fc_next, fc_end):
    """Append the accesses ``lo:hi`` of a command (``decode_grouped``) to the pool from
    ``first`` as flow ``fid``: channel by channel, each in issue order (``fc_next[fid, c]`` ..
    ``fc_end[fid, c]``); returns how many."""
    pos = first
    for c in range(prefix.shape[0]):
        fc_next[fid, c] = pos
        for j in range(offsets[c] + prefix[c, lo], offsets[c] + prefix[c, hi]):
            pool[0, pos] = grouped[0, j]
            pool[1, pos] = grouped[1, j]
            pool[2, pos] = grouped[2, j]
            pool[3, pos] = grouped[3, j]
            pool[4, pos] = fid
            req_end[pos] = 0.0
            pos += 1
        fc_end[fid, c] = pos
    return pos - first

