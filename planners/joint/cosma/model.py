"""The COSMA ILP (eq. 1–12; FS eq. 16–17) for one part, in CP-SAT.

Variables per tensor a and step t inside a's window (``cosma.overlap``): ``X[v, t]`` op v runs
at t (the creation variable C of all v's outputs, so siblings are created together, eq. 6);
``C[a, t]`` the compulsory first load of an input or weight; ``P`` preserved, ``S`` spilled
(stored after step t-1, off chip at t), ``R`` retrieved (loaded before op t); ``res = C+P+R``;
``L[a, t]`` its address (units). Constraints (paper numbering):

- (1) C + P + S + R <= 1; (2) P_t <= res_{t-1}; (3) S_t <= C_{t-1} + P_{t-1};
  (4) R_t <= Σ_{k<=t} S_k (for data DRAM has no copy of); (5) an op's inputs are P or R
  (or, for inputs and weights, loaded now) when it runs; (7) one creation; (8) one spill;
- (9) L + size <= budget; (11) P_t => L_t = L_{t-1} (the paper's V_{a,t} is exactly P_{a,t}
  here, since (2) makes its other conditions redundant); (10) resident pairs do not overlap;
- (12) minimise Σ (S + R)·size in bytes.

Dominance restrictions that keep every optimum (they only drop useless choices): loads
(compulsory or retrieve) happen only at a step where a reader runs; a tensor is freed after
its last reader (``liveness``), which is what lets the overlap analysis drop pairs by
precedence. A part of divide-and-conquer may also spill and reload a tensor it inherited at
its first step (a relocation through DRAM, which (1) forbids elsewhere).

Non-overlap (10) has three encodings (option ``overlap``):

- ``nooverlap`` (default): per step, an optional interval [L, L+size) per tensor, present
  iff resident, in a 1-D ``AddNoOverlap``;
- ``nooverlap2d``: one optional box per (tensor, step) — x = [t, t+1), y = [L, L+size),
  present iff resident — and a single ``AddNoOverlap2D``;
- ``bigm``: the paper's, literally: u, d binaries per coexisting pair and step, big-M rows.

``benchmarks/bench_cosma.py`` times all three on the same models. The per-step 1-D interval
form is the default because it was the fastest there (e.g. resnet50 at M_R with weights:
0.7 s vs 1.7 s big-M and 5.6 s NoOverlap2D for ``cosma``): CP-SAT propagates the intervals
directly, the model has no u/d variables, and the 2-D constraint's energy reasoning does not
pay off when every box is one step wide.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from planners.schedule.cp import add_hints, cp_model

from npusim.errors import PlanningError
from planners.joint.cosma.overlap import Windows, coexisting_pairs
from planners.joint.cosma.problem import COMPULSORY, MAKE, RESIDENT, CosmaPart
from planners.schedule.solver import SolverOptions, check_model_size, has_solution, make_solver, status_name

OVERLAP_ENCODINGS = ("nooverlap2d", "bigm", "nooverlap")
DEFAULT_OVERLAP = "nooverlap"


@dataclass
class Actions:
    """A solution of one part (or a hint): the order and every tensor's state per step."""

    order: list[int]  # local op ids in step order
    cells: dict = field(default_factory=dict)  # (a, t) -> (action 'C' | 'P' | 'R', offset in units)
    spills: set = field(default_factory=set)  # (a, t): stored after step t-1, off chip from t

    def traffic(self, part: CosmaPart) -> int:
        """Non-compulsory bytes: spills plus retrieves."""
        return (sum(part.nbytes[a] for a, _ in self.spills)
                + sum(part.nbytes[a] for (a, _), (act, _) in self.cells.items() if act == "R"))


@dataclass
class PartResult:
    actions: Actions
    status: str  # optimal | timed_out
    objective: int
    bound: int
    seconds: float
    variables: int


class _Maker:
    """Variables and sums written to a model's proto as ``new_bool_var``, ``new_int_var`` and
    ``sum`` would, for less: one shared Domain instead of a new one a variable, no
    deprecated-name wrapper, and one ``LinearExpr.sum`` call instead of a chain of partial
    sums. CP-SAT canonicalises a linear constraint (terms sorted by variable, duplicates
    merged), so the proto is byte-identical; models have hundreds of thousands of variables."""

    def __init__(self, m) -> None:
        self.proto, self.var = m.model_proto, cp_model.IntVar
        self.boolean = cp_model.Domain(0, 1)
        self.ranges: dict[int, object] = {}
        self.linear_sum = cp_model.LinearExpr.sum

    def bool_var(self, name: str):
        return self.var(self.proto).with_name(name).with_domain(self.boolean)

    def int_var(self, ub: int, name: str):
        """An integer variable of domain [0, ub]."""
        domain = self.ranges.get(ub)
        if domain is None:
            domain = self.ranges[ub] = cp_model.Domain(0, ub)
        return self.var(self.proto).with_name(name).with_domain(domain)

    def sum(self, terms: list):
        """What ``sum(terms)`` gives a constraint: 0 when empty, the term itself when alone
        (as ``LinearExpr.sum`` returns it, without the call)."""
        if len(terms) == 1:
            return terms[0]
        return self.linear_sum(terms) if terms else 0


class CosmaModel:
    """The CP-SAT model of one part under the given windows."""

    def __init__(self, part: CosmaPart, win: Windows, overlap: str = DEFAULT_OVERLAP):
        if overlap not in OVERLAP_ENCODINGS:
            raise PlanningError(f"cosma: overlap={overlap!r}, expected one of {OVERLAP_ENCODINGS}")
        too_big = [a for a in range(part.n_tensors) if part.size[a] > part.capacity and win.tensor[a][1] >= win.tensor[a][0]]
        if too_big:
            raise PlanningError(f"cosma: a tensor of {part.size[too_big[0]] * part.unit} B does not fit the "
                                f"{part.capacity * part.unit} B budget")
        self.part, self.win, self.overlap = part, win, overlap
        m = self.m = cp_model.CpModel()
        make = self.make = _Maker(m)
        n = part.steps
        self.fixed = all(lo == hi for lo, hi in win.op)
        true = make.bool_var("true")
        m.add(true == 1)
        X = self.X = {}
        for v, (lo, hi) in enumerate(win.op):
            for t in range(lo, hi + 1):
                X[v, t] = true if self.fixed else make.bool_var(f"X{v}_{t}")
        if not self.fixed:
            for v, (lo, hi) in enumerate(win.op):
                m.add_exactly_one([X[v, t] for t in range(lo, hi + 1)])  # (7) for ops
            for t in range(n):
                m.add_exactly_one([X[v, t] for v in range(n) if (v, t) in X])  # one op per step
        self.C, self.P, self.S, self.R, self.res, self.L = {}, {}, {}, {}, {}, {}
        self._tensors()
        self._inputs_present()
        self._memory()
        costly = list(self.S.items()) + list(self.R.items())
        m.minimize(cp_model.LinearExpr.weighted_sum([x for _, x in costly], [part.nbytes[a] for (a, _), _ in costly])
                   if costly else 0)  # (12)

    # -- per-tensor actions (1)-(4), (7), (8) -------------------------------------------------
    def _tensors(self) -> None:
        p, m, n = self.part, self.m, self.part.steps
        add, new_bool, total = m.add, self.make.bool_var, self.make.sum
        X, C, P, S, R, RES = self.X, self.C, self.P, self.S, self.R, self.res
        ready_after = p.ready_after or ((),) * p.n_tensors
        for a in range(p.n_tensors):
            lo, hi = self.win.tensor[a]
            if hi < lo:
                continue
            st = p.entry[a]
            made, compulsory, resident = st == MAKE, st == COMPULSORY, st == RESIDENT
            store = p.must_store(a)
            producer, consumers = p.producer[a], p.consumers[a]
            loads, rows = [], []  # rows: (C, R, P, S, res) of a per step from lo, None where absent
            for t in range(lo, hi + 1):
                readers = [X[c, t] for c in consumers if (c, t) in X]
                read = total(readers)  # what a load at t is bounded by (0: no reader runs)
                parts = []
                c = r = kept = spill = None
                if made and (producer, t) in X:
                    c = C[a, t] = X[producer, t]
                    parts.append(c)
                if compulsory and readers:
                    c = C[a, t] = new_bool(f"C{a}_{t}")
                    add(c <= read)  # loads only where a reader runs
                    loads.append(c)
                    parts.append(c)
                if readers and (not made or t > lo):
                    r = R[a, t] = new_bool(f"R{a}_{t}")
                    add(r <= read)
                    parts.append(r)
                if t > lo or resident:
                    kept = P[a, t] = new_bool(f"P{a}_{t}")
                    parts.append(kept)
                    if store:
                        spill = S[a, t] = new_bool(f"S{a}_{t}")
                res = RES[a, t] = new_bool(f"res{a}_{t}")
                add(res == total(parts))
                if spill is not None:  # (1); an inherited tensor may be spilled and reloaded at step 0
                    if resident and t == 0:
                        add(spill + kept <= 1)
                    else:
                        add(spill + res <= 1)
                rows.append((c, r, kept, spill, res))
            spilled, loaded = [], []  # S[a, k] for k <= t; C[a, k] for k < t
            before = (None,) * 5  # the row of step t - 1
            for t, row in enumerate(rows, lo):
                c, retrieve, kept, spill, _ = row
                inherited = resident and t == 0
                if spill is not None:
                    spilled.append(spill)
                if kept is not None and not inherited:
                    add(kept <= before[4])  # (2)
                if spill is not None and not inherited:
                    made_or_kept = [x for x in (before[0], before[2]) if x is not None]
                    add(spill <= total(made_or_kept)) if made_or_kept else add(spill == 0)  # (3)
                if retrieve is not None:  # (4); a view of tiles: only once the ops writing them ran
                    for u in ready_after[a]:
                        add(retrieve <= total([X[u, k] for k in range(t) if (u, k) in X]))
                    if store:
                        add(retrieve <= total(spilled))
                    elif compulsory:
                        add(retrieve <= total(loaded))
                if compulsory and c is not None:
                    loaded.append(c)
                before = row
            if compulsory:
                m.add_exactly_one(loads)  # (7) for data loaded from DRAM
            if spilled:
                add(total(spilled) <= 1)  # (8)
            if p.needed_after[a] and store:  # leave the part on chip or with a DRAM copy
                add(RES[a, n - 1] + total(spilled) >= 1)
            if not self.fixed and not p.needed_after[a]:
                self._liveness(a, lo, hi)

    def _liveness(self, a: int, lo: int, hi: int) -> None:
        """Free a tensor after its last reader (its producer, if it has none)."""
        p, X, op = self.part, self.X, self.win.op
        users = p.consumers[a] or ((p.producer[a],) if p.producer[a] >= 0 else ())
        if not users:
            return
        runs = [(op[u][0], [X[u, s] for s in range(op[u][0], op[u][1] + 1)]) for u in users]
        add, total, res = self.m.add, self.make.sum, self.res
        for t in range(lo, hi + 1):
            later = [x for first, xs in runs for x in xs[max(t - first, 0):]]  # u runs at t or after
            add(res[a, t] <= total(later))

    def _inputs_present(self) -> None:
        """(5): when op v runs at t, each input is kept, retrieved or loaded for the first time."""
        p, P, R, C = self.part, self.P, self.R, self.C
        add, total = self.m.add, self.make.sum
        for (v, t), x in self.X.items():
            for b in p.op_inputs[v]:
                present = [d[b, t] for d in (P, R) if (b, t) in d]
                if p.entry[b] == COMPULSORY and (b, t) in C:
                    present.append(C[b, t])
                add(x <= total(present)) if present else add(x == 0)

    # -- addresses (9)-(11) ----------------------------------------------------------------
    def _memory(self) -> None:
        p, m, cap = self.part, self.m, self.part.capacity
        int_var, L, RES = self.make.int_var, self.L, self.res
        for (a, t) in RES:
            L[a, t] = int_var(cap - p.size[a], f"L{a}_{t}")  # (9)
        for (a, t), keep in self.P.items():  # (11)
            if p.entry[a] == RESIDENT and t == 0:
                m.add(L[a, t] == p.entry_offset[a]).only_enforce_if(keep)
            else:
                m.add(L[a, t] == L[a, t - 1]).only_enforce_if(keep)
        by_step: dict[int, list[int]] = {}
        for (a, t) in RES:
            by_step.setdefault(t, []).append(a)
        weighted_sum = cp_model.LinearExpr.weighted_sum
        for t, tensors in by_step.items():  # the footprint never exceeds the budget (a valid cut)
            m.add(weighted_sum([RES[a, t] for a in tensors], [p.size[a] for a in tensors]) <= cap)
        interval = m.new_optional_fixed_size_interval_var
        if self.overlap == "nooverlap":
            for t, tensors in by_step.items():
                m.add_no_overlap([interval(L[a, t], p.size[a], RES[a, t], f"y{a}_{t}") for a in tensors])
            self.U = {}
            return
        if self.overlap == "nooverlap2d":
            xs, ys = [], []
            for (a, t), res in RES.items():
                xs.append(interval(t, 1, res, f"x{a}_{t}"))
                ys.append(interval(L[a, t], p.size[a], res, f"y{a}_{t}"))
            m.add_no_overlap_2d(xs, ys)
            self.U = {}
            return
        self.U = {}
        big = cap
        for a, b in coexisting_pairs(p, self.win):
            lo = max(self.win.tensor[a][0], self.win.tensor[b][0])
            hi = min(self.win.tensor[a][1], self.win.tensor[b][1])
            for t in range(lo, hi + 1):
                u, d = m.new_bool_var(f"u{a}_{b}_{t}"), m.new_bool_var(f"d{a}_{b}_{t}")
                self.U[a, b, t] = (u, d)
                m.add(u + d <= 1)
                m.add(u + d >= RES[a, t] + RES[b, t] - 1)
                m.add(L[a, t] + p.size[a] - L[b, t] <= big * (1 - d))
                m.add(L[b, t] + p.size[b] - L[a, t] <= big * (1 - u))

    # -- hints and answers -----------------------------------------------------------------
    def hint(self, actions: Actions) -> None:
        add_hints(self.m, self._hints(actions))

    def _hints(self, actions: Actions):
        """(variable, value) of the warm start ``actions``, every variable once."""
        pos = {v: s for s, v in enumerate(actions.order)}
        cells, no_cell = actions.cells, ("", 0)
        if not self.fixed:
            for (v, t), x in self.X.items():
                yield x, pos[v] == t
        for (a, t), x in self.C.items():
            if self.part.entry[a] == COMPULSORY:  # made tensors share X's literal, hinted above
                yield x, cells.get((a, t), no_cell)[0] == "C"
        for d, tag in ((self.P, "P"), (self.R, "R")):
            for key, x in d.items():
                yield x, cells.get(key, no_cell)[0] == tag
        for key, x in self.S.items():
            yield x, key in actions.spills
        for key, x in self.res.items():
            yield x, key in cells
        for key, x in self.L.items():
            cell = cells.get(key)
            yield x, cell[1] if cell else 0
        for (a, b, t), (u, d) in self.U.items():
            ca, cb = cells.get((a, t)), cells.get((b, t))
            both = ca is not None and cb is not None
            yield u, both and ca[1] > cb[1]
            yield d, both and ca[1] < cb[1]

    def decode(self, solver: cp_model.CpSolver) -> Actions:
        """The solution's actions, read from the response's values at once (what
        ``solver.boolean_value`` and ``solver.value`` read, one call each)."""
        values = list(solver.response_proto.solution)
        order = [None] * self.part.steps
        for (v, t), x in self.X.items():
            if values[x.index]:
                order[t] = v
        actions = Actions(order=order)
        C, R, L = self.C, self.R, self.L
        for (a, t), res in self.res.items():
            if not values[res.index]:
                continue
            if (a, t) in C and values[C[a, t].index]:
                act = "C"
            elif (a, t) in R and values[R[a, t].index]:
                act = "R"
            else:
                act = "P"
            actions.cells[a, t] = (act, values[L[a, t].index])
        actions.spills = {key for key, x in self.S.items() if values[x.index]}
        return actions

    def n_variables(self) -> int:
        return len(self.m.Proto().variables)


#: A (tensor, step) cell has a residency boolean and an address: a lower bound on the model.
MIN_VARIABLES_PER_CELL = 2


def solve_part(part: CosmaPart, win: Windows, opts: SolverOptions, hint: Actions | None,
               overlap: str = DEFAULT_OVERLAP) -> PartResult | None:
    """Solve one part; None when CP-SAT found no solution within the time limit."""
    start = time.perf_counter()
    instead = "'cosma-dnc' with a smaller part_ops, or a scheme heuristic such as 'default+arena+belady'"
    # Every cell has at least a residency and an address variable: refuse before building
    # a model CP-SAT would need gigabytes for (15 M variables took 14 GB).
    if MIN_VARIABLES_PER_CELL * win.cells() > opts.max_variables:
        raise PlanningError(
            f"cosma (part ILP): the model would have {win.cells():,} (tensor, step) cells, at least "
            f"{MIN_VARIABLES_PER_CELL * win.cells():,} variables, above max_variables = {opts.max_variables:,}; "
            f"use {instead}, or raise the limit with --option max_variables=N")
    model = CosmaModel(part, win, overlap)
    # max_cells bounds the windows; this bounds the model whatever the user raised it to.
    check_model_size(model.m, opts, "cosma (part ILP)", instead)
    if hint is not None:
        model.hint(hint)
    solver = make_solver(opts, started=start)
    code = solver.Solve(model.m)
    seconds = time.perf_counter() - start
    if not has_solution(code):
        return None
    actions = model.decode(solver)
    objective = int(round(solver.ObjectiveValue()))
    bound = int(round(solver.BestObjectiveBound())) if code != cp_model.OPTIMAL else objective
    # Traffic is never negative: CP-SAT's early bound can be (objective offsets).
    return PartResult(actions, status_name(code), objective, max(0, min(bound, objective)), seconds, model.n_variables())
