"""The simulator's event loop compiled (Numba): the same run as ``npusim.sim.engine``'s SimPy
model, event for event, without one Python object per event and per command.

Why it exists: a tiled plan runs tens of thousands to a million commands, and the SimPy model
spends ~80 µs of Python per command on events, generators and bookkeeping (issue 28). This
kernel holds the same model as arrays: the command queues, DMA transfers, DMA channels and
shared cores, the shared DRAM bandwidth (``npusim.sim.bandwidth``) and the tagged scratchpad
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

What it does not do (``engine.simulate`` keeps SimPy for these): jitter, ``dram.model:
banks``, plans with a DRAM layout (live DRAM contents are checked); nor progress reports or
a stop at the wall-clock guard midway (the engine checks the guard once, at the end). On any error (a scratchpad check failing, a deadlock, the event budget, a
pool too small) it stops and returns a status; the caller then runs the SimPy model, which
raises the same error with its message (or, for a small pool, reruns with a larger one).

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
from operator import attrgetter

import numba
import numpy as np

from npusim.errors import SimulationError
from npusim.plan.command_table import KIND_CODES, KINDS
from npusim.plan.transfer_cost import address_cycles
from npusim.sim.critical_path import CommandTiming
from npusim.sim.engine import BOUND_CAUSE, DMA_CAUSES
from npusim.sim.report import Pairs, TimelineEntry
from npusim.util.fast_init import twin_constructor

# Statuses
OK, SCRATCHPAD_ERROR, DEADLOCK, EVENT_BUDGET, POOL_FULL = range(5)

# Callback kinds
RESUME_QUEUE, RESUME_DMA, BANDWIDTH_WAKE, GRANT, BAND_SIGNAL = range(5)

# SimPy priorities
URGENT, NORMAL = 0, 1

# binding_at codes (CommandTiming.binding_at)
AT_END, AT_START, AT_BAND = range(3)

# Command kinds: the codes of the Program's kind column
COMPUTE, LOAD, STORE = KIND_CODES["compute"], KIND_CODES["load"], KIND_CODES["store"]

# Bits of ``int_mask``: which recorded times SimPy held as int (an event chain from time 0
# of zero delays only: SimPy's clock starts at int 0), so reports print them alike
READY_INT, START_INT, END_INT, BAND_INT = 1, 2, 4, 8


# Slots of the kernel's integer state ``S`` (scalars the helpers update)
(SEQ, FREE_EVENTS, FREE_NODES, NODES_TAKEN, BLOCKS, USED, PEAK, N_OCC, N_DRAM, FLOWS_NOW, INFLIGHT, MOVING,
 NEXT_FLOW, PENDING, STATUS, N_DONE, HEAP_SIZE, N_DMA_STEPS, N_STATE) = range(19)
PRIORITY_STEP = 1 << 62  # a key's priority part: above any scheduling order
# Rows of the event table ``E`` and of the callback table ``K``
HEAD, TAIL, UNIT_NEXT = range(3)
NEXT, WHAT, ARG = range(3)


# -- events and callbacks ----------------------------------------------------------------------
@numba.njit(cache=True)
def _new_event(S, free_events):
    """An event from the pool (-1, and the status set, when the pool is empty)."""
    if S[FREE_EVENTS] == 0:
        S[STATUS] = POOL_FULL
        return -1
    S[FREE_EVENTS] -= 1
    return free_events[S[FREE_EVENTS]]


@numba.njit(cache=True)
def _schedule(heap, S, ev, at, priority, is_int):
    """``Environment.schedule``: the event is processed at ``at``, after every event scheduled
    before it for the same time and priority. The heap is SimPy's (time, priority, scheduling
    order) as arrays: times, keys (priority * 2**62 + order), events and is-int flags."""
    times, keys, events, ints = heap
    key = priority * PRIORITY_STEP + S[SEQ]
    S[SEQ] += 1
    i = S[HEAP_SIZE]
    S[HEAP_SIZE] += 1
    while i > 0:  # sift up
        parent = (i - 1) >> 1
        if times[parent] < at or (times[parent] == at and keys[parent] < key):
            break
        times[i], keys[i], events[i], ints[i] = times[parent], keys[parent], events[parent], ints[parent]
        i = parent
    times[i], keys[i], events[i], ints[i] = at, key, ev, is_int


@numba.njit(cache=True)
def _pop(heap, S):
    """(time, event, is-int) of the earliest event, removed from the heap."""
    times, keys, events, ints = heap
    at, ev, is_int = times[0], events[0], ints[0]
    S[HEAP_SIZE] -= 1
    size = S[HEAP_SIZE]
    t, k, e, b = times[size], keys[size], events[size], ints[size]
    i = 0
    while True:  # sift the last entry down from the root
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and (times[child + 1] < times[child]
                                 or (times[child + 1] == times[child] and keys[child + 1] < keys[child])):
            child += 1
        if t < times[child] or (t == times[child] and k < keys[child]):
            break
        times[i], keys[i], events[i], ints[i] = times[child], keys[child], events[child], ints[child]
        i = child
    times[i], keys[i], events[i], ints[i] = t, k, e, b
    return at, ev, is_int


@numba.njit(cache=True)
def _on(S, E, K, free_nodes, ev, what, arg):
    """Add a callback to ``ev`` (after those it has: SimPy runs them in that order). Its node
    is the last one freed (``free_nodes`` is a stack of them), else the lowest never taken."""
    if S[FREE_NODES] > 0:
        S[FREE_NODES] -= 1
        node = free_nodes[S[FREE_NODES]]
    elif S[NODES_TAKEN] < free_nodes.shape[0]:
        node = S[NODES_TAKEN]
        S[NODES_TAKEN] += 1
    else:
        S[STATUS] = POOL_FULL
        return
    K[NEXT, node], K[WHAT, node], K[ARG, node] = -1, what, arg
    if E[HEAD, ev] == -1:
        E[HEAD, ev] = node
    else:
        K[NEXT, E[TAIL, ev]] = node
    E[TAIL, ev] = node


@numba.njit(cache=True)
def _timeout(heap, S, E, K, free_events, free_nodes, at, is_int, what, arg):
    """A new event scheduled at ``at`` (a Timeout, or a process start when URGENT is asked
    through ``what`` = RESUME_DMA), with one callback (none when ``what`` < 0)."""
    ev = _new_event(S, free_events)
    if ev == -1:
        return -1
    _schedule(heap, S, ev, at, np.int64(URGENT if what == RESUME_DMA else NORMAL), is_int)
    if what >= 0:
        _on(S, E, K, free_nodes, ev, what, arg)
    return ev


@numba.njit(cache=True)
def _sample(times, values, ints, S, count, now, now_int, value):
    """Append (now, value) to a counter track, or replace its last sample taken at ``now``."""
    i = S[count]
    if i > 0 and times[i - 1] == now:
        i -= 1
    else:
        S[count] += 1
    times[i], values[i], ints[i] = now, value, now_int


# -- units: DMA channels and shared cores (engine._Units) ---------------------------------------
@numba.njit(cache=True)
def _grant(heap, S, E, units, u, now, now_int):
    """Grant the head of unit ``u``'s queue if a unit is free (its request event succeeds)."""
    head = units[2, u]
    if head != -1 and units[1, u] < units[0, u]:
        units[1, u] += 1
        units[2, u] = E[UNIT_NEXT, head]
        if units[2, u] == -1:
            units[3, u] = -1
        _schedule(heap, S, head, now, np.int64(NORMAL), now_int)


@numba.njit(cache=True)
def _request(heap, S, E, free_events, units, u, now, now_int):
    """A request of unit ``u``: it joins the queue, the head is granted if a unit is free."""
    request = _new_event(S, free_events)
    if request == -1:
        return -1
    E[UNIT_NEXT, request] = -1
    if units[3, u] == -1:
        units[2, u] = request
    else:
        E[UNIT_NEXT, units[3, u]] = request
    units[3, u] = request
    _grant(heap, S, E, units, u, now, now_int)
    return request


@numba.njit(cache=True)
def _release_unit(heap, S, E, K, free_events, free_nodes, units, u, now, now_int):
    """Free a unit at once; a release event grants the head of the queue when processed."""
    units[1, u] -= 1
    _timeout(heap, S, E, K, free_events, free_nodes, now, now_int, np.int64(GRANT), u)


# -- the scratchpad (npusim.sim.scratchpad.TaggedScratchpad) ------------------------------------
@numba.njit(cache=True)
def _bisect(starts, count, value):
    """How many of the first ``count`` (sorted) ``starts`` are <= ``value`` (bisect_right)."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) >> 1
        if starts[mid] <= value:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True)
def _claim(S, c, write_ptr, write_res, write_off, write_size, live, valid, res_start, blocks, capacity):
    """Claim the ranges command ``c`` writes; False when one is past the capacity or overlaps a
    live block."""
    for i in range(write_ptr[c], write_ptr[c + 1]):
        r, size = write_res[i], write_size[i]
        if live[r] or size <= 0:
            continue  # a later write into its own residency, or no bytes
        lo = write_off[i]
        hi = lo + size
        n_blocks = S[BLOCKS]
        if hi > capacity:
            return False
        j = _bisect(blocks[0], n_blocks, lo)  # the blocks starting before lo ...
        j = max(j - 1, 0)
        while j < n_blocks and blocks[0, j] < hi:  # ... from the last of them, overlapping [lo, hi)
            if blocks[1, j] > lo:
                return False
            j += 1
        j = _bisect(blocks[0], n_blocks, lo)
        for k in range(n_blocks, j, -1):
            blocks[0, k], blocks[1, k] = blocks[0, k - 1], blocks[1, k - 1]
        blocks[0, j], blocks[1, j] = lo, hi
        S[BLOCKS] += 1
        live[r], valid[r], res_start[r] = True, False, lo
        S[USED] += size
        S[PEAK] = max(S[PEAK], S[USED])
    return True


@numba.njit(cache=True)
def _release(S, r, live, res_start, blocks):
    """Free residency ``r``'s block (its last user completed)."""
    if not live[r]:
        return
    n_blocks = S[BLOCKS]
    j = _bisect(blocks[0], n_blocks, res_start[r] - 1)  # the block starting at res_start[r]
    S[USED] -= blocks[1, j] - blocks[0, j]
    for k in range(j, n_blocks - 1):
        blocks[0, k], blocks[1, k] = blocks[0, k + 1], blocks[1, k + 1]
    S[BLOCKS] -= 1
    live[r] = False


@numba.njit(cache=True)
def _reads_ok(c, which, read_ptr, read_res, read_size, live, valid, stream_ptr, stream_list, late,
              write_ptr, write_res):
    """Whether command ``c``'s reads find their residencies filled: all of them (``which`` 0),
    those no streamed command still arriving writes (1), or only those (2)."""
    for i in range(read_ptr[c], read_ptr[c + 1]):
        r = read_res[i]
        if which != 0:
            arriving = False
            for j in range(stream_ptr[c], stream_ptr[c + 1]):
                if late[j]:
                    w = stream_list[j]
                    for k in range(write_ptr[w], write_ptr[w + 1]):
                        if write_res[k] == r:
                            arriving = True
            if arriving != (which == 2):
                continue
        if read_size[i] > 0 and not (live[r] and valid[r]):
            return False
    return True


# -- the bus (npusim.sim.bandwidth.SharedBandwidth) --------------------------------------------
@numba.njit(cache=True)
def _advance(S, F, flow_left, moving, rate, now):
    """Move the moving flows' bytes on to now, the bus shared equally among them."""
    dt = now - F[0]
    n_moving = S[MOVING]
    if n_moving > 0 and dt > 0:
        share = rate * dt / n_moving
        for i in range(n_moving):
            flow_left[moving[i]] -= share
        F[1] += dt
    F[0] = now


@numba.njit(cache=True)
def _next_completion(heap, S, E, K, free_events, free_nodes, flow_left, moving, rate, now):
    """Schedule a wake-up at the next completion of a moving flow (``_schedule``)."""
    n_moving = S[MOVING]
    if n_moving == 0:
        S[PENDING] = -1
        return
    soonest = flow_left[moving[0]]
    for i in range(1, n_moving):
        soonest = min(soonest, flow_left[moving[i]])
    delay = max(soonest, 0.0) * n_moving / rate
    S[PENDING] = _timeout(heap, S, E, K, free_events, free_nodes, now + delay, np.bool_(False), np.int64(BANDWIDTH_WAKE),
                           np.int64(0))


@numba.njit(cache=True)
def _transfer(heap, S, F, E, K, free_events, free_nodes, flow_left, flow_priority, flow_done, inflight,
              moving, rate, nbytes, priority, now, now_int):
    """An event that succeeds when ``nbytes`` have crossed the bus (lower ``priority`` first)."""
    done = _new_event(S, free_events)
    if done == -1:
        return -1
    if nbytes <= 0:
        _schedule(heap, S, done, now, np.int64(NORMAL), now_int)
        return done
    _advance(S, F, flow_left, moving, rate, now)
    f = S[NEXT_FLOW]
    S[NEXT_FLOW] += 1
    flow_left[f], flow_priority[f], flow_done[f] = nbytes, priority, done
    inflight[S[INFLIGHT]] = f
    S[INFLIGHT] += 1
    if S[MOVING] == 0 or priority == flow_priority[moving[0]]:
        moving[S[MOVING]] = f
        S[MOVING] += 1
    elif priority < flow_priority[moving[0]]:
        moving[0] = f
        S[MOVING] = 1
    _next_completion(heap, S, E, K, free_events, free_nodes, flow_left, moving, rate, now)
    return done


@numba.njit(cache=True)
def _wake(heap, S, F, E, K, free_events, free_nodes, flow_left, flow_priority, flow_done, inflight,
          moving, still, rate, now, now_int):
    """The next completion: the flows done succeed, the bus goes to the most urgent left."""
    _advance(S, F, flow_left, moving, rate, now)
    limit = 1e-6 * max(1.0, rate)  # remaining bytes are floats accumulated over many updates
    n_moving = S[MOVING]
    finished = 0
    for i in range(n_moving):
        if flow_left[moving[i]] <= limit:
            finished += 1
    nearest = -1
    if finished == 0:  # the nearest one (the first of them on a tie), despite rounding
        nearest = 0
        for i in range(1, n_moving):
            if flow_left[moving[i]] < flow_left[moving[nearest]]:
                nearest = i
    n_still = 0
    for i in range(n_moving):
        f = moving[i]
        if (flow_left[f] <= limit) if nearest == -1 else (i == nearest):
            j = 0
            while inflight[j] != f:
                j += 1
            for k in range(j, S[INFLIGHT] - 1):
                inflight[k] = inflight[k + 1]
            S[INFLIGHT] -= 1
            _schedule(heap, S, flow_done[f], now, np.int64(NORMAL), now_int)
        else:
            still[n_still] = f
            n_still += 1
    if n_still > 0:
        for i in range(n_still):
            moving[i] = still[i]
        S[MOVING] = n_still
    else:  # the most urgent flows in flight, in start order
        S[MOVING] = 0
        if S[INFLIGHT] > 0:
            top = flow_priority[inflight[0]]
            for i in range(1, S[INFLIGHT]):
                top = min(top, flow_priority[inflight[i]])
            for i in range(S[INFLIGHT]):
                if flow_priority[inflight[i]] == top:
                    moving[S[MOVING]] = inflight[i]
                    S[MOVING] += 1
    _next_completion(heap, S, E, K, free_events, free_nodes, flow_left, moving, rate, now)


# -- commands ---------------------------------------------------------------------------------
@numba.njit(cache=True)
def _first_wait(c, position, processed, n, wait_ptr, wait_list, stream_ptr, stream_list):
    """(the event command ``c`` must wait for next, from wait ``position`` on: a semaphore not
    processed yet, or for a streamed one its first band; -1 when none) and the position after it."""
    while position < wait_ptr[c + 1]:
        w = wait_list[position]
        position += 1
        if not processed[w]:
            target = w
            for i in range(stream_ptr[c], stream_ptr[c + 1]):
                if stream_list[i] == w:
                    target = n + w
            if not processed[target]:
                return target, position
    return -1, position


@numba.njit(cache=True)
def _next_arrival(c, position, processed, stream_ptr, stream_list, late):
    """(``_stream_tail``: the next streamed command ``c`` waits to end, from ``position`` on,
    -1 when none) and the position after it."""
    while position < stream_ptr[c + 1]:
        i = position
        position += 1
        if late[i] and not processed[stream_list[i]]:
            return stream_list[i], position
    return -1, position


@numba.njit(cache=True)
def _bind(c, previous, previous_at_start, processed, wait_ptr, wait_list, start, end, band, binding, binding_at):
    """Which command made ``c`` ready last (engine ``_bind``): the queue's previous command
    (at its end, or its start for an in-order DMA queue) or the semaphore signalled last (at
    its first band for a streamed one); ties go to the queue."""
    best, best_time, at = -1, -1.0, AT_END
    if previous != -1:
        if previous_at_start:
            best, best_time, at = previous, start[previous], AT_START
        else:
            best, best_time, at = previous, end[previous], AT_END
    for i in range(wait_ptr[c], wait_ptr[c + 1]):
        w = wait_list[i]
        if processed[w]:
            when, how = end[w], AT_END
        else:
            when, how = band[w], AT_BAND
        if when > best_time:
            best, best_time, at = w, when, how
    binding[c], binding_at[c] = best, at


@numba.njit(cache=True)
def _latest(c, stream_ptr, stream_list, late, end):
    """The streamed command ``c`` waited for that ended last (ties: the higher id)."""
    best = -1
    for i in range(stream_ptr[c], stream_ptr[c + 1]):
        if late[i]:
            w = stream_list[i]
            if best == -1 or end[w] > end[best] or (end[w] == end[best] and w > best):
                best = w
    return best


@numba.njit(cache=True)
def _mark_late(c, processed, stream_ptr, stream_list, late):
    """Flag the streamed waits of ``c`` not done yet (still arriving); whether there is one."""
    any_late = False
    for i in range(stream_ptr[c], stream_ptr[c + 1]):
        late[i] = not processed[stream_list[i]]
        any_late = any_late or late[i]
    return any_late


@numba.njit(cache=True)
def _any_late(c, stream_ptr, late):
    for i in range(stream_ptr[c], stream_ptr[c + 1]):
        if late[i]:
            return True
    return False


@numba.njit(cache=True)
def run_program(kind, bands, has_band, cycles, cycles_int, bus, setup_latency, addr_cycles, urgency,
                wait_ptr, wait_list, stream_ptr, stream_list,
                read_ptr, read_res, read_off, read_size, write_ptr, write_res, write_off, write_size,
                users_left, queue_ptr, queue_cmds, queue_compute, queue_core,
                channels, cores, shared_cores, rate, capacity, max_events, pool):
    n = kind.shape[0]
    n_queues = queue_compute.shape[0]
    n_res = users_left.shape[0]
    users_left = users_left.copy()
    S = np.zeros(N_STATE, np.int64)
    F = np.zeros(2)  # the bus: last update, busy cycles
    # constants as typed values: a literal argument would compile a helper once per value
    i0, i1, i2, none = np.int64(0), np.int64(1), np.int64(2), np.int64(-1)
    urgent, normal, n_occ, n_dram = np.int64(URGENT), np.int64(NORMAL), np.int64(N_OCC), np.int64(N_DRAM)
    no, yes = np.bool_(False), np.bool_(True)

    # results
    ready, start, end = np.zeros(n), np.zeros(n), np.zeros(n)
    band = np.full(n, np.nan)
    binding = np.full(n, -1, np.int64)
    binding_at = np.zeros(n, np.int64)
    tail = np.full(n, -1, np.int64)
    flowing = np.zeros(n)       # a DMA's data phase: its start,
    data_end = np.zeros(n)      # its end,
    mark = np.full(n, np.nan)   # when it stopped to wait for its op's last band,
    last_start = np.zeros(n)    # when its last band started moving
    channel_of = np.full(n, -1, np.int64)
    int_mask = np.zeros(n, np.int64)
    order = np.full(n, -1, np.int64)  # completion order
    # the DMA starts (c) and ends (n + c) in the order they happen, where the SimPy model checks
    # and releases DRAM contents (engine._Machine.dram_contents_hold)
    dma_steps = np.full(2 * n, -1, np.int64)
    # Buffers sized for the most a run can take, of which an entry is written before it is read
    # (the counters' samples, the heap's entries, the flows): np.empty, so the pages a run never
    # reaches are never touched and take no memory (a run of a million commands: ~250 MB)
    occ_time, occ_used, occ_int = np.empty(3 * n + 2), np.empty(3 * n + 2, np.int64), np.empty(3 * n + 2, np.bool_)
    dram_time, dram_flows, dram_int = np.empty(4 * n + 2), np.empty(4 * n + 2, np.int64), np.empty(4 * n + 2, np.bool_)

    # events: done of command c is event c, its first band n + c, then the pool
    n_events = 2 * n + pool
    processed = np.zeros(n_events, np.bool_)
    # an event's callbacks (HEAD: -1 for none; TAIL is read only behind a HEAD, UNIT_NEXT only
    # once written): np.empty but for the heads, as 4-byte ids (events and nodes are < 2**31, run())
    E = np.empty((3, n_events), np.int32)
    E[HEAD, :] = -1
    free_events = np.arange(n_events - 1, 2 * n - 1, -1).astype(np.int64)  # a stack: 2n is on top
    S[FREE_EVENTS] = pool
    n_nodes = n_events + n_queues + n + 8
    K = np.empty((3, n_nodes), np.int64)  # a node's fields are set when it is taken (_on): only the nodes used are touched
    free_nodes = np.empty(n_nodes, np.int64)  # the freed nodes, a stack (_on); none yet, none taken
    S[FREE_NODES] = 0
    S[NODES_TAKEN] = 0
    heap = (np.empty(n_events), np.empty(n_events, np.int64), np.empty(n_events, np.int64),
            np.empty(n_events, np.bool_))

    # units (0: the DMA channels, 1 + k: core k when streams share cores): rows capacity,
    # in use, queue head, queue tail
    units = np.full((4, 1 + cores), -1, np.int64)
    units[0, :] = 1
    units[1, :] = 0
    units[0, 0] = channels
    free_channels = np.arange(channels + 1).astype(np.int64)  # sorted; the first n_free are free
    n_free_channels = channels

    # the bus
    flow_left, flow_priority = np.empty(3 * n + 4), np.empty(3 * n + 4)
    flow_done = np.empty(3 * n + 4, np.int64)
    inflight, moving, still = np.zeros(channels + 4, np.int64), np.zeros(channels + 4, np.int64), np.zeros(channels + 4, np.int64)
    S[PENDING] = -1

    # the scratchpad
    live, valid = np.zeros(n_res, np.bool_), np.zeros(n_res, np.bool_)
    res_start = np.zeros(n_res, np.int64)
    blocks = np.zeros((2, n_res + 1), np.int64)  # live blocks (start, end) by start

    # tasks: a queue's position, phase, wait and tail cursors, previous command; a transfer's phase
    queue_pos = queue_ptr[:-1].copy()
    queue_phase = np.zeros(n_queues, np.int64)
    queue_cursor = np.zeros(n_queues, np.int64)
    queue_prev = np.full(n_queues, -1, np.int64)
    queue_before = np.zeros(n_queues)
    dma_phase = np.zeros(n, np.int64)
    dma_cursor = np.zeros(n, np.int64)
    late = np.zeros(stream_list.shape[0] + 1, np.bool_)  # a streamed wait not done when it started

    for q in range(n_queues):  # every queue starts as SimPy starts a process: URGENT, at 0
        ev = _new_event(S, free_events)
        _schedule(heap, S, ev, 0.0, urgent, yes)
        _on(S, E, K, free_nodes, ev, np.int64(RESUME_QUEUE), q)

    now, now_int, n_processed = 0.0, True, 0
    while S[HEAP_SIZE] > 0 and S[STATUS] == OK:
        now, ev, now_int = _pop(heap, S)
        n_processed += 1
        if n_processed > max_events:
            S[STATUS] = EVENT_BUDGET
            break
        processed[ev] = True
        node = E[HEAD, ev]
        E[HEAD, ev] = -1
        while node != -1 and S[STATUS] == OK:
            what, task = K[WHAT, node], K[ARG, node]
            free_nodes[S[FREE_NODES]] = node
            S[FREE_NODES] += 1
            node = K[NEXT, node]
            if what == BANDWIDTH_WAKE:
                if ev == S[PENDING]:  # else a start or end since rescheduled the next completion
                    _wake(heap, S, F, E, K, free_events, free_nodes, flow_left, flow_priority, flow_done,
                          inflight, moving, still, rate, now, now_int)
                continue
            if what == GRANT:
                _grant(heap, S, E, units, task, now, now_int)
                continue
            if what == BAND_SIGNAL:  # a compute's first band is done
                _schedule(heap, S, n + task, now, normal, now_int)
                continue
            # A task resumes: its generator runs on until it yields an event not processed yet
            # (``block``: it registers on it) or ends.
            block = -1
            while S[STATUS] == OK:
                done_cmd = -1  # a command it completed
                if what == RESUME_QUEUE:
                    q = task
                    phase = queue_phase[q]
                    if phase == 0:  # the next command of the queue
                        if queue_pos[q] == queue_ptr[q + 1]:
                            break
                        queue_cursor[q] = wait_ptr[queue_cmds[queue_pos[q]]]
                        queue_phase[q] = 1
                        continue
                    c = queue_cmds[queue_pos[q]]
                    if phase == 1:  # its semaphores
                        block, queue_cursor[q] = _first_wait(c, queue_cursor[q], processed, n, wait_ptr, wait_list,
                                                             stream_ptr, stream_list)
                        if block != -1:
                            break
                        ready[c] = now
                        int_mask[c] |= READY_INT if now_int else 0
                        _bind(c, queue_prev[q], not queue_compute[q], processed, wait_ptr, wait_list, start, end,
                              band, binding, binding_at)
                        queue_phase[q] = 2
                        if queue_compute[q] and not shared_cores:
                            continue
                        # a DMA channel, or the core shared with other streams
                        block = _request(heap, S, E, free_events, units, 1 + queue_core[q] if queue_compute[q] else i0,
                                         now, now_int)
                        break
                    if not queue_compute[q]:  # a DMA queue got a channel: the transfer runs as its own task
                        start[c] = now
                        int_mask[c] |= START_INT if now_int else 0
                        _timeout(heap, S, E, K, free_events, free_nodes, now, now_int, np.int64(RESUME_DMA), c)
                        queue_prev[q] = c
                        queue_pos[q] += 1
                        queue_phase[q] = 0
                        continue
                    b = bands[c]
                    if phase == 2:  # a compute got its core: start
                        start[c] = now
                        int_mask[c] |= START_INT if now_int else 0
                        any_late = _mark_late(c, processed, stream_ptr, stream_list, late)
                        if not _reads_ok(c, i1, read_ptr, read_res, read_size, live, valid, stream_ptr, stream_list,
                                         late, write_ptr, write_res) \
                                or not _claim(S, c, write_ptr, write_res, write_off, write_size, live, valid,
                                              res_start, blocks, capacity):
                            S[STATUS] = SCRATCHPAD_ERROR
                            break
                        _sample(occ_time, occ_used, occ_int, S, n_occ, now, now_int, S[USED])
                        if has_band[c]:  # a store streams out its results: signal the first band
                            band[c] = now + cycles[c] / b
                            _timeout(heap, S, E, K, free_events, free_nodes, now + cycles[c] / b, no,
                                     np.int64(BAND_SIGNAL), c)
                        if any_late:  # all bands but the last, then wait for the inputs still arriving
                            block = _timeout(heap, S, E, K, free_events, free_nodes, now + cycles[c] * (b - 1) / b,
                                             no, none, i0)
                            queue_phase[q] = 3
                        else:
                            block = _timeout(heap, S, E, K, free_events, free_nodes, now + cycles[c],
                                             now_int and cycles_int[c], none, i0)
                            queue_phase[q] = 5
                        break
                    if phase == 3:  # _stream_tail: wait for the streamed inputs still arriving
                        queue_before[q] = now
                        queue_cursor[q] = stream_ptr[c]
                        queue_phase[q] = 4
                        continue
                    if phase == 4:
                        block, queue_cursor[q] = _next_arrival(c, queue_cursor[q], processed, stream_ptr, stream_list,
                                                               late)
                        if block != -1:
                            break
                        if now > queue_before[q]:  # held up by the latest of them
                            tail[c] = _latest(c, stream_ptr, stream_list, late, end)
                        if not _reads_ok(c, i2, read_ptr, read_res, read_size, live, valid, stream_ptr, stream_list,
                                         late, write_ptr, write_res):
                            S[STATUS] = SCRATCHPAD_ERROR
                            break
                        block = _timeout(heap, S, E, K, free_events, free_nodes, now + cycles[c] / b, no, none, i0)
                        queue_phase[q] = 5
                        break
                    # phase 5: computed
                    for i in range(write_ptr[c], write_ptr[c + 1]):
                        valid[write_res[i]] = valid[write_res[i]] or live[write_res[i]]  # fill
                    end[c] = now
                    int_mask[c] |= END_INT if now_int else 0
                    if shared_cores:
                        _release_unit(heap, S, E, K, free_events, free_nodes, units, 1 + queue_core[q], now, now_int)
                    done_cmd = c
                    queue_prev[q] = c
                    queue_pos[q] += 1
                    queue_phase[q] = 0
                else:  # a DMA transfer (engine._Machine._dma)
                    c = task
                    phase = dma_phase[c]
                    nbytes = 0.0  # the bytes of the transfer on the bus it starts now (phases 1, 2, 4)
                    if phase == 0:
                        any_late = _mark_late(c, processed, stream_ptr, stream_list, late)
                        if not _claim(S, c, write_ptr, write_res, write_off, write_size, live, valid, res_start,
                                      blocks, capacity) \
                                or (not any_late and not _reads_ok(c, i0, read_ptr, read_res, read_size, live, valid,
                                                                   stream_ptr, stream_list, late, write_ptr, write_res)):
                            S[STATUS] = SCRATCHPAD_ERROR
                            break
                        _sample(occ_time, occ_used, occ_int, S, n_occ, now, now_int, S[USED])
                        dma_steps[S[N_DMA_STEPS]] = c
                        S[N_DMA_STEPS] += 1
                        n_free_channels -= 1  # it takes the lowest free channel
                        channel_of[c] = free_channels[0]
                        for k in range(n_free_channels):
                            free_channels[k] = free_channels[k + 1]
                        block = _timeout(heap, S, E, K, free_events, free_nodes, now + setup_latency[c], no, none, i0)
                        dma_phase[c] = 1
                        break
                    if phase == 1:  # setup and latency paid: the data phase
                        flowing[c] = now
                        S[FLOWS_NOW] += 1
                        _sample(dram_time, dram_flows, dram_int, S, n_dram, now, now_int, S[FLOWS_NOW])
                        if _any_late(c, stream_ptr, late) or has_band[c]:  # in bands
                            nbytes = bus[c] / bands[c]
                            dma_phase[c] = 2
                        else:
                            nbytes = bus[c]
                            dma_phase[c] = 6
                    elif phase == 2:  # the first band has moved
                        if has_band[c]:
                            band[c] = now
                            int_mask[c] |= BAND_INT if now_int else 0
                            _schedule(heap, S, n + c, now, normal, now_int)
                        first = bus[c] / bands[c]
                        if _any_late(c, stream_ptr, late):
                            nbytes = bus[c] - 2 * first
                            dma_phase[c] = 3
                        else:
                            nbytes = bus[c] - first
                            dma_phase[c] = 6
                    elif phase == 3:  # all but the last band moved: wait for the op's last band
                        S[FLOWS_NOW] -= 1
                        _sample(dram_time, dram_flows, dram_int, S, n_dram, now, now_int, S[FLOWS_NOW])
                        mark[c] = now
                        dma_cursor[c] = stream_ptr[c]
                        dma_phase[c] = 4
                        continue
                    elif phase == 4:
                        block, dma_cursor[c] = _next_arrival(c, dma_cursor[c], processed, stream_ptr, stream_list, late)
                        if block != -1:
                            break
                        if now > mark[c]:
                            tail[c] = _latest(c, stream_ptr, stream_list, late, end)
                        S[FLOWS_NOW] += 1
                        _sample(dram_time, dram_flows, dram_int, S, n_dram, now, now_int, S[FLOWS_NOW])
                        last_start[c] = now
                        nbytes = bus[c] / bands[c]
                        dma_phase[c] = 6
                    elif phase == 6:  # the data has moved
                        S[FLOWS_NOW] -= 1
                        _sample(dram_time, dram_flows, dram_int, S, n_dram, now, now_int, S[FLOWS_NOW])
                        if _any_late(c, stream_ptr, late) and not _reads_ok(
                                c, i0, read_ptr, read_res, read_size, live, valid, stream_ptr, stream_list, late,
                                write_ptr, write_res):
                            S[STATUS] = SCRATCHPAD_ERROR
                            break
                        data_end[c] = now
                        addresses_left = flowing[c] + addr_cycles[c] - now
                        dma_phase[c] = 7
                        if addresses_left > 0:  # the address generator, not the bus, was the bottleneck
                            block = _timeout(heap, S, E, K, free_events, free_nodes, now + addresses_left, no, none, i0)
                            break
                        continue
                    else:  # phase 7: done
                        dma_steps[S[N_DMA_STEPS]] = n + c
                        S[N_DMA_STEPS] += 1
                        for i in range(write_ptr[c], write_ptr[c + 1]):
                            valid[write_res[i]] = valid[write_res[i]] or live[write_res[i]]  # fill
                        _release_unit(heap, S, E, K, free_events, free_nodes, units, i0, now, now_int)
                        k = n_free_channels  # its channel is free again (kept sorted)
                        while k > 0 and free_channels[k - 1] > channel_of[c]:
                            free_channels[k] = free_channels[k - 1]
                            k -= 1
                        free_channels[k] = channel_of[c]
                        n_free_channels += 1
                        end[c] = now
                        int_mask[c] |= END_INT if now_int else 0
                        done_cmd = c
                    if done_cmd == -1:  # phases 1, 2 and 4: a transfer on the bus
                        block = _transfer(heap, S, F, E, K, free_events, free_nodes, flow_left, flow_priority,
                                          flow_done, inflight, moving, rate, nbytes, urgency[c], now, now_int)
                        break
                # _complete: signal the command done, release what it was the last user of
                _schedule(heap, S, done_cmd, now, normal, now_int)
                for i in range(read_ptr[done_cmd], read_ptr[done_cmd + 1]):  # engine: touched
                    users_left[read_res[i]] -= 1
                    if users_left[read_res[i]] == 0:
                        _release(S, read_res[i], live, res_start, blocks)
                for i in range(write_ptr[done_cmd], write_ptr[done_cmd + 1]):
                    users_left[write_res[i]] -= 1
                    if users_left[write_res[i]] == 0:
                        _release(S, write_res[i], live, res_start, blocks)
                _sample(occ_time, occ_used, occ_int, S, n_occ, now, now_int, S[USED])
                order[S[N_DONE]] = done_cmd
                S[N_DONE] += 1
                if what == RESUME_DMA:
                    break  # the transfer's task ends
            if block != -1 and S[STATUS] == OK:  # the task waits for ``block``
                _on(S, E, K, free_nodes, block, what, task)
        if ev >= 2 * n:  # a pool event: nothing refers to it once processed
            processed[ev] = False
            E[HEAD, ev] = -1
            free_events[S[FREE_EVENTS]] = ev
            S[FREE_EVENTS] += 1

    status = S[STATUS]
    if status == OK and S[N_DONE] < n:
        status = DEADLOCK
    return status, (now, now_int, n_processed, ready, start, end, band, binding, binding_at, tail,
                    flowing, data_end, mark, last_start, channel_of, int_mask, order,
                    occ_time[:S[N_OCC]], occ_used[:S[N_OCC]], occ_int[:S[N_OCC]],
                    dram_time[:S[N_DRAM]], dram_flows[:S[N_DRAM]], dram_int[:S[N_DRAM]], S[PEAK], F[1],
                    dma_steps[:S[N_DMA_STEPS]])


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


def run(machine, cores_of_queue: dict, max_events: int):
    """Run ``machine``'s program (an ``engine._Machine``) with the compiled loop: the status,
    and the recorded arrays (``run_program``'s result) when it is ``OK``."""
    program, hw = machine.program, machine.hw
    table = program.commands
    n = len(table)
    kind = table.column("kind").astype(np.int64)
    ids = np.flatnonzero(kind != COMPUTE)  # the transfers (command c is table[c])
    costs = list(map(table.cost.__getitem__, ids.tolist()))

    def per_transfer(values, dtype=np.float64):
        out = np.zeros(n, dtype)
        out[ids] = np.fromiter(values, dtype, len(costs))
        return out

    # the same float operations as the engine's (descriptors * setup + latency, chunks * chunk_cycles,
    # step + 0.5 for a store)
    bus = per_transfer(map(attrgetter("bus_bytes"), costs))
    setup_latency = per_transfer(map(attrgetter("descriptors"), costs)) * machine.dma_setup_cycles + machine.dram_latency
    addr_cycles = per_transfer(map(attrgetter("chunks"), costs)) * hw.dma.chunk_cycles  # transfer_cost.address_cycles
    urgency = np.zeros(n)
    urgency[ids] = table.column("step")[ids]
    urgency += np.where(kind == STORE, 0.5, 0.0)
    ops, op_cycles, op_of = machine.graph.ops, machine._op_cycles, table.op
    compute_ids = np.flatnonzero(kind == COMPUTE)
    values = [op_cycles(ops[op_of[i]])[0][0] for i in compute_ids.tolist()]
    cycles = np.zeros(n)
    cycles[compute_ids] = values
    cycles_int = np.zeros(n, np.bool_)
    cycles_int[compute_ids] = [isinstance(v, int) for v in values]
    has_band = np.zeros(n, np.bool_)
    has_band[list(machine.band_done)] = True
    bands = np.asarray(machine.bands, np.int64)
    wait_ptr, wait_list = program.wait_lists
    stream_ptr, stream_list = _csr(machine.streams_from)
    read = table.access_columns("reads")
    write = table.access_columns("writes")
    users_left = np.fromiter(map(len, program.residency_users), np.int64, len(program.residency_users))
    queue_ptr, queue_cmds = _csr(list(program.queues.values()))
    queue_compute = np.array([q.startswith("stream") for q in program.queues], np.bool_)
    queue_core = np.array([cores_of_queue.get(q, 0) for q in program.queues], np.int64)
    shared = program.streams > len(machine.cores)
    pool = POOL_PER_QUEUE * (len(program.queues) + hw.dma.channels)
    while True:
        if 3 * n + pool + len(program.queues) + 8 >= 2 ** 31:  # the kernel's 4-byte event table (run_program)
            raise SimulationError(f"{n:,} commands are more than the compiled event loop holds")
        status, result = run_program(
            kind, bands, has_band, cycles, cycles_int, bus, setup_latency, addr_cycles, urgency,
            wait_ptr, wait_list, stream_ptr, stream_list, *read, *write, users_left,
            queue_ptr, queue_cmds, queue_compute, queue_core,
            hw.dma.channels, len(machine.cores), shared, float(machine.dram.rate), program.capacity,
            max_events, pool)
        if status != POOL_FULL:
            return status, result
        pool *= 2


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
                 mark, last_start, channel_of) -> None:
        # A proxy: the machine holds its timings, and a cycle would keep a run of a million
        # commands alive until the next full collection.
        self.machine = weakref.proxy(machine)
        self.ready, self.band, self.int_mask = _packed(ready), _packed(band), _packed(int_mask)
        self.starts, self.ends = HeldTimes(start, self.int_mask, START_INT), HeldTimes(end, self.int_mask, END_INT)
        self.binding, self.binding_at, self.tail = _packed(binding), _packed(binding_at), _packed(tail)
        self.flowing, self.data_end = _packed(flowing), _packed(data_end)
        self.mark, self.last_start, self.channel_of = _packed(mark), _packed(last_start), _packed(channel_of)
        self.lanes = {q: machine._cores_of(q) for q in machine.program.queues if q.startswith("stream")}
        # read on every item (the machine's own objects, which refer to nothing of it)
        self.commands, self.ops, self.tensors, self.bands, self.band_done = (
            machine.program.commands, machine.graph.ops, machine.graph.tensors, machine.bands, machine.band_done)

    def __len__(self) -> int:
        return len(self.ends)

    def __iter__(self):
        return (self[i] for i in range(len(self.ends)))

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
        """(start, end, binding, lane, bound cause) of each of compute commands ``ids``, one at
        a time: what ``critical_path.op_breakdown`` reads of their CommandTimings, without
        making them, read from the columns directly (the breakdown asks it of every compute)."""
        table, ops, op_cycles, lanes = self.commands, self.ops, self.machine._op_cycles, self.lanes
        starts, ends, int_mask, binding = self.starts.values, self.ends.values, self.int_mask, self.binding
        op_of, queue_of = table.op, table.queue
        lane_of = [lanes[name][1] if name in lanes else None for name in table.queue_names]
        for i in ids:
            (_, bound), _ = op_cycles(ops[op_of[i]])
            start, end, mask, b = starts[i], ends[i], int_mask[i], binding[i]
            yield (int(start) if mask & START_INT else start, int(end) if mask & END_INT else end,
                   None if b < 0 else b, lane_of[queue_of[i]], BOUND_CAUSE[bound])

    def __getitem__(self, i: int) -> CommandTiming:
        machine, table = self.machine, self.commands  # columns: no Command is made
        kind = table.kind[i]
        tail = self.tail[i]
        band_at = tail_at = None
        band_parts, tail_parts = {}, {}
        if kind == COMPUTE:
            (cycles, bound), _ = machine._op_cycles(self.ops[table.op[i]])
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
            addresses_left = flowing + address_cycles(cost, machine.hw) - data_end
            parts = {overhead: setup + max(addresses_left, 0.0), waiting: latency, moving_cause: data_end - flowing}
            if i in self.band_done:
                band_at = self._held(self.band, i, BAND_INT)
                band_parts = {overhead: setup, waiting: latency, moving_cause: band_at - flowing}
            if tail >= 0:
                tail_at = tail
                if data_end > self.mark[i]:
                    tail_parts = {moving_cause: data_end - self.last_start[i]}
                if addresses_left > 0:
                    tail_parts[overhead] = addresses_left
        binding = self.binding[i]
        return new_timing(self._held(self.ready, i, READY_INT), self.starts[i], self.ends[i],
                          None if binding < 0 else binding, AT_NAMES[self.binding_at[i]], parts, self.lane(i),
                          band_at, band_parts, tail_at, tail_parts)


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
        return self.ops[table.op[i]].name if table.kind[i] == COMPUTE else self.tensors[table.tensor[i]].name

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
        return new_entry(queue, self.tensors[table.tensor[i]].name, KINDS[kind], table.step[i], self.starts[i],
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


def _packed(column: np.ndarray) -> array:
    """A float64 or int64 column as an ``array.array`` of the same bytes."""
    packed = array("d" if column.dtype == np.float64 else "q")
    packed.frombytes(column.astype(np.float64 if column.dtype == np.float64 else np.int64, copy=False).tobytes())
    return packed


#: ``CommandTiming.binding_at`` of each binding_at code.
AT_NAMES = ("end", "start", "band")


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
    op_of = list(map(ops.__getitem__, map(table.op.__getitem__, computes.tolist())))
    classes = np.fromiter(map(machine._cost_class, op_of), np.int64, len(op_of))
    queue = table.column("queue")[computes].astype(np.int64)  # codes into table.queue_names
    pairs, first, pair_of = np.unique(queue * (len(machine._classes) + 1) + classes, return_index=True,
                                      return_inverse=True)
    lanes = {q: machine._cores_of(q)[0] for q in program.queues if q.startswith("stream")}
    terms: dict[tuple, np.ndarray] = {}  # (total, key) -> its terms over the completed commands

    def column(total: str, key) -> np.ndarray:
        found = terms.get((total, key))
        if found is None:
            found = terms[total, key] = np.zeros(len(order))
        return found

    for k, p in enumerate(first.tolist()):
        op, positions = op_of[p], at["compute"][pair_of == k]
        (cycles, _), per_core = machine._op_cycles(op)
        slowest = max(per_core)  # _account_compute's figures
        for core, busy in zip(lanes[table.queue_of(int(computes[p]))], per_core):
            column("core", core)[positions] = cycles * busy / slowest if slowest > 0 else cycles
        for key, pj in machine._op_energy(op).items():
            column("energy", key)[positions] = pj
        for key, pj in machine._levels[machine._class_of[op.id]].items():
            column("level", key)[positions] = pj
    machine.energy_by_op.update(zip(map(attrgetter("name"), op_of),
                                    map(machine._energy_total.__getitem__, classes.tolist())))
    # transfers (_account_transfer; the compiled loop never runs dram.model: banks)
    e = hw.energy
    nbytes = table.column("nbytes")
    for kind_name, dram, scratchpad, byte in (("load", "dram_read", "scratchpad_write", machine.scratchpad_write_byte),
                                              ("store", "dram_write", "scratchpad_read", machine.scratchpad_read_byte)):
        positions = at[kind_name]
        moved = order[positions]
        costs = list(map(table.cost.__getitem__, moved.tolist()))
        column("energy", dram)[positions] = (np.fromiter(map(attrgetter("bus_bytes"), costs), np.int64, len(costs))
                                             * (e.dram_read_byte if kind_name == "load" else e.dram_write_byte))
        column("energy", scratchpad)[positions] = nbytes[moved] * byte
        column("energy", "dma_descriptor")[positions] = (
            np.fromiter(map(attrgetter("descriptors"), costs), np.int64, len(costs)) * e.dma_descriptor)
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
     peak, busy_cycles, dma_steps) = result
    program = machine.program
    _account(machine, order, end - start)
    timings = machine.timings = RecordedTimings(machine, ready, start, end, band, int_mask, binding, binding_at, tail,
                                                flowing, data_end, mark, last_start, channel_of)
    machine.timeline = RecordedTimeline(timings, order, program.queues, machine.dma_lanes)
    # copies: the samples are views of buffers sized for the most a run can take
    machine.occupancy = Pairs(occ_time.copy(), occ_used.copy(), occ_int.copy())
    machine.dram_samples = Pairs(dram_time.copy(), dram_flows.copy(), dram_int.copy())
    machine.scratchpad.peak = int(peak)
    machine.dma_steps = dma_steps
    machine.dram.busy_cycles = float(busy_cycles)
    machine.env.processed = int(n_processed) + 1  # and the empty queue's step, as SimPy's run counts it
    return int(now) if now_int else float(now)
