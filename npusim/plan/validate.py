"""The independent plan validator.

``validate(plan, graph)`` re-derives everything from the plan and the graph, trusting no
planner, and returns *every* violation found (an empty list means the plan is valid):

==================  ==========================================================================
kind                meaning
==================  ==========================================================================
order               ``order`` is not a topological permutation of the ops
streams             the stream list does not cover every op, or a stream is negative
range               a residency or transfer names a step outside the order
size                a residency is smaller than its tensor
capacity            a residency starts below offset 0 or reaches past the scratchpad capacity
alignment           a residency's offset is not a multiple of the alignment
overlap             two residencies that coexist in time share addresses
empty_residency     a residency that is never filled (neither produced nor loaded into)
not_resident        an op's input or output has no residency at the op's step
not_ready           an op reads a residency before its data arrives
load_without_copy   a load of data that does not exist in DRAM (not an input/weight, never stored)
transfer_residency  a transfer whose tensor has no residency at its step
cause               a transfer's cause does not match what it does
not_written_back    a graph output never reaches DRAM
==================  ==========================================================================

Several streams: steps of different streams do not order ops in time, so residencies on
different streams can coexist even if their steps do not overlap. Until the multi-stream
safety relation is in (MindSpore paper, Section 3), the overlap check treats the plan's step
order as the execution order, which is exact for a single stream.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from npusim.errors import PlanError
from npusim.graph.analysis import check_order, step_of
from npusim.graph.model import Graph
from npusim.plan.model import Plan


@dataclass(frozen=True)
class Violation:
    kind: str
    message: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


def validate(plan: Plan, graph: Graph) -> list[Violation]:
    found: list[Violation] = []

    def report(kind: str, message: str) -> None:
        found.append(Violation(kind, message))

    if plan.graph != graph.name:
        report("order", f"plan is for graph {plan.graph!r}, not {graph.name!r}")
        return found
    try:
        check_order(graph, list(plan.order))
    except PlanError as exc:
        report("order", str(exc))
        return found  # steps are meaningless without a valid order
    if len(plan.streams) != graph.n_ops:
        report("streams", f"streams lists {len(plan.streams)} entries; expected a stream >= 0 for "
                          f"each of the {graph.n_ops} ops")
    for op, s in zip(graph.ops, plan.streams):
        if s < 0:
            report("streams", f"op {op.name!r}: stream {s} is negative, expected >= 0")

    n = plan.n_steps
    name = lambda t: graph.tensors[t].name  # noqa: E731
    by_tensor = defaultdict(list)
    residencies = [r for r in plan.residencies if _known_tensor(r.tensor, graph, "residency", report)]
    for r in residencies:
        where = f"residency of {name(r.tensor)!r} at [{r.offset}, {r.offset + r.size}) steps {r.first}..{r.last}"
        if not (0 <= r.first <= r.last < n):
            report("range", f"{where}: steps must satisfy 0 <= first <= last < {n}")
            continue
        if r.size < graph.tensors[r.tensor].size:
            report("size", f"{where}: size {r.size} < tensor size {graph.tensors[r.tensor].size}")
        if r.offset < 0:
            report("capacity", f"{where}: offset {r.offset} < 0, before the start of the scratchpad")
        if r.offset + r.size > plan.capacity:
            report("capacity", f"{where}: ends at {r.offset + r.size} > capacity {plan.capacity}")
        if r.offset % plan.alignment:
            report("alignment", f"{where}: offset {r.offset} is not a multiple of {plan.alignment}")
        by_tensor[r.tensor].append(r)
    _check_overlaps(residencies, name, report)

    loads, stores = defaultdict(list), defaultdict(list)
    for tr in plan.transfers:
        if not _known_tensor(tr.tensor, graph, tr.kind, report):
            continue
        if tr.kind not in ("load", "store"):
            report("cause", f"transfer of {name(tr.tensor)!r} at step {tr.step}: kind {tr.kind!r}, expected load or store")
            continue
        if not 0 <= tr.step < n:
            report("range", f"{tr.kind} of {name(tr.tensor)!r} at step {tr.step}: outside 0..{n - 1}")
            continue
        (loads if tr.kind == "load" else stores)[tr.tensor].append(tr)

    step = step_of(list(plan.order))
    fill = {}  # residency -> step its data is valid from
    for t, rs in by_tensor.items():
        tensor = graph.tensors[t]
        p = None if tensor.producer is None else int(step[tensor.producer])
        for r in rs:
            candidates = [tr.step for tr in loads.get(t, ()) if r.first <= tr.step <= r.last]
            if p is not None and r.first <= p <= r.last:
                candidates.append(p)
            if candidates:
                fill[r] = min(candidates)
            elif r.first <= r.last:
                report("empty_residency",
                       f"residency of {name(t)!r} at offset {r.offset}, steps {r.first}..{r.last}: "
                       "never filled (not produced or loaded within it)")

    def residency_at(t: int, s: int):
        return next((r for r in by_tensor.get(t, ()) if r.first <= s <= r.last), None)

    for s, op_id in enumerate(plan.order):
        op = graph.ops[op_id]
        for t in dict.fromkeys(op.inputs):
            r = residency_at(t, s)
            if r is None:
                report("not_resident", f"op {op.name!r} at step {s}: input {name(t)!r} is not resident")
            elif r in fill and fill[r] > s:
                report("not_ready", f"op {op.name!r} at step {s}: input {name(t)!r} arrives only at step {fill[r]}")
        for t in op.outputs:
            if residency_at(t, s) is None:
                report("not_resident", f"op {op.name!r} at step {s}: output {name(t)!r} has no residency")

    for t, trs in loads.items():
        if not trs:
            continue
        tensor = graph.tensors[t]
        first_load = min(tr.step for tr in trs)
        for tr in trs:
            where = f"load of {name(t)!r} at step {tr.step}"
            if residency_at(t, tr.step) is None:
                report("transfer_residency", f"{where}: the tensor has no residency to load into")
            if tensor.in_dram_initially:
                expected = "compulsory" if tr.step == first_load else "retrieve"
            else:
                expected = "retrieve"
                if not any(st.step < tr.step for st in stores.get(t, ())):
                    report("load_without_copy", f"{where}: {name(t)!r} was never stored to DRAM before")
            if tr.cause != expected:
                report("cause", f"{where}: cause {tr.cause!r}, expected {expected!r}")
    for t, trs in stores.items():
        tensor = graph.tensors[t]
        for tr in trs:
            where = f"store of {name(t)!r} at step {tr.step}"
            r = residency_at(t, tr.step)
            if r is None:
                report("transfer_residency", f"{where}: the tensor is not resident to store from")
            elif r in fill and fill[r] > tr.step:
                report("not_ready", f"{where}: the data arrives only at step {fill[r]}")
            expected = {"output": "writeback", "activation": "spill"}.get(tensor.kind)
            if expected is None:
                report("cause", f"{where}: {tensor.kind} tensors are already in DRAM")
            elif tr.cause != expected:
                report("cause", f"{where}: cause {tr.cause!r}, expected {expected!r}")
    for tensor in graph.tensors:
        if tensor.kind == "output" and not any(tr.cause == "writeback" for tr in stores.get(tensor.id, ())):
            report("not_written_back", f"graph output {tensor.name!r} is never written back to DRAM")
    return found


def _known_tensor(t, graph: Graph, what: str, report) -> bool:
    if isinstance(t, int) and 0 <= t < graph.n_tensors:
        return True
    report("range", f"{what} names tensor id {t!r}, but the graph has tensors 0..{graph.n_tensors - 1}")
    return False


def _check_overlaps(residencies, name, report) -> None:
    """Sweep residencies by first step; compare each with those still live (time × address)."""
    active: list = []
    for r in sorted(residencies):
        if r.first > r.last:
            continue
        active = [a for a in active if a.last >= r.first]
        for a in active:
            if a.offset < r.offset + r.size and r.offset < a.offset + a.size:
                report("overlap",
                       f"{name(a.tensor)!r} [{a.offset}, {a.offset + a.size}) steps {a.first}..{a.last} "
                       f"overlaps {name(r.tensor)!r} [{r.offset}, {r.offset + r.size}) steps {r.first}..{r.last}")
        active.append(r)


def require_valid(plan: Plan, graph: Graph, source: str = "plan") -> None:
    """Raise PlanError listing every violation (at most 20 shown) unless the plan is valid."""
    found = validate(plan, graph)
    if found:
        shown = "\n  ".join(str(v) for v in found[:20])
        more = f"\n  ... and {len(found) - 20} more" if len(found) > 20 else ""
        raise PlanError(f"{source}: {len(found)} violation(s):\n  {shown}{more}")
