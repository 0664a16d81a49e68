"""The bank-state kernel: a DRAM controller and its banks, run over batches of accesses.

One call (``run_channels``) advances every channel of the device up to ``stop_time``: it
admits the accesses of the flows in flight into each channel's read and write queues, picks
one at a time as the scheduler would, works out its commands' times from the bank, rank and
channel state, and commits it when its column command falls at or before ``stop_time``;
``run_until_complete`` does the same in time order across channels and stops when a flow
completes. The simulator calls them when a transfer starts and on the way to the completion it
predicts (the compiled event loop from C, the SimPy model through ``npusim.dram.model``), so a
descriptor's thousands of accesses cost a few calls, not one event each.
The kernel is C (``npusim/native/bank_core.h``, built at install; why C: ``npusim.native``);
this module holds the model's description, the state layout both sides share, and the
functions the controller calls. ``npusim.dram.reference`` is the same controller in plain
Python; a test holds them equal.

**The controller**, per channel (channels share nothing but the flows feeding them):

- *Admission.* Each flow (one transfer, or one band of it: all reads or all writes) has its
  accesses for this channel in issue order. The front end admits them into the read queue
  (depth ``read_queue``) or the write queue (``write_queue``), taking the most urgent flows
  first (lowest priority value: the step the data is needed at), round-robin among equally
  urgent ones, one access at a time; when the queue the next access goes to is full, the
  front end waits (head-of-line blocking). An access arrives when admitted: at the column
  command that freed its slot, or at its flow's start, and no earlier than the time the
  controller was last run to (``C_PRESENT``: an access a newly added flow unblocks is admitted
  when that flow arrives, not back-dated to the last column command). The scheduler sees these queues whole
  (``bank_queue`` 0, the default: Ramulator 2's ``GenericDDR``, which
  ``benchmarks/dram_validation.py`` holds it to). With per-bank command queues
  (``bank_queue`` > 0, DRAMsim3's ``PER_BANK`` structure) the read and write queues are
  transaction queues: their oldest accesses whose bank's command queue (``bank_queue``
  deep, reads and writes apart) has room move on to it, the slots they free are filled again
  at once (so pausing the controller anywhere changes nothing), and the scheduler sees the
  command queues; an access's arrival stays its admission to the transaction queue.
- *Read/write turnaround* with watermarks (Ramulator 2's and most controllers' write drain;
  ``npusim.dram.model.write_watermarks``): the
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
      WR   >= ACT + tRCD, WR + max(tCCD_S, tBurst), WR + tCCD_L_WR (bank group), RD + tRTW
      any column command after one to another rank: + tBurst + tRTRS

  with tCCD_L_WR = tCCD_L but on DDR5 (JESD79-5's longer write-to-write within a bank group),
  tBurst = BL / data rate and tRTW = tCL + tBurst + 2 tCK - tCWL (Ramulator 2's LPDDR5
  read-to-write rule). Data moves tCL (reads) or tCWL (writes) after the column command, for
  tBurst; an access completes when its data has moved.
- *Posted writes.* A read flow is done when its last access's data has moved; a write flow
  when its last access is in the write queue (its admission), as DRAMsim3 (``controller.cc``,
  ``AddTransaction``: a write completes the cycle after it is added) and gem5 (``MemCtrl``: a
  write is answered once it is in the write queue) acknowledge a write; Ramulator 2 calls a
  write back when its WR issues. The DMA engine that stored the data is free then, and the
  write queue (full, it admits a write only as the drain issues one) is what holds stores back.
  A write flow's accesses are issued later, as the scheduler drains the queue; its slot is kept
  until they are (``remaining``), and its bank delay is not counted (none of it delays the store).
- *Command bus.* Each command holds the channel's command/address bus for its length in ticks
  (``DramDevice.command_bus``: LPDDR4's ACT and RD take 4 clocks, its PRE 2; DDR5's ACT and RD
  2; HBM's row and column commands have a bus each), one command per tick at most, as
  Ramulator 2 (``command_cycles``) and DRAMSys (``commandLengthInCycles``) model it: once the
  scheduler has picked an access, its PRE, ACT and column command each move to the first
  free run of ticks from the time above (tick = floor(time x (1 / tCMD)); a later start begins on a
  tick), the ACT then tRP after the PRE and the column command tRCD after the ACT. A split ACT
  (LPDDR5's ACT-1 and ACT-2, one tick each, other commands allowed between) goes at the first
  free tick, its second part at the first free tick after that when the access is committed. The bus
  remembers at least the last ``CMD_WINDOW / 2`` ticks before the latest it gave out (its
  window moves on by half its length); a command earlier than that finds its ticks free. What the scheduler compares stays the times above (the bus
  only delays the pick). Not on the bus: refresh (one REF per tREFI) and the precharges of the
  closed and adaptive page policies (an auto-precharge, RDA/WRA, needs no command of its own).
- *Page policy* after each column command: ``open`` keeps the row open; ``closed``
  precharges it (as soon as tRAS/tRTP/tWR allow) unless a queued access hits it; ``adaptive``
  precharges only when no queued access hits the row and one waits for another row of the
  bank (gem5's close-adaptive).
- *Power-down* (``ControllerConfig.powerdown_after``: the hardware file's ``dram.powerdown_after``,
  whose default 0 keeps the DRAM powered up): a rank with no access for that long
  since its last data (or refresh) enters power-down (active power-down if a row is open,
  precharged power-down if not), and the next access's commands wait tXP for it to exit.
- *Stack IDs* (HBM3, ``DramDevice.stack_ids``): the ranks of a channel are the stack IDs of one
  pseudo channel; tRRD_S and tFAW count the ACTs of all of them (tRRD_L stays per bank group
  of each), and they refresh together (JESD238, as Ramulator 2's HBM3 has it).
- *Refresh*: all-bank refresh of each rank every tREFI (ranks staggered by tREFI / ranks; with
  stack IDs, channels staggered by tREFI / channels):
  when an access's column command would fall after a refresh is due, the rank's open rows are
  precharged, the rank refreshes for tRFC (rows closed, no ACT until it ends), then the
  scheduler picks again.

Every access adds to the counts (hits, misses, conflicts, activations, precharges, reads,
writes), to its bank's and channel's busy time, and to its flow's *bank delay*: how much
later its column command went than the channel's data bus would have allowed (the ACT/PRE/
refresh timing the bank imposed, its bank group's column-to-column times tCCD_L and tWTR_L,
and the wait for the command bus), which the simulator
reports as DRAM bank timing.
"""

from __future__ import annotations

import numpy as np

from npusim.native import load

#: Timing parameters, in this order in the kernel's float array (ns).
TIMING_FIELDS = ("tRCD", "tRP", "tRAS", "tRC", "tCL", "tCWL", "tBurst", "tCCD_S", "tCCD_L", "tRRD_S",
                 "tRRD_L", "tFAW", "tWR", "tWTR_S", "tWTR_L", "tRTP", "tRTW", "tREFI", "tRFC", "tRTRS", "tXP", "tPD",
                 "tCMD", "tCCD_L_WR")
(T_RCD, T_RP, T_RAS, T_RC, T_CL, T_CWL, T_BURST, T_CCD_S, T_CCD_L, T_RRD_S, T_RRD_L, T_FAW, T_WR, T_WTR_S,
 T_WTR_L, T_RTP, T_RTW, T_REFI, T_RFC, T_RTRS, T_XP, T_PD, T_CMD, T_CCD_L_WR) = range(len(TIMING_FIELDS))

#: Integer parameters (``G``): geometry and policies.
#: G_RQ / G_WQ: the scheduler's queues per channel; with G_BANKQ > 0 (per-bank command queues of
#: that depth, DRAMsim3's PER_BANK structure) transaction queues of G_RT / G_WT entries come first.
#: G_CMD_PRE / ACT / CAS: ticks (of tCMD ns) a command holds the command bus (0: no bus model);
#: G_CMD_DUAL: separate row and column command buses; G_CMD_SPLIT: the ACT is G_CMD_ACT one-tick commands.
#: G_STACK_IDS: a channel's ranks are the stack IDs of one HBM3 pseudo channel, sharing its activation
#: window (tRRD_S, tFAW) and all-bank refresh.
(G_CHANNELS, G_RANKS, G_BANKGROUPS, G_BANKS_PER_GROUP, G_POLICY, G_FRFCFS, G_CAP, G_RQ, G_WQ, G_HIGH, G_LOW,
 G_POWERDOWN, G_BANKQ, G_RT, G_WT, G_CMD_PRE, G_CMD_ACT, G_CMD_CAS, G_CMD_DUAL, G_CMD_SPLIT, G_STACK_IDS) = range(21)
OPEN, CLOSED, ADAPTIVE = 0, 1, 2
HIT, MISS, CONFLICT = 0, 1, 2
NOTHING, ACCESS, REFRESH = 0, 1, 2  # what a channel does next (_candidate)

# Columns of the state arrays.
B_NEXT_ACT, B_NEXT_PRE, B_NEXT_CAS, B_BUSY = range(4)              # bank_f
B_OPEN_ROW, B_STREAK, B_ACTS, B_RANK, B_BG = range(5)               # bank_i (rank, bank group: fixed)
(R_LAST_ACT, R_NEXT_REF, R_ACTIVE_SINCE, R_ACTIVE_TIME, R_LAST_BUSY, R_PD_ACT, R_PD_PRE,
 R_FAW) = range(8)  # rank_f (R_FAW .. R_FAW + 3)
R_FAW_POS, R_OPEN_COUNT, R_REFRESHES = range(3)                     # rank_i
BG_LAST_ACT, BG_LAST_RD, BG_LAST_WR = range(3)                      # rank_bg_f
C_LAST_RD, C_LAST_WR, C_LAST_CAS, C_LAST_ISSUE, C_BUS_BUSY, C_WRITE_ACK, C_PRESENT = range(7)  # chan_f
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
# bank_other[b, d]: bank b's entries in scheduler queue d that miss its open row (FR-FCFS's
# row-hit cap asks whether one waits at every pick of a streaming bank: a count kept as entries
# come and go, counted again when the bank's row changes, instead of a pass over the queue).
T_ACCESS, T_NEXT, T_PREV, T_BANK_NEXT, T_SEQ = range(5)  # tq[d, c, slot]
S_READS, S_WRITES, S_HITS, S_MISSES, S_CONFLICTS, S_ACTS, S_PRES = range(7)  # stats_i
SF_READ_LATENCY, SF_WRITE_LATENCY, SF_DELAY = range(3)              # stats_f
# cmd_bus[c, bus]: the window of a command bus (bus 1, the column commands', used only when
# G_CMD_DUAL): its first tick, the tick after the latest taken, then one bit per tick of the
# CMD_WINDOW ticks from the first (tick j at bit j mod 64 of word (j mod CMD_WINDOW) // 64).
CMD_WINDOW = 1024
CMD_STRIDE = 2 + CMD_WINDOW // 64

NEG = -1e300


_C = load("bank_kernel")


def _int64(items: bytearray) -> np.ndarray:
    return np.frombuffer(items, dtype=np.int64)


def run(T, G, stop: float, until_complete: bool, state_f, state_i, layout, pool, active, scratch_i,
        scratch_f) -> int:
    """Advance a controller to ``stop`` ns, every channel (``until_complete`` false: channel by
    channel, every column command up to ``stop`` issued; returns 0) or in time order across
    channels, returning 1 just after the access that makes a flow done (``Controller.done``: a
    read's column command, a write's admission; the state then being that at that moment, one
    issue and the admissions after it possibly making more than one flow done) or 0 with every
    command up to ``stop`` issued. Channels share no state, so the order between them changes
    nothing but where the call stops.

    The state arrays (``npusim.dram.controller._STATE``) are views into ``state_f`` (float64)
    and ``state_i`` (int64) at the offsets ``layout`` gives, the flows' capacity last; ``pool``
    (3, n) int32 holds each access's global bank, row and flow (a bank's global rank and bank
    group are in ``bank_i``), ``active`` the live flows (sorted), the scratch the pick's
    tags (``btag`` (banks, 2): a bank's hit and miss timed in this pick; ``picks`` (1),
    ``whats`` (channels), ``ki`` (channels, 4) | ``barr`` (banks, 2), ``kf`` (channels, 4)).
    Every array is updated in place."""
    return _C.run(T, G, stop, until_complete, state_f, state_i, layout, pool, active, scratch_i, scratch_f)


def commands_before_end(flows, fc_next, fc_end, fc_left, flow_prio, flow_write, depth, write_depth) -> int:
    """The fewest column commands one channel issues before any of ``flows`` ends: per read flow
    and channel, its accesses not yet issued there (``fc_left``: each takes a column command of
    that channel), or, when more, those not yet admitted after the more urgent flows' not yet
    admitted there beyond ``depth`` (the front end admits the most urgent first; the most
    entries a channel's queues hold without a column command); per write flow (done at its
    last admission) its accesses not yet admitted beyond ``write_depth``, the slots its queues
    can have free; per flow the largest over the channels; the smallest over the flows. A lower
    bound: the simulator advances the controller that far without looking for completions
    (``npusim.dram.controller.queue_depths`` gives both depths)."""
    return _C.commands_before_end(flows, fc_next, fc_end, fc_left, flow_prio, flow_write, fc_next.shape[1], depth,
                                  write_depth)


def view_chunks(shape, strides, itemsize: int) -> tuple[np.ndarray, np.ndarray]:
    """Byte offsets and sizes of the contiguous chunks of a strided view (from offset 0), in
    issue order, abutting chunks merged: ``npusim.kernels.render_chunks`` (RenderChunks, whose
    ``render_chunks_reference`` a test holds this equal to) compiled, as the banks model needs
    it for every DMA command. The trailing contiguous axes form one block; the leading axes
    are walked in row-major order, each block joining the chunk it starts at the end of."""
    offsets, sizes = _C.view_chunks(shape, strides, itemsize)
    return _int64(offsets), _int64(sizes)


def access_addresses(offsets, sizes, burst: int, access: int) -> np.ndarray:
    """Addresses of the device accesses a transfer's chunks make, in issue order.

    The DMA moves every burst of ``burst`` bytes its chunks touch, a burst shared by adjacent
    chunks once (``npusim.plan.transfer_cost``); each burst is ``burst / access`` accesses of
    the device when its access is smaller, else the access holding it (an access shared by
    consecutive bursts once)."""
    return _int64(_C.access_addresses(np.ascontiguousarray(offsets, dtype=np.int64),
                                      np.ascontiguousarray(sizes, dtype=np.int64), int(burst), int(access)))


def decode_grouped(addresses, offset_bits, shifts, masks, rows, channels, ranks, bankgroups, banks_per_group):
    """The accesses at byte ``addresses`` (issue order) decoded (``npusim.dram.mapping``: field
    f is ``(address >> offset_bits >> shifts[f]) & masks[f]``, the row ``% rows``; fields in
    ``mapping.FIELDS`` order) and grouped by channel: ``grouped`` (2, n) holds each access's
    global bank and row, channel 0's accesses first, each channel's
    in issue order, channel c's from ``offsets[c]``; ``prefix[c, i]`` counts channel c's
    accesses among the first i, so the accesses lo:hi of channel c are
    ``grouped[:, offsets[c] + prefix[c, lo]:offsets[c] + prefix[c, hi]]``."""
    grouped, prefix, offsets = _C.decode_grouped(addresses, offset_bits, shifts, masks, rows, channels, ranks,
                                                 bankgroups, banks_per_group)
    m = len(addresses)
    return _int64(grouped).reshape(2, m), _int64(prefix).reshape(channels, m + 1), _int64(offsets)


def add_accesses(pool, grouped, prefix, offsets, lo, hi, fid, first, fc_next, fc_end) -> int:
    """Append the accesses ``lo:hi`` of a command (``decode_grouped``) to the pool from
    ``first`` as flow ``fid``: channel by channel, each in issue order (``fc_next[fid, c]`` ..
    ``fc_end[fid, c]``); returns how many."""
    return _C.add_accesses(pool, grouped, prefix, offsets, lo, hi, fid, first, fc_next, fc_end)
