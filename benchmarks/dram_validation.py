"""npusim's DRAM controller (``dram.model: banks``) against Ramulator 2 and DRAMsim3 on six address traces.

Neither reference is a dependency: give this script their source trees (``--ramulator2 DIR``,
``--dramsim3 DIR``, e.g. a ``git archive`` of the mirror the ``fetch`` tool makes). It builds
each library with CMake if needed and compiles a driver against it
(``benchmarks/dram/ramulator2_driver.cc``, ``benchmarks/dram/dramsim3_driver.cc``). Ramulator 2
(CMU-SAFARI/ramulator2, commit c5b1c3a) fetches yaml-cpp and fmt at configure time; offline the
script points its CMake file at the system's (Debian: ``libyaml-cpp-dev libfmt-dev``) and
turns its Python bindings off; its configuration is written by its own Python front end
(``python -m ramulator export``). DRAMsim3 (umd-memsys/DRAMsim3, commit 2981759) needs nothing.

Every simulator gets the same traces of 64 B requests, offered in trace order as fast as the
controller accepts them (npusim: each run of reads or writes one flow, each more urgent than
the next, so its front end admits them in that order and waits when a queue is full), on
DDR4-3200 8 Gb x8 (Ramulator 2's ``DDR4_3200AA`` with tRFC = 560 tCK, DRAMsim3's
``DDR4_8Gb_x8_3200.ini`` with ``channel_size`` 8192 and ``tCK`` 0.625 ns, npusim's
``ddr4-3200`` preset), one channel, one rank, open page, the same address mapping (Ramulator
2's ``RoBaRaCoCh`` = DRAMsim3's ``rochrababgco`` = npusim ``RoChRaBaBgCo`` with one channel and
rank). npusim runs with each reference's controller structure (``LIKE``): against Ramulator 2's
``GenericDDR``, one 32-entry queue per direction that FR-FCFS sees whole (``bank_queue`` 0,
npusim's default), no row-hit cap, its write watermarks; against DRAMsim3, 8-deep per-bank
command queues behind 32-entry transaction queues (its ``PER_BANK``), a row-hit cap of 4,
writes drained once the write queue is full.

Per trace: bandwidth (bytes / time of the last completion), mean read service time
(acceptance into the controller to data, ns: both references complete a write before its data
moves, DRAMsim3 when it accepts it, so only reads compare) and row-hit rate (hits / requests),
and the differences (targets: bandwidth and service time within 10 %, row-hit rate within 5
points).

    .venv/bin/python benchmarks/dram_validation.py --ramulator2 /tmp/ramulator2 --dramsim3 /tmp/dramsim3
    .venv/bin/python benchmarks/dram_validation.py --closed-form

``--closed-form`` needs no reference: for every preset (one channel, the simulator's default
queues), a sequential read stream against the pins' peak and the refresh bound
1 - tRFC/tREFI, and random reads of one access against the activation bound max(tRRD_S, tFAW/4,
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


def npusim_run(trace: list[tuple[int, bool]], queue: int = 32, bank_queue: int = 8, row_hit_cap: int = 4,
               write_high: int | None = None, write_low: int | None = None) -> dict:
    """npusim's controller on ``trace``, offered in its order as the references' drivers offer it: each
    run of reads or of writes is a flow, all from time 0, each more urgent than the next, so the
    front end admits them in turn and waits when the queue the next one needs is full."""
    cfg = ControllerConfig(DDR4_3200, channels=1, ranks=1, mapping=MAPPING, policy="open", scheduler="frfcfs",
                           row_hit_cap=row_hit_cap, read_queue=queue, write_queue=queue,
                           write_high=3 * queue // 4 if write_high is None else write_high,
                           write_low=queue // 4 if write_low is None else write_low, bank_queue=bank_queue)
    ctrl = Controller(cfg)
    addresses = np.array([a for a, _ in trace], dtype=np.int64)
    writes = np.array([w for _, w in trace], dtype=bool)
    cuts = [0, *(np.flatnonzero(writes[1:] != writes[:-1]) + 1).tolist(), len(trace)]
    flows = [ctrl.add_flow(addresses[lo:hi], bool(writes[lo]), float(k), 0.0)
             for k, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:]))]
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


#: Ramulator 2's configuration (its Python front end, ``python -m ramulator export``): DDR4-3200AA 8 Gb
#: x8, one channel and rank, FR-FCFS, all-bank refresh, open rows, RoBaRaCoCh (= npusim's MAPPING with
#: one channel and rank); tRFC set to the preset's 560 tCK (Ramulator derives 576 from 360 ns).
RAMULATOR2_SCRIPT = """
import ramulator
frontend = ramulator.frontend.ReadWriteTrace(clock_ratio=1, path={trace!r})
ddr4 = ramulator.dram.DDR4(org_preset="DDR4_8Gb_x8", timing_preset="DDR4_3200AA", rank=1, nRFC=560)
ctrl = ramulator.controller.GenericDDR(dram=ddr4, scheduler=ramulator.scheduler.FRFCFS(),
    refresh_manager=ramulator.refresh_manager.AllBank(), row_policy=ramulator.row_policy.Open(),
    addr_mapper=ramulator.addr_mapper.RoBaRaCoCh())
mem = ramulator.memory_system.GenericDRAM(clock_ratio=1, controllers=[ctrl],
    channel_mapper=ramulator.channel_mapper.CacheLineInterleave())
sim = ramulator.Simulation(frontend, mem)
sim.run()
"""


def ramulator2_build(src: Path) -> Path:
    """Ramulator 2's library and ``benchmarks/dram/ramulator2_driver.cc`` against it. Its CMake file
    fetches yaml-cpp and fmt from GitHub; offline (no ``ext/yaml-cpp``), it is pointed at the
    system's (Debian: ``libyaml-cpp-dev libfmt-dev``) instead, and the Python bindings are off."""
    lib = src / "libramulator.so"
    if not lib.exists():
        cmake = src / "CMakeLists.txt"
        text = cmake.read_text()
        if not (src / "ext" / "yaml-cpp").exists() and "FetchContent_Declare(\n  yaml-cpp" in text:
            start, end = text.index('message("Configuring yaml-cpp...")'), text.index("option(RAMULATOR_PYTHON_BINDINGS")
            text = text[:start] + "find_package(yaml-cpp REQUIRED)\nfind_package(fmt REQUIRED)\n" + text[end:]
            cmake.write_text(text.replace("PRIVATE yaml-cpp::yaml-cpp", "PRIVATE yaml-cpp"))
        (src / "build").mkdir(exist_ok=True)
        subprocess.run(["cmake", "..", "-DCMAKE_BUILD_TYPE=Release", "-DRAMULATOR_PYTHON_BINDINGS=OFF"],
                       cwd=src / "build", check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["make", "-j2", "ramulator"], cwd=src / "build", check=True, stdout=subprocess.DEVNULL)
    driver = src / "npusim_driver"
    subprocess.run(["g++", "-O2", "-std=c++20", f"-I{src / 'src'}", str(HERE / "dram" / "ramulator2_driver.cc"),
                    f"-L{src}", "-lramulator", "-lyaml-cpp", "-lfmt", f"-Wl,-rpath,{src}", "-o", str(driver)],
                   check=True)
    return driver


def ramulator2_config(src: Path, folder: Path) -> Path:
    (folder / "dummy.trace").write_text("R 0,0,0,0,0,0\n")
    script = folder / "ramulator2_config.py"
    script.write_text(RAMULATOR2_SCRIPT.format(trace=str(folder / "dummy.trace")))
    path = folder / "ramulator2.yaml"
    subprocess.run([sys.executable, "-m", "ramulator", "export", str(script), "-o", str(path)], check=True,
                   env={"PYTHONPATH": str(src / "python"), "PATH": ""})
    return path


def ramulator2_run(driver: Path, config: Path, trace, folder: Path) -> dict:
    path = folder / "trace.txt"
    path.write_text("".join(f"{a:#x} {'W' if w else 'R'}\n" for a, w in trace))
    out = subprocess.run([str(driver), str(config), str(path)], check=True, capture_output=True, text=True).stdout
    n, last, tck, lat = out.split()[-4:]
    stats = dict(line.strip().split(": ", 1) for line in out.splitlines() if ": " in line)
    hits = int(stats["row_hits"])
    # Ramulator 2 completes a write when its WR command issues (its data follows tCWL + tBurst later)
    return {"bandwidth": int(n) * 64 / (int(last) * float(tck)), "latency": float(lat) * float(tck),
            "hit_rate": hits / int(n)}


def closed_form() -> None:
    from npusim.dram.controller import timings
    from npusim.dram.presets import PRESETS, default_mapping

    rng = np.random.default_rng(0)
    print("| preset | sequential / peak | 1 - tRFC/tREFI | row hits | random access ns/read | activation bound ns |")
    print("|---|---|---|---|---|---|")
    for name, d in PRESETS.items():
        cfg = ControllerConfig(d, 1, d.ranks, default_mapping(d))
        t = timings(cfg)
        c = Controller(cfg)
        n = 1 << 16
        f = c.add_flow(np.arange(n, dtype=np.int64) * d.access_bytes, False, 0.0, 0.0)
        c.run(1e15)
        seq = n * d.access_bytes / c.end(f) / (d.channel_bandwidth / 1e9)
        hits = c.counts()["hits"] / n
        c = Controller(cfg)
        m = 20000
        # aligned to the access (a 64 B-aligned address never sets the bit of a 32 B access's
        # bank group 0 under LPDDR5's RoRaBaCoBgCh, and would reach half the banks)
        f = c.add_flow(rng.integers(0, d.capacity // d.access_bytes, m).astype(np.int64) * d.access_bytes, False,
                       0.0, 0.0)
        c.run(1e15)
        bound = max(t["tRRD_S"], t["tFAW"] / 4, t["tRC"] / d.banks, t["tBurst"]) / d.ranks
        print(f"| {name} | {seq:.1%} | {1 - t['tRFC'] / t['tREFI']:.1%} | {hits:.1%} | {c.end(f) / m:.2f} | "
              f"{bound:.2f} |")


#: npusim as each reference's controller is built: DRAMsim3's PER_BANK command queues (8 per bank
#: behind 32-entry transaction queues, a row-hit cap of 4, writes drained once the write queue is full);
#: Ramulator 2's GenericDDR (one 32-entry buffer per direction scheduled as a whole, no row-hit
#: cap, write mode above 0.8 x 32 = 25.6 writes until below 0.2 x 32 = 6.4).
LIKE = {"DRAMsim3": {"write_high": 32, "write_low": 0}, "Ramulator 2": {"bank_queue": 0, "row_hit_cap": 1 << 20, "write_high": 26, "write_low": 6}}


def compare(name: str, run, ours_settings: dict, traces_by_name: dict) -> bool:
    """Print the table of npusim against one reference; whether every figure is within the targets."""
    print(f"\n{name}\n")
    print(f"| trace | requests | bandwidth GB/s npusim / {name} (diff) | service time ns npusim / {name} (diff) "
          f"| row hits npusim / {name} (diff) |")
    print("|---|---|---|---|---|")
    ok = True
    for trace_name, trace in traces_by_name.items():
        ours, ref = npusim_run(trace, **ours_settings), run(trace)
        dbw = ours["bandwidth"] / ref["bandwidth"] - 1
        dlat = ours["latency"] / ref["latency"] - 1
        dhit = 100 * (ours["hit_rate"] - ref["hit_rate"])
        ok &= abs(dbw) <= 0.10 and abs(dlat) <= 0.10 and abs(dhit) <= 5
        print(f"| {trace_name} | {len(trace):,} | {ours['bandwidth']:.2f} / {ref['bandwidth']:.2f} ({dbw:+.1%}) | "
              f"{ours['latency']:.1f} / {ref['latency']:.1f} ({dlat:+.1%}) | {ours['hit_rate']:.1%} / "
              f"{ref['hit_rate']:.1%} ({dhit:+.1f} pt) |", flush=True)
    print("all within the targets" if ok else "NOT all within the targets")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dramsim3", type=Path, help="DRAMsim3 source tree")
    parser.add_argument("--ramulator2", type=Path, help="Ramulator 2 source tree")
    parser.add_argument("--closed-form", action="store_true", help="the closed-form checks only (no reference)")
    parser.add_argument("--queue", type=int, default=32, help="npusim's read/write queue entries (dram.read_queue)")
    parser.add_argument("--bank-queue", type=int, default=8, help="npusim's per-bank command queues against DRAMsim3 "
                        "(dram.bank_queue; 0: one shared queue per direction)")
    args = parser.parse_args()
    if args.queue < 1 or args.bank_queue < 0:
        parser.error("--queue must be at least 1 and --bank-queue at least 0")
    for flag, tree in (("--dramsim3", args.dramsim3), ("--ramulator2", args.ramulator2)):
        if tree is not None and not (tree / "src").is_dir():
            parser.error(f"{flag} {tree}: not a source tree (no src/ folder)")
    if args.closed_form or (args.dramsim3 is None and args.ramulator2 is None):
        closed_form()
        return 0
    traces_by_name = traces(np.random.default_rng(31))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ok = True
        if args.dramsim3 is not None:
            driver, config = dramsim3_build(args.dramsim3), dramsim3_config(args.dramsim3, folder)
            ok &= compare("DRAMsim3", lambda t: dramsim3_run(driver, config, t, folder),
                          {"queue": args.queue, "bank_queue": args.bank_queue, **LIKE["DRAMsim3"]}, traces_by_name)
        if args.ramulator2 is not None:
            driver, config = ramulator2_build(args.ramulator2), ramulator2_config(args.ramulator2, folder)
            ok &= compare("Ramulator 2", lambda t: ramulator2_run(driver, config, t, folder),
                          {"queue": args.queue, **LIKE["Ramulator 2"]}, traces_by_name)
    return 0 if ok else 1  # 1: some figure outside the targets (printed above)


if __name__ == "__main__":
    sys.exit(main())
