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
from operator import attrgetter
from dataclasses import dataclass
from typing import Iterable, Iterator, NamedTuple

from npusim.kernels.render_chunks import chunks_of

from npusim.graph.model import Graph
from npusim.plan.dram import arena_bytes, buffer_of
from npusim.plan.layout import DramLayout
from npusim.plan.model import Plan
from npusim.plan.painting import AddressPainter
from npusim.plan.bound import as_bound
from npusim.plan.transfer_cost import TransferCost, transfer_cost
from npusim.util.fast_init import positional_constructor

PHASE = {"load": 0, "compute": 1, "store": 2}
DMA_QUEUE = {"load": "dma.load", "store": "dma.store"}


@dataclass(frozen=True, slots=True)
class Access:
    """A command's read or write of one residency's scratchpad region."""

    residency: int
    tensor: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class DramView:
    """The DRAM side of a DMA: a strided view (in elements) starting at byte ``address``."""

    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int

    def chunks(self) -> tuple[tuple[int, int], ...]:
        """(address, bytes) of each contiguous chunk (RenderChunks, memoised)."""
        return chunks_of(self.shape, self.strides, 0, self.itemsize, self.address)


@dataclass(frozen=True, slots=True)
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


#: ``Command(...)``, ``Access(...)`` and ``DramView(...)`` with every field given, made faster
#: (``npusim.util.fast_init``): lowering builds one per transfer and op, per residency and per
#: tensor moved, tens of thousands to a million.
new_command = positional_constructor(Command)
new_access = positional_constructor(Access)
new_dram_view = positional_constructor(DramView)


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
    # Drafts (commands without waits) in (step, phase) order, each given its waits as it comes.
    drafts = _draft_commands(plan, graph, DramLayout(untiled, hw.dram.layout), hw)
    previous = _previous_occupants(plan.residencies)
    commands, users = _with_waits(drafts, previous, len(plan.residencies), plan, graph)
    queues = defaultdict(list)
    for c in commands:
        queues[c.queue].append(c.id)
    n_streams = max(plan.streams, default=0) + 1
    return Program(graph=graph, queues={k: tuple(v) for k, v in sorted(queues.items())},
                   commands=tuple(commands), residency_users=tuple(tuple(u) for u in users),
                   capacity=plan.capacity, streams=n_streams, planner=plan.meta.planner,
                   plan_status=plan.meta.status, plan_scope=plan.meta.scope, plan_notes=plan.meta.notes, offchip_peak=offchip_footprint(plan, graph, untiled),
                   dram_planned=bool(plan.dram), lowered_for=dma_settings(hw))


class Draft(NamedTuple):
    """A command's fields but its id and waits, in ``Command``'s order."""

    queue: str
    kind: str
    step: int
    op: int | None
    tensor: int | None
    cause: str | None
    nbytes: int
    dram: DramView | None
    cost: TransferCost | None
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]


def _draft_commands(plan: Plan, graph: Graph, layout: DramLayout, hw) -> Iterator[Draft]:
    """Every transfer and op as a command's fields without waits, in (step, phase, tensor or
    op) order, transfers before ops (in plan order) on ties.

    Made one at a time in that order (the order is found from the keys alone): a Program of a
    million commands never holds a million drafts, nor does the collector scan them."""
    access_at = _access_finder(plan, graph)
    dram_side = _dram_side_finder(plan, graph, layout, hw)
    transfers, order, ops, streams = plan.transfers, plan.order, graph.ops, plan.streams
    # (step, phase, tensor or op) packed into one int (cheaper to sort than a tuple): the
    # tensor or op id is below ``width``, the phase below 3.
    width = max(len(graph.tensors), len(graph.ops)) + 1
    keys = [(tr.step * 3 + PHASE[tr.kind]) * width + tr.tensor for tr in transfers]
    keys += [(s * 3 + 1) * width + op_id for s, op_id in enumerate(order)]
    stream_queue = [f"stream{s}" for s in range(max(streams, default=0) + 1)]
    n_transfers = len(transfers)
    for i in sorted(range(len(keys)), key=keys.__getitem__):
        if i < n_transfers:
            tr = transfers[i]
            a = (access_at(tr.tensor, tr.step),)
            view, cost = dram_side(tr.tensor)
            store = tr.kind == "store"
            yield Draft(DMA_QUEUE[tr.kind], tr.kind, tr.step, None, tr.tensor, tr.cause,
                        tr.size, view, cost, a if store else (), () if store else a)
        else:
            s = i - n_transfers
            op_id = order[s]
            op = ops[op_id]
            yield Draft(stream_queue[streams[op_id]], "compute", s, op_id, None, None, 0, None, None,
                        tuple([access_at(t, s) for t in dict.fromkeys(op.inputs)]),
                        tuple([access_at(t, s) for t in op.outputs]))


def _access_finder(plan: Plan, graph: Graph):
    """``access_at(tensor, step)``: the Access of the residency holding ``tensor`` at ``step``."""
    by_tensor: list[list] = [[] for _ in graph.tensors]  # tensor -> (first, last, Access) of each residency
    for i, r in enumerate(plan.residencies):
        by_tensor[r.tensor].append((r.first, r.last, new_access(i, r.tensor, r.offset, r.size)))

    def access_at(t: int, s: int) -> Access:
        for first, last, access in by_tensor[t]:
            if first <= s <= last:
                return access
        raise ValueError(f"tensor {graph.tensors[t].name!r} is not resident at step {s}; validate the plan first")

    return access_at


def _dram_side_finder(plan: Plan, graph: Graph, layout: DramLayout, hw):
    """``dram_side(tensor)``: the DramView and TransferCost of a DMA of ``tensor`` (memoised:
    a tensor moved again is moved from the same place)."""
    found: dict[int, tuple[DramView, TransferCost]] = {}
    # A view's counts depend on its start only through the start's phase in a burst (shifting
    # every chunk by whole bursts moves as many bursts): tiles of one shape share their cost.
    costs = {}  # (shape, strides, itemsize, address mod burst) -> TransferCost
    burst, max_dims = hw.dma.burst_bytes, hw.dma.max_dims
    tensors, dram = graph.tensors, plan.dram

    def dram_side(t: int) -> tuple[DramView, TransferCost]:
        side = found.get(t)
        if side is None:
            view = dram_view(tensors[t], dram, layout)
            key = (view.shape, view.strides, view.itemsize, view.address % burst)
            cost = costs.get(key)
            if cost is None:
                cost = costs[key] = transfer_cost(view.shape, view.strides, view.itemsize, view.address, burst, max_dims)
            side = found[t] = (view, cost)
        return side

    return dram_side


def _with_waits(drafts: Iterable[Draft], previous, n_residencies: int, plan: Plan,
                graph: Graph) -> tuple[list[Command], list[list[int]]]:
    """The commands with the waits of the module docstring, and per residency the commands
    that touch it.

    Commands are visited in issue order, and what a command's waits are found from (the
    users and the filler of a residency, the last store of a tensor, the op and loads of a
    step) is recorded after its waits: it holds only earlier commands, so every wait is on
    an earlier command."""
    users: list[list[int]] = [[] for _ in range(n_residencies)]
    dma_users = defaultdict(list)  # residency -> its users that are not computes
    filler: list[int | None] = [None] * n_residencies  # residency -> the command that fills it first
    last_store_of = {}  # tensor -> latest store command
    compute_at = {}  # step -> its compute command (with a DRAM layout)
    loads_at = defaultdict(list)  # step -> its load commands (with a DRAM layout)
    tensors, dram_reused = graph.tensors, bool(plan.dram)
    commands = []
    for cid, d in enumerate(drafts):
        waits, streamed = set(), ()
        kind = d.kind
        if kind == "compute":
            for a in d.reads:
                f = filler[a.residency]
                if f is not None and commands[f].queue != d.queue:
                    waits.add(f)
                    if commands[f].kind == "load":
                        streamed += (f,)
            for a in d.writes:
                for q in previous[a.residency]:
                    waits.update(dma_users.get(q, ()))
            for a in d.reads:
                users[a.residency].append(cid)
            for a in d.writes:
                users[a.residency].append(cid)
                if filler[a.residency] is None:
                    filler[a.residency] = cid
            if dram_reused:
                compute_at[d.step] = cid
        elif kind == "load":
            (a,) = d.writes
            for q in previous[a.residency]:
                waits.update(users[q])
            # Data in DRAM: the tensor's own last spill, or the stores of the tiles it is read from.
            t = d.tensor
            if t in last_store_of:
                waits.add(last_store_of[t])
            for t in tensors[t].sources:
                if t in last_store_of:
                    waits.add(last_store_of[t])
            users[a.residency].append(cid)
            dma_users[a.residency].append(cid)
            if filler[a.residency] is None:
                filler[a.residency] = cid
            if dram_reused:
                loads_at[d.step].append(cid)
        else:  # store
            (a,) = d.reads
            f = filler[a.residency]
            if f is not None:
                waits.add(f)
                if commands[f].kind == "compute" and commands[f].step == d.step:
                    streamed = (f,)
            if dram_reused:  # DRAM is reused: no store before the op of its step (see above)
                waits.add(compute_at[d.step])
                waits.update(loads_at[d.step])
            last_store_of[d.tensor] = cid
            users[a.residency].append(cid)
            dma_users[a.residency].append(cid)
        waits = tuple(sorted(waits)) if len(waits) > 1 else tuple(waits)
        commands.append(new_command(cid, *d, waits, tuple(sorted(set(streamed))) if streamed else ()))
    return commands, users


def dram_view(tensor, dram: dict, layout: DramLayout) -> DramView:
    """Where a DMA of ``tensor`` reads or writes DRAM: the whole tensor at its buffer's offset
    (0 when the plan has none), or a tile's strided view of its base tensor's buffer, in the
    storage order of the DRAM layout."""
    base = dram.get(buffer_of(tensor), 0)
    offset, shape, strides = layout.view_of(tensor)
    return new_dram_view(base + offset * tensor.itemsize, shape, strides, tensor.itemsize)


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
    last = [r.last for r in residencies]
    # By (first, offset), ties in residency order (the index breaks them).
    for _, i in sorted(zip(map(_first_then_offset, residencies), range(len(residencies)))):
        r = residencies[i]
        found = painter.paint(r.offset, r.offset + r.size, i)
        if found:
            begins = r.first
            previous[i] = sorted([q for q in found if last[q] < begins])
    return previous


_first_then_offset = attrgetter("first", "offset")
