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

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from npusim.kernels.render_chunks import chunks_of

from npusim.graph.model import Graph
from npusim.plan.dram import arena_bytes, buffer_of
from npusim.plan.layout import DramLayout
from npusim.plan.model import Plan
from npusim.plan.painting import AddressPainter
from npusim.plan.records import field_lists
from npusim.plan.bound import as_bound
from npusim.plan.command_table import KIND_CODES, KINDS, NONE, Access, AccessColumns, Command, CommandTable, Rows  # noqa: F401 (Access, Command: their home for importers)
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
    residency_users: Sequence  # per residency: the commands that touch it, as tuples (Rows from lowering; tuples by hand)
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
    user_ptr, users = _with_waits(previous, len(plan.residencies), plan, graph, table)
    queue = table.column("queue")
    queues = {name: ids for name, ids in ((name, tuple(np.flatnonzero(queue == code).tolist()))
                                          for code, name in enumerate(queue_names)) if ids}
    return Program(graph=graph, queues=queues, commands=table, residency_users=_as_rows(user_ptr, users),
                   capacity=plan.capacity, streams=n_streams, planner=plan.meta.planner,
                   plan_status=plan.meta.status, plan_scope=plan.meta.scope, plan_notes=plan.meta.notes, offchip_peak=offchip_footprint(plan, graph, untiled),
                   dram_planned=bool(plan.dram), lowered_for=dma_settings(hw))


def _as_rows(ptr: np.ndarray, values: np.ndarray) -> Rows:
    """CSR lists (ptr, values) as ``Rows``."""
    rows = Rows(array("q"), array("q"))
    rows.pointers.frombytes(ptr.astype(np.int64).tobytes())
    rows.values.frombytes(values.astype(np.int64).tobytes())
    return rows


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


#: the kind code of a compute command
COMPUTE_CODE = KIND_CODES["compute"]


def _column(records, name: str) -> np.ndarray:
    """A field of a plan's records as an int64 array (a view of a table's column)."""
    if hasattr(records, "column"):
        return records.column(name)
    return np.array(field_lists(records, name)[0], dtype=np.int64)


def _residencies_at(plan: Plan, graph: Graph, tensors: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The residency holding ``tensors[i]`` at ``steps[i]`` for every i (the first such in plan
    order); ValueError naming the first pair none holds.

    A tensor whose residencies are disjoint in steps (every tensor of a valid plan) is
    answered by one search over the residencies sorted by (tensor, first step): the last of
    its own to start at or before the step, if it is still held then. The others (an invalid
    plan) are scanned in plan order, pair by pair."""
    first, last, owner = (_column(plan.residencies, name) for name in ("first", "last", "tensor"))
    by_start = np.lexsort((first, owner))  # stable: plan order on ties
    first_s, last_s, owner_s = first[by_start], last[by_start], owner[by_start]
    same = owner_s[1:] == owner_s[:-1]
    overlapping = np.unique(owner_s[1:][same & (last_s[:-1] >= first_s[1:])])
    low = min(int(first.min(initial=0)), int(steps.min(initial=0)))
    width = max(int(first.max(initial=0)), int(steps.max(initial=0))) - low + 2
    at = np.searchsorted(owner_s * width + (first_s - low), tensors * width + (steps - low), side="right") - 1
    found = by_start[np.maximum(at, 0)] if len(by_start) else np.full(len(tensors), -1, dtype=np.int64)
    held = (at >= 0) & (owner[found] == tensors) & (steps <= last[found]) if len(by_start) else found >= 0
    if len(overlapping):
        for i in np.flatnonzero(np.isin(tensors, overlapping)).tolist():
            scanned = np.flatnonzero((owner == tensors[i]) & (first <= steps[i]) & (steps[i] <= last))
            held[i] = len(scanned) > 0
            found[i] = scanned[0] if len(scanned) else -1
    if not held.all():
        i = int(np.argmin(held))
        raise ValueError(f"tensor {graph.tensors[int(tensors[i])].name!r} is not resident at step {int(steps[i])}; "
                         "validate the plan first")
    return found


def _csr_rows(ptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries of rows ``rows`` (repeats allowed) of the CSR lists (ptr, values), one after
    the other, with the position in ``rows`` each comes from."""
    counts = ptr[rows + 1] - ptr[rows]
    which = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    shift = np.repeat(ptr[rows] - (np.cumsum(counts) - counts), counts)
    return which, values[shift + np.arange(len(which), dtype=np.int64)]


def _csr_of(rows: np.ndarray, values: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, values) of the lists that hold each value under its row, in the values' order."""
    by_row = np.argsort(rows, kind="stable")
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=ptr[1:])
    return ptr, values[by_row]


def _latest_before(keys: np.ndarray, ids: np.ndarray, wanted: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Per query, the largest of ``ids`` below ``before`` among those whose key is ``wanted``
    (-1 for none); ``ids`` ascend."""
    n = int(max(ids.max(initial=0), before.max(initial=0))) + 1
    packed = keys * n + ids
    order = np.argsort(packed, kind="stable")
    at = np.searchsorted(packed[order], wanted * n + before, side="left") - 1
    hit = at >= 0
    hit[hit] = keys[order[at[hit]]] == wanted[hit]
    return np.where(hit, ids[order[np.maximum(at, 0)]], -1)


def _set_rows(rows, owners: np.ndarray, values: np.ndarray, n: int) -> None:
    """Fill the empty ``rows`` (``Rows``) with ``n`` rows: row c holds the ``values`` whose
    owner is c, in their order (owners ascend)."""
    ptr = np.cumsum(np.bincount(owners, minlength=n))
    rows.values.frombytes(values.astype(np.int64).tobytes())
    rows.pointers.frombytes(ptr.astype(np.int64).tobytes())


def _accesses(graph: Graph, kind: np.ndarray, op: np.ndarray, tensor: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every access of every command as (command, tensor, is a write), in command order: a
    compute reads its op's inputs (each once, in order) then writes its outputs, a load
    writes its tensor, a store reads it."""
    arrays, n = graph.arrays, len(kind)
    computes = np.flatnonzero(kind == KIND_CODES["compute"])
    ops = op[computes]
    in_ptr, out_ptr = arrays.op_input_ptr, arrays.op_output_ptr
    n_in, n_out = in_ptr[ops + 1] - in_ptr[ops], out_ptr[ops + 1] - out_ptr[ops]
    count = np.ones(n, dtype=np.int64)
    count[computes] = n_in + n_out
    start = np.cumsum(count) - count
    command = np.repeat(np.arange(n, dtype=np.int64), count)
    accessed = tensor[command].astype(np.int64)
    writes = kind[command] == KIND_CODES["load"]
    which, inputs = _csr_rows(in_ptr, arrays.op_input_idx, ops)
    read_at = start[computes][which] + (np.arange(len(which)) - np.repeat(np.cumsum(n_in) - n_in, n_in))
    accessed[read_at] = inputs
    which, outputs = _csr_rows(out_ptr, arrays.op_output_idx, ops)
    write_at = (start[computes] + n_in)[which] + (np.arange(len(which)) - np.repeat(np.cumsum(n_out) - n_out, n_out))
    accessed[write_at] = outputs
    writes[write_at] = True
    return command, accessed, writes


def _with_waits(previous: tuple[np.ndarray, np.ndarray], n_residencies: int, plan: Plan, graph: Graph,
                table: CommandTable) -> tuple[np.ndarray, np.ndarray]:
    """Add each command's accesses and the waits of the module docstring to ``table``, whose
    other columns are filled (``_fill_fields``); per residency the commands that touch it, as
    CSR lists (ptr, commands), in command order.

    Computed for all commands at once, as arrays: each command's accesses, then per rule the
    (waiter, waited) pairs over the whole program, keeping those whose waited command comes
    first (what a pass in issue order would have recorded by then), deduplicated and sorted
    per waiter."""
    kind, queue, step = (table.column(name) for name in ("kind", "queue", "step"))
    n = len(kind)
    LOAD, COMPUTE = KIND_CODES["load"], COMPUTE_CODE
    command, accessed, writes = _accesses(graph, kind, table.column("op"), table.column("tensor"))
    residency = _residencies_at(plan, graph, accessed, step[command])
    _set_rows(table.reads, command[~writes], residency[~writes], n)
    _set_rows(table.writes, command[writes], residency[writes], n)
    users = _csr_of(residency, command, n_residencies)
    filled, first_write = np.unique(residency[writes], return_index=True)
    filler = np.full(n_residencies, -1, dtype=np.int64)  # residency -> the command that fills it first
    filler[filled] = command[writes][first_write]
    is_dma = kind[users[1]] != COMPUTE
    dma_users = _csr_of(np.repeat(np.arange(n_residencies), np.diff(users[0]))[is_dma], users[1][is_dma], n_residencies)
    by = kind[command]
    waits = [_filler_waits(command, residency, writes, by, filler, queue),
             _release_waits(command[writes & (by == COMPUTE)], residency[writes & (by == COMPUTE)], previous, dma_users),
             _release_waits(command[by == LOAD], residency[by == LOAD], previous, users),
             _spill_waits(graph, kind, table.column("tensor"))]
    if plan.dram:
        waits.append(_same_step_waits(kind, step))
    streamed = _streamed_pairs(command, residency, writes, by, filler, queue, kind, step)
    _set_rows(table.waits, *_sorted_pairs(waits, n), n)
    _set_rows(table.streamed, *_sorted_pairs([streamed], n), n)
    return users


def _sorted_pairs(pairs: list[tuple[np.ndarray, np.ndarray]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(waiter, waited) pairs with the waited command first, each once, by waiter then waited."""
    waiter = np.concatenate([p[0] for p in pairs])
    waited = np.concatenate([p[1] for p in pairs])
    keep = (waited >= 0) & (waited < waiter)
    # each rule's pairs come by waiter: a merging sort (timsort) is fast on those runs
    packed = np.sort(waiter[keep] * n + waited[keep], kind="stable")
    first = np.ones(len(packed), dtype=bool)
    first[1:] = packed[1:] != packed[:-1]
    packed = packed[first]
    return packed // n, packed % n


def _filler_waits(command, residency, writes, by, filler, queue):
    """A compute waits for the filler of each residency it reads on another queue, a store
    for that of the residency it stores."""
    read = ~writes
    c, f = command[read], filler[residency[read]]
    other_queue = queue[f] != queue[c]
    keep = (by[read] != COMPUTE_CODE) | other_queue
    return c[keep], f[keep]


def _streamed_pairs(command, residency, writes, by, filler, queue, kind, step):
    """The streamed waits: a compute's for the loads that fill what it reads (on another
    queue), a store's for the compute of its own step that filled what it stores."""
    read = ~writes
    c, f = command[read], filler[residency[read]]
    from_load = (by[read] == COMPUTE_CODE) & (queue[f] != queue[c]) & (kind[f] == KIND_CODES["load"])
    from_op = (by[read] == KIND_CODES["store"]) & (kind[f] == COMPUTE_CODE) & (step[f] == step[c])
    keep = (f >= 0) & (from_load | from_op)
    return c[keep], f[keep]


def _release_waits(waiter, written, previous, users):
    """Each waiter waits for the ``users`` of the previous occupants of the residency it
    writes."""
    at, occupant = _csr_rows(*previous, written)
    of, user = _csr_rows(*users, occupant)
    return waiter[at[of]], user


def _spill_waits(graph: Graph, kind: np.ndarray, tensor: np.ndarray):
    """A load waits for the latest store of its tensor before it, and for that of each
    tensor it is read from (its sources)."""
    stores = np.flatnonzero(kind == KIND_CODES["store"])
    loads = np.flatnonzero(kind == KIND_CODES["load"])
    if not len(stores):
        return loads[:0], loads[:0]
    n_sources, sources = graph.arrays.sources_of(tensor[loads])
    waiter = np.concatenate([loads, np.repeat(loads, n_sources)])
    wanted = np.concatenate([tensor[loads], sources])
    return waiter, _latest_before(tensor[stores], stores, wanted, waiter)


def _same_step_waits(kind: np.ndarray, step: np.ndarray):
    """With a DRAM layout, a store waits for the compute of its step and for the loads of its
    step (KeyError for a step with no compute before the store, as there is none to wait for)."""
    stores = np.flatnonzero(kind == KIND_CODES["store"])
    computes = np.flatnonzero(kind == COMPUTE_CODE)
    compute = _latest_before(step[computes], computes, step[stores], stores)
    if (compute < 0).any():
        raise KeyError(int(step[stores[np.argmax(compute < 0)]]))
    loads = np.flatnonzero(kind == KIND_CODES["load"])
    by_step = np.lexsort((loads, step[loads]))
    loads_sorted = loads[by_step]
    packed = step[loads_sorted] * (len(kind) + 1) + loads_sorted
    lo = np.searchsorted(packed, step[stores] * (len(kind) + 1), side="left")
    hi = np.searchsorted(packed, step[stores] * (len(kind) + 1) + stores, side="left")
    counts = hi - lo
    which = np.repeat(np.arange(len(stores), dtype=np.int64), counts)
    load = loads_sorted[np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(len(which), dtype=np.int64)]
    return np.concatenate([stores, stores[which]]), np.concatenate([compute, load])


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
    sizes = graph.arrays.tensor_size  # (Tensor.size of each)
    in_dram = np.zeros(len(sizes), dtype=bool)
    in_dram[_column(plan.transfers, "tensor")] = True
    return int(sizes[in_dram].sum())


def _previous_occupants(residencies) -> tuple[np.ndarray, np.ndarray]:
    """For each residency, the residencies that held any of its bytes just before it, sorted,
    as CSR lists (ptr, occupants): residency i's are ``occupants[ptr[i]:ptr[i + 1]]``.

    Residencies are painted onto the address space in order of their first step (then
    offset, then plan order); the segments a new residency paints over name its previous
    occupants (only the latest one per byte: earlier ones were released before those were
    filled, transitively for a safe plan), those released before it begins.
    """
    painter = AddressPainter()
    first, last, offsets, sizes = (_column(residencies, name) for name in ("first", "last", "offset", "size"))
    order = np.lexsort((offsets, first))  # stable: plan order on ties
    paint = painter.paint
    found = [paint(offset, offset + size, i)
             for i, offset, size in zip(order.tolist(), offsets[order].tolist(), sizes[order].tolist())]
    counts = np.fromiter(map(len, found), np.int64, len(found))
    new = np.repeat(order, counts)
    old = np.fromiter(chain.from_iterable(found), np.int64, int(counts.sum()))
    released = last[old] < first[new]
    new, old = new[released], old[released]
    return _sorted_csr(new, old, len(first))


def _sorted_csr(rows: np.ndarray, values: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, values) of the lists that hold each value under its row, each list ascending."""
    order = np.lexsort((values, rows))
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=ptr[1:])
    return ptr, values[order]
