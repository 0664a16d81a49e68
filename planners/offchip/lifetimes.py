"""What lives in DRAM, where inside its buffer, and when: the items of off-chip planning.

Every transfer of a plan moves one tensor between the scratchpad and its DRAM buffer
(``npusim.plan.dram``). The data a buffer holds is cut into *tiles*, each a strided view
(a ``Tile``: the TAA paper's tile) with its own lifetime:

- a **stored region** — a tile's written view, or a whole tensor, moved by a store — lives
  from its first store to the last load reading any of its bytes. A read view lists in
  ``sources`` the written views it overlaps (``npusim.graph.tiling``), so a consumer tile
  that *straddles* several producer tiles, or reads a *halo* of its neighbours, keeps every
  one of them alive until it is loaded: a producer tile is freed only when its last overlapping
  consumer tile has been read, and its bytes that no consumer reads are still reserved from
  the store on (a store writes them all);
- a **graph output** region lives from its store to the end of the run;
- a **region of an input** (in DRAM before the run) is one per view it is read through (the
  tiles the paper's TensorAllocate example frees one by one), live from before the first
  step to its last load; overlapping views (halos) each keep their bytes.

Times count phases within steps, ``3 * step + phase`` with load 0 < compute 1 < store 2, as
the lowering orders commands. A store happens after the op of its step (time ``3s + 2``);
the lowering makes it wait for that op when the plan has a DRAM layout. A load at step s
holds its DRAM bytes until it completes, which is before the first op at or after s that
reads the loaded tensor (time ``3c + 1``), so a store at a step >= c cannot overwrite bytes
still being loaded, and two tiles may share bytes when their inclusive time intervals are
disjoint. (This ordering argument needs one stream; the planners refuse several.)

A buffer's *tensor lifetime* (paper, Section II-C) is the time when all its tiles are live
at once, ``[max first, min last]``: often empty for a tiled feature map.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

from npusim.errors import PlanningError
from npusim.graph.analysis import aligned
from npusim.graph.model import Graph
from planners.offchip.collision import Tile
from npusim.plan.layout import DramLayout
from npusim.plan.dram import buffer_of, buffer_size, is_weight_buffer

LOAD, COMPUTE, STORE = 0, 1, 2
BEFORE_RUN = -1


def time_of(step: int, phase: int) -> int:
    return 3 * step + phase


@dataclass
class Buffer:
    """One DRAM buffer: its name, bytes (rounded up to the alignment) and tiles."""

    name: str
    size: int
    weight: bool
    tiles: list[Tile] = field(default_factory=list)
    tensors: list[str] = field(default_factory=list)  # the tensor each tile is moved as

    @property
    def first(self) -> int:
        return min(t.first for t in self.tiles)

    @property
    def last(self) -> int:
        return max(t.last for t in self.tiles)

    @property
    def tensor_lifetime(self) -> tuple[int, int] | None:
        """When every tile is live at once; None when never."""
        a, b = max(t.first for t in self.tiles), min(t.last for t in self.tiles)
        return (a, b) if a <= b else None


def whole_or_view(tensor, layout: DramLayout | None = None) -> tuple[tuple, tuple, int]:
    """(shape, strides, element offset) of a tensor's bytes inside its DRAM buffer: in the
    storage order of ``layout`` (what lowering addresses), or row-major without one."""
    if layout is not None:
        offset, shape, strides = layout.view_of(tensor)
        return shape, strides, offset
    if tensor.view is None:
        return (tensor.elements,), (1,), 0
    return tensor.view.shape, tensor.view.strides, tensor.view.offset


def dram_buffers(graph: Graph, order, transfers, streams=None, untiled: Graph | None = None,
                 alignment: int = 1, layout: DramLayout | None = None) -> list[Buffer]:
    """The DRAM buffers a plan moves data through, in order of first touch, with their tiles
    (in the storage order of ``layout``, the hardware's ``dram.layout``)."""
    if streams is not None and len(set(int(s) for s in streams)) > 1:
        raise PlanningError("off-chip planning: the plan runs ops on several streams; DRAM lifetimes assume one "
                            "stream (steps order the ops). Plan without a streams stage.")
    n_steps = len(order)
    end = time_of(n_steps, LOAD)  # after the run
    reads_at = defaultdict(list)  # tensor -> sorted steps of the ops reading it
    for s, op_id in enumerate(order):
        for t in dict.fromkeys(graph.ops[op_id].inputs):
            reads_at[t].append(s)

    def read_end(t: int, step: int) -> int:
        steps = reads_at.get(t, [])
        k = bisect.bisect_left(steps, step)
        return time_of(steps[k], COMPUTE) if k < len(steps) else end  # unread: keep to the end

    life: dict[int, list[int]] = {}  # tensor whose bytes are a tile -> [first, last]
    ordered = sorted(transfers, key=lambda tr: (tr.step, tr.kind != "load", tr.tensor))
    stored: set[int] = set()
    for tr in ordered:
        tensor = graph.tensors[tr.tensor]
        if tr.kind == "store":
            t = time_of(tr.step, STORE)
            span = life.setdefault(tr.tensor, [t, t])
            span[0] = min(span[0], t)
            span[1] = max(span[1], end if tensor.kind == "output" else t)
            stored.add(tr.tensor)
            continue
        finish = read_end(tr.tensor, tr.step)
        read = [s for s in (tr.tensor, *tensor.sources) if s in stored]
        if tensor.in_dram_initially:
            life.setdefault(tr.tensor, [BEFORE_RUN, BEFORE_RUN])
            read.append(tr.tensor)
        for s in read:
            life[s][1] = max(life[s][1], finish)

    buffers: dict[str, Buffer] = {}
    for tr in ordered:  # first-touch order of buffers, and of tiles within them
        tensor = graph.tensors[tr.tensor]
        name = buffer_of(tensor)
        if name not in buffers:
            buffers[name] = Buffer(name, aligned(buffer_size(name, graph, untiled), alignment),
                                   is_weight_buffer(name, graph, untiled))
        if tr.tensor in life:
            first, last = life.pop(tr.tensor)
            shape, strides, offset = whole_or_view(tensor, layout)
            buffers[name].tiles.append(Tile(tuple(shape), tuple(strides), offset, tensor.itemsize, first, last))
            buffers[name].tensors.append(tensor.name)
    return [b for b in buffers.values() if b.tiles]
