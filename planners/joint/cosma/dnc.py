"""Solving COSMA part by part: automatic break nodes and stitching (paper §IV).

The paper picks break nodes by hand. Here they are chosen automatically on a topological
order (the warm start's): the order is cut into contiguous segments of about ``part_ops``
ops, each cut placed, within ±50 % of that size, where the fewest bytes of produced tensors
cross it (made before, read after) — the op before the cut is the break node. Segments of a
topological order run one after the other, so each is a part whose predecessors are all in
earlier parts.

Parts are solved in order, each exactly (schedule freedom inside the part, eq. 1–12; first
with the part's order fixed, whose answer warm-starts the free model and stands if that one
times out), with
the state the previous parts left: a tensor a later part reads leaves its part either on chip
— then it is handed over at the same address — or with a DRAM copy. This is where the paper
treats break nodes' outputs as outputs of one sub-graph and inputs of the next; handing them
over on chip instead of forcing a store and a load lets the stitched plan avoid that traffic
when the budget allows (e.g. at M_P). The result is not globally optimal: ops never move
across parts, and each part optimises without seeing the next — its status is ``feasible``
(``timed_out`` when a part hit its share of the limit), except that a plan with no spill or
retrieve at all is ``optimal`` whatever its parts did: no plan moves fewer bytes.

``solve_sequence`` is also what ``cosma`` runs with a single part (the whole graph).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from npusim.graph.model import Graph
from planners.joint.cosma.model import DEFAULT_OVERLAP, Actions, solve_part
from planners.joint.cosma.overlap import analyse
from planners.joint.cosma.plan import exit_state
from planners.joint.cosma.problem import CosmaPart, make_part, planned_tensors, size_unit
from planners.joint.cosma.warm import best_warm_start
from planners.schedule.solver import SolverOptions, note_guard

DEFAULT_PART_OPS = 40
#: (tensor, step) cells above which a part's op windows are narrowed around the warm order.
DEFAULT_MAX_CELLS = 20_000
#: Wall-clock mode: below this many seconds per remaining part, parts take their warm start
#: without building a model (building one costs about this much), so the call ends near its limit.
MIN_PART_SECONDS = 0.25
#: Deterministic mode: below this many deterministic units per part (the limit split evenly),
#: no part gets a model: CP-SAT's load and presolve of a 20 k-cell part take about a wall
#: second that its deterministic clock does not count, so hundreds of tiny shares would run
#: for minutes and find nothing. Decided from the limit and the part count only: repeatable.
MIN_PART_UNITS = 0.05
#: Wall-clock mode: the share of the time limit kept back for the work after the last part's
#: solve (stitching, the plan, validation), so the whole call stays within its limit.
STITCH_MARGIN = 0.1


def crossing_bytes(graph: Graph, order: list[int], tensors: set[int]) -> list[int]:
    """cut[i] = bytes of tensors made before position i and read at or after it."""
    n = len(order)
    pos = {v: s for s, v in enumerate(order)}
    delta = [0] * (n + 2)
    for t in tensors:
        tensor = graph.tensors[t]
        if tensor.producer is None or not tensor.consumers:
            continue
        p, q = pos[tensor.producer], max(pos[c] for c in tensor.consumers)
        delta[p + 1] += tensor.size
        delta[q + 1] -= tensor.size
    cut, acc = [], 0
    for i in range(n + 1):
        acc += delta[i]
        cut.append(acc)
    return cut


def choose_cuts(cut: list[int], n: int, part_ops: int) -> list[int]:
    """Cut positions (exclusive segment ends), each within ±50 % of ``part_ops`` after the last."""
    cuts, start = [], 0
    lo_len, hi_len = max(1, part_ops // 2), max(1, part_ops + part_ops // 2)
    while n - start > hi_len:
        window = range(start + lo_len, min(n - lo_len, start + hi_len) + 1)
        best = min(window, key=lambda i: (cut[i], abs(i - start - part_ops), i))
        cuts.append(best)
        start = best
    return cuts + [n]


@dataclass
class SequenceResult:
    solved: list[tuple[CosmaPart, Actions]]
    status: str  # optimal | feasible | timed_out
    objective: int
    bound: int  # a lower bound valid for this order of parts' problems (0 if unknown)
    seconds: float
    stats: dict = field(default_factory=dict)


def solve_sequence(graph: Graph, segments: list[list[int]], capacity: int, align: int, params: bool,
                   opts: SolverOptions, *, fixed: bool = False, overlap: str = DEFAULT_OVERLAP,
                   max_cells: int = DEFAULT_MAX_CELLS, extra_orders: list[list[int]] | None = None,
                   unit: int | None = None) -> SequenceResult:
    """Solve the parts (each a list of graph ops in a topological order) one after the other.

    ``fixed``: keep every part's order (COSMA-FS). Otherwise each part's schedule is free
    inside its ASAP/ALAP windows, narrowed around the given order (status at best
    ``feasible``) when the model would exceed ``max_cells`` (tensor, step) cells.
    ``extra_orders`` (single part only): further warm-start orders to try."""
    start = time.perf_counter()
    unit = unit or size_unit(graph, planned_tensors(graph, params), align)
    state: dict = {}
    solved = []
    statuses, objective, bound, narrowed, cells, variables = [], 0, 0, 0, 0, 0
    for k, ops in enumerate(segments):
        later = {v for seg in segments[k + 1:] for v in seg}
        part = make_part(graph, ops, capacity, align, params, state, later, unit)
        local = list(range(part.steps))
        orders = [local] + [[ops.index(v) for v in o] for o in (extra_orders or []) if len(segments) == 1]
        warm = best_warm_start(part, orders)
        solve_budget = opts.time_limit if opts.deterministic else opts.time_limit * (1 - STITCH_MARGIN)
        left = solve_budget - (time.perf_counter() - start)
        guarded = opts.deterministic and opts.deadline is not None and time.perf_counter() > opts.deadline
        if guarded:  # the wall-clock guard has passed: no more models, as when the limit is spent
            note_guard(f"cosma-dnc at part {k + 1} of {len(segments)} after {time.perf_counter() - start:.1f} s")
        if guarded or (opts.deterministic and opts.time_limit / len(segments) < MIN_PART_UNITS) or (
                not opts.deterministic and left / (len(segments) - k) < MIN_PART_SECONDS):
            # time is up (or too thin to use): no model is built, the warm start stands for this part
            statuses.append("timed_out")
            objective += warm.traffic(part)
            state = exit_state(part, warm, state)
            solved.append((part, warm))
            continue
        win = analyse(part, warm.order, fixed=fixed)
        if not fixed and win.cells() > max_cells:
            for radius in (16, 8, 4, 2, 1, 0):
                win = analyse(part, warm.order, radius=radius)
                if win.cells() <= max_cells:
                    break
            narrowed += 1
        cells += win.cells()
        # deterministic time is split in fixed shares (the same answer under any load);
        # wall time by what is left
        share = opts.time_limit / len(segments) if opts.deterministic else max(left, 0.0) / (len(segments) - k)
        if not fixed:  # the part's order fixed first (fast): a better hint, and a fallback
            fs_win = analyse(part, warm.order, fixed=True)
            fs = solve_part(part, fs_win, opts.with_limit(share / 3), warm, overlap)
            if fs is not None and fs.objective <= warm.traffic(part):
                warm = fs.actions
            if opts.deterministic:
                share -= share / 3
            else:
                share -= time.perf_counter() - start - (solve_budget - left)
        result = solve_part(part, win, opts.with_limit(share), warm, overlap)
        if result is None or result.objective > warm.traffic(part):
            actions, status = warm, "timed_out"
            part_bound = 0 if result is None else result.bound
            objective += warm.traffic(part)
        else:
            actions, status, part_bound = result.actions, result.status, result.bound
            objective += result.objective
            variables += result.variables
        statuses.append(status)
        bound += part_bound
        state = exit_state(part, actions, state)
        solved.append((part, actions))
    if objective == 0:
        status = "optimal"  # no spill or retrieve at all: no plan moves fewer bytes
    elif "timed_out" in statuses:
        status = "timed_out"
    elif len(segments) > 1 or narrowed:
        status = "feasible"  # each part optimal, the stitched whole a heuristic
    else:
        status = "optimal"
    exact = len(segments) == 1 and not narrowed
    stats = dict(parts=len(segments), narrowed_parts=narrowed, cells=cells, variables=variables,
                 part_statuses=statuses)
    return SequenceResult(solved, status, objective, bound if exact else 0, time.perf_counter() - start, stats)
