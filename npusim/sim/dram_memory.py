"""The DRAM content tracker: which data every DRAM byte range holds, and whether it is live.

Modelled on the tagged scratchpad (``npusim.sim.scratchpad``), for plans with a DRAM layout
(``plan.dram``). It stores no data, only ownership, at the granularity of the contiguous
chunks a DMA moves (RenderChunks), so tiles interleaved in DRAM are told apart exactly.

A *block* is the data of one tensor in DRAM: what a store writes (a tile's written view, or
a whole tensor), or, for an input or weight, a region some load reads (there before the run).
Its *readers* are the loads that read it, found from the program: a load of tensor Y reads
Y's own block if Y was stored before, and the blocks of the tensors in ``Y.sources`` (the
producer tiles a consumer tile straddles, halos included). A block is live from its store
(from the start for inputs and weights) until its last reader completes; graph outputs stay
live to the end.

- a store whose chunks overlap a live block of another tensor raises ``SimulationError``
  naming the command, both tensors, their DRAM buffers and the overlapping addresses: live
  data overwritten;
- a load of a block that is not there (never stored, or its store not finished) raises too.
"""

from __future__ import annotations

import numpy as np

from npusim import native
from npusim.errors import SimulationError
from npusim.kernels.render_chunks import chunk_arrays
from npusim.plan.command_table import KIND_CODES
from npusim.plan.dram import buffer_of

_LOAD, _STORE, _COMPUTE = KIND_CODES["load"], KIND_CODES["store"], KIND_CODES["compute"]


#: ``first_overlap(o1, s1, o2, s2)``: (start, end) of the first overlap of two chunk lists sorted
#: by address (int64 arrays), or (-1, -1); C (``npusim/native/dram_contents.c``): checking a plan
#: must not pay Numba's start-up.
first_overlap = native.load("dram_contents").first_overlap


def first_overlap_reference(chunks1, chunks2):
    """The same on lists of (address, bytes), by brute force."""
    found = None
    for a1, n1 in chunks1:
        for a2, n2 in chunks2:
            lo, hi = max(a1, a2), min(a1 + n1, a2 + n2)
            if lo < hi and (found is None or lo < found[0]):
                found = (lo, hi)
    return found or (-1, -1)


class DramContents:
    """Tracks the live blocks of DRAM while a Program runs (see the module docstring)."""

    def __init__(self, program, graph) -> None:
        self.graph = graph
        self.tensor: list[int] = []  # block -> tensor id
        self.view: list = []  # block -> DramView
        self.readers: list[int] = []  # block -> loads still to read it
        self.valid: list[bool] = []
        self.pinned: list[bool] = []  # graph outputs: live to the end
        self.block_of: dict[int, int] = {}  # tensor id -> block
        self.writes: dict[int, int] = {}  # store command -> block
        self.reads: dict[int, list[int]] = {}  # load command -> blocks
        table = program.commands  # (its columns: no Command made per transfer)
        kinds, tensors, views = table.column("kind"), table.column("tensor"), table.dram
        for c in np.flatnonzero(kinds != _COMPUTE).tolist():
            kind, t = kinds[c], int(tensors[c])
            if kind == _STORE:
                self.writes[c] = self._block(t, views[c], initial=False)
            elif kind == _LOAD:
                tensor = graph.tensors[t]
                blocks = [self.block_of[u] for u in (t, *tensor.sources) if u in self.block_of]
                if tensor.in_dram_initially and t not in self.block_of:
                    blocks.append(self._block(t, views[c], initial=True))
                for b in dict.fromkeys(blocks):
                    self.readers[b] += 1
                self.reads[c] = list(dict.fromkeys(blocks))
        n = len(self.tensor)
        self.lo = np.array([v.address for v in self.view], dtype=np.int64).reshape(n)
        self.hi = np.array([_end(v) for v in self.view], dtype=np.int64).reshape(n)
        self.live = np.array([self.valid[b] and self.readers[b] > 0 for b in range(n)], dtype=bool).reshape(n)
        self._chunks: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _block(self, tensor: int, view, initial: bool) -> int:
        b = self.block_of.get(tensor)
        if b is None:
            b = self.block_of[tensor] = len(self.tensor)
            self.tensor.append(tensor)
            self.view.append(view)
            self.readers.append(0)
            self.valid.append(initial)
            self.pinned.append(self.graph.tensors[tensor].kind == "output")
        return b

    def chunks(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        found = self._chunks.get(b)
        if found is None:
            view = self.view[b]
            found = self._chunks[b] = chunk_arrays(view.shape, view.strides, view.itemsize, view.address)
        return found

    def _describe(self, b: int) -> str:
        tensor = self.graph.tensors[self.tensor[b]]
        buffer = buffer_of(tensor)
        where = "" if buffer == tensor.name else f" (a tile of {buffer!r})"
        return f"{tensor.name!r}{where}"

    # -- the hooks the engine calls around a DMA ------------------------------------------------
    def start(self, cmd, who) -> None:
        self.start_command(cmd.id, cmd.kind == "store", cmd.tensor, who)

    def finish(self, cmd) -> None:
        self.finish_command(cmd.id, cmd.kind == "store")

    def start_command(self, c: int, store: bool, tensor: int, who) -> None:
        """``start`` of command ``c`` (a store or a load of ``tensor``), from the table's columns."""
        if store:
            b = self.writes[c]
            clash = np.flatnonzero(self.live & (self.lo < self.hi[b]) & (self.hi > self.lo[b]))
            mine = self.chunks(b)
            for other in clash.tolist():
                if self.tensor[other] == self.tensor[b]:
                    continue  # the same data written again
                lo, hi = first_overlap(*mine, *self.chunks(other))
                if lo >= 0:
                    who = who() if callable(who) else who
                    raise SimulationError(
                        f"{who}: writes {self._describe(b)} to DRAM [{lo}, {hi}) which holds live "
                        f"{self._describe(other)} ({self.readers[other]} load(s) still to read it"
                        f"{', a graph output' if self.pinned[other] else ''}): an overwrite of live data")
            self.live[b] = True
            return
        for b in self.reads.get(c, ()):
            if not (self.valid[b] and self.live[b]):
                who = who() if callable(who) else who
                raise SimulationError(f"{who}: reads {self._describe(b)} from DRAM "
                                      f"[{self.lo[b]}, {self.hi[b]}) before it was stored there")
        if not self.reads.get(c):
            who = who() if callable(who) else who
            raise SimulationError(f"{who}: reads {self.graph.tensors[tensor].name!r} from DRAM, which holds "
                                  "no copy of it")

    def finish_command(self, c: int, store: bool) -> None:
        if store:
            b = self.writes[c]
            self.valid[b] = True
            self._retire(b)
            return
        for b in self.reads.get(c, ()):
            self.readers[b] -= 1
            self._retire(b)

    def _retire(self, b: int) -> None:
        if self.readers[b] <= 0 and not self.pinned[b]:
            self.live[b] = False


def _end(view) -> int:
    last = sum((n - 1) * s for n, s in zip(view.shape, view.strides))
    return view.address + (last + 1) * view.itemsize
