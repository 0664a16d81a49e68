"""Lowering: a Plan becomes a Program of command queues, as an NPU driver would emit it.

Queues: one compute queue per stream (``stream0``, ``stream1``, ...), plus ``dma.load`` and
``dma.store``. Each queue issues its commands in order. Cross-queue dependencies are
semaphores: a command lists the ids of the commands it waits for (``waits``).

Which waits are emitted (and which are deliberately not):

- a compute waits for the commands that filled its inputs (loads, or producers on other
  streams), and for the DMA commands still touching the regions its outputs overwrite;
- a load waits for every command that uses the previous occupants of its target region
  (their release), and for the spill that put its data in DRAM;
- a store waits for the command that filled the data it stores; with a DRAM layout
  (``plan.dram``), also for the compute of its own step, so it runs after the op at its
  step as the plan says and after every load read by an earlier op: DRAM an earlier load
  still reads is never overwritten (what the off-chip planners' lifetimes assume).

Some waits are *streamed* (``Command.streamed``): the waiter may start once the first band of
the command it waits for is done, as an NPU overlaps a transfer with the op it feeds band by
band (``npusim.sim.engine``): a compute's wait for a load that fills one of its inputs, and a
store's wait for the compute at its own step that produced what it stores. With a DRAM
layout a store also waits for the loads of its step to end (not streamed), so it cannot
overwrite DRAM a load of the same step is still reading.

Compute-to-compute reuse of memory across streams gets *no* semaphore: the static plan must
be safe by construction (MindSpore paper, Section 3). The simulator's tagged scratchpad
catches plans that are not.

Every wait points to a command of an earlier (step, phase) with phase load < compute < store,
and every queue is sorted by (step, phase), so a Program from a valid plan cannot deadlock.

DMA commands carry their DRAM-side view (``DramView``) in the storage order of the config's
``dram.layout`` (``npusim.plan.layout``); ``DramView.chunks()`` renders it into the contiguous
``(address, bytes)`` chunks a DMA engine issues (one for a whole tensor). Addresses come from
``plan.dram``, keyed by DRAM buffer (``npusim.plan.dram``): a tile is at its base tensor's
offset plus its view offset. Each DMA command also carries its ``TransferCost`` (descriptors,
chunks, bursts, bytes on the bus; ``npusim.plan.transfer_cost``), counted here once for the
simulator's timing, energy and bounds.

The Program carries everything the simulator needs: the resolved (tiled) graph, the
scratchpad capacity, the off-chip footprint and the plan's name and status, so
``simulate(program, hw)`` needs neither the Plan nor a second resolution of the tiling.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from npusim.kernels.render_chunks import chunks_of

from npusim.graph.model import Graph
from npusim.plan.dram import arena_bytes, buffer_of
from npusim.plan.layout import DramLayout
from npusim.plan.model import Plan
from npusim.plan.painting import AddressPainter
from npusim.plan.bound import as_bound
from npusim.plan.transfer_cost import TransferCost, transfer_cost

PHASE = {"load": 0, "compute": 1, "store": 2}


@dataclass(frozen=True)
class Access:
    """A command's read or write of one residency's scratchpad region."""

    residency: int
    tensor: int
    offset: int
    size: int


@dataclass(frozen=True)
class DramView:
    """The DRAM side of a DMA: a strided view (in elements) starting at byte ``address``."""

    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int

    def chunks(self) -> tuple[tuple[int, int], ...]:
        """(address, bytes) of each contiguous chunk (RenderChunks, memoised)."""
        return chunks_of(self.shape, self.strides, 0, self.itemsize, self.address)


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
    dram: "DramView | None" = None
    cost: "TransferCost | None" = None  # DMA commands: descriptors, chunks, bursts, bus bytes
    reads: tuple[Access, ...] = ()
    writes: tuple[Access, ...] = ()
    waits: tuple[int, ...] = ()
    streamed: tuple[int, ...] = ()  # waits satisfied by the first band of that command (module docstring)


@dataclass(frozen=True)
class Program:
    graph: Graph  # the graph the commands refer to (the tiled expansion for a tiled plan)
    queues: dict  # queue name -> tuple of command ids, in issue order
    commands: tuple[Command, ...]
    residency_users: tuple[tuple[int, ...], ...]  # per residency: commands that touch it
    capacity: int
    streams: int
    planner: str = ""
    plan_status: str = "heuristic"
    plan_scope: str = ""  # what the status refers to, when not the whole plan (PlanMeta.scope)
    plan_notes: tuple[str, ...] = ()  # what the planners traded (PlanMeta.notes)
    offchip_peak: int = 0  # DRAM bytes the plan needs (``offchip_footprint``)
    dram_planned: bool = False  # the plan has a DRAM layout: the simulator checks DRAM contents
    lowered_for: tuple = ()  # the DMA/DRAM settings the costs were counted with (``dma_settings``)

    @property
    def n_commands(self) -> int:
        return len(self.commands)


def dma_settings(hw) -> tuple:
    """The hardware fields transfer costs depend on: a Program is run only on hardware that
    agrees on them."""
    return (("dma.burst_bytes", int(hw.dma.burst_bytes)), ("dma.max_dims", int(hw.dma.max_dims)),
            ("dram.layout", hw.dram.layout))


def lower(plan: Plan, hw, graph: Graph | None = None) -> Program:
    """The Program of a bound ``plan`` on hardware ``hw`` (``graph``: only for a plan not
    bound to its graph yet)."""
    plan = as_bound(plan, graph)
    untiled, graph = plan.base_graph, plan.bound_graph
    # Build commands in (step, phase) order without waits, then add waits.
    drafts = _draft_commands(plan, graph, DramLayout(untiled, hw.dram.layout), hw)
    users, filler = _users_and_fillers(drafts, len(plan.residencies))
    commands = _with_waits(drafts, users, filler, _previous_occupants(plan.residencies), plan, graph)
    queues = defaultdict(list)
    for c in commands:
        queues[c.queue].append(c.id)
    n_streams = max(plan.streams, default=0) + 1
    return Program(graph=graph, queues={k: tuple(v) for k, v in sorted(queues.items())},
                   commands=tuple(commands), residency_users=tuple(tuple(u) for u in users),
                   capacity=plan.capacity, streams=n_streams, planner=plan.meta.planner,
                   plan_status=plan.meta.status, plan_scope=plan.meta.scope, plan_notes=plan.meta.notes, offchip_peak=offchip_footprint(plan, graph, untiled),
                   dram_planned=bool(plan.dram), lowered_for=dma_settings(hw))


def _draft_commands(plan: Plan, graph: Graph, layout: DramLayout, hw) -> list[tuple[tuple, dict]]:
    """Every transfer and op as a command's fields without waits, keyed and sorted by
    (step, phase, tensor or op)."""
    residencies = plan.residencies
    by_tensor = defaultdict(list)  # tensor -> (first step, last step, its Access) of each residency
    for i, r in enumerate(residencies):
        by_tensor[r.tensor].append((r.first, r.last, Access(i, r.tensor, r.offset, r.size)))

    def access_at(t: int, s: int) -> Access:
        for first, last, access in by_tensor[t]:
            if first <= s <= last:
                return access
        raise ValueError(f"tensor {graph.tensors[t].name!r} is not resident at step {s}; validate the plan first")

    dram_side = {}  # tensor -> (view, cost): a tensor moved again is moved from the same place
    # A view's counts depend on its start only through the start's phase in a burst (shifting
    # every chunk by whole bursts moves as many bursts): tiles of one shape share their cost.
    costs = {}  # (shape, strides, itemsize, address mod burst) -> TransferCost
    burst, max_dims = hw.dma.burst_bytes, hw.dma.max_dims

    def view_and_cost(t: int) -> tuple[DramView, TransferCost]:
        found = dram_side.get(t)
        if found is None:
            view = dram_view(graph.tensors[t], plan.dram, layout)
            key = (view.shape, view.strides, view.itemsize, view.address % burst)
            cost = costs.get(key)
            if cost is None:
                cost = costs[key] = transfer_cost(view.shape, view.strides, view.itemsize, view.address, burst, max_dims)
            found = dram_side[t] = (view, cost)
        return found

    drafts = []  # (priority, dict)
    for tr in plan.transfers:
        a = access_at(tr.tensor, tr.step)
        view, cost = view_and_cost(tr.tensor)
        d = dict(queue=f"dma.{tr.kind}", kind=tr.kind, step=tr.step, tensor=tr.tensor, cause=tr.cause,
                 nbytes=tr.size, dram=view, cost=cost,
                 reads=(a,) if tr.kind == "store" else (),
                 writes=(a,) if tr.kind == "load" else ())
        drafts.append(((tr.step, PHASE[tr.kind], tr.tensor), d))
    for s, op_id in enumerate(plan.order):
        op = graph.ops[op_id]
        d = dict(queue=f"stream{plan.streams[op_id]}", kind="compute", step=s, op=op_id,
                 reads=tuple(access_at(t, s) for t in dict.fromkeys(op.inputs)),
                 writes=tuple(access_at(t, s) for t in op.outputs))
        drafts.append(((s, PHASE["compute"], op_id), d))
    drafts.sort(key=lambda x: x[0])
    return drafts


def _users_and_fillers(drafts, n_residencies: int) -> tuple[list[list[int]], dict[int, int]]:
    """Per residency, the commands that touch it, and the command that fills it first."""
    users = [[] for _ in range(n_residencies)]
    filler: dict[int, int] = {}  # residency -> command that fills it
    for cid, (_, d) in enumerate(drafts):
        for a in d["reads"] + d["writes"]:
            users[a.residency].append(cid)
        for a in d["writes"]:
            filler.setdefault(a.residency, cid)
    return users, filler


def _with_waits(drafts, users, filler, previous, plan: Plan, graph: Graph) -> list[Command]:
    """The commands with the waits of the module docstring (only on earlier commands)."""
    fields = [d for _, d in drafts]
    kinds = [d["kind"] for d in fields]
    queues = [d["queue"] for d in fields]
    steps = [d["step"] for d in fields]
    last_store_of = {}  # tensor -> latest store command issued so far
    compute_at = {steps[cid]: cid for cid, kind in enumerate(kinds) if kind == "compute"}
    loads_at = defaultdict(list)  # step -> its load commands
    for cid, kind in enumerate(kinds):
        if kind == "load":
            loads_at[steps[cid]].append(cid)
    dma_users = {}  # residency -> its users that are not computes (memoised: shared by many waiters)

    def dma_users_of(q: int) -> list[int]:
        found = dma_users.get(q)
        if found is None:
            found = dma_users[q] = [u for u in users[q] if kinds[u] != "compute"]
        return found

    commands = []
    for cid, d in enumerate(fields):
        waits, streamed = set(), set()
        kind = kinds[cid]
        if kind == "compute":
            queue = queues[cid]
            for a in d["reads"]:
                f = filler.get(a.residency)
                if f is not None and queues[f] != queue:
                    waits.add(f)
                    if kinds[f] == "load":
                        streamed.add(f)
            for a in d["writes"]:
                for q in previous[a.residency]:
                    waits.update(dma_users_of(q))
        elif kind == "load":
            for a in d["writes"]:
                for q in previous[a.residency]:
                    waits.update(users[q])
            # Data in DRAM: the tensor's own last spill, or the stores of the tiles it is read from.
            for t in (d["tensor"],) + graph.tensors[d["tensor"]].sources:
                if t in last_store_of:
                    waits.add(last_store_of[t])
        else:  # store
            for a in d["reads"]:
                f = filler.get(a.residency)
                if f is not None:
                    waits.add(f)
                    if kinds[f] == "compute" and steps[f] == steps[cid]:
                        streamed.add(f)
            if plan.dram:  # DRAM is reused: no store before the op of its step (see above)
                waits.add(compute_at[steps[cid]])
                waits.update(loads_at[steps[cid]])
            last_store_of[d["tensor"]] = cid
        waits = sorted(w for w in waits if w < cid)
        streamed = tuple(sorted(w for w in streamed if w < cid)) if streamed else ()
        commands.append(Command(id=cid, waits=tuple(waits), streamed=streamed, **d))
    return commands


def dram_view(tensor, dram: dict, layout: DramLayout) -> DramView:
    """Where a DMA of ``tensor`` reads or writes DRAM: the whole tensor at its buffer's offset
    (0 when the plan has none), or a tile's strided view of its base tensor's buffer, in the
    storage order of the DRAM layout."""
    base = dram.get(buffer_of(tensor), 0)
    offset, shape, strides = layout.view_of(tensor)
    return DramView(base + offset * tensor.itemsize, shape, strides, tensor.itemsize)


def offchip_footprint(plan: Plan, graph: Graph, untiled: Graph | None = None) -> int:
    """DRAM bytes the plan needs: with a DRAM layout, its arena (every buffer but the weights,
    ``npusim.plan.dram``); else one region per tensor moved."""
    if plan.dram:
        return arena_bytes(plan.dram, graph, untiled)
    in_dram = {t.tensor for t in plan.transfers}
    return sum(graph.tensors[t].size for t in in_dram)


def _previous_occupants(residencies) -> list[list[int]]:
    """For each residency, the residencies that held any of its bytes just before it.

    Residencies are painted onto the address space in order of their first step; the
    segments a new residency paints over name its previous occupants (only the latest one per
    byte: earlier ones were released before those were filled, transitively for a safe plan).
    """
    painter = AddressPainter()
    previous: list[list[int]] = [[] for _ in residencies]
    first = [r.first for r in residencies]
    last = [r.last for r in residencies]
    for i in sorted(range(len(residencies)), key=lambda i: (first[i], residencies[i].offset)):
        lo = residencies[i].offset
        found = painter.paint(lo, lo + residencies[i].size, i)
        begins = first[i]
        previous[i] = sorted(q for q in found if last[q] < begins)
    return previous
