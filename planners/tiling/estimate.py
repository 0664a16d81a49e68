"""How long a tiled op will take on the configured hardware: the tiler's objective.

The estimate uses the cost model the simulator charges (``npusim.hw.costs`` for compute,
``npusim.plan.transfer_cost`` for DMA), on the tiles a spec makes, and the way the simulator
overlaps them (``npusim.sim.engine``):

- **compute**: every tile's cycles, array (systolic fold formula on the tile's GEMM) or
  vector unit, split across the cores one stream drives (``cores_per_stream``; a stream
  stage after tiling may give each stream fewer), bounded below by its scratchpad traffic at
  ``scratchpad.bytes_per_cycle`` — tiles of the same shape are costed once and counted (a
  dimension has at most two block sizes: the block and the remainder; the reduction slices
  of a tile at most three: the first, the middle ones and the last);
- **DMA**: every load of an input view (how often each input is loaded follows the loop
  order and what stays cached: ``reads``, from ``planners.tiling.tiler``) and every store of
  an output tile, each at its unloaded time (descriptor setup, DRAM latency, then the longer
  of address generation and its bursts at peak bandwidth), in the DRAM layout of the
  config; the bus carries the sum of their bursts at peak bandwidth at best. The channels
  overlap transfers only as far as the scratchpad lets loads run ahead (``ahead`` tiles in
  flight: the next tile's, more where there is room): DMA time is the unloaded time over
  min(channels, transfers of the tiles in flight), and no less than any one input's loads
  over the tiles in flight (a tile's own view moves on one channel);
- **overlap**: the arena keeps the next tile's loads in a second buffer (double buffering),
  so tiles pipeline (an input kept across a loop loads in that loop's first iteration, and
  only the tiles of that iteration hide it: ``spread``, from the tiler's reuse model): the op takes about the largest of compute and transfer time (DMA
  channels or bus, whichever binds), plus what no overlap hides. When the two are close, a
  pipeline with a few buffers loses time to their jitter (a transfer that starts late stalls
  the core, and the other way round): the two are combined as a p-norm,
  ``(compute^p + transfers^p)^(1/p)``, which is their maximum when one dominates and 2^(1/p)
  times it when they are equal; the more tiles' loads can run ahead, the less jitter shows:
  p = ``PIPELINE_NORM`` × (tiles in flight + 1) (one tile ahead: +12 % at equal times; four:
  +4 %; fitted to simulated single-op runs on the shipped configs,
  ``tests/test_tile_estimate.py``). Every op also streams in bands (``cores.stream_bands``): a tile's compute
  starts after the first band of its loads and its store ends one band after its compute,
  so the pipeline's fill is one band of the first tile's loads and of the last tile's store
  (and, when transfers bound the op, one band of a tile's compute)::

      transfers = max(Σ DMA / channels, Σ bus bytes / DRAM bytes per cycle)
      time = (Σ compute^p + transfers^p)^(1/p)
             + (first loads + last store [+ one tile's compute if transfers bind]) / bands

An op run whole (``estimate_untiled``) is the same pipeline of one tile: its loads and store
(for a graph output) overlap its compute band by band — the p-norm of the two plus one band
of the shorter.

Inputs are assumed to come from DRAM (the op is tiled because its operands do not fit).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

from npusim.graph.model import Graph, Op
from npusim.graph.regions import box_rule, box_volume, input_steps, stepped_volume
from npusim.graph.ops.kinds import INPUT_REDUCED_KINDS
from npusim.graph.tiling import k_slices, tile_compute, tile_vector_ops
from npusim.plan.layout import storage_order, storage_view
from npusim.plan.transfer_cost import transfer_cost, unloaded_cycles
from npusim.hw.costs import STATIONARY_OPERAND, band_count, compute_cycles, cores_per_stream, gemm_identity
from planners.tiling import memo

#: Exponent of the p-norm that combines compute and transfer time (module docstring).
PIPELINE_NORM = 3.0


def op_input_steps(op: Op, graph: Graph) -> list:
    """``npusim.graph.regions.input_steps``, memoised for the op being tiled (``memo``)."""
    return memo.cached("steps", graph, op, None, lambda: input_steps(op, graph))


def op_k_slices(op: Op, graph: Graph, k: int) -> list:
    """``npusim.graph.tiling.k_slices`` of reduction slices of ``k``, memoised (``memo``)."""
    return memo.cached("k_slices", graph, op, k, lambda: k_slices(op, graph, {"k": k}))


def op_slice_classes(op: Op, graph: Graph, k: int) -> list:
    """``_slice_classes`` of ``op_k_slices``, memoised (``memo``)."""
    return memo.cached("slice_classes", graph, op, k, lambda: _slice_classes(op_k_slices(op, graph, k)))


def op_input_boxes(op: Op, graph: Graph, box, k_range=None, last: bool = True) -> tuple:
    """``npusim.graph.regions.input_boxes`` as a tuple, memoised for the op being tiled (``memo``)."""
    return memo.cached("boxes", graph, op, (box, k_range, last),
                       lambda: tuple(_op_box_rule(op, graph)(box, k_range, last)))


def _op_box_rule(op: Op, graph: Graph):
    """``npusim.graph.regions.box_rule`` of the op being tiled, made once (``memo``)."""
    return memo.cached("box_rule", graph, op, None, lambda: box_rule(op, graph))


@dataclass(frozen=True)
class Estimate:
    cycles: float
    compute: float
    dma: float
    bus_bytes: int
    short_runs: bool  # some transfer moves runs shorter than a DRAM burst on average


def _box_classes(shape, blocks):
    """(representative box, how many tiles have its shape) for every tile shape of a spec."""
    return _box_classes_of(tuple(shape), tuple(blocks))


@functools.lru_cache(maxsize=4096)
def _box_classes_of(shape: tuple, blocks: tuple) -> tuple:
    """``_box_classes``, memoised by shape and blocks: the lower bound and the estimate of a
    candidate both walk them."""
    return tuple(_each_box_class(shape, blocks))


def _each_box_class(shape, blocks):
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


def _slice_classes(slices: list) -> list[tuple[object, int, bool]]:
    """(representative slice, how many, whether it is the last) of a tile's reduction slices:
    the last one apart (it adds the epilogue and writes the output), the others by length."""
    if len(slices) == 1:
        return [(slices[0], 1, True)]
    classes: dict[int, list] = {}
    for k_range in slices[:-1]:
        length = k_range[1] - k_range[0]
        classes.setdefault(length, [k_range, 0])[1] += 1
    return [(r, n, False) for r, n in classes.values()] + [(slices[-1], 1, True)]


def _transfer_cycles(tensor, box, hw, image_like: bool, steps=None, op: Op | None = None,
                     graph: Graph | None = None) -> tuple[float, int, bool]:
    """(unloaded cycles, bus bytes, whether its runs are shorter than a burst) of moving
    ``box`` of ``tensor`` (every ``steps``-th element: ``regions.input_steps``): in its storage
    order, or one run for a weight (stored pre-tiled, ``npusim.plan.layout``). Memoised for
    ``op`` of ``graph`` when given (``memo``)."""
    if op is None:
        return _transfer_cycles_of(tensor, box, hw, image_like, steps)
    return memo.hw_cached("transfers", hw, _transfer_key(tensor, box, image_like, steps),
                          lambda: _transfer_cycles_of(tensor, box, hw, image_like, steps))


def _transfer_key(tensor, box, image_like: bool, steps) -> tuple:
    """Everything ``_transfer_cycles_of`` reads of a transfer besides the hardware: a weight's
    bytes (it moves as one run), or the tensor's shape, element size and storage order and
    the box (its offset and strides follow from them)."""
    if tensor.kind == "weight":
        return ("weight", tensor.itemsize, stepped_volume(box, steps))
    return (tensor.shape, tensor.itemsize, image_like, box, steps)


def _transfer_cycles_of(tensor, box, hw, image_like: bool, steps=None) -> tuple[float, int, bool]:
    if tensor.kind == "weight":
        shape, strides, offset = (stepped_volume(box, steps),), (1,), 0
    else:
        order = storage_order(len(tensor.shape), hw.dram.layout, image_like)
        offset, shape, strides = storage_view(tensor.shape, list(box), order, steps)
    cost = transfer_cost(shape, strides, tensor.itemsize, offset * tensor.itemsize, hw.dma.burst_bytes,
                         hw.dma.max_dims)
    short = cost.chunks > 1 and cost.logical_bytes < cost.chunks * hw.dma.burst_bytes
    return unloaded_cycles(cost, hw), cost.bus_bytes, short


def _tile_compute(op: Op, graph: Graph, box, k_range, last: bool, hw, acc: str = "scratchpad",
                  run: str | None = None) -> tuple[float, int]:
    """(cycles, stream bands) of one tile's compute (``acc`` = ``"core"``: a reduction slice
    chained in the core's accumulators; ``run``: its position in a run of tiles sharing the
    operand the array holds still, ``"run-first"``, ``"run-middle"`` or ``"run-last"``).
    Memoised for the op being tiled (``memo``)."""
    return memo.cached("tile_compute", graph, op, (box, k_range, last, acc, run),
                       lambda: _tile_compute_of(op, graph, box, k_range, last, hw, acc, run), hw)


def _tile_compute_of(op: Op, graph: Graph, box, k_range, last: bool, hw, acc: str, run: str | None) -> tuple[float, int]:
    macs, gemm = tile_compute(op, graph, box, k_range)
    out = graph.tensors[op.outputs[0]]
    # on every core of a single-stream program (the tile stage runs before any stream stage)
    cores = cores_per_stream(hw, 1)
    chained = ("last" if last else "first") if acc == "core" and k_range is not None else run
    vector_ops, fused = tile_vector_ops(op, graph, box, k_range, last), "epilogue" in op.attrs
    # tiles of one shape have one GEMM: their cycles are costed once (``memo.hw_cached``)
    identity = gemm_identity(gemm)
    compute = memo.hw_cached("compute_cycles", hw, (op.kind, identity, macs, vector_ops, cores, fused, chained),
                             lambda: compute_cycles(op.kind, gemm, macs, vector_ops, hw, cores, fused, chained)[0])
    moved = out.itemsize * box_volume(box) if last or chained is None else 0
    for t, region, steps in zip(op.inputs, op_input_boxes(op, graph, box, k_range, last), op_input_steps(op, graph)):
        if region is not None:
            moved += graph.tensors[t].itemsize * stepped_volume(region, steps)
    volume = box_volume(box)
    bands = memo.hw_cached("band_count", hw, (op.kind, identity, volume, cores),
                           lambda: band_count(op.kind, gemm, volume, hw, cores))
    return max(compute, moved / hw.scratchpad.bytes_per_cycle, 1.0), bands


def run_length(op: Op, graph: Graph, spec: dict, hw) -> int:
    """How many consecutive tiles of ``spec`` share the operand ``hw``'s array holds still
    (weights on ws, inputs on is; ``npusim.graph.tiling._mark_runs``): the tiles of the
    innermost tiled loops whose blocks read the same view of it. 1 when the array keeps
    nothing between tiles (os, an unrolled array, a split reduction)."""
    operand = STATIONARY_OPERAND.get(hw.cores.dataflow)
    if operand is None or hw.cores.unroll or op.gemm is None or len(op_k_slices(op, graph, spec.get("k", 0))) > 1:
        return 1
    index = 0 if operand == "a" else 1
    shape, block = graph.tensors[op.outputs[0]].shape, spec["block"]
    if index >= len(op.inputs):
        return 1
    run = 1
    for d in reversed(spec.get("order") or range(len(shape))):
        count = -(-shape[d] // block[d])
        if count == 1:
            continue
        if operand_moves(op, graph, block, index, d):
            break
        run *= count
    return run


def operand_moves(op: Op, graph: Graph, block, index: int, d: int) -> bool:
    """Whether input ``index`` of ``op`` reads another region when a tile of ``block`` moves
    one block along output dimension ``d``."""
    shape = graph.tensors[op.outputs[0]].shape
    box = tuple((0, min(b, n)) for b, n in zip(block, shape))
    moved = list(box)
    moved[d] = (min(block[d], shape[d]), min(2 * block[d], shape[d]))
    return op_input_boxes(op, graph, box)[index] != op_input_boxes(op, graph, tuple(moved))[index]


def _tile_cycles(op: Op, graph: Graph, box, k_range, last: bool, hw, acc: str, run: int) -> tuple[float, int]:
    """(cycles, stream bands) of an average tile of its shape: in a run of ``run`` tiles
    sharing the stationary operand, the run's first tile pays the preload and its last one
    the skew (``npusim.hw.costs.stationary_run``)."""
    if run <= 1:
        return _tile_compute(op, graph, box, k_range, last, hw, acc)
    first, bands = _tile_compute(op, graph, box, k_range, last, hw, acc, "run-first")
    middle = _tile_compute(op, graph, box, k_range, last, hw, acc, "run-middle")[0]
    final = _tile_compute(op, graph, box, k_range, last, hw, acc, "run-last")[0]
    return (first + final + middle * (run - 2)) / run, bands


def estimate(op: Op, graph: Graph, spec: dict, reads: list[float], hw, image_like: frozenset[str],
             ahead: int = 1) -> Estimate:
    """The estimated cycles of ``op`` tiled by ``spec`` (module docstring); ``reads[i]`` is how
    many times input i is loaded in the spec's loop order; ``ahead``: how many tiles' loads
    can be in flight at once (the next tile's, and more where the scratchpad has room)."""
    out = graph.tensors[op.outputs[0]]
    slices = op_k_slices(op, graph, spec.get("k", 0))
    classes = op_slice_classes(op, graph, spec.get("k", 0))
    compute = dma = 0.0
    bus = 0.0
    first_tile = None
    short = False
    load_cost = [None] * len(op.inputs)
    run = run_length(op, graph, spec, hw)
    steps = op_input_steps(op, graph)
    for box, count in _box_classes(out.shape, spec["block"]):
        per_tile, bands = 0.0, 1
        for k_range, n, last in classes:
            cycles, bands = _tile_cycles(op, graph, box, k_range, last, hw, spec.get("acc", "scratchpad"), run)
            per_tile += cycles * n
        # each input's view, from the first slice class reading it; an op reduced along its
        # inputs reads each input in one slice, so all of them count
        reading = [(None, 1, True)] if op.kind in INPUT_REDUCED_KINDS else classes
        for k_range, _, last in reading:
            for i, region in enumerate(op_input_boxes(op, graph, box, k_range, last)):
                if region is not None and load_cost[i] is None:
                    t = graph.tensors[op.inputs[i]]
                    load_cost[i] = _transfer_cycles(t, region, hw, t.name in image_like, steps[i], op, graph)
        compute += per_tile * count
        store_cycles, store_bus, store_short = _transfer_cycles(out, box, hw, out.name in image_like, None, op, graph)
        short = short or store_short
        dma += store_cycles * count
        bus += store_bus * count
        if first_tile is None:
            first_tile = (per_tile / len(slices), store_cycles, bands)
    channels = max(hw.dma.channels, 1)
    streams = [dma / min(ahead, channels)]  # one input's loads overlap only across the tiles in flight
    transfers_per_tile = 1.0
    tiles = max(1, math.prod(-(-n // b) for n, b in zip(out.shape, spec["block"])) * len(slices))
    spread = getattr(reads, "spread", [1.0] * len(reads))
    burst = []  # (share of the tiles, DMA cycles, bus bytes) of inputs loaded in a burst
    for cost, n, share in zip(load_cost, reads, spread):
        if cost is not None:
            dma += cost[0] * n
            bus += cost[1] * n
            short = short or cost[2]
            streams.append(cost[0] * n / min(ahead, channels))
            transfers_per_tile += n / tiles
            if share < 1.0:
                burst.append((share, cost[0] * n, cost[1] * n))
    slice_compute, last_store, bands = first_tile
    fill_loads = _first_bands([c[0] for c in load_cost if c is not None], channels, bands)
    parallel = min(channels, max(1.0, transfers_per_tile * ahead))

    def transfer_time(cycles, nbytes, longest=0.0):
        return max(cycles / parallel, longest, nbytes / hw.dram_bytes_per_cycle)

    one_input = min(ahead, channels)  # one input's views overlap only across the tiles in flight

    bursty = sum(b[1] for b in burst), sum(b[2] for b in burst)
    transfers = transfer_time(dma, bus, max(streams))
    steady = transfer_time(dma - bursty[0], bus - bursty[1])
    bound = pipelined(compute, steady, ahead)
    # an input loaded in the first iteration of a loop that reuses it (a panel kept across
    # the tiles after it) loads while those tiles alone compute: what they do not hide shows
    for share, cycles, nbytes in burst:
        alone = pipelined(compute * share, steady * share, ahead)
        own = transfer_time(cycles, nbytes, cycles / one_input)
        bound += pipelined(compute * share, steady * share + own, ahead) - alone
    bound = max(bound, pipelined(compute, transfers, ahead))
    fill = fill_loads + (last_store + (slice_compute if transfers > compute else 0.0)) / bands
    return Estimate(bound + fill, compute, dma, int(bus), short)


def clear_memo() -> None:
    """Forget what was memoised for the previous op's candidates (``memo.forget_op``; the
    hardware-wide tables stay for the next op)."""
    memo.forget_op()


def lower_bound(op: Op, graph: Graph, spec: dict, traffic: float, hw) -> float:
    """A cheap bound no estimate of ``spec`` goes below: the cycles of its tiles' compute (the
    compute part of ``estimate``) and its ``traffic`` (DRAM bytes read) at peak bandwidth. The
    tiler estimates its candidates in this order and stops early."""
    acc = spec.get("acc", "scratchpad")
    run = run_length(op, graph, spec, hw)
    compute = memo.cached("spec_compute", graph, op, (tuple(spec["block"]), spec.get("k", 0), acc, run),
                          lambda: _spec_compute(op, graph, spec, hw, acc, run), hw)
    return max(compute, traffic / hw.dram_bytes_per_cycle)


def _spec_compute(op: Op, graph: Graph, spec: dict, hw, acc: str, run: int) -> float:
    """Compute cycles of all the tiles of ``spec`` (``lower_bound``)."""
    classes = op_slice_classes(op, graph, spec.get("k", 0))
    compute = 0.0
    for box, count in _box_classes(graph.tensors[op.outputs[0]].shape, spec["block"]):
        compute += count * sum(n * _tile_cycles(op, graph, box, k_range, last, hw, acc, run)[0]
                               for k_range, n, last in classes)
    return compute


def tiles_compute(op: Op, graph: Graph, blocks: list[int], k: int, hw, acc: str) -> float:
    """The compute cycles of all the tiles of a spec on an array that keeps no operand still
    (run length 1): the compute part of ``lower_bound``, and exactly the compute
    ``estimate`` sums (the same terms in the same order), which its time is never below."""
    return memo.cached("spec_compute", graph, op, (tuple(blocks), k, acc, 1),
                       lambda: _spec_compute(op, graph, {"block": blocks, "k": k}, hw, acc, 1), hw)


def first_tiles_compute(op: Op, graph: Graph, blocks: list[int], k: int, hw, acc: str) -> float:
    """The compute cycles of a spec's first class of tiles (``_box_classes``: its full
    blocks), on an array that keeps no operand still (run length 1): the first term of the
    sum ``lower_bound`` takes, computed as it does, so never more than that bound (the tiler
    orders its candidates by it before it knows their loop orders)."""
    classes = op_slice_classes(op, graph, k)
    for box, count in _box_classes(graph.tensors[op.outputs[0]].shape, blocks):
        compute = 0.0
        compute += count * sum(n * _tile_cycles(op, graph, box, k_range, last, hw, acc, 1)[0]
                               for k_range, n, last in classes)
        return compute
    return 0.0


def pipelined(compute: float, transfers: float, ahead: int = 1) -> float:
    """Time of compute and transfers that overlap through ``ahead`` + 1 buffers (module
    docstring)."""
    top = max(compute, transfers)
    if top <= 0:
        return 0.0
    p = PIPELINE_NORM * (ahead + 1)
    return top * ((compute / top) ** p + (transfers / top) ** p) ** (1 / p)


def _first_bands(loads: list[float], channels: int, bands: int) -> float:
    """Cycles until the first band of every load of an op (or tile) has arrived: the loads
    that start once earlier ones free a channel wait for them whole; those that start at once
    deliver their first bands together."""
    waiting = loads[:max(len(loads) - channels, 0)]
    return sum(waiting) + sum(loads[len(waiting):]) / bands


def estimate_untiled(op: Op, graph: Graph, whole: dict, hw, image_like: frozenset[str]) -> float:
    """Cycles of ``op`` run whole with nothing prefetched: the loads of its inputs that start
    in DRAM (weights, graph inputs) and, for a graph output, its store, overlapping its
    compute band by band (module docstring)."""
    box = tuple((0, n) for n in graph.tensors[op.outputs[0]].shape)
    moved = [graph.tensors[t] for t in dict.fromkeys(op.inputs) if graph.tensors[t].in_dram_initially]
    out = graph.tensors[op.outputs[0]]
    if out.kind == "output":
        moved.append(out)
    unloaded = bus = longest = 0.0
    each = []
    for tensor in moved:
        cycles, nbytes, _ = _transfer_cycles(tensor, tuple((0, n) for n in tensor.shape), hw, tensor.name in image_like)
        each.append(cycles)
        unloaded += cycles
        bus += nbytes
        longest = max(longest, cycles)
    transfers = max(unloaded / max(hw.dma.channels, 1), bus / hw.dram_bytes_per_cycle, longest)
    compute, bands = _tile_compute(op, graph, box, None, True, hw)
    loads = [c for c, tensor in zip(each, moved) if tensor is not out]
    store = each[-1] if out.kind == "output" else 0.0
    fill = _first_bands(loads, max(hw.dma.channels, 1), bands) + store / bands  # first loads in, last band out
    return pipelined(compute, transfers) + min(fill, transfers)


def store_cycles(tensor, hw, image_like: frozenset[str]) -> float:
    """Unloaded cycles of storing a whole tensor."""
    return _transfer_cycles(tensor, tuple((0, n) for n in tensor.shape), hw, tensor.name in image_like)[0]
