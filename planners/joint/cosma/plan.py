"""From COSMA's per-part solutions to a Plan's order, residencies and transfers.

Timing follows ``npusim.plan.model``: a creation or load at step t opens a residency at t; a
preserved step extends it (across parts too: divide-and-conquer hands tensors over on chip);
a spill S[a, t] is a store after step t-1, where the residency ends; graph outputs are written
back right after they are made; the first load of an input or weight is compulsory, later
ones are retrieves.

Without ``params`` (activations only) weights are not part of the ILP: the paper's separate
parameter buffer is the top ``weight_region`` bytes of the scratchpad, where each op's weights
are loaded just before it runs.
"""

from __future__ import annotations

from npusim.graph.analysis import aligned
from npusim.graph.model import Graph
from npusim.plan.model import Residency, Transfer
from planners.joint.cosma.model import Actions
from planners.joint.cosma.problem import COMPULSORY, DRAM, RESIDENT, CosmaPart


def weight_region(graph: Graph, align: int) -> int:
    """Bytes of the parameter buffer: the most weight bytes one op reads."""
    return max((sum(int(aligned(graph.tensors[t].size, align)) for t in dict.fromkeys(op.inputs)
                    if graph.tensors[t].kind == "weight") for op in graph.ops), default=0)


def exit_state(part: CosmaPart, actions: Actions, state: dict) -> dict:
    """Tensor states after the part (graph tensor -> (state, offset bytes, in_dram)), for the next part."""
    out = dict(state)
    last = part.steps - 1
    spilled = {a for a, _ in actions.spills}
    on_chip = {a for a, _ in actions.cells}  # every cell's step is one of the part's
    for a, t in enumerate(part.tensors):
        touched = a in on_chip or part.entry[a] == RESIDENT
        if not touched:
            continue
        dram = part.in_dram[a] or a in spilled or part.entry[a] in (COMPULSORY, DRAM)
        cell = actions.cells.get((a, last))
        if not part.needed_after[a]:
            out.pop(t, None)
        elif cell is not None:
            out[t] = (RESIDENT, cell[1] * part.unit, dram)
        else:
            out[t] = (DRAM, -1, True)
    return out


def assemble(graph: Graph, solved: list[tuple[CosmaPart, Actions]], align: int, *, params: bool,
             weight_base: int = 0):
    """(order, residencies, transfers) of the stitched parts, run one after the other."""
    order: list[int] = []
    transfers: list[Transfer] = []
    cells: dict[int, list] = {}  # graph tensor -> [(global step, action, offset bytes)]
    through_dram = graph.dram_sources
    for part, actions in solved:
        base = len(order)
        order.extend(part.ops[v] for v in actions.order)
        for a, t in actions.spills:
            tensor = graph.tensors[part.tensors[a]]
            transfers.append(Transfer(step=base + t - 1, kind="store", tensor=tensor.id, cause="spill",
                                      size=tensor.size))
        for (a, t), (act, off) in actions.cells.items():
            tid = part.tensors[a]
            tensor = graph.tensors[tid]
            g = base + t
            cells.setdefault(tid, []).append((g, act, off * part.unit))
            if act == "C" and part.entry[a] == COMPULSORY:
                transfers.append(Transfer(step=g, kind="load", tensor=tid, cause="compulsory", size=tensor.size))
            elif act == "R":
                transfers.append(Transfer(step=g, kind="load", tensor=tid, cause="retrieve", size=tensor.size))
            elif act == "C" and tensor.kind == "output":
                transfers.append(Transfer(step=g, kind="store", tensor=tid, cause="writeback", size=tensor.size))
            elif act == "C" and tid in through_dram:  # a tile other tiles read back: written through
                transfers.append(Transfer(step=g, kind="store", tensor=tid, cause="spill", size=tensor.size))
    residencies: list[Residency] = []
    for tid, steps in cells.items():
        size = int(aligned(graph.tensors[tid].size, align))
        run = None  # [first, last, offset]
        for g, act, off in sorted(steps):
            if run is not None and act == "P" and g == run[1] + 1 and off == run[2]:
                run[1] = g
                continue
            if run is not None:
                residencies.append(Residency(first=run[0], last=run[1], offset=run[2], tensor=tid, size=size))
            run = [g, g, off]
        if run is not None:
            residencies.append(Residency(first=run[0], last=run[1], offset=run[2], tensor=tid, size=size))
    if not params:
        _weights(graph, order, align, weight_base, residencies, transfers)
    return order, residencies, transfers


def _weights(graph: Graph, order: list[int], align: int, base: int, residencies, transfers) -> None:
    loaded = set()
    for s, v in enumerate(order):
        offset = base
        for t in dict.fromkeys(graph.ops[v].inputs):
            tensor = graph.tensors[t]
            if tensor.kind != "weight":
                continue
            size = int(aligned(tensor.size, align))
            residencies.append(Residency(first=s, last=s, offset=offset, tensor=t, size=size))
            transfers.append(Transfer(step=s, kind="load", tensor=t, size=tensor.size,
                                      cause="retrieve" if t in loaded else "compulsory"))
            loaded.add(t)
            offset += size
