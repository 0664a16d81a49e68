"""Compute cost model: how many cycles an op occupies a core, and what it reads and writes.

GEMM-like ops (``op.gemm`` set: Conv as implicit GEMM, Gemm, MatMul) run on the systolic PE
array of R rows × C columns. SCALE-Sim's stall-free compute cycles (its
``systolic_compute_{os,ws,is}.py``; see shared/reference/scalesim/README.md): the layer is
tiled onto the array in *folds* that run back to back, one fold's drain not overlapping the
next one's fill:

===================  =====================  =======================
dataflow             folds                  cycles per fold
===================  =====================  =======================
output stationary    ⌈M/R⌉·⌈N/C⌉            K + R + C − 2
weight stationary    ⌈K/R⌉·⌈N/C⌉            M + 2R + C − 2
input stationary     ⌈K/R⌉·⌈M/C⌉            N + 2R + C − 2
===================  =====================  =======================

(SCALE-Sim prints the index of the last cycle, one less.) A fold is ``preload + stream +
skew``: the stationary operand loaded into the array (R cycles for ws and is, none for os),
the moving operand streamed (K for os, M for ws, N for is) and the pipeline's fill/drain skew
R + C − 2. A batched GEMM repeats the folds ``batch`` times. With ``cores.fold_overlap``
(TPU-style: the next fold's weights preload while this fold streams, and one fold's drain
overlaps the next one's fill; Jouppi et al., ISCA 2017, §2: the weight FIFO double-buffers a
weight tile to hide its 256-cycle shift-in) the folds pipeline, those of every batch element
(attention heads) included: ``batch · folds · max(stream, R) + preload + skew``. A fold
still takes at least R cycles: ws and is shift the next fold's R rows of stationary operands
in meanwhile, os shifts this fold's R rows of finished outputs out (double-buffered
accumulators), so an os layer with a short reduction (a depthwise conv's K = 9) is bound by
its output drain, not by K.

GEMVs and other GEMMs too thin for the array (``cores.gemv``): with ``fastest`` an array op
runs on the vector unit (``MACs / vector_lanes``: each lane accumulates one output's dot
product) when that is quicker than its folds — a batch-1 decode step's matrix-vector
products, which fill one row of the array per fold. ``array`` (the default) keeps every GEMM
on the array, as SCALE-Sim does.

Reduction slices chained in the core's accumulators (a tile spec with ``acc: core``, when the
K-split output block's 32-bit partial sums fit in ``cores.accumulator_size``): the slices
of one output block stream back to back with their partial sums kept in the array (os) or
its accumulator memory (ws, is), so no partial sum goes to the scratchpad. On os a block of
one fold keeps streaming its reduction through the same PEs: the slices before the last
pay only their stream, the last one the fill/drain skew — the block costs what it would
unsplit (SCALE-Sim's count of the untiled layer); with ``fold_overlap`` every slice but the
last drops its preload and skew. A block of several folds on an array that does not overlap
folds refills the array for each fold of each slice, as today.

Grouped and depthwise convs (a Conv whose GEMM view has ``batch`` = groups) run as
``cores.depthwise`` says:

- ``array`` (default): the groups are packed across the columns, one output channel per
  column, each column reducing over its own group's kernel window (K = kernel volume ·
  Cin/group): the GEMM M × (N·groups) × K once, not ``groups`` GEMMs of N columns. This is
  the channel-parallel mapping of depthwise convs on a systolic array (an assumption of the
  configs: it needs the array to feed each column its own input stream, as array designs
  with depthwise support do);
- ``vector``: on the vector unit, ``MACs / vector_lanes`` cycles (NPUs that pair the array
  with a SIMD/DSP unit run depthwise layers there);
- ``groups``: one GEMM per group of N columns (each depthwise channel on one column) —
  what npusim did before, kept for comparison.

Every other op runs on the vector unit: ``vector_ops / vector_lanes`` cycles.

Either way an op cannot finish faster than the scratchpad can feed it: ``scratchpad_bytes``
(operands re-read once per fold of the other dimension) at ``scratchpad.bytes_per_cycle``.

Several cores (``cores.count``, ``cores.split_ops``): a stream with more than one core splits
every op across them (``core_parts``: by output channels, rows or batch, the fastest), the
cores reading the shared scratchpad at its one bandwidth; the op ends with its slowest core.

An unrolled array (``cores.unroll``, with optional local levels ``cores.levels``) replaces the
R × C fold model: its cycles, its scratchpad reads and writes and every local level's accesses
and energy come from ZigZag's per-op cost model with the best temporal mapping
(``npusim.hw.mapping``; ``array_cycles``, ``unrolled_cost``). The op's cycles are the larger of
its temporal iterations (+ systolic drain) and what the busiest port of a local level or the
scratchpad needs (bound ``local_levels`` or ``scratchpad``).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import replace
from operator import attrgetter

from npusim.graph.columns import RUN_CODES
from npusim.graph.model import Gemm, Graph, Op, op_fields, tensor_fields
from npusim.graph.ops.kinds import GROUPED_KINDS
from npusim.hw import mapping
from npusim.hw.config import Hardware
from npusim.hw.silicon import level_figures, scratchpad_byte_energy

DATAFLOWS = ("os", "ws", "is")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def fold_shape(gemm: Gemm, rows: int, cols: int, dataflow: str) -> tuple[int, int, int]:
    """(folds, stream, preload) of one GEMM of a batch (see the module docstring)."""
    m, n, k = gemm.m, gemm.n, gemm.k
    if dataflow == "os":
        return ceil_div(m, rows) * ceil_div(n, cols), k, 0
    if dataflow == "ws":
        return ceil_div(k, rows) * ceil_div(n, cols), m, rows
    if dataflow == "is":
        return ceil_div(k, rows) * ceil_div(m, cols), n, rows
    raise ValueError(f"unknown dataflow {dataflow!r}, expected one of {', '.join(DATAFLOWS)}")


def systolic_cycles(gemm: Gemm, rows: int, cols: int, dataflow: str, fold_overlap: bool = False,
                    chained: str | None = None) -> int:
    """Stall-free cycles of a (batched) GEMM on a rows × cols array (SCALE-Sim's count + 1;
    with ``fold_overlap`` the folds pipeline). ``chained``: the GEMM is a reduction slice of
    an output block whose partial sums stay in the core, ``"first"`` (or any slice but the
    last) or ``"last"`` (module docstring); or a tile of a run that keeps the stationary operand
    in the array, ``"run-first"``, ``"run-middle"`` or ``"run-last"`` (``stationary_run``)."""
    folds, stream, preload = fold_shape(gemm, rows, cols, dataflow)
    skew = rows + cols - 2
    if chained in RUN_POSITIONS:
        if gemm.batch * folds == 1 and dataflow in STATIONARY_OPERAND:
            return stationary_run(stream, preload, skew, chained)
        chained = None  # the array cannot keep it: the tile pays its folds in full
    if fold_overlap:
        if chained and chained != "last":
            return gemm.batch * folds * max(stream, rows)
        return gemm.batch * folds * max(stream, rows) + preload + skew
    if chained and dataflow == "os" and folds == 1 and chained != "last":
        return gemm.batch * stream
    return gemm.batch * folds * (preload + stream + skew)


#: Which operand a weight- or input-stationary array holds still (``"b"``: the second input, a
#: GEMM's weights; ``"a"``: the first), hence which operand a run of tiles must share.
STATIONARY_OPERAND = {"ws": "b", "is": "a"}
#: Positions of a tile in a run of tiles sharing the stationary operand (``npusim.graph.tiling``).
RUN_POSITIONS = ("run-first", "run-middle", "run-last")


def stationary_run(stream: int, preload: int, skew: int, position: str) -> int:
    """Cycles of a one-fold tile in a run of consecutive tiles that share the operand a ws
    (weights) or is (inputs) array holds still: the array keeps it and the next tile's
    moving operand streams in behind this one's, so the run costs what one fold streaming all
    of it costs (preload + Σ stream + skew, SCALE-Sim's fold with M, resp. N, the run's
    length): the first tile pays the preload, the last one the fill/drain skew, the ones
    between only their stream. The counterpart of the os reduction chain above, where the
    partial sums are what stays (Jouppi et al., ISCA 2017, §2: a weight tile stays in the
    matrix unit while up to 4,096 input rows stream through it)."""
    return stream + (preload if position == "run-first" else 0) + (skew if position == "run-last" else 0)


# -- unrolled arrays (cores.unroll) -----------------------------------------------------------------

#: (weights, inputs, outputs) bits of an op whose tensors are not at hand (the tiler's GEMMs of a
#: generated graph pass theirs)
DEFAULT_BITS = (8, 8, 8)


_MEMO: dict[int, tuple[weakref.ref, dict]] = {}


def _memo(hw: Hardware) -> dict:
    """A cache of one Hardware object's unrolled-core figures, found by identity: hashing a
    Hardware hashes every field of every block, which costs more than a cached mapping."""
    entry = _MEMO.get(id(hw))
    if entry is not None and entry[0]() is hw:
        return entry[1]
    cache: dict = {}
    _MEMO[id(hw)] = (weakref.ref(hw, lambda _, key=id(hw): _MEMO.pop(key, None)), cache)
    return cache


def core_model(hw: Hardware) -> mapping.Core:
    """The core as ``npusim.hw.mapping`` sees it: the unrolled array, its local levels (figures
    from ``npusim.hw.silicon.level_figures``) and the scratchpad on top of every operand, whose
    reads and writes share ``scratchpad.bytes_per_cycle`` and cost its energy per byte."""
    memo = _memo(hw)
    core = memo.get("core")
    if core is None:
        core = memo["core"] = _core_model(hw)
    return core


def _core_model(hw: Hardware) -> mapping.Core:

    c, sp = hw.cores, hw.scratchpad
    levels = []
    for lv in c.levels:
        fig = level_figures(hw, lv)
        levels.append(mapping.Level(lv.name, lv.size * 8, lv.operands, lv.shared_over, lv.port_bits,
                                    lv.min_access_bits or lv.port_bits, fig.read_pj, fig.write_pj,
                                    lv.read_ports, lv.write_ports))
    read, write = scratchpad_byte_energy(hw)
    width = 8 * sp.bytes_per_cycle
    levels.append(mapping.Level(mapping.SCRATCHPAD, math.inf, mapping.OPERANDS, None, width,
                                min(max(sp.min_access_bits, 1), width), read * sp.bytes_per_cycle,
                                write * sp.bytes_per_cycle, rw_port=True))
    return mapping.Core(c.unroll, c.systolic, tuple(levels))


def loop_nest(gemm: Gemm, hw: Hardware, bits: tuple[int, int, int] | None = None,
              kind: str = "MatMul") -> mapping.LoopNest:
    """The loop nest an unrolled array runs for ``gemm``: a convolution's own (``Gemm.loops``),
    else the 1×1 convolution OX = M, C = K, K = N, B = batch; a grouped conv packed on the array
    (``cores.depthwise: array``) unrolls its groups where the array unrolls K. ``bits``: the
    (weights, inputs, outputs) operand widths."""
    w_bits, i_bits, o_bits = bits or DEFAULT_BITS
    psum = hw.cores.partial_sum_bits or 2 * i_bits
    # the core's results are no wider than the partial sums they accumulate in: a reduction
    # slice writing 32-bit partial sums (npusim.graph.tiling's .psum tensors) on a core with
    # 16-bit accumulators holds 16 bits in its registers (the tensor keeps its 4 bytes an element)
    o_bits = min(o_bits, psum)
    lp = gemm.loops
    if lp is not None:
        sizes = (("B", lp.b), ("G", lp.g), ("K", lp.k), ("C", lp.c), ("OY", lp.oy), ("OX", lp.ox), ("FY", lp.fy),
                 ("FX", lp.fx))
        return mapping.LoopNest(sizes, (lp.sy, lp.sx), (lp.dy, lp.dx), lp.iy, lp.ix, w_bits, i_bits, o_bits, psum,
                                pack_groups=lp.g > 1 and hw.cores.depthwise == "array")
    grouped = kind in GROUPED_KINDS and gemm.batch > 1
    sizes = (("B", 1 if grouped else gemm.batch), ("G", gemm.batch if grouped else 1), ("K", gemm.n),
             ("C", gemm.k), ("OY", 1), ("OX", gemm.m), ("FY", 1), ("FX", 1))
    return mapping.LoopNest(sizes, w_bits=w_bits, i_bits=i_bits, o_bits=o_bits, psum_bits=psum,
                            weights_batched=gemm.batch > 1 and not grouped,
                            pack_groups=grouped and hw.cores.depthwise == "array")


def unrolled_cost(gemm: Gemm, hw: Hardware, bits: tuple[int, int, int] | None = None,
                  kind: str = "MatMul") -> mapping.CoreCost:
    """The op's cost on an unrolled core with its best temporal mapping (energy included)."""
    memo = _memo(hw)
    key = ("cost", gemm, gemm.loops, bits, kind)  # Gemm's equality leaves its loops out
    cost = memo.get(key)
    if cost is None:
        cost = memo[key] = mapping.core_cost(core_model(hw), loop_nest(gemm, hw, bits, kind))
    return cost


def array_cycles(gemm: Gemm, hw: Hardware, chained: str | None = None, bits: tuple[int, int, int] | None = None,
                 kind: str = "MatMul") -> float:
    """Cycles of one (batched) GEMM on a core's array: SCALE-Sim's folds on an R × C array
    (``systolic_cycles``), else the unrolled array's cycles with its best mapping
    (``npusim.hw.mapping.core_cycles``: temporal iterations + drain, or the busiest port of a
    level); a reduction slice chained in the accumulators before the last skips the drain."""
    c = hw.cores
    if not c.unroll:
        return systolic_cycles(gemm, c.pe_rows, c.pe_cols, c.dataflow, c.fold_overlap, chained)
    cycles, drain, _ = _unrolled_cycles(gemm, hw, bits, kind)
    return cycles - drain if chained == "first" else cycles


def _unrolled_cycles(gemm: Gemm, hw: Hardware, bits, kind: str) -> tuple[float, float, bool]:
    """``mapping.core_cycles`` of the GEMM on the unrolled array, memoised per hardware."""
    memo = _memo(hw)
    key = ("cycles", gemm, gemm.loops, bits, kind)
    found = memo.get(key)
    if found is None:
        found = memo[key] = mapping.core_cycles(core_model(hw), loop_nest(gemm, hw, bits, kind))
    return found


def array_bound(gemm: Gemm, hw: Hardware, bits: tuple[int, int, int] | None = None, kind: str = "MatMul") -> str:
    """What bounds the GEMM on the array: 'array', or 'scratchpad_port' when an unrolled array
    waits for the scratchpad's port, one operand's word a cycle (``mapping.CoreCost.
    scratchpad_bound``: not its bytes per cycle, which is 'scratchpad', ``op_core_cycles``)."""
    if not hw.cores.unroll:
        return "array"
    return "scratchpad_port" if _unrolled_cycles(gemm, hw, bits, kind)[2] else "array"


def array_folds(gemm: Gemm, hw: Hardware, kind: str = "MatMul") -> int:
    """Units of array work (``band_count``): folds of an R × C array, or the output blocks an
    unrolled array computes one after another."""
    c = hw.cores
    if not c.unroll:
        return gemm.batch * fold_shape(gemm, c.pe_rows, c.pe_cols, c.dataflow)[0]
    nest = loop_nest(gemm, hw, None, kind)
    sp = mapping.spatial_mapping(core_model(hw), nest)
    return math.prod(s for d, s in sp.temporal if d in ("B", "G", "K", "OY", "OX"))


def array_gemm(kind: str, gemm: Gemm | None, hw: Hardware) -> Gemm | None:
    """The GEMM the array runs for an op of ``kind`` whose GEMM view is ``gemm`` (None: the op
    runs on the vector unit: a grouped conv with ``cores.depthwise: vector``, or a GEMM the
    vector lanes finish sooner with ``cores.gemv: fastest``)."""
    if gemm is None:
        return None
    mapped = gemm
    if kind in GROUPED_KINDS and gemm.batch > 1:  # grouped / depthwise (batch = groups)
        if hw.cores.depthwise == "vector":
            return None
        if hw.cores.depthwise == "array":
            if not hw.cores.unroll:  # an unrolled array packs the groups itself (loop_nest)
                mapped = Gemm(m=gemm.m, n=gemm.n * gemm.batch, k=gemm.k, batch=1)
    c = hw.cores
    if c.gemv == "fastest" and gemm.macs / c.vector_lanes < array_cycles(mapped, hw, kind=kind):
        return None
    return mapped


def array_macs(graph: Graph, hw: Hardware) -> int:
    """MACs the PE arrays do on ``graph`` (ops mapped to the array by ``array_gemm``; a grouped
    conv on the vector unit is not array work): the numerator of the array utilisation,
    MACs / (cycles × pe_rows × pe_cols × cores), the figure systolic-array papers quote."""
    kinds, gemms, macs = op_fields(graph, "kind", "gemm", "macs")
    return sum(m for kind, gemm, m in zip(kinds, gemms, macs) if array_gemm(kind, gemm, hw) is not None)


def array_pes(hw: Hardware) -> int:
    """PEs of every core's array (the utilisation's denominator per cycle)."""
    return hw.cores.pes * hw.cores.count


def cores_per_stream(hw: Hardware, streams: int) -> int:
    """Cores one compute stream drives: with ``cores.split_ops`` and fewer streams than cores,
    each stream gets ``count // streams`` cores and splits every op across them; otherwise one
    (stream s runs on core s mod count)."""
    count = hw.cores.count
    if hw.cores.split_ops and 0 < streams < count:
        return count // streams
    return 1


def _blocks(total: int, unit: int, parts: int) -> list[int]:
    """``total`` cut into at most ``parts`` blocks, each a multiple of ``unit`` where the
    total allows it (so no core's array is left with a ragged fold it could have avoided)."""
    per = ceil_div(ceil_div(total, unit), parts) * unit if total > unit else ceil_div(total, parts)
    return [min(per, total - start) for start in range(0, total, per)]


def core_parts(gemm: Gemm, hw: Hardware, cores: int) -> tuple[Gemm, ...]:
    """The GEMMs ``cores`` cores run for one array op, one each, split as multi-core NPUs
    split a layer over cores that share the scratchpad (each core computes a slice of the
    output from the shared inputs; the op ends when the slowest core does):

    - by output channels (N: each core its own weights, the input read by every core),
    - by output rows (M: each core its own input rows, the weights read by every core),
    - by batch (attention heads, batched MatMuls),

    each cut in multiples of the array dimension it maps to (os: M on rows, N on columns;
    ws: N on columns; is: M on columns). The split with the fewest cycles on its slowest core
    wins; ties go to batch, then channels (weights are the bigger operand in most layers).
    One core: the GEMM itself."""
    if cores <= 1:
        return (gemm,)
    rows, cols, dataflow = hw.cores.pe_rows, hw.cores.pe_cols, hw.cores.dataflow
    m_unit = {"os": rows, "ws": 1, "is": cols}[dataflow]
    if hw.cores.unroll:  # cut where the array unrolls: K for channels, whole output rows for pixels
        unroll = dict(hw.cores.unroll)
        cols = unroll.get("K", 1)
        lp = gemm.loops
        m_unit = lp.ox * unroll.get("OY", 1) if lp is not None and lp.b == 1 else unroll.get("OX", 1)
    candidates = []
    if gemm.batch > 1:
        candidates.append(tuple(_part(gemm, batch=b) for b in _blocks(gemm.batch, 1, cores)))
    candidates.append(tuple(_part(gemm, n=n) for n in _blocks(gemm.n, cols, cores)))
    candidates.append(tuple(_part(gemm, m=m) for m in _blocks(gemm.m, m_unit, cores)))

    def slowest(parts):
        return max(array_cycles(g, hw) for g in parts)
    return min(candidates, key=slowest)  # min keeps the first of equals: batch, channels, rows


def _part(gemm: Gemm, m: int | None = None, n: int | None = None, batch: int | None = None) -> Gemm:
    """A slice of ``gemm`` (M rows, N columns or a batch), with the conv loop nest it keeps
    (output rows for M, output channels for N, groups for a grouped conv's batch)."""
    part = Gemm(m=gemm.m if m is None else m, n=gemm.n if n is None else n, k=gemm.k,
                batch=gemm.batch if batch is None else batch)
    lp = gemm.loops
    if lp is None:
        return part
    if n is not None:
        return replace(part, loops=replace(lp, k=n))
    if batch is not None and lp.g == gemm.batch:
        return replace(part, loops=replace(lp, g=batch))
    if m is not None and lp.b == 1 and m % lp.ox == 0:
        oy = m // lp.ox
        return replace(part, loops=replace(lp, oy=oy, iy=min(lp.sy * (oy - 1) + lp.dy * (lp.fy - 1) + 1, lp.iy or oy)))
    return part


def core_cycles(kind: str, gemm: Gemm | None, macs: int, vector_ops: float, hw: Hardware,
                cores: int = 1, fused: bool = False, chained: str | None = None,
                bits: tuple[int, int, int] | None = None) -> tuple[list[float], str]:
    """(cycles of each core working on it, 'array' | 'vector' | 'scratchpad_port') of an op's (or
    a tile's) compute spread over ``cores`` cores (``core_parts``); vector work splits evenly by
    elements. Scratchpad aside (an unrolled array's scratchpad port is part of its cycles,
    ``array_cycles``, and 'scratchpad_port' says when it sets them: ``array_bound``). ``chained``: a reduction slice chained in the accumulators
    (``systolic_cycles``); ``bits``: the operands' (weights, inputs, outputs) widths.

    A ``fused`` op (a GEMM with its element-wise epilogue, ``npusim.graph.fusion``) runs the
    epilogue on the vector unit while the array computes: each core takes
    ``max(array cycles, vector_ops / vector_lanes / cores)``."""
    core = hw.cores
    mapped = array_gemm(kind, gemm, hw)
    if mapped is not None:
        pieces = core_parts(mapped, hw, cores)
        parts = [float(array_cycles(g, hw, chained, bits, kind)) for g in pieces]
        epilogue = vector_ops / core.vector_lanes / cores if fused else 0.0
        if epilogue > max(parts):
            return [max(p, epilogue) for p in parts], "vector"
        slowest = pieces[parts.index(max(parts))]
        return [max(p, epilogue) for p in parts], array_bound(slowest, hw, bits, kind)
    # a GEMM on the vector unit (a grouped conv, a GEMV): its MACs, then its fused epilogue
    work = macs + (vector_ops if fused else 0) if gemm is not None else vector_ops
    return [work / core.vector_lanes / cores] * cores, "vector"


def compute_cycles(kind: str, gemm: Gemm | None, macs: int, vector_ops: float, hw: Hardware,
                   cores: int = 1, fused: bool = False, chained: str | None = None,
                   bits: tuple[int, int, int] | None = None) -> tuple[float, str]:
    """(cycles, 'array' | 'vector') of an op's (or a tile's) compute on ``cores`` cores (its
    slowest core), scratchpad aside."""
    parts, bound = core_cycles(kind, gemm, macs, vector_ops, hw, cores, fused, chained, bits)
    return max(parts), bound


def operand_bits(op: Op, graph: Graph) -> tuple[int, int, int]:
    """(weights, inputs, outputs) bits of an array op: its second input, first input and
    output's element widths."""
    t = graph.tensors
    w = t[op.inputs[1]].itemsize if len(op.inputs) > 1 else t[op.inputs[0]].itemsize
    return 8 * w, 8 * t[op.inputs[0]].itemsize, 8 * t[op.outputs[0]].itemsize


def scratchpad_bytes(op: Op, graph: Graph, hw: Hardware, cores: int = 1) -> tuple[int, int]:
    """(bytes read, bytes written) on the scratchpad by an op, with the array's operand reuse.

    An op on the array reads its operands once per fold of the other dimension, as SCALE-Sim
    counts its SRAM traffic (``sram_ifmap_reads`` / ``sram_filter_reads`` / ``sram_ofmap_writes``,
    the input matrix A = M × K in its im2col view, the weights B = K × N):

    ========  ======================  ======================  =====================
    dataflow  A (inputs[0]) read      B (inputs[1]) read      output written
    ========  ======================  ======================  =====================
    os        M·K · ⌈N/C⌉             K·N · ⌈M/R⌉             M·N
    ws        M·K · ⌈N/C⌉             K·N (stationary)        M·N · ⌈K/R⌉
    is        M·K (stationary)        K·N · ⌈M/C⌉             M·N · ⌈K/R⌉
    ========  ======================  ======================  =====================

    (times ``batch``, in each operand's bytes per element; partial sums of ws and is are
    written once per row fold). With a stationary-operand register file of S bytes per PE
    (``cores.stationary_register``) a PE holds ``h = S / itemsize`` folds' stationary operands,
    so the reduction runs over h row folds before a partial sum leaves the array: outputs are
    written ⌈⌈K/R⌉ / h⌉ times (ZigZag's ``tpu_like`` holds 128 weights per PE and writes each
    output once; shared/reference/zigzag/). Grouped convs packed on the array read each group's inputs
    once (only its own column uses them). Other inputs (a bias) and every vector-unit op read
    each input once and write each output once. Split over ``cores`` cores (``core_parts``),
    each core reads what its own slice needs: the sum over the slices (the operand not cut is
    read by every core). A marker op (``attrs["marker"]``: the KV-cache liveness markers of
    ``npusim.graph.decoder``) reads and writes nothing."""
    if op.attrs.get("marker"):  # a liveness marker (npusim.graph.decoder): touches no data
        return 0, 0
    gemm = array_gemm(op.kind, op.gemm, hw)
    if gemm is None or len(op.inputs) < 2:  # every input read once, every output written once
        read = sum(graph.tensors[t].size for t in dict.fromkeys(op.inputs))
        written = sum(graph.tensors[t].size for t in op.outputs)
        return read, written
    if hw.cores.unroll:
        return _unrolled_scratchpad_bytes(op, graph, hw, gemm, cores)
    rows, cols = hw.cores.pe_rows, hw.cores.pe_cols
    a, b = (graph.tensors[t] for t in op.inputs[:2])
    out = graph.tensors[op.outputs[0]]
    dataflow = hw.cores.dataflow
    packed = op.kind in GROUPED_KINDS and op.gemm.batch > 1  # packed groups: each column its own inputs
    stationary = b if dataflow == "ws" else a
    held = max(hw.cores.stationary_register // stationary.itemsize, 1)  # folds of stationary operand a PE holds
    read = sum(graph.tensors[t].size for t in dict.fromkeys(op.inputs[2:]) if t not in op.inputs[:2])
    written = sum(graph.tensors[t].size for t in op.outputs[1:])
    in_core = out.kind == "accumulator"  # a reduction slice whose partial sums stay in the core
    for part in core_parts(gemm, hw, cores):
        m, n, k, batch = part.m, part.n, part.k, part.batch
        a_times = 1 if packed else {"os": ceil_div(n, cols), "ws": ceil_div(n, cols), "is": 1}[dataflow]
        b_times = {"os": ceil_div(m, rows), "ws": 1, "is": ceil_div(m, cols)}[dataflow]
        out_times = 1 if dataflow == "os" else ceil_div(ceil_div(k, rows), held)
        read += batch * (m * k * a.itemsize * a_times + k * n * b.itemsize * b_times)
        written += 0 if in_core else batch * m * n * out.itemsize * out_times
    return read, written


def _unrolled_scratchpad_bytes(op: Op, graph: Graph, hw: Hardware, gemm: Gemm, cores: int) -> tuple[int, int]:
    """``scratchpad_bytes`` on an unrolled core: the scratchpad's word reads and writes of the
    op's best mapping (``npusim.hw.mapping``, the top level of every operand) times the bytes of
    a word (``scratchpad.bytes_per_cycle``), summed over the cores' slices; the op's other inputs
    (a bias) read and its other outputs written once, a reduction slice kept in the core
    (an ``accumulator`` output) writes nothing."""
    bits = operand_bits(op, graph)
    word = hw.scratchpad.bytes_per_cycle
    read = sum(graph.tensors[t].size for t in dict.fromkeys(op.inputs[2:]) if t not in op.inputs[:2])
    written = sum(graph.tensors[t].size for t in op.outputs[1:])
    in_core = graph.tensors[op.outputs[0]].kind == "accumulator"
    for part in core_parts(gemm, hw, cores):
        top = unrolled_cost(part, hw, bits, op.kind).levels.get(mapping.SCRATCHPAD)
        if top is not None:
            read += round(top.reads * word)
            written += 0 if in_core else round(top.writes * word)
    return read, written


def level_energy(op: Op, graph: Graph, hw: Hardware, cores: int = 1) -> dict[str, float]:
    """Dynamic energy (pJ) of each local level (``cores.levels``) for an op on an unrolled core:
    word reads x ``read_energy`` + word writes x ``write_energy`` of the op's best mapping
    (``npusim.hw.mapping``: ZigZag's ``calc_memory_energy_cost``), summed over the cores'
    slices. Empty for an R x C core or an op off the array."""
    if not hw.cores.levels or len(op.inputs) < 2 or op.attrs.get("marker"):
        return {}
    gemm = array_gemm(op.kind, op.gemm, hw)
    if gemm is None:
        return {}
    bits = operand_bits(op, graph)
    out = {lv.name: 0.0 for lv in hw.cores.levels}
    for part in core_parts(gemm, hw, cores):
        for name, t in unrolled_cost(part, hw, bits, op.kind).levels.items():
            if name != mapping.SCRATCHPAD:
                out[name] += t.energy_pj
    return out


def register_accesses(op: Op, hw: Hardware, cores: int = 1) -> tuple[int, int]:
    """(stationary-register accesses, accumulator-register accesses) of an op on the array.

    The optional PE register files (``cores.stationary_register``, ``cores.accumulator_register``)
    are charged as ZigZag charges its ``tpu_like`` PE registers (shared/reference/zigzag/): the
    accumulator is read and written once per MAC (2 accesses: the partial sum in, the new one
    out); the stationary operand (ws: weights B, is: inputs A) is read once per MAC and written
    once per element loaded into the array (K·N per ws fold pass, M·K per is pass, over
    ``core_parts``). os keeps its outputs stationary in the accumulator and streams both inputs:
    no stationary-operand register. Ops off the array (vector unit) use neither."""
    gemm = array_gemm(op.kind, op.gemm, hw)
    if gemm is None or hw.cores.unroll:  # an unrolled core's registers are levels (level_energy)
        return 0, 0
    c = hw.cores
    accumulator = 2 * op.macs if c.accumulator_register > 0 else 0
    if c.stationary_register <= 0 or c.dataflow == "os":
        return 0, accumulator
    loaded = sum(p.batch * (p.k * p.n if c.dataflow == "ws" else p.m * p.k) for p in core_parts(gemm, hw, cores))
    return op.macs + loaded, accumulator


def stream_bands(op: Op, graph: Graph, hw: Hardware, cores: int = 1) -> int:
    """Bands an op streams in (``cores.stream_bands``): its compute starts when the first band
    of each input being loaded has arrived and cannot end before the last band of them plus one
    band of compute; the store of its result starts after its first band and ends one band of
    store after it (``npusim.sim.engine``). This is how NPUs overlap a layer's DMA with its own
    compute (double-buffered sub-blocks, a semaphore per block). A marker op does not stream."""
    if op.attrs.get("marker"):
        return 1
    out = sum(graph.tensors[t].elements for t in op.outputs)
    return band_count(op.kind, op.gemm, out, hw, cores)


def band_count(kind: str, gemm: Gemm | None, out_elements: int, hw: Hardware, cores: int = 1) -> int:
    """``cores.stream_bands``, but at least one unit of the op's work per band: a fold of the
    array (per core, times the batch) or one pass of the vector lanes over the output, so a
    one-fold op does not stream."""
    limit = hw.cores.stream_bands
    if limit <= 1:
        return 1
    mapped = array_gemm(kind, gemm, hw)
    if mapped is not None:
        units = max(array_folds(p, hw, kind) for p in core_parts(mapped, hw, cores))
    else:
        units = ceil_div(out_elements, hw.cores.vector_lanes * cores)
    return max(1, min(limit, units))


def chain_position(op: Op, hw: Hardware | None = None) -> str | None:
    """``"first"``/``"last"`` for a tile whose reduction slice is chained in the core's
    accumulators (``npusim.graph.tiling``, spec ``acc: core``); for a tile in a run of tiles
    sharing the operand ``hw``'s dataflow holds still (tile attribute ``runs``), its position
    there (``"run-first"``, ``"run-middle"``, ``"run-last"``); else None."""
    if not op.attrs:
        return None
    if op.attrs.get("acc") == "core":
        return "last" if op.attrs.get("k_last") else "first"
    runs = op.attrs.get("runs")
    if runs and hw is not None and not hw.cores.unroll:
        operand = STATIONARY_OPERAND.get(hw.cores.dataflow)
        if operand in runs:
            return "run-" + runs[operand]
    return None


def gemm_identity(gemm: Gemm | None) -> tuple | None:
    """What the figures here read of a GEMM, as a key: the fields ``Gemm``'s equality
    compares and its loop nest, which that equality leaves out (an unrolled array's cycles
    read it). A plain tuple: it hashes without a call of the dataclass's ``__hash__`` (the
    simulator keys every op of a tiled graph by it, ``cost_signature``)."""
    return None if gemm is None else (gemm.m, gemm.n, gemm.k, gemm.batch, gemm.loops)


#: What ``cost_signature`` reads of each input and output: (shape, dtype, itemsize, kind).
_TENSOR_FIGURES = attrgetter("shape", "dtype", "itemsize", "kind")


def tensor_figures(graph: Graph) -> list[tuple]:
    """What ``cost_signature`` reads of each tensor of ``graph``, for all of them at once: a
    caller asking the signature of every op passes it (cheaper than reading them op by op)."""
    return list(zip(*tensor_fields(graph, "shape", "dtype", "itemsize", "kind")))


def cost_classes(graph: Graph) -> tuple[list[int], list[int]]:
    """(every op's cost class, the first op of each class): ops share a class exactly when their
    ``cost_signature`` is equal, classes numbered in the order of their first op. Each op is
    keyed by its signature with each tensor's figures replaced by their number among the
    graph's distinct ones (equal keys exactly when equal signatures, and cheaper to hash: a
    Llama-3.2-1B decode step's 25,894 ops have 27 distinct figures and 32 classes)."""
    numbers: dict[tuple, int] = {}
    figures = [numbers.setdefault(f, len(numbers)) for f in tensor_figures(graph)]
    classes: dict[tuple, int] = {}
    signatures = (_column_signatures(graph, figures) if hasattr(graph.ops, "tile_of")
                  else (cost_signature(op, graph, figures) for op in graph.ops))
    class_of = [classes.setdefault(signature, len(classes)) for signature in signatures]
    first = dict(zip(reversed(class_of), range(len(class_of) - 1, -1, -1)))  # (the earliest op written last)
    return class_of, [first[k] for k in range(len(classes))]


def _column_signatures(graph: Graph, figures: list):
    """``cost_signature`` of every op of a graph stored as columns (``npusim.graph.columns``),
    in order: a tile's read from its columns (its attributes are the tiler's: no ``marker``,
    the tiled op's ``epilogue``, ``acc``/``k_last`` and ``runs`` as codes), any other op's from
    the op. Equal, tuple for tuple, to ``cost_signature``'s (``tests/test_graph_columns.py``)."""
    ops = graph.ops
    identities = [gemm_identity(g) for g in ops.gemms]
    kinds, tiled_ops, input_ptr, inputs, output_ptr, outputs = (
        ops.kinds, ops.tiled_ops, ops.input_ptr, ops.inputs, ops.output_ptr, ops.outputs)
    runs_of = [None if not code else tuple(sorted(
        (operand, RUN_CODES[position]) for operand, position in (("a", code & 3), ("b", code >> 2)) if position))
        for code in range(16)]
    figure = figures.__getitem__
    for i, (tiled, kind, gemm, macs, vector_ops, acc, runs) in enumerate(
            zip(ops.tile_of, ops.kind, ops.gemm, ops.macs, ops.vector_ops, ops.acc, ops.runs)):
        if tiled < 0:
            yield cost_signature(ops[i], graph, figures)
            continue
        ins = tuple(inputs[input_ptr[i]:input_ptr[i + 1]])
        repeats = None if len(set(ins)) == len(ins) else tuple(map(ins.index, ins))
        yield (kinds[kind], None if gemm < 0 else identities[gemm], macs, vector_ops, tuple(map(figure, ins)), repeats,
               tuple(map(figure, outputs[output_ptr[i]:output_ptr[i + 1]])), None,
               tiled_ops[tiled][1] is not None, "core" if acc else None, acc == 2 if acc else None, runs_of[runs])


def cost_signature(op: Op, graph: Graph, figures: list | None = None) -> tuple:
    """Everything the per-op figures of this module read of an op (``op_core_cycles``,
    ``scratchpad_bytes``, ``register_accesses``, ``level_energy``, ``stream_bands``): its kind,
    GEMM with the loop nest (which ``Gemm``'s equality leaves out), MACs and vector work, the
    attributes they read (``marker``, ``epilogue``, ``acc``, ``k_last``, ``runs``), and each input's
    and output's shape, dtype, itemsize and kind, with the position of the first input each
    input repeats. Ops with equal signatures have equal figures on any hardware and core count,
    so a caller may compute them once per signature: the tiles of one op share theirs. A figure
    here that reads more of an op must add it here (``tests/test_cost_signature.py`` checks equal
    signatures give equal figures over tiled graphs on every shipped hardware). ``figures``:
    the graph's ``tensor_figures``, when the caller has them."""
    attrs = op.attrs
    runs = attrs.get("runs")
    ins = op.inputs
    if figures is None:  # (read from the op's own tensors)
        tensors = graph.tensors
        inputs = tuple(map(_TENSOR_FIGURES, map(tensors.__getitem__, ins)))
        outputs = tuple(map(_TENSOR_FIGURES, map(tensors.__getitem__, op.outputs)))
    else:
        inputs = tuple(map(figures.__getitem__, ins))
        outputs = tuple(map(figures.__getitem__, op.outputs))
    repeats = None if len(set(ins)) == len(ins) else tuple(map(ins.index, ins))
    return (op.kind, gemm_identity(op.gemm), op.macs, op.vector_ops, inputs, repeats, outputs,
            attrs.get("marker"), "epilogue" in attrs, attrs.get("acc"), attrs.get("k_last"),
            None if runs is None else tuple(sorted(runs.items())))


def op_cycles(op: Op, graph: Graph, hw: Hardware, cores: int = 1) -> tuple[float, str]:
    """(cycles, what bounds them: 'array' | 'vector' | 'scratchpad' | 'scratchpad_port') of an
    op on ``cores`` cores: its slowest core, or the scratchpad, whose bandwidth the cores share."""
    timing, _ = op_core_cycles(op, graph, hw, cores)
    return timing


def op_core_cycles(op: Op, graph: Graph, hw: Hardware, cores: int = 1,
                   scratchpad: tuple[int, int] | None = None) -> tuple[tuple[float, str], list[float]]:
    """((cycles, bound) as ``op_cycles``, how long each core computes within them);
    ``scratchpad``: the op's ``scratchpad_bytes`` when the caller has them already."""
    bits = operand_bits(op, graph) if hw.cores.unroll and len(op.inputs) > 1 else None
    parts, bound = core_cycles(op.kind, op.gemm, op.macs, op.vector_ops, hw, cores, "epilogue" in op.attrs,
                               chain_position(op, hw), bits)
    compute = max(parts)
    read, written = scratchpad if scratchpad is not None else scratchpad_bytes(op, graph, hw, cores)
    memory = (read + written) / hw.scratchpad.bytes_per_cycle
    if memory > compute:
        return (memory, "scratchpad"), parts
    return (max(compute, 1.0), bound), parts
