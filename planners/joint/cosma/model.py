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
        n = part.steps
        self.fixed = all(lo == hi for lo, hi in win.op)
        true = m.NewBoolVar("true")
        m.Add(true == 1)
        self.X = {}
        for v, (lo, hi) in enumerate(win.op):
            for t in range(lo, hi + 1):
                self.X[v, t] = true if self.fixed else m.NewBoolVar(f"X{v}_{t}")
        if not self.fixed:
            for v, (lo, hi) in enumerate(win.op):
                m.AddExactlyOne([self.X[v, t] for t in range(lo, hi + 1)])  # (7) for ops
            for t in range(n):
                m.AddExactlyOne([self.X[v, t] for v in range(n) if (v, t) in self.X])  # one op per step
        self.C, self.P, self.S, self.R, self.res, self.L = {}, {}, {}, {}, {}, {}
        self._tensors()
        self._inputs_present()
        self._memory()
        cost = [self.part.nbytes[a] * x for (a, _), x in list(self.S.items()) + list(self.R.items())]
        self.objective = sum(cost) if cost else 0
        m.Minimize(self.objective)  # (12)

    # -- per-tensor actions (1)-(4), (7), (8) -------------------------------------------------
    def _readers_at(self, a: int, t: int) -> list:
        return [self.X[c, t] for c in self.part.consumers[a] if (c, t) in self.X]

    def _tensors(self) -> None:
        p, m, n = self.part, self.m, self.part.steps
        for a in range(p.n_tensors):
            lo, hi = self.win.tensor[a]
            if hi < lo:
                continue
            st = p.entry[a]
            store = p.must_store(a)
            loads = []
            for t in range(lo, hi + 1):
                readers = self._readers_at(a, t)
                parts = []
                if st == MAKE and (p.producer[a], t) in self.X:
                    self.C[a, t] = self.X[p.producer[a], t]
                    parts.append(self.C[a, t])
                if st == COMPULSORY and readers:
                    self.C[a, t] = m.NewBoolVar(f"C{a}_{t}")
                    m.Add(self.C[a, t] <= sum(readers))  # loads only where a reader runs
                    loads.append(self.C[a, t])
                    parts.append(self.C[a, t])
                if readers and (st != MAKE or t > lo):
                    self.R[a, t] = m.NewBoolVar(f"R{a}_{t}")
                    m.Add(self.R[a, t] <= sum(readers))
                    parts.append(self.R[a, t])
                if t > lo or st == RESIDENT:
                    self.P[a, t] = m.NewBoolVar(f"P{a}_{t}")
                    parts.append(self.P[a, t])
                if store and (t > lo or st == RESIDENT):
                    self.S[a, t] = m.NewBoolVar(f"S{a}_{t}")
                res = self.res[a, t] = m.NewBoolVar(f"res{a}_{t}")
                m.Add(res == sum(parts)) if parts else m.Add(res == 0)
                if (a, t) in self.S:  # (1); an inherited tensor may be spilled and reloaded at step 0
                    if st == RESIDENT and t == 0:
                        m.Add(self.S[a, t] + self.P[a, t] <= 1)
                    else:
                        m.Add(self.S[a, t] + res <= 1)
            for t in range(lo, hi + 1):
                prev = self.res.get((a, t - 1))
                if (a, t) in self.P and not (st == RESIDENT and t == 0):
                    m.Add(self.P[a, t] <= prev)  # (2)
                if (a, t) in self.S and not (st == RESIDENT and t == 0):
                    made_or_kept = [x for x in (self.C.get((a, t - 1)), self.P.get((a, t - 1))) if x is not None]
                    m.Add(self.S[a, t] <= sum(made_or_kept)) if made_or_kept else m.Add(self.S[a, t] == 0)  # (3)
                if (a, t) in self.R:  # (4); a view of tiles: only once the ops writing them ran
                    for u in (p.ready_after[a] if p.ready_after else ()):
                        m.Add(self.R[a, t] <= sum(self.X[u, k] for k in range(t) if (u, k) in self.X))
                    if store:
                        m.Add(self.R[a, t] <= sum(self.S[a, k] for k in range(lo, t + 1) if (a, k) in self.S))
                    elif st == COMPULSORY:
                        m.Add(self.R[a, t] <= sum(self.C[a, k] for k in range(lo, t) if (a, k) in self.C))
            if st == COMPULSORY:
                m.AddExactlyOne(loads)  # (7) for data loaded from DRAM
            spills = [self.S[a, t] for t in range(lo, hi + 1) if (a, t) in self.S]
            if spills:
                m.Add(sum(spills) <= 1)  # (8)
            if p.needed_after[a] and store:  # leave the part on chip or with a DRAM copy
                m.Add(self.res[a, n - 1] + sum(spills) >= 1)
            if not self.fixed and not p.needed_after[a]:
                self._liveness(a, lo, hi)

    def _liveness(self, a: int, lo: int, hi: int) -> None:
        """Free a tensor after its last reader (its producer, if it has none)."""
        p = self.part
        users = p.consumers[a] or ((p.producer[a],) if p.producer[a] >= 0 else ())
        if not users:
            return
        for t in range(lo, hi + 1):
            later = [self.X[u, s] for u in users for s in range(max(t, self.win.op[u][0]), self.win.op[u][1] + 1)]
            self.m.Add(self.res[a, t] <= sum(later))

    def _inputs_present(self) -> None:
        """(5): when op v runs at t, each input is kept, retrieved or loaded for the first time."""
        p = self.part
        for (v, t), x in self.X.items():
            for b in p.op_inputs[v]:
                present = [d[b, t] for d in (self.P, self.R) if (b, t) in d]
                if p.entry[b] == COMPULSORY and (b, t) in self.C:
                    present.append(self.C[b, t])
                if not present:
                    self.m.Add(x == 0)
                else:
                    self.m.Add(x <= sum(present))

    # -- addresses (9)-(11) ----------------------------------------------------------------
    def _memory(self) -> None:
        p, m, cap = self.part, self.m, self.part.capacity
        for (a, t), res in self.res.items():
            self.L[a, t] = m.NewIntVar(0, cap - p.size[a], f"L{a}_{t}")  # (9)
        for (a, t), keep in self.P.items():  # (11)
            if p.entry[a] == RESIDENT and t == 0:
                m.Add(self.L[a, t] == p.entry_offset[a]).OnlyEnforceIf(keep)
            else:
                m.Add(self.L[a, t] == self.L[a, t - 1]).OnlyEnforceIf(keep)
        by_step: dict[int, list[int]] = {}
        for (a, t) in self.res:
            by_step.setdefault(t, []).append(a)
        for t, tensors in by_step.items():  # the footprint never exceeds the budget (a valid cut)
            m.Add(sum(p.size[a] * self.res[a, t] for a in tensors) <= cap)
        if self.overlap == "nooverlap":
            for t, tensors in by_step.items():
                m.AddNoOverlap([m.NewOptionalFixedSizeIntervalVar(self.L[a, t], p.size[a], self.res[a, t], f"y{a}_{t}")
                                for a in tensors])
            self.U = {}
            return
        if self.overlap == "nooverlap2d":
            xs, ys = [], []
            for (a, t), res in self.res.items():
                xs.append(m.NewOptionalFixedSizeIntervalVar(t, 1, res, f"x{a}_{t}"))
                ys.append(m.NewOptionalFixedSizeIntervalVar(self.L[a, t], p.size[a], res, f"y{a}_{t}"))
            m.AddNoOverlap2D(xs, ys)
            self.U = {}
            return
        self.U = {}
        big = cap
        for a, b in coexisting_pairs(p, self.win):
            lo = max(self.win.tensor[a][0], self.win.tensor[b][0])
            hi = min(self.win.tensor[a][1], self.win.tensor[b][1])
            for t in range(lo, hi + 1):
                u, d = m.NewBoolVar(f"u{a}_{b}_{t}"), m.NewBoolVar(f"d{a}_{b}_{t}")
                self.U[a, b, t] = (u, d)
                m.Add(u + d <= 1)
                m.Add(u + d >= self.res[a, t] + self.res[b, t] - 1)
                m.Add(self.L[a, t] + p.size[a] - self.L[b, t] <= big * (1 - d))
                m.Add(self.L[b, t] + p.size[b] - self.L[a, t] <= big * (1 - u))

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
        n = self.part.steps
        order = [None] * n
        for (v, t), x in self.X.items():
            if solver.BooleanValue(x):
                order[t] = v
        actions = Actions(order=order)
        for (a, t), res in self.res.items():
            if not solver.BooleanValue(res):
                continue
            if (a, t) in self.C and solver.BooleanValue(self.C[a, t]):
                act = "C"
            elif (a, t) in self.R and solver.BooleanValue(self.R[a, t]):
                act = "R"
            else:
                act = "P"
            actions.cells[a, t] = (act, solver.Value(self.L[a, t]))
        actions.spills = {key for key, x in self.S.items() if solver.BooleanValue(x)}
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
