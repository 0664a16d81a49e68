"""Exact offsets for lifetime problems by canonical branch and bound (after MiniMalloc).

The decision question: can every buffer (a size over a fixed time interval) get an offset so
that buffers live at the same time never share bytes and nothing ends above ``capacity``?

Why the search is complete. Take any solution and keep moving some buffer to a lower
feasible offset until none can move: the result is *canonical*. Sorted by (offset, rank), a
canonical solution places each buffer exactly at ``h(b)``, the highest top among the earlier
buffers live with it (lower would collide or it could move). So the search builds solutions
in that order: the next buffer goes at its current ``h`` and comes no earlier in (offset,
rank) than the last one placed. Every canonical solution is one path of the search.

What prunes it -- the ideas of Moffitt, "MiniMalloc" (ASPLOS 2023), re-derived here:

- sections: time is cut at every lifetime end point; in each section the bytes not yet
  placed must fit between the section's *floor* and the capacity. The floor is the top of the
  last buffer placed there, raised to the lowest ``h`` of the unplaced buffers there and to
  the last offset placed (offsets only grow along a path). On the hard instances the
  capacity equals the max-live bound, so most sections have no slack at all;
- the staircase (ours, a release-time bound): an unplaced buffer goes no lower than its
  ``h``, so in each section, for every height t, the buffers with ``h`` >= t must fit
  between t and the capacity -- exact for one section taken alone;
- dominance: a buffer may not go at or above the height where some unplaced buffer would
  end if placed now -- that buffer could then move below it, so the solution would not be
  canonical;
- hatless pruning: when the buffer just tried overlaps no unplaced buffer and failed, every
  other choice at that node fails too (MiniMalloc's);
- twins (ours): buffers with the same lifetime stacked right on each other can swap places
  with nothing else changing, so a buffer never rests right on a twin of a later rank;
- a portfolio: the tie order among buffers at the same ``h`` comes from a preordering
  (MiniMalloc's keys), recomputed for every part found by dynamic decomposition, since
  its T key (the bytes in the buffer's busiest section) counts only bytes still unplaced;
  the twin rule keeps the static rank (twins share T, so their order never changes);
  complete searches under several preorderings and limited discrepancy searches that find
  solutions a few early deviations from the preferred order run in lanes, one a core
  (worker processes), each lane a round robin under a node allowance that doubles each
  round, each search resuming where it stopped (see ``LANES`` and ``search_offsets``).

The kernel (``planners.alloc.canonical.kernel``) is resumable: it runs at most
``node_budget`` nodes and keeps all its state in arrays, so the Python driver here can stop on
a wall-clock limit between slices. ``planners.alloc.canonical.reference`` is the same search
as plain recursive Python: the test oracle (both return the same offsets after the same
number of placements). The instance arrays are built in ``planners.alloc.canonical.instance``.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing import connection

import numpy as np

from npusim.errors import ConfigError

from planners.alloc.canonical.instance import BUDGET, EXHAUSTED, FOUND, GROW, INF, LIMITED, SearchInstance
from planners.alloc.canonical.kernel import NONE, PARTS, KernelInstance, KernelState, _search_kernel

#: the portfolio: lanes of (preordering, discrepancy limit to start with or -1 for the
#: complete search, weight = turns per round), one core each (see ``search_offsets``).
#: From the placements each search needed alone at capacity = max-live on MiniMalloc's 11
#: challenging instances (A-K, ../shared/reference/minimalloc; D and J unsolved by all):
#: complete TWA solves 6 of the 9 others (A 18k, E 510k, F 121k, G 68k, I 20k, K 13k), more
#: than any other search, and E needs 510k (TCA: 523k) -- at ~230k placements a second, more
#: than the time given to the bound when it shares a core with 7 others. So it has a lane
#: of its own, which also makes it the fastest infeasibility proof. The rest share the
#: other: complete TCA (F 1.8k, H 1.9k) and TAW (B 30k, C 266) weigh twice the discrepancy
#: searches (G: TCA 18k, H: TAW 7.5k, I: TWA 803); WAT solves nothing the T-first orders do
#: not solve faster (A, C, K), so it comes last, kept for instances unlike these.
LANES = (
    (("TWA", -1, 1),),
    (("TCA", -1, 2), ("TAW", -1, 2), ("TCA", 1, 1), ("TWA", 1, 1), ("TAW", 1, 1), ("WAT", -1, 1), ("WAT", 1, 1)),
)
#: a lane runs slices of about this many wall seconds (at the pace of its last slice; from
#: 4k to 300k placements a second on MiniMalloc's instances) and at most ``SLICE``
#: placements, then the driver looks at the clock and the other lanes again
SLICE_SECONDS = 0.02
SLICE = 10_000
#: wall seconds the lanes take turns in this process before worker processes are forked
#: (forking two costs ~20 ms): most searches end sooner
HEAD_START = 0.05




class CanonicalSearch:
    """One decision search (fixed capacity, one preordering), resumable in budget slices.

    Dynamic decomposition (MiniMalloc's): when no unplaced buffer crosses the boundary between
    two sections any more, the buffers on either side are independent problems, solved one
    after the other; a failure on one side never re-searches the other.
    """

    def __init__(self, inst: SearchInstance, capacity: int, discrepancies: int = -1) -> None:
        n, n_sections = len(inst.sizes), inst.n_sections
        self.inst, self.capacity = inst, int(capacity)
        self.placed = np.zeros(n, dtype=np.bool_)
        self.offset = np.zeros(n, dtype=np.int64)
        self.h = np.zeros(n, dtype=np.int64)
        self.floor = np.zeros(n_sections, dtype=np.int64)
        self.rem = inst.section_bytes.copy()
        self.path = np.zeros(n + 1, dtype=np.int64)
        self.hmark = np.zeros(n + 1, dtype=np.int64)
        self.fmark = np.zeros(n + 1, dtype=np.int64)
        self.trail_hi = np.zeros(max(len(inst.adj), 1), dtype=np.int64)
        self.trail_hv = np.zeros_like(self.trail_hi)
        room = 4 * (n_sections + 1) + int((inst.sec_hi - inst.sec_lo).sum())
        self.trail_fi = np.zeros(room, dtype=np.int64)
        self.trail_fv = np.zeros(room, dtype=np.int64)
        # h-trail length, floor-trail length, stamp, highest top placed, low-trail length,
        # priority-trail length
        self.tops = np.zeros(6, dtype=np.int64)
        # each buffer's priority in the partition searched (set by _rank_part), old ones trailed
        self.prio = np.arange(n, dtype=np.int64)
        self.ptrail = np.zeros((4 * n + 4, 2), dtype=np.int64)
        self.keys = np.zeros(max(n, 1), dtype=np.int64)
        self.picked = np.zeros(max(n, 1), dtype=np.int64)
        # each section's lowest h among unplaced buffers (all 0 at first) and a buffer there
        self.lw = np.zeros((2, n_sections), dtype=np.int64)
        self.lw[1] = -1
        for r in range(n - 1, -1, -1):
            if inst.sizes[r] > 0:
                self.lw[1, inst.sec_lo[r]:inst.sec_hi[r]] = r
        self.ltrail = np.zeros((room, 3), dtype=np.int64)  # a section at most once a placement
        self.lmark = np.zeros((n + 1, 2), dtype=np.int64)
        self.redo = np.zeros((2, n_sections), dtype=np.int64)
        self.stamp_of = np.zeros(n_sections, dtype=np.int64)
        self.affected = np.zeros(n_sections, dtype=np.int64)
        self.scratch = np.zeros(max(n, 1), dtype=np.int64)
        # cuts[s]: unplaced buffers crossing the boundary between sections s and s + 1
        self.cuts = np.zeros(max(n_sections - 1, 0), dtype=np.int64)
        for lo, hi in zip(inst.sec_lo, inst.sec_hi):
            self.cuts[lo:hi - 1] += 1
        # each placement adds at most two frames; the root is a PARTS frame over everything
        self.frames = np.zeros((2 * n + 4, 13), dtype=np.int64)
        self.frames[0, :3] = (PARTS, 0, n_sections)
        # frames, depth, pending result, placements, discrepancy limit (-1: none), limit hit
        self.state = np.array([1, 0, NONE, 0, discrepancies, 0], dtype=np.int64)
        # a section holding more than the capacity makes the search pointless
        self.status = EXHAUSTED if n_sections and self.rem.max() > capacity else BUDGET

    @property
    def kernel_instance(self) -> KernelInstance:
        i = self.inst
        return KernelInstance(sizes=i.sizes, sec_lo=i.sec_lo, sec_hi=i.sec_hi, adj_start=i.adj_start, adj=i.adj,
                              mem_start=i.mem_start, members=i.members, twin_start=i.twin_start, twin=i.twin,
                              pre_key=i.pre_key, by_post=i.by_post)

    def kernel_state(self) -> KernelState:
        """The search's arrays as the kernel takes them (built per call: growing a trail
        replaces its array)."""
        return KernelState(**{name: getattr(self, name) for name in KernelState._fields})

    @property
    def nodes(self) -> int:
        return int(self.state[3])

    def run(self, node_budget: int) -> int:
        """Search at most ``node_budget`` more placements; FOUND, EXHAUSTED (no offsets
        exist), LIMITED (none within the discrepancy limit) or BUDGET."""
        goal = self.nodes + node_budget
        while self.status == BUDGET and self.nodes < goal:
            code = int(_search_kernel(self.kernel_instance, self.kernel_state(), self.capacity, goal - self.nodes))
            if code == GROW:  # a trail is full: double the floor and low trails and carry on
                self.trail_fi = np.concatenate([self.trail_fi, np.zeros_like(self.trail_fi)])
                self.trail_fv = np.concatenate([self.trail_fv, np.zeros_like(self.trail_fv)])
                self.ltrail = np.concatenate([self.ltrail, np.zeros_like(self.ltrail)])
                self.ptrail = np.concatenate([self.ptrail, np.zeros_like(self.ptrail)])
            elif code != BUDGET:
                self.status = code
        return self.status

    def offsets(self) -> np.ndarray:
        """Offsets by original buffer index (0 for empty buffers)."""
        out = np.zeros(len(self.offset), dtype=np.int64)
        out[self.inst.order] = np.where(self.inst.sizes > 0, self.offset, 0)
        return out


class _Lane:
    """Searches sharing one core: a weighted round robin under a node allowance that doubles
    every round (MiniMalloc's), each search resuming where its last turn stopped rather than
    starting again (the same tree would only be walked twice); a discrepancy search that
    tried every path within its limit makes way for one allowing a deviation more.

    ``run`` may stop anywhere, even mid-turn, and carry on later: the placements after which
    a lane finds (or proves) never depend on how its work was sliced."""

    def __init__(self, instances: dict[str, SearchInstance], capacity: int, entries) -> None:
        """``entries``: (preordering, discrepancy limit or -1, weight), as in ``LANES``;
        ``instances``: the ``SearchInstance`` of each preordering."""
        self.capacity = capacity
        self.searches = [CanonicalSearch(instances[p], capacity, d) for p, d, _ in entries]
        self.weights = [w for _, _, w in entries]
        self.turn = 2 * max(len(self.searches[0].placed), 1)
        self.k, self.goal = 0, self.turn * self.weights[0]  # whose turn, until which placement
        self.replaced = 0  # placements of discrepancy searches replaced by wider ones
        self.status = self.searches[0].status  # EXHAUSTED already if a section is over capacity
        self.decided: CanonicalSearch | None = None

    @property
    def nodes(self) -> int:
        return self.replaced + sum(search.nodes for search in self.searches)

    def run(self, node_budget: int) -> int:
        """At most ``node_budget`` more placements; FOUND, EXHAUSTED or BUDGET."""
        stop = self.nodes + node_budget
        while self.status == BUDGET and self.nodes < stop:
            search = self.searches[self.k]
            if search.nodes >= self.goal:  # its turn is over: the next one's, a new round after the last
                self.k = (self.k + 1) % len(self.searches)
                if self.k == 0:
                    self.turn *= 2
                self.goal = self.searches[self.k].nodes + self.turn * self.weights[self.k]
                continue
            status = search.run(min(self.goal - search.nodes, stop - self.nodes))
            if status in (FOUND, EXHAUSTED):  # complete under any preordering: EXHAUSTED is a proof
                self.status, self.decided = status, search
            elif status == LIMITED:
                self.replaced += search.nodes
                self.searches[self.k] = CanonicalSearch(search.inst, self.capacity, int(search.state[4]) + 1)
                self.goal = self.turn * self.weights[self.k]
        return self.status


def _drive(lanes: list[_Lane], ids: list[int], budget: int, deadline: float, first_wins: bool,
           shared=None) -> tuple[int, int, int, bool]:
    """Run ``lanes`` (portfolio indices ``ids``) a slice at a time, the least advanced first:
    ``(status, placements of the deciding lane, its index, settled)``, or ``(BUDGET, most
    placements of a lane, -1, settled)`` when none decided. ``settled``: the answer is
    final, not cut short by the deadline (so the lanes may carry on elsewhere).

    With ``first_wins`` (wall-clock mode) the first find ends it. Otherwise the winner must
    not depend on timing: it is the find after the fewest placements of its lane, ties to
    the lower index, so the other lanes go on until they have spent as many (a lane that has
    not found by then can only find later). ``shared`` holds the best such count found by
    any worker process. A proof of infeasibility ends it at once: no lane can find then."""
    best = min(((lane.nodes, g) for g, lane in zip(ids, lanes) if lane.status == FOUND), default=(INF, -1))
    size = dict.fromkeys(ids, min(SLICE, 256))  # each lane's next slice
    settled = False
    while time.perf_counter() < deadline:
        bar = min(budget, best[0], shared.value if shared is not None else INF)
        ready = [(lane.nodes, g, lane) for g, lane in zip(ids, lanes) if lane.status == BUDGET and lane.nodes < bar]
        if not ready:
            settled = True
            break
        nodes, g, lane = min(ready, key=lambda entry: entry[:2])
        started = time.perf_counter()
        status = lane.run(min(size[g], budget - nodes))
        pace = (lane.nodes - nodes) / max(time.perf_counter() - started, 1e-6)
        size[g] = max(min(SLICE, 64), min(SLICE, int(pace * SLICE_SECONDS)))
        if status == EXHAUSTED or (status == FOUND and first_wins):
            return status, lane.nodes, g, True
        if status == FOUND:
            best = min(best, (lane.nodes, g))
            if shared is not None:
                with shared.get_lock():
                    shared.value = min(shared.value, lane.nodes)
    if best[1] >= 0:
        return FOUND, best[0], best[1], settled
    return BUDGET, max(lane.nodes for lane in lanes), -1, settled


def _worker(lanes, ids, budget, deadline, first_wins, shared, conn) -> None:
    """A worker process's share of the lanes (``_drive``); sends back its decision and the
    offsets found, or the error that stopped it."""
    try:
        status, nodes, g, _ = _drive(lanes, ids, budget, deadline, first_wins, shared)
        offsets = lanes[ids.index(g)].decided.offsets() if status == FOUND else None
        conn.send((status, nodes, g, offsets))
    except BaseException as error:  # noqa: BLE001 -- reported to the parent, which raises it
        conn.send(("error", f"{type(error).__name__}: {error}", -1, None))


def _drive_in_processes(lanes: list[_Lane], workers: int, budget: int, deadline: float,
                        first_wins: bool) -> tuple[int, int, int, np.ndarray | None]:
    """``_drive`` with lane ``g`` in worker process ``g % workers``, forked (so the compiled
    kernels and every array are inherited, nothing is pickled but the answer):
    ``(status, placements, lane, offsets)`` by the same rule as ``_drive`` over all lanes.
    Workers still running when the answer is known are terminated."""
    ctx = multiprocessing.get_context("fork")
    # the fewest lane placements after which a lane found (so far: during the head start)
    shared = ctx.Value("q", min((lane.nodes for lane in lanes if lane.status == FOUND), default=INF))
    procs, pipes = [], []
    for w in range(workers):
        ids = list(range(w, len(lanes), workers))
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=([lanes[g] for g in ids], ids, budget, deadline, first_wins,
                                                 shared, send), daemon=True)
        proc.start()
        send.close()
        procs.append(proc)
        pipes.append(receive)
    answers = []
    try:
        while pipes:
            # a worker looks at the clock between slices (tens of milliseconds); waiting
            # a second past the deadline is only for a worker that cannot answer
            ready = connection.wait(pipes, timeout=max(deadline - time.perf_counter(), 0) + 1.0)
            if not ready:
                break
            for pipe in ready:
                pipes.remove(pipe)
                try:
                    answer = pipe.recv()
                except EOFError:
                    answer = ("error", "the worker process ended without an answer", -1, None)
                if answer[0] == "error":
                    raise RuntimeError(f"canonical search worker failed: {answer[1]}")
                if answer[0] == EXHAUSTED or (answer[0] == FOUND and first_wins):
                    return answer
                answers.append(answer)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
    found = [a for a in answers if a[0] == FOUND]
    if found:
        return min(found, key=lambda a: (a[1], a[2]))
    return BUDGET, max([a[1] for a in answers], default=budget), -1, None


def search_offsets(first, last, sizes, capacity: int, *, time_limit: float = 10.0, node_limit: int | None = None,
                   workers: int = 2, lanes=LANES) -> tuple[np.ndarray | None, str, int]:
    """Offsets with every buffer below ``capacity``: ``(offsets, "found", nodes)``, or
    ``(None, "infeasible", nodes)`` when the search proved there are none, or
    ``(None, "timed_out", nodes)``; ``nodes``: the placements of the lane that decided (of
    the busiest lane when none did), so about the wall time of one core.

    The portfolio (``LANES``): complete searches under several preorderings and limited
    discrepancy searches (Harvey and Ginsberg), which first try every path leaving the
    preferred order once, then twice, and so on. A depth-first search never revisits its
    first choices before exhausting everything below them; the discrepancy search finds
    solutions a few early deviations away, but proves nothing. Each lane is a round robin of
    some of them (``_Lane``); the lanes run in ``workers`` processes (lane ``g`` in the
    ``g % workers``-th), or side by side in this one when ``workers`` is 1. They first take
    turns here for ``HEAD_START`` seconds: most searches end sooner than a fork would.

    ``node_limit`` (placements per lane) makes the answer deterministic, the same for any
    number of workers: the find after the fewest placements of its lane wins, ties to the
    earlier lane (``_drive``); ``time_limit`` (wall seconds) is then only a guard, as for
    CP-SAT in ``planners.schedule.solver``. Without it, the first lane to decide wins."""
    if workers < 1:
        raise ConfigError(f"search_offsets: workers must be at least 1, got {workers}")
    orders = dict.fromkeys(p for lane in lanes for p, _, _ in lane)
    instances = {p: _cached_instance(first, last, sizes, p) for p in orders}
    running = [_Lane(instances, int(capacity), entries) for entries in lanes]
    if running[0].status == EXHAUSTED:  # a section holds more than the capacity
        return None, "infeasible", 0
    deadline = time.perf_counter() + time_limit
    budget = node_limit if node_limit is not None else 1 << 62
    first_wins = node_limit is None
    ids = list(range(len(running)))
    workers = min(workers, len(running))
    if multiprocessing.current_process().daemon:  # a daemonic process may not start children
        workers = 1
    head_start = deadline if workers == 1 else min(deadline, time.perf_counter() + HEAD_START)
    status, nodes, g, settled = _drive(running, ids, budget, head_start, first_wins)
    offsets = running[g].decided.offsets() if status == FOUND else None
    if not settled and workers > 1 and time.perf_counter() < deadline:
        status, nodes, g, offsets = _drive_in_processes(running, workers, budget, deadline, first_wins)
    return offsets, {FOUND: "found", EXHAUSTED: "infeasible"}.get(status, "timed_out"), int(nodes)


_INSTANCES: dict[tuple, SearchInstance] = {}


def _cached_instance(first, last, sizes, preordering: str) -> SearchInstance:
    """``SearchInstance`` (read-only once built), kept for the next capacity tried on the same
    buffers: on hundreds of buffers, building the overlap lists costs as much as a search
    of a tenth of a second."""
    key = tuple(np.asarray(v, dtype=np.int64).tobytes() for v in (first, last, sizes)) + (preordering,)
    if key not in _INSTANCES:
        if len(_INSTANCES) >= 16:
            _INSTANCES.clear()
        _INSTANCES[key] = SearchInstance(first, last, sizes, preordering)
    return _INSTANCES[key]
