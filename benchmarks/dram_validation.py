"""npusim's DRAM controller (``dram.model: banks``) against DRAMsim3 on six address traces.

DRAMsim3 (umd-memsys/DRAMsim3, commit 2981759) is not a dependency: give this script its
source tree (``--dramsim3 DIR``, e.g. a ``git archive`` of the mirror the ``fetch`` tool
makes); it builds the library with CMake if needed and compiles
``benchmarks/dram/dramsim3_driver.cc`` against it. Both simulators get the same traces of
64 B requests, offered as fast as the controller accepts them, on DDR4-3200 8 Gb x8
(DRAMsim3's ``DDR4_8Gb_x8_3200.ini``, npusim's ``ddr4-3200`` preset), one channel, one rank,
open page, the same address mapping (DRAMsim3's ``rochrababgco`` = npusim ``RoChRaBaBgCo``).
Two edits to DRAMsim3's file, for a like-for-like device: ``channel_size`` 8192 (one rank, as
the preset) and ``tCK`` 0.625 ns (JEDEC's DDR4-3200; the file rounds it to 0.63).

Per trace: bandwidth (bytes / time of the last completion), mean read service time
(acceptance into the controller to data, ns: DRAMsim3 completes writes on acceptance, so
only reads compare) and row-hit rate (hits / requests), and the differences (targets:
bandwidth and service time within 10 %, row-hit rate within 5 points). npusim runs with
per-bank command queues of 8 behind 32-entry transaction queues (``--bank-queue``), DRAMsim3's
``PER_BANK`` structure.

    .venv/bin/python benchmarks/dram_validation.py --dramsim3 /tmp/dramsim3
    .venv/bin/python benchmarks/dram_validation.py --closed-form

``--closed-form`` needs no reference: for every preset (one channel, the simulator's default
queues), a sequential read stream against the pins' peak and the refresh bound
1 - tRFC/tREFI, and random 64 B reads against the activation bound max(tRRD_S, tFAW/4,
tRC/banks) per rank.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from npusim.dram.controller import Controller, ControllerConfig
from npusim.dram.kernel import access_addresses
from npusim.dram.presets import DDR4_3200

HERE = Path(__file__).resolve().parent
MAPPING = "RoChRaBaBgCo"
ROW_STRIDE = 1 << (6 + 7 + 2 + 2)  # same bank, next row under RoChRaBaBgCo: 64 B x 128 columns x 4 x 4


def traces(rng) -> dict[str, list[tuple[int, bool]]]:
    """name -> [(address, is_write)] in issue order."""
    n = 16384
    out = {}
    out["sequential"] = [(64 * i, False) for i in range(n)]
    out["strided 2 KiB"] = [(2048 * i, False) for i in range(8192)]
    out["random 64 B"] = [(int(a) * 64, False) for a in rng.integers(0, (8 << 30) // 64, 8192)]
    a = [(64 * i, False) for i in range(4096)]
    b = [(ROW_STRIDE + 64 * i, False) for i in range(4096)]
    out["two streams, one bank"] = [x for pair in zip(a, b) for x in pair]
    out["read + write streams"] = [x for pair in zip([(64 * i, False) for i in range(4096)],
                                                     [((1 << 26) + 64 * i, True) for i in range(4096)]) for x in pair]
    out["resnet18 tiles"] = plan_trace()
    return out


def plan_trace(limit: int = 16384) -> list[tuple[int, bool]]:
    """The accesses of the first DMA commands of resnet18's plan at edge-npu (tiled, bump
    placement) whose DRAM views are strided (tiles), in command order."""
    from npusim import workflow as W
    from npusim.dram.model import bump_layout
    from npusim.plan.dram import buffer_of
    from npusim.plan.lower import lower

    graph = W.load_graph("resnet18")
    hw = W.load_hw("edge-npu")
    plan = W.plan_graph(graph, hw)
    program = lower(plan, hw)
    bump = bump_layout(program)
    out: list[tuple[int, bool]] = []
    for cmd in program.commands:
        if cmd.kind not in ("load", "store") or cmd.cost.chunks <= 1:
            continue
        chunks = np.array(cmd.dram.chunks(), dtype=np.int64).reshape(-1, 2)
        shift = bump[buffer_of(program.graph.tensors[cmd.tensor])]
        for addr in access_addresses(chunks[:, 0] + shift, chunks[:, 1].copy(), 64, 64).tolist():
            out.append((addr, cmd.kind == "store"))
        if len(out) >= limit:
            break
    return out[:limit]


def npusim_run(trace: list[tuple[int, bool]], queue: int = 32, bank_queue: int = 8) -> dict:
    cfg = ControllerConfig(DDR4_3200, channels=1, ranks=1, mapping=MAPPING, policy="open", scheduler="frfcfs",
                           row_hit_cap=4, read_queue=queue, write_queue=queue, write_high=3 * queue // 4, write_low=queue // 4,
                           bank_queue=bank_queue)
    ctrl = Controller(cfg)
    addresses = np.array([a for a, _ in trace], dtype=np.int64)
    writes = np.array([w for _, w in trace], dtype=bool)
    flows = []
    for w in (False, True):
        if (writes == w).any():
            flows.append(ctrl.add_flow(addresses[writes == w], w, 0.0, 0.0))
    ctrl.run(1e15)
    end = max(ctrl.end(f) for f in flows)
    c = ctrl.counts()
    rd, _, _ = ctrl.latency_sums()
    n = len(trace)
    return {"bandwidth": n * 64 / end, "latency": rd / max(c["reads"], 1), "hit_rate": c["hits"] / n}


def dramsim3_build(src: Path) -> Path:
    lib = src / "libdramsim3.so"
    if not lib.exists():
        (src / "build").mkdir(exist_ok=True)
        subprocess.run(["cmake", "..", "-DCMAKE_BUILD_TYPE=Release"], cwd=src / "build", check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["make", "-j2", "dramsim3"], cwd=src / "build", check=True, stdout=subprocess.DEVNULL)
    driver = src / "npusim_driver"
    subprocess.run(["g++", "-O2", "-std=c++14", f"-I{src / 'src'}", f"-I{src / 'ext/headers'}",
                    f"-I{src / 'ext/fmt/include'}", str(HERE / "dram" / "dramsim3_driver.cc"), f"-L{src}",
                    "-ldramsim3", f"-Wl,-rpath,{src}", "-o", str(driver)], check=True)
    return driver


def dramsim3_config(src: Path, folder: Path) -> Path:
    text = (src / "configs" / "DDR4_8Gb_x8_3200.ini").read_text()
    text = text.replace("channel_size = 16384", "channel_size = 8192").replace("tCK = 0.63", "tCK = 0.625")
    path = folder / "ddr4.ini"
    path.write_text(text)
    return path


def dramsim3_run(driver: Path, config: Path, trace, folder: Path) -> dict:
    path = folder / "trace.txt"
    path.write_text("".join(f"{a:#x} {'W' if w else 'R'}\n" for a, w in trace))
    out = subprocess.run([str(driver), str(config), str(path), str(folder)], check=True, capture_output=True,
                         text=True).stdout.split()
    n, last, tck, lat = int(out[-4]), int(out[-3]), float(out[-2]), float(out[-1])
    stats = json.loads((folder / "dramsim3.json").read_text())["0"]
    hits = stats["num_read_row_hits"] + stats["num_write_row_hits"]
    # DRAMsim3 completes a write when it accepts it (posted writes): the service time compared
    # is the reads' (its average_read_latency), and its last completion may leave writes to drain
    return {"bandwidth": n * 64 / (last * tck), "latency": stats["average_read_latency"] * tck, "hit_rate": hits / n}


def closed_form() -> None:
    from npusim.dram.controller import timings
    from npusim.dram.presets import PRESETS, default_mapping

    rng = np.random.default_rng(0)
    print("| preset | sequential / peak | 1 - tRFC/tREFI | row hits | random 64 B ns/read | activation bound ns |")
    print("|---|---|---|---|---|---|")
    for name, d in PRESETS.items():
        cfg = ControllerConfig(d, 1, d.ranks, default_mapping(d), bank_queue=8)
        t = timings(cfg)
        c = Controller(cfg)
        n = 1 << 16
        f = c.add_flow(np.arange(n, dtype=np.int64) * d.access_bytes, False, 0.0, 0.0)
        c.run(1e15)
        seq = n * d.access_bytes / c.end(f) / (d.channel_bandwidth / 1e9)
        hits = c.counts()["hits"] / n
        c = Controller(cfg)
        m = 20000
        f = c.add_flow(rng.integers(0, d.capacity // 64, m).astype(np.int64) * 64, False, 0.0, 0.0)
        c.run(1e15)
        bound = max(t["tRRD_S"], t["tFAW"] / 4, t["tRC"] / d.banks, t["tBurst"]) / d.ranks
        print(f"| {name} | {seq:.1%} | {1 - t['tRFC'] / t['tREFI']:.1%} | {hits:.1%} | {c.end(f) / m:.2f} | "
              f"{bound:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dramsim3", type=Path, help="DRAMsim3 source tree")
    parser.add_argument("--closed-form", action="store_true", help="the closed-form checks only (no reference)")
    parser.add_argument("--queue", type=int, default=32, help="npusim's read/write queue entries (dram.read_queue)")
    parser.add_argument("--bank-queue", type=int, default=8, help="npusim's per-bank command queues (dram.bank_queue; "
                        "0: one shared queue per direction)")
    args = parser.parse_args()
    if args.closed_form or args.dramsim3 is None:
        closed_form()
        return 0
    driver = dramsim3_build(args.dramsim3)
    rng = np.random.default_rng(31)
    print("| trace | requests | bandwidth GB/s npusim / DRAMsim3 (diff) | service time ns npusim / DRAMsim3 (diff) "
          "| row hits npusim / DRAMsim3 (diff) |")
    print("|---|---|---|---|---|")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = dramsim3_config(args.dramsim3, folder)
        for name, trace in traces(rng).items():
            ours, ref = npusim_run(trace, args.queue, args.bank_queue), dramsim3_run(driver, config, trace, folder)
            dbw = ours["bandwidth"] / ref["bandwidth"] - 1
            dlat = ours["latency"] / ref["latency"] - 1
            dhit = 100 * (ours["hit_rate"] - ref["hit_rate"])
            ok &= abs(dbw) <= 0.10 and abs(dlat) <= 0.10 and abs(dhit) <= 5
            print(f"| {name} | {len(trace):,} | {ours['bandwidth']:.2f} / {ref['bandwidth']:.2f} ({dbw:+.1%}) | "
                  f"{ours['latency']:.1f} / {ref['latency']:.1f} ({dlat:+.1%}) | {ours['hit_rate']:.1%} / "
                  f"{ref['hit_rate']:.1%} ({dhit:+.1f} pt) |")
    print("all within the targets" if ok else "NOT all within the targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
