"""The compute cost model (npusim/hw/costs.py): dataflows against SCALE-Sim's closed form,
overlapped folds and the mapping of grouped/depthwise convs, each checked by hand."""

import csv
import math
from pathlib import Path

import pytest

from npusim.errors import ConfigError
from npusim.graph.model import Gemm
from npusim.hw.costs import compute_cycles, op_cycles, systolic_cycles
from npusim.workflow import load_graph, load_hw

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "scalesim" / "resnet18_32x32_os" / "per_layer.csv"


def scalesim_closed_form(m: int, n: int, k: int, rows: int, cols: int, dataflow: str) -> int:
    """shared/reference/scalesim/README.md, written out independently of npusim's code:
    compute_cycles = folds x cycles per fold - 1 (SCALE-Sim prints the last cycle's index)."""
    folds, per_fold = {
        "os": (math.ceil(m / rows) * math.ceil(n / cols), k + rows + cols - 2),
        "ws": (math.ceil(k / rows) * math.ceil(n / cols), m + 2 * rows + cols - 2),
        "is": (math.ceil(k / rows) * math.ceil(m / cols), n + 2 * rows + cols - 2),
    }[dataflow]
    return folds * per_fold - 1


def reference_layers():
    if not REFERENCE.exists():
        pytest.skip(f"SCALE-Sim reference not found at {REFERENCE}")
    with open(REFERENCE) as f:
        return [(r["layer"], int(r["M"]), int(r["N"]), int(r["K"]), int(r["compute_cycles"])) for r in csv.DictReader(f)]


@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
@pytest.mark.parametrize("array", [(8, 8), (32, 32), (128, 128), (32, 16)])
def test_every_reference_layer_matches_scalesim_closed_form(dataflow, array):
    rows, cols = array
    for layer, m, n, k, _ in reference_layers():
        ours = systolic_cycles(Gemm(m=m, n=n, k=k), rows, cols, dataflow) - 1
        assert ours == scalesim_closed_form(m, n, k, rows, cols, dataflow), layer


def test_os_32x32_matches_what_scalesim_simulated():
    for layer, m, n, k, theirs in reference_layers():
        assert systolic_cycles(Gemm(m=m, n=n, k=k), 32, 32, "os") - 1 == theirs, layer


def test_input_stationary_by_hand():
    # is: folds = ceil(K/R) * ceil(M/C) = 3 * 7, each N + 2R + C - 2 = 40 + 64 + 16 - 2 cycles
    assert systolic_cycles(Gemm(m=100, n=40, k=70), 32, 16, "is") == 3 * 7 * (40 + 64 + 16 - 2)


def test_overlapped_folds_by_hand():
    g = Gemm(m=100, n=40, k=70)
    # os: 4 x 3 folds streaming K = 70 each, the skew R + C - 2 = 46 once
    assert systolic_cycles(g, 32, 16, "os", fold_overlap=True) == 12 * 70 + 46
    # os with a short reduction (K = 9 < R = 32): each fold waits for its 32 rows of outputs to drain
    assert systolic_cycles(Gemm(m=100, n=40, k=9), 32, 16, "os", fold_overlap=True) == 12 * 32 + 46
    # ws: 3 x 3 folds streaming M = 100 (the next 32-cycle preload hidden), one preload and skew
    assert systolic_cycles(g, 32, 16, "ws", fold_overlap=True) == 9 * 100 + 32 + 46
    # is with N = 20 < R = 32: each fold waits for its preload
    assert systolic_cycles(Gemm(m=100, n=20, k=70), 32, 16, "is", fold_overlap=True) == 21 * 32 + 32 + 46
    for dataflow in ("os", "ws", "is"):  # never slower than folds back to back
        assert systolic_cycles(g, 32, 16, dataflow, True) <= systolic_cycles(g, 32, 16, dataflow)


def test_depthwise_mappings_by_hand():
    """A 3x3 depthwise conv over 32 channels of 56x56 (GEMM view: M = 3136 pixels, N = 1 per
    group, K = 9, batch = 32 groups) on a 16x16 output-stationary array."""
    gemm, macs = Gemm(m=3136, n=1, k=9, batch=32), 3136 * 9 * 32
    groups = load_hw("edge-npu", {"cores.depthwise": "groups"})
    array = load_hw("edge-npu", {"cores.depthwise": "array"})
    vector = load_hw("edge-npu", {"cores.depthwise": "vector"})
    # one GEMM per group, one column each: 32 x ceil(3136/16) x 1 folds of 9 + 30 cycles
    assert compute_cycles("Conv", gemm, macs, 0, groups) == (32 * 196 * 39, "array")
    # channels packed across the 16 columns: 196 x 2 folds of 39 cycles
    assert compute_cycles("Conv", gemm, macs, 0, array) == (196 * 2 * 39, "array")
    # kernel-window MACs on the 16 vector lanes
    assert compute_cycles("Conv", gemm, macs, 0, vector) == (macs / 16, "vector")
    # a batched MatMul (attention heads) is not a grouped conv: its batch stays
    heads = Gemm(m=64, n=64, k=64, batch=4)
    assert compute_cycles("MatMul", heads, 0, 0, array)[0] == systolic_cycles(heads, 16, 16, "os")


def test_depthwise_convs_no_longer_dominate_mobilenet_v2():
    """mobilenet_v2's depthwise layers are 6.9 % of its MACs; one column per channel made them
    72 % of its compute cycles on edge-npu. Channel-packed, their share is 14 %."""
    graph = load_graph("mobilenet_v2")
    share = {}
    for mapping in ("groups", "array"):
        hw = load_hw("edge-npu", {"cores.depthwise": mapping})
        cycles = [(op_cycles(o, graph, hw)[0], o.gemm is not None and o.kind == "Conv" and o.gemm.batch > 1)
                  for o in graph.ops]
        share[mapping] = sum(c for c, dw in cycles if dw) / sum(c for c, _ in cycles)
    assert share["groups"] > 0.7 and share["array"] < 2 * 0.069 + 0.01


@pytest.mark.parametrize("text, expected", [("true", True), ("false", False), ("TRUE", True)])
def test_fold_overlap_is_read_as_a_boolean(text, expected):
    assert load_hw("edge-npu", {"cores.fold_overlap": text}).cores.fold_overlap is expected


def test_bad_dataflow_and_flag_values_are_one_line_errors():
    with pytest.raises(ConfigError, match="expected one of os, ws, is"):
        load_hw("edge-npu", {"cores.dataflow": "rs"})
    with pytest.raises(ConfigError, match="expected true or false"):
        load_hw("edge-npu", {"cores.fold_overlap": "sometimes"})


def test_operand_rereads_match_scalesim_sram_traffic():
    """ResNet-18 on SCALE-Sim's 32x32 os config: npusim's scratchpad reads per conv equal
    SCALE-Sim's ``sram_ifmap_reads + sram_filter_reads`` exactly (A = M x K read once per
    column fold, B = K x N once per row fold; the bias, which SCALE-Sim does not model, aside).
    Writes: npusim writes each output once (M x N); SCALE-Sim's ``sram_ofmap_writes`` are
    6-8 % higher on the convs and 3x on the one-row fc layer (its write-buffer model, not M x N
    outputs). Outputs are under 4 % of the convs' SRAM traffic, so the difference is left."""
    from npusim.hw.costs import scratchpad_bytes

    path = REFERENCE
    if not path.exists():
        pytest.skip(f"SCALE-Sim reference not found at {path}")
    graph = load_graph("resnet18")
    hw = load_hw("edge-npu", {"cores.pe_rows": "32", "cores.pe_cols": "32", "cores.dataflow": "os"})
    ops = {(o.gemm.m, o.gemm.n, o.gemm.k): o for o in graph.ops if o.gemm is not None}
    with open(path) as f:
        for row in csv.DictReader(f):
            op = ops[(int(row["M"]), int(row["N"]), int(row["K"]))]
            read, written = scratchpad_bytes(op, graph, hw)
            bias = sum(graph.tensors[t].size for t in op.inputs[2:])
            assert read - bias == int(row["sram_ifmap_reads"]) + int(row["sram_filter_reads"]), row["layer"]
            if row["layer"] != "fc":
                assert 0.92 <= written / int(row["sram_ofmap_writes"]) <= 0.95, row["layer"]


def test_rereads_by_dataflow_by_hand():
    """A 100 x 40 x 70 int8 MatMul on a 32 x 16 array: A = 7000 B, B = 2800 B, C = 4000 B."""
    from npusim.graph.model import build_graph
    from npusim.hw.costs import scratchpad_bytes

    graph = build_graph("mm", [
        dict(name="a", shape=[100, 70], dtype="int8", itemsize=1, kind="input"),
        dict(name="b", shape=[70, 40], dtype="int8", itemsize=1, kind="weight"),
        dict(name="c", shape=[100, 40], dtype="int8", itemsize=1, kind="output")],
        [dict(name="mm", kind="MatMul", inputs=["a", "b"], outputs=["c"], attrs={}, macs=280000,
              vector_ops=0, gemm=Gemm(m=100, n=40, k=70))])
    op = graph.ops[0]

    def rw(dataflow):
        return scratchpad_bytes(op, graph, load_hw("edge-npu", {"cores.pe_rows": "32", "cores.pe_cols": "16",
                                                                "cores.dataflow": dataflow}))

    assert rw("os") == (7000 * 3 + 2800 * 4, 4000)  # ceil(40/16) = 3 column folds, ceil(100/32) = 4 row folds
    assert rw("ws") == (7000 * 3 + 2800, 4000 * 3)  # ceil(70/32) = 3 partial-sum writes
    assert rw("is") == (7000 + 2800 * 7, 4000 * 3)  # ceil(100/16) = 7 column folds


def test_an_unrolled_array_waiting_for_the_scratchpad_port_says_so():
    """An unrolled 16x16 array with no local levels reads weights and inputs and writes partial
    sums through the scratchpad's one port every cycle: a port serves one operand's word a cycle
    (ZigZag's ports, ``npusim.hw.mapping``), however wide, so the op takes about three cycles an
    iteration. Its bound is the scratchpad port, not the array nor the scratchpad's bytes per
    cycle (a 32x wider port changes nothing: the critical path's scratchpad_port); a systolic
    array's conv is array-bound (found by two new-user audits)."""
    graph = load_graph("squeezenet1_0")
    conv = next(op for op in graph.ops if op.name.endswith("expand3x3/Conv"))
    unrolled = load_hw("edge-npu", {"cores.unroll": "K16xC16", "scratchpad.bytes_per_cycle": 4096})
    cycles, bound = op_cycles(conv, graph, unrolled)
    iterations = math.ceil(conv.gemm.n / 16) * math.ceil(conv.gemm.k / 16) * conv.gemm.m  # K, C, output pixels
    assert bound == "scratchpad_port" and cycles >= 2 * iterations
    wider = load_hw("edge-npu", {"cores.unroll": "K16xC16", "scratchpad.bytes_per_cycle": 131072})
    assert op_cycles(conv, graph, wider) == (cycles, "scratchpad_port")
    assert op_cycles(conv, graph, load_hw("edge-npu"))[1] == "array"
