"""The tiling stage: ops whose working set does not fit are streamed through the scratchpad.

For every op whose inputs and outputs together exceed the budget (or every op, with the
option ``tile_all``), choose a tile spec (``npusim.graph.tiling``) whose tiles fit in half
the budget — the other half holds the next tile's inputs while this one computes (double
buffering) — then replace the graph by its tiled expansion. An embedding lookup (a Gather
from a table in DRAM) becomes one tile whatever the budget: it then loads only the rows it
gathers, as a gather DMA does.

Choosing a spec:

1. *Block sizes* by greedy halving: start from the whole output (and the whole reduction);
   while the largest tile's working set is over the limit, halve the block of the dimension
   (or the reduction) that shrinks it most. Preferences break ties — spatial/rows first,
   channels first, reduction first, none — and after them the dimension that is outermost
   in DRAM (``dram.layout``): cutting it keeps a tile's rows long and contiguous, where
   cutting the innermost one makes short runs that each pay whole bursts. One more
   candidate (``contiguous``) always halves the outermost dimension in DRAM that can still
   be cut, even when another would shrink the working set more, and is also offered cut
   once and twice more along that dimension (smaller tiles hide more of a DMA-bound op's
   transfers).
   For GEMM-like ops more candidates fix the output-channel block (the array's column
   dimension) at multiples of the array's columns and halve the rest, so a tile does not
   leave columns of the array idle; and, for ``ws``/``is``, the reduction at multiples of
   the array's rows.
   When the chosen tiles move runs shorter than a burst or load input views of less than a
   burst on average, an op whose inputs lie side by side along one dimension (a Concat) is
   offered tiles of 1, 2, 4, ... whole inputs along it, the other dimensions halved to fit
   (``_operand_blocks``), and the choice is made again: halving the whole output keeps every
   input in each tile, down to one-pixel tiles loading a few bytes of hundreds of inputs.
2. *Loop order* for each candidate: an input is re-read every time a loop it depends on
   moves, together with all loops outside it, so its reads = the product of the block
   counts of the loops from the outermost to the innermost one it depends on. Every order
   of the tiled dimensions is scored by the bytes it reads (e.g. weights reloaded per row
   tile against activations reloaded per channel tile); the reduction loop is innermost.
3. The objective (option ``tile_objective``): ``time`` (default) picks the candidate with
   the least estimated time on the configured hardware (``planners.tiling.estimate``: array
   or vector cycles of its tiles, DMA descriptors and bursts actually moved, bytes at the
   DRAM bandwidth, double-buffered overlap), among the candidates whose transfers move runs
   of at least a DRAM burst on average if one is within 5 % of the fastest; within 1 % of
   the fastest, the fewest bytes on the bus (whole bursts), then DRAM bytes read, then fewer
   tiles, bytes within 0.1 % of the fewest counting as equal (a Llama FFN's up projection
   took 32-column tiles, four times its gate's, for 384 bytes of 16.8 MB);
   ``bytes`` picks the fewest DRAM bytes read, ties to fewer tiles.

What the search costs (it is most of the quick start's planning): an op whose working set
fits the budget but not half of it is streamed only when that is estimated faster than running
it whole (``_streaming_pays``), and its search gives up as soon as its candidates are known if
none of them can be (``_cannot_pay``: an estimate is never below its tiles' compute); on an
array that keeps no operand still, candidates get their loop order and full lower bound only
when the ranking reaches them (``_estimated_lazily``); working sets, costs of tiles and of
transfers are memoised (``planners.tiling.memo``). None of this changes what is chosen
(``benchmarks/bench_tile_search.py`` compares every spec with another tree's).

An op reduced along its inputs (a Sum, Mean, Max or Min of N tensors) is split along them as
a GEMM along K: the greedy halving may halve its inputs per slice, each slice reading ``k``
of them and the previous slice's partial result, so a Sum of 1,000 inputs does not need a
piece of every input in each tile.

Below the smallest tile of an op (one output element, the smallest reduction slice) there
is no plan: the error names the op and that minimum.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import math
from collections import OrderedDict

from npusim.errors import InternalError, PlanningError
from npusim.graph.analysis import aligned, op_working_set
from npusim.graph.model import Graph, Op
from npusim.graph.ops.kinds import INPUT_REDUCED_KINDS, K_SLICED_KINDS, REDUCTION_TILED_KINDS, RESHAPE_LIKE
from npusim.graph.regions import (
    box_rule, box_volume, input_steps, operand_axis, reduction_size, stepped_volume, untileable_dims,
)
from npusim.graph.tiling import PSUM_ITEMSIZE, expand, k_slices
from npusim.hw.costs import STATIONARY_OPERAND
from npusim.plan.layout import image_like_tensors, storage_order
from npusim.planner_options import Option
from planners.tiling import memo
from planners.tiling.estimate import (
    clear_memo, estimate, estimate_untiled, first_tiles_compute, lower_bound, op_input_boxes, op_input_steps, op_k_slices, operand_moves,
    store_cycles, tiles_compute,
)

PREFERENCES = ("spatial", "channels", "reduction", "outer", "contiguous")
OBJECTIVES = ("time", "bytes")
#: Candidates this close to the fastest estimate count as equally fast (bus bytes decide).
TIME_TOLERANCE = 0.01
#: How much slower a candidate moving whole bursts may be and still beat one moving shorter runs.
SHORT_RUN_TOLERANCE = 0.05
#: Bytes (on the bus, read from DRAM) this close to the fewest among the candidates within
#: TIME_TOLERANCE count as equal: fewer tiles then decide (fewer descriptors and commands).
BYTES_TOLERANCE = 0.001
#: Output-channel blocks tried as multiples of the array's columns: 1, 2, 4, ... times.
ALIGNED_MULTIPLES = 6
#: Ops ahead whose loads the arena reserves after this stage (option ``prefetch_depth``).
PREFETCH_DEPTH = 4
#: Default cap on the tiles of one plan: beyond it planning and simulation take minutes.
MAX_TILES = 500_000


def count_tiles(op: Op, graph: Graph, spec: dict) -> int:
    out = graph.tensors[op.outputs[0]]
    if "flat" in spec:
        return -(-out.elements // spec["flat"])
    boxes = math.prod(-(-n // b) for n, b in zip(out.shape, spec["block"]))
    return boxes * len(k_slices(op, graph, spec))


class Tiler:
    name = "tile"
    stage = "tiling"
    description = "stream ops that do not fit through the scratchpad in double-buffered tiles"
    reads = ("graph", "capacity", "alignment", "hw", "options", "progress")
    writes = ("tiling", "graph", "prefetch_depth")
    options = (
        Option("tile_all", "bool", False, "tile every op, not only those whose working set exceeds the budget"),
        Option("max_tiles", "int", MAX_TILES, "refuse a tiled graph with more tiles", unit="tiles", minimum=1),
        Option("tile_objective", "choice", "time", "what the tile search minimises: estimated time or "
               "off-chip bytes", choices=OBJECTIVES),
    )

    def run(self, ctx) -> None:
        graph, align = ctx.graph, ctx.alignment
        threshold = 0 if ctx.options["tile_all"] else ctx.capacity
        half = ctx.capacity // 2
        needs = op_working_set(graph, align)
        max_tiles, objective = ctx.options["max_tiles"], ctx.options["tile_objective"]
        image_like = image_like_tensors(graph)
        specs, tiles = {}, 0
        for op in graph.ops:
            ctx.progress("tiling ops", op.id + 1, graph.n_ops, f"{len(specs)} tiled, {tiles:,} tiles")
            if op.attrs.get("marker"):
                continue  # a liveness marker (the on-chip KV cache's): holds its tensors whole, does no work
            if needs[op.id] > threshold:
                specs[op.name] = choose_spec(op, graph, align, ctx.capacity, ctx.hw, objective, image_like, specs)
            elif _gathers_rows(op, graph):
                specs[op.name] = _whole_spec(op, graph)
            elif needs[op.id] > half and objective == "time":
                try:
                    spec = choose_spec(op, graph, align, ctx.capacity, ctx.hw, objective, image_like, specs,
                                       _untiled_against(op, graph, ctx.hw, image_like))
                    if spec is not None and _streaming_pays(op, graph, spec, ctx.hw, align, ctx.capacity, image_like):
                        specs[op.name] = spec
                except (PlanningError, IndexError, TypeError, ValueError):
                    # Optional streaming of an op that fits: one whose shapes or attributes the
                    # tiler cannot read (a hand-made trace) simply runs whole, as it can.
                    continue
            if op.name in specs:
                tiles += count_tiles(op, graph, specs[op.name])
                if tiles > max_tiles:
                    raise PlanningError(
                        f"at a budget of {ctx.capacity} B the tiled graph would have more than {max_tiles:,} tiles "
                        f"(op {op.name!r} alone: {count_tiles(op, graph, specs[op.name]):,}); raise the budget, "
                        "or the limit with the planner option max_tiles")
        memo.forget()  # let the last op's graph go
        ctx.tiling = specs
        if specs:
            ctx.graph = expand(graph, specs)
        # Prefetch the next ops' loads whether or not anything was tiled, so a roomier
        # scratchpad never runs slower for lack of it (read by the arena allocator).
        ctx.prefetch_depth = PREFETCH_DEPTH


def estimate_spec(op: Op, graph: Graph, spec: dict | None, hw, align: int, capacity: int) -> float:
    """The estimated cycles of ``op`` tiled by ``spec`` (None: run whole), as the tiler ranks
    its candidates (for the tests that hold the estimate to the simulated time)."""
    image_like = image_like_tensors(graph)
    if spec is None:
        whole = {"block": list(graph.tensors[op.outputs[0]].shape), "k": 0}
        return estimate_untiled(op, graph, whole, hw, image_like)
    if "flat" in spec:
        raise ValueError("flat (reshape) specs have no time estimate")
    _, _, reads = _best_order(op, graph, spec["block"], spec.get("k", 0), align, capacity, spec.get("order"),
                              spec.get("acc", "scratchpad"))
    return estimate(op, graph, spec, reads, hw, image_like, _tiles_ahead(op, graph, spec, align, capacity, reads)).cycles


def _streaming_pays(op: Op, graph: Graph, spec: dict, hw, align: int, capacity: int, image_like) -> bool:
    """Whether an op that fits the budget but not half of it runs faster tiled.

    Untiled, nothing can be loaded for it while its predecessor computes (the two do not fit
    together), so the loads of its inputs in DRAM (weights) are exposed: compute + those
    loads. Tiled, its tiles stream double-buffered (``estimate``), but inputs produced on chip
    must first be stored for its tiles to read: their stores are added."""
    if "flat" in spec:
        return False
    _, _, reads = _best_order(op, graph, spec["block"], spec.get("k", 0), align, capacity,
                              acc=spec.get("acc", "scratchpad"))
    tiled = estimate(op, graph, spec, reads, hw, image_like, _tiles_ahead(op, graph, spec, align, capacity, reads)).cycles
    whole = {"block": list(graph.tensors[op.outputs[0]].shape), "k": 0}
    untiled = estimate_untiled(op, graph, whole, hw, image_like)
    for t in dict.fromkeys(op.inputs):
        tensor = graph.tensors[t]
        if not tensor.in_dram_initially:
            tiled += store_cycles(tensor, hw, image_like)
    return tiled < untiled


def _untiled_against(op: Op, graph: Graph, hw, image_like) -> tuple[float, float] | None:
    """(cycles run whole, cycles of storing its inputs produced on chip) of an op that fits:
    what its tiles must beat for streaming to pay (``_streaming_pays``), for the search to
    give up early when none can (``_cannot_pay``); None if they cannot be computed (the
    search and ``_streaming_pays`` then run, and fail, as they would have)."""
    try:
        whole = {"block": list(graph.tensors[op.outputs[0]].shape), "k": 0}
        untiled = estimate_untiled(op, graph, whole, hw, image_like)
        stores = 0.0
        for t in dict.fromkeys(op.inputs):
            tensor = graph.tensors[t]
            if not tensor.in_dram_initially:
                stores += store_cycles(tensor, hw, image_like)
        return untiled, stores
    except Exception:  # shapes the tiler cannot read: the search raises (or not) as before
        return None


def _gathers_rows(op: Op, graph: Graph) -> bool:
    """A Gather from a table in DRAM that reads fewer rows than the table has (an embedding
    lookup): as one tile it moves only those rows, as a gather DMA does; untiled it would
    load the whole table, so a scratchpad roomy enough to leave it untiled would run slower."""
    if op.kind != "Gather" or len(op.inputs) < 2 or len(op.outputs) != 1:
        return False
    data, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    return data.in_dram_initially and bool(out.shape) and out.size < data.size


def _whole_spec(op: Op, graph: Graph) -> dict:
    shape = graph.tensors[op.outputs[0]].shape
    return {"block": list(shape), "k": 0, "order": list(range(len(shape)))}


#: Tile specs already chosen, by op signature (``_signature``): a network repeats its layers, an
#: LLM its decoder blocks and a sweep its graph, and the same op on the same hardware and budget
#: gets the same spec. Least recently used first out.
_CHOSEN: OrderedDict[tuple, str] = OrderedDict()
CHOSEN_MEMO_SIZE = 4096


def _signature(op: Op, graph: Graph, align: int, capacity: int, hw, objective: str, image_like, chosen,
               aligned: dict | None = None) -> tuple:
    """Everything ``choose_spec`` reads of an op: its kind, attributes and costs, the shape,
    bytes, kind and DRAM layout of each tensor, the producers' tiles it could align with, and
    the budget, hardware and objective. The search reads the producers' tiles only through
    the blocks aligned with them (``_aligned_to_producers``): given those (``aligned``), they
    stand for the producers' specs, so ops that differ only in producers they cannot align
    with (a block after a block of another shape) share one search."""
    tensors = tuple((graph.tensors[t].shape, graph.tensors[t].itemsize, graph.tensors[t].kind,
                     graph.tensors[t].name in image_like) for t in op.inputs + op.outputs)
    if aligned is None:
        producers = tuple(json.dumps(chosen.get(graph.ops[p].name), sort_keys=True) if p is not None else ""
                          for p in (graph.tensors[t].producer for t in op.inputs))
    else:  # in the dict's order: it numbers the candidates
        producers = ("aligned",) + tuple((blocks, json.dumps(order), tuple(sorted(inputs)))
                                         for blocks, (order, inputs) in aligned.items())
    repeats = tuple(op.inputs.index(t) for t in op.inputs)  # an input read twice counts once
    return (op.kind, json.dumps(op.attrs, sort_keys=True, default=str), op.macs, op.vector_ops, op.gemm,
            repeats, tensors, producers, align, capacity, hw, objective)


def choose_spec(op: Op, graph: Graph, align: int, capacity: int, hw=None, objective: str = "time",
                image_like: frozenset[str] = frozenset(), chosen: dict | None = None,
                untiled: tuple[float, float] | None = None) -> dict | None:
    """The tile spec of ``op`` (module docstring); without ``hw`` the ``bytes`` objective.
    ``chosen``: the specs of the ops tiled before it (``_aligned_to_producers``). Memoised by
    the op's signature (``_CHOSEN``). ``untiled``: for an op that fits, (its cycles run
    whole, the stores streaming adds): None when no candidate could beat them
    (``_cannot_pay``), so ``_streaming_pays`` would say no to whatever was chosen."""
    clear_memo()
    aligned = _producer_alignment(op, graph, chosen or {}, capacity, align)
    key = _signature(op, graph, align, capacity, hw, objective, image_like, chosen or {}, aligned)
    if key not in _CHOSEN and untiled is not None:
        # giving up is memoised apart, with the times it gave up against: a search without
        # them still chooses afresh
        gave_up = key + ("cannot pay", untiled)
        if gave_up in _CHOSEN:
            _CHOSEN.move_to_end(gave_up)
            return None
        spec = _choose_spec(op, graph, align, capacity, hw, objective, image_like, chosen, aligned, untiled)
        if spec is None:
            _remember(gave_up, "null")
            return None
        _remember(key, json.dumps(spec))
    elif key not in _CHOSEN:
        _remember(key, json.dumps(_choose_spec(op, graph, align, capacity, hw, objective, image_like, chosen, aligned)))
    _CHOSEN.move_to_end(key)
    return json.loads(_CHOSEN[key])


def _remember(key: tuple, found: str) -> None:
    """``found`` (a spec as JSON) in the memo of chosen specs (``_CHOSEN``), its oldest
    entry out if full."""
    _CHOSEN[key] = found
    if len(_CHOSEN) > CHOSEN_MEMO_SIZE:
        _CHOSEN.popitem(last=False)


def _producer_alignment(op: Op, graph: Graph, chosen: dict, capacity: int, align: int) -> dict | None:
    """``_aligned_to_producers`` ahead of the search, for its memo's key (``_signature``); None
    for an op the search does not align (reshape-like) or refuses (then it raises as before,
    in its own order)."""
    if (op.kind in RESHAPE_LIKE or len(op.outputs) != 1 or not graph.tensors[op.outputs[0]].shape
            or _layout_problem(op, graph)):
        return None
    try:
        return _aligned_to_producers(op, graph, chosen, capacity, align)
    except Exception:  # shapes the search cannot read: it raises the same error itself, in its own order
        return None


def _choose_spec(op: Op, graph: Graph, align: int, capacity: int, hw, objective: str, image_like,
                 chosen: dict | None, aligned: dict | None = None,
                 untiled: tuple[float, float] | None = None) -> dict | None:
    if len(op.outputs) != 1 or not graph.tensors[op.outputs[0]].shape:
        raise PlanningError(
            f"op {op.name!r} ({op.kind}) needs {int(op_working_set(graph, align)[op.id])} B, more than the "
            f"{capacity} B budget, and ops with {len(op.outputs)} outputs or a scalar output cannot be tiled")
    layout = _layout_problem(op, graph)
    if layout:  # a trace may name an op Conv with shapes no convolution has (found by fuzzing)
        raise PlanningError(
            f"op {op.name!r} ({op.kind}) cannot be tiled: {layout} (it needs "
            f"{int(op_working_set(graph, align)[op.id])} B; the budget is {capacity} B)")
    if op.kind in RESHAPE_LIKE:
        return _flat_spec(op, graph, capacity // 2, align, capacity)
    out = graph.tensors[op.outputs[0]]
    layout = hw.dram.layout if hw is not None else "nchw"
    order_in_dram = storage_order(len(out.shape), layout, out.name in image_like)
    outer_first = {d: i for i, d in enumerate(order_in_dram)}
    found: dict[tuple, int] = {}
    for i, preference in enumerate(PREFERENCES):
        blocks, k = _halve_to_fit(op, graph, capacity, align, preference, outer_first)
        found.setdefault((tuple(blocks), k, "scratchpad"), i)
        if preference == "contiguous" and hw is not None and objective == "time":
            for smaller in _smaller_tiles(op, graph, blocks, outer_first):
                found.setdefault((tuple(smaller), k, "scratchpad"), i)
    if hw is not None and objective == "time":
        for i, fixed in enumerate(_aligned_blocks(op, graph, hw), len(PREFERENCES)):
            try:
                blocks, k = _halve_to_fit(op, graph, capacity, align, "outer", outer_first, fixed)
            except PlanningError:
                continue  # that block does not fit at any cut of the other dimensions
            found.setdefault((tuple(blocks), k, "scratchpad"), i)
    if hw is not None:  # the I/O-shaped blocks serve either objective
        for blocks, k, acc in _grid_blocks(op, graph, capacity, align, hw):
            found.setdefault((tuple(blocks), k, acc), len(found) + len(PREFERENCES))
    if aligned is None:
        aligned = _aligned_to_producers(op, graph, chosen or {}, capacity, align)
    for blocks, (order, _) in aligned.items():
        found.setdefault((blocks, 0, "scratchpad"), len(found) + len(PREFERENCES))
    if untiled is not None and _cannot_pay(op, graph, found, hw, objective, untiled):
        return None
    spec, short = _rank(op, graph, found, aligned, align, capacity, hw, objective, image_like)
    if hw is not None and objective == "time" and (short or _short_views(op, graph, spec, hw)):
        # The chosen tiles move runs shorter than a burst, or load views of less than a burst
        # on average: on an op whose inputs lie side by side (a Concat of many), offer tiles
        # of whole inputs too (``_operand_blocks``) and choose again.
        extra = 0
        for fixed in _operand_blocks(op, graph):
            try:
                blocks, k = _halve_to_fit(op, graph, capacity, align, "outer", outer_first, fixed)
            except PlanningError:
                continue  # that many inputs do not fit at any cut of the other dimensions
            if (tuple(blocks), k, "scratchpad") not in found:
                found[(tuple(blocks), k, "scratchpad")] = len(found) + len(PREFERENCES)
                extra += 1
        if extra:
            spec, _ = _rank(op, graph, found, aligned, align, capacity, hw, objective, image_like)
    return spec


#: Relative margin under which ``_cannot_pay`` takes its bound: sums of the same positive
#: terms in another order (the stores added to the estimate one by one) differ by a few
#: units in the last place, far less than this.
BOUND_MARGIN = 1e-9


def _cannot_pay(op: Op, graph: Graph, found: dict, hw, objective: str, untiled: tuple[float, float]) -> bool:
    """Whether no candidate of ``found`` can stream faster than the op runs whole, so
    ``_streaming_pays`` would refuse the chosen one: its estimate is at least its tiles'
    compute (``estimate``: the p-norm of compute and transfers, plus a fill, is no less than
    the compute; ``estimate.tiles_compute``), and the stores of its inputs are added to it.
    Only where the chosen spec is one of ``found`` on an array that keeps no operand still
    (its compute then does not depend on its loop order): no tiles of whole inputs offered
    later (``_operand_blocks``)."""
    if hw is None or objective != "time" or _has_runs(op, hw) or not found or _operand_blocks(op, graph):
        return False
    untiled_cycles, stores = untiled
    least = min(tiles_compute(op, graph, list(blocks), k, hw, acc) for blocks, k, acc in found)
    return (least + stores) * (1 - BOUND_MARGIN) >= untiled_cycles


def _rank(op: Op, graph: Graph, found: dict, aligned: dict, align: int, capacity: int, hw, objective: str,
          image_like) -> tuple[dict, bool]:
    """The best of the candidate blocks ``found`` ({(blocks, k, acc): preference index}) by the
    objective (module docstring), and whether its transfers move runs shorter than a burst."""
    if hw is not None and objective == "time" and not _has_runs(op, hw):
        candidates = _estimated_lazily(op, graph, found, aligned, align, capacity, hw, image_like)
        return _pick(op, candidates)
    ranked = []
    for (blocks, k, acc), i in found.items():
        spec, reads, traffic, tiles, fixed = _ranked_entry(op, graph, blocks, k, acc, aligned, align, capacity)
        ranked.append((spec, reads, traffic, tiles, i))
        order = spec["order"]
        still = _stationary_order(op, graph, list(blocks), order, hw) if objective == "time" and not (fixed or k) else None
        if still is not None:  # the same blocks in the order that keeps the array's operand still
            order, traffic, reads = _best_order(op, graph, list(blocks), k, align, capacity, still, acc)
            ranked.append(({**spec, "order": order}, reads, traffic, tiles, i))
    if hw is None or objective != "time":
        return min(ranked, key=lambda c: c[2:])[0], False
    # Estimate the candidates in the order of a cheap lower bound of their time (their compute,
    # and their DRAM bytes at peak bandwidth), and stop once the bound is past what could still
    # be chosen: the rest are slower than the fastest by more than either tolerance below.
    bounds = {id(c[0]): lower_bound(op, graph, c[0], c[2], hw) for c in ranked}
    ranked.sort(key=lambda c: (bounds[id(c[0])], c[4]))
    candidates = []
    limit = float("inf")
    for spec, reads, traffic, tiles, i in ranked:
        if bounds[id(spec)] > limit:
            break
        guess = estimate(op, graph, spec, reads, hw, image_like, _tiles_ahead(op, graph, spec, align, capacity, reads))
        candidates.append(((guess.cycles, guess.bus_bytes, traffic, tiles, i), spec, guess.short_runs))
        limit = min(limit, guess.cycles * (1 + max(SHORT_RUN_TOLERANCE, TIME_TOLERANCE)))
    return _pick(op, candidates)


def _ranked_entry(op: Op, graph: Graph, blocks: tuple, k: int, acc: str, aligned: dict, align: int,
                  capacity: int) -> tuple:
    """(spec, reads, DRAM bytes read, tiles, the producer's loop order it keeps or None) of
    candidate blocks in their best loop order (``_best_order``), inputs read on chip from
    a producer's tiles (``aligned``) not loaded."""
    fixed, on_chip = aligned.get(blocks, (None, frozenset())) if not k else (None, frozenset())
    order, traffic, reads = _best_order(op, graph, list(blocks), k, align, capacity, fixed, acc)
    if on_chip:  # read on chip from the producer's tiles: those inputs are not loaded
        reads = Reads([0.0 if i in on_chip else n for i, n in enumerate(reads)], reads.spread, reads.kept)
        traffic = sum(n * s for n, s in zip(reads, _view_sizes(op, graph, list(blocks), k)))
    spec = {"block": list(blocks), "k": k, "order": order, **({"acc": acc} if acc == "core" else {})}
    tiles = math.prod(-(-n // b) for n, b in zip(graph.tensors[op.outputs[0]].shape, blocks))
    return spec, reads, traffic, tiles, fixed


def _has_runs(op: Op, hw) -> bool:
    """Whether ``hw``'s array can keep an operand of ``op`` still across tiles: then a
    candidate's compute depends on its loop order (``estimate.run_length``), and the tiler
    also tries the order that keeps it (``_stationary_order``)."""
    operand = STATIONARY_OPERAND.get(hw.cores.dataflow)
    return not (operand is None or hw.cores.unroll or op.gemm is None or (0 if operand == "a" else 1) >= len(op.inputs))


def _estimated_lazily(op: Op, graph: Graph, found: dict, aligned: dict, align: int, capacity: int, hw,
                      image_like) -> list:
    """The candidates ``_rank`` estimates, in its order, on hardware whose array keeps no
    operand still (``_has_runs``), without the loop order and lower bound of those it never
    reaches.

    ``_rank`` sorts the candidates by (lower bound, preference, position) and estimates them
    until a bound is past the limit. The compute of a candidate's first class of tiles (its
    full blocks; ``estimate.first_tiles_compute``) is the first term of the bound's sum of
    non-negative terms, so it is no more than the bound: a heap holds each candidate under
    that partial key until it comes first, then under its full bound. Full keys then leave
    the heap in the sorted order, and a partial key past the limit means every candidate
    left is past it too, so the same candidates are estimated in the same order, with the
    same limits."""
    entries = list(found.items())
    heap = [(first_tiles_compute(op, graph, list(blocks), k, hw, acc), i, j, False)
            for j, ((blocks, k, acc), i) in enumerate(entries)]
    heapq.heapify(heap)
    ranked: dict[int, tuple] = {}
    candidates = []
    limit = float("inf")
    while heap:
        bound, i, j, full = heapq.heappop(heap)
        if bound > limit:
            break
        if not full:  # its loop order, DRAM bytes and full bound: back in the heap
            (blocks, k, acc), _ = entries[j]
            ranked[j] = _ranked_entry(op, graph, blocks, k, acc, aligned, align, capacity)[:4]
            spec, _, traffic, _ = ranked[j]
            heapq.heappush(heap, (lower_bound(op, graph, spec, traffic, hw), i, j, True))
            continue
        spec, reads, traffic, tiles = ranked[j]
        guess = estimate(op, graph, spec, reads, hw, image_like, _tiles_ahead(op, graph, spec, align, capacity, reads))
        candidates.append(((guess.cycles, guess.bus_bytes, traffic, tiles, i), spec, guess.short_runs))
        limit = min(limit, guess.cycles * (1 + max(SHORT_RUN_TOLERANCE, TIME_TOLERANCE)))
    return candidates


def _pick(op: Op, candidates: list) -> tuple[dict, bool]:
    """The chosen spec among the estimated ``candidates`` ((key, spec, short runs), key =
    (cycles, bus bytes, DRAM bytes read, tiles, preference)), and whether it moves short runs."""
    if candidates:
        # Runs shorter than a burst only when every candidate that moves whole bursts is more
        # than SHORT_RUN_TOLERANCE slower (their cost is in the estimate: each run pays its
        # own burst and address, and they take bus time from everything else running).
        whole = [c for c in candidates if not c[2]]
        if whole and min(c[0][0] for c in whole) <= (1 + SHORT_RUN_TOLERANCE) * min(c[0][0] for c in candidates):
            candidates = whole
        # Within TIME_TOLERANCE of the fastest, the fewest bytes on the bus: a DMA hidden under
        # compute is still bus time and energy taken from everything else running.
        fastest = min(key[0] for key, *_ in candidates)
        near = [(key[1:], spec, short) for key, spec, short in candidates if key[0] <= fastest * (1 + TIME_TOLERANCE)]
        # Bytes (on the bus, read from DRAM) within BYTES_TOLERANCE of the fewest count as equal
        bus, read = (min(key[i] for key, *_ in near) * (1 + BYTES_TOLERANCE) for i in (0, 1))
        near = [((max(key[0], bus), max(key[1], read)) + key[2:], spec, short) for key, spec, short in near]
        _, spec, short = min(near, key=lambda c: c[0])
        return spec, short
    raise InternalError(f"op {op.name!r}: no tile candidate was estimated")


def _stationary_order(op: Op, graph: Graph, blocks: list[int], order: list[int], hw) -> list[int] | None:
    """``order`` with the loops the operand a ws/is array holds still does not depend on
    moved innermost, so consecutive tiles share it (``estimate.run_length``); None when the
    array keeps nothing between tiles or ``order`` already does so."""
    if hw is None or hw.cores.unroll or op.gemm is None:
        return None
    operand = STATIONARY_OPERAND.get(hw.cores.dataflow)
    index = {"a": 0, "b": 1}.get(operand)
    if index is None or index >= len(op.inputs):
        return None
    shape = graph.tensors[op.outputs[0]].shape
    tiled = [d for d in order if blocks[d] < shape[d]]
    moves = {d: operand_moves(op, graph, blocks, index, d) for d in tiled}
    still = [d for d in order if d not in moves or moves[d]] + [d for d in order if d in moves and not moves[d]]
    return None if still == list(order) else still


def _aligned_to_producers(op: Op, graph: Graph, chosen: dict, capacity: int, align: int) -> dict:
    """Blocks of ``op`` whose tiles read exactly the tiles an already tiled producer wrote
    ({blocks: (the producer's loop order, the inputs read on chip)}).

    An op after a tiled one (a Relu after a BatchNormalization, a 1×1 conv after a Relu, both
    too big for half the scratchpad) reads its input on chip when each of its tiles reads one
    of the producer's tiles: the expansion then reads that written view directly
    (``npusim.graph.tiling``), where tiles of another shape would read back through DRAM what
    the producer wrote through. The dimensions the two share take the producer's blocks; the
    others stay whole, or are halved until the tiles fit. Only when the producer's whole
    output fits beside this op's tiles, so it can stay on chip."""
    out_shape = graph.tensors[op.outputs[0]].shape
    found: dict[tuple, tuple] = {}
    for i, t in enumerate(op.inputs):
        tensor = graph.tensors[t]
        spec = chosen.get(graph.ops[tensor.producer].name) if tensor.producer is not None else None
        if not spec or "flat" in spec or spec.get("k") or len(tensor.shape) != len(out_shape):
            continue
        written = tuple((0, min(b, n)) for n, b in zip(tensor.shape, spec["block"]))
        blocks = [b if n == m else m for b, n, m in zip(spec["block"], tensor.shape, out_shape)]
        free = [d for d, (n, m) in enumerate(zip(tensor.shape, out_shape)) if n != m]
        for _ in range(8):
            box = tuple((0, min(b, n)) for n, b in zip(out_shape, blocks))
            if op_input_boxes(op, graph, box)[i] != written:
                break  # this op does not read the producer's tiles one for one
            if tensor.size + _working_set(op, graph, blocks, 0, align) <= capacity:
                order, inputs = found.get(tuple(blocks), (spec.get("order"), frozenset()))
                found[tuple(blocks)] = (order, inputs | {i})
                break
            halvable = [d for d in free if blocks[d] > 1]
            if not halvable:
                break
            d = max(halvable, key=lambda d: blocks[d])
            blocks[d] = -(-blocks[d] // 2)
    return found


def _short_views(op: Op, graph: Graph, spec: dict, hw) -> bool:
    """Whether the first tile of ``spec`` loads input views of less than a DRAM burst on
    average (each still costs a whole burst and a descriptor)."""
    if "flat" in spec:
        return False
    views = [v for v in _view_sizes(op, graph, spec["block"], spec.get("k", 0)) if v > 0]
    return bool(views) and sum(views) < len(views) * hw.dma.burst_bytes


def _view_sizes(op: Op, graph: Graph, blocks: list[int], k: int) -> list[int]:
    """Bytes of each input's view in the first tile."""
    shape = graph.tensors[op.outputs[0]].shape
    box = tuple((0, min(b, n)) for n, b in zip(shape, blocks))
    slices = op_k_slices(op, graph, k)
    views = op_input_boxes(op, graph, box, slices[0], len(slices) == 1)
    return [0 if r is None else graph.tensors[t].itemsize * stepped_volume(r, g)
            for t, r, g in zip(op.inputs, views, op_input_steps(op, graph))]


def _tiles_ahead(op: Op, graph: Graph, spec: dict, align: int, capacity: int, reads=None) -> int:
    """Tiles whose loads can be in flight at once: the next tile's (double buffering), and
    as many more as fit beside the double-buffered working set and what ``reads`` keeps
    cached, up to the arena's prefetch depth."""
    blocks, k = spec["block"], spec.get("k", 0)
    shape = graph.tensors[op.outputs[0]].shape
    box = tuple((0, min(b, n)) for n, b in zip(shape, blocks))
    slices = op_k_slices(op, graph, spec.get("k", 0))
    views = op_input_boxes(op, graph, box, slices[0], len(slices) == 1)
    inputs = sum(aligned(graph.tensors[t].itemsize * box_volume(r), align) for t, r in zip(op.inputs, views) if r is not None)
    spare = capacity - _working_set(op, graph, blocks, k, align, spec.get("acc", "scratchpad")) - getattr(reads, "kept", 0)
    return 1 + min(PREFETCH_DEPTH - 1, max(spare, 0) // max(inputs, 1))


def _block_values(n: int, unit: int) -> list[int]:
    """Block sizes tried along a dimension of ``n``: powers of two from 8, multiples of the
    array's ``unit`` by powers of two, and ``n`` itself."""
    values = {n}
    for base in (1, unit):
        size = base
        while size < n:
            if size >= 8:
                values.add(size)
            size *= 2
    return sorted(values)


def _grid_blocks(op: Op, graph: Graph, capacity: int, align: int, hw) -> list[tuple[list[int], int, str]]:
    """Output blocks of a GEMM-like op shaped as the I/O lower bound asks: for every output-
    channel block (GEMM N) and reduction slice (K, or whole), the largest block of output
    rows (GEMM M: the rows of a conv's feature map, whole width) whose double-buffered tiles
    fit. Off-chip bytes of a tiled GEMM fall with the output block's smaller side
    (A is read N / bn times, B M / bm times: Q = MNK (1/bn + 1/bm) + MN), so the fitting
    blocks closest to square move the fewest bytes (Smith et al. 2019: Q >= 2 MNK / sqrt(S));
    the estimate weighs that against array utilisation and partial-sum round trips. Other
    output dimensions (batch, a conv's images) get blocks of one. With accumulators in the
    core (``cores.accumulator_size``), split reductions are also tried with their partial
    sums there (``acc: core``): no scratchpad for them, blocks no larger than the
    accumulators hold."""
    if op.kind not in REDUCTION_TILED_KINDS or (op.kind == "Conv" and op.attrs.get("group", 1) != 1):
        return []
    shape = graph.tensors[op.outputs[0]].shape
    rank = len(shape)
    if rank < 2:
        return []
    channel, rows = (1, 2) if op.kind == "Conv" else (rank - 1, rank - 2)
    frozen = untileable_dims(op, graph)
    if channel in frozen or rows in frozen:
        return []
    core = hw.cores
    m_unit = {"os": core.pe_rows, "ws": 8, "is": core.pe_cols}[core.dataflow]
    k_total = reduction_size(op, graph)
    k_values = [0] + [v for v in _block_values(k_total, core.pe_rows) if v >= min(16, k_total) and v < k_total]
    base = [1 if d not in (channel, rows) and (op.kind != "Conv" or d != 3) else n for d, n in enumerate(shape)]
    row_values = _block_values(shape[rows], m_unit)
    held = core.accumulator_size // PSUM_ITEMSIZE  # partial sums the core's accumulators hold
    found = []
    for k, acc in [(k, "scratchpad") for k in k_values] + [(k, "core") for k in k_values if k and held]:
        for bn in _block_values(shape[channel], core.pe_cols):
            blocks = list(base)
            blocks[channel] = bn
            lo, hi = 0, len(row_values) - 1  # the largest row block that fits (working sets grow with it)
            while lo <= hi:
                mid = (lo + hi) // 2
                blocks[rows] = row_values[mid]
                # the accumulators' test first: it spares the working set of blocks they cannot hold
                fits = acc != "core" or math.prod(min(b, n) for b, n in zip(blocks, shape)) <= held
                fits = fits and _working_set(op, graph, blocks, k, align, acc) <= capacity
                if fits:
                    lo = mid + 1
                else:
                    hi = mid - 1
            if hi >= 0:
                blocks[rows] = row_values[hi]
                found.append((list(blocks), k, acc))
    return found


def _smaller_tiles(op: Op, graph: Graph, blocks: list[int], outer_first: dict, halvings: int = 2) -> list[list[int]]:
    """The blocks with the outermost cuttable dimension halved once and twice more: a tile
    that is DMA-bound (element-wise work) hides more of its transfers behind its neighbours
    when there are more, smaller tiles; the estimate decides."""
    frozen = untileable_dims(op, graph)
    dims = sorted((d for d in range(len(blocks)) if d not in frozen and blocks[d] > 1), key=lambda d: outer_first[d])
    if not dims:
        return []
    d, out, current = dims[0], [], list(blocks)
    for _ in range(halvings):
        if current[d] <= 1:
            break
        current = current.copy()
        current[d] = -(-current[d] // 2)
        out.append(current)
    return out


def _aligned_blocks(op: Op, graph: Graph, hw) -> list[dict]:
    """Fixed blocks that fill the array's folds (module docstring), each a dict {dimension or
    "k": size} for ``_halve_to_fit``: output channels (GEMM N) at multiples of the columns;
    output pixels (GEMM M: rows of the outermost spatial dimension times the rest) at
    multiples of the rows (os) or columns (is); the reduction (K) at multiples of the rows
    (ws, is). Every combination of one choice per dimension, none included."""
    if op.kind not in REDUCTION_TILED_KINDS:
        return []
    shape = graph.tensors[op.outputs[0]].shape
    frozen = untileable_dims(op, graph)
    rows, cols, dataflow = hw.cores.pe_rows, hw.cores.pe_cols, hw.cores.dataflow
    grouped = op.kind == "Conv" and op.attrs.get("group", 1) != 1
    channel = 1 if op.kind == "Conv" else len(shape) - 1
    pixel_dim = 2 if op.kind == "Conv" else len(shape) - 2
    per_dim: list[list[tuple]] = []
    if channel not in frozen and channel >= 0:
        per_dim.append([(channel, cols * 2 ** j) for j in range(ALIGNED_MULTIPLES) if cols * 2 ** j < shape[channel]])
    fold_m = {"os": rows, "is": cols}.get(dataflow)
    if fold_m and 0 <= pixel_dim < len(shape) and pixel_dim not in frozen and pixel_dim != channel:
        inner = math.prod(shape[pixel_dim + 1:]) if op.kind == "Conv" else 1
        unit = fold_m // math.gcd(fold_m, inner)  # rows of the dimension that make whole folds
        per_dim.append([(pixel_dim, unit * 2 ** j) for j in range(ALIGNED_MULTIPLES) if unit * 2 ** j < shape[pixel_dim]])
    if dataflow in ("ws", "is") and not grouped:
        total = reduction_size(op, graph)
        per_dim.append([("k", rows * 2 ** j) for j in range(ALIGNED_MULTIPLES) if rows * 2 ** j < total])
    fixed = []
    for combo in itertools.product(*([None] + options for options in per_dim)):
        chosen = dict(c for c in combo if c is not None)
        if chosen:
            fixed.append(chosen)
    return fixed


def _operand_blocks(op: Op, graph: Graph) -> list[dict]:
    """Fixed blocks ({dimension: size}, for ``_halve_to_fit``) along the dimension an op's
    inputs lie side by side on (``npusim.graph.regions.operand_axis``: a Concat's axis) that
    cover 1, 2, 4, ... whole inputs, up to all of them.

    Halving the whole output keeps every input in each tile for as long as cutting another
    dimension shrinks the working set as much (it does until the views reach the alignment),
    so a Concat of many inputs ended in one-pixel tiles that each load a short run of every
    input (3,136 tiles of 250 loads of 8 B for 1,000 inputs of [1, 8, 28, 28] at 64 KiB).
    Tiles of k whole inputs load k views, each a band of one input (contiguous in the input's
    layout), and the other dimensions are halved until they fit; the estimate picks k (a
    larger k means longer runs in the output, a smaller one longer bands)."""
    found = operand_axis(op, graph)
    if found is None:
        return []
    axis, extents = found
    total = graph.tensors[op.outputs[0]].shape[axis]
    extent = max(extents)
    if axis in untileable_dims(op, graph) or extent <= 0:
        return []
    fixed, k = [], 1
    while k * extent < total:
        fixed.append({axis: k * extent})
        k *= 2
    return fixed


def _layout_problem(op: Op, graph: Graph) -> str | None:
    """Why the shapes of a GEMM-like op do not have the layout its tiling assumes, or None."""
    shapes = [graph.tensors[t].shape for t in op.inputs]
    out = graph.tensors[op.outputs[0]].shape
    if op.kind == "Conv" and (len(shapes) < 2 or len(shapes[0]) < 3 or len(shapes[1]) != len(shapes[0])
                              or len(out) != len(shapes[0])):
        return (f"a Conv needs input (N, C, spatial...), weight (O, I, kernel...) and output of one rank >= 3, "
                f"got {[list(s) for s in shapes[:2]]} -> {list(out)}")
    if op.kind == "Gemm" and (len(shapes) < 2 or len(shapes[0]) != 2 or len(shapes[1]) != 2):
        return f"a Gemm needs two rank-2 inputs, got {[list(s) for s in shapes[:2]]}"
    if op.kind == "MatMul" and (len(shapes) < 2 or not shapes[0] or not shapes[1]):
        return f"a MatMul needs two inputs of rank >= 1, got {[list(s) for s in shapes]}"
    return None


def _flat_spec(op, graph, limit, align, capacity) -> dict:
    out = graph.tensors[op.outputs[0]]
    small = sum(aligned(graph.tensors[t].size, align) for t in op.inputs[1:])
    per_element = graph.tensors[op.inputs[0]].itemsize + out.itemsize
    n = out.elements
    while n > 1 and small + aligned(-(-n // 1) * per_element, align) + align > limit:
        n = -(-n // 2)
    if small + n * per_element > limit:
        raise _too_small(op, 2 * (small + per_element), capacity)
    return {"flat": n}


def _tile_bytes(op, graph, box, k_range, last, align, acc="scratchpad") -> int:
    """Scratchpad bytes tiles of this shape need double-buffered: the tile's distinct input
    views and its output view twice (this tile's, and the next tile's loads while it
    computes or its store while the next one computes), and its partial sums once (the
    previous slice's, read, and this slice's, written: the next slice of the reduction
    reads the one this one writes, so they are not doubled) unless they stay in the core's
    accumulators (``acc`` = ``"core"``)."""
    seen = {}
    tensors = graph.tensors
    for t, region, steps in zip(op.inputs, op_input_boxes(op, graph, box, k_range, last), op_input_steps(op, graph)):
        if region is not None and (t, region) not in seen:
            seen[(t, region)] = tensors[t].itemsize * stepped_volume(region, steps)
    streamed = sum(aligned(b, align) for b in seen.values())
    out = graph.tensors[op.outputs[0]]
    streamed += aligned(out.itemsize * box_volume(box), align)
    in_scratchpad = k_range is not None and acc != "core"
    psums = 2 * aligned(PSUM_ITEMSIZE * box_volume(box), align) if in_scratchpad else 0
    return 2 * streamed + psums


def _sample_boxes(shape, blocks):
    """The first, an interior and the last tile: halos make interior tiles the largest."""
    return _sample_boxes_of(tuple(shape), tuple(blocks))


@functools.lru_cache(maxsize=4096)
def _sample_boxes_of(shape: tuple, blocks: tuple) -> dict:
    picks = []
    for which in ("first", "interior", "last"):
        box = []
        for n, b in zip(shape, blocks):
            count = -(-n // b)
            i = {"first": 0, "interior": min(1, count - 1), "last": count - 1}[which]
            box.append((i * b, min((i + 1) * b, n)))
        picks.append(tuple(box))
    return dict.fromkeys(picks)


def _working_set(op, graph, blocks, k, align, acc="scratchpad") -> int:
    """The double-buffered bytes of the largest tile of a spec (``_tile_bytes`` on the first,
    an interior and the last tile, and the first and last reduction slice)."""
    # the candidates ask for the same blocks again and again, with partial sums in the
    # scratchpad and in the core: both are summed at once
    both = memo.cached("working_sets", graph, op, (tuple(blocks), k, align),
                       lambda: _largest_tile_bytes_both(op, graph, blocks, k, align))
    return both[1] if acc == "core" else both[0]


def _largest_tile_bytes(op, graph, blocks, k, align, acc) -> int:
    """``_tile_bytes`` of the first, an interior and the last tile (``_sample_boxes``), each
    with the first and the last reduction slice: their largest."""
    both = _largest_tile_bytes_both(op, graph, blocks, k, align)
    return both[1] if acc == "core" else both[0]


def _largest_tile_bytes_both(op, graph, blocks, k, align) -> tuple[int, int]:
    """``_largest_tile_bytes`` with the partial sums in the scratchpad and in the core. The
    same sum as ``_tile_bytes``, with what it reads of the op looked up once
    (``_TileSizer``) and the output's and partial sums' bytes computed once per box
    (tests/test_tiler_fast.py holds the two equal)."""
    sizer = _tile_sizer(op, graph)
    slices = op_k_slices(op, graph, k)
    ends = [(slices[0], True)] if len(slices) == 1 else [(slices[0], False), (slices[-1], True)]
    split = slices[0] is not None  # reduction slices: partial sums, unless the core keeps them
    rule, inputs, out_itemsize = sizer.rule, sizer.inputs, sizer.out_itemsize
    worst = worst_in_core = 0
    for box in _sample_boxes_of(sizer.shape, tuple(blocks)):
        volume = box_volume(box)
        own = 2 * (-(-(out_itemsize * volume) // align) * align)
        psums = 2 * (-(-(PSUM_ITEMSIZE * volume) // align) * align) if split else 0
        for k_range, last in ends:
            streamed = 0
            seen = set() if sizer.repeats else None
            for (t, itemsize, steps), region in zip(inputs, rule(box, k_range, last)):
                if region is None:
                    continue
                if seen is not None:
                    if (t, region) in seen:
                        continue  # an input read twice is loaded once
                    seen.add((t, region))
                n = itemsize * (box_volume(region) if steps is None else stepped_volume(region, steps))
                streamed += -(-n // align) * align
            tile = 2 * streamed + own
            worst_in_core = max(worst_in_core, tile)
            worst = max(worst, tile + psums)
    return worst, worst_in_core


class _TileSizer:
    """What ``_tile_bytes`` reads of an op, looked up once per op: the output's shape and
    element size, its box rule, and (tensor id, element size, steps) of each input, and
    whether a tensor is read by two inputs (then its view counts once)."""

    def __init__(self, op: Op, graph: Graph) -> None:
        out = graph.tensors[op.outputs[0]]
        self.shape, self.out_itemsize = tuple(out.shape), out.itemsize
        self.rule = box_rule(op, graph)
        self.inputs = [(t, graph.tensors[t].itemsize, steps) for t, steps in zip(op.inputs, op_input_steps(op, graph))]
        self.repeats = len(set(op.inputs)) < len(op.inputs)


def _tile_sizer(op: Op, graph: Graph) -> _TileSizer:
    return memo.cached("tile_sizer", graph, op, None, lambda: _TileSizer(op, graph))


def _halve_to_fit(op, graph, capacity, align, preference, outer_first=None, fixed=None):
    """Blocks (and reduction slice) whose double-buffered working set fits ``capacity``
    (``_working_set``): halve what shrinks the working set
    most; ties to ``preference``, then to the dimension outermost in DRAM (``outer_first``:
    dimension -> storage position). ``fixed`` pins some blocks ({dim or "k": size})."""
    shape = graph.tensors[op.outputs[0]].shape
    fixed = fixed or {}
    frozen = set(untileable_dims(op, graph)) | {d for d in fixed if d != "k"}
    blocks = [fixed.get(d, n) for d, n in enumerate(shape)]
    splittable_k = (op.kind in K_SLICED_KINDS and not (op.kind == "Conv" and op.attrs.get("group", 1) != 1)
                    and "k" not in fixed)
    k_total = reduction_size(op, graph) if splittable_k else 0
    k = fixed.get("k", 0)
    position = outer_first or {d: -d for d in range(len(shape))}
    ws = _working_set(op, graph, blocks, k, align)
    while ws > capacity:
        options = []
        for d in range(len(shape)):
            if d in frozen or blocks[d] <= 1:
                continue
            trial = blocks.copy()
            trial[d] = -(-blocks[d] // 2)
            cls = "spatial" if op.kind not in REDUCTION_TILED_KINDS else _gemm_dim_class(op, graph, d)
            options.append((_working_set(op, graph, trial, k, align), cls != preference, position[d], trial, k))
        current_k = k or k_total
        if splittable_k and current_k > 1:
            new_k = -(-current_k // 2)
            options.append((_working_set(op, graph, blocks, new_k, align), preference != "reduction", len(shape),
                            blocks, new_k))
        if not options:
            raise _too_small(op, ws, capacity)
        if preference == "contiguous":  # outermost in DRAM first, whatever shrinks most
            best = min(options, key=lambda o: (o[2], o[0]))
        else:
            best = min(options, key=lambda o: o[:3])
        ws, blocks, k = best[0], best[3], best[4]
    return blocks, k


def _gemm_dim_class(op, graph, d) -> str:
    rank = len(graph.tensors[op.outputs[0]].shape)
    if op.kind == "Conv":
        return "channels" if d == 1 else "spatial"
    return "channels" if d == rank - 1 else "spatial"


def _best_order(op, graph, blocks, k, align, capacity=None, fixed_order=None, acc="scratchpad"):
    """Loop order reading the fewest bytes (or ``fixed_order``, restricted to the tiled
    dimensions), that byte count, and how many times each input is loaded in it
    (``_loads_in_order``); ``capacity`` (the budget) bounds what stays cached between uses."""
    shape = graph.tensors[op.outputs[0]].shape
    counts, tiled, sizes, depends, on_k, n_slices, cache = memo.cached(
        "order_inputs", graph, op, (tuple(blocks), k, align, capacity, acc),
        lambda: _order_inputs(op, graph, blocks, k, align, capacity, acc))
    best = None
    orders = itertools.permutations(tiled) if fixed_order is None else [tuple(d for d in fixed_order if d in tiled)]
    for order in orders:
        loads, spread, kept = _loads_in_order(order, counts, depends, on_k, n_slices, sizes, cache)
        traffic = sum(size * n for size, n in zip(sizes, loads))
        if best is None or (traffic, order) < best[:2]:
            best = (traffic, order, Reads(loads, spread, kept))
    traffic, order, reads = best if best else (sum(sizes), (), Reads([1.0] * len(sizes), [1.0] * len(sizes), 0))
    full_order = list(order) + [d for d in range(len(shape)) if d not in order]
    return full_order, traffic, reads


def _order_inputs(op, graph, blocks, k, align, capacity, acc) -> tuple:
    """What ``_best_order`` scores every loop order with, the same for all of them (memoised
    per blocks, so the orders tried for a candidate again cost only their scoring): the
    block counts, the tiled dimensions, each input's view bytes, the tiled dimensions each
    input moves with, whether it moves with the reduction slices, the slices, and the bytes
    that stay cached beyond the working set."""
    shape = graph.tensors[op.outputs[0]].shape
    counts = [-(-n // b) for n, b in zip(shape, blocks)]
    tiled = [d for d in range(len(shape)) if counts[d] > 1]
    base = tuple((0, min(b, n)) for n, b in zip(shape, blocks))
    slices = op_k_slices(op, graph, k)
    # An op reduced along its inputs (a Sum of N) reads each input in one slice: every input's
    # view counts, loaded once per output tile, none of them moving with the slices.
    by_input = op.kind in INPUT_REDUCED_KINDS
    first_k = None if by_input else slices[0]
    regions = op_input_boxes(op, graph, base, first_k, len(slices) == 1)
    sizes = [0 if r is None else graph.tensors[t].itemsize * stepped_volume(r, g)
             for t, r, g in zip(op.inputs, regions, op_input_steps(op, graph))]
    k_moved = (op_input_boxes(op, graph, base, slices[1], len(slices) == 2) if len(slices) > 1 and not by_input
               else regions)
    on_k = [len(slices) > 1 and k_moved[i] != regions[i] for i in range(len(op.inputs))]
    # the inputs' boxes once per tiled dimension moved one block (not once per input: a Concat
    # of 10,000 inputs would be quadratic), then which dimensions move each input
    moved_regions = {}
    for d in tiled:
        moved = list(base)
        moved[d] = (blocks[d], min(2 * blocks[d], shape[d]))
        moved_regions[d] = op_input_boxes(op, graph, tuple(moved), first_k, len(slices) == 1)
    depends = [{d for d in tiled if moved_regions[d][i] != regions[i]} for i in range(len(op.inputs))]
    cache = float("inf") if capacity is None else max(capacity - _working_set(op, graph, blocks, k, align, acc), 0)
    return counts, tiled, sizes, depends, on_k, len(slices), cache


def _loads_in_order(order, counts, depends, on_k, n_slices, sizes, cache) -> tuple[list[float], list[float], int]:
    """How many times each input view is loaded when the tiles run in loop ``order`` (outer
    first) with the reduction slices innermost, over what share of the tiles those loads
    fall (1: evenly over all; 1/c: all in the first of c iterations of a loop that reuses
    what they loaded), and the bytes kept cached beyond the working set.

    Walking the loops from the innermost out: a loop an input depends on multiplies its loads
    (each iteration reads other views) and the views it holds; across the iterations of a loop
    it does not depend on, an input of one view keeps it (it is in every tile's working set),
    and one of several views is read again unless they stayed cached. What stays is what the
    arena keeps: it gives up cached views for the next tile's loads first (double buffering),
    so ``cache`` bytes are free beyond the double-buffered working set, which already holds two
    views of each input (this tile's and the next one's); the inputs reused at a loop share
    them, and Belady's replacement on such a cyclic pattern keeps about the fraction of their
    views that fits (hit ratio min(1, cache / footprint))."""
    loads = [float(n_slices) if k else 1.0 for k in on_k]
    views = [n_slices if k else 1 for k in on_k]
    spread = [1.0] * len(loads)
    kept = 0
    for d in reversed(order):
        reused = [i for i in range(len(loads)) if d not in depends[i] and views[i] > 1]
        footprint = sum((views[i] - 2) * sizes[i] for i in reused if views[i] > 2)
        hit = 1.0 if footprint <= cache else cache / footprint
        kept = max(kept, min(footprint, cache))
        for i in range(len(loads)):
            if d in depends[i]:
                loads[i] *= counts[d]
                views[i] *= counts[d]
            else:
                again = 1 + (counts[d] - 1) * (1 - hit) if i in reused else 1.0
                loads[i] *= again
                spread[i] *= again / counts[d]
    return loads, spread, int(kept)


class Reads(list):
    """How many times each input view is loaded (a list), with ``spread``: the share of the
    tiles over which each input's loads fall, and ``kept``: the bytes cached beyond the
    double-buffered working set (``_loads_in_order``)."""

    def __init__(self, loads, spread, kept):
        super().__init__(loads)
        self.spread = list(spread)
        self.kept = kept


def _too_small(op, need, capacity) -> PlanningError:
    return PlanningError(
        f"budget {capacity} B is too small to tile op {op.name!r} ({op.kind}): its smallest tiles need "
        f"{need} B double-buffered (two tiles' inputs and outputs, one set of partial sums); use a budget >= {need} B")
