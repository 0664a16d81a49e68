"""Lowering: a Plan becomes a Program of command queues, as an NPU driver would emit it.

Queues: one compute queue per stream (``stream0``, ``stream1``, ...), plus ``dma.load`` and
``dma.store``. Each queue issues its commands in order. Cross-queue dependencies are
semaphores: a command lists the ids of the commands it waits for (``waits``).

Which waits are emitted (and which are deliberately not):

- a compute waits for the commands that filled its inputs (loads, or producers on other
  streams), and for the DMA commands still touching the regions its outputs overwrite;
- a load waits for every command that uses the previous occupants of its target region
  (their release), and for the spill that put its data in DRAM;
- a store waits for the command that filled the data it stores.

Compute-to-compute reuse of memory across streams gets *no* semaphore: the static plan must
be safe by construction (MindSpore paper, Section 3). The simulator's tagged scratchpad
catches plans that are not.

Every wait points to a command of an earlier (step, phase) with phase load < compute < store,
and every queue is sorted by (step, phase), so a Program from a valid plan cannot deadlock.

DMA commands carry their DRAM-side chunks: ``(offset, bytes)`` pairs of the contiguous
pieces of the transferred view (one chunk for a whole tensor).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from npusim.graph.model import Graph
from npusim.plan.model import Plan

PHASE = {"load": 0, "compute": 1, "store": 2}


@dataclass(frozen=True)
class Access:
    """A command's read or write of one residency's scratchpad region."""

    residency: int
    tensor: int
    offset: int
    size: int


@dataclass(frozen=True)
class Command:
    id: int
    queue: str
    kind: str  # compute | load | store
    step: int
    op: int | None = None
    tensor: int | None = None
    cause: str | None = None
    nbytes: int = 0
    chunks: tuple[tuple[int, int], ...] = ()
    reads: tuple[Access, ...] = ()
    writes: tuple[Access, ...] = ()
    waits: tuple[int, ...] = ()


@dataclass(frozen=True)
class Program:
    graph: str
    queues: dict  # queue name -> tuple of command ids, in issue order
    commands: tuple[Command, ...]
    residency_users: tuple[tuple[int, ...], ...]  # per residency: commands that touch it
    capacity: int
    streams: int

    @property
    def n_commands(self) -> int:
        return len(self.commands)


def lower(plan: Plan, graph: Graph) -> Program:
    residencies = plan.residencies
    by_tensor = defaultdict(list)
    for i, r in enumerate(residencies):
        by_tensor[r.tensor].append(i)

    def residency_at(t: int, s: int) -> int:
        for i in by_tensor[t]:
            if residencies[i].first <= s <= residencies[i].last:
                return i
        raise ValueError(f"tensor {graph.tensors[t].name!r} is not resident at step {s}; validate the plan first")

    def access(i: int) -> Access:
        r = residencies[i]
        return Access(i, r.tensor, r.offset, r.size)

    # Build commands in (step, phase) order without waits, then add waits.
    drafts = []  # (priority, dict)
    for tr in plan.transfers:
        i = residency_at(tr.tensor, tr.step)
        d = dict(queue=f"dma.{tr.kind}", kind=tr.kind, step=tr.step, tensor=tr.tensor, cause=tr.cause,
                 nbytes=tr.size, chunks=((plan.dram.get(tr.tensor, 0), tr.size),),
                 reads=(access(i),) if tr.kind == "store" else (),
                 writes=(access(i),) if tr.kind == "load" else ())
        drafts.append(((tr.step, PHASE[tr.kind], tr.tensor), d))
    for s, op_id in enumerate(plan.order):
        op = graph.ops[op_id]
        d = dict(queue=f"stream{plan.streams[op_id]}", kind="compute", step=s, op=op_id,
                 reads=tuple(access(residency_at(t, s)) for t in dict.fromkeys(op.inputs)),
                 writes=tuple(access(residency_at(t, s)) for t in op.outputs))
        drafts.append(((s, PHASE["compute"], op_id), d))
    drafts.sort(key=lambda x: x[0])

    users = [[] for _ in residencies]
    filler: dict[int, int] = {}  # residency -> command that fills it
    for cid, (_, d) in enumerate(drafts):
        for a in d["reads"] + d["writes"]:
            users[a.residency].append(cid)
        for a in d["writes"]:
            filler.setdefault(a.residency, cid)

    previous = _previous_occupants(residencies)
    last_store_of = {}  # tensor -> latest store command issued so far
    commands = []
    for cid, (_, d) in enumerate(drafts):
        waits = set()
        queue = d["queue"]
        if d["kind"] == "compute":
            for a in d["reads"]:
                f = filler.get(a.residency)
                if f is not None and drafts[f][1]["queue"] != queue:
                    waits.add(f)
            for a in d["writes"]:
                for q in previous[a.residency]:
                    waits.update(u for u in users[q] if drafts[u][1]["kind"] != "compute")
        elif d["kind"] == "load":
            for a in d["writes"]:
                for q in previous[a.residency]:
                    waits.update(users[q])
            if d["tensor"] in last_store_of:
                waits.add(last_store_of[d["tensor"]])
        else:  # store
            for a in d["reads"]:
                f = filler.get(a.residency)
                if f is not None:
                    waits.add(f)
            last_store_of[d["tensor"]] = cid
        waits = {w for w in waits if w < cid}
        commands.append(Command(id=cid, waits=tuple(sorted(waits)), **d))

    queues = defaultdict(list)
    for c in commands:
        queues[c.queue].append(c.id)
    n_streams = max(plan.streams, default=0) + 1
    return Program(graph=graph.name, queues={k: tuple(v) for k, v in sorted(queues.items())},
                   commands=tuple(commands), residency_users=tuple(tuple(u) for u in users),
                   capacity=plan.capacity, streams=n_streams)


def _previous_occupants(residencies) -> list[list[int]]:
    """For each residency, the residencies that held any of its bytes just before it.

    Only the latest occupants of each byte range are kept: earlier ones were released before
    those were filled (transitively, for a safe plan).
    """
    n = len(residencies)
    first = np.array([r.first for r in residencies], dtype=np.int64)
    last = np.array([r.last for r in residencies], dtype=np.int64)
    lo = np.array([r.offset for r in residencies], dtype=np.int64)
    hi = lo + np.array([r.size for r in residencies], dtype=np.int64)
    previous: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        mask = (last < first[i]) & (lo < hi[i]) & (lo[i] < hi)
        candidates = np.flatnonzero(mask)
        if candidates.size == 0:
            continue
        candidates = candidates[np.argsort(-last[candidates], kind="stable")]
        kept, covered = [], []
        for q in candidates.tolist():
            qlo, qhi = max(int(lo[q]), int(lo[i])), min(int(hi[q]), int(hi[i]))
            if not _is_covered(qlo, qhi, covered):
                kept.append(q)
                covered.append((qlo, qhi))
            if _is_covered(int(lo[i]), int(hi[i]), covered):
                break
        previous[i] = sorted(kept)
    return previous


def _is_covered(lo: int, hi: int, intervals: list[tuple[int, int]]) -> bool:
    cursor = lo
    for a, b in sorted(intervals):
        if a > cursor:
            break
        cursor = max(cursor, b)
        if cursor >= hi:
            return True
    return cursor >= hi
