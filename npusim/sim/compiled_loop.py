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
banks``, plans with a DRAM layout (live DRAM contents are checked), progress reports and the
wall-clock guard. On any error (a scratchpad check failing, a deadlock, the event budget, a
pool too small) it stops and returns a status; the caller then runs the SimPy model, which
raises the same error with its message (or, for a small pool, reruns with a larger one).

It returns what the run recorded per command (ready/start/end/band times, binding
predecessor, DMA data-phase times, channel), the completion order (energy and busy times are
summed in that order by the caller, as the SimPy model sums them, so totals agree to the
last bit), and the occupancy and DRAM-flow samples.
"""

from __future__ import annotations

import heapq

import numba
import numpy as np

# Statuses
OK, SCRATCHPAD_ERROR, DEADLOCK, EVENT_BUDGET, POOL_FULL = range(5)

# Callback kinds
RESUME_QUEUE, RESUME_DMA, BANDWIDTH_WAKE, GRANT, BAND_SIGNAL = range(5)

# SimPy priorities
URGENT, NORMAL = 0, 1

# binding_at codes (CommandTiming.binding_at)
AT_END, AT_START, AT_BAND = range(3)

# Command kinds
COMPUTE, LOAD, STORE = range(3)

# Bits of ``int_mask``: which recorded times SimPy held as int (an event chain from time 0
# of zero delays only: SimPy's clock starts at int 0), so reports print them alike
READY_INT, START_INT, END_INT, BAND_INT = 1, 2, 4, 8


@numba.njit(cache=True)
def run_program(kind, bands, has_band, cycles, cycles_int, bus, setup_latency, addr_cycles, urgency,
                wait_ptr, wait_list, stream_ptr, stream_list,
                read_ptr, read_res, read_off, read_size, write_ptr, write_res, write_off, write_size,
                touch_ptr, touch_res, users_left,
                queue_ptr, queue_cmds, queue_compute, queue_core,
                channels, cores, shared_cores, rate, capacity, max_events, pool):
    n = kind.shape[0]
    n_queues = queue_compute.shape[0]
    n_res = users_left.shape[0]
    users_left = users_left.copy()

    # -- results ---------------------------------------------------------------------------
    ready = np.zeros(n)
    start = np.zeros(n)
    end = np.zeros(n)
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
    n_done = 0
    occ_time = np.zeros(3 * n + 2)
    occ_used = np.zeros(3 * n + 2, np.int64)
    occ_int = np.zeros(3 * n + 2, np.bool_)
    n_occ = 0
    dram_time = np.zeros(4 * n + 2)
    dram_flows = np.zeros(4 * n + 2, np.int64)
    dram_int = np.zeros(4 * n + 2, np.bool_)
    n_dram = 0
    flows_now = 0

    # -- events: done[c] = c, band_done[c] = n + c, then a recycled pool -------------------
    n_events = 2 * n + pool
    processed = np.zeros(n_events, np.bool_)
    cb_head = np.full(n_events, -1, np.int64)
    cb_tail = np.full(n_events, -1, np.int64)
    unit_next = np.full(n_events, -1, np.int64)  # a unit's request queue, linked through its events
    free_events = np.arange(n_events - 1, 2 * n - 1, -1).astype(np.int64)  # a stack: pops 2n first
    n_free_events = pool
    n_nodes = n_events + n_queues + n + 8
    cb_next = np.full(n_nodes, -1, np.int64)
    cb_kind = np.zeros(n_nodes, np.int64)
    cb_arg = np.zeros(n_nodes, np.int64)
    free_nodes = np.arange(n_nodes - 1, -1, -1).astype(np.int64)
    n_free_nodes = n_nodes
    heap = [(0.0, 0, 0, 0, False)]
    heap.pop()
    seq = 0
    now = 0.0
    now_int = True
    n_processed = 0

    # -- units (0: the DMA channels, 1 + k: core k when streams share cores) ----------------
    n_units = 1 + cores
    unit_capacity = np.ones(n_units, np.int64)
    unit_capacity[0] = channels
    unit_in_use = np.zeros(n_units, np.int64)
    unit_head = np.full(n_units, -1, np.int64)
    unit_tail = np.full(n_units, -1, np.int64)
    free_channels = np.arange(channels).astype(np.int64)  # sorted; the first n_free are free
    n_free_channels = channels

    # -- bandwidth (npusim.sim.bandwidth.SharedBandwidth) ------------------------------------
    max_flows = 3 * n + 4
    flow_left = np.zeros(max_flows)
    flow_priority = np.zeros(max_flows)
    flow_done = np.zeros(max_flows, np.int64)
    inflight = np.zeros(channels + 4, np.int64)  # flow ids in start order
    n_inflight = 0
    moving = np.zeros(channels + 4, np.int64)  # the most urgent ones, in start order
    n_moving = 0
    still = np.zeros(channels + 4, np.int64)
    next_flow = 0
    last = 0.0
    pending = -1
    busy_cycles = 0.0
    limit = 1e-6 * max(1.0, rate)

    # -- scratchpad (npusim.sim.scratchpad.TaggedScratchpad) ---------------------------------
    live = np.zeros(n_res, np.bool_)
    valid = np.zeros(n_res, np.bool_)
    res_start = np.zeros(n_res, np.int64)
    block_start = np.zeros(n_res + 1, np.int64)  # live blocks by start
    block_end = np.zeros(n_res + 1, np.int64)
    n_blocks = 0
    used = 0
    peak = 0

    # -- tasks ---------------------------------------------------------------------------------
    queue_pos = queue_ptr[:-1].copy()
    queue_phase = np.zeros(n_queues, np.int64)
    queue_wait = np.zeros(n_queues, np.int64)
    queue_prev = np.full(n_queues, -1, np.int64)
    queue_tail = np.zeros(n_queues, np.int64)
    queue_before = np.zeros(n_queues)
    dma_phase = np.zeros(n, np.int64)
    dma_tail = np.zeros(n, np.int64)
    late = np.zeros(stream_list.shape[0] + 1, np.bool_)  # a streamed wait not done when it started
    status = OK

    # start every queue as SimPy starts a process: an URGENT event at time 0, in queue order
    for q in range(n_queues):
        n_free_events -= 1  # the caller sizes the pool for at least one event per queue
        ev = free_events[n_free_events]
        heapq.heappush(heap, (0.0, URGENT, seq, ev, True))
        seq += 1
        node = free_nodes[n_free_nodes - 1]
        n_free_nodes -= 1
        cb_kind[node], cb_arg[node], cb_next[node] = RESUME_QUEUE, q, -1
        cb_head[ev] = node
        cb_tail[ev] = node

    while len(heap) > 0 and status == OK:
        now, _, _, ev, now_int = heapq.heappop(heap)
        n_processed += 1
        if n_processed > max_events:
            status = EVENT_BUDGET
            break
        processed[ev] = True
        node = cb_head[ev]
        cb_head[ev] = -1
        while node != -1 and status == OK:
            what, arg, following = cb_kind[node], cb_arg[node], cb_next[node]
            free_nodes[n_free_nodes] = node
            n_free_nodes += 1
            node = following
            # Each branch below is one callback; a task's branch runs its generator on until it
            # yields an event not processed yet ("block": register on it and stop).
            block = -1  # the event the task now waits for
            task_kind = -1
            task = -1
            if what == BANDWIDTH_WAKE:
                if ev != pending:
                    continue  # a start or end since then rescheduled the next completion
                # _advance
                dt = now - last
                if n_moving > 0 and dt > 0:
                    share = rate * dt / n_moving
                    for i in range(n_moving):
                        flow_left[moving[i]] -= share
                    busy_cycles += dt
                last = now
                n_still = 0
                n_finished = 0
                for i in range(n_moving):
                    if flow_left[moving[i]] <= limit:
                        n_finished += 1
                if n_finished == 0:  # the nearest one (the first of them on a tie), despite rounding
                    nearest = 0
                    for i in range(1, n_moving):
                        if flow_left[moving[i]] < flow_left[moving[nearest]]:
                            nearest = i
                    for i in range(n_moving):
                        if i != nearest:
                            still[n_still] = moving[i]
                            n_still += 1
                    finished_ids = moving[nearest:nearest + 1].copy()
                else:
                    finished_ids = np.zeros(n_finished, np.int64)
                    k = 0
                    for i in range(n_moving):
                        if flow_left[moving[i]] <= limit:
                            finished_ids[k] = moving[i]
                            k += 1
                        else:
                            still[n_still] = moving[i]
                            n_still += 1
                for f in finished_ids:
                    j = 0
                    while inflight[j] != f:
                        j += 1
                    for i in range(j, n_inflight - 1):
                        inflight[i] = inflight[i + 1]
                    n_inflight -= 1
                    heapq.heappush(heap, (now + 0, NORMAL, seq, flow_done[f], now_int))  # succeed()
                    seq += 1
                if n_still > 0:
                    moving[:n_still] = still[:n_still]
                    n_moving = n_still
                else:  # the most urgent flows in flight, in start order
                    n_moving = 0
                    if n_inflight > 0:
                        top = flow_priority[inflight[0]]
                        for i in range(1, n_inflight):
                            top = min(top, flow_priority[inflight[i]])
                        for i in range(n_inflight):
                            if flow_priority[inflight[i]] == top:
                                moving[n_moving] = inflight[i]
                                n_moving += 1
                # _schedule
                if n_moving == 0:
                    pending = -1
                else:
                    soonest = flow_left[moving[0]]
                    for i in range(1, n_moving):
                        soonest = min(soonest, flow_left[moving[i]])
                    delay = max(soonest, 0.0) * n_moving / rate
                    if n_free_events == 0 or n_free_nodes == 0:
                        status = POOL_FULL
                        break
                    n_free_events -= 1
                    wake = free_events[n_free_events]
                    heapq.heappush(heap, (now + delay, NORMAL, seq, wake, False))
                    seq += 1
                    nd = free_nodes[n_free_nodes - 1]
                    n_free_nodes -= 1
                    cb_kind[nd], cb_arg[nd], cb_next[nd] = BANDWIDTH_WAKE, 0, -1
                    cb_head[wake] = nd
                    cb_tail[wake] = nd
                    pending = wake
                continue
            if what == GRANT:
                u = arg
                if unit_head[u] != -1 and unit_in_use[u] < unit_capacity[u]:
                    unit_in_use[u] += 1
                    request = unit_head[u]
                    unit_head[u] = unit_next[request]
                    if unit_head[u] == -1:
                        unit_tail[u] = -1
                    heapq.heappush(heap, (now + 0, NORMAL, seq, request, now_int))
                    seq += 1
                continue
            if what == BAND_SIGNAL:
                heapq.heappush(heap, (now + 0, NORMAL, seq, n + arg, now_int))
                seq += 1
                continue
            # -- a task resumes ---------------------------------------------------------------
            task_kind = what
            task = arg
            while True:  # runs the task until it blocks or ends
                done_cmd = -1  # a command it completed
                transfer = False  # whether it starts a transfer on the bus (of nbytes)
                nbytes = 0.0
                if task_kind == RESUME_QUEUE:
                    q = task
                    phase = queue_phase[q]
                    if phase == 0:  # the next command of the queue
                        if queue_pos[q] == queue_ptr[q + 1]:
                            break  # the queue is done
                        c = queue_cmds[queue_pos[q]]
                        queue_wait[q] = wait_ptr[c]
                        queue_phase[q] = 1
                        continue
                    c = queue_cmds[queue_pos[q]]
                    if phase == 1:  # its semaphores (a streamed one: its first band)
                        while queue_wait[q] < wait_ptr[c + 1]:
                            w = wait_list[queue_wait[q]]
                            queue_wait[q] += 1
                            if not processed[w]:
                                target = w
                                for i in range(stream_ptr[c], stream_ptr[c + 1]):
                                    if stream_list[i] == w:
                                        target = n + w
                                if not processed[target]:
                                    block = target
                                    break
                        if block != -1:
                            break
                        # _bind: when it became ready and which command made it so
                        ready[c] = now
                        if now_int:
                            int_mask[c] |= READY_INT
                        prev = queue_prev[q]
                        best, best_time, at = -1, -1.0, AT_END
                        if prev != -1:
                            if queue_compute[q]:
                                best, best_time, at = prev, end[prev], AT_END
                            else:
                                best, best_time, at = prev, start[prev], AT_START
                        for i in range(wait_ptr[c], wait_ptr[c + 1]):
                            w = wait_list[i]
                            if processed[w]:
                                when, how = end[w], AT_END
                            else:
                                when, how = band[w], AT_BAND
                            if when > best_time:
                                best, best_time, at = w, when, how
                        binding[c] = best
                        binding_at[c] = at
                        if queue_compute[q] and not shared_cores:
                            queue_phase[q] = 2
                            continue
                        # request a unit (a DMA channel, or the shared core)
                        u = 0 if not queue_compute[q] else 1 + queue_core[q]
                        if n_free_events == 0:
                            status = POOL_FULL
                            break
                        n_free_events -= 1
                        request = free_events[n_free_events]
                        unit_next[request] = -1
                        if unit_tail[u] == -1:
                            unit_head[u] = request
                        else:
                            unit_next[unit_tail[u]] = request
                        unit_tail[u] = request
                        if unit_head[u] != -1 and unit_in_use[u] < unit_capacity[u]:  # _grant
                            unit_in_use[u] += 1
                            granted = unit_head[u]
                            unit_head[u] = unit_next[granted]
                            if unit_head[u] == -1:
                                unit_tail[u] = -1
                            heapq.heappush(heap, (now + 0, NORMAL, seq, granted, now_int))
                            seq += 1
                        queue_phase[q] = 2
                        block = request
                        break
                    if not queue_compute[q]:  # phase 2 of a DMA queue: granted a channel
                        start[c] = now
                        if now_int:
                            int_mask[c] |= START_INT
                        # the transfer runs as its own task, started as SimPy starts a process
                        if n_free_events == 0 or n_free_nodes == 0:
                            status = POOL_FULL
                            break
                        n_free_events -= 1
                        ev2 = free_events[n_free_events]
                        heapq.heappush(heap, (now + 0, URGENT, seq, ev2, now_int))
                        seq += 1
                        nd = free_nodes[n_free_nodes - 1]
                        n_free_nodes -= 1
                        cb_kind[nd], cb_arg[nd], cb_next[nd] = RESUME_DMA, c, -1
                        cb_head[ev2] = nd
                        cb_tail[ev2] = nd
                        queue_prev[q] = c
                        queue_pos[q] += 1
                        queue_phase[q] = 0
                        continue
                    # -- a compute queue ------------------------------------------------------
                    if phase == 2:  # it has its core: start
                        start[c] = now
                        if now_int:
                            int_mask[c] |= START_INT
                        # inputs still arriving band by band: streamed waits not done yet
                        for i in range(stream_ptr[c], stream_ptr[c + 1]):
                            late[i] = not processed[stream_list[i]]
                        for i in range(read_ptr[c], read_ptr[c + 1]):
                            r = read_res[i]
                            arriving = False
                            for j in range(stream_ptr[c], stream_ptr[c + 1]):
                                if late[j]:
                                    w = stream_list[j]
                                    for k in range(write_ptr[w], write_ptr[w + 1]):
                                        if write_res[k] == r:
                                            arriving = True
                            if not arriving and read_size[i] > 0 and not (live[r] and valid[r]):
                                status = SCRATCHPAD_ERROR
                        if status != OK:
                            break
                        for i in range(write_ptr[c], write_ptr[c + 1]):  # claim
                            r = write_res[i]
                            size = write_size[i]
                            if live[r] or size <= 0:
                                continue
                            lo = write_off[i]
                            hi = lo + size
                            j = max(np.searchsorted(block_start[:n_blocks], lo, side="right") - 1, 0)
                            while j < n_blocks and block_start[j] < hi:
                                if block_end[j] > lo:
                                    status = SCRATCHPAD_ERROR
                                j += 1
                            if hi > capacity:
                                status = SCRATCHPAD_ERROR
                            if status != OK:
                                break
                            j = np.searchsorted(block_start[:n_blocks], lo)
                            block_start[j + 1:n_blocks + 1] = block_start[j:n_blocks].copy()
                            block_end[j + 1:n_blocks + 1] = block_end[j:n_blocks].copy()
                            block_start[j], block_end[j] = lo, hi
                            n_blocks += 1
                            live[r], valid[r], res_start[r] = True, False, lo
                            used += size
                            peak = max(peak, used)
                        if status != OK:
                            break
                        if n_occ > 0 and occ_time[n_occ - 1] == now:  # _sample_occupancy
                            occ_time[n_occ - 1], occ_used[n_occ - 1], occ_int[n_occ - 1] = now, used, now_int
                        else:
                            occ_time[n_occ], occ_used[n_occ], occ_int[n_occ] = now, used, now_int
                            n_occ += 1
                        b = bands[c]
                        if has_band[c]:  # a store streams out its results: signal the first band
                            band[c] = now + cycles[c] / b
                            if n_free_events == 0 or n_free_nodes == 0:
                                status = POOL_FULL
                                break
                            n_free_events -= 1
                            ev2 = free_events[n_free_events]
                            heapq.heappush(heap, (now + cycles[c] / b, NORMAL, seq, ev2, False))
                            seq += 1
                            nd = free_nodes[n_free_nodes - 1]
                            n_free_nodes -= 1
                            cb_kind[nd], cb_arg[nd], cb_next[nd] = BAND_SIGNAL, c, -1
                            cb_head[ev2] = nd
                            cb_tail[ev2] = nd
                        any_late = False
                        for i in range(stream_ptr[c], stream_ptr[c + 1]):
                            any_late = any_late or late[i]
                        if n_free_events == 0:
                            status = POOL_FULL
                            break
                        n_free_events -= 1
                        timeout = free_events[n_free_events]
                        if any_late:  # all bands but the last, then wait for the inputs
                            heapq.heappush(heap, (now + cycles[c] * (b - 1) / b, NORMAL, seq, timeout, False))
                            queue_phase[q] = 3
                        else:
                            heapq.heappush(heap, (now + cycles[c], NORMAL, seq, timeout,
                                                  now_int and cycles_int[c]))
                            queue_phase[q] = 5
                        seq += 1
                        block = timeout
                        break
                    if phase == 3:  # _stream_tail: wait for the streamed inputs still arriving
                        queue_before[q] = now
                        queue_tail[q] = stream_ptr[c]
                        queue_phase[q] = 4
                        continue
                    if phase == 4:
                        while queue_tail[q] < stream_ptr[c + 1]:
                            i = queue_tail[q]
                            queue_tail[q] += 1
                            if late[i] and not processed[stream_list[i]]:
                                block = stream_list[i]
                                break
                        if block != -1:
                            break
                        if now > queue_before[q]:  # held up by the latest of them
                            best = -1
                            for i in range(stream_ptr[c], stream_ptr[c + 1]):
                                if late[i]:
                                    w = stream_list[i]
                                    if best == -1 or end[w] > end[best] or (end[w] == end[best] and w > best):
                                        best = w
                            tail[c] = best
                        for i in range(read_ptr[c], read_ptr[c + 1]):  # now the streamed reads
                            r = read_res[i]
                            arriving = False
                            for j in range(stream_ptr[c], stream_ptr[c + 1]):
                                if late[j]:
                                    w = stream_list[j]
                                    for k in range(write_ptr[w], write_ptr[w + 1]):
                                        if write_res[k] == r:
                                            arriving = True
                            if arriving and read_size[i] > 0 and not (live[r] and valid[r]):
                                status = SCRATCHPAD_ERROR
                        if status != OK:
                            break
                        if n_free_events == 0:
                            status = POOL_FULL
                            break
                        n_free_events -= 1
                        timeout = free_events[n_free_events]
                        heapq.heappush(heap, (now + cycles[c] / bands[c], NORMAL, seq, timeout, False))
                        seq += 1
                        queue_phase[q] = 5
                        block = timeout
                        break
                    # phase 5: computed
                    for i in range(write_ptr[c], write_ptr[c + 1]):  # fill
                        if live[write_res[i]]:
                            valid[write_res[i]] = True
                    end[c] = now
                    if now_int:
                        int_mask[c] |= END_INT
                    if shared_cores:  # release the core: a release event that grants the next
                        if n_free_events == 0 or n_free_nodes == 0:
                            status = POOL_FULL
                            break
                        u = 1 + queue_core[q]
                        unit_in_use[u] -= 1
                        n_free_events -= 1
                        ev2 = free_events[n_free_events]
                        heapq.heappush(heap, (now + 0, NORMAL, seq, ev2, now_int))
                        seq += 1
                        nd = free_nodes[n_free_nodes - 1]
                        n_free_nodes -= 1
                        cb_kind[nd], cb_arg[nd], cb_next[nd] = GRANT, u, -1
                        cb_head[ev2] = nd
                        cb_tail[ev2] = nd
                    done_cmd = c
                    queue_prev[q] = c
                    queue_pos[q] += 1
                    queue_phase[q] = 0
                else:  # -- a DMA transfer (engine._Machine._dma) ---------------------------------
                    c = task
                    phase = dma_phase[c]
                    if phase == 0:
                        any_late = False
                        for i in range(stream_ptr[c], stream_ptr[c + 1]):
                            late[i] = not processed[stream_list[i]]
                            any_late = any_late or late[i]
                        for i in range(write_ptr[c], write_ptr[c + 1]):  # claim
                            r = write_res[i]
                            size = write_size[i]
                            if live[r] or size <= 0:
                                continue
                            lo = write_off[i]
                            hi = lo + size
                            j = max(np.searchsorted(block_start[:n_blocks], lo, side="right") - 1, 0)
                            while j < n_blocks and block_start[j] < hi:
                                if block_end[j] > lo:
                                    status = SCRATCHPAD_ERROR
                                j += 1
                            if hi > capacity:
                                status = SCRATCHPAD_ERROR
                            if status != OK:
                                break
                            j = np.searchsorted(block_start[:n_blocks], lo)
                            block_start[j + 1:n_blocks + 1] = block_start[j:n_blocks].copy()
                            block_end[j + 1:n_blocks + 1] = block_end[j:n_blocks].copy()
                            block_start[j], block_end[j] = lo, hi
                            n_blocks += 1
                            live[r], valid[r], res_start[r] = True, False, lo
                            used += size
                            peak = max(peak, used)
                        if status != OK:
                            break
                        if not any_late:
                            for i in range(read_ptr[c], read_ptr[c + 1]):
                                r = read_res[i]
                                if read_size[i] > 0 and not (live[r] and valid[r]):
                                    status = SCRATCHPAD_ERROR
                            if status != OK:
                                break
                        if n_occ > 0 and occ_time[n_occ - 1] == now:  # _sample_occupancy
                            occ_time[n_occ - 1], occ_used[n_occ - 1], occ_int[n_occ - 1] = now, used, now_int
                        else:
                            occ_time[n_occ], occ_used[n_occ], occ_int[n_occ] = now, used, now_int
                            n_occ += 1
                        n_free_channels -= 1  # the lowest free channel
                        channel_of[c] = free_channels[0]
                        free_channels[:n_free_channels] = free_channels[1:n_free_channels + 1].copy()
                        if n_free_events == 0:
                            status = POOL_FULL
                            break
                        n_free_events -= 1
                        timeout = free_events[n_free_events]
                        heapq.heappush(heap, (now + setup_latency[c], NORMAL, seq, timeout, False))
                        seq += 1
                        dma_phase[c] = 1
                        block = timeout
                        break
                    # phases 1, 2 and 4 start a transfer on the bus; which one, and of how much
                    transfer = True
                    if phase == 1:  # setup and latency paid: the data phase
                        flowing[c] = now
                        flows_now += 1
                        if n_dram > 0 and dram_time[n_dram - 1] == now:
                            dram_time[n_dram - 1], dram_flows[n_dram - 1], dram_int[n_dram - 1] = now, flows_now, now_int
                        else:
                            dram_time[n_dram], dram_flows[n_dram], dram_int[n_dram] = now, flows_now, now_int
                            n_dram += 1
                        any_late = False
                        for i in range(stream_ptr[c], stream_ptr[c + 1]):
                            any_late = any_late or late[i]
                        if any_late or has_band[c]:
                            nbytes = bus[c] / bands[c]
                            dma_phase[c] = 2
                        else:
                            nbytes = bus[c]
                            dma_phase[c] = 6
                    elif phase == 2:  # the first band has moved
                        if has_band[c]:
                            band[c] = now
                            if now_int:
                                int_mask[c] |= BAND_INT
                            heapq.heappush(heap, (now + 0, NORMAL, seq, n + c, now_int))
                            seq += 1
                        any_late = False
                        for i in range(stream_ptr[c], stream_ptr[c + 1]):
                            any_late = any_late or late[i]
                        first = bus[c] / bands[c]
                        if any_late:
                            nbytes = bus[c] - 2 * first
                            dma_phase[c] = 3
                        else:
                            nbytes = bus[c] - first
                            dma_phase[c] = 6
                    elif phase == 3:  # all but the last band moved: wait for the op's last band
                        transfer = False
                        flows_now -= 1
                        if n_dram > 0 and dram_time[n_dram - 1] == now:
                            dram_time[n_dram - 1], dram_flows[n_dram - 1], dram_int[n_dram - 1] = now, flows_now, now_int
                        else:
                            dram_time[n_dram], dram_flows[n_dram], dram_int[n_dram] = now, flows_now, now_int
                            n_dram += 1
                        mark[c] = now
                        dma_tail[c] = stream_ptr[c]
                        dma_phase[c] = 4
                        continue
                    elif phase == 4:
                        while dma_tail[c] < stream_ptr[c + 1]:
                            i = dma_tail[c]
                            dma_tail[c] += 1
                            if late[i] and not processed[stream_list[i]]:
                                block = stream_list[i]
                                break
                        if block != -1:
                            break
                        if now > mark[c]:
                            best = -1
                            for i in range(stream_ptr[c], stream_ptr[c + 1]):
                                if late[i]:
                                    w = stream_list[i]
                                    if best == -1 or end[w] > end[best] or (end[w] == end[best] and w > best):
                                        best = w
                            tail[c] = best
                        flows_now += 1
                        if n_dram > 0 and dram_time[n_dram - 1] == now:
                            dram_time[n_dram - 1], dram_flows[n_dram - 1], dram_int[n_dram - 1] = now, flows_now, now_int
                        else:
                            dram_time[n_dram], dram_flows[n_dram], dram_int[n_dram] = now, flows_now, now_int
                            n_dram += 1
                        last_start[c] = now
                        nbytes = bus[c] / bands[c]
                        dma_phase[c] = 6
                    elif phase == 6:  # the data has moved
                        transfer = False
                        flows_now -= 1
                        if n_dram > 0 and dram_time[n_dram - 1] == now:
                            dram_time[n_dram - 1], dram_flows[n_dram - 1], dram_int[n_dram - 1] = now, flows_now, now_int
                        else:
                            dram_time[n_dram], dram_flows[n_dram], dram_int[n_dram] = now, flows_now, now_int
                            n_dram += 1
                        any_late = False
                        for i in range(stream_ptr[c], stream_ptr[c + 1]):
                            any_late = any_late or late[i]
                        if any_late:
                            for i in range(read_ptr[c], read_ptr[c + 1]):
                                r = read_res[i]
                                if read_size[i] > 0 and not (live[r] and valid[r]):
                                    status = SCRATCHPAD_ERROR
                            if status != OK:
                                break
                        data_end[c] = now
                        addresses_left = flowing[c] + addr_cycles[c] - now
                        if addresses_left > 0:  # the address generator, not the bus, was the bottleneck
                            if n_free_events == 0:
                                status = POOL_FULL
                                break
                            n_free_events -= 1
                            timeout = free_events[n_free_events]
                            heapq.heappush(heap, (now + addresses_left, NORMAL, seq, timeout, False))
                            seq += 1
                            dma_phase[c] = 7
                            block = timeout
                            break
                        dma_phase[c] = 7
                        continue
                    else:  # phase 7: done
                        transfer = False
                        for i in range(write_ptr[c], write_ptr[c + 1]):  # fill
                            if live[write_res[i]]:
                                valid[write_res[i]] = True
                        if n_free_events == 0 or n_free_nodes == 0:
                            status = POOL_FULL
                            break
                        unit_in_use[0] -= 1  # release the channel: an event that grants the next
                        n_free_events -= 1
                        ev2 = free_events[n_free_events]
                        heapq.heappush(heap, (now + 0, NORMAL, seq, ev2, now_int))
                        seq += 1
                        nd = free_nodes[n_free_nodes - 1]
                        n_free_nodes -= 1
                        cb_kind[nd], cb_arg[nd], cb_next[nd] = GRANT, 0, -1
                        cb_head[ev2] = nd
                        cb_tail[ev2] = nd
                        j = n_free_channels  # the channel is free again, kept sorted
                        while j > 0 and free_channels[j - 1] > channel_of[c]:
                            free_channels[j] = free_channels[j - 1]
                            j -= 1
                        free_channels[j] = channel_of[c]
                        n_free_channels += 1
                        end[c] = now
                        if now_int:
                            int_mask[c] |= END_INT
                        done_cmd = c
                    if transfer:  # SharedBandwidth.transfer
                        if n_free_events == 0:
                            status = POOL_FULL
                            break
                        n_free_events -= 1
                        transferred = free_events[n_free_events]
                        if nbytes <= 0:
                            heapq.heappush(heap, (now + 0, NORMAL, seq, transferred, now_int))
                            seq += 1
                        else:
                            dt = now - last  # _advance
                            if n_moving > 0 and dt > 0:
                                share = rate * dt / n_moving
                                for i in range(n_moving):
                                    flow_left[moving[i]] -= share
                                busy_cycles += dt
                            last = now
                            f = next_flow
                            next_flow += 1
                            flow_left[f], flow_priority[f], flow_done[f] = nbytes, urgency[c], transferred
                            inflight[n_inflight] = f
                            n_inflight += 1
                            if n_moving == 0 or urgency[c] == flow_priority[moving[0]]:
                                moving[n_moving] = f
                                n_moving += 1
                            elif urgency[c] < flow_priority[moving[0]]:
                                moving[0] = f
                                n_moving = 1
                            # _schedule
                            soonest = flow_left[moving[0]]
                            for i in range(1, n_moving):
                                soonest = min(soonest, flow_left[moving[i]])
                            delay = max(soonest, 0.0) * n_moving / rate
                            if n_free_events == 0 or n_free_nodes == 0:
                                status = POOL_FULL
                                break
                            n_free_events -= 1
                            wake = free_events[n_free_events]
                            heapq.heappush(heap, (now + delay, NORMAL, seq, wake, False))
                            seq += 1
                            nd = free_nodes[n_free_nodes - 1]
                            n_free_nodes -= 1
                            cb_kind[nd], cb_arg[nd], cb_next[nd] = BANDWIDTH_WAKE, 0, -1
                            cb_head[wake] = nd
                            cb_tail[wake] = nd
                            pending = wake
                        block = transferred
                        break
                    if done_cmd == -1:
                        continue
                if done_cmd != -1:  # _complete: signal it, release what it was the last user of
                    heapq.heappush(heap, (now + 0, NORMAL, seq, done_cmd, now_int))
                    seq += 1
                    for i in range(touch_ptr[done_cmd], touch_ptr[done_cmd + 1]):
                        r = touch_res[i]
                        users_left[r] -= 1
                        if users_left[r] == 0 and live[r]:
                            j = np.searchsorted(block_start[:n_blocks], res_start[r])
                            used -= block_end[j] - block_start[j]
                            block_start[j:n_blocks - 1] = block_start[j + 1:n_blocks].copy()
                            block_end[j:n_blocks - 1] = block_end[j + 1:n_blocks].copy()
                            n_blocks -= 1
                            live[r] = False
                    if n_occ > 0 and occ_time[n_occ - 1] == now:
                        occ_time[n_occ - 1], occ_used[n_occ - 1], occ_int[n_occ - 1] = now, used, now_int
                    else:
                        occ_time[n_occ], occ_used[n_occ], occ_int[n_occ] = now, used, now_int
                        n_occ += 1
                    order[n_done] = done_cmd
                    n_done += 1
                    done_cmd = -1
                    if task_kind == RESUME_DMA:
                        break  # the transfer's task ends
                    continue
            if status != OK:
                break
            if block != -1:  # register the task on the event it waits for
                if n_free_nodes == 0:
                    status = POOL_FULL
                    break
                nd = free_nodes[n_free_nodes - 1]
                n_free_nodes -= 1
                cb_kind[nd], cb_arg[nd], cb_next[nd] = task_kind, task, -1
                if cb_head[block] == -1:
                    cb_head[block] = nd
                else:
                    cb_next[cb_tail[block]] = nd
                cb_tail[block] = nd
        if ev >= 2 * n:  # a pool event: nothing refers to it once processed
            processed[ev] = False
            cb_head[ev] = -1
            free_events[n_free_events] = ev
            n_free_events += 1

    if status == OK and n_done < n:
        status = DEADLOCK
    return status, (now, now_int, n_processed, ready, start, end, band, binding, binding_at, tail,
                     flowing, data_end, mark, last_start, channel_of, int_mask, order,
                     occ_time[:n_occ], occ_used[:n_occ], occ_int[:n_occ],
                     dram_time[:n_dram], dram_flows[:n_dram], dram_int[:n_dram], peak, busy_cycles)


#: Pool events per queue and per DMA channel to start with (timeouts, requests, releases and
#: bandwidth wake-ups in flight); a run that needs more is repeated with twice as many.
POOL_PER_QUEUE = 64


def _pointers(rows) -> np.ndarray:
    """Where each row of a list of sequences starts in their concatenation (and its end)."""
    pointers = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(np.fromiter((len(r) for r in rows), np.int64, len(rows)), out=pointers[1:])
    return pointers


def _csr(rows) -> tuple[np.ndarray, np.ndarray]:
    """(row pointers, values) of a list of integer sequences."""
    pointers = _pointers(rows)
    return pointers, np.fromiter((v for r in rows for v in r), np.int64, int(pointers[-1]))


def _accesses(rows) -> tuple[np.ndarray, ...]:
    """(pointers, residencies, offsets, sizes) of each command's scratchpad accesses, given as
    (residency, tensor name, offset, size) tuples (``_Machine.reads_of`` / ``writes_of``)."""
    pointers = _pointers(rows)
    flat = [a for r in rows for a in r]
    res = np.fromiter((a[0] for a in flat), np.int64, len(flat))
    off = np.fromiter((a[2] for a in flat), np.int64, len(flat))
    size = np.fromiter((a[3] for a in flat), np.int64, len(flat))
    return pointers, res, off, size


def run(machine, cores_of_queue: dict, max_events: int):
    """Run ``machine``'s program (an ``engine._Machine``) with the compiled loop: the status,
    and the recorded arrays (``run_program``'s result) when it is ``OK``."""
    program, hw = machine.program, machine.hw
    commands = program.commands
    n = len(commands)
    kinds = {"compute": COMPUTE, "load": LOAD, "store": STORE}
    kind = np.fromiter((kinds[c.kind] for c in commands), np.int64, n)
    cycles = np.zeros(n)
    cycles_int = np.zeros(n, np.bool_)
    bus = np.zeros(n)
    setup_latency = np.zeros(n)
    addr_cycles = np.zeros(n)
    urgency = np.zeros(n)
    from npusim.plan.transfer_cost import address_cycles  # lazy: keeps this module's imports to the kernel's

    ops = machine.graph.ops
    for c in commands:
        if c.kind == "compute":
            value = machine._op_cycles(ops[c.op])[0][0]
            cycles[c.id] = value
            cycles_int[c.id] = isinstance(value, int)
        else:
            cost = c.cost
            bus[c.id] = cost.bus_bytes
            setup_latency[c.id] = cost.descriptors * machine.dma_setup_cycles + machine.dram_latency
            addr_cycles[c.id] = address_cycles(cost, hw)
            urgency[c.id] = c.step + (0.5 if c.kind == "store" else 0.0)
    has_band = np.zeros(n, np.bool_)
    has_band[list(machine.band_done)] = True
    bands = np.asarray(machine.bands, np.int64)
    wait_ptr, wait_list = _csr([c.waits for c in commands])
    stream_ptr, stream_list = _csr(machine.streams_from)
    read = _accesses(machine.reads_of)
    write = _accesses(machine.writes_of)
    touch_ptr, touch_res = _csr(machine.touched)
    users_left = np.asarray(machine.users_left, np.int64)
    queue_ptr, queue_cmds = _csr(list(program.queues.values()))
    queue_compute = np.array([q.startswith("stream") for q in program.queues], np.bool_)
    queue_core = np.array([cores_of_queue.get(q, 0) for q in program.queues], np.int64)
    shared = program.streams > len(machine.cores)
    pool = POOL_PER_QUEUE * (len(program.queues) + hw.dma.channels)
    while True:
        status, result = run_program(
            kind, bands, has_band, cycles, cycles_int, bus, setup_latency, addr_cycles, urgency,
            wait_ptr, wait_list, stream_ptr, stream_list, *read, *write, touch_ptr, touch_res, users_left,
            queue_ptr, queue_cmds, queue_compute, queue_core,
            hw.dma.channels, len(machine.cores), shared, float(machine.dram.rate), program.capacity,
            max_events, pool)
        if status != POOL_FULL:
            return status, result
        pool *= 2


def _at(value: float, is_int: bool):
    """A recorded time as SimPy held it (int on chains of zero delays from time 0)."""
    return int(value) if is_int else value


def record(machine, result) -> float:
    """Fill ``machine`` (an ``engine._Machine``) with what the compiled run recorded, as its
    SimPy run fills it: command timings, the timeline, energy and busy times (summed in
    completion order), samples, peak occupancy, events; returns the run's cycles."""
    from npusim.sim.critical_path import CommandTiming  # lazy: as the engine, which imports this module lazily
    from npusim.sim.engine import BOUND_CAUSE, DMA_CAUSES
    from npusim.sim.report import TimelineEntry

    (now, now_int, n_processed, ready, start, end, band, binding, binding_at, tail, flowing, data_end, mark,
     last_start, channel_of, int_mask, order, occ_time, occ_used, occ_int, dram_time, dram_flows, dram_int,
     peak, busy_cycles) = result
    program, graph, hw = machine.program, machine.graph, machine.hw
    commands = program.commands
    ready, start, end, band = ready.tolist(), start.tolist(), end.tolist(), band.tolist()
    binding, binding_at, tail = binding.tolist(), binding_at.tolist(), tail.tolist()
    flowing, data_end, mark, last_start = flowing.tolist(), data_end.tolist(), mark.tolist(), last_start.tolist()
    channel_of, int_mask = channel_of.tolist(), int_mask.tolist()
    at_names = ("end", "start", "band")
    lanes = {q: machine._cores_of(q) for q in program.queues if q.startswith("stream")}
    latency, setup_cycles = machine.dram_latency, machine.dma_setup_cycles
    from npusim.plan.transfer_cost import address_cycles  # lazy: as above

    timings = []
    for c in commands:
        i = c.id
        mask = int_mask[i]
        t = CommandTiming(ready=_at(ready[i], mask & READY_INT), start=_at(start[i], mask & START_INT),
                          end=_at(end[i], mask & END_INT), binding=None if binding[i] < 0 else binding[i],
                          binding_at=at_names[binding_at[i]])
        has_band = i in machine.band_done
        if c.kind == "compute":
            (cycles, bound), _ = machine._op_cycles(graph.ops[c.op])
            cause = BOUND_CAUSE[bound]
            t.lane, t.parts = lanes[c.queue][1], {cause: cycles}
            bands = machine.bands[i]
            if has_band:
                t.band, t.band_parts = band[i], {cause: cycles / bands}
            if tail[i] >= 0:
                t.tail, t.tail_parts = tail[i], {cause: cycles / bands}
        else:
            overhead, waiting, moving_cause, _ = DMA_CAUSES[c.kind]
            setup = c.cost.descriptors * setup_cycles
            addresses_left = flowing[i] + address_cycles(c.cost, hw) - data_end[i]
            t.lane = machine.dma_lanes[channel_of[i]]
            t.parts = {overhead: setup + max(addresses_left, 0.0), waiting: latency,
                       moving_cause: data_end[i] - flowing[i]}
            if has_band:
                t.band = _at(band[i], mask & BAND_INT)
                t.band_parts = {overhead: setup, waiting: latency, moving_cause: band[i] - flowing[i]}
            if tail[i] >= 0:
                t.tail, t.tail_parts = tail[i], {}
                if data_end[i] > mark[i]:
                    t.tail_parts = {moving_cause: data_end[i] - last_start[i]}
                if addresses_left > 0:
                    t.tail_parts[overhead] = addresses_left
        timings.append(t)
    machine.timings = timings

    timeline, ops, tensors = machine.timeline, graph.ops, graph.tensors
    for i in order.tolist():  # what the SimPy run does as each command completes, in that order
        c, t = commands[i], timings[i]
        if c.kind == "compute":
            op = ops[c.op]
            (cycles, _), per_core = machine._op_cycles(op)
            machine._account_compute(op, cycles, per_core, lanes[c.queue][0])
            timeline.append(TimelineEntry(c.queue, op.name, op.kind, c.step, t.start, t.end, lane=t.lane, command=i))
        else:
            machine.channel_busy += t.end - t.start
            machine._account_transfer(c)
            timeline.append(TimelineEntry(c.queue, tensors[c.tensor].name, c.kind, c.step, t.start, t.end,
                                          c.cause, c.nbytes, lane=t.lane, command=i))
    machine.occupancy = [(_at(t, b), u) for t, u, b in zip(occ_time.tolist(), occ_used.tolist(), occ_int.tolist())]
    machine.dram_samples = [(_at(t, b), f) for t, f, b in zip(dram_time.tolist(), dram_flows.tolist(),
                                                               dram_int.tolist())]
    machine.scratchpad.peak = int(peak)
    machine.dram.busy_cycles = float(busy_cycles)
    machine.env.processed = int(n_processed) + 1  # and the empty queue's step, as SimPy's run counts it
    return _at(float(now), now_int)
