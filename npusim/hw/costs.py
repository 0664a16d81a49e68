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
R + C − 2. With ``cores.fold_overlap`` (TPU-style: the next fold's weights preload while
this fold streams, and one fold's drain overlaps the next one's fill) the folds pipeline:
``folds · max(stream, preload) + preload + skew``. A batched GEMM repeats the folds
``batch`` times.

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
"""

from __future__ import annotations

from npusim.graph.model import Gemm, Graph, Op
from npusim.hw.config import Hardware

DATAFLOWS = ("os", "ws", "is")
GROUPED_KINDS = ("Conv", "ConvTranspose")


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


def systolic_cycles(gemm: Gemm, rows: int, cols: int, dataflow: str, fold_overlap: bool = False) -> int:
    """Stall-free cycles of a (batched) GEMM on a rows × cols array (SCALE-Sim's count + 1;
    with ``fold_overlap`` the folds pipeline)."""
    folds, stream, preload = fold_shape(gemm, rows, cols, dataflow)
    skew = rows + cols - 2
    if fold_overlap:
        return gemm.batch * (folds * max(stream, preload) + preload + skew)
    return gemm.batch * folds * (preload + stream + skew)


def array_gemm(kind: str, gemm: Gemm | None, hw: Hardware) -> Gemm | None:
    """The GEMM the array runs for an op of ``kind`` whose GEMM view is ``gemm`` (None: the op
    runs on the vector unit)."""
    if gemm is None:
        return None
    if kind in GROUPED_KINDS and gemm.batch > 1:  # grouped / depthwise (batch = groups)
        if hw.cores.depthwise == "vector":
            return None
        if hw.cores.depthwise == "array":
            return Gemm(m=gemm.m, n=gemm.n * gemm.batch, k=gemm.k, batch=1)
    return gemm


def compute_cycles(kind: str, gemm: Gemm | None, macs: int, vector_ops: float, hw: Hardware) -> tuple[float, str]:
    """(cycles, 'array' | 'vector') of an op's (or a tile's) compute, scratchpad aside."""
    core = hw.cores
    mapped = array_gemm(kind, gemm, hw)
    if mapped is not None:
        return float(systolic_cycles(mapped, core.pe_rows, core.pe_cols, core.dataflow, core.fold_overlap)), "array"
    if gemm is not None:  # a grouped conv on the vector unit: its MACs
        return macs / core.vector_lanes, "vector"
    return vector_ops / core.vector_lanes, "vector"


def scratchpad_bytes(op: Op, graph: Graph, hw: Hardware) -> tuple[int, int]:
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
    written once per row fold). Grouped convs packed on the array read each group's inputs
    once (only its own column uses them). Other inputs (a bias) and every vector-unit op read
    each input once and write each output once."""
    read = sum(graph.tensors[t].size for t in dict.fromkeys(op.inputs))
    written = sum(graph.tensors[t].size for t in op.outputs)
    gemm = array_gemm(op.kind, op.gemm, hw)
    if gemm is None or len(op.inputs) < 2:
        return read, written
    rows, cols = hw.cores.pe_rows, hw.cores.pe_cols
    a, b = (graph.tensors[t] for t in op.inputs[:2])
    out = graph.tensors[op.outputs[0]]
    m, n, k, batch = gemm.m, gemm.n, gemm.k, gemm.batch
    dataflow = hw.cores.dataflow
    a_times = {"os": ceil_div(n, cols), "ws": ceil_div(n, cols), "is": 1}[dataflow]
    b_times = {"os": ceil_div(m, rows), "ws": 1, "is": ceil_div(m, cols)}[dataflow]
    out_times = 1 if dataflow == "os" else ceil_div(k, rows)
    if op.kind in GROUPED_KINDS and op.gemm.batch > 1:  # packed groups: each column its own inputs
        a_times = 1
    others = sum(graph.tensors[t].size for t in dict.fromkeys(op.inputs[2:]) if t not in op.inputs[:2])
    read = batch * (m * k * a.itemsize * a_times + k * n * b.itemsize * b_times) + others
    written = batch * m * n * out.itemsize * out_times + sum(graph.tensors[t].size for t in op.outputs[1:])
    return read, written


def op_cycles(op: Op, graph: Graph, hw: Hardware) -> tuple[float, str]:
    """(cycles, what bounds them: 'array' | 'vector' | 'scratchpad')."""
    compute, bound = compute_cycles(op.kind, op.gemm, op.macs, op.vector_ops, hw)
    read, written = scratchpad_bytes(op, graph, hw)
    memory = (read + written) / hw.scratchpad.bytes_per_cycle
    if memory > compute:
        return memory, "scratchpad"
    return max(compute, 1.0), bound
