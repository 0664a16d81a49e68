"""COSMA's problem: the ops of one part of a graph, the tensors they touch, and what each
tensor's state is when the part starts (Li, Gupta, Malik, "Combined Scheduling, Memory
Allocation and Tensor Replacement", §III).

A part is a set of ops run one per timestep (``steps = len(ops)``). Every tensor it touches
is in one of four *entry states*:

- ``make``: produced by an op of the part (C = the producer's step, eq. 6–7);
- ``compulsory``: an input or weight never loaded before: its first load is compulsory (the
  paper's fixed traffic, not in the objective); later loads are retrieves;
- ``dram``: not on chip but DRAM holds a copy (spilled or written back in an earlier part):
  every load is a retrieve;
- ``resident``: on chip when the part starts, at ``entry_offset`` (carried over from the
  previous part of divide-and-conquer); ``in_dram`` says whether DRAM also has a copy.

``needed_after`` marks tensors read after the part (by a later part): they must end the part
on chip or in DRAM.

Tiled graphs (``npusim.graph.tiling``): a tile other tiles read back from DRAM
(``Graph.dram_sources``) is written through to DRAM when it is made (``in_dram`` from its
creation, as graph outputs are, and as the arena allocator does); a read view of such tiles
is in state ``dram``, but its DRAM copy exists only once every op writing its sources ran:
``ready_after`` lists those ops of the part (loads wait for them, and they precede its
readers in ``predecessors``). Each tile is then one of COSMA's units, with its true size. The whole graph is the one part with no tensor in states ``dram`` or
``resident``.

Sizes are in units of ``unit`` bytes (a multiple of the scratchpad alignment dividing every
aligned size), so CP-SAT sees small address domains; traffic is counted in raw bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from npusim.errors import InternalError, PlanningError
from npusim.graph.analysis import aligned, topological
from npusim.graph.model import Graph

MAKE, COMPULSORY, DRAM, RESIDENT = "make", "compulsory", "dram", "resident"


@dataclass(frozen=True)
class CosmaPart:
    ops: tuple[int, ...]  # graph op ids; local op i = ops[i]
    tensors: tuple[int, ...]  # graph tensor ids; local tensor a = tensors[a]
    size: tuple[int, ...]  # units
    nbytes: tuple[int, ...]  # raw bytes moved by one transfer
    producer: tuple[int, ...]  # local op, -1 if not made in the part
    consumers: tuple[tuple[int, ...], ...]  # local ops
    op_inputs: tuple[tuple[int, ...], ...]  # distinct local tensors each op reads
    op_outputs: tuple[tuple[int, ...], ...]
    entry: tuple[str, ...]  # entry state (see module docstring)
    entry_offset: tuple[int, ...]  # units, for RESIDENT (else -1)
    in_dram: tuple[bool, ...]  # DRAM holds a copy at entry (or right after creation: outputs)
    needed_after: tuple[bool, ...]
    capacity: int  # units
    unit: int  # bytes per unit
    ready_after: tuple[tuple[int, ...], ...] = ()  # per tensor: local ops its DRAM copy waits for (tiles)

    @property
    def steps(self) -> int:
        return len(self.ops)

    @property
    def n_tensors(self) -> int:
        return len(self.tensors)

    def must_store(self, a: int) -> bool:
        """True if evicting ``a`` while it is still needed costs a spill (DRAM has no copy)."""
        return not self.in_dram[a]

    # -- structure (within the part) -------------------------------------------------------
    def predecessors(self) -> list[list[int]]:
        """Producers of each op's inputs, and for a read view of tiles the ops writing them."""
        ready = self.ready_after or ((),) * self.n_tensors
        return [sorted(({self.producer[b] for b in ins} | {u for b in ins for u in ready[b]}) - {-1})
                for ins in self.op_inputs]

    def ancestor_masks(self) -> list[int]:
        preds = self.predecessors()
        masks = [0] * self.steps
        for v in topological(preds):
            m = 0
            for p in preds[v]:
                m |= masks[p] | (1 << p)
            masks[v] = m
        return masks

    def is_topological(self, order: list[int]) -> bool:
        pos = {v: s for s, v in enumerate(order)}
        return sorted(order) == list(range(self.steps)) and all(
            pos[p] < pos[v] for v, ps in enumerate(self.predecessors()) for p in ps)

    def working_set(self, v: int) -> int:
        return sum(self.size[a] for a in set(self.op_inputs[v]) | set(self.op_outputs[v]))



def planned_tensors(graph: Graph, params: bool) -> list[int]:
    """Tensors COSMA places: every tensor an op touches; without ``params``, not the weights."""
    return [t.id for t in graph.tensors
            if (t.producer is not None or t.consumers) and (params or t.kind != "weight")]


def size_unit(graph: Graph, tensors: list[int], align: int) -> int:
    """The largest multiple of ``align`` dividing every aligned tensor size."""
    g = 0
    for t in tensors:
        g = math.gcd(g, int(aligned(graph.tensors[t].size, align)))
    return max(align, g or align)


def whole_graph_part(graph: Graph, capacity: int, align: int, params: bool = True,
                     unit: int | None = None) -> CosmaPart:
    """The whole graph as one part: every placed tensor starts made or in DRAM (compulsory)."""
    return make_part(graph, list(range(graph.n_ops)), capacity, align, params, unit=unit)


def make_part(graph: Graph, ops: list[int], capacity: int, align: int, params: bool,
              state: dict | None = None, later: set[int] | None = None,
              unit: int | None = None) -> CosmaPart:
    """The part made of ``ops`` (graph op ids, any order; local ids follow this list).

    ``state``: graph tensor -> (entry state, offset in bytes or -1, in_dram) for tensors
    already touched by earlier parts (default: none). ``later``: ops of later parts (their
    inputs are ``needed_after``)."""
    state = state or {}
    later = later or set()
    placed = set(planned_tensors(graph, params))
    unit = unit or size_unit(graph, sorted(placed), align)
    local_op = {v: i for i, v in enumerate(ops)}
    touched = list(dict.fromkeys(t for v in ops for t in graph.ops[v].tensors if t in placed))
    carried = [t for t, (st, _, _) in sorted(state.items()) if st == RESIDENT and t not in touched]
    tensors = touched + carried  # resident tensors the part does not read still hold space
    local_t = {t: i for i, t in enumerate(tensors)}
    through_dram = graph.dram_sources
    size, nbytes, producer, consumers, entry, offset, in_dram, needed, ready = ([] for _ in range(9))
    for t in tensors:
        tensor = graph.tensors[t]
        size.append(int(aligned(tensor.size, align)) // unit)
        nbytes.append(tensor.size)
        producer.append(local_op.get(tensor.producer, -1) if tensor.producer is not None else -1)
        consumers.append(tuple(local_op[c] for c in tensor.consumers if c in local_op))
        needed.append(any(c in later for c in tensor.consumers))
        ready.append(tuple(sorted({local_op[graph.tensors[s].producer] for s in tensor.sources
                                   if graph.tensors[s].producer in local_op})))
        if t in state:
            st, off, dram = state[t]
            entry.append(st)
            offset.append(off // unit if st == RESIDENT else -1)
            in_dram.append(bool(dram))
        elif tensor.producer is not None and tensor.producer in local_op:
            entry.append(MAKE)
            offset.append(-1)
            in_dram.append(tensor.kind == "output" or t in through_dram)  # written back right after it is made
        elif tensor.in_dram_initially:
            entry.append(COMPULSORY)
            offset.append(-1)
            in_dram.append(True)
        elif tensor.sources:  # a read view of tiles written through to DRAM (ready_after: by this part)
            entry.append(DRAM)
            offset.append(-1)
            in_dram.append(True)
        else:
            raise InternalError(f"tensor {tensor.name!r} is read by the part but was never made")
    op_inputs = tuple(tuple(local_t[t] for t in dict.fromkeys(graph.ops[v].inputs) if t in placed) for v in ops)
    op_outputs = tuple(tuple(local_t[t] for t in graph.ops[v].outputs if t in placed) for v in ops)
    return CosmaPart(
        ops=tuple(ops), tensors=tuple(tensors), size=tuple(size), nbytes=tuple(nbytes),
        producer=tuple(producer), consumers=tuple(consumers), op_inputs=op_inputs, op_outputs=op_outputs,
        entry=tuple(entry), entry_offset=tuple(offset), in_dram=tuple(in_dram), needed_after=tuple(needed),
        capacity=capacity // unit, unit=unit, ready_after=tuple(ready))
