/* The simulator's event loop, compiled: the kernel of ``npusim.sim.compiled_loop``.
 *
 * That module's docstring explains the model (SimPy's processes as tasks with a phase, events
 * as integers processed in SimPy's order, the heap, the units, the bus and the scratchpad) and
 * what the kernel returns; here is its code. Every function below is the one of the same name
 * (without the underscore) that module held as a Numba kernel until it moved here, operation
 * for operation: the same float operations in the same order (built with -ffp-contract=off: no
 * fused multiply-add), ``max``/``min`` as Python's (the first argument unless the other is
 * strictly larger/smaller, ``MAX``/``MIN``), int64 integers (no division or modulo of negative
 * values occurs). Its reference is the SimPy model itself: ``tests/test_compiled_loop.py``
 * requires identical reports on programs of every kind.
 *
 * The kernel's state is one ``Loop``: Numba's state array ``S`` and bus array ``F`` as named
 * fields, the event table ``E`` and the callback table ``K`` as one array per row. With
 * ``dram.model: banks`` the bus is ``Banks`` instead: npusim.dram.model's BankedDram, its
 * controller the one of bank_core.h (the code the SimPy model runs through bank_kernel.c). */

#include "bank_core.h"

#include <math.h>
#include <stdlib.h>

/* Statuses */
enum { OK, SCRATCHPAD_ERROR, DEADLOCK, EVENT_BUDGET, POOL_FULL, BANKS_FAILED };
/* Callback kinds */
enum { RESUME_QUEUE, RESUME_DMA, BANDWIDTH_WAKE, GRANT, BAND_SIGNAL, DRAM_ADVANCE, DRAM_WAKE };
/* SimPy priorities */
enum { URGENT, NORMAL };
/* binding_at codes (CommandTiming.binding_at) */
enum { AT_END, AT_START, AT_BAND };
/* Bits of ``int_mask``: which recorded times SimPy held as int (an event chain from time 0
 * of zero delays only: SimPy's clock starts at int 0), so reports print them alike */
enum { READY_INT = 1, START_INT = 2, END_INT = 4, BAND_INT = 8 };

#define PRIORITY_STEP ((int64_t)1 << 62) /* a key's priority part: above any scheduling order */

/* Python's max(a, b) and min(a, b): ``a`` unless ``b`` is strictly larger (smaller) */
#define MAX(a, b) ((b) > (a) ? (b) : (a))
#define MIN(a, b) ((b) < (a) ? (b) : (a))

/* An entry of the heap: SimPy's (time, priority, scheduling order) of an event; ``key`` is
 * priority * 2**62 + order */
typedef struct {
    double time;
    int64_t key;
    int32_t event;
    int32_t is_int;
} Entry;

typedef struct {
    /* the program (read only) */
    int64_t n;
    const int64_t *bands, *has_band, *cycles_int;
    const double *cycles, *bus, *setup_latency, *addr_cycles, *urgency;
    const int64_t *wait_ptr, *wait_list, *stream_ptr, *stream_list;
    const int64_t *read_ptr, *read_res, *read_size, *write_ptr, *write_res, *write_off, *write_size;
    double rate;
    int64_t capacity;
    /* the state scalars (Numba's ``S``) */
    int64_t seq, n_free_events, n_free_nodes, nodes_taken, n_blocks, used, peak, n_occ, n_dram, flows_now,
        n_inflight, n_moving, next_flow, pending, status, n_done, heap_size, n_dma_steps;
    double bus_updated, bus_busy; /* Numba's ``F``: the bus's last update, busy cycles */
    /* events (done of command c is event c, its first band n + c, then the pool) */
    Entry *heap;
    char *processed;
    int32_t *head, *tail, *unit_next; /* Numba's ``E``: HEAD (-1: none), TAIL, UNIT_NEXT */
    int32_t *free_events;             /* a stack: 2n is on top */
    /* callback nodes (Numba's ``K``: NEXT, WHAT, ARG) and the freed ones, a stack */
    int32_t *node_next, *node_what, *node_arg, *free_nodes;
    int64_t n_nodes;
    /* units (0: the DMA channels, 1 + k: core k when streams share cores) */
    int64_t *unit_capacity, *unit_in_use, *unit_head, *unit_tail;
    /* the bus */
    double *flow_left, *flow_priority;
    int64_t *flow_done, *inflight, *moving, *still;
    /* the scratchpad: live blocks (start, end) by start */
    char *live, *valid;
    int64_t *res_start, *block_lo, *block_hi;
    char *late; /* a streamed wait not done when it started */
    /* results (the recorded times ``_bind`` reads) */
    double *start, *end, *band;
    int64_t *binding, *binding_at;
    struct Banks *banks; /* dram.model: banks (NULL: the shared bus) */
} Loop;

/* -- events and callbacks ------------------------------------------------------------------ */

/* An event from the pool (-1, and the status set, when the pool is empty). */
static int64_t new_event(Loop *L) {
    if (L->n_free_events == 0) {
        L->status = POOL_FULL;
        return -1;
    }
    L->n_free_events -= 1;
    return L->free_events[L->n_free_events];
}

/* ``Environment.schedule``: the event is processed at ``at``, after every event scheduled
 * before it for the same time and priority. */
static void schedule(Loop *L, int64_t ev, double at, int64_t priority, int is_int) {
    Entry *h = L->heap;
    int64_t key = priority * PRIORITY_STEP + L->seq;
    L->seq += 1;
    int64_t i = L->heap_size;
    L->heap_size += 1;
    while (i > 0) { /* sift up */
        int64_t parent = (i - 1) >> 1;
        if (h[parent].time < at || (h[parent].time == at && h[parent].key < key)) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i].time = at;
    h[i].key = key;
    h[i].event = (int32_t)ev;
    h[i].is_int = is_int != 0;
}

/* The earliest entry, removed from the heap. */
static Entry pop(Loop *L) {
    Entry *h = L->heap;
    Entry top = h[0];
    L->heap_size -= 1;
    int64_t size = L->heap_size;
    Entry last = h[size];
    int64_t i = 0;
    for (;;) { /* sift the last entry down from the root */
        int64_t child = 2 * i + 1;
        if (child >= size) break;
        if (child + 1 < size && (h[child + 1].time < h[child].time
                                 || (h[child + 1].time == h[child].time && h[child + 1].key < h[child].key)))
            child += 1;
        if (last.time < h[child].time || (last.time == h[child].time && last.key < h[child].key)) break;
        h[i] = h[child];
        i = child;
    }
    h[i] = last;
    return top;
}

/* Add a callback to ``ev`` (after those it has: SimPy runs them in that order). Its node is
 * the last one freed, else the lowest never taken. */
static void on(Loop *L, int64_t ev, int64_t what, int64_t arg) {
    int64_t node;
    if (L->n_free_nodes > 0) {
        L->n_free_nodes -= 1;
        node = L->free_nodes[L->n_free_nodes];
    } else if (L->nodes_taken < L->n_nodes) {
        node = L->nodes_taken;
        L->nodes_taken += 1;
    } else {
        L->status = POOL_FULL;
        return;
    }
    L->node_next[node] = -1;
    L->node_what[node] = (int32_t)what;
    L->node_arg[node] = (int32_t)arg;
    if (L->head[ev] == -1)
        L->head[ev] = (int32_t)node;
    else
        L->node_next[L->tail[ev]] = (int32_t)node;
    L->tail[ev] = (int32_t)node;
}

/* A new event scheduled at ``at`` (a Timeout, or a process start when URGENT is asked through
 * ``what`` = RESUME_DMA), with one callback (none when ``what`` < 0). */
static int64_t timeout(Loop *L, double at, int is_int, int64_t what, int64_t arg) {
    int64_t ev = new_event(L);
    if (ev == -1) return -1;
    /* (a DRAM wake before the moment's other events: model.py _predict) */
    schedule(L, ev, at, what == RESUME_DMA || what == DRAM_WAKE ? URGENT : NORMAL, is_int);
    if (what >= 0) on(L, ev, what, arg);
    return ev;
}

/* Append (now, value) to a counter track, or replace its last sample taken at ``now``. */
static void sample(double *times, int64_t *values, char *ints, int64_t *count, double now, int now_int,
                   int64_t value) {
    int64_t i = *count;
    if (i > 0 && times[i - 1] == now)
        i -= 1;
    else
        *count += 1;
    times[i] = now;
    values[i] = value;
    ints[i] = (char)(now_int != 0);
}

/* -- units: DMA channels and shared cores (engine._Units) ---------------------------------- */

/* Grant the head of unit ``u``'s queue if a unit is free (its request event succeeds). */
static void grant(Loop *L, int64_t u, double now, int now_int) {
    int64_t head = L->unit_head[u];
    if (head != -1 && L->unit_in_use[u] < L->unit_capacity[u]) {
        L->unit_in_use[u] += 1;
        L->unit_head[u] = L->unit_next[head];
        if (L->unit_head[u] == -1) L->unit_tail[u] = -1;
        schedule(L, head, now, NORMAL, now_int);
    }
}

/* A request of unit ``u``: it joins the queue, the head is granted if a unit is free. */
static int64_t request(Loop *L, int64_t u, double now, int now_int) {
    int64_t req = new_event(L);
    if (req == -1) return -1;
    L->unit_next[req] = -1;
    if (L->unit_tail[u] == -1)
        L->unit_head[u] = req;
    else
        L->unit_next[L->unit_tail[u]] = (int32_t)req;
    L->unit_tail[u] = req;
    grant(L, u, now, now_int);
    return req;
}

/* Free a unit at once; a release event grants the head of the queue when processed. */
static void release_unit(Loop *L, int64_t u, double now, int now_int) {
    L->unit_in_use[u] -= 1;
    timeout(L, now, now_int, GRANT, u);
}

/* -- the scratchpad (npusim.sim.scratchpad.TaggedScratchpad) ------------------------------- */

/* How many of the first ``count`` (sorted) ``starts`` are <= ``value`` (bisect_right). */
static int64_t bisect(const int64_t *starts, int64_t count, int64_t value) {
    int64_t lo = 0, hi = count;
    while (lo < hi) {
        int64_t mid = (lo + hi) >> 1;
        if (starts[mid] <= value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Claim the ranges command ``c`` writes; 0 when one is past the capacity or overlaps a live
 * block. */
static int claim(Loop *L, int64_t c) {
    for (int64_t i = L->write_ptr[c]; i < L->write_ptr[c + 1]; i++) {
        int64_t r = L->write_res[i], size = L->write_size[i];
        if (L->live[r] || size <= 0) continue; /* a later write into its own residency, or no bytes */
        int64_t lo = L->write_off[i];
        int64_t hi = lo + size;
        int64_t n_blocks = L->n_blocks;
        if (hi > L->capacity) return 0;
        int64_t j = bisect(L->block_lo, n_blocks, lo); /* the blocks starting before lo ... */
        j = MAX(j - 1, 0);
        while (j < n_blocks && L->block_lo[j] < hi) { /* ... from the last of them, overlapping [lo, hi) */
            if (L->block_hi[j] > lo) return 0;
            j += 1;
        }
        j = bisect(L->block_lo, n_blocks, lo);
        for (int64_t k = n_blocks; k > j; k--) {
            L->block_lo[k] = L->block_lo[k - 1];
            L->block_hi[k] = L->block_hi[k - 1];
        }
        L->block_lo[j] = lo;
        L->block_hi[j] = hi;
        L->n_blocks += 1;
        L->live[r] = 1;
        L->valid[r] = 0;
        L->res_start[r] = lo;
        L->used += size;
        L->peak = MAX(L->peak, L->used);
    }
    return 1;
}

/* Free residency ``r``'s block (its last user completed). */
static void release(Loop *L, int64_t r) {
    if (!L->live[r]) return;
    int64_t n_blocks = L->n_blocks;
    int64_t j = bisect(L->block_lo, n_blocks, L->res_start[r] - 1); /* the block starting at res_start[r] */
    L->used -= L->block_hi[j] - L->block_lo[j];
    for (int64_t k = j; k < n_blocks - 1; k++) {
        L->block_lo[k] = L->block_lo[k + 1];
        L->block_hi[k] = L->block_hi[k + 1];
    }
    L->n_blocks -= 1;
    L->live[r] = 0;
}

/* Whether command ``c``'s reads find their residencies filled: all of them (``which`` 0),
 * those no streamed command still arriving writes (1), or only those (2). */
static int reads_ok(const Loop *L, int64_t c, int which) {
    for (int64_t i = L->read_ptr[c]; i < L->read_ptr[c + 1]; i++) {
        int64_t r = L->read_res[i];
        if (which != 0) {
            int arriving = 0;
            for (int64_t j = L->stream_ptr[c]; j < L->stream_ptr[c + 1]; j++) {
                if (L->late[j]) {
                    int64_t w = L->stream_list[j];
                    for (int64_t k = L->write_ptr[w]; k < L->write_ptr[w + 1]; k++)
                        if (L->write_res[k] == r) arriving = 1;
                }
            }
            if (arriving != (which == 2)) continue;
        }
        if (L->read_size[i] > 0 && !(L->live[r] && L->valid[r])) return 0;
    }
    return 1;
}

/* -- the bus (npusim.sim.bandwidth.SharedBandwidth) ---------------------------------------- */

/* Move the moving flows' bytes on to now, the bus shared equally among them. */
static void advance(Loop *L, double now) {
    double dt = now - L->bus_updated;
    int64_t n_moving = L->n_moving;
    if (n_moving > 0 && dt > 0) {
        double share = L->rate * dt / (double)n_moving;
        for (int64_t i = 0; i < n_moving; i++) L->flow_left[L->moving[i]] -= share;
        L->bus_busy += dt;
    }
    L->bus_updated = now;
}

/* Schedule a wake-up at the next completion of a moving flow. */
static void next_completion(Loop *L, double now) {
    int64_t n_moving = L->n_moving;
    if (n_moving == 0) {
        L->pending = -1;
        return;
    }
    double soonest = L->flow_left[L->moving[0]];
    for (int64_t i = 1; i < n_moving; i++) soonest = MIN(soonest, L->flow_left[L->moving[i]]);
    double delay = MAX(soonest, 0.0) * (double)n_moving / L->rate;
    L->pending = timeout(L, now + delay, 0, BANDWIDTH_WAKE, 0);
}

/* An event that succeeds when ``nbytes`` have crossed the bus (lower ``priority`` first). */
static int64_t transfer(Loop *L, double nbytes, double priority, double now, int now_int) {
    int64_t done = new_event(L);
    if (done == -1) return -1;
    if (nbytes <= 0) {
        schedule(L, done, now, NORMAL, now_int);
        return done;
    }
    advance(L, now);
    int64_t f = L->next_flow;
    L->next_flow += 1;
    L->flow_left[f] = nbytes;
    L->flow_priority[f] = priority;
    L->flow_done[f] = done;
    L->inflight[L->n_inflight] = f;
    L->n_inflight += 1;
    if (L->n_moving == 0 || priority == L->flow_priority[L->moving[0]]) {
        L->moving[L->n_moving] = f;
        L->n_moving += 1;
    } else if (priority < L->flow_priority[L->moving[0]]) {
        L->moving[0] = f;
        L->n_moving = 1;
    }
    next_completion(L, now);
    return done;
}

/* The next completion: the flows done succeed, the bus goes to the most urgent left. */
static void wake(Loop *L, double now, int now_int) {
    advance(L, now);
    double limit = 1e-6 * MAX(1.0, L->rate); /* remaining bytes are floats accumulated over many updates */
    int64_t n_moving = L->n_moving;
    int64_t finished = 0;
    for (int64_t i = 0; i < n_moving; i++)
        if (L->flow_left[L->moving[i]] <= limit) finished += 1;
    int64_t nearest = -1;
    if (finished == 0) { /* the nearest one (the first of them on a tie), despite rounding */
        nearest = 0;
        for (int64_t i = 1; i < n_moving; i++)
            if (L->flow_left[L->moving[i]] < L->flow_left[L->moving[nearest]]) nearest = i;
    }
    int64_t n_still = 0;
    for (int64_t i = 0; i < n_moving; i++) {
        int64_t f = L->moving[i];
        if (nearest == -1 ? L->flow_left[f] <= limit : i == nearest) {
            int64_t j = 0;
            while (L->inflight[j] != f) j += 1;
            for (int64_t k = j; k < L->n_inflight - 1; k++) L->inflight[k] = L->inflight[k + 1];
            L->n_inflight -= 1;
            schedule(L, L->flow_done[f], now, NORMAL, now_int);
        } else {
            L->still[n_still] = f;
            n_still += 1;
        }
    }
    if (n_still > 0) {
        for (int64_t i = 0; i < n_still; i++) L->moving[i] = L->still[i];
        L->n_moving = n_still;
    } else { /* the most urgent flows in flight, in start order */
        L->n_moving = 0;
        if (L->n_inflight > 0) {
            double top = L->flow_priority[L->inflight[0]];
            for (int64_t i = 1; i < L->n_inflight; i++) top = MIN(top, L->flow_priority[L->inflight[i]]);
            for (int64_t i = 0; i < L->n_inflight; i++) {
                if (L->flow_priority[L->inflight[i]] == top) {
                    L->moving[L->n_moving] = L->inflight[i];
                    L->n_moving += 1;
                }
            }
        }
    }
    next_completion(L, now);
}

/* -- the DRAM with banks (npusim.dram.model.BankedDram) ------------------------------------ */

/* Column commands a channel may issue before the first flow could end, when the model starts
 * looking for that exact end (model.py: TAIL). */
#define TAIL 4

/* The pool's rows: each access's global bank, row and flow (bank_core.h: Ctl) */
#define POOL_ROWS 3

/* ``BankedDram`` and its ``Controller`` (npusim/dram/model.py, controller.py). The controller's
 * state is in two buffer sets, the controller's and its look-ahead copy's (the twin of
 * ``Controller.copy(reuse=True)``); adopting the copy's prediction swaps them. The flows'
 * bookkeeping (live flows, free slots, ``_events`` in order) and the pool of accesses belong to
 * both alike: a copy is adopted only if no flow was added since it was made. */
typedef struct Banks {
    Ctl k[2];
    double *fbuf[2];
    int64_t *ibuf[2];
    int64_t nf, ni, cur, flow_cap;
    /* the pool (rows bank, row, flow; ``cap`` each; int32: bank_core.h) */
    int32_t *pool;
    int64_t cap, n_pool, used;
    /* what compaction writes into and then swaps with the pool (``spare_cap`` each), and its
     * renumbering: kept from one compaction to the next, so their pages are not taken from and
     * given back to the system each time (a 20-point DSE paid ~50,000 page faults for it) */
    int32_t *spare_pool;
    int64_t *remap;
    int64_t spare_cap, remap_cap;
    /* flows: the live ones sorted (``_active``), free slots, slots ever taken, ``_events`` in
     * order, each flow's done event and command, the write flows done whose accesses are still
     * in the controller (``_draining``: released once it has issued them) */
    int64_t *active, n_active, *free_slots, n_free, slots, *order, n_order, *flow_done, *flow_cmd, *draining,
        n_draining;
    /* the prediction: its timeout event (-1: none; ``_generation``), the moment ``_advance``
     * brings the controller to, the completion the look-ahead copy reached; the controller's present */
    int64_t pending;
    double pending_when, ahead_when, now_ns;
    /* per command: bus bytes asked for, accesses issued, its accesses decoded (5 rows: channel,
     * bank, row, rank, bank group; NULL until its first band), their count, its flows' bank delay */
    double *moved, *delay_ns;
    int64_t *cursor, *n_acc;
    int64_t **acc;
    /* each command's DRAM view: shape and strides from view_ptr[c], item size, byte address */
    const int64_t *view_ptr, *view_shape, *view_strides, *itemsize, *base, *write;
    Decoding dec;
    int64_t burst, access, depth, write_depth, compact_from;
    double ns_per_cycle, step_ns;
    int64_t *scratch_i;
    double *scratch_f;
    Pick *held;
    Lane *lanes;
    /* results: the row hit rate's samples (time, hits, accesses), the channels' busy ns at the last wake */
    double *hit_time;
    int64_t *hit_hits, *hit_total, n_hits, hits_cap;
    double *last_busy;
    int64_t woke;
    /* the flows' arrays in each state buffer, by offset (banks_copy_state): where each starts
     * and its items per flow (1, or C for the per-channel ones) */
    int64_t flow_off[2][16], flow_width[2][16], n_flow_arrays[2];
} Banks;

/* Point both controllers at the pool and the live flows. */
static void banks_bind_pool(Banks *B) {
    for (int s = 0; s < 2; s++) {
        Ctl *k = &B->k[s];
        k->req_bank = B->pool;
        k->req_row = B->pool + B->cap;
        k->req_flow = B->pool + 2 * B->cap;
        k->active = B->active;
        k->n_active = B->n_active;
    }
}

/* A pool of ``cap`` accesses holding the first ``keep`` of the old one (``_ensure_requests``). */
static int banks_grow_pool(Banks *B, int64_t cap, int64_t keep) {
    int32_t *pool = malloc((size_t)cap * POOL_ROWS * 4);
    if (!pool) return -1;
    for (int64_t r = 0; r < POOL_ROWS && keep > 0; r++) memcpy(pool + r * cap, B->pool + r * B->cap, (size_t)keep * 4);
    free(B->pool);
    B->pool = pool, B->cap = cap;
    banks_bind_pool(B);
    return 0;
}

/* ``Controller._compact_if_needed``: drop released flows' accesses when they are most of the
 * pool; the live flows' accesses keep their order, the queues' entries follow them. */
static int banks_compact(Banks *B, int64_t incoming) {
    int64_t used = B->used;
    if (B->n_pool < B->compact_from || B->n_pool - used < used + incoming) return 0;
    Ctl *k = &B->k[B->cur];
    int64_t cap = MAX(B->cap, 2 * (used + incoming));
    if (B->spare_cap < cap) {
        free(B->spare_pool);
        B->spare_pool = malloc((size_t)cap * POOL_ROWS * 4);
        B->spare_cap = B->spare_pool ? cap : 0;
        if (!B->spare_cap) return -1;
    }
    if (B->remap_cap < B->n_pool) {
        free(B->remap);
        B->remap = malloc((size_t)B->n_pool * 8);
        B->remap_cap = B->remap ? B->n_pool : 0;
        if (!B->remap) return -1;
    }
    cap = B->spare_cap;
    int64_t *remap = B->remap;
    int32_t *pool = B->spare_pool;
    int64_t pos = 0;
    for (int64_t a = 0; a < B->n_active; a++) {
        int64_t f = B->active[a], lo = k->flow_first[f], hi = k->flow_last[f];
        if (hi <= lo) continue;
        int64_t m = hi - lo;
        for (int64_t r = 0; r < POOL_ROWS; r++) memcpy(pool + r * cap + pos, B->pool + r * B->cap + lo, (size_t)m * 4);
        for (int64_t i = 0; i < m; i++) remap[lo + i] = pos + i;
        for (int64_t c = 0; c < k->C; c++) {
            FCN(f, c) += pos - lo;
            FCE(f, c) += pos - lo;
        }
        k->flow_first[f] = pos;
        k->flow_last[f] = pos + m;
        pos += m;
    }
    for (int64_t c = 0; c < k->C; c++) {
        for (int64_t d = 0; d < 2; d++) { /* the scheduler's queues' entries */
            for (int64_t i = 0; i < CI(c, C_RQ_N + d); i++) {
                int64_t j = at(CI(c, C_RQ_HEAD + d), i, GG(G_RQ + d));
                SQ(d, c, j) = remap[SQ(d, c, j)];
            }
        }
    }
    for (int64_t s = 0; s < 2 * k->C * k->FRONT; s++) /* the transaction queues' slots in use */
        if (k->tq[s * TQ_COLUMNS + T_ACCESS] >= 0)
            k->tq[s * TQ_COLUMNS + T_ACCESS] = remap[k->tq[s * TQ_COLUMNS + T_ACCESS]];
    B->spare_pool = B->pool, B->spare_cap = B->cap;
    B->pool = pool, B->cap = cap, B->n_pool = pos;
    banks_bind_pool(B);
    forget_next_flows(k);
    return 0;
}

/* The live flows, sorted, anew (``Controller._active``). */
static void banks_set_active(Banks *B, int64_t fid, int live) {
    int64_t n = 0;
    for (int64_t a = 0; a < B->n_active; a++)
        if (B->active[a] != fid) B->active[n++] = B->active[a];
    if (live) {
        int64_t i = n;
        while (i > 0 && B->active[i - 1] > fid) {
            B->active[i] = B->active[i - 1];
            i -= 1;
        }
        B->active[i] = fid;
        n += 1;
    }
    B->n_active = n;
    B->k[0].n_active = B->k[1].n_active = n;
    forget_next_flows(&B->k[0]);  /* (both see the live flows) */
    forget_next_flows(&B->k[1]);
}

/* Command ``c``'s device accesses, found once for its bands (``BankedDram.addresses``): the
 * chunks of its DRAM view and the byte addresses of the accesses they make, in issue order,
 * as runs of addresses a device access apart (access_runs: a chunk's are one run) into
 * ``B->acc[c]`` (``B->n_acc[c]`` accesses). Each band decodes its own (``banks_add_flow``).
 * 0, or -1 when out of memory or an access's channel is not the device's. */
static int banks_decode(Banks *B, int64_t c) {
    const int64_t *shape = B->view_shape + B->view_ptr[c], *strides = B->view_strides + B->view_ptr[c];
    int64_t rank = B->view_ptr[c + 1] - B->view_ptr[c], first, block;
    int64_t count = view_blocks(shape, strides, rank, B->itemsize[c], &first, &block);
    if (count < 0) return -1;
    int64_t *index = calloc((size_t)(first > 0 ? first : 1), 8), *o = malloc((size_t)(count + 1) * 8),
            *s = malloc((size_t)(count + 1) * 8);
    int64_t *addresses = NULL;
    int status = -1;
    if (!index || !o || !s) goto out;
    int64_t chunks = view_chunks_fill(shape, strides, first, block, count, B->itemsize[c], index, o, s);
    int64_t bound = access_runs(o, s, chunks, B->base[c], B->burst, B->access, NULL);
    addresses = malloc((size_t)(2 * bound + 3) * 8);
    if (!addresses) goto out;
    int64_t runs = access_runs(o, s, chunks, B->base[c], B->burst, B->access, addresses);
    int64_t m = addresses[2 + 2 * runs];
    const Decoding *dec = &B->dec;
    if (dec->masks[5] >= B->k[0].C) { /* (decode_grouped's check; a mask below the channels passes all) */
        for (int64_t r = 0; r < runs; r++) {
            int64_t a = addresses[1 + 2 * r];
            for (int64_t i = addresses[2 + 2 * r]; i < addresses[4 + 2 * r]; i++, a += B->access) {
                int64_t ch = ((a >> dec->offset_bits) >> dec->shifts[5]) & dec->masks[5];
                if (ch < 0 || ch >= B->k[0].C) goto out;
            }
        }
    }
    B->acc[c] = addresses;
    B->n_acc[c] = m;
    addresses = NULL;
    status = 0;
out:
    free(index), free(o), free(s), free(addresses);
    return status;
}

/* ``Controller.add_prepared``: a new flow of command ``c``'s accesses lo:hi from ``start`` ns,
 * channel by channel (each access decoded into the pool where its channel's run goes); its id
 * (-1: out of memory or of flow slots). */
static int64_t banks_add_flow(Banks *B, int64_t c, int64_t lo, int64_t hi, int write, double priority, double start) {
    int64_t m = hi - lo;
    if (banks_compact(B, m) < 0) return -1; /* before the new flow is live: its slot may hold a released flow's range */
    int64_t fid;
    if (B->n_free > 0) { /* the smallest free slot */
        int64_t best = 0;
        for (int64_t i = 1; i < B->n_free; i++)
            if (B->free_slots[i] < B->free_slots[best]) best = i;
        fid = B->free_slots[best];
        for (int64_t i = best; i < B->n_free - 1; i++) B->free_slots[i] = B->free_slots[i + 1];
        B->n_free -= 1;
    } else {
        fid = B->slots++;
    }
    if (fid >= B->flow_cap) return -1;
    banks_set_active(B, fid, 1);
    if (B->n_pool + m > B->cap && banks_grow_pool(B, MAX(2 * B->cap, B->n_pool + m), B->n_pool) < 0) return -1;
    Ctl *k = &B->k[B->cur];
    const int64_t *runs = B->acc[c], access = B->access;
    const Decoding dec = B->dec;  /* (a copy: the stores below cannot change it) */
    int64_t C = k->C, cap = B->cap;
    int32_t *bank = B->pool, *row = B->pool + cap, *flow = B->pool + 2 * cap;
    /* each channel's count, then its next free place (its end once all are in), in locals: a
     * flow has up to millions of accesses and its channels alternate at almost each */
    int64_t local[4 * 64], *next = C <= 64 ? local : malloc((size_t)C * 4 * 8);
    if (!next) return -1;
    for (int64_t ch = 0; ch < 4 * C; ch++) next[ch] = 0;
    int64_t offset_bits = dec.offset_bits, shift = dec.shifts[5], mask = dec.masks[5];
    /* the run holding access lo: the last whose first access is no later (runs[2 + 2r]) */
    int64_t r0 = 0, top = runs[0];
    while (top - r0 > 1) {
        int64_t mid = (r0 + top) / 2;
        if (runs[2 + 2 * mid] <= lo) r0 = mid; else top = mid;
    }
    for (int64_t r = r0, j = lo; j < hi; r++) {
        int64_t end = runs[4 + 2 * r] < hi ? runs[4 + 2 * r] : hi, a = runs[1 + 2 * r] + (j - runs[2 + 2 * r]) * access;
        for (; j + 4 <= end; j += 4, a += 4 * access) { /* four sets of counts: no chain of increments to one count */
            next[((a >> offset_bits) >> shift) & mask] += 1;
            next[C + (((a + access) >> offset_bits) >> shift & mask)] += 1;
            next[2 * C + (((a + 2 * access) >> offset_bits) >> shift & mask)] += 1;
            next[3 * C + (((a + 3 * access) >> offset_bits) >> shift & mask)] += 1;
        }
        for (; j < end; j++, a += access) next[((a >> offset_bits) >> shift) & mask] += 1;
    }
    for (int64_t ch = 0; ch < C; ch++) next[ch] += next[C + ch] + next[2 * C + ch] + next[3 * C + ch];
    for (int64_t ch = 0, pos = B->n_pool; ch < C; ch++) {
        FCN(fid, ch) = pos;
        FCL(fid, ch) = next[ch];
        FCE(fid, ch) = pos + next[ch];
        pos += next[ch];
        next[ch] = FCN(fid, ch);
    }
    /* Accesses whose channel, rank, bank group, bank and row bits are alike decode alike (the
     * column's do not count): in an aligned block of addresses below the lowest of those bits
     * other than the channel's, one decode per channel (cached, stamped with the block). */
    uint64_t same = offset_bits + dec.shifts[0] < 64 ? ~(uint64_t)0 << (offset_bits + dec.shifts[0]) : 0;
    for (int f = 1; f < 5; f++)  /* (4: the column) */
        if (f != 4 && offset_bits + dec.shifts[f] < 64) same |= (uint64_t)dec.masks[f] << (offset_bits + dec.shifts[f]);
    if (offset_bits + shift < 64) same &= ~((uint64_t)mask << (offset_bits + shift));
    int64_t low = same ? __builtin_ctzll(same) : 62;
    int64_t *cached_bank = next + C, *cached_row = next + 2 * C, *stamp = next + 3 * C, block = 0;
    for (int64_t ch = 0; ch < C; ch++) stamp[ch] = -1;  /* (the other sets of counts, free now) */
    for (int64_t r = r0, j = lo; j < hi; r++) {
        int64_t end = runs[4 + 2 * r] < hi ? runs[4 + 2 * r] : hi, a = runs[1 + 2 * r] + (j - runs[2 + 2 * r]) * access;
        while (j < end) {
            int64_t in_block = ((((a >> low) + 1) << low) - a + access - 1) / access, stop = j + in_block;
            if (stop > end) stop = end;
            block += 1;
            for (; j < stop; j++, a += access) {
                int64_t ch = ((a >> offset_bits) >> shift) & mask, at = next[ch]++;
                if (stamp[ch] != block) {
                    int64_t fields[4];
                    decode_access(&dec, a, fields);
                    cached_bank[ch] = fields[0], cached_row[ch] = fields[1], stamp[ch] = block;
                }
                bank[at] = (int32_t)cached_bank[ch];
                row[at] = (int32_t)cached_row[ch];
                flow[at] = (int32_t)fid;
            }
        }
    }
    if (next != local) free(next);
    k->flow_first[fid] = B->n_pool;
    k->flow_last[fid] = B->n_pool + m;
    k->flow_write[fid] = write ? 1 : 0;
    k->flow_prio[fid] = priority;
    k->flow_start[fid] = start;
    k->flow_remaining[fid] = m;
    k->flow_waiting[fid] = m;
    k->flow_end[fid] = start;
    k->flow_delay[fid] = 0.0;
    k->flow_data_end[fid] = 0.0;
    B->n_pool += m;
    B->used += m;
    return fid;
}

/* ``Controller.release``: forget a finished flow. */
static void banks_release(Banks *B, int64_t fid) {
    Ctl *k = &B->k[B->cur];
    banks_set_active(B, fid, 0);
    B->free_slots[B->n_free++] = fid;
    B->used -= k->flow_last[fid] - k->flow_first[fid];
    for (int64_t c = 0; c < k->C; c++) FCN(fid, c) = FCE(fid, c);
}

/* ``BankedDram._release_drained``: the write flows done whose accesses have all been issued
 * since are released, in the order they were done. */
static void banks_release_drained(Banks *B) {
    Ctl *k = &B->k[B->cur];
    int64_t kept = 0;
    for (int64_t i = 0; i < B->n_draining; i++) {
        int64_t f = B->draining[i];
        if (k->flow_remaining[f] == 0)
            banks_release(B, f);
        else
            B->draining[kept++] = f;
    }
    B->n_draining = kept;
}

/* ``BankedDram._bring_to``: the controller brought to ``when`` ns (never back); its present. */
static double banks_bring_to(Banks *B, double when) {
    when = MAX(when, B->now_ns);
    run_channels(&B->k[B->cur], when);
    B->now_ns = when;
    return when;
}

/* The earliest end of the flows of ``_events`` that completed in controller ``k`` (``when``
 * if none is earlier). */
static double banks_first_end(const Banks *B, const Ctl *k, double when) {
    for (int64_t i = 0; i < B->n_order; i++) {
        int64_t f = B->order[i];
        if (flow_done(k, f)) when = MIN(when, k->flow_end[f]);
    }
    return when;
}

/* The state's flow arrays (their layout entries) and items per flow: each holds ``flow_cap``
 * flows, of which only the first ``slots`` were ever taken. */
static const int FLOW_ARRAYS[] = {L_FLOW_WRITE, L_FLOW_PRIO, L_FLOW_START, L_FLOW_REMAINING, L_FLOW_END,
                                  L_FLOW_DELAY, L_FC_NEXT, L_FC_END, L_FLOW_FIRST, L_FLOW_LAST,
                                  L_FLOW_WAITING, L_FC_LEFT, L_FLOW_DATA_END};
static const int FLOW_ARRAY_IS_FLOAT[] = {0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1};
#define N_FLOW_ARRAYS ((int)(sizeof FLOW_ARRAYS / sizeof FLOW_ARRAYS[0]))

/* Each buffer's flow arrays sorted by offset, for banks_copy_state. */
static void banks_flow_arrays(Banks *B, const int64_t *layout, int64_t C) {
    for (int buf = 0; buf < 2; buf++) {
        int64_t n = 0;
        for (int i = 0; i < N_FLOW_ARRAYS; i++) {
            if (FLOW_ARRAY_IS_FLOAT[i] != (buf == 0)) continue;
            int a = FLOW_ARRAYS[i];
            int64_t off = layout[a], width = (a == L_FC_NEXT || a == L_FC_END || a == L_FC_LEFT) ? C : 1, j = n++;
            for (; j > 0 && B->flow_off[buf][j - 1] > off; j--) {  /* (insertion: a dozen entries) */
                B->flow_off[buf][j] = B->flow_off[buf][j - 1];
                B->flow_width[buf][j] = B->flow_width[buf][j - 1];
            }
            B->flow_off[buf][j] = off;
            B->flow_width[buf][j] = width;
        }
        B->n_flow_arrays[buf] = n;
    }
}

/* One state buffer into another, as the look-ahead copy needs it: the flow arrays' slots never
 * taken are skipped (zero in both since the start: nothing writes them), the rest copied --
 * most of a state's bytes are flow slots kept for write-queue entries that rarely hold one. */
static void copy_buffer(char *to, const char *from, int64_t n, const int64_t *off, const int64_t *width,
                        int64_t n_arrays, int64_t slots, int64_t cap) {
    int64_t pos = 0;
    for (int64_t i = 0; i < n_arrays; i++) {
        int64_t used_end = off[i] + slots * width[i];
        memcpy(to + pos * 8, from + pos * 8, (size_t)(used_end - pos) * 8);
        pos = off[i] + cap * width[i];
    }
    memcpy(to + pos * 8, from + pos * 8, (size_t)(n - pos) * 8);
}

static void banks_copy_state(Banks *B, int64_t to, int64_t from) {
    int64_t slots = B->slots, cap = B->flow_cap;
    copy_buffer((char *)B->fbuf[to], (const char *)B->fbuf[from], B->nf, B->flow_off[0], B->flow_width[0],
                B->n_flow_arrays[0], slots, cap);
    copy_buffer((char *)B->ibuf[to], (const char *)B->ibuf[from], B->ni, B->flow_off[1], B->flow_width[1],
                B->n_flow_arrays[1], slots, cap);
}

/* ``BankedDram._predict``: the next timeout of the DRAM, at a lower bound on the first
 * completion while more than TAIL column commands must come before it (``_advance``
 * then), else at the first completion a look-ahead copy of the controller reaches (``_wake``). */
static void banks_predict(Loop *L, Banks *B, double now) {
    B->pending = -1;
    if (B->n_order == 0) return;
    Ctl *k = &B->k[B->cur];
    int64_t fewest = fewest_before_end(B->order, B->n_order, k->fc_next, k->fc_end, k->fc_left, k->flow_prio,
                                       k->flow_write, k->C, B->depth, B->write_depth);
    if (fewest > TAIL) {
        double when = B->now_ns + (double)(fewest - TAIL) * B->step_ns;
        double delay = MAX(0.0, when / B->ns_per_cycle - now);
        B->pending = timeout(L, now + delay, 0, DRAM_ADVANCE, 0);
        B->pending_when = when;
        return;
    }
    int64_t other = 1 - B->cur;
    banks_copy_state(B, other, B->cur);
    Ctl *state = &B->k[other];
    memcpy(state->next_memo, k->next_memo, (size_t)(2 * k->C) * 8);  /* the same state, the same answers */
    double when = banks_first_end(B, state, INFINITY);
    while (run_until_complete(state, when < INFINITY ? when : 1e300))
        when = MIN(when, banks_first_end(B, state, INFINITY));
    B->ahead_when = when;
    double delay = MAX(0.0, when / B->ns_per_cycle - now);
    B->pending = timeout(L, now + delay, 0, DRAM_WAKE, 0);
}

/* ``BankedDram._advance``. */
static void banks_advance(Loop *L, Banks *B, double now) {
    banks_bring_to(B, B->pending_when);
    banks_predict(L, B, now);
}

/* ``BankedDram._wake``: the look-ahead copy becomes the controller; the flows it completed
 * release, their events succeed; the busy time and the row hit rate are sampled. */
static void banks_wake(Loop *L, Banks *B, double now, int now_int) {
    B->cur = 1 - B->cur;
    double when = B->ahead_when;
    B->now_ns = when;
    Ctl *k = &B->k[B->cur];
    int64_t kept = 0, n_order = B->n_order;
    for (int64_t i = 0; i < n_order; i++) {
        int64_t f = B->order[i];
        if (flow_done(k, f) && k->flow_end[f] <= when + 1e-9) {
            int64_t c = B->flow_cmd[f];
            B->delay_ns[c] = B->delay_ns[c] + k->flow_delay[f];
            B->draining[B->n_draining++] = f;  /* (released below once its accesses are issued) */
            schedule(L, B->flow_done[f], now, NORMAL, now_int);
        } else {
            B->order[kept++] = f;
        }
    }
    B->n_order = kept;
    banks_release_drained(B);
    for (int64_t c = 0; c < k->C; c++) B->last_busy[c] = CF(c, C_BUS_BUSY);
    B->woke = 1;
    int64_t hits = k->stats_i[S_HITS], total = hits + k->stats_i[S_MISSES] + k->stats_i[S_CONFLICTS];
    if (total) {
        if (B->n_hits == B->hits_cap) {
            int64_t cap = 2 * B->hits_cap + 1024;
            double *t = realloc(B->hit_time, (size_t)cap * 8);
            if (t) B->hit_time = t;
            int64_t *h = realloc(B->hit_hits, (size_t)cap * 8);
            if (h) B->hit_hits = h;
            int64_t *a = realloc(B->hit_total, (size_t)cap * 8);
            if (a) B->hit_total = a;
            if (!t || !h || !a) {
                L->status = BANKS_FAILED;
                return;
            }
            B->hits_cap = cap;
        }
        B->hit_time[B->n_hits] = now;
        B->hit_hits[B->n_hits] = hits;
        B->hit_total[B->n_hits] = total;
        B->n_hits += 1;
    }
    banks_predict(L, B, now);
}

/* ``BankedDram.transfer``: an event that succeeds when the next ``nbytes`` of command ``c``'s
 * bus bytes have moved (its accesses in proportion: a band is a share of them). */
static int64_t banks_transfer(Loop *L, Banks *B, int64_t c, double nbytes, double priority, double now, int now_int) {
    int64_t done = new_event(L);
    if (done == -1) return -1;
    if (B->acc[c] == NULL && banks_decode(B, c) < 0) {
        L->status = BANKS_FAILED;
        return -1;
    }
    double total = MAX(L->bus[c], 1.0);
    int64_t m = B->n_acc[c], lo = B->cursor[c];
    double moved = B->moved[c] + MAX(nbytes, 0.0);
    B->moved[c] = moved;
    int64_t hi = m;
    if (!(moved >= total - 1e-6)) {
        int64_t share = (int64_t)nearbyint(moved / total * (double)m);
        hi = share < m ? share : m;
    }
    B->cursor[c] = hi;
    if (hi <= lo) {
        schedule(L, done, now, NORMAL, now_int);
        return done;
    }
    double start = banks_bring_to(B, now * B->ns_per_cycle);
    banks_release_drained(B);
    int64_t fid = banks_add_flow(B, c, lo, hi, B->write[c] != 0, priority, start);
    if (fid < 0) {
        L->status = BANKS_FAILED;
        return -1;
    }
    B->order[B->n_order++] = fid;
    B->flow_done[fid] = done;
    B->flow_cmd[fid] = c;
    banks_predict(L, B, now);
    return done;
}

/* -- commands ------------------------------------------------------------------------------ */

/* The event command ``c`` must wait for next, from wait ``*position`` on (a semaphore not
 * processed yet, or for a streamed one its first band; -1 when none); ``*position`` moves
 * past it. */
static int64_t first_wait(const Loop *L, int64_t c, int64_t *position) {
    while (*position < L->wait_ptr[c + 1]) {
        int64_t w = L->wait_list[*position];
        *position += 1;
        if (!L->processed[w]) {
            int64_t target = w;
            for (int64_t i = L->stream_ptr[c]; i < L->stream_ptr[c + 1]; i++)
                if (L->stream_list[i] == w) target = L->n + w;
            if (!L->processed[target]) return target;
        }
    }
    return -1;
}

/* (``_stream_tail``) The next streamed command ``c`` waits to end, from ``*position`` on (-1
 * when none); ``*position`` moves past it. */
static int64_t next_arrival(const Loop *L, int64_t c, int64_t *position) {
    while (*position < L->stream_ptr[c + 1]) {
        int64_t i = *position;
        *position += 1;
        if (L->late[i] && !L->processed[L->stream_list[i]]) return L->stream_list[i];
    }
    return -1;
}

/* Which command made ``c`` ready last (engine ``_bind``): the queue's previous command (at
 * its end, or its start for an in-order DMA queue) or the semaphore signalled last (at its
 * first band for a streamed one); ties go to the queue. */
static void bind(Loop *L, int64_t c, int64_t previous, int previous_at_start) {
    int64_t best = -1, at = AT_END;
    double best_time = -1.0;
    if (previous != -1) {
        if (previous_at_start) {
            best = previous, best_time = L->start[previous], at = AT_START;
        } else {
            best = previous, best_time = L->end[previous], at = AT_END;
        }
    }
    for (int64_t i = L->wait_ptr[c]; i < L->wait_ptr[c + 1]; i++) {
        int64_t w = L->wait_list[i], how;
        double when;
        if (L->processed[w]) {
            when = L->end[w], how = AT_END;
        } else {
            when = L->band[w], how = AT_BAND;
        }
        if (when > best_time) best = w, best_time = when, at = how;
    }
    L->binding[c] = best;
    L->binding_at[c] = at;
}

/* The streamed command ``c`` waited for that ended last (ties: the higher id). */
static int64_t latest(const Loop *L, int64_t c) {
    int64_t best = -1;
    for (int64_t i = L->stream_ptr[c]; i < L->stream_ptr[c + 1]; i++) {
        if (L->late[i]) {
            int64_t w = L->stream_list[i];
            if (best == -1 || L->end[w] > L->end[best] || (L->end[w] == L->end[best] && w > best)) best = w;
        }
    }
    return best;
}

/* Flag the streamed waits of ``c`` not done yet (still arriving); whether there is one. */
static int mark_late(Loop *L, int64_t c) {
    int any = 0;
    for (int64_t i = L->stream_ptr[c]; i < L->stream_ptr[c + 1]; i++) {
        L->late[i] = !L->processed[L->stream_list[i]];
        any = any || L->late[i];
    }
    return any;
}

static int any_late(const Loop *L, int64_t c) {
    for (int64_t i = L->stream_ptr[c]; i < L->stream_ptr[c + 1]; i++)
        if (L->late[i]) return 1;
    return 0;
}

/* -- the run ------------------------------------------------------------------------------- */

/* What the run records, returned to Python as bytearrays (numpy.frombuffer): 8-byte items
 * but the counters' int marks (1 byte). */
enum {
    OUT_READY, OUT_START, OUT_END, OUT_BAND, OUT_BINDING, OUT_BINDING_AT, OUT_TAIL, OUT_FLOWING, OUT_DATA_END,
    OUT_MARK, OUT_LAST_START, OUT_CHANNEL_OF, OUT_INT_MASK, OUT_ORDER, OUT_OCC_TIME, OUT_OCC_USED, OUT_OCC_INT,
    OUT_DRAM_TIME, OUT_DRAM_FLOWS, OUT_DRAM_INT, OUT_DMA_STEPS, N_OUT
};

/* The run's working arrays, each NULL until allocated. Buffers of which an entry is written
 * before it is read (the heap, the flows, the nodes) are malloc'ed, so the pages a run never
 * reaches are never touched and take no memory; the others are calloc'ed (zeros) or filled. */
typedef struct {
    void *p[48];
    int n, failed;
} Allocations;

static void *take(Allocations *a, int64_t count, size_t size, int zeroed) {
    size_t items = count > 0 ? (size_t)count : 1;
    void *p = a->n < 48 ? (zeroed ? calloc(items, size) : malloc(items * size)) : NULL;
    if (p == NULL) {
        a->failed = 1;
        return NULL;
    }
    a->p[a->n++] = p;
    return p;
}

static void free_all(Allocations *a) {
    for (int i = 0; i < a->n; i++) free(a->p[i]);
    a->n = 0;
}

/* The loop itself: SimPy's events in SimPy's order, each callback resuming its task until
 * it waits again. Returns the status; the scalars of the result in ``*now``, ``*now_int``,
 * ``*n_processed``. */
static int64_t run_loop(Loop *L, const int64_t *queue_ptr, const int64_t *queue_cmds, const int64_t *queue_compute,
                        const int64_t *queue_core, int64_t n_queues, int64_t channels, int shared_cores,
                        int64_t max_events, int64_t *users_left, int64_t *queue_pos, int64_t *queue_phase,
                        int64_t *queue_cursor, int64_t *queue_prev, double *queue_before, int64_t *dma_phase,
                        int64_t *dma_cursor, int64_t *free_channels, void **out, double *now_out, int *now_int_out,
                        int64_t *n_processed_out) {
    const int64_t n = L->n;
    double *ready = out[OUT_READY], *start = out[OUT_START], *end = out[OUT_END], *band = out[OUT_BAND];
    int64_t *tail = out[OUT_TAIL], *channel_of = out[OUT_CHANNEL_OF], *int_mask = out[OUT_INT_MASK];
    int64_t *order = out[OUT_ORDER], *dma_steps = out[OUT_DMA_STEPS];
    double *flowing = out[OUT_FLOWING], *data_end = out[OUT_DATA_END], *mark = out[OUT_MARK];
    double *last_start = out[OUT_LAST_START];
    double *occ_time = out[OUT_OCC_TIME], *dram_time = out[OUT_DRAM_TIME];
    int64_t *occ_used = out[OUT_OCC_USED], *dram_flows = out[OUT_DRAM_FLOWS];
    char *occ_int = out[OUT_OCC_INT], *dram_int = out[OUT_DRAM_INT];
    int64_t n_free_channels = channels;

    for (int64_t q = 0; q < n_queues; q++) { /* every queue starts as SimPy starts a process: URGENT, at 0 */
        int64_t ev = new_event(L);
        if (ev == -1) break; /* a pool smaller than the queues: POOL_FULL */
        schedule(L, ev, 0.0, URGENT, 1);
        on(L, ev, RESUME_QUEUE, q);
    }

    double now = 0.0;
    int now_int = 1;
    int64_t n_processed = 0;
    while (L->heap_size > 0 && L->status == OK) {
        Entry top = pop(L);
        now = top.time;
        now_int = top.is_int;
        int64_t ev = top.event;
        n_processed += 1;
        if (n_processed > max_events) {
            L->status = EVENT_BUDGET;
            break;
        }
        L->processed[ev] = 1;
        int64_t node = L->head[ev];
        L->head[ev] = -1;
        while (node != -1 && L->status == OK) {
            int64_t what = L->node_what[node], task = L->node_arg[node];
            L->free_nodes[L->n_free_nodes] = (int32_t)node;
            L->n_free_nodes += 1;
            node = L->node_next[node];
            if (what == BANDWIDTH_WAKE) {
                if (ev == L->pending) wake(L, now, now_int); /* else a start or end since rescheduled it */
                continue;
            }
            if (what == GRANT) {
                grant(L, task, now, now_int);
                continue;
            }
            if (what == DRAM_ADVANCE || what == DRAM_WAKE) { /* else a transfer since predicted anew */
                if (ev == L->banks->pending) {
                    if (what == DRAM_ADVANCE)
                        banks_advance(L, L->banks, now);
                    else
                        banks_wake(L, L->banks, now, now_int);
                }
                continue;
            }
            if (what == BAND_SIGNAL) { /* a compute's first band is done */
                schedule(L, n + task, now, NORMAL, now_int);
                continue;
            }
            /* A task resumes: its generator runs on until it yields an event not processed yet
             * (``block``: it registers on it) or ends. */
            int64_t block = -1;
            while (L->status == OK) {
                int64_t done_cmd = -1; /* a command it completed */
                if (what == RESUME_QUEUE) {
                    int64_t q = task;
                    int64_t phase = queue_phase[q];
                    if (phase == 0) { /* the next command of the queue */
                        if (queue_pos[q] == queue_ptr[q + 1]) break;
                        queue_cursor[q] = L->wait_ptr[queue_cmds[queue_pos[q]]];
                        queue_phase[q] = 1;
                        continue;
                    }
                    int64_t c = queue_cmds[queue_pos[q]];
                    if (phase == 1) { /* its semaphores */
                        block = first_wait(L, c, &queue_cursor[q]);
                        if (block != -1) break;
                        ready[c] = now;
                        int_mask[c] |= now_int ? READY_INT : 0;
                        bind(L, c, queue_prev[q], !queue_compute[q]);
                        queue_phase[q] = 2;
                        if (queue_compute[q] && !shared_cores) continue;
                        /* a DMA channel, or the core shared with other streams */
                        block = request(L, queue_compute[q] ? 1 + queue_core[q] : 0, now, now_int);
                        break;
                    }
                    if (!queue_compute[q]) { /* a DMA queue got a channel: the transfer runs as its own task */
                        start[c] = now;
                        int_mask[c] |= now_int ? START_INT : 0;
                        timeout(L, now, now_int, RESUME_DMA, c);
                        queue_prev[q] = c;
                        queue_pos[q] += 1;
                        queue_phase[q] = 0;
                        continue;
                    }
                    int64_t b = L->bands[c];
                    if (phase == 2) { /* a compute got its core: start */
                        start[c] = now;
                        int_mask[c] |= now_int ? START_INT : 0;
                        int late = mark_late(L, c);
                        if (!reads_ok(L, c, 1) || !claim(L, c)) {
                            L->status = SCRATCHPAD_ERROR;
                            break;
                        }
                        sample(occ_time, occ_used, occ_int, &L->n_occ, now, now_int, L->used);
                        if (L->has_band[c]) { /* a store streams out its results: signal the first band */
                            band[c] = now + L->cycles[c] / (double)b;
                            timeout(L, now + L->cycles[c] / (double)b, 0, BAND_SIGNAL, c);
                        }
                        if (late) { /* all bands but the last, then wait for the inputs still arriving */
                            block = timeout(L, now + L->cycles[c] * (double)(b - 1) / (double)b, 0, -1, 0);
                            queue_phase[q] = 3;
                        } else {
                            block = timeout(L, now + L->cycles[c], now_int && L->cycles_int[c], -1, 0);
                            queue_phase[q] = 5;
                        }
                        break;
                    }
                    if (phase == 3) { /* _stream_tail: wait for the streamed inputs still arriving */
                        queue_before[q] = now;
                        queue_cursor[q] = L->stream_ptr[c];
                        queue_phase[q] = 4;
                        continue;
                    }
                    if (phase == 4) {
                        block = next_arrival(L, c, &queue_cursor[q]);
                        if (block != -1) break;
                        if (now > queue_before[q]) tail[c] = latest(L, c); /* held up by the latest of them */
                        if (!reads_ok(L, c, 2)) {
                            L->status = SCRATCHPAD_ERROR;
                            break;
                        }
                        block = timeout(L, now + L->cycles[c] / (double)b, 0, -1, 0);
                        queue_phase[q] = 5;
                        break;
                    }
                    /* phase 5: computed */
                    for (int64_t i = L->write_ptr[c]; i < L->write_ptr[c + 1]; i++) /* fill */
                        L->valid[L->write_res[i]] = L->valid[L->write_res[i]] || L->live[L->write_res[i]];
                    end[c] = now;
                    int_mask[c] |= now_int ? END_INT : 0;
                    if (shared_cores) release_unit(L, 1 + queue_core[q], now, now_int);
                    done_cmd = c;
                    queue_prev[q] = c;
                    queue_pos[q] += 1;
                    queue_phase[q] = 0;
                } else { /* a DMA transfer (engine._Machine._dma) */
                    int64_t c = task;
                    int64_t phase = dma_phase[c];
                    double nbytes = 0.0; /* the bytes of the transfer on the bus it starts now (phases 1, 2, 4) */
                    if (phase == 0) {
                        int late = mark_late(L, c);
                        if (!claim(L, c) || (!late && !reads_ok(L, c, 0))) {
                            L->status = SCRATCHPAD_ERROR;
                            break;
                        }
                        sample(occ_time, occ_used, occ_int, &L->n_occ, now, now_int, L->used);
                        dma_steps[L->n_dma_steps] = c;
                        L->n_dma_steps += 1;
                        n_free_channels -= 1; /* it takes the lowest free channel */
                        channel_of[c] = free_channels[0];
                        for (int64_t k = 0; k < n_free_channels; k++) free_channels[k] = free_channels[k + 1];
                        block = timeout(L, now + L->setup_latency[c], 0, -1, 0);
                        dma_phase[c] = 1;
                        break;
                    }
                    if (phase == 1) { /* setup and latency paid: the data phase */
                        flowing[c] = now;
                        L->flows_now += 1;
                        sample(dram_time, dram_flows, dram_int, &L->n_dram, now, now_int, L->flows_now);
                        if (any_late(L, c) || L->has_band[c]) { /* in bands */
                            nbytes = L->bus[c] / (double)L->bands[c];
                            dma_phase[c] = 2;
                        } else {
                            nbytes = L->bus[c];
                            dma_phase[c] = 6;
                        }
                    } else if (phase == 2) { /* the first band has moved */
                        if (L->has_band[c]) {
                            band[c] = now;
                            int_mask[c] |= now_int ? BAND_INT : 0;
                            schedule(L, n + c, now, NORMAL, now_int);
                        }
                        double first = L->bus[c] / (double)L->bands[c];
                        if (any_late(L, c)) {
                            nbytes = L->bus[c] - 2.0 * first;
                            dma_phase[c] = 3;
                        } else {
                            nbytes = L->bus[c] - first;
                            dma_phase[c] = 6;
                        }
                    } else if (phase == 3) { /* all but the last band moved: wait for the op's last band */
                        L->flows_now -= 1;
                        sample(dram_time, dram_flows, dram_int, &L->n_dram, now, now_int, L->flows_now);
                        mark[c] = now;
                        dma_cursor[c] = L->stream_ptr[c];
                        dma_phase[c] = 4;
                        continue;
                    } else if (phase == 4) {
                        block = next_arrival(L, c, &dma_cursor[c]);
                        if (block != -1) break;
                        if (now > mark[c]) tail[c] = latest(L, c);
                        L->flows_now += 1;
                        sample(dram_time, dram_flows, dram_int, &L->n_dram, now, now_int, L->flows_now);
                        last_start[c] = now;
                        nbytes = L->bus[c] / (double)L->bands[c];
                        dma_phase[c] = 6;
                    } else if (phase == 6) { /* the data has moved */
                        L->flows_now -= 1;
                        sample(dram_time, dram_flows, dram_int, &L->n_dram, now, now_int, L->flows_now);
                        if (any_late(L, c) && !reads_ok(L, c, 0)) {
                            L->status = SCRATCHPAD_ERROR;
                            break;
                        }
                        data_end[c] = now;
                        double addresses_left = flowing[c] + L->addr_cycles[c] - now;
                        dma_phase[c] = 7;
                        if (addresses_left > 0) { /* the address generator, not the bus, was the bottleneck */
                            block = timeout(L, now + addresses_left, 0, -1, 0);
                            break;
                        }
                        continue;
                    } else { /* phase 7: done */
                        if (L->banks) { /* its accesses are issued: drop them */
                            free(L->banks->acc[c]);
                            L->banks->acc[c] = NULL;
                        }
                        dma_steps[L->n_dma_steps] = n + c;
                        L->n_dma_steps += 1;
                        for (int64_t i = L->write_ptr[c]; i < L->write_ptr[c + 1]; i++) /* fill */
                            L->valid[L->write_res[i]] = L->valid[L->write_res[i]] || L->live[L->write_res[i]];
                        release_unit(L, 0, now, now_int);
                        int64_t k = n_free_channels; /* its channel is free again (kept sorted) */
                        while (k > 0 && free_channels[k - 1] > channel_of[c]) {
                            free_channels[k] = free_channels[k - 1];
                            k -= 1;
                        }
                        free_channels[k] = channel_of[c];
                        n_free_channels += 1;
                        end[c] = now;
                        int_mask[c] |= now_int ? END_INT : 0;
                        done_cmd = c;
                    }
                    if (done_cmd == -1) { /* phases 1, 2 and 4: a transfer on the bus */
                        block = L->banks ? banks_transfer(L, L->banks, c, nbytes, L->urgency[c], now, now_int)
                                         : transfer(L, nbytes, L->urgency[c], now, now_int);
                        break;
                    }
                }
                /* _complete: signal the command done, release what it was the last user of */
                schedule(L, done_cmd, now, NORMAL, now_int);
                for (int64_t i = L->read_ptr[done_cmd]; i < L->read_ptr[done_cmd + 1]; i++) { /* engine: touched */
                    users_left[L->read_res[i]] -= 1;
                    if (users_left[L->read_res[i]] == 0) release(L, L->read_res[i]);
                }
                for (int64_t i = L->write_ptr[done_cmd]; i < L->write_ptr[done_cmd + 1]; i++) {
                    users_left[L->write_res[i]] -= 1;
                    if (users_left[L->write_res[i]] == 0) release(L, L->write_res[i]);
                }
                sample(occ_time, occ_used, occ_int, &L->n_occ, now, now_int, L->used);
                order[L->n_done] = done_cmd;
                L->n_done += 1;
                if (what == RESUME_DMA) break; /* the transfer's task ends */
            }
            if (block != -1 && L->status == OK) on(L, block, what, task); /* the task waits for ``block`` */
        }
        if (ev >= 2 * n) { /* a pool event: nothing refers to it once processed */
            L->processed[ev] = 0;
            L->head[ev] = -1;
            L->free_events[L->n_free_events] = (int32_t)ev;
            L->n_free_events += 1;
        }
    }
    *now_out = now;
    *now_int_out = now_int;
    *n_processed_out = n_processed;
    int64_t status = L->status;
    if (status == OK && L->n_done < n) status = DEADLOCK;
    return status;
}

/* The arguments of run_program, in order (the arrays first). */
enum {
    A_KIND, A_BANDS, A_HAS_BAND, A_CYCLES, A_CYCLES_INT, A_BUS, A_SETUP_LATENCY, A_ADDR_CYCLES, A_URGENCY,
    A_WAIT_PTR, A_WAIT_LIST, A_STREAM_PTR, A_STREAM_LIST, A_READ_PTR, A_READ_RES, A_READ_OFF, A_READ_SIZE,
    A_WRITE_PTR, A_WRITE_RES, A_WRITE_OFF, A_WRITE_SIZE, A_USERS_LEFT, A_QUEUE_PTR, A_QUEUE_CMDS,
    A_QUEUE_COMPUTE, A_QUEUE_CORE, N_ARRAYS,
    A_CHANNELS = N_ARRAYS, A_CORES, A_SHARED_CORES, A_RATE, A_CAPACITY, A_MAX_EVENTS, A_POOL, A_BANKS, N_ARGS
};

static const char *const ARRAY_NAMES[N_ARRAYS] = {
    "kind", "bands", "has_band", "cycles", "cycles_int", "bus", "setup_latency", "addr_cycles", "urgency",
    "wait_ptr", "wait_list", "stream_ptr", "stream_list", "read_ptr", "read_res", "read_off", "read_size",
    "write_ptr", "write_res", "write_off", "write_size", "users_left", "queue_ptr", "queue_cmds",
    "queue_compute", "queue_core"};

static int is_float_array(int a) {
    return a == A_CYCLES || a == A_BUS || a == A_SETUP_LATENCY || a == A_ADDR_CYCLES || a == A_URGENCY;
}

/* The results' bytearrays, sized for the most a run can take (sample tracks are cut to what
 * the run took before they are returned). */
static int make_outputs(PyObject **objects, void **out, int64_t n) {
    for (int k = 0; k < N_OUT; k++) {
        Py_ssize_t count = n;
        if (k == OUT_OCC_TIME || k == OUT_OCC_USED || k == OUT_OCC_INT) count = 3 * n + 2;
        if (k == OUT_DRAM_TIME || k == OUT_DRAM_FLOWS || k == OUT_DRAM_INT) count = 4 * n + 2;
        if (k == OUT_DMA_STEPS) count = 2 * n;
        if (k == OUT_OCC_INT || k == OUT_DRAM_INT) { /* 1-byte marks */
            objects[k] = PyByteArray_FromStringAndSize(NULL, count);
            if (objects[k] != NULL) out[k] = PyByteArray_AS_STRING(objects[k]);
        } else {
            objects[k] = new_items(count, &out[k]);
        }
        if (objects[k] == NULL) return -1;
    }
    double *band = out[OUT_BAND], *mark = out[OUT_MARK];
    int64_t *binding = out[OUT_BINDING], *tail = out[OUT_TAIL], *channel_of = out[OUT_CHANNEL_OF];
    int64_t *order = out[OUT_ORDER], *dma_steps = out[OUT_DMA_STEPS];
    for (int64_t i = 0; i < n; i++) {
        band[i] = mark[i] = NAN;
        binding[i] = tail[i] = channel_of[i] = order[i] = -1;
        dma_steps[2 * i] = dma_steps[2 * i + 1] = -1;
    }
    int zeroed[] = {OUT_READY, OUT_START, OUT_END, OUT_BINDING_AT, OUT_FLOWING, OUT_DATA_END, OUT_LAST_START,
                    OUT_INT_MASK};
    for (size_t k = 0; k < sizeof zeroed / sizeof zeroed[0]; k++) memset(out[zeroed[k]], 0, (size_t)n * 8);
    return 0;
}

/* Cut bytearray ``object`` to ``count`` items of ``size`` bytes. */
static int cut(PyObject *object, int64_t count, size_t size) {
    return PyByteArray_Resize(object, (Py_ssize_t)(count * (int64_t)size));
}

static int64_t int_arg(PyObject *arg, const char *name, int *failed) {
    int64_t value = PyLong_AsLongLong(arg);
    if (value == -1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "npusim C kernel run_program: argument %s is not an int64", name);
        *failed = 1;
    }
    return value;
}

/* The arrays of the ``banks`` argument of run_program, in order. */
enum {
    K_T, K_G, K_LAYOUT, K_FBUF, K_IBUF, K_VIEW_PTR, K_VIEW_SHAPE, K_VIEW_STRIDES, K_ITEMSIZE, K_BASE, K_WRITE,
    K_SHIFTS, K_MASKS, K_INTS, K_FLOATS, N_BANK_ARGS
};
/* K_INTS: offset_bits, rows, ranks, bankgroups, banks_per_group, burst, access, depth and (after
 * compact_from, Controller.compact_from) write_depth: the queue depths of commands_before_end;
 * K_FLOATS: ns per cycle, step (max(tBurst, tCCD_S)) */

/* The access pools of the last run, kept for the next one (a DSE or a regression runs the model
 * dozens of times in a process): their pages stay mapped, where a fresh pool takes a page fault
 * for every 4 KiB it grows into (~3,000 a run of resnet18: a third of the banks model's extra
 * CPU time on a 20-point DSE). Only memory is kept, no state: a run writes every entry it reads.
 * The event loop holds the GIL, so one run at a time uses them. */
static struct {
    int32_t *pool, *spare;
    int64_t cap, spare_cap;
} kept;

#define KEEP_AT_MOST ((int64_t)1 << 20) /* accesses (12 MiB): a larger pool goes back to the system */

/* Keep ``*pool`` (``cap`` entries) for the next run, freeing a smaller kept one. */
static void keep_pool(int32_t **pool, int64_t cap, int32_t **kept_pool, int64_t *kept_cap) {
    if (*pool && cap > *kept_cap && cap <= KEEP_AT_MOST) {
        free(*kept_pool);
        *kept_pool = *pool, *kept_cap = cap;
    } else {
        free(*pool);
    }
    *pool = NULL;
}

static void banks_free(Banks *B, int64_t n) {
    if (B == NULL) return;
    for (int s = 0; s < 2; s++) free(B->fbuf[s]), free(B->ibuf[s]);
    if (B->acc)
        for (int64_t c = 0; c < n; c++) free(B->acc[c]);
    keep_pool(&B->pool, B->cap, &kept.pool, &kept.cap);
    keep_pool(&B->spare_pool, B->spare_cap, &kept.spare, &kept.spare_cap);
    free(B->acc), free(B->active), free(B->free_slots), free(B->order), free(B->draining);
    free(B->flow_done), free(B->flow_cmd), free(B->moved), free(B->delay_ns), free(B->cursor), free(B->n_acc);
    free(B->scratch_i), free(B->scratch_f), free(B->held), free(B->lanes), free(B->hit_time), free(B->hit_hits), free(B->hit_total);
    free(B->k[0].next_memo), free(B->k[1].next_memo);
    free(B->remap);
    free(B->last_busy);
    free(B);
}

/* The DRAM with banks of a run, from the ``banks`` argument (its arrays in ``buffers``); NULL
 * with an exception set on an error. */
static Banks *banks_new(PyObject *arg, Buffers *buffers, int64_t n, void **state_f, void **state_i) {
    if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != N_BANK_ARGS) {
        PyErr_SetString(PyExc_TypeError, "npusim C kernel run_program: banks is not a tuple of its arrays");
        return NULL;
    }
    const void *a[N_BANK_ARGS];
    Py_ssize_t len[N_BANK_ARGS];
    for (int i = 0; i < N_BANK_ARGS; i++) {
        int is_float = i == K_T || i == K_FBUF || i == K_FLOATS;
        a[i] = buffer_of(buffers, PyTuple_GET_ITEM(arg, i), is_float ? 'd' : 'q', i == K_FBUF || i == K_IBUF, &len[i],
                         "banks");
        if (a[i] == NULL) return NULL;
    }
    if (len[K_T] != N_TIMING || len[K_G] != N_G || len[K_SHIFTS] < 6 || len[K_MASKS] < 6 || len[K_INTS] < 10
        || len[K_FLOATS] < 2 || len[K_VIEW_PTR] != n + 1 || len[K_ITEMSIZE] != n || len[K_BASE] != n
        || len[K_WRITE] != n) {
        PyErr_SetString(PyExc_ValueError, "npusim C kernel run_program: banks arrays of the wrong sizes");
        return NULL;
    }
    Banks *B = calloc(1, sizeof(Banks));
    if (B == NULL) return (Banks *)PyErr_NoMemory();
    *state_f = (void *)a[K_FBUF], *state_i = (void *)a[K_IBUF];
    const int64_t *G = a[K_G], *ints = a[K_INTS], *layout = a[K_LAYOUT];
    const double *floats = a[K_FLOATS];
    int64_t C = G[G_CHANNELS], NB = C * G[G_RANKS] * G[G_BANKGROUPS] * G[G_BANKS_PER_GROUP];
    B->nf = len[K_FBUF], B->ni = len[K_IBUF];
    B->flow_cap = len[K_LAYOUT] == N_LAYOUT ? layout[L_FLOW_CAP] : 0;
    int64_t F = B->flow_cap > 0 ? B->flow_cap : 1;
    for (int s = 0; s < 2; s++) {
        B->fbuf[s] = malloc((size_t)(B->nf > 0 ? B->nf : 1) * 8);
        B->ibuf[s] = malloc((size_t)(B->ni > 0 ? B->ni : 1) * 8);
    }
    if (kept.pool) { /* the last run's pools (``kept``) */
        B->pool = kept.pool, B->cap = kept.cap;
        B->spare_pool = kept.spare, B->spare_cap = kept.spare_cap;
        memset(&kept, 0, sizeof kept);
    } else {
        B->cap = 1024;
        B->pool = malloc((size_t)B->cap * POOL_ROWS * 4);
    }
    B->active = malloc(F * 8), B->free_slots = malloc(F * 8), B->order = malloc(F * 8), B->draining = malloc(F * 8);
    B->flow_done = malloc(F * 8), B->flow_cmd = malloc(F * 8);
    B->moved = calloc(n + 1, 8), B->delay_ns = calloc(n + 1, 8), B->cursor = calloc(n + 1, 8);
    B->n_acc = calloc(n + 1, 8), B->acc = calloc(n + 1, sizeof(int64_t *));
    B->scratch_i = calloc(NB * 2 + 1, 8), B->scratch_f = calloc(NB * 2 + 1, 8);
    B->held = malloc((size_t)(C + 1) * sizeof(Pick));
    B->lanes = malloc((size_t)(C + 1) * sizeof(Lane));
    B->last_busy = calloc(C > 0 ? C : 1, 8);
    if (!B->fbuf[0] || !B->fbuf[1] || !B->ibuf[0] || !B->ibuf[1] || !B->pool || !B->active
        || !B->free_slots || !B->order || !B->draining || !B->flow_done || !B->flow_cmd || !B->moved || !B->delay_ns || !B->cursor
        || !B->n_acc || !B->acc || !B->scratch_i || !B->scratch_f || !B->held || !B->lanes || !B->last_busy) {
        banks_free(B, n);
        return (Banks *)PyErr_NoMemory();
    }
    for (int s = 0; s < 2; s++) {
        memcpy(B->fbuf[s], a[K_FBUF], (size_t)B->nf * 8);
        memcpy(B->ibuf[s], a[K_IBUF], (size_t)B->ni * 8);
        Ctl *k = &B->k[s];
        k->T = a[K_T];
        k->G = G;
        if (bind_state(k, B->fbuf[s], B->nf, B->ibuf[s], B->ni, layout, len[K_LAYOUT]) < 0) {
            banks_free(B, n);
            return NULL;
        }
        k->btag = B->scratch_i;
        k->picks = B->scratch_i + NB * 2;
        k->barr = B->scratch_f;
        k->held = B->held;  /* (shared: the two controllers never run at once) */
        k->lanes = B->lanes;
        k->next_memo = malloc((size_t)(2 * C + 1) * 8);
        if (!k->next_memo) {
            banks_free(B, n);
            return (Banks *)PyErr_NoMemory();
        }
        forget_next_flows(k);
    }
    banks_bind_pool(B);
    banks_flow_arrays(B, layout, C);
    B->view_ptr = a[K_VIEW_PTR], B->view_shape = a[K_VIEW_SHAPE], B->view_strides = a[K_VIEW_STRIDES];
    B->itemsize = a[K_ITEMSIZE], B->base = a[K_BASE], B->write = a[K_WRITE];
    const int64_t *shifts = a[K_SHIFTS], *masks = a[K_MASKS];
    B->dec.offset_bits = ints[0], B->dec.rows = ints[1], B->dec.ranks = ints[2], B->dec.bankgroups = ints[3];
    B->dec.banks_per_group = ints[4];
    for (int f = 0; f < 6; f++) B->dec.shifts[f] = shifts[f], B->dec.masks[f] = masks[f];
    B->burst = ints[5], B->access = ints[6], B->depth = ints[7], B->compact_from = ints[8], B->write_depth = ints[9];
    B->ns_per_cycle = floats[0], B->step_ns = floats[1];
    B->pending = -1;
    if (B->burst <= 0 || B->access <= 0 || B->dec.rows <= 0) {
        banks_free(B, n);
        PyErr_SetString(PyExc_ValueError, "npusim C kernel run_program: banks with no burst, access or rows");
        return NULL;
    }
    return B;
}

/* What a run with banks returns: (delay_ns, hit_time, hit_hits, hit_total, last_busy, woke),
 * the controller's final state written into the caller's state buffers. */
static PyObject *banks_result(Banks *B, int64_t n, double *state_f, int64_t *state_i) {
    run_channels(&B->k[B->cur], INFINITY);  /* the posted writes still queued: issued (``BankedDram.finish``) */
    memcpy(state_f, B->fbuf[B->cur], (size_t)B->nf * 8);
    memcpy(state_i, B->ibuf[B->cur], (size_t)B->ni * 8);
    return Py_BuildValue("(y#y#y#y#y#L)", (const char *)B->delay_ns, (Py_ssize_t)(n * 8), (const char *)B->hit_time,
                         (Py_ssize_t)(B->n_hits * 8), (const char *)B->hit_hits, (Py_ssize_t)(B->n_hits * 8),
                         (const char *)B->hit_total, (Py_ssize_t)(B->n_hits * 8), (const char *)B->last_busy,
                         (Py_ssize_t)(B->k[0].C * 8), (long long)B->woke);
}

PyDoc_STRVAR(run_program_doc,
             "run_program(kind, bands, has_band, cycles, cycles_int, bus, setup_latency, addr_cycles, urgency,\n"
             "            wait_ptr, wait_list, stream_ptr, stream_list, read_ptr, read_res, read_off, read_size,\n"
             "            write_ptr, write_res, write_off, write_size, users_left, queue_ptr, queue_cmds,\n"
             "            queue_compute, queue_core, channels, cores, shared_cores, rate, capacity, max_events,\n"
             "            pool, banks)\n"
             "--\n\n"
             "Run a program on the compiled event loop (npusim.sim.compiled_loop.run builds the arguments:\n"
             "int64 arrays, float64 for cycles, bus, setup_latency, addr_cycles and urgency). Returns\n"
             "(status, now, now_int, n_processed, peak, busy_cycles, ready, start, end, band, binding,\n"
             "binding_at, tail, flowing, data_end, mark, last_start, channel_of, int_mask, order, occ_time,\n"
             "occ_used, occ_int, dram_time, dram_flows, dram_int, dma_steps), the arrays as bytearrays of\n"
             "int64 or float64 items (the int marks occ_int, dram_int: 1 byte each). users_left is not\n"
             "changed. banks: None (the shared bus), or the arrays of a DRAM with banks (compiled_loop.run's\n"
             "_banks_arguments); the result then has a third item, the banks' results (banks_result).");

static PyObject *run_program(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (arg_count(nargs, N_ARGS, "run_program") < 0) return NULL;
    Buffers buffers = {.n = 0};
    Allocations mem = {.n = 0, .failed = 0};
    PyObject *objects[N_OUT] = {NULL};
    void *out[N_OUT] = {NULL};
    PyObject *result = NULL;
    const void *in[N_ARRAYS];
    Py_ssize_t len[N_ARRAYS];
    Loop L = {0};
    int64_t n_banks_cmds = 0; /* the commands L.banks holds per-command arrays for */
    for (int a = 0; a < N_ARRAYS; a++) {
        in[a] = buffer_of(&buffers, args[a], is_float_array(a) ? 'd' : 'q', 0, &len[a], ARRAY_NAMES[a]);
        if (in[a] == NULL) goto done;
    }
    int failed = 0;
    int64_t channels = int_arg(args[A_CHANNELS], "channels", &failed);
    int64_t cores = int_arg(args[A_CORES], "cores", &failed);
    int shared_cores = PyObject_IsTrue(args[A_SHARED_CORES]);
    double rate = PyFloat_AsDouble(args[A_RATE]);
    int64_t capacity = int_arg(args[A_CAPACITY], "capacity", &failed);
    int64_t max_events = int_arg(args[A_MAX_EVENTS], "max_events", &failed);
    int64_t pool = int_arg(args[A_POOL], "pool", &failed);
    if (failed || shared_cores < 0 || (rate == -1.0 && PyErr_Occurred())) goto done;
    void *state_f = NULL, *state_i = NULL;

    const int64_t n = len[A_KIND];
    const int64_t n_queues = len[A_QUEUE_COMPUTE];
    const int64_t n_res = len[A_USERS_LEFT];
    const int64_t n_events = 2 * n + pool;
    L.n = n;
    L.bands = in[A_BANDS], L.has_band = in[A_HAS_BAND], L.cycles_int = in[A_CYCLES_INT];
    L.cycles = in[A_CYCLES], L.bus = in[A_BUS], L.setup_latency = in[A_SETUP_LATENCY];
    L.addr_cycles = in[A_ADDR_CYCLES], L.urgency = in[A_URGENCY];
    L.wait_ptr = in[A_WAIT_PTR], L.wait_list = in[A_WAIT_LIST];
    L.stream_ptr = in[A_STREAM_PTR], L.stream_list = in[A_STREAM_LIST];
    L.read_ptr = in[A_READ_PTR], L.read_res = in[A_READ_RES], L.read_size = in[A_READ_SIZE];
    L.write_ptr = in[A_WRITE_PTR], L.write_res = in[A_WRITE_RES];
    L.write_off = in[A_WRITE_OFF], L.write_size = in[A_WRITE_SIZE];
    L.rate = rate;
    L.capacity = capacity;

    if (args[A_BANKS] != Py_None) {
        L.banks = banks_new(args[A_BANKS], &buffers, n, &state_f, &state_i);
        n_banks_cmds = n;
        if (L.banks == NULL) goto done;
    }
    if (make_outputs(objects, out, n) < 0) goto done;
    L.start = out[OUT_START], L.end = out[OUT_END], L.band = out[OUT_BAND];
    L.binding = out[OUT_BINDING], L.binding_at = out[OUT_BINDING_AT];

    /* events: done of command c is event c, its first band n + c, then the pool */
    int64_t n_nodes = n_events + n_queues + n + 8;
    int64_t n_flows = 3 * n + 4;
    int64_t *users_left = take(&mem, n_res, 8, 0);
    int64_t *queue_pos = take(&mem, n_queues, 8, 0), *queue_phase = take(&mem, n_queues, 8, 1);
    int64_t *queue_cursor = take(&mem, n_queues, 8, 1), *queue_prev = take(&mem, n_queues, 8, 0);
    double *queue_before = take(&mem, n_queues, 8, 1);
    int64_t *dma_phase = take(&mem, n, 8, 1), *dma_cursor = take(&mem, n, 8, 1);
    int64_t *free_channels = take(&mem, channels + 1, 8, 0);
    L.heap = take(&mem, n_events, sizeof(Entry), 0);
    L.processed = take(&mem, n_events, 1, 1);
    L.head = take(&mem, n_events, 4, 0), L.tail = take(&mem, n_events, 4, 0);
    L.unit_next = take(&mem, n_events, 4, 0), L.free_events = take(&mem, n_events, 4, 0);
    L.node_next = take(&mem, n_nodes, 4, 0), L.node_what = take(&mem, n_nodes, 4, 0);
    L.node_arg = take(&mem, n_nodes, 4, 0), L.free_nodes = take(&mem, n_nodes, 4, 0);
    L.unit_capacity = take(&mem, 1 + cores, 8, 0), L.unit_in_use = take(&mem, 1 + cores, 8, 1);
    L.unit_head = take(&mem, 1 + cores, 8, 0), L.unit_tail = take(&mem, 1 + cores, 8, 0);
    L.flow_left = take(&mem, n_flows, 8, 0), L.flow_priority = take(&mem, n_flows, 8, 0);
    L.flow_done = take(&mem, n_flows, 8, 0);
    L.inflight = take(&mem, channels + 4, 8, 1), L.moving = take(&mem, channels + 4, 8, 1);
    L.still = take(&mem, channels + 4, 8, 1);
    L.live = take(&mem, n_res, 1, 1), L.valid = take(&mem, n_res, 1, 1);
    L.res_start = take(&mem, n_res, 8, 1);
    L.block_lo = take(&mem, n_res + 1, 8, 1), L.block_hi = take(&mem, n_res + 1, 8, 1);
    L.late = take(&mem, len[A_STREAM_LIST] + 1, 1, 1);
    if (mem.failed) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(users_left, in[A_USERS_LEFT], (size_t)n_res * 8);
    memcpy(queue_pos, in[A_QUEUE_PTR], (size_t)n_queues * 8); /* queue_ptr[:-1] */
    for (int64_t q = 0; q < n_queues; q++) queue_prev[q] = -1;
    for (int64_t e = 0; e < n_events; e++) L.head[e] = -1;
    /* a stack: 2n is on top */
    for (int64_t k = 0; k < pool; k++) L.free_events[k] = (int32_t)(n_events - 1 - k);
    L.n_free_events = pool;
    L.n_nodes = n_nodes;
    /* units: rows capacity, in use, queue head, queue tail */
    for (int64_t u = 0; u <= cores; u++) {
        L.unit_capacity[u] = 1;
        L.unit_head[u] = L.unit_tail[u] = -1;
    }
    L.unit_capacity[0] = channels;
    for (int64_t k = 0; k <= channels; k++) free_channels[k] = k; /* sorted; the first n_free are free */
    L.pending = -1;

    double now;
    int now_int;
    int64_t n_processed;
    int64_t status = run_loop(&L, in[A_QUEUE_PTR], in[A_QUEUE_CMDS], in[A_QUEUE_COMPUTE], in[A_QUEUE_CORE],
                              n_queues, channels, shared_cores, max_events, users_left, queue_pos, queue_phase,
                              queue_cursor, queue_prev, queue_before, dma_phase, dma_cursor, free_channels, out, &now,
                              &now_int, &n_processed);
    if (cut(objects[OUT_OCC_TIME], L.n_occ, 8) < 0 || cut(objects[OUT_OCC_USED], L.n_occ, 8) < 0
        || cut(objects[OUT_OCC_INT], L.n_occ, 1) < 0 || cut(objects[OUT_DRAM_TIME], L.n_dram, 8) < 0
        || cut(objects[OUT_DRAM_FLOWS], L.n_dram, 8) < 0 || cut(objects[OUT_DRAM_INT], L.n_dram, 1) < 0
        || cut(objects[OUT_DMA_STEPS], L.n_dma_steps, 8) < 0)
        goto done;
    result = Py_BuildValue("(LdNLLd)", (long long)status, now, PyBool_FromLong(now_int), (long long)n_processed,
                           (long long)L.peak, L.bus_busy);
    if (result == NULL) goto done;
    PyObject *arrays = PyTuple_New(N_OUT);
    if (arrays == NULL) {
        Py_CLEAR(result);
        goto done;
    }
    for (int k = 0; k < N_OUT; k++) {
        PyTuple_SET_ITEM(arrays, k, objects[k]);
        objects[k] = NULL;
    }
    PyObject *banked = L.banks && status == OK ? banks_result(L.banks, n, state_f, state_i) : Py_NewRef(Py_None);
    PyObject *both = banked ? PyTuple_Pack(3, result, arrays, banked) : NULL;
    Py_DECREF(result);
    Py_DECREF(arrays);
    Py_XDECREF(banked);
    result = both;
done:
    banks_free(L.banks, n_banks_cmds);
    for (int k = 0; k < N_OUT; k++) Py_XDECREF(objects[k]);
    free_all(&mem);
    release_buffers(&buffers);
    return result;
}

static PyMethodDef methods[] = {
    {"run_program", (PyCFunction)(void (*)(void))run_program, METH_FASTCALL, run_program_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_event_loop",
    "The simulator's event loop (npusim.sim.compiled_loop's kernel; see event_loop.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__event_loop(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    const struct {
        const char *name;
        long value;
    } constants[] = {
        {"OK", OK}, {"SCRATCHPAD_ERROR", SCRATCHPAD_ERROR}, {"DEADLOCK", DEADLOCK}, {"EVENT_BUDGET", EVENT_BUDGET},
        {"POOL_FULL", POOL_FULL}, {"BANKS_FAILED", BANKS_FAILED}, {"AT_END", AT_END}, {"AT_START", AT_START}, {"AT_BAND", AT_BAND},
        {"READY_INT", READY_INT}, {"START_INT", START_INT}, {"END_INT", END_INT}, {"BAND_INT", BAND_INT},
    };
    for (size_t k = 0; k < sizeof constants / sizeof constants[0]; k++) {
        if (PyModule_AddIntConstant(m, constants[k].name, constants[k].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
