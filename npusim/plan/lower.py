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

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from npusim.kernels.render_chunks import chunks_of

from npusim.graph.model import Graph
from npusim.plan.dram import arena_bytes, buffer_of
from npusim.plan.layout import DramLayout
from npusim.plan.model import Plan
from npusim.plan.painting import AddressPainter
from npusim.plan.records import field_lists
from npusim.plan.bound import as_bound
from npusim.plan.command_table import KIND_CODES, KINDS, NONE, Access, AccessColumns, Command, CommandTable  # noqa: F401 (Access, Command: their home for importers)
from npusim.plan.transfer_cost import TransferCost, transfer_cost
from npusim.util.fast_init import twin_constructor

PHASE = {"load": 0, "compute": 1, "store": 2}
DMA_QUEUE = {"load": "dma.load", "store": "dma.store"}


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


@dataclass(frozen=True)
class Program:
    graph: Graph  # the graph the commands refer to (the tiled expansion for a tiled plan)
    queues: dict  # queue name -> tuple of command ids, in issue order
    commands: CommandTable  # command c is commands[c] (npusim.plan.command_table); a sequence of Commands is converted
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

    def __post_init__(self) -> None:
        if not isinstance(self.commands, CommandTable):  # Commands made by hand (tests, seeded races)
            object.__setattr__(self, "commands", CommandTable.from_commands(self.commands))

    @property
    def n_commands(self) -> int:
        return len(self.commands)

    @property
    def wait_lists(self) -> tuple[np.ndarray, np.ndarray]:
        """Every command's ``waits`` as (pointers, waited), command c waiting for
        ``waited[pointers[c]:pointers[c + 1]]`` in its order: views of the table's column."""
        return self.commands.waits.arrays()


#: ``DramView(...)`` with every field given, made faster (``npusim.util.fast_init``): lowering
#: builds one per tensor moved, tens of thousands to hundreds of thousands.
new_dram_view = twin_constructor(DramView)


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
    n_streams = max(plan.streams, default=0) + 1
    queue_names = sorted([*DMA_QUEUE.values(), *(f"stream{s}" for s in range(n_streams))])
    table = CommandTable(queue_names, AccessColumns.of_residencies(plan.residencies))
    # The commands' fields but their accesses and waits, as columns in (step, phase) order;
    # then each command's accesses and waits as it comes.
    _fill_fields(table, plan, graph, DramLayout(untiled, hw.dram.layout), hw)
    previous = _previous_occupants(plan.residencies)
    users = _with_waits(previous, len(plan.residencies), plan, graph, table)
    queue = table.column("queue")
    queues = {name: ids for name, ids in ((name, tuple(np.flatnonzero(queue == code).tolist()))
                                          for code, name in enumerate(queue_names)) if ids}
    return Program(graph=graph, queues=queues, commands=table, residency_users=tuple(map(tuple, users)),
                   capacity=plan.capacity, streams=n_streams, planner=plan.meta.planner,
                   plan_status=plan.meta.status, plan_scope=plan.meta.scope, plan_notes=plan.meta.notes, offchip_peak=offchip_footprint(plan, graph, untiled),
                   dram_planned=bool(plan.dram), lowered_for=dma_settings(hw))


def _fill_fields(table: CommandTable, plan: Plan, graph: Graph, layout: DramLayout, hw) -> None:
    """Fill the columns of ``table`` but its rows (accesses, waits): one command per transfer
    and per op, in (step, phase, tensor or op) order, transfers before ops (in plan order) on
    ties. Array work over the plan's columns, but each transfer's DRAM side (``dram_side``)."""
    steps, kinds, tensors, causes, sizes = field_lists(plan.transfers, "step", "kind", "tensor", "cause", "size")
    n_transfers, n_ops = len(steps), len(plan.order)
    # (step, phase, tensor or op) packed into one int (cheaper to sort than a tuple): the
    # tensor or op id is below ``width``, the phase below 3; a stable sort keeps plan order on ties.
    width = max(len(graph.tensors), len(graph.ops)) + 1
    step = np.concatenate([np.array(steps, dtype=np.int64), np.arange(n_ops, dtype=np.int64)])
    kind = np.array([KIND_CODES[k] for k in kinds] + [KIND_CODES["compute"]] * n_ops, dtype=np.int8)
    order = np.array(plan.order, dtype=np.int64)
    item = np.concatenate([np.array(tensors, dtype=np.int64), order])  # the tensor moved, or the op
    phase = np.array([PHASE[k] for k in KINDS], dtype=np.int64)[kind]
    by_key = np.argsort((step * 3 + phase) * width + item, kind="stable")
    is_transfer = by_key < n_transfers
    code = {name: k for k, name in enumerate(table.queue_names)}
    stream_queue = np.array([code[f"stream{s}"] for s in range(max(plan.streams, default=0) + 1)], dtype=np.int8)
    queue = stream_queue[np.array(plan.streams, dtype=np.int64)[order]]
    dma_queue = np.array([code[DMA_QUEUE[k]] if k in DMA_QUEUE else -1 for k in KINDS], dtype=np.int8)
    queue = np.concatenate([dma_queue[kind[:n_transfers]], queue])
    nbytes = np.concatenate([np.array(sizes, dtype=np.int64), np.zeros(n_ops, dtype=np.int64)])
    item = item[by_key]
    for column, values in ((table.queue, queue[by_key]), (table.kind, kind[by_key]), (table.step, step[by_key]),
                           (table.op, np.where(is_transfer, NONE, item)), (table.tensor, np.where(is_transfer, item, NONE)),
                           (table.nbytes, nbytes[by_key])):
        column.frombytes(values.astype(np.int8 if column.typecode == "b" else np.int64).tobytes())
    n = n_transfers + n_ops
    table.cause[:], table.dram[:], table.cost[:] = [None] * n, [None] * n, [None] * n
    dram_side = _dram_side_finder(plan, graph, layout, hw)
    cause, dram, cost = table.cause, table.dram, table.cost
    for c, i in zip(np.flatnonzero(is_transfer).tolist(), by_key[is_transfer].tolist()):
        cause[c] = causes[i]
        dram[c], cost[c] = dram_side(tensors[i])


def _access_finder(plan: Plan, graph: Graph):
    """``access_at(tensor, step)``: the residency holding ``tensor`` at ``step`` (the first
    such in plan order).

    A tensor with one residency (most) is answered by comparing steps; one whose residencies
    are disjoint in steps (every valid plan's; a weight loaded again by each tile) by
    bisection on their first steps; others (an invalid plan) by a scan in plan order. Steps
    are kept in lists by residency (no tuple per residency for the collector)."""
    first, last, tensor_of = field_lists(plan.residencies, "first", "last", "tensor")
    only: list = [None] * len(graph.tensors)  # tensor -> its one residency, or a list of its residencies
    for i, t in enumerate(tensor_of):
        held = only[t]
        if held is None:
            only[t] = i
        elif held.__class__ is int:
            only[t] = [held, i]
        else:
            held.append(i)
    several: dict[int, list[int]] = {}  # tensor of several residencies -> them, in plan order
    firsts: dict[int, tuple[list[int], list[int]]] = {}  # and when disjoint: first steps, residencies by first step
    for t, held in enumerate(only):
        if held.__class__ is list:
            several[t], only[t] = held, None
            ordered = sorted(held, key=first.__getitem__)
            if all(last[a] < first[b] for a, b in zip(ordered, ordered[1:])):
                firsts[t] = ([first[i] for i in ordered], ordered)

    def not_resident(t: int, s: int):
        return ValueError(f"tensor {graph.tensors[t].name!r} is not resident at step {s}; validate the plan first")

    def access_at(t: int, s: int) -> int:
        i = only[t]
        if i is None:
            found = firsts.get(t)
            if found is None:  # overlapping residencies, or none
                for i in several.get(t, ()):
                    if first[i] <= s <= last[i]:
                        return i
                raise not_resident(t, s)
            starts, ordered = found
            i = ordered[bisect_right(starts, s) - 1]  # the last to start at or before s
        if first[i] <= s <= last[i]:
            return i
        raise not_resident(t, s)

    return access_at


def _dram_side_finder(plan: Plan, graph: Graph, layout: DramLayout, hw):
    """``dram_side(tensor)``: the DramView and TransferCost of a DMA of ``tensor`` (memoised:
    a tensor moved again is moved from the same place)."""
    # A view's counts depend on its start only through the start's phase in a burst (shifting
    # every chunk by whole bursts moves as many bursts): tiles of one shape share their cost.
    costs = {}  # (shape, strides, itemsize, address mod burst) -> TransferCost
    burst, max_dims = hw.dma.burst_bytes, hw.dma.max_dims
    tensors, dram = graph.tensors, plan.dram
    views: list[DramView | None] = [None] * len(tensors)  # tensor -> its DramView, once moved
    view_costs: list[TransferCost | None] = [None] * len(tensors)  # tensor -> that view's cost

    def dram_side(t: int) -> tuple[DramView, TransferCost]:
        view = views[t]
        if view is not None:
            return view, view_costs[t]
        view = views[t] = dram_view(tensors[t], dram, layout)
        key = (view.shape, view.strides, view.itemsize, view.address % burst)
        cost = costs.get(key)
        if cost is None:
            cost = costs[key] = transfer_cost(view.shape, view.strides, view.itemsize, view.address, burst, max_dims)
        view_costs[t] = cost
        return view, cost

    return dram_side


def _with_waits(previous, n_residencies: int, plan: Plan, graph: Graph, table: CommandTable) -> list[list[int]]:
    """Add each command's accesses and the waits of the module docstring to ``table``, whose
    other columns are filled (``_fill_fields``); per residency the commands that touch it.

    Commands are visited in issue order, and what a command's waits are found from (the
    users and the filler of a residency, the last store of a tensor, the op and loads of a
    step) is recorded after its waits: it holds only earlier commands, so every wait is on
    an earlier command. Waits are gathered in a list, made a sorted set only when there are
    several (a load's always: a few of its candidates are None)."""
    access_at = _access_finder(plan, graph)
    users: list[list[int]] = [[] for _ in range(n_residencies)]
    dma_users: list = [()] * n_residencies  # residency -> its users that are not computes (a list once it has one)
    filler: list[int | None] = [None] * n_residencies  # residency -> the command that fills it first
    last_store_of: list[int | None] = [None] * len(graph.tensors)  # tensor -> latest store command
    store_of = last_store_of.__getitem__
    compute_at = {}  # step -> its compute command (with a DRAM layout)
    loads_at = defaultdict(list)  # step -> its load commands (with a DRAM layout)
    tensors, ops, dram_reused = graph.tensors, graph.ops, bool(plan.dram)
    queue_of, kind_of, step_of = table.queue, table.kind, table.step
    # the rows' values and pointers (``Rows.add`` inlined: four rows per command)
    read_values, write_values = table.reads.values, table.writes.values
    wait_values, streamed_values = table.waits.values, table.streamed.values
    add_read, add_write = read_values.append, write_values.append
    add_read_ptr, add_write_ptr = table.reads.pointers.append, table.writes.pointers.append
    add_wait_ptr, add_streamed_ptr = table.waits.pointers.append, table.streamed.pointers.append
    LOAD, COMPUTE = KIND_CODES["load"], KIND_CODES["compute"]
    for cid, (queue, kind, step, op_id, tensor) in enumerate(zip(queue_of, kind_of, step_of, table.op, table.tensor)):
        waits, streamed = [], ()
        if kind == COMPUTE:
            op = ops[op_id]
            inputs, outputs = op.inputs, op.outputs
            if len(inputs) > 1:
                inputs = dict.fromkeys(inputs)  # an input read twice is one read
            reads = [access_at(t, step) for t in inputs]
            writes = [access_at(outputs[0], step)] if len(outputs) == 1 else [access_at(t, step) for t in outputs]
            loaded = []  # the loads among the fillers waited for: streamed waits
            for r in reads:
                users[r].append(cid)
                f = filler[r]
                if f is not None and queue_of[f] != queue:
                    waits.append(f)
                    if kind_of[f] == LOAD:
                        loaded.append(f)
            for r in writes:
                for q in previous[r]:
                    waits += dma_users[q]
                users[r].append(cid)
                if filler[r] is None:
                    filler[r] = cid
            if dram_reused:
                compute_at[step] = cid
            if loaded:  # a load fills one residency, so no load is here twice
                streamed = tuple(sorted(loaded)) if len(loaded) > 1 else (loaded[0],)
            waits = tuple(sorted(set(waits))) if len(waits) > 1 else tuple(waits)
            read_values.extend(reads)
            write_values.extend(writes)
        elif kind == LOAD:
            r = access_at(tensor, step)
            add_write(r)
            for q in previous[r]:
                waits += users[q]
            # Data in DRAM: the tensor's own last spill, or the stores of the tiles it is read
            # from (None for a tensor never stored, dropped below).
            waits.append(last_store_of[tensor])
            waits += map(store_of, tensors[tensor].sources)
            users[r].append(cid)
            if dma_users[r]:
                dma_users[r].append(cid)
            else:
                dma_users[r] = [cid]
            if filler[r] is None:
                filler[r] = cid
            if dram_reused:
                loads_at[step].append(cid)
            waits = set(waits)
            waits.discard(None)
            waits = tuple(sorted(waits))
        else:  # store
            r = access_at(tensor, step)
            add_read(r)
            f = filler[r]
            if f is not None:
                waits.append(f)
                if kind_of[f] == COMPUTE and step_of[f] == step:
                    streamed = (f,)
            if dram_reused:  # DRAM is reused: no store before the op of its step (see above)
                waits.append(compute_at[step])
                waits += loads_at[step]
            last_store_of[tensor] = cid
            users[r].append(cid)
            if dma_users[r]:
                dma_users[r].append(cid)
            else:
                dma_users[r] = [cid]
            waits = tuple(sorted(set(waits))) if len(waits) > 1 else tuple(waits)
        add_read_ptr(len(read_values))
        add_write_ptr(len(write_values))
        wait_values.extend(waits)
        add_wait_ptr(len(wait_values))
        if streamed:
            streamed_values.extend(streamed)
        add_streamed_ptr(len(streamed_values))
    return users


def dram_view(tensor, dram: dict, layout: DramLayout) -> DramView:
    """Where a DMA of ``tensor`` reads or writes DRAM: the whole tensor at its buffer's offset
    (0 when the plan has none), or a tile's strided view of its base tensor's buffer, in the
    storage order of the DRAM layout."""
    base = dram.get(buffer_of(tensor), 0) if dram else 0
    offset, shape, strides = layout.view_of(tensor)
    return new_dram_view(base + offset * tensor.itemsize, shape, strides, tensor.itemsize)


def offchip_footprint(plan: Plan, graph: Graph, untiled: Graph | None = None) -> int:
    """DRAM bytes the plan needs: with a DRAM layout, its arena (every buffer but the weights,
    ``npusim.plan.dram``); else one region per tensor moved."""
    if plan.dram:
        return arena_bytes(plan.dram, graph, untiled)
    in_dram = set(*field_lists(plan.transfers, "tensor"))
    return sum(graph.tensors[t].size for t in in_dram)


def _previous_occupants(residencies) -> list:
    """For each residency, the residencies that held any of its bytes just before it, sorted
    (a list, or ``()`` for none).

    Residencies are painted onto the address space in order of their first step; the
    segments a new residency paints over name its previous occupants (only the latest one per
    byte: earlier ones were released before those were filled, transitively for a safe plan).
    """
    painter = AddressPainter()
    n = len(residencies)
    previous: list = [()] * n
    first, last, offsets, sizes = field_lists(residencies, "first", "last", "offset", "size")
    # By (first, offset) packed into one int (cheaper to sort than a tuple), ties in residency
    # order (the sort is stable): an offset is below ``span``.
    span = max(offsets, default=0) + 1
    keys = [begins * span + offset for begins, offset in zip(first, offsets)]
    paint = painter.paint
    for i in sorted(range(n), key=keys.__getitem__):
        offset = offsets[i]
        found = paint(offset, offset + sizes[i], i)
        if found:
            begins = first[i]
            if len(found) == 1:
                (q,) = found
                if last[q] < begins:
                    previous[i] = [q]
            else:
                previous[i] = sorted([q for q in found if last[q] < begins])
    return previous
