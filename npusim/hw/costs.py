"""Compute cost model: how many cycles an op occupies a core.

GEMM-like ops (``op.gemm`` set: Conv as implicit GEMM, Gemm, MatMul) run on the systolic PE
array of R rows × C columns. SCALE-Sim's stall-free compute cycles (its
``systolic_compute_{os,ws}.py``; see shared/reference/scalesim/README.md): the layer is tiled
onto the array in *folds* that run back to back, one fold's drain not overlapping the next
one's fill:

===================  =====================  =======================
dataflow             folds                  cycles per fold
===================  =====================  =======================
output stationary    ⌈M/R⌉·⌈N/C⌉            K + R + C − 2
weight stationary    ⌈K/R⌉·⌈N/C⌉            M + 2R + C − 2
===================  =====================  =======================

(SCALE-Sim prints the index of the last cycle, one less.) A batched GEMM repeats the folds
``batch`` times. Every other op runs on the vector unit: ``vector_ops / vector_lanes`` cycles.

Either way an op cannot finish faster than the scratchpad can feed it: every input byte read
once and every output byte written once at ``scratchpad.bytes_per_cycle``.
"""

from __future__ import annotations

from npusim.graph.model import Gemm, Graph, Op
from npusim.hw.config import Hardware


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def systolic_cycles(gemm: Gemm, rows: int, cols: int, dataflow: str) -> int:
    """Stall-free cycles of a (batched) GEMM on a rows × cols array (SCALE-Sim's count + 1)."""
    m, n, k = gemm.m, gemm.n, gemm.k
    if dataflow == "os":
        folds, per_fold = ceil_div(m, rows) * ceil_div(n, cols), k + rows + cols - 2
    elif dataflow == "ws":
        folds, per_fold = ceil_div(k, rows) * ceil_div(n, cols), m + 2 * rows + cols - 2
    else:
        raise ValueError(f"unknown dataflow {dataflow!r}, expected 'os' or 'ws'")
    return gemm.batch * folds * per_fold


def scratchpad_bytes(op: Op, graph: Graph) -> tuple[int, int]:
    """(bytes read, bytes written) on the scratchpad by an op: each input read once."""
    read = sum(graph.tensors[t].size for t in dict.fromkeys(op.inputs))
    written = sum(graph.tensors[t].size for t in op.outputs)
    return read, written


def op_cycles(op: Op, graph: Graph, hw: Hardware) -> tuple[float, str]:
    """(cycles, what bounds them: 'array' | 'vector' | 'scratchpad')."""
    core = hw.cores
    if op.gemm is not None:
        compute = float(systolic_cycles(op.gemm, core.pe_rows, core.pe_cols, core.dataflow))
        bound = "array"
    else:
        compute = op.vector_ops / core.vector_lanes
        bound = "vector"
    read, written = scratchpad_bytes(op, graph)
    memory = (read + written) / hw.scratchpad.bytes_per_cycle
    if memory > compute:
        return memory, "scratchpad"
    return max(compute, 1.0), bound
