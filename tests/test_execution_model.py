"""The execution model beyond the configs it was tuned on (issue 27): ops that stream their
own loads and stores, double buffering the allocator keeps, reductions chained in the core's
accumulators, folds that pipeline, GEMVs off the array, and a bus that serves the earliest
step first."""

from __future__ import annotations

import pytest
import simpy

from npusim.errors import PlanError
from npusim.graph.model import Gemm
from npusim.graph.tiling import expand
from npusim.hw.costs import chain_position, compute_cycles, op_cycles, systolic_cycles
from npusim.plan.model import Transfer
from npusim.plan.validate import validate
from npusim.sim.bandwidth import SharedBandwidth
from npusim.testing import validation
from npusim.testing.single_ops import add_graph, conv_graph, matmul_graph
from npusim.workflow import load_graph, load_hw, plan_graph, simulate_plan

PIPELINE = "tile+default+arena+belady"


def simulate(graph, hw, budget=None, pipeline=PIPELINE):
    plan = plan_graph(graph, hw, pipeline, budget)
    return plan, simulate_plan(plan, hw, graph, validated=True)


# -- streaming inside an op ----------------------------------------------------------------------

def test_an_untiled_op_overlaps_its_loads_compute_and_store():
    """An Add run whole with its inputs in DRAM and its output written back: with bands its
    loads, compute and store overlap (the run is shorter than their sum, by more than half of
    the shorter stages); with ``stream_bands: 1`` they run in series, as before."""
    graph = add_graph([1, 64, 56, 56])
    streamed = load_hw("edge-npu")
    series = load_hw("edge-npu", {"cores.stream_bands": "1"})
    _, fast = simulate(graph, streamed, pipeline="default+arena+belady")
    _, slow = simulate(graph, series, pipeline="default+arena+belady")
    transfers = [e for e in slow.timeline if e.queue.startswith("dma")]
    compute = [e for e in slow.timeline if e.queue.startswith("stream")]
    assert len(compute) == 1
    op = compute[0]
    assert all(e.end <= op.start or e.start >= op.end for e in transfers)  # in series: nothing overlaps the op
    dma = op.start + (slow.cycles - op.end)  # loads before the op, the store after it
    work = op.end - op.start
    assert dma > 0.2 * work  # the case is worth overlapping
    assert fast.cycles < slow.cycles - 0.5 * min(dma, work)
    assert fast.cycles >= work  # the op got no faster, its transfers only overlap it
    assert sum(fast.stalls.values()) == pytest.approx(fast.cycles)  # the critical path still adds up


def test_a_one_fold_op_does_not_stream():
    """A band is at least one fold of the array: an op of one fold has nothing to overlap."""
    from npusim.hw.costs import stream_bands
    hw = load_hw("datacenter-npu")
    graph = matmul_graph(64, 96, 128)  # one 128x128 fold
    assert stream_bands(graph.ops[0], graph, hw) == 1
    conv = conv_graph(64, 64, 56)  # 5 folds of the K = 576 reduction
    assert stream_bands(conv.ops[0], conv, hw) == 5


# -- the bus ------------------------------------------------------------------------------------

def test_the_bus_serves_the_most_urgent_transfers_first_and_shares_among_equals():
    env = simpy.Environment()
    bus = SharedBandwidth(env, bytes_per_cycle=4.0)
    finished = {}

    def flow(name, nbytes, priority, start=0):
        yield env.timeout(start)
        yield bus.transfer(nbytes, priority)
        finished[name] = env.now

    env.process(flow("later step", 400, 2))
    env.process(flow("a", 400, 1))
    env.process(flow("b", 400, 1))
    env.process(flow("urgent, arrives late", 40, 0, start=50))
    env.run()
    assert finished["urgent, arrives late"] == pytest.approx(60)  # takes the whole bus when it arrives
    assert finished["a"] == finished["b"] == pytest.approx(210)  # equals share: 800 B at 4 B/cycle + 10
    assert finished["later step"] == pytest.approx(310)  # waits for the earlier step's transfers
    assert bus.busy_cycles == pytest.approx(310)


# -- double buffering that the allocator keeps ------------------------------------------------------

@pytest.mark.parametrize("shape, hw_name, budget", [
    ((2048, 2048, 2048), "edge-npu", 256 << 10),
    ((64, 4096, 4096), "edge-npu", 256 << 10),
    ((2048, 2048, 2048), "mid-npu", 1 << 20),
])
def test_a_tiled_gemm_hides_its_transfers(shape, hw_name, budget):
    """Issue 27's target: a tiled GEMM takes at most 1.10 × max(compute, bus bytes / bandwidth)
    plus one tile's fill (before: 1.29×, 1.56×, 1.31×: every load waited for the previous
    tile's compute). The arena gives up cached tiles for the next tile's loads, and says so."""
    if hw_name == "edge-npu":  # the default pipeline's run, shared with the validation table's tests
        plan, report = validation.gemm_run(budget, *shape)
    else:
        plan, report = simulate(matmul_graph(*shape), load_hw(hw_name, {"scratchpad.size": str(budget)}))
    bound = max(report.lower_bounds["compute_cycles"], report.lower_bounds["dram_cycles"])
    tiles = len(plan.order)
    assert report.cycles <= 1.10 * bound + 2 * report.cycles / tiles, (report.cycles, bound)
    assert all("double-buffered" in note for note in plan.meta.notes)


def test_prefetch_evicts_a_cached_tile_for_the_next_ops_load_and_notes_it():
    """At 256 KiB the 2048³ GEMM's A tiles would stay cached for the next column block, and every
    new tile would land in the one slot left: each load would wait for the previous tile's
    compute. The arena evicts cached tiles (clean: nothing is stored) to keep the second buffer;
    the plan's notes count them, and no load of the run waits for its region."""
    plan, report = validation.gemm_run(256 << 10)
    assert plan.meta.notes and "given up to keep the next op's loads double-buffered" in plan.meta.notes[0]
    waited = [row for row in report.op_breakdown if row["stalled_on"] == "load (space)"]
    assert len(waited) <= 2, waited[:3]


# -- accumulation where the hardware accumulates -------------------------------------------------

def _os128(size: str, accumulators: str):
    return load_hw("edge-npu", {"cores.pe_rows": "128", "cores.pe_cols": "128", "scratchpad.size": size,
                                "scratchpad.bytes_per_cycle": "512", "cores.accumulator_size": accumulators})


def _array_cycles(graph, plan, hw) -> float:
    c = hw.cores
    tiled = expand(graph, plan.tiling) if plan.tiling else graph
    return sum(systolic_cycles(op.gemm, c.pe_rows, c.pe_cols, c.dataflow, c.fold_overlap, chain_position(op))
               for op in tiled.ops if op.gemm is not None)


@pytest.mark.parametrize("size, limit", [("192KiB", 1.10), ("64KiB", 1.5)])
def test_reduction_slices_stay_in_the_array_when_its_accumulators_hold_them(size, limit):
    """512×768×768 on a 128×128 output-stationary array (SCALE-Sim's count: 24 folds of
    768 + 254 cycles): with a PE accumulator per output (64 KiB of 32-bit sums) the K slices of
    a 128×128 block stream back to back through the same PEs, so the tiled array cycles stay
    within the issue's targets of the untiled count (before: 4.99× and 21.9×, every slice of
    every fold paying the fill/drain and a partial-sum round trip through the scratchpad)."""
    graph = matmul_graph(512, 768, 768)
    hw = _os128(size, "64KiB")
    plan = plan_graph(graph, hw, PIPELINE)
    untiled = systolic_cycles(graph.ops[0].gemm, 128, 128, "os")
    assert _array_cycles(graph, plan, hw) <= limit * untiled
    assert plan.tiling["matmul"].get("acc") == "core"
    simulate_plan(plan, hw, graph, validated=True)  # the accumulator tensors take no scratchpad bytes


def test_without_accumulators_partial_sums_go_through_the_scratchpad():
    graph = matmul_graph(512, 768, 768)
    plan = plan_graph(graph, _os128("64KiB", "0"), PIPELINE)
    assert plan.tiling["matmul"].get("acc", "scratchpad") == "scratchpad"


def test_a_chained_one_fold_block_costs_what_it_costs_unsplit():
    """os, one fold: the slices before the last pay their stream only, the last the skew too."""
    whole = systolic_cycles(Gemm(m=16, n=16, k=300), 16, 16, "os")
    parts = [systolic_cycles(Gemm(m=16, n=16, k=k), 16, 16, "os", chained=c)
             for k, c in ((100, "first"), (100, "first"), (100, "last"))]
    assert sum(parts) == whole
    # several folds on an array that does not overlap them: each refills, as before
    two_folds = Gemm(m=32, n=16, k=100)
    assert systolic_cycles(two_folds, 16, 16, "os", chained="first") == systolic_cycles(two_folds, 16, 16, "os")
    # with fold_overlap every slice but the last drops the preload and skew
    assert systolic_cycles(two_folds, 16, 16, "os", True, "first") == 2 * 100


def test_a_run_of_row_slices_keeps_the_weights_of_a_ws_array():
    """ws, one fold per tile: M slices of the same weights stream back to back (the first pays
    the preload, the last the skew), so a run costs what one fold streaming all its rows
    costs; a tile of several folds cannot keep them and pays in full, as before."""
    whole = systolic_cycles(Gemm(m=300, n=16, k=16), 16, 16, "ws")
    parts = [systolic_cycles(Gemm(m=m, n=16, k=16), 16, 16, "ws", chained=c)
             for m, c in ((100, "run-first"), (100, "run-middle"), (100, "run-last"))]
    assert sum(parts) == whole
    assert systolic_cycles(Gemm(m=100, n=16, k=16), 16, 16, "is", chained="run-middle") > 100  # is holds A
    two_folds = Gemm(m=100, n=32, k=16)
    assert systolic_cycles(two_folds, 16, 16, "ws", chained="run-middle") == systolic_cycles(two_folds, 16, 16, "ws")


def _ws_array_cycles(plan, hw) -> float:
    return sum(op_cycles(op, plan.bound_graph, hw)[0] for op in plan.bound_graph.ops if op.gemm is not None)


@pytest.mark.parametrize("m, n, k", [(4096, 128, 128), (2048, 512, 128)])
def test_row_slices_on_a_weight_stationary_array_reuse_its_weights(m, n, k):
    """On datacenter-npu (two 128×128 ws cores, folds overlapped) at 64 KiB a GEMM whose
    reduction fits the array's rows is cut into row slices; the tiler orders them so that
    consecutive tiles read the same weight block and the array keeps it: the tiled array
    cycles are within 15 % of the untiled op's (before: 7.3× and 7.6×, every 64-row slice
    paying its own preload and fill/drain). What stays over 1.0 is one preload and skew per
    run (per 128-column weight block), which the fold model of separate ops does not overlap
    across runs."""
    graph = matmul_graph(m, n, k)
    hw = load_hw("datacenter-npu", {"scratchpad.size": "64KiB"})
    plan, report = simulate(graph, hw)
    untiled = op_cycles(graph.ops[0], graph, hw)[0]
    assert len(plan.bound_graph.ops) > 8  # it was tiled
    assert all("runs" in op.attrs for op in plan.bound_graph.ops)
    assert _ws_array_cycles(plan, hw) <= 1.15 * untiled
    os_array = load_hw("edge-npu", {"scratchpad.size": "64KiB"})  # the os array keeps nothing: no change there
    os_plan = plan_graph(graph, os_array, PIPELINE)
    assert all(chain_position(op, os_array) is None for op in os_plan.bound_graph.ops)


def test_a_plan_that_moves_partial_sums_held_in_the_core_is_invalid():
    graph = matmul_graph(512, 768, 768)
    hw = _os128("64KiB", "64KiB")
    plan = plan_graph(graph, hw, PIPELINE)
    tiled = expand(graph, plan.tiling)
    acc = next(t for t in tiled.tensors if t.kind == "accumulator")
    assert acc.size == 0
    step = next(s for s, op in enumerate(plan.order) if acc.id in tiled.ops[op].outputs)
    from dataclasses import replace
    bad = replace(plan, transfers=plan.transfers + (Transfer(step=step, kind="store", tensor=acc.id, cause="spill",
                                                             size=0),))
    found = validate(bad, graph)
    assert any("accumulators cannot be moved by DMA" in v.message for v in found)


def test_a_core_accumulator_spec_needs_a_reduction_slice():
    from npusim.graph.tiling import check_spec
    graph = matmul_graph(64, 64, 64)
    with pytest.raises(PlanError, match="'acc'"):
        check_spec(graph.ops[0], graph, {"block": [32, 32], "k": 0, "acc": "core"})


# -- folds that pipeline, GEMVs off the array ----------------------------------------------------

def test_the_folds_of_a_batched_gemm_pipeline_like_any_other():
    """With fold_overlap, 12 attention heads cost one preload and skew, not twelve."""
    heads = Gemm(m=64, n=64, k=64, batch=12)
    one = systolic_cycles(Gemm(m=64, n=64, k=64), 128, 128, "ws", fold_overlap=True)
    assert systolic_cycles(heads, 128, 128, "ws", fold_overlap=True) == 12 * 128 + (one - 128)


def test_a_gemv_runs_on_the_vector_lanes_when_they_are_faster():
    """cores.gemv: fastest moves a matrix-vector product off a 128×128 weight-stationary array
    (each fold: 128 cycles of preload, 1 of stream, 254 of skew) onto the 128 lanes; a large
    GEMM stays on the array."""
    hw = load_hw("datacenter-npu", {"cores.fold_overlap": "false"})
    gemv = Gemm(m=1, n=3072, k=768)
    cycles, unit = compute_cycles("MatMul", gemv, gemv.macs, 0, hw)
    assert unit == "vector" and cycles == pytest.approx(gemv.macs / 128)
    square = Gemm(m=1024, n=1024, k=1024)
    assert compute_cycles("MatMul", square, square.macs, 0, hw)[1] == "array"
    on_array = load_hw("datacenter-npu", {"cores.gemv": "array"})
    assert compute_cycles("MatMul", gemv, gemv.macs, 0, on_array)[1] == "array"


def test_the_quick_start_stays_within_its_compute_bound():
    """The README's quick start: within 1.07× of its compute bound (issue 27: no regression)."""
    graph, hw = load_graph("resnet50"), load_hw("edge-npu")
    _, report = simulate(graph, hw, pipeline="fuse+tile+default+arena+belady")
    assert report.cycles <= 1.07 * report.lower_bounds["compute_cycles"]


def test_vector_ops_still_take_their_elements_over_the_lanes():
    graph = add_graph([1, 64, 56, 56])
    hw = load_hw("edge-npu")
    assert op_cycles(graph.ops[0], graph, hw)[0] >= graph.ops[0].vector_ops / hw.cores.vector_lanes


# -- strided windows load only what they read ----------------------------------------------------

def test_a_strided_1x1_conv_loads_only_the_rows_and_columns_it_reads():
    """A ResNet downsample conv (1×1, stride 2, 64→128 channels on 56×56) tiled at 64 KiB on
    edge-npu: each tile loads every other row and column of its input box, so the DRAM bytes
    read are the quarter of the input the conv reads plus its weights, read once (before: the
    whole box, 177,536 B = 3.0× that)."""
    graph = conv_graph(64, 128, 56, kernel=1, stride=2)
    hw = load_hw("edge-npu", {"scratchpad.size": "64KiB"})
    plan, report = simulate(graph, hw)
    x, w = graph.tensors[0], graph.tensors[1]
    assert len(plan.bound_graph.ops) > 1
    assert report.offchip_read_bytes <= 1.02 * (x.size // 4 + w.size)
    strided = [t for t in plan.bound_graph.tensors if t.view is not None and t.view.base == "x"]
    assert strided and all(t.view.strides[-1] == 2 for t in strided)


def test_a_3x3_strided_conv_still_reads_every_row_of_its_window():
    """Stride 2 with 3 taps reads every row (the windows overlap): no steps."""
    from npusim.graph.regions import input_steps
    assert input_steps(conv_graph(64, 64, 56, kernel=3, stride=2).ops[0], conv_graph(64, 64, 56, kernel=3, stride=2)) \
        == [None, None]
    one = conv_graph(64, 64, 56, kernel=1, stride=2)
    assert input_steps(one.ops[0], one) == [(1, 1, 2, 2), None]


def test_the_validator_refuses_a_strided_view_that_misses_what_the_tile_reads():
    """The validator's coverage check on the strided views of a real tiled plan: a tile's
    view covers the rows its conv reads, not every row of the box, nor rows one off."""
    from npusim.graph.regions import input_boxes
    from npusim.plan.validate import _covered
    graph = conv_graph(64, 128, 56, kernel=1, stride=2)
    plan = plan_graph(graph, load_hw("edge-npu", {"scratchpad.size": "64KiB"}), PIPELINE)
    tiled, x = plan.bound_graph, graph.tensors[0]
    tile = tiled.ops[1]
    box = tuple(tuple(r) for r in tile.attrs["box"])
    region = input_boxes(graph.ops[0], graph, box)[0]
    assert _covered(tiled, tile.inputs, x, region, (1, 1, 2, 2))
    assert not _covered(tiled, tile.inputs, x, region, None)
    shifted = region[:2] + ((region[2][0] + 1, region[2][1] + 1),) + region[3:]
    assert not _covered(tiled, tile.inputs, x, shifted, (1, 1, 2, 2))


def test_a_tile_whose_window_reads_only_padding_still_has_an_input_box():
    """A 1×1 conv of stride 3 with pads 1: output row 0 reads only the padding row. Tiled
    small, that tile's input box was empty (a zero-size view, refused as a malformed graph);
    it now reads one edge row, and the plan validates and simulates."""
    from npusim.testing.single_ops import _graph
    attrs = {"kernel_shape": [1, 1], "strides": [3, 3], "pads": [1, 1, 1, 1]}
    graph = _graph("pad_only", "Conv", attrs, [("x", [1, 32, 61, 61], "input"), ("w", [64, 32, 1, 1], "weight")],
                   [1, 64, 21, 21])
    plan, report = simulate(graph, load_hw("mid-npu", {"scratchpad.size": "32KiB"}))
    assert len(plan.bound_graph.ops) > 1 and report.cycles > 0
