"""How long a tiled op will take on the configured hardware: the tiler's objective.

The estimate uses the cost model the simulator charges (``npusim.hw.costs`` for compute,
``npusim.plan.transfer_cost`` for DMA), on the tiles a spec makes:

- **compute**: every tile's cycles, array (systolic fold formula on the tile's GEMM) or
  vector unit, split across the cores one stream drives (``cores_per_stream``; a stream
  stage after tiling may give each stream fewer), bounded below by its scratchpad traffic at ``scratchpad.bytes_per_cycle`` —
  tiles of the same shape are costed once and counted (a dimension has at most two block
  sizes: the block and the remainder);
- **DMA**: every load of an input view (how often each input is loaded follows the loop
  order: ``reads`` from ``planners.tiling.tiler.loop_order``) and every store of an output
  tile, each at its unloaded time (descriptor setup, DRAM latency, then the longer of address
  generation and its bursts at peak bandwidth), in the DRAM layout of the config; the bus
  carries the sum of their bursts at peak bandwidth at best;
- **overlap**: with double buffering the next tile's loads run under the current tile's
  compute, so the op takes the larger of compute and DMA, plus one tile's transfers that
  cannot be hidden (the first loads and the last store)::

      time = max(Σ compute, Σ DMA / channels, Σ bus bytes / DRAM bytes per cycle) + fill

Inputs are assumed to come from DRAM (the op is tiled because its operands do not fit).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from npusim.graph.model import Graph, Op
from npusim.graph.regions import box_volume, input_boxes
from npusim.graph.tiling import k_slices, tile_compute
from npusim.plan.layout import storage_order, storage_view
from npusim.plan.transfer_cost import transfer_cost, unloaded_cycles
from npusim.hw.costs import compute_cycles, cores_per_stream


@dataclass(frozen=True)
class Estimate:
    cycles: float
    compute: float
    dma: float
    bus_bytes: int
    short_runs: bool  # some transfer moves runs shorter than a DRAM burst on average


def _box_classes(shape, blocks):
    """(representative box, how many tiles have its shape) for every tile shape of a spec."""
    per_dim = []
    for n, b in zip(shape, blocks):
        full, rest = divmod(n, b)
        options = []
        if full:
            start = b * min(1, full - 1) if full > 1 or rest else 0  # an interior tile: the largest halo
            options.append(((start, start + b), full))
        if rest:
            options.append(((n - rest, n), 1))
        per_dim.append(options)
    for combo in itertools.product(*per_dim):
        yield tuple(r for r, _ in combo), math.prod(c for _, c in combo)


def _transfer_cycles(tensor, box, hw, image_like: bool) -> tuple[float, int, bool]:
    """(unloaded cycles, bus bytes, whether its runs are shorter than a burst) of moving
    ``box`` of ``tensor``: in its storage order, or one run for a weight (stored pre-tiled,
    ``npusim.plan.layout``)."""
    if tensor.kind == "weight":
        shape, strides, offset = (box_volume(box),), (1,), 0
    else:
        order = storage_order(len(tensor.shape), hw.dram.layout, image_like)
        offset, shape, strides = storage_view(tensor.shape, list(box), order)
    cost = transfer_cost(shape, strides, tensor.itemsize, offset * tensor.itemsize, hw.dma.burst_bytes,
                         hw.dma.max_dims)
    short = cost.chunks > 1 and cost.logical_bytes < cost.chunks * hw.dma.burst_bytes
    return unloaded_cycles(cost, hw), cost.bus_bytes, short


def _tile_cycles(op: Op, graph: Graph, box, k_range, last: bool, hw) -> float:
    macs, gemm = tile_compute(op, graph, box, k_range)
    out = graph.tensors[op.outputs[0]]
    share = box_volume(box) / max(out.elements, 1)
    # on every core of a single-stream program (the tile stage runs before any stream stage)
    compute, _ = compute_cycles(op.kind, gemm, macs, op.vector_ops * share if last else 0, hw,
                                cores_per_stream(hw, 1), "epilogue" in op.attrs)
    moved = out.itemsize * box_volume(box)
    for t, region in zip(op.inputs, input_boxes(op, graph, box, k_range, last)):
        if region is not None:
            moved += graph.tensors[t].itemsize * box_volume(region)
    return max(compute, moved / hw.scratchpad.bytes_per_cycle, 1.0)


def estimate(op: Op, graph: Graph, spec: dict, reads: list[int], hw, image_like: frozenset[str]) -> Estimate:
    """The estimated cycles of ``op`` tiled by ``spec`` (module docstring); ``reads[i]`` is how
    many times input i is loaded in the spec's loop order."""
    out = graph.tensors[op.outputs[0]]
    slices = k_slices(op, graph, spec)
    compute = dma = 0.0
    bus = 0
    tiles = 0
    first_tile = None
    short = False
    load_cost = [None] * len(op.inputs)
    for box, count in _box_classes(out.shape, spec["block"]):
        tiles += count
        per_tile = 0.0
        for j, k_range in enumerate(slices):
            last = j == len(slices) - 1
            per_tile += _tile_cycles(op, graph, box, k_range, last, hw)
            for i, region in enumerate(input_boxes(op, graph, box, k_range, last)):
                if region is not None and load_cost[i] is None:
                    t = graph.tensors[op.inputs[i]]
                    load_cost[i] = _transfer_cycles(t, region, hw, t.name in image_like)
        compute += per_tile * count
        store_cycles, store_bus, store_short = _transfer_cycles(out, box, hw, out.name in image_like)
        short = short or store_short
        dma += store_cycles * count
        bus += store_bus * count
        if first_tile is None:
            first_tile = (per_tile, store_cycles)
    for cost, n in zip(load_cost, reads):
        if cost is not None:
            dma += cost[0] * n
            bus += cost[1] * n
            short = short or cost[2]
    fill_loads = sum(c[0] for c in load_cost if c is not None)
    fill = fill_loads + (first_tile[1] if first_tile else 0.0)
    bound = max(compute, dma / max(hw.dma.channels, 1), bus / hw.dram_bytes_per_cycle)
    return Estimate(bound + fill, compute, dma, bus, short)


def estimate_untiled(op: Op, graph: Graph, whole: dict, hw, image_like: frozenset[str]) -> float:
    """Cycles of ``op`` run whole with nothing prefetched: its compute after the loads of its
    inputs that start in DRAM (weights, graph inputs), which nothing hides."""
    box = tuple((0, n) for n in graph.tensors[op.outputs[0]].shape)
    loads = 0.0
    for t in dict.fromkeys(op.inputs):
        tensor = graph.tensors[t]
        if tensor.in_dram_initially:
            loads += _transfer_cycles(tensor, tuple((0, n) for n in tensor.shape), hw, tensor.name in image_like)[0]
    return loads + _tile_cycles(op, graph, box, None, True, hw)


def store_cycles(tensor, hw, image_like: frozenset[str]) -> float:
    """Unloaded cycles of storing a whole tensor."""
    return _transfer_cycles(tensor, tuple((0, n) for n in tensor.shape), hw, tensor.name in image_like)[0]
