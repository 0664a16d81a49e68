/* The DRAM controller of the banks model in C, shared by its two drivers: bank_kernel.c (the
 * Python entry points npusim.dram.controller calls, for the SimPy model and the tests) and
 * event_loop.c (the compiled event loop, which drives a controller itself with dram.model:
 * banks). One copy of the code, so both time every access alike.
 *
 * The model (admission, transaction and command queues, read/write turnaround, FR-FCFS with a
 * row-hit cap, every command's timing rule, page policy, power-down, refresh) and the layout of
 * the state arrays are described once, in npusim/dram/kernel.py's docstring; the constants
 * below are that module's (tests/test_dram.py checks they agree). npusim/dram/reference.py is
 * the same controller in plain Python, and tests hold this kernel equal to it on random flows,
 * stop times and configurations.
 *
 * Floats: every operation is the one the Python reference makes, in its order (built with
 * -ffp-contract=off, so no fused multiply-add changes a rounding); max/min keep the first of
 * equal values, as Python's do. Integer division and modulo round down, as Python's do. */
#ifndef NPUSIM_BANK_CORE_H
#define NPUSIM_BANK_CORE_H

#include "buffers.h"

/* kernel.py: TIMING_FIELDS */
enum { T_RCD, T_RP, T_RAS, T_RC, T_CL, T_CWL, T_BURST, T_CCD_S, T_CCD_L, T_RRD_S, T_RRD_L, T_FAW, T_WR, T_WTR_S,
       T_WTR_L, T_RTP, T_RTW, T_REFI, T_RFC, T_RTRS, T_XP, T_PD, T_CMD, T_CCD_L_WR, N_TIMING };
/* kernel.py: G_* */
enum { G_CHANNELS, G_RANKS, G_BANKGROUPS, G_BANKS_PER_GROUP, G_POLICY, G_FRFCFS, G_CAP, G_RQ, G_WQ, G_HIGH, G_LOW,
       G_POWERDOWN, G_BANKQ, G_RT, G_WT, G_CMD_PRE, G_CMD_ACT, G_CMD_CAS, G_CMD_DUAL, G_CMD_SPLIT, G_STACK_IDS, N_G };
enum { OPEN, CLOSED, ADAPTIVE };
enum { HIT, MISS, CONFLICT };
enum { NOTHING, ACCESS, REFRESH };
enum { B_NEXT_ACT, B_NEXT_PRE, B_NEXT_CAS, B_BUSY, BANK_F_COLUMNS };
/* B_RANK, B_BG: the bank's global rank and its bank group (fixed: the pool holds an access's bank alone) */
enum { B_OPEN_ROW, B_STREAK, B_ACTS, B_RANK, B_BG, BANK_I_COLUMNS };
enum { R_LAST_ACT, R_NEXT_REF, R_ACTIVE_SINCE, R_ACTIVE_TIME, R_LAST_BUSY, R_PD_ACT, R_PD_PRE, R_FAW,
       RANK_F_COLUMNS = R_FAW + 4 };
enum { R_FAW_POS, R_OPEN_COUNT, R_REFRESHES, RANK_I_COLUMNS };
enum { BG_LAST_ACT, BG_LAST_RD, BG_LAST_WR, RANK_BG_COLUMNS };
enum { C_LAST_RD, C_LAST_WR, C_LAST_CAS, C_LAST_ISSUE, C_BUS_BUSY, C_WRITE_ACK, C_PRESENT, CHAN_F_COLUMNS };
enum { C_LAST_RANK, C_WRITE_MODE, C_RQ_N, C_WQ_N, C_RR_LAST, C_RQ_HEAD, C_WQ_HEAD, C_RT_N, C_RT_HEAD, C_WT_N,
       C_WT_HEAD, C_T_NEW, C_T_NEW_W, C_T_FREED, C_T_FREED_W, C_T_TAIL, C_T_TAIL_W, C_T_FREE, C_T_FREE_W, C_T_SEQ,
       C_T_SEQ_W, CHAN_I_COLUMNS };
enum { T_ACCESS, T_NEXT, T_PREV, T_BANK_NEXT, T_SEQ, TQ_COLUMNS };
enum { BANK_N_COLUMNS = 8 };
enum { S_READS, S_WRITES, S_HITS, S_MISSES, S_CONFLICTS, S_ACTS, S_PRES, N_STATS_I };
enum { SF_READ_LATENCY, SF_WRITE_LATENCY, SF_DELAY, N_STATS_F };
/* controller.py: _STATE, the arrays in the two state buffers, in this order */
enum { L_BANK_F, L_BANK_I, L_RANK_F, L_RANK_I, L_RANK_BG_F, L_CHAN_F, L_CHAN_I, L_SQ, L_SQA, L_TQ, L_TQA, L_BANK_N,
       L_STATS_I, L_STATS_F, L_FLOW_WRITE, L_FLOW_PRIO, L_FLOW_START, L_FLOW_REMAINING, L_FLOW_END, L_FLOW_DELAY,
       L_FC_NEXT, L_FC_END, L_FLOW_FIRST, L_FLOW_LAST, L_BANK_OTHER, L_CMD_BUS, L_FLOW_WAITING, L_FC_LEFT,
       L_FLOW_DATA_END, L_FLOW_CAP,
       N_LAYOUT };
/* kernel.py: CMD_WINDOW, CMD_STRIDE -- a command bus: its window's first tick, the tick after the
 * latest taken, then a bit per tick of the window */
enum { CMD_WINDOW = 1024, CMD_STRIDE = 2 + CMD_WINDOW / 64 };

#define NEG (-1e300)

static inline double max2(double a, double b) { return b > a ? b : a; }
static inline double min2(double a, double b) { return b < a ? b : a; }
static inline int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t floormod(int64_t a, int64_t b) {
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* One controller's state: pointers into the caller's arrays, and their dimensions. */
typedef struct {
    const double *T;
    const int64_t *G;
    double *bank_f, *rank_f, *rank_bg_f, *chan_f, *sqa, *tqa, *stats_f;
    int64_t *bank_i, *rank_i, *chan_i, *sq, *tq, *bank_n, *bank_other, *stats_i, *cmd_bus;
    /* the pool: each access's global bank, row and flow (int32: a stream reads them once each
     * and they are most of the controller's memory traffic) */
    const int32_t *req_bank, *req_row, *req_flow;
    const int64_t *active;
    int64_t n_active;
    int64_t *flow_write, *flow_remaining, *flow_waiting, *fc_next, *fc_end, *fc_left, *flow_first, *flow_last;
    double *flow_prio, *flow_start, *flow_end, *flow_delay;
    double *flow_data_end;  /* when the last of its data moved so far (a write's reaches the device later than its end) */
    int64_t *btag, *picks;  /* scratch */
    double *barr;
    /* per channel: the flow next_flow gives and whether it is alone at its priority (-2: not
     * known). A cache: whoever changes the live flows, their priorities or admission pointers
     * other than admit (a flow added or released, the pool compacted, the state copied in)
     * calls forget_next_flows. */
    int64_t *next_memo;
    double cmd_inv;  /* 1 / T[T_CMD]: a command's tick is floor(time x cmd_inv) */
    double ccd_s;    /* max(T[T_CCD_S], T[T_BURST]): column command to column command, any bank group */
    struct Pick *held;  /* run_until_complete's next command of each channel (C of them; scratch) */
    struct Lane *lanes; /* and its lane (C of them; scratch) */
    /* int32, not int64: a store through one of the int64 state pointers may alias any int64
     * object, so the compiler would reload (and re-derive every index from) int64 fields after
     * each store; it knows no int64 store changes an int32. Geometry and policies of G, copied. */
    int32_t C, BG, QD, FRONT;
    int32_t accepted;  /* a write flow's last access was admitted (run_until_complete stops there) */
    int32_t g[N_G];
} Ctl;

#define BF(b, col) k->bank_f[(b) * BANK_F_COLUMNS + (col)]
#define BI(b, col) k->bank_i[(b) * BANK_I_COLUMNS + (col)]
#define RF(r, col) k->rank_f[(r) * RANK_F_COLUMNS + (col)]
#define RI(r, col) k->rank_i[(r) * RANK_I_COLUMNS + (col)]
#define RBG(r, g, col) k->rank_bg_f[((r) * k->BG + (g)) * RANK_BG_COLUMNS + (col)]
#define CF(c, col) k->chan_f[(c) * CHAN_F_COLUMNS + (col)]
#define CI(c, col) k->chan_i[(c) * CHAN_I_COLUMNS + (col)]
#define SQ(d, c, j) k->sq[((d) * k->C + (c)) * k->QD + (j)]
#define SQA(d, c, j) k->sqa[((d) * k->C + (c)) * k->QD + (j)]
#define TQ(d, c, s, f) k->tq[(((d) * k->C + (c)) * k->FRONT + (s)) * TQ_COLUMNS + (f)]
#define TQA(d, c, s) k->tqa[((d) * k->C + (c)) * k->FRONT + (s)]
#define BN(b, col) k->bank_n[(b) * BANK_N_COLUMNS + (col)]
/* bank_other[b, d]: entries of bank b in scheduler queue d (of its channel) that miss its open
 * row. FR-FCFS's row-hit cap asks whether one waits at every pick of a streaming bank; kept as
 * a count, updated when an entry enters or leaves and recounted when the bank's row changes. */
#define BO(b, d) k->bank_other[(b) * 2 + (d)]
#define FCN(f, c) k->fc_next[(f) * k->C + (c)]
#define FCE(f, c) k->fc_end[(f) * k->C + (c)]
#define FCL(f, c) k->fc_left[(f) * k->C + (c)]
#define TT(i) k->T[i]
#define GG(i) k->g[i]

/* The access ``_candidate`` picked, or the refresh that goes first. */
typedef struct Pick {
    int64_t what, k, d, kind, rank;
    double pre, act, time, delay;
    int64_t pre_tick, act_tick, cas_tick;  /* where its commands go on the command bus */
    int64_t streamed;  /* picked by ``shortcut_pick``: a row hit of its queue's oldest access, ``issue_hit`` commits it */
} Pick;

static inline void close_row(Ctl *k, int64_t b, int64_t rk, double when) {
    BI(b, B_OPEN_ROW) = -1;
    RI(rk, R_OPEN_COUNT) -= 1;
    if (RI(rk, R_OPEN_COUNT) == 0) RF(rk, R_ACTIVE_TIME) += max2(0.0, when - RF(rk, R_ACTIVE_SINCE));
}

/* The first rank of the ranks that share rank rk's activation window (tRRD_S, tFAW) and its
 * all-bank refresh: rk itself, or with G_STACK_IDS the first of its channel (HBM3's stack IDs
 * share their pseudo channel's); how many share them. */
static inline int64_t rank_group(Ctl *k, int64_t rk, int64_t *n) {
    *n = GG(G_STACK_IDS) ? GG(G_RANKS) : 1;
    return GG(G_STACK_IDS) ? rk - rk % GG(G_RANKS) : rk;
}

static inline double act_time(Ctl *k, int64_t rk, int64_t g, double t0) {
    int64_t n, w = rank_group(k, rk, &n);
    int64_t pos = RI(w, R_FAW_POS);
    double t = t0;
    t = max2(t, RF(w, R_LAST_ACT) + TT(T_RRD_S));
    t = max2(t, RBG(rk, g, BG_LAST_ACT) + TT(T_RRD_L));
    return max2(t, RF(w, R_FAW + pos) + TT(T_FAW));
}

/* Whether rank ``rk`` went into power-down before an access arriving at ``arrival``. */
static inline int asleep(Ctl *k, int64_t rk, double arrival) {
    if (__builtin_expect(GG(G_POWERDOWN) != 1, 1)) return 0;  /* (power-down is off by default) */
    return arrival > RF(rk, R_LAST_BUSY) + TT(T_PD);
}

/* Rank ``rk`` woken at ``when``: the time it slept since it went into power-down, counted in
 * active or precharged power-down (a row open or not). At an access, and at a refresh: a rank
 * idle for many refresh intervals sleeps between them, not only after the last. (R_LAST_BUSY +
 * tPD is when it goes to sleep: tPD after its last data, or at the end of a refresh -- the
 * controller's own maintenance does not restart its idle timer: ``refresh``.) */
static inline void sleep_until(Ctl *k, int64_t rk, double when) {
    if (asleep(k, rk, when)) {
        double slept = when - (RF(rk, R_LAST_BUSY) + TT(T_PD));
        if (RI(rk, R_OPEN_COUNT) > 0)
            RF(rk, R_PD_ACT) += slept;
        else
            RF(rk, R_PD_PRE) += slept;
    }
}

/* kind, pre, act, cas (in ``time``) and bank delay of access ``rid`` in channel ``c``. */
static inline __attribute__((always_inline)) Pick timing(Ctl *k, int64_t c, int64_t rid, double arrival, int write) {
    Pick p;
    p.streamed = 0;
    int64_t b = k->req_bank[rid], rk = BI(b, B_RANK), g = BI(b, B_BG);
    double wake = asleep(k, rk, arrival) ? arrival + TT(T_XP) : arrival;
    /* the channel's data bus (its last column command of each kind, the turnaround, a rank
     * switch) and the bank group's (tCCD_L, tWTR_L): a wait for the group is the bank's delay */
    double bus = arrival, group;
    if (write) {
        bus = max2(bus, CF(c, C_LAST_WR) + k->ccd_s);
        group = RBG(rk, g, BG_LAST_WR) + TT(T_CCD_L_WR);
        bus = max2(bus, CF(c, C_LAST_RD) + TT(T_RTW));
    } else {
        bus = max2(bus, CF(c, C_LAST_RD) + k->ccd_s);
        group = RBG(rk, g, BG_LAST_RD) + TT(T_CCD_L);
        bus = max2(bus, CF(c, C_LAST_WR) + TT(T_CWL) + TT(T_BURST) + TT(T_WTR_S));
        group = max2(group, RBG(rk, g, BG_LAST_WR) + TT(T_CWL) + TT(T_BURST) + TT(T_WTR_L));
    }
    int64_t local = rk - c * GG(G_RANKS);
    if (CI(c, C_LAST_RANK) >= 0 && CI(c, C_LAST_RANK) != local)
        bus = max2(bus, CF(c, C_LAST_CAS) + TT(T_BURST) + TT(T_RTRS));
    double ready;
    p.pre = NEG;
    p.act = NEG;
    int64_t open_row = BI(b, B_OPEN_ROW);
    if (open_row == k->req_row[rid]) {
        p.kind = HIT;
        ready = max2(wake, BF(b, B_NEXT_CAS));
    } else if (open_row < 0) {
        p.kind = MISS;
        p.act = act_time(k, rk, g, max2(wake, BF(b, B_NEXT_ACT)));
        ready = p.act + TT(T_RCD);
    } else {
        p.kind = CONFLICT;
        p.pre = max2(wake, BF(b, B_NEXT_PRE));
        p.act = act_time(k, rk, g, max2(p.pre + TT(T_RP), BF(b, B_NEXT_ACT)));
        ready = p.act + TT(T_RCD);
    }
    ready = max2(ready, group);
    p.time = max2(bus, ready);
    p.delay = max2(0.0, ready - bus);
    return p;
}

/* -- the command bus (kernel.py: "Command bus") -- */

/* The bits of ticks lo..hi-1 of a bus's window (hi - lo < CMD_WINDOW), a word at a time: any set
 * (op 0), cleared (op 1) or set (op 2). */
static inline int ring_bits(int64_t *bits, int64_t lo, int64_t hi, int op) {
    while (lo < hi) {
        int64_t pos = lo & (CMD_WINDOW - 1), bit = pos & 63, span = 64 - bit;
        if (span > hi - lo) span = hi - lo;
        uint64_t mask = (span == 64 ? ~(uint64_t)0 : (((uint64_t)1 << span) - 1)) << bit;
        int64_t *word = bits + (pos >> 6);
        if (op == 0) {
            if ((uint64_t)*word & mask) return 1;
        } else if (op == 1) {
            *word = (int64_t)((uint64_t)*word & ~mask);
        } else {
            *word = (int64_t)((uint64_t)*word | mask);
        }
        lo += span;
    }
    return 0;
}

/* Whether ticks s..s+n-1 of ``bus`` are free: a tick outside the window is. */
static inline int bus_free(int64_t *bus, int64_t s, int64_t n) {
    if (s >= bus[1]) return 1;  /* (after every tick taken: the usual case of a column command) */
    int64_t lo = s > bus[0] ? s : bus[0], hi = s + n < bus[0] + CMD_WINDOW ? s + n : bus[0] + CMD_WINDOW;
    return lo >= hi || !ring_bits(bus + 2, lo, hi, 0);
}

/* The earliest time from ``t`` a command of ``n`` ticks finds them free on ``bus``: ``t`` if
 * its own tick and those after are, else the start of the first free run; its tick. */
static inline double bus_place(Ctl *k, int64_t *bus, double t, int64_t n, int64_t *tick) {
    double q = t * k->cmd_inv;
    int64_t s = q >= 0.0 ? (int64_t)q : (int64_t)floor(q);  /* (a cast is floor from 0 up, and cheaper) */
    if (bus_free(bus, s, n)) {
        *tick = s;
        return t;
    }
    do s++; while (!bus_free(bus, s, n));
    *tick = s;
    return max2(t, (double)s * TT(T_CMD));
}

/* Ticks s..s+n-1 of ``bus`` taken; the window moves on first if they go past its end, so that
 * they end half way through it (ticks before its new start are forgotten: free to whatever comes
 * that late). */
static inline void bus_take(int64_t *bus, int64_t s, int64_t n) {
    int64_t end = s + n;
    if (end > bus[0] + CMD_WINDOW) {  /* by half a window (or more): not at every command */
        int64_t base = end - CMD_WINDOW / 2;
        if (base - bus[0] >= CMD_WINDOW)
            memset(bus + 2, 0, sizeof(int64_t) * (CMD_WINDOW / 64));
        else
            ring_bits(bus + 2, bus[0], base, 1);
        bus[0] = base;
    }
    int64_t lo = s > bus[0] ? s : bus[0], pos = lo & (CMD_WINDOW - 1), bit = pos & 63;
    if (lo < end && end - lo + bit <= 63)  /* (one word: the usual case) */
        bus[2 + (pos >> 6)] |= (int64_t)((((uint64_t)1 << (end - lo)) - 1) << bit);
    else if (lo < end)
        ring_bits(bus + 2, lo, end, 2);
    if (end > bus[1]) bus[1] = end;
}

/* The picked access's commands moved to free ticks of the command bus, in their order: PRE,
 * ACT (tRP after it), the column command (tRCD after the ACT); the moves add to its delay.
 * Channel c's row-command bus is k->cmd_bus + 2c CMD_STRIDE, its column-command bus the next
 * one with G_CMD_DUAL, else the same. */
static inline __attribute__((always_inline)) void on_bus(Ctl *k, int64_t c, Pick *p) {
    int64_t *row = k->cmd_bus + c * 2 * CMD_STRIDE, *col = GG(G_CMD_DUAL) ? row + CMD_STRIDE : row;
    double cas = p->time;
    if (p->kind != HIT) {  /* (most picks are hits: the column command alone) */
        if (p->kind == CONFLICT) {
            p->pre = bus_place(k, row, p->pre, GG(G_CMD_PRE), &p->pre_tick);
            p->act = max2(p->act, p->pre + TT(T_RP));
        }
        p->act = bus_place(k, row, p->act, GG(G_CMD_SPLIT) ? 1 : GG(G_CMD_ACT), &p->act_tick);
        cas = max2(cas, p->act + TT(T_RCD));
    }
    cas = bus_place(k, col, cas, GG(G_CMD_CAS), &p->cas_tick);
    p->delay = p->delay + (cas - p->time);
    p->time = cas;
}

static inline void forget_next_flows(Ctl *k) {
    for (int64_t c = 0; c < k->C; c++) k->next_memo[2 * c] = -2;
}

/* Position of entry ``i`` of a ring queue starting at ``head``. */
static inline int64_t at(int64_t head, int64_t i, int64_t depth) {
    int64_t j = head + i;
    return j >= depth ? j - depth : j;
}

/* Access ``r`` entered scheduler queue ``d``: counted if it misses its bank's open row. */
static inline void enter_queue(Ctl *k, int64_t d, int64_t r) {
    int64_t b = k->req_bank[r];
    if (BI(b, B_OPEN_ROW) != k->req_row[r]) BO(b, d) += 1;
}

/* Banks lo..hi-1 (of channel c) changed rows: their counts of queued entries missing it, anew. */
static void recount_other(Ctl *k, int64_t c, int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; b++) BO(b, 0) = BO(b, 1) = 0;
    for (int64_t d = 0; d < 2; d++) {
        int64_t head = CI(c, C_RQ_HEAD + d), depth = GG(G_RQ + d), n = CI(c, C_RQ_N + d);
        for (int64_t i = 0, j = head; i < n; i++, j = j + 1 == depth ? 0 : j + 1) {  /* j: at(head, i, depth) */
            int64_t o = SQ(d, c, j);
            int64_t b = k->req_bank[o];
            if (b >= lo && b < hi && BI(b, B_OPEN_ROW) != k->req_row[o]) BO(b, d) += 1;
        }
    }
}

/* recount_other(k, c, b, b + 1): bank b of channel c changed rows (issue's every ACT or PRE). */
static void recount_bank(Ctl *k, int64_t c, int64_t b) {
    int64_t open = BI(b, B_OPEN_ROW);
    for (int64_t d = 0; d < 2; d++) {
        int64_t head = CI(c, C_RQ_HEAD + d), depth = GG(G_RQ + d), n = CI(c, C_RQ_N + d), count = 0;
        for (int64_t i = 0, j = head; i < n; i++, j = j + 1 == depth ? 0 : j + 1) {  /* j: at(head, i, depth) */
            int64_t o = SQ(d, c, j);
            count += k->req_bank[o] == b && k->req_row[o] != open;
        }
        BO(b, d) = count;
    }
}

/* Remove entry ``i`` of scheduler queue d of channel c (``n`` entries from ``head``), keeping
 * the others in order; the new head. The shorter side moves (kernel.py: _remove). */
static inline int64_t remove_entry(Ctl *k, int64_t d, int64_t c, int64_t head, int64_t n, int64_t i, int64_t depth) {
    if (i < n - 1 - i) {
        for (int64_t m = i; m > 0; m--) {
            SQ(d, c, at(head, m, depth)) = SQ(d, c, at(head, m - 1, depth));
            SQA(d, c, at(head, m, depth)) = SQA(d, c, at(head, m - 1, depth));
        }
        return at(head, 1, depth);
    }
    for (int64_t m = i; m < n - 1; m++) {
        SQ(d, c, at(head, m, depth)) = SQ(d, c, at(head, m + 1, depth));
        SQA(d, c, at(head, m, depth)) = SQA(d, c, at(head, m + 1, depth));
    }
    return head;
}

/* The flow the front end of channel ``c`` admits from next, or -1 (kernel.py: _next_flow);
 * ``*alone``: whether no other flow of its priority has accesses left here (round-robin then
 * has no one else to turn to: it is the next one again as long as it has some). */
static inline int64_t next_flow_tied(const Ctl *k, int64_t c, int64_t rr_last, int64_t *tied_at_top);

static inline int64_t next_flow(const Ctl *k, int64_t c, int64_t rr_last, int *alone) {
    int64_t tied, f = next_flow_tied(k, c, rr_last, &tied);
    *alone = tied == 1;
    return f;
}

/* next_flow, with how many flows are tied at its priority */
static inline int64_t next_flow_tied(const Ctl *k, int64_t c, int64_t rr_last, int64_t *tied_at_top) {
    double top = 1e300;
    int64_t first = -1, after = -1, tied = 0;
    for (int64_t i = 0; i < k->n_active; i++) {
        int64_t f = k->active[i];
        if (FCN(f, c) >= FCE(f, c)) continue;
        double p = k->flow_prio[f];
        if (p < top) {
            top = p;
            first = -1;
            after = -1;
            tied = 0;
        }
        if (p == top) {
            tied += 1;
            if (first < 0 || f < first) first = f;
            if (f > rr_last && (after < 0 || f < after)) after = f;
        }
    }
    *tied_at_top = tied;
    return after >= 0 ? after : first;
}

/* Refreshes owed at once beyond which they are taken in one step (``refresh_backlog``). */
#define REFRESH_BACKLOG 65536

/* The refreshes of ranks r0..r0+n-1 (banks b0..b1, all closed by the refresh just done) that
 * fall before ``due``, the access that found them due, when they are at least REFRESH_BACKLOG:
 * DRAM idle for 256 ms of LPDDR4 refreshes (a clock of kHz, or hours of compute). One at a time
 * the loop would turn once per tREFI -- 1e12 times at a 1 Hz clock. Closed form: each refresh
 * starts at its due time with every bank closed, so the rank is busy tRFC of every tREFI and
 * sleeps (with power-down) the tREFI - tRFC between each and the next; the same state as one
 * at a time up to the rounding of the sums (reference.py: _refresh_backlog). */
static void refresh_backlog(Ctl *k, int64_t r0, int64_t n, int64_t b0, int64_t b1, double due) {
    double m = floor((due - RF(r0, R_NEXT_REF)) / TT(T_REFI)), done = NEG;
    if (!(m >= REFRESH_BACKLOG)) return;
    for (int64_t r = r0; r < r0 + n; r++) {
        double first = RF(r, R_NEXT_REF), last_done = first + (m - 1.0) * TT(T_REFI) + TT(T_RFC);
        sleep_until(k, r, first);
        if (GG(G_POWERDOWN) == 1) RF(r, R_PD_PRE) += (m - 1.0) * max2(0.0, TT(T_REFI) - TT(T_RFC));
        RF(r, R_LAST_BUSY) = max2(RF(r, R_LAST_BUSY), last_done - TT(T_PD));
        RF(r, R_NEXT_REF) = first + m * TT(T_REFI);
        RI(r, R_REFRESHES) += (int64_t)m;
        done = max2(done, last_done);
    }
    for (int64_t b = b0; b < b1; b++) BF(b, B_NEXT_ACT) = max2(BF(b, B_NEXT_ACT), done);
}

/* All-bank refresh of rank rk (and of the ranks that share it, rank_group) from ``start``,
 * found due by an access at ``due`` (and the backlog of refreshes before it). */
static void refresh(Ctl *k, int64_t rk, double start, double due) {
    int64_t nb = GG(G_BANKGROUPS) * GG(G_BANKS_PER_GROUP), n, r0 = rank_group(k, rk, &n);
    int any_open = 0;
    for (int64_t b = r0 * nb; b < (r0 + n) * nb; b++)
        if (BI(b, B_OPEN_ROW) >= 0) any_open = 1;
    double begin = start + (any_open ? TT(T_RP) : 0.0);
    double done = begin + TT(T_RFC);
    for (int64_t b = r0 * nb; b < (r0 + n) * nb; b++) {
        BI(b, B_OPEN_ROW) = -1;
        BI(b, B_STREAK) = 0;
        BF(b, B_NEXT_ACT) = max2(BF(b, B_NEXT_ACT), done);
    }
    for (int64_t r = r0; r < r0 + n; r++) {
        sleep_until(k, r, start);  /* (the rank leaves power-down to refresh, and goes back once done) */
        if (RI(r, R_OPEN_COUNT) > 0) RF(r, R_ACTIVE_TIME) += max2(0.0, start - RF(r, R_ACTIVE_SINCE));
        RI(r, R_OPEN_COUNT) = 0;
        /* asleep again once done (a rank the refresh woke), or when its idle timer ends if later */
        RF(r, R_LAST_BUSY) = max2(RF(r, R_LAST_BUSY), done - TT(T_PD));
        RF(r, R_NEXT_REF) += TT(T_REFI);
        RI(r, R_REFRESHES) += 1;
    }
    refresh_backlog(k, r0, n, r0 * nb, (r0 + n) * nb, due);
    recount_other(k, rk / GG(G_RANKS), r0 * nb, (r0 + n) * nb);
}

static inline double refresh_start(Ctl *k, int64_t rk) {
    int64_t nb = GG(G_BANKGROUPS) * GG(G_BANKS_PER_GROUP), n, r0 = rank_group(k, rk, &n);
    double start = RF(rk, R_NEXT_REF);
    for (int64_t b = r0 * nb; b < (r0 + n) * nb; b++)
        if (BI(b, B_OPEN_ROW) >= 0) start = max2(start, BF(b, B_NEXT_PRE));
    return start;
}

/* Access ``r`` into a free slot at the end of transaction queue ``d`` of channel ``c`` and at
 * the end of its bank's chain. */
static inline void tq_append(Ctl *k, int64_t c, int64_t d, int64_t r, double arrival) {
    int64_t s = CI(c, C_T_FREE + d);
    CI(c, C_T_FREE + d) = TQ(d, c, s, T_NEXT);
    int64_t tail = CI(c, C_T_TAIL + d);
    TQ(d, c, s, T_ACCESS) = r;
    TQ(d, c, s, T_NEXT) = -1;
    TQ(d, c, s, T_PREV) = tail;
    TQ(d, c, s, T_BANK_NEXT) = -1;
    TQ(d, c, s, T_SEQ) = CI(c, C_T_SEQ + d);
    TQA(d, c, s) = arrival;
    CI(c, C_T_SEQ + d) += 1;
    if (tail >= 0)
        TQ(d, c, tail, T_NEXT) = s;
    else
        CI(c, C_RT_HEAD + 2 * d) = s;
    CI(c, C_T_TAIL + d) = s;
    int64_t b = k->req_bank[r];
    int64_t last = BN(b, 6 + d);
    if (last >= 0)
        TQ(d, c, last, T_BANK_NEXT) = s;
    else
        BN(b, 4 + d) = s;
    BN(b, 6 + d) = s;
    BN(b, 2 + d) += 1;
    if (CI(c, C_T_NEW + d) < 0) CI(c, C_T_NEW + d) = s;
}

/* The entry in slot ``s`` of transaction queue ``d`` (its bank's oldest there) moves to the end
 * of its bank's command queue; its slot is freed. */
static inline void tq_to_bank_queue(Ctl *k, int64_t c, int64_t d, int64_t s) {
    int64_t r = TQ(d, c, s, T_ACCESS);
    int64_t b = k->req_bank[r];
    int64_t ns = CI(c, C_RQ_N + d);
    int64_t js = at(CI(c, C_RQ_HEAD + d), ns, GG(G_RQ + d));
    SQ(d, c, js) = r;
    SQA(d, c, js) = TQA(d, c, s);
    CI(c, C_RQ_N + d) = ns + 1;
    enter_queue(k, d, r);
    BN(b, d) += 1;
    int64_t prev = TQ(d, c, s, T_PREV), nxt = TQ(d, c, s, T_NEXT);
    if (prev >= 0)
        TQ(d, c, prev, T_NEXT) = nxt;
    else
        CI(c, C_RT_HEAD + 2 * d) = nxt;
    if (nxt >= 0)
        TQ(d, c, nxt, T_PREV) = prev;
    else
        CI(c, C_T_TAIL + d) = prev;
    BN(b, 4 + d) = TQ(d, c, s, T_BANK_NEXT);
    if (BN(b, 4 + d) < 0) BN(b, 6 + d) = -1;
    BN(b, 2 + d) -= 1;
    TQ(d, c, s, T_ACCESS) = -1;
    TQ(d, c, s, T_NEXT) = CI(c, C_T_FREE + d);
    CI(c, C_T_FREE + d) = s;
    CI(c, C_RT_N + 2 * d) -= 1;
}

/* Flow f's access admitted into channel c's queue at ``arrival``: a write is posted, acknowledged
 * once in the queue but no sooner than a burst after the channel's last (its data crossed the
 * channel's port at the channel's rate); its flow is done once its last access is acknowledged
 * (the flow's end; ``accepted`` tells run_until_complete). */
static inline __attribute__((always_inline)) void accept(Ctl *k, int64_t c, int64_t f, int64_t write,
                                                         double arrival) {
    k->flow_waiting[f] -= 1;
    if (write) {
        double ack = max2(arrival, CF(c, C_WRITE_ACK) + TT(T_BURST));
        CF(c, C_WRITE_ACK) = ack;
        k->flow_end[f] = max2(k->flow_end[f], ack);
        if (k->flow_waiting[f] == 0) k->accepted = 1;
    }
}

/* Whether flow f is done: a read once its data has moved, a write once its last access is
 * admitted (posted); its end is then ``flow_end``. */
static inline int flow_done(const Ctl *k, int64_t f) {
    return k->flow_write[f] ? k->flow_waiting[f] == 0 : k->flow_remaining[f] == 0;
}

/* Admission: the most urgent flow's next access enters its queue, until a queue is full or no
 * flow has one left (kernel.py: _admit); whether one entered a transaction queue while its
 * bank's command queue had room (else ``to_command_queues`` would move none of them). ``*next``: the flow ``next_flow`` gives now (-2: not
 * known), kept across calls while nothing is admitted (moves to the command queues change
 * none of what it reads, nor do issues), and while a flow alone at its priority has accesses
 * left. */
static inline __attribute__((always_inline)) int admit(Ctl *k, int64_t c, int64_t *next, int *alone) {
    int front = GG(G_BANKQ) > 0, room = 0;
    for (;;) {
        if (*next == -2) *next = next_flow(k, c, CI(c, C_RR_LAST), alone);
        int64_t f = *next;
        if (f < 0) return room;
        int64_t d = k->flow_write[f];
        double arrival;
        if (front) {
            int64_t n = CI(c, C_RT_N + 2 * d);
            if (n >= GG(G_RT + d)) return room;
            int64_t r = FCN(f, c);
            if (BN(k->req_bank[r], d) < GG(G_BANKQ)) room = 1;
            arrival = max2(max2(k->flow_start[f], CF(c, C_LAST_ISSUE)), CF(c, C_PRESENT));
            tq_append(k, c, d, r, arrival);
            CI(c, C_RT_N + 2 * d) = n + 1;
        } else {
            int64_t n = CI(c, C_RQ_N + d), depth = GG(G_RQ + d);
            if (n >= depth) return room;
            arrival = max2(max2(k->flow_start[f], CF(c, C_LAST_ISSUE)), CF(c, C_PRESENT));
            int64_t j = at(CI(c, C_RQ_HEAD + d), n, depth);
            SQ(d, c, j) = FCN(f, c);
            SQA(d, c, j) = arrival;
            CI(c, C_RQ_N + d) = n + 1;
            enter_queue(k, d, FCN(f, c));
        }
        accept(k, c, f, d, arrival);
        FCN(f, c) += 1;
        CI(c, C_RR_LAST) = f;
        if (!*alone || FCN(f, c) >= FCE(f, c)) *next = -2;
    }
}

/* Transaction queues -> per-bank command queues: every entry whose bank queue has room moves,
 * looking only where a move can happen (kernel.py: _to_command_queues); whether any moved. */
static inline int to_command_queues(Ctl *k, int64_t c) {
    int64_t cap = GG(G_BANKQ);
    int moved = 0;
    for (int64_t d = 0; d < 2; d++) {
        int64_t fresh = CI(c, C_T_NEW + d);
        int64_t fb = CI(c, C_T_FREED + d);
        if (fb == -2) {
            fresh = CI(c, C_RT_HEAD + 2 * d);  /* every entry */
        } else if (fb >= 0) {
            int64_t newest_old = fresh >= 0 ? TQ(d, c, fresh, T_SEQ) : CI(c, C_T_SEQ + d);
            while (BN(fb, d) < cap) {
                int64_t s = BN(fb, 4 + d);
                if (s < 0 || TQ(d, c, s, T_SEQ) >= newest_old) break;
                tq_to_bank_queue(k, c, d, s);
                moved = 1;
            }
        }
        int64_t s = fresh;
        while (s >= 0) {
            int64_t nxt = TQ(d, c, s, T_NEXT);
            if (BN(k->req_bank[TQ(d, c, s, T_ACCESS)], d) < cap) {
                tq_to_bank_queue(k, c, d, s);
                moved = 1;
            }
            s = nxt;
        }
        CI(c, C_T_NEW + d) = -1;
        CI(c, C_T_FREED + d) = -1;
    }
    return moved;
}

/* The write mode channel c turns to with ``nr`` reads and ``nw`` writes in the scheduler's
 * queues (kernel.py: "Read/write turnaround"; the transaction queues' writes count too). */
static inline int64_t turnaround(const Ctl *k, int64_t c, int64_t nr, int64_t nw) {
    int64_t w_all = nw + CI(c, C_WT_N);
    if (CI(c, C_WRITE_MODE) == 1) return (nw == 0 || (nr > 0 && w_all <= GG(G_LOW))) ? 0 : 1;
    return (nw > 0 && (w_all >= GG(G_HIGH) || nr == 0)) ? 1 : 0;
}

/* The channel's next column slot for reads (or writes): its last column command of that kind
 * a column-to-column time later, and the turnaround from the other kind. */
static inline double next_column_slot(const Ctl *k, int64_t c, int write) {
    return write ? max2(CF(c, C_LAST_WR) + k->ccd_s, CF(c, C_LAST_RD) + TT(T_RTW))
                 : max2(CF(c, C_LAST_RD) + k->ccd_s, CF(c, C_LAST_WR) + TT(T_CWL) + TT(T_BURST) + TT(T_WTR_S));
}

/* Whether a row hit of bank b (queue d) is held back by the row-hit cap: the bank served
 * G_CAP hits in a row, an access to another row of it waits, and its PRE could go by ``slot``. */
static inline int capped(const Ctl *k, int64_t b, int64_t d, double slot) {
    return BI(b, B_STREAK) >= GG(G_CAP) && BF(b, B_NEXT_PRE) <= slot && BO(b, d) > 0;
}

/* FR-FCFS's shortcut: queue d's oldest access when it is a row hit the cap lets go at the
 * channel's next column slot ``slot`` -- what the scan would pick at its first step (most
 * picks: a stream's next access). 1 with its timing in ``*t``, else 0. */
static inline __attribute__((always_inline)) int oldest_hit(Ctl *k, int64_t c, int64_t d, double slot, Pick *t) {
    int64_t head = CI(c, C_RQ_HEAD + d), r = SQ(d, c, head), b = k->req_bank[r];
    if (BI(b, B_OPEN_ROW) != k->req_row[r] || capped(k, b, d, slot)) return 0;
    *t = timing(k, c, r, SQA(d, c, head), d == 1);
    return t->time <= slot;
}

/* Channel ``c``'s next command: NOTHING, ACCESS (entry ``k`` of queue ``d``) or REFRESH (of
 * ``rank``, from ``time``), after admission, the command queues, the read/write turnaround and
 * the pick (kernel.py: _candidate, whose comments explain the FR-FCFS shortcuts). */
static inline __attribute__((always_inline)) Pick candidate(Ctl *k, int64_t c) {
    int64_t *next = k->next_memo + 2 * c;
    int alone = (int)next[1];
    for (;;) {
        int room = admit(k, c, next, &alone);
        if (GG(G_BANKQ) == 0) break;
        if (!room && CI(c, C_T_FREED) == -1 && CI(c, C_T_FREED_W) == -1) {
            CI(c, C_T_NEW) = CI(c, C_T_NEW_W) = -1;  /* to_command_queues' outcome: nothing moves */
            break;
        }
        if (!to_command_queues(k, c)) break;
    }
    next[1] = alone;
    Pick p = {NOTHING, 0, 0, HIT, 0, 0.0, 0.0, 0.0, 0.0};
    int64_t nr = CI(c, C_RQ_N), nw = CI(c, C_WQ_N);
    if (nr == 0 && nw == 0) return p;
    CI(c, C_WRITE_MODE) = turnaround(k, c, nr, nw);
    int64_t d = CI(c, C_WRITE_MODE);
    int write = d == 1;
    int64_t n = CI(c, C_RQ_N + d), head = CI(c, C_RQ_HEAD + d), depth = GG(G_RQ + d);
    int64_t pick = -1;
    Pick best_p = p;
    if (GG(G_FRFCFS) == 1) {
        double floor_t = next_column_slot(k, c, write);
        Pick t;
        if (oldest_hit(k, c, d, floor_t, &t)) {  /* (picked without the scan's bookkeeping) */
            pick = 0;
            best_p = t;
            goto picked;
        }
        k->picks[0] += 1;
        int64_t tag = k->picks[0];
        double best = 1e300;
        for (int64_t i = 0, j = head; i < n; i++, j = j + 1 == depth ? 0 : j + 1) {  /* j: at(head, i, depth) */
            int64_t r = SQ(d, c, j);
            int64_t b = k->req_bank[r];
            int64_t miss = BI(b, B_OPEN_ROW) == k->req_row[r] ? 0 : 1;
            if (miss == 0 && capped(k, b, d, floor_t))
                continue;  /* capped: another row of the bank waits and its PRE could go */
            double arrival = SQA(d, c, j);
            if (k->btag[b * 2 + miss] == tag && k->barr[b * 2 + miss] <= arrival) continue;
            k->btag[b * 2 + miss] = tag;
            k->barr[b * 2 + miss] = arrival;
            Pick t = timing(k, c, r, arrival, write);
            if (t.time < best) {
                best = t.time;
                pick = i;
                best_p = t;
                if (t.time <= floor_t) break;
            }
        }
    }
picked:;
    int timed = pick >= 0;
    if (pick < 0) pick = 0;
    int64_t j = at(head, pick, depth);
    int64_t r = SQ(d, c, j);
    int64_t rk = BI(k->req_bank[r], B_RANK);
    if (!timed) best_p = timing(k, c, r, SQA(d, c, j), write);
    best_p.k = pick;
    best_p.d = d;
    best_p.rank = rk;
    if (GG(G_CMD_CAS) > 0) on_bus(k, c, &best_p);
    if (best_p.time >= RF(rk, R_NEXT_REF)) {  /* a refresh first, then the pick again */
        best_p.what = REFRESH;
        best_p.act = best_p.time;  /* (a REFRESH's ``act``: the access's time that found it due) */
        best_p.time = refresh_start(k, rk);
        return best_p;
    }
    best_p.what = ACCESS;
    return best_p;
}

/* An access's column command at ``cas`` to bank b (rank rk, bank group g): the bank's next PRE,
 * the bank group's last column command, the counts and latency, the rank's last data; the end
 * of its data (issue, issue_hit and lane_step share it; the channel's fields are theirs). */
static inline __attribute__((always_inline)) double column_command(Ctl *k, int64_t b, int64_t rk, int64_t g,
                                                                   int write, double cas, double arrival) {
    double end;
    if (write) {
        BF(b, B_NEXT_PRE) = max2(BF(b, B_NEXT_PRE), cas + TT(T_CWL) + TT(T_BURST) + TT(T_WR));
        end = cas + TT(T_CWL) + TT(T_BURST);
        RBG(rk, g, BG_LAST_WR) = cas;
        k->stats_i[S_WRITES] += 1;
        k->stats_f[SF_WRITE_LATENCY] += end - arrival;
    } else {
        BF(b, B_NEXT_PRE) = max2(BF(b, B_NEXT_PRE), cas + TT(T_RTP));
        end = cas + TT(T_CL) + TT(T_BURST);
        RBG(rk, g, BG_LAST_RD) = cas;
        k->stats_i[S_READS] += 1;
        k->stats_f[SF_READ_LATENCY] += end - arrival;
    }
    RF(rk, R_LAST_BUSY) = max2(RF(rk, R_LAST_BUSY), end);
    return end;
}

/* The channel's last column command: at ``cas`` to rank rk. */
static inline __attribute__((always_inline)) void channel_column(Ctl *k, int64_t c, int64_t rk, int write,
                                                                 double cas) {
    CF(c, write ? C_LAST_WR : C_LAST_RD) = cas;
    CF(c, C_LAST_CAS) = cas;
    CI(c, C_LAST_RANK) = rk - c * GG(G_RANKS);
    CF(c, C_LAST_ISSUE) = cas;
    CF(c, C_BUS_BUSY) += TT(T_BURST);
}

/* Flow f's access issued, its data ending at ``end``: a read flow ends with its last data, a
 * write flow ended at its admission (posted), its bank delay not counted. */
static inline __attribute__((always_inline)) void flow_issued(Ctl *k, int64_t f, int64_t c, int write, double end,
                                                              double delay) {
    k->flow_remaining[f] -= 1;
    FCL(f, c) -= 1;
    k->flow_data_end[f] = max2(k->flow_data_end[f], end);
    if (!write) {
        k->flow_end[f] = max2(k->flow_end[f], end);
        k->flow_delay[f] += delay;
    }
}

/* Commit the access ``candidate`` picked: its commands' effect on the bank, rank and channel,
 * the counts, its flow, the queue, the page policy (kernel.py: _issue). Its flow. */
static inline __attribute__((always_inline)) int64_t issue(Ctl *k, int64_t c, const Pick *p) {
    int64_t d = p->d, kind = p->kind;
    double pre = p->pre, act = p->act, cas = p->time, delay = p->delay;
    int write = d == 1;
    int64_t n = CI(c, C_RQ_N + d), head = CI(c, C_RQ_HEAD + d), depth = GG(G_RQ + d);
    int64_t j = at(head, p->k, depth);
    int64_t r = SQ(d, c, j);
    double arrival = SQA(d, c, j);
    int64_t b = k->req_bank[r], rk = BI(b, B_RANK), g = BI(b, B_BG);
    int64_t row_before = BI(b, B_OPEN_ROW);
    if (GG(G_CMD_CAS) > 0) {
        int64_t *row = k->cmd_bus + c * 2 * CMD_STRIDE;
        if (kind == CONFLICT) bus_take(row, p->pre_tick, GG(G_CMD_PRE));
        if (kind != HIT && GG(G_CMD_SPLIT)) {  /* ACT-1 where placed, each next part at the next free tick */
            int64_t part = p->act_tick;
            for (int64_t i = 0; i < GG(G_CMD_ACT); i++) {
                while (!bus_free(row, part, 1)) part++;
                bus_take(row, part, 1);
            }
        } else if (kind != HIT) {
            bus_take(row, p->act_tick, GG(G_CMD_ACT));
        }
        bus_take(GG(G_CMD_DUAL) ? row + CMD_STRIDE : row, p->cas_tick, GG(G_CMD_CAS));
    }
    sleep_until(k, rk, arrival);
    if (kind == CONFLICT) {
        close_row(k, b, rk, pre);
        k->stats_i[S_PRES] += 1;
        BF(b, B_NEXT_ACT) = max2(BF(b, B_NEXT_ACT), pre + TT(T_RP));
    }
    if (kind != HIT) {
        BI(b, B_OPEN_ROW) = k->req_row[r];
        BF(b, B_NEXT_CAS) = act + TT(T_RCD);
        BF(b, B_NEXT_PRE) = act + TT(T_RAS);
        BF(b, B_NEXT_ACT) = act + TT(T_RC);
        BI(b, B_STREAK) = 0;
        BI(b, B_ACTS) += 1;
        k->stats_i[S_ACTS] += 1;
        int64_t n_window, w = rank_group(k, rk, &n_window);
        RF(w, R_LAST_ACT) = act;
        RBG(rk, g, BG_LAST_ACT) = act;
        int64_t pos = RI(w, R_FAW_POS);
        RF(w, R_FAW + pos) = act;
        RI(w, R_FAW_POS) = (pos + 1) % 4;
        if (RI(rk, R_OPEN_COUNT) == 0) RF(rk, R_ACTIVE_SINCE) = act;
        RI(rk, R_OPEN_COUNT) += 1;
    }
    if (kind == HIT) {
        k->stats_i[S_HITS] += 1;
        BI(b, B_STREAK) += 1;
    } else if (kind == MISS) {
        k->stats_i[S_MISSES] += 1;
    } else {
        k->stats_i[S_CONFLICTS] += 1;
    }
    double end = column_command(k, b, rk, g, write, cas, arrival);
    channel_column(k, c, rk, write, cas);
    double extra = 0.0;
    if (kind == MISS)
        extra = TT(T_RCD);
    else if (kind == CONFLICT)
        extra = TT(T_RP) + TT(T_RCD);
    BF(b, B_BUSY) += TT(T_BURST) + extra;
    k->stats_f[SF_DELAY] += delay;
    if (GG(G_BANKQ) > 0) {
        BN(b, d) -= 1;
        int64_t freed = CI(c, C_T_FREED + d);
        CI(c, C_T_FREED + d) = (freed == -1 || freed == b) ? b : -2;  /* two banks: every entry looked at */
    }
    int64_t f = k->req_flow[r];
    flow_issued(k, f, c, write, end, delay);
    CI(c, C_RQ_HEAD + d) = remove_entry(k, d, c, head, n, p->k, depth);
    CI(c, C_RQ_N + d) = n - 1;
    if (GG(G_POLICY) != OPEN) {  /* page policy */
        int hit_waits = 0, miss_waits = 0;
        for (int64_t e = 0; e < 2; e++) {
            for (int64_t i = 0; i < CI(c, C_RQ_N + e); i++) {
                int64_t o = SQ(e, c, at(CI(c, C_RQ_HEAD + e), i, GG(G_RQ + e)));
                if (k->req_bank[o] == b) {
                    if (k->req_row[o] == k->req_row[r])
                        hit_waits = 1;
                    else
                        miss_waits = 1;
                }
            }
        }
        if (!hit_waits && (GG(G_POLICY) == CLOSED || miss_waits)) {
            double when = BF(b, B_NEXT_PRE);
            close_row(k, b, rk, when);
            k->stats_i[S_PRES] += 1;
            BF(b, B_NEXT_ACT) = max2(BF(b, B_NEXT_ACT), when + TT(T_RP));
        }
    }
    if (BI(b, B_OPEN_ROW) != row_before) recount_bank(k, c, b);  /* a hit leaves it: not counted */
    return f;
}

/* A row hit's commit (``issue`` of a HIT under can_stream: no ACT or PRE, no page policy, no
 * power-down, the bank's row unchanged, the queue's oldest access); its flow. */
static inline __attribute__((always_inline)) int64_t issue_hit(Ctl *k, int64_t c, const Pick *p) {
    int64_t d = p->d, depth = GG(G_RQ + d), n = CI(c, C_RQ_N + d), head = CI(c, C_RQ_HEAD + d);
    int64_t r = SQ(d, c, head);
    double arrival = SQA(d, c, head), cas = p->time, delay = p->delay;
    int64_t rk = p->rank, b = k->req_bank[r], g = BI(b, B_BG);
    if (GG(G_CMD_CAS) > 0) {
        int64_t *row = k->cmd_bus + c * 2 * CMD_STRIDE;
        bus_take(GG(G_CMD_DUAL) ? row + CMD_STRIDE : row, p->cas_tick, GG(G_CMD_CAS));
    }
    k->stats_i[S_HITS] += 1;
    BI(b, B_STREAK) += 1;
    double end = column_command(k, b, rk, g, d == 1, cas, arrival);
    channel_column(k, c, rk, d == 1, cas);
    BF(b, B_BUSY) += TT(T_BURST) + 0.0;  /* (issue's burst + extra, extra 0 for a hit) */
    k->stats_f[SF_DELAY] += delay;
    int64_t f = k->req_flow[r];
    flow_issued(k, f, c, d == 1, end, delay);
    CI(c, C_RQ_HEAD + d) = n > 1 ? at(head, 1, depth) : head;  /* (remove_entry of the oldest) */
    CI(c, C_RQ_N + d) = n - 1;
    return f;
}

/* Whether streams (``lane_*``) may run on this controller: the structure their shortcut assumes
 * (the scheduler's queues are the read/write queues, FR-FCFS, open pages, no power-down). */
static inline int can_stream(const Ctl *k) {
    return GG(G_BANKQ) == 0 && GG(G_FRFCFS) == 1 && GG(G_POLICY) == OPEN && GG(G_POWERDOWN) == 0;
}

/* candidate's shortcut, after the access just issued: admission, the read/write turnaround
 * unchanged, and the oldest access of the queue served a row hit the cap lets go at the
 * channel's next column slot, no refresh due first. 1 with that pick in ``*t`` (exactly
 * candidate's), else 0: candidate picks, from this state (its admission then admits nothing). */
static inline __attribute__((always_inline)) int shortcut_pick(Ctl *k, int64_t c, Pick *t) {
    int64_t *next = k->next_memo + 2 * c;
    int alone = (int)next[1];
    admit(k, c, next, &alone);
    next[1] = alone;
    int64_t d = CI(c, C_WRITE_MODE);
    if (turnaround(k, c, CI(c, C_RQ_N), CI(c, C_WQ_N)) != d) return 0;  /* (candidate turns) */
    if (CI(c, C_RQ_N + d) == 0 || !oldest_hit(k, c, d, next_column_slot(k, c, d == 1), t)) return 0;
    t->what = ACCESS;
    t->k = 0;
    t->d = d;
    t->rank = BI(k->req_bank[SQ(d, c, CI(c, C_RQ_HEAD + d))], B_RANK);
    if (GG(G_CMD_CAS) > 0) on_bus(k, c, t);
    if (t->time >= RF(t->rank, R_NEXT_REF)) return 0;  /* a refresh first */
    t->streamed = 1;
    return 1;
}

/* A stream's steady state on one channel: one flow, alone at its priority (or two tied there,
 * taking turns; or none, the queue draining), refills the full
 * queue being served, one access per access issued, and each pick is the oldest access, a row
 * hit at the channel's next column slot whose column command finds the command bus free. The
 * lane holds the channel's last column commands, its queue and its admission (their copies in
 * the state are stale while it is open: ``lane_close`` writes them back) and its next pick
 * (``cas``, ``delay``, ``rk``, ``tick``). Its steps (``lane_step``) do what issue_hit, admit
 * and shortcut_pick do, in the same order of float operations, without their general paths:
 * a stream's accesses cost the least, and the lanes of several channels interleave in time
 * order (``run_until_complete``) without leaving it. */
typedef struct Lane {
    int64_t open, d, depth, n, head, f, fcn, fce, pushed, last_rank, rk, tick;
    double last_same, last_cas, last_issue, busy, other, start, cas, delay;
    /* A pair lane: two flows tied at their priority, which round-robin admission alternates
     * (an op's input and weights, loaded at one urgency): ``f`` is admitted next, then ``g``
     * while it has accesses left; ``admitted`` is the last admitted (C_RR_LAST). */
    int64_t pair, g, gcn, gce, admitted;
    double gstart;
    /* stepped: a pair lane, or a draining one (``f`` -1: no flow has accesses left here, so the
     * queue only empties); lane_step's, one access at a time, not lane_run's */
    int64_t stepped;
} Lane;

enum { LANE_NEXT = -2, LANE_CLOSE = -3, LANE_RUN_LEFT = -4 };

/* next_flow when exactly two flows with accesses left here are tied at the most urgent
 * priority: the one it gives (the smallest after ``rr_last``, else the smallest), the other in
 * ``*g``; else -1. */
static inline int64_t next_pair(const Ctl *k, int64_t c, int64_t rr_last, int64_t *g) {
    int64_t tied, f = next_flow_tied(k, c, rr_last, &tied);
    if (tied != 2) return -1;
    for (int64_t i = 0; i < k->n_active; i++) {
        int64_t h = k->active[i];
        if (h != f && FCN(h, c) < FCE(h, c) && k->flow_prio[h] == k->flow_prio[f]) {
            *g = h;
            return f;
        }
    }
    return -1;
}

/* Whether channel c's pick ``*p`` (streamed) begins a lane: the queue it is in is full, and
 * the flow admission refills it from is alone at its priority (1: ``*f``) or one of two tied
 * there, both of the queue's direction (2: ``*f`` next, then ``*g``); or the queue drains, no
 * flow having accesses left here (3: ``*f`` -1; admission left it not full, so none has). */
static inline int lane_fits(const Ctl *k, int64_t c, const Pick *p, int64_t *f, int64_t *g) {
    int64_t d = p->d;
    const int64_t *next = k->next_memo + 2 * c;  /* (shortcut_pick's admission just left next_flow's answer) */
    if (CI(c, C_RQ_N + d) != GG(G_RQ + d)) {
        *f = next[0];
        return *f == -1 ? 3 : 0;
    }
    if (next[0] >= 0 && next[1] == 1) {
        *f = next[0];
        return k->flow_write[*f] == d && FCN(*f, c) < FCE(*f, c);
    }
    *f = next_pair(k, c, CI(c, C_RR_LAST), g);
    return *f >= 0 && k->flow_write[*f] == d && k->flow_write[*g] == d ? 2 : 0;
}

static inline __attribute__((always_inline)) void lane_open(Ctl *k, int64_t c, Lane *L, const Pick *p, int64_t f,
                                                            int64_t g) {
    int64_t d = p->d;
    L->open = 1;
    L->pair = g >= 0;
    L->stepped = g >= 0 || f < 0;
    if (L->pair) {
        L->g = g;
        L->gcn = FCN(g, c);
        L->gce = FCE(g, c);
        L->gstart = k->flow_start[g];
    }
    L->d = d;
    L->depth = GG(G_RQ + d);
    L->n = CI(c, C_RQ_N + d);
    L->head = CI(c, C_RQ_HEAD + d);
    L->f = f;
    L->fcn = f >= 0 ? FCN(f, c) : 0;
    L->fce = f >= 0 ? FCE(f, c) : 0;
    L->pushed = 0;
    L->last_same = CF(c, d == 1 ? C_LAST_WR : C_LAST_RD);
    L->last_cas = CF(c, C_LAST_CAS);
    L->last_issue = CF(c, C_LAST_ISSUE);
    L->busy = CF(c, C_BUS_BUSY);
    L->last_rank = CI(c, C_LAST_RANK);
    /* the other direction's last column command bounds the next: constant while only this one issues */
    L->other = d == 1 ? CF(c, C_LAST_RD) + TT(T_RTW) : CF(c, C_LAST_WR) + TT(T_CWL) + TT(T_BURST) + TT(T_WTR_S);
    L->start = f >= 0 ? k->flow_start[f] : 0.0;
    L->cas = p->time;
    L->delay = p->delay;
    L->rk = p->rank;
    L->tick = p->cas_tick;
}

static inline __attribute__((always_inline)) void lane_close(Ctl *k, int64_t c, Lane *L) {
    int64_t d = L->d;
    L->open = 0;
    CF(c, d == 1 ? C_LAST_WR : C_LAST_RD) = L->last_same;
    CF(c, C_LAST_CAS) = L->last_cas;
    CF(c, C_LAST_ISSUE) = L->last_issue;
    CF(c, C_BUS_BUSY) = L->busy;
    CI(c, C_LAST_RANK) = L->last_rank;
    CI(c, C_RQ_HEAD + d) = L->head;
    CI(c, C_RQ_N + d) = L->n;
    if (L->pushed) {
        FCN(L->f, c) = L->fcn;
        if (L->pair) {
            FCN(L->g, c) = L->gcn;
            CI(c, C_RR_LAST) = L->admitted;
            k->next_memo[2 * c] = -2;  /* (next_flow anew) */
        } else {
            CI(c, C_RR_LAST) = L->f;
            if (L->fcn >= L->fce) k->next_memo[2 * c] = -2;
        }
    }
}

/* The lane's next pick after an issue (lane_step's second half): LANE_NEXT with it in the
 * lane, or LANE_CLOSE (not the lane's: candidate picks). What shortcut_pick does, its flow
 * known alone at its priority. */
static inline __attribute__((always_inline)) int64_t lane_pick(Ctl *k, int64_t c, Lane *L) {
    int64_t d = L->d, head = L->head;
    int write = d == 1;
    double last_same = L->last_same;
    double floor_t = max2(last_same + k->ccd_s, L->other);
    int64_t r = SQ(d, c, head), b = k->req_bank[r];
    if (BI(b, B_OPEN_ROW) != k->req_row[r] || capped(k, b, d, floor_t)) return LANE_CLOSE;
    int64_t rk = BI(b, B_RANK), g = BI(b, B_BG);
    double arrival = SQA(d, c, head);
    double bus = arrival, group;  /* timing() of a hit */
    if (write) {
        bus = max2(bus, last_same + k->ccd_s);
        group = RBG(rk, g, BG_LAST_WR) + TT(T_CCD_L_WR);
        bus = max2(bus, L->other);
    } else {
        bus = max2(bus, last_same + k->ccd_s);
        group = RBG(rk, g, BG_LAST_RD) + TT(T_CCD_L);
        bus = max2(bus, L->other);
        group = max2(group, RBG(rk, g, BG_LAST_WR) + TT(T_CWL) + TT(T_BURST) + TT(T_WTR_L));
    }
    if (L->last_rank != rk - c * GG(G_RANKS)) bus = max2(bus, last_same + TT(T_BURST) + TT(T_RTRS));
    double ready = max2(max2(arrival, BF(b, B_NEXT_CAS)), group);
    double time = max2(bus, ready);
    if (time > floor_t) return LANE_CLOSE;
    if (GG(G_CMD_CAS) > 0) {
        double q = time * k->cmd_inv;
        int64_t tick = q >= 0.0 ? (int64_t)q : (int64_t)floor(q);
        if (!bus_free(k->cmd_bus + c * 2 * CMD_STRIDE + (GG(G_CMD_DUAL) ? CMD_STRIDE : 0), tick, GG(G_CMD_CAS)))
            return LANE_CLOSE;  /* (on_bus would move it) */
        L->tick = tick;
    }
    if (time >= RF(rk, R_NEXT_REF)) return LANE_CLOSE;  /* a refresh first */
    L->cas = time;
    L->delay = max2(0.0, ready - bus);
    L->rk = rk;
    return LANE_NEXT;
}

/* Issue the lane's pick and find its next: LANE_NEXT (held in the lane), the flow the access
 * completed (``until_complete``; the next pick not yet looked for), or LANE_CLOSE (the next
 * pick is not the lane's: close it, and candidate picks; its flow may be out of accesses). */
static inline __attribute__((always_inline)) int64_t lane_step(Ctl *k, int64_t c, Lane *L, int until_complete) {
    int64_t d = L->d, depth = L->depth, n = L->n, head = L->head, rk = L->rk;
    int write = d == 1;
    double cas = L->cas, delay = L->delay;
    /* issue_hit: the oldest access, a row hit at ``cas`` */
    int64_t r = SQ(d, c, head), b = k->req_bank[r], g = BI(b, B_BG);
    double arrival = SQA(d, c, head);
    if (GG(G_CMD_CAS) > 0)
        bus_take(k->cmd_bus + c * 2 * CMD_STRIDE + (GG(G_CMD_DUAL) ? CMD_STRIDE : 0), L->tick, GG(G_CMD_CAS));
    k->stats_i[S_HITS] += 1;
    BI(b, B_STREAK) += 1;
    double end = column_command(k, b, rk, g, write, cas, arrival);
    L->last_same = L->last_cas = L->last_issue = cas;
    L->last_rank = rk - c * GG(G_RANKS);
    L->busy += TT(T_BURST);
    BF(b, B_BUSY) += TT(T_BURST) + 0.0;  /* (issue's burst + extra, extra 0 for a hit) */
    k->stats_f[SF_DELAY] += delay;
    int64_t fl = k->req_flow[r];
    flow_issued(k, fl, c, write, end, delay);
    head = n > 1 ? at(head, 1, depth) : head;  /* (remove_entry of the oldest) */
    n -= 1;
    L->head = head;
    L->n = n;
    if (until_complete && !write && k->flow_remaining[fl] == 0) return fl;
    if (L->f < 0) {  /* draining: nothing to admit, and the read/write turnaround sees the queue shrink */
        if (n == 0 || turnaround(k, c, write ? CI(c, C_RQ_N) : n, write ? n : CI(c, C_WQ_N)) != d) return LANE_CLOSE;
        return lane_pick(k, c, L);
    }
    /* admit: the flow's next access takes the freed slot */
    int64_t j = at(head, n, depth);
    double admitted = max2(max2(L->start, cas), CF(c, C_PRESENT));
    SQ(d, c, j) = L->fcn;
    SQA(d, c, j) = admitted;
    L->n = n + 1;
    enter_queue(k, d, L->fcn);
    accept(k, c, L->f, d, admitted);
    L->fcn += 1;
    L->pushed = 1;
    if (L->pair) {  /* round-robin: the other flow next while it has accesses left */
        L->admitted = L->f;
        if (L->gcn < L->gce) {
            int64_t f = L->f, fcn = L->fcn, fce = L->fce;
            double start = L->start;
            L->f = L->g, L->fcn = L->gcn, L->fce = L->gce, L->start = L->gstart;
            L->g = f, L->gcn = fcn, L->gce = fce, L->gstart = start;
            return lane_pick(k, c, L);
        }
        /* the other is out of accesses here: this one alone at its priority, a lane of one */
        FCN(L->g, c) = L->gcn;
        L->pair = L->stepped = 0;
        k->next_memo[2 * c] = -2;
    }
    if (L->fcn >= L->fce) return LANE_CLOSE;  /* (next_flow's turn) */
    return lane_pick(k, c, L);
}

/* A stepped lane's steps while its picks are no later than ``stop`` (lane_run's contract): a
 * pair's accesses alternate between two tensors and a draining queue's end, so lane_step's,
 * one at a time. */
static int64_t stepped_run(Ctl *k, int64_t c, Lane *L, double stop) {
    int64_t s;
    do s = lane_step(k, c, L, 0);
    while (s == LANE_NEXT && L->cas <= stop && L->stepped);  /* (lane_run once it is a lane of one) */
    return s;
}

/* A lane run's column commands on its command bus (lane_run): their ticks come in increasing
 * order, each after every tick taken, so the word being filled is held in ``bits`` and the
 * bus's end in ``top`` until the run ends or anything else needs the bus (bus_take and
 * bus_free then, after a flush): the same bits, written once a word instead of once a command. */
typedef struct {
    int64_t *bus, base, top, word, n;  /* n: a column command's ticks */
    uint64_t bits, ones;               /* ones: n of them */
} RunBus;

static inline void run_bus_flush(RunBus *q) {
    if (q->word >= 0) q->bus[2 + q->word] |= (int64_t)q->bits;
    q->word = -1;
    q->bits = 0;
    q->bus[1] = q->top;
}

/* bus_take(q->bus, s, q->n) */
static inline void run_bus_take(RunBus *q, int64_t s) {
    int64_t end = s + q->n, pos = s & (CMD_WINDOW - 1), bit = pos & 63;
    if (s >= q->top && end <= q->base + CMD_WINDOW && q->n + bit <= 63) {  /* (bus_take's usual case) */
        if (pos >> 6 != q->word) {
            if (q->word >= 0) q->bus[2 + q->word] |= (int64_t)q->bits;
            q->word = pos >> 6;
            q->bits = 0;
        }
        q->bits |= q->ones << bit;
        q->top = end;
        return;
    }
    run_bus_flush(q);
    bus_take(q->bus, s, q->n);
    q->base = q->bus[0];
    q->top = q->bus[1];
}

/* bus_free(q->bus, s, n) */
static inline int run_bus_free(RunBus *q, int64_t s, int64_t n) {
    if (s >= q->top) return 1;
    run_bus_flush(q);
    return bus_free(q->bus, s, n);
}

/* lane_step, over a lane's run of row hits to one bank (most of a stream's accesses), while its
 * picks are no later than ``stop`` (run_channels; run_until_complete's channels take turns at
 * almost every access, and lane_step serves them): the bank's, bank group's, rank's and the lane's flow's
 * fields and the counts are held in locals until the run ends -- the same
 * float operations in the same order, so the same results, without reloading what only the
 * run changes. Returns what lane_step returned last: LANE_NEXT (the lane's next pick, later
 * than ``stop`` or not in the run) or LANE_CLOSE. The lane's pick is no later than ``stop``. */
static int64_t lane_run(Ctl *k, int64_t c, Lane *L, double stop) {
    int64_t d = L->d, depth = L->depth, n = L->n, head = L->head, rk = L->rk, f = L->f;
    int64_t fcn = L->fcn, fce = L->fce, fcn0 = fcn;
    int write = d == 1;
    int64_t r = SQ(d, c, head), b = k->req_bank[r];
    int64_t g = BI(b, B_BG), row = BI(b, B_OPEN_ROW), cmd_cas = GG(G_CMD_CAS);
    int64_t *ring = k->cmd_bus + c * 2 * CMD_STRIDE + (GG(G_CMD_DUAL) ? CMD_STRIDE : 0);
    RunBus bus_q = {.bus = ring, .base = ring[0], .top = ring[1], .word = -1, .n = cmd_cas, .bits = 0,
                    .ones = cmd_cas > 0 && cmd_cas < 64 ? ((uint64_t)1 << cmd_cas) - 1 : 0};
    /* Each step issues one access and admits one (fcn - fcn0 of each so far), so the counts
     * (hits, reads or writes, the bank's streak, the flow's accesses left) are written once at
     * the end from that; the bank's streak reaches the row-hit cap once fcn reaches ``capped_from``. */
    int64_t capped_from = fcn0 + GG(G_CAP) - BI(b, B_STREAK), others = 0;  /* others: older flows' accesses issued */
    double cas = L->cas, delay = L->delay, other = L->other, start = L->start, present = CF(c, C_PRESENT);
    double next_pre = BF(b, B_NEXT_PRE), bank_busy = BF(b, B_BUSY), next_cas = BF(b, B_NEXT_CAS);
    double next_ref = RF(rk, R_NEXT_REF);
    double latency = k->stats_f[write ? SF_WRITE_LATENCY : SF_READ_LATENCY];
    double busy = L->busy, flow_end = k->flow_end[f], ack = CF(c, C_WRITE_ACK);
    double wr_to_rd = RBG(rk, g, BG_LAST_WR) + TT(T_CWL) + TT(T_BURST) + TT(T_WTR_L);  /* (a read run's) */
    double t_burst = TT(T_BURST), ccd_s = k->ccd_s, ccd_l = write ? TT(T_CCD_L_WR) : TT(T_CCD_L);
    /* the timings the loop adds, in locals: the stores it makes to the state could alias them */
    double t_data = write ? TT(T_CWL) : TT(T_CL), t_pre = write ? TT(T_WR) : TT(T_RTP), cmd_inv = k->cmd_inv;
    int64_t tick = L->tick, result;
    int64_t *queue = &SQ(d, c, 0);  /* (the ring's entries and arrivals: no index arithmetic per access) */
    double *queue_arrival = &SQA(d, c, 0);
    /* An access's end, its bank's next PRE after it and every maximum taken over the run grow
     * with its column command's time, so the largest is the last one's: ``end`` (any flow's)
     * and ``own_end`` (the lane's flow's) are kept, the maxima taken once at the end. */
    double issued, end = NEG, own_end = NEG, arrival = queue_arrival[head];
    for (;;) {
        /* issue the oldest access, a row hit at ``cas`` (lane_step, column_command) */
        issued = cas;
        if (cmd_cas > 0) run_bus_take(&bus_q, tick);
        end = cas + t_data + t_burst;
        latency += end - arrival;
        busy += t_burst;
        bank_busy += t_burst + 0.0;
        if (delay != 0.0) k->stats_f[SF_DELAY] += delay;  /* (+0.0 changes no sum of non-negative delays) */
        int64_t fl = k->req_flow[r];
        if (fl != f) {
            flow_issued(k, fl, c, write, end, delay);  /* (an older flow's access, still queued) */
            others += 1;
        } else {
            own_end = end;
            if (!write && delay != 0.0) k->flow_delay[f] += delay;
        }
        head = n > 1 ? at(head, 1, depth) : head;
        /* admit the flow's next access into the freed slot (accept) */
        int64_t j = at(head, n - 1, depth);
        double admitted = max2(max2(start, cas), present);
        queue[j] = fcn;
        queue_arrival[j] = admitted;
        enter_queue(k, d, fcn);
        if (write) {
            ack = max2(admitted, ack + t_burst);
            flow_end = max2(flow_end, ack);
            if (k->flow_waiting[f] - (fcn - fcn0 + 1) == 0) k->accepted = 1;
        }
        fcn += 1;
        if (fcn >= fce) {
            result = LANE_CLOSE;
            break;
        }
        /* the next pick, when the run's (lane_pick with this bank's fields) */
        double floor_t = max2(cas + ccd_s, other);
        r = queue[head];
        if (k->req_bank[r] != b) {
            result = LANE_RUN_LEFT;  /* (lane_pick, from the state written back) */
            break;
        }
        if (k->req_row[r] != row
            || (fcn >= capped_from && max2(next_pre, write ? end + t_pre : cas + t_pre) <= floor_t
                && BO(b, d) > 0)) {
            result = LANE_CLOSE;
            break;
        }
        arrival = queue_arrival[head];
        /* lane_pick's time is the largest of the bus's terms (arrival, the channel's and the bank
         * group's column-to-column times, ``other``, a read's write-to-read) and the bank's
         * readiness, and the run goes on only when it is ``floor_t`` itself -- one of those
         * terms. So the run goes on exactly when no term is later than ``floor_t``, and then
         * its time is ``floor_t`` and its delay 0: the same values without a chain of maxima
         * from one access's time to the next's (the loop's critical path). */
        if (arrival > floor_t || cas + ccd_l > floor_t || next_cas > floor_t || (!write && wr_to_rd > floor_t)) {
            result = LANE_CLOSE;
            break;
        }
        double time = floor_t;
        if (cmd_cas > 0) {
            double q = time * cmd_inv;
            int64_t t = q >= 0.0 ? (int64_t)q : (int64_t)floor(q);
            if (!run_bus_free(&bus_q, t, cmd_cas)) {
                result = LANE_CLOSE;
                break;
            }
            tick = t;
        }
        if (time >= next_ref) {
            result = LANE_CLOSE;
            break;
        }
        delay = 0.0;
        cas = time;
        if (cas > stop) {
            result = LANE_NEXT;
            break;
        }
    }
    run_bus_flush(&bus_q);
    int64_t steps = fcn - fcn0, own = steps - others;
    BI(b, B_STREAK) += steps;
    BF(b, B_NEXT_PRE) = max2(next_pre, write ? issued + TT(T_CWL) + TT(T_BURST) + TT(T_WR) : issued + TT(T_RTP));
    BF(b, B_BUSY) = bank_busy;
    RBG(rk, g, write ? BG_LAST_WR : BG_LAST_RD) = issued;
    RF(rk, R_LAST_BUSY) = max2(RF(rk, R_LAST_BUSY), end);
    k->stats_i[S_HITS] += steps;
    k->stats_i[write ? S_WRITES : S_READS] += steps;
    k->stats_f[write ? SF_WRITE_LATENCY : SF_READ_LATENCY] = latency;
    k->flow_remaining[f] -= own;
    k->flow_waiting[f] -= steps;
    FCL(f, c) -= own;
    if (own > 0) {
        k->flow_data_end[f] = max2(k->flow_data_end[f], own_end);
        if (!write) flow_end = max2(flow_end, own_end);
    }
    k->flow_end[f] = flow_end;
    CF(c, C_WRITE_ACK) = ack;
    L->last_same = L->last_cas = L->last_issue = issued;
    L->last_rank = rk - c * GG(G_RANKS);
    L->busy = busy;
    L->head = head;
    L->n = n;
    L->fcn = fcn;
    L->pushed = 1;
    L->cas = cas;  /* (the issued one's when the run closes the lane: nothing reads it then) */
    L->delay = delay;
    L->tick = tick;
    return result == LANE_RUN_LEFT ? lane_pick(k, c, L) : result;
}

/* Channel c's pick ``*p`` issued; its next pick into ``*p``, or into the lane ``L`` when it
 * begins one (``L->open``). The flow the access completed when ``until_complete``, else -1. */
static inline __attribute__((always_inline)) int64_t issue_then_pick(Ctl *k, int64_t c, Pick *p, Lane *L,
                                                                     int streams, int until_complete) {
    int64_t f = p->streamed ? issue_hit(k, c, p) : issue(k, c, p);
    if (until_complete && p->d == 0 && k->flow_remaining[f] == 0) return f;
    if (streams && shortcut_pick(k, c, p)) {  /* (after a miss as well: its pick is candidate's) */
        int64_t lf = -1, lg = -1;
        if (lane_fits(k, c, p, &lf, &lg)) lane_open(k, c, L, p, lf, lg);
        return -1;
    }
    *p = candidate(k, c);
    return -1;
}

/* Channel c's first pick of a run: the lane it begins when the state is a stream's (the lane
 * a run's end closed, most often: what issue_then_pick would open after one more access), else
 * candidate's pick in ``*p``. shortcut_pick's pick, when it has one, is candidate's. */
static inline __attribute__((always_inline)) void first_pick(Ctl *k, int64_t c, Pick *p, Lane *L, int streams) {
    if (streams && shortcut_pick(k, c, p)) {
        int64_t f = -1, g = -1;
        if (lane_fits(k, c, p, &f, &g)) lane_open(k, c, L, p, f, g);
        return;
    }
    *p = candidate(k, c);
}

/* Every channel to ``stop``, channel by channel. */
static int64_t run_channels(Ctl *k, double stop) {
    int streams = can_stream(k);
    for (int64_t c = 0; c < k->C; c++) {
        Lane L = {0};
        Pick p;
        first_pick(k, c, &p, &L, streams);
        for (;;) {
            if (L.open) {
                if (L.cas > stop) {
                    lane_close(k, c, &L);
                    break;
                }
                if ((L.stepped ? stepped_run(k, c, &L, stop) : lane_run(k, c, &L, stop)) == LANE_CLOSE) {
                    lane_close(k, c, &L);
                    p = candidate(k, c);
                }
                continue;
            }
            if (p.what == NOTHING || p.time > stop) break;
            if (p.what == REFRESH) {
                refresh(k, p.rank, p.time, p.act);
                p = candidate(k, c);
            } else {
                issue_then_pick(k, c, &p, &L, streams, 0);
            }
        }
        CF(c, C_PRESENT) = max2(CF(c, C_PRESENT), stop);  /* (admissions from now on are no earlier) */
    }
    return 0;
}

/* ``run_channels`` in time order across channels: 1 just after the access that makes a flow
 * done (a read's column command, a write's admission; the issue and the admissions after it
 * may make more than one done), or 0 with every command up to ``stop`` issued (kernel.py:
 * run_until_complete). */
static int64_t run_until_complete(Ctl *k, double stop) {
    Pick *next = k->held;  /* each channel's next command, or its lane's */
    Lane *lanes = k->lanes;
    int streams = can_stream(k);
    int64_t C = k->C, done = 0;
    k->accepted = 0;
    for (int64_t c = 0; c < C; c++) lanes[c].open = 0;
    for (int64_t c = 0; c < C; c++) first_pick(k, c, &next[c], &lanes[c], streams);
    if (k->accepted) return 1;  /* (a write flow admitted whole at its start; a lane opened by first_pick has
                                 * issued nothing, and the next call opens its own) */
    for (;;) {
        int64_t c = -1;  /* the earliest command of all channels */
        double best = 0.0;
        for (int64_t j = 0; j < C; j++) {
            double t;
            if (lanes[j].open)
                t = lanes[j].cas;
            else if (next[j].what != NOTHING)
                t = next[j].time;
            else
                continue;
            if (t <= stop && (c < 0 || t < best)) c = j, best = t;
        }
        if (c < 0) break;
        if (lanes[c].open) {
            int64_t s = lane_step(k, c, &lanes[c], 1);
            if (s >= 0) {
                done = 1;
                break;
            }
            if (s == LANE_CLOSE) {
                lane_close(k, c, &lanes[c]);
                next[c] = candidate(k, c);
            }
        } else if (next[c].what == REFRESH) {
            refresh(k, next[c].rank, next[c].time, next[c].act);
            next[c] = candidate(k, c);
        } else if (issue_then_pick(k, c, &next[c], &lanes[c], streams, 1) >= 0) {
            done = 1;
            break;
        }
        if (k->accepted) {
            done = 1;
            break;
        }
    }
    for (int64_t c = 0; c < C; c++) {
        if (lanes[c].open) lane_close(k, c, &lanes[c]);
        if (!done) CF(c, C_PRESENT) = max2(CF(c, C_PRESENT), stop);  /* (every command up to stop issued) */
    }
    return done;
}


/* The state's arrays: at ``layout[L_x]`` in the float or int buffer; the sizes they must have. */
static int bind_state(Ctl *k, double *fbuf, Py_ssize_t nf, int64_t *ibuf, Py_ssize_t ni, const int64_t *layout,
                      Py_ssize_t nl) {
    if (nl != N_LAYOUT) {
        PyErr_Format(PyExc_ValueError, "npusim bank kernel: layout has %zd entries, expected %d", nl, N_LAYOUT);
        return -1;
    }
    const int64_t *G = k->G;
    int64_t C = G[G_CHANNELS], R = C * G[G_RANKS], BG = G[G_BANKGROUPS];
    int64_t NB = R * BG * G[G_BANKS_PER_GROUP], F = layout[L_FLOW_CAP];
    for (int i = 0; i < N_G; i++) {
        if (G[i] < -1 || G[i] > INT32_MAX / 64) {
            PyErr_Format(PyExc_ValueError, "npusim bank kernel: G[%d] = %lld out of range", i, (long long)G[i]);
            return -1;
        }
        k->g[i] = (int32_t)G[i];
    }
    k->C = (int32_t)C;
    k->BG = (int32_t)BG;
    k->cmd_inv = k->T[T_CMD] > 0.0 ? 1.0 / k->T[T_CMD] : 0.0;
    k->ccd_s = max2(k->T[T_CCD_S], k->T[T_BURST]);
    k->QD = (int32_t)(G[G_RQ] > G[G_WQ] ? G[G_RQ] : G[G_WQ]);
    k->FRONT = (int32_t)(G[G_BANKQ] > 0 ? (G[G_RT] > G[G_WT] ? G[G_RT] : G[G_WT]) : 1);
    /* name, 1 if float, items */
    const int64_t sizes[N_LAYOUT - 1][2] = {
        {1, NB * BANK_F_COLUMNS}, {0, NB * BANK_I_COLUMNS}, {1, R * RANK_F_COLUMNS}, {0, R * RANK_I_COLUMNS},
        {1, R * BG * RANK_BG_COLUMNS}, {1, C * CHAN_F_COLUMNS}, {0, C * CHAN_I_COLUMNS}, {0, 2 * C * k->QD},
        {1, 2 * C * k->QD}, {0, 2 * C * k->FRONT * TQ_COLUMNS}, {1, 2 * C * k->FRONT}, {0, NB * BANK_N_COLUMNS},
        {0, N_STATS_I}, {1, N_STATS_F}, {0, F}, {1, F}, {1, F}, {0, F}, {1, F}, {1, F}, {0, F * C}, {0, F * C},
        {0, F}, {0, F}, {0, NB * 2}, {0, C * 2 * CMD_STRIDE}, {0, F}, {0, F * C}, {1, F}};
    for (int i = 0; i < N_LAYOUT - 1; i++) {
        if (layout[i] < 0 || layout[i] + sizes[i][1] > (sizes[i][0] ? nf : ni)) {
            PyErr_Format(PyExc_ValueError, "npusim bank kernel: state array %d does not fit its buffer", i);
            return -1;
        }
    }
#define FPTR(i) (fbuf + layout[i])
#define IPTR(i) (ibuf + layout[i])
    k->bank_f = FPTR(L_BANK_F);
    k->bank_i = IPTR(L_BANK_I);
    k->rank_f = FPTR(L_RANK_F);
    k->rank_i = IPTR(L_RANK_I);
    k->rank_bg_f = FPTR(L_RANK_BG_F);
    k->chan_f = FPTR(L_CHAN_F);
    k->chan_i = IPTR(L_CHAN_I);
    k->sq = IPTR(L_SQ);
    k->sqa = FPTR(L_SQA);
    k->tq = IPTR(L_TQ);
    k->tqa = FPTR(L_TQA);
    k->bank_n = IPTR(L_BANK_N);
    k->stats_i = IPTR(L_STATS_I);
    k->stats_f = FPTR(L_STATS_F);
    k->flow_write = IPTR(L_FLOW_WRITE);
    k->flow_prio = FPTR(L_FLOW_PRIO);
    k->flow_start = FPTR(L_FLOW_START);
    k->flow_remaining = IPTR(L_FLOW_REMAINING);
    k->flow_end = FPTR(L_FLOW_END);
    k->flow_delay = FPTR(L_FLOW_DELAY);
    k->fc_next = IPTR(L_FC_NEXT);
    k->fc_end = IPTR(L_FC_END);
    k->flow_first = IPTR(L_FLOW_FIRST);
    k->flow_last = IPTR(L_FLOW_LAST);
    k->bank_other = IPTR(L_BANK_OTHER);
    k->cmd_bus = IPTR(L_CMD_BUS);
    k->flow_waiting = IPTR(L_FLOW_WAITING);
    k->fc_left = IPTR(L_FC_LEFT);
    k->flow_data_end = FPTR(L_FLOW_DATA_END);
#undef FPTR
#undef IPTR
    return 0;
}


/* -- the addresses of a DMA command, and the prediction's bound ----------------------------- */

/* The chunks of a strided view (kernel.py: view_chunks): the first axis from which it is
 * contiguous (``*first``), the bytes of that contiguous block (``*block``), and how many blocks
 * (the leading axes' product; 0 for an empty view, -1 when over 2**40). */
static int64_t view_blocks(const int64_t *shape, const int64_t *strides, int64_t rank, int64_t itemsize,
                           int64_t *first, int64_t *block) {
    int64_t f = rank, expected = 1, count = 1;
    for (int64_t a = rank - 1; a >= 0; a--) {
        if (shape[a] != 1 && strides[a] != expected) break;
        expected *= shape[a];
        f = a;
    }
    int64_t bytes = itemsize;
    for (int64_t a = f; a < rank; a++) bytes *= shape[a];
    for (int64_t a = 0; a < f; a++) {
        if (shape[a] < 0 || (shape[a] > 0 && count > ((int64_t)1 << 40) / shape[a])) return -1;
        count *= shape[a];
    }
    *first = f;
    *block = bytes;
    return bytes == 0 || count == 0 ? 0 : count;
}

/* The ``count`` blocks of ``view_blocks`` as chunks (byte offset ``o``, size ``s``) in issue
 * order, abutting ones merged; how many. ``index``: ``first`` zeroed items of scratch. */
static int64_t view_chunks_fill(const int64_t *shape, const int64_t *strides, int64_t first, int64_t block,
                                int64_t count, int64_t itemsize, int64_t *index, int64_t *o, int64_t *s) {
    int64_t element = 0, m = 0;
    for (int64_t it = 0; it < count; it++) {
        int64_t start = element * itemsize;
        if (m > 0 && o[m - 1] + s[m - 1] == start) {
            s[m - 1] += block;
        } else {
            o[m] = start;
            s[m] = block;
            m++;
        }
        for (int64_t a = first - 1; a >= 0; a--) { /* the last leading axis steps, carrying */
            index[a] += 1;
            element += strides[a];
            if (index[a] < shape[a]) break;
            element -= strides[a] * shape[a];
            index[a] = 0;
        }
    }
    return m;
}

/* The device accesses a transfer's chunks (``offsets`` + ``shift``, ``sizes``) make, in issue
 * order (kernel.py: access_addresses): every burst they touch, once (a burst the last chunk
 * ended in is not touched again), as ``burst / access`` accesses when the access is smaller,
 * else the access holding it (one shared by consecutive bursts once). As runs of addresses
 * ``access`` bytes apart:
 * run r's first address at ``out[1 + 2r]``, the index of its first access at ``out[2 + 2r]``;
 * their count at ``out[0]`` and the accesses' after the last (``out[2 + 2 * count]``). How
 * many runs; with ``out`` NULL, at most how many (a chunk's bursts make one run when a
 * burst is whole accesses, else each burst its own, or each access when bursts are smaller). */
static int64_t access_runs(const int64_t *offsets, const int64_t *sizes, int64_t n, int64_t shift, int64_t burst,
                           int64_t access, int64_t *out) {
    int64_t per = burst > access ? floordiv(burst, access) : 1, whole = burst >= access && per * access == burst;
    int64_t runs = 0, m = 0, next = -1, prev_access = -1, last = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t first_b = floordiv(offsets[i] + shift, burst), last_b = floordiv(offsets[i] + shift + sizes[i] - 1, burst);
        if (first_b == last) first_b += 1;  /* (the burst the last chunk ended in: touched once) */
        if (first_b > last_b) continue;
        last = last_b;
        if (!out) {
            runs += whole ? 1 : last_b - first_b + 1;
            continue;
        }
        for (int64_t bb = first_b; bb <= last_b; bb++) {
            int64_t a, count;
            if (whole) {
                a = bb * burst, count = (last_b - first_b + 1) * per;
                bb = last_b;
            } else if (burst >= access) {
                a = bb * burst, count = per;
            } else {
                a = floordiv(bb * burst, access) * access, count = 1;
                if (a == prev_access) continue;
                prev_access = a;
            }
            if (a != next || runs == 0) {
                out[1 + 2 * runs] = a;
                out[2 + 2 * runs] = m;
                runs += 1;
            }
            m += count;
            next = a + count * access;
        }
    }
    if (out) {
        out[0] = runs;
        out[2 + 2 * runs] = m;
    }
    return runs;
}

/* The address mapping's decoding (kernel.py: decode_grouped): field f of an access is
 * ``(address >> offset_bits >> shifts[f]) & masks[f]``, the row modulo ``rows``. */
typedef struct {
    int64_t offset_bits, rows, ranks, bankgroups, banks_per_group;
    int64_t shifts[6], masks[6];
} Decoding;

/* The channel of the access at ``address``; its global bank, row, global rank and bank group in ``out``. */
static inline int64_t decode_access(const Decoding *m, int64_t address, int64_t out[4]) {
    int64_t a = address >> m->offset_bits;
    int64_t c = (a >> m->shifts[5]) & m->masks[5];
    int64_t rank = c * m->ranks + ((a >> m->shifts[1]) & m->masks[1]);
    int64_t bg = (a >> m->shifts[2]) & m->masks[2];
    out[0] = (rank * m->bankgroups + bg) * m->banks_per_group + ((a >> m->shifts[3]) & m->masks[3]);
    int64_t row = a >> m->shifts[0];  /* >= 0: addresses are */
    out[1] = (m->rows & (m->rows - 1)) == 0 ? row & (m->rows - 1) : floormod(row, m->rows);  /* (no division per access) */
    out[2] = rank;
    out[3] = bg;
    return c;
}

/* The fewest column commands one channel issues before any of ``flows`` ends (kernel.py:
 * commands_before_end): a read flow's accesses not yet issued (``fc_left``: each is a column
 * command of its channel), or, when more, those not yet admitted after the more urgent flows'
 * beyond ``depth``; a write flow's (posted: it ends at its last admission) not yet admitted
 * beyond ``write_depth``, the slots its queues can have free. */
static int64_t fewest_before_end(const int64_t *flows, int64_t nflows, const int64_t *fc_next, const int64_t *fc_end,
                                 const int64_t *fc_left, const double *prio, const int64_t *flow_write, int64_t C,
                                 int64_t depth, int64_t write_depth) {
    int64_t fewest = (int64_t)1 << 62;
    for (int64_t a = 0; a < nflows; a++) {
        int64_t f = flows[a], worst = 0;
        for (int64_t c = 0; c < C; c++) {
            int64_t w, left = fc_end[f * C + c] - fc_next[f * C + c];
            if (flow_write[f]) {
                w = left - write_depth > 0 ? left - write_depth : 0;
            } else {
                int64_t ahead = 0;
                for (int64_t e = 0; e < nflows; e++) {
                    int64_t g = flows[e];
                    if (prio[g] < prio[f]) ahead += fc_end[g * C + c] - fc_next[g * C + c];
                }
                w = left > 0 ? left + (ahead - depth > 0 ? ahead - depth : 0) : 0;
                if (fc_left[f * C + c] > w) w = fc_left[f * C + c];
            }
            if (w > worst) worst = w;
        }
        if (worst < fewest) fewest = worst;
    }
    return fewest;
}

#endif
