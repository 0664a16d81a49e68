"""What one DMA transfer costs: descriptors, chunks, bursts and bytes on the bus, and its time.

Counted once, in lowering (``npusim.plan.lower``), and used by the simulator's timing, the
energy ledger and the report's lower bounds alike; the tiler's estimates call the same
functions, so a tile is chosen by the cost it will be charged.

The DRAM side of a transfer is a strided view in storage order (``npusim.plan.layout``):

- **chunks**: the contiguous byte runs of the view (RenderChunks, TAA paper Algorithm 3), one
  address each for the DMA's address generator;
- **bursts**: the DRAM bursts (``dma.burst_bytes``) those chunks touch; a burst shared by two
  adjacent chunks is moved once. Bytes on the bus = bursts × burst size; the logical bytes
  are the view's own;
- **descriptors**: an N-dimensional descriptor covers up to ``dma.max_dims`` dimensions of the
  view after merging the dimensions that are contiguous with each other (the innermost
  contiguous run counts as one dimension); a view of more dimensions is cut along its
  outermost ones into several descriptors, one per index of the dimensions left over.

Time of a transfer alone on the bus (its *unloaded* time), in core cycles::

    descriptors × dma.setup_cycles + dram latency + max(chunks × dma.chunk_cycles,
                                                        bus bytes / DRAM bytes per cycle)

Address generation is pipelined with the data (as in the DMA engines of Arm's Ethos-U55 and
NVDLA's BDMA, whose address generators issue one request per cycle while data streams): the
transfer takes the longer of the two, not their sum. Setup is paid per descriptor. Under
contention the bus share is what ``SharedBandwidth`` grants, never more than the peak, so the
unloaded time is a lower bound of the simulated one (the report's DMA bound sums them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from npusim.kernels.render_chunks import burst_count


@dataclass(frozen=True)
class TransferCost:
    logical_bytes: int
    chunks: int
    bursts: int
    descriptors: int
    burst_bytes: int

    @property
    def bus_bytes(self) -> int:
        return self.bursts * self.burst_bytes


def merged_dims(shape, strides) -> list[tuple[int, int]]:
    """(extent, stride) of a view's dimensions after dropping size-1 ones and merging each
    dimension into the next when it steps exactly over it (stride = next extent × next stride)."""
    dims: list[list[int]] = []
    for n, s in zip(shape, strides):
        if n == 1:
            continue
        dims.append([n, s])
    merged: list[list[int]] = []
    for n, s in reversed(dims):  # innermost first
        if merged and s == merged[-1][0] * merged[-1][1]:
            merged[-1][0] *= n
            continue
        merged.append([n, s])
    return [(n, s) for n, s in reversed(merged)] or [(1, 1)]


def descriptor_count(shape, strides, max_dims: int) -> int:
    """Descriptors an N-D DMA of ``max_dims`` dimensions needs for the view (see module doc)."""
    dims = merged_dims(shape, strides)
    extra = len(dims) - max(int(max_dims), 1)
    return math.prod(n for n, _ in dims[:extra]) if extra > 0 else 1


#: Views with more contiguous runs than this are counted in closed form, not run by run.
MAX_RENDERED_RUNS = 1 << 20


def transfer_cost(shape, strides, itemsize: int, address: int, burst_bytes: int, max_dims: int) -> TransferCost:
    """The counts of one transfer of the view (shape, strides in elements, storage order) whose
    first element is at byte ``address``.

    A view of more than ``MAX_RENDERED_RUNS`` runs (its merged dimensions outside the
    innermost contiguous one) is counted in closed form instead of run by run: every run its
    own chunk touching ⌈run bytes / burst⌉ + 1 bursts — an upper bound (no merging, no shared
    bursts), so such a view is never made to look cheaper than it is."""
    logical = itemsize * math.prod(shape)
    dims = merged_dims(shape, strides)
    runs = math.prod(n for n, _ in dims[:-1]) if dims[-1][1] == 1 else math.prod(n for n, _ in dims)
    if runs > MAX_RENDERED_RUNS:
        run_bytes = itemsize * (dims[-1][0] if dims[-1][1] == 1 else 1)
        chunks, bursts = runs, runs * (-(-run_bytes // burst_bytes) + 1)
    else:
        chunks, bursts = burst_count(shape, strides, itemsize, address, burst_bytes)
    return TransferCost(logical, chunks, bursts, descriptor_count(shape, strides, max_dims), int(burst_bytes))


def overhead_cycles(cost: TransferCost, hw) -> float:
    """Cycles before data flows: descriptor setup and the DRAM latency."""
    return cost.descriptors * hw.dma.setup_cycles + hw.dram_latency_cycles


def address_cycles(cost: TransferCost, hw) -> float:
    """Cycles the address generator needs: one address per contiguous chunk."""
    return cost.chunks * hw.dma.chunk_cycles


def unloaded_cycles(cost: TransferCost, hw) -> float:
    """The transfer's time alone on the bus (module docstring)."""
    return overhead_cycles(cost, hw) + max(address_cycles(cost, hw), cost.bus_bytes / hw.dram_bytes_per_cycle)
