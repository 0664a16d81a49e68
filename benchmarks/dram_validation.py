"""npusim's DRAM controller (``dram.model: banks``) against Ramulator 2 and DRAMsim3 on seven address traces.

Neither reference is a dependency: give this script their source trees (``--ramulator2 DIR``,
``--dramsim3 DIR``, e.g. a ``git archive`` of the mirror the ``fetch`` tool makes). It builds
each library with CMake if needed and compiles a driver against it
(``benchmarks/dram/ramulator2_driver.cc``, ``benchmarks/dram/dramsim3_driver.cc``). Ramulator 2
(CMU-SAFARI/ramulator2, commit c5b1c3a) fetches yaml-cpp and fmt at configure time; offline the
script points its CMake file at the system's (Debian: ``libyaml-cpp-dev libfmt-dev``) and
turns its Python bindings off; its configuration is written by its own Python front end
(``python -m ramulator export``). DRAMsim3 (umd-memsys/DRAMsim3, commit 2981759) needs nothing.

Every simulator gets the same traces of requests of one device access each (64 B on DDR4 and
DDR5, 32 B on LPDDR5 and HBM3: ``DramDevice.access_bytes``; Ramulator 2's ``get_tx_bytes``,
prefetch x channel width, is the same), offered in trace order as fast as the controller
accepts them (npusim: each run of reads or writes one flow, each more urgent than the next, so
its front end admits them in that order and waits when a queue is full), one channel, open
page, the same address mapping (Ramulator 2's ``RoBaRaCoCh`` = npusim ``RoBaBgRaCoCh``, MAPPING;
with one rank DRAMsim3's ``rochrababgco``). The traces come from the device's geometry
(``traces``): sequential; strided by a quarter page (2 KiB on DDR4's 8 KiB page) and by half a
page (two accesses per row: the command bus binds on LPDDR5); random
accesses aligned to the access over the capacity; two interleaved streams on one bank, the
second one row above the first (the stride to the same bank's next row under the mapping,
``row_stride``); a read stream and a write stream 512 such rows above it; the accesses of
resnet18's tiled DMA commands at the access size. npusim runs with each reference's controller
structure (``LIKE``): against Ramulator 2's controllers (``GenericDDR``, ``LPDDR5``, ``HBM34``:
the same buffers), npusim's defaults: one 32-entry queue per direction that FR-FCFS sees whole
(``bank_queue`` 0), their write watermarks (0.8 and 0.2), and npusim's row-hit cap of 4 where
Ramulator 2 has none; against DRAMsim3, 8-deep per-bank
command queues behind 32-entry transaction queues (its ``PER_BANK``), a row-hit cap of 4,
writes drained once the write queue is full.

Devices (``--device``, repeatable or a comma list; default ``ddr4-3200``; ``all``: ddr4-3200,
lpddr5-6400, ddr5-4800, hbm3-6400): npusim's preset (``npusim/dram/presets.py``) against Ramulator 2's
model of the same part (``RAMULATOR2_DEVICES``: standard, org and timing preset, controller;
all-bank refresh, open rows, FR-FCFS, RoBaRaCoCh, one channel):

- ``ddr4-3200``: ``DDR4``, ``DDR4_8Gb_x8``, ``DDR4_3200AA``, ``GenericDDR``, one rank. Also
  DRAMsim3, on this device only: ``DDR4_8Gb_x8_3200.ini`` with ``channel_size`` 8192 and
  ``tCK`` 0.625 ns.
- ``lpddr5-6400``: ``LPDDR5``, ``LPDDR5_8Gb_x16``, ``LPDDR5_6400``, controller ``LPDDR5`` with
  ``wck_sync_mode="always_on"`` (WCK kept running: no CAS command before a column command;
  npusim has no WCK), one rank.
- ``ddr5-4800``: ``DDR5``, ``DDR5_16Gb_x8``, ``DDR5_4800AN``, ``GenericDDR``, one rank (a
  32-bit sub-channel, as npusim's preset).
- ``hbm3-6400``: ``HBM3``, ``HBM3_16Gb_8hi``, ``HBM3_6400Mbps``, ``HBM34``, one pseudo channel
  (``pseudochannel=1``; its channel holds two): a 32-bit pseudo channel, 2 stack IDs, 4 bank
  groups x 4 banks, 16,384 rows of 1 KiB in both. npusim models the stack IDs as ranks that
  share the pseudo channel's tRRD_S, tFAW and all-bank refresh (``DramDevice.stack_ids``), as
  Ramulator 2 has them (before it did, each had its own: random reads were +49 % and a stream
  -9 %, two refreshes per tREFI). Both cost a SID switch of reads tBurst + tRTRS = 3 CK
  (Ramulator's nCCDR), which npusim also adds to writes.

Every Ramulator 2 timing that has an npusim counterpart (``NPUSIM_TIMING``) is set to npusim's
figure in Ramulator's clock, round(ns / tCK) (``timing_overrides``; the script prints them):
DDR4 nRFC 576 -> 560 (npusim has DRAMsim3's 560 tCK, Ramulator 2 360 ns); LPDDR5 nBL_max 4 -> 2
(its same-group write-to-read is nCWL + BL/n_max + nWTRL, npusim's tCWL + tBurst + tWTR_L),
nRPab 17 -> 15 (npusim precharges for refresh in tRP), nPPD 2 -> 0 (npusim has no PRE-to-PRE
delay); DDR5 nRFC 710 -> 709 (295 ns in 416 ps clocks), nPPD 2 -> 0; HBM3
nRCDWR 15 -> 31 (npusim has one tRCD), nRTW 20 -> 14 (npusim's tCL + tBurst + 2 tCK - tCWL),
nPPD 2 -> 0. What stays different:

- The command/address bus: both issue one command per clock (HBM3: per half-clock tick, on
  each of its row and column buses), each held as long as the standard says (Ramulator 2's
  ``command_cycles``, npusim's ``DramDevice.command_bus``: DDR5 ACT, RD and WR 2 CK, LPDDR5's
  activation ACT-1 and ACT-2 of one CK each, HBM3 ACT 1.5 CK and PRE 0.5); Ramulator 2 picks a
  command per clock, npusim moves a picked access's commands to the first free ticks, and
  HBM3's column commands go on rising edges only in Ramulator 2 (npusim: on any tick).
- Ramulator 2's clock is whole picoseconds: DDR5 tCK 416 ps (npusim 416.7), HBM3 ticks of
  312 ps (half of 625, rounded down): its times run 0.16 % short.
- DDR5 read-to-write: Ramulator 2's nCL + nBL + 2 - nCWL + 2 (the write preamble) against
  npusim's tRTW, 2 CK shorter (an expression, not a parameter).
- Kept at the preset, without counterpart in npusim: nCS (rank switching; one rank), LPDDR5's
  nAAD (ACT-1 to ACT-2 within 8 CK), nWCKPST and nCAS (unused with WCK always on), HBM3's
  nRREFD, and per-bank refresh and RFM figures (unused with all-bank refresh).

Per trace: bandwidth (bytes / time of the last completion), mean read service time
(acceptance into the controller to data, ns: both references complete a write before its data
moves, DRAMsim3 when it accepts it, so only reads compare) and row-hit rate (hits / requests),
and the differences (targets: bandwidth and service time within 10 %, row-hit rate within 5
points); exit status 1 when a figure is outside them.

    .venv/bin/python benchmarks/dram_validation.py --ramulator2 /tmp/ramulator2 --dramsim3 /tmp/dramsim3
    .venv/bin/python benchmarks/dram_validation.py --ramulator2 /tmp/ramulator2 --device all
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
from typing import NamedTuple

import numpy as np

from npusim.dram.controller import Controller, ControllerConfig, timings
from npusim.dram.kernel import access_addresses
from npusim.dram.mapping import parse_mapping
from npusim.dram.model import write_watermarks
from npusim.dram.presets import PRESETS, DramDevice

HERE = Path(__file__).resolve().parent
#: Ramulator 2's RoBaRaCoCh in npusim's notation, its bank group spelled out: from the column up,
#: rank (HBM3: stack ID), bank group, bank, row (channel bits lowest, none with one channel).
#: With one rank it is DRAMsim3's ``rochrababgco`` (npusim ``RoChRaBaBgCo``) too.
MAPPING = "RoBaBgRaCoCh"


def row_stride(device: DramDevice) -> int:
    """Bytes from an address to the same bank's next row under MAPPING (8 KiB x 16 banks on DDR4)."""
    m = parse_mapping(MAPPING, device, 1, device.ranks)
    return 1 << (m.offset_bits + m.shift["Ro"])


def size_name(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def traces(device: DramDevice, rng) -> dict[str, list[tuple[int, bool]]]:
    """name -> [(address, is_write)] in issue order, from ``device``'s geometry: requests of one
    access, a stride of a quarter page, random accesses over the capacity, a second stream
    one row (of the same bank) or 512 rows above the first."""
    n, a, stride = 16384, device.access_bytes, row_stride(device)
    quarter = device.page_bytes // 4
    out = {}
    out["sequential"] = [(a * i, False) for i in range(n)]
    out[f"strided {size_name(quarter)}"] = [(quarter * i, False) for i in range(8192)]
    # two accesses per row: on LPDDR5 a PRE, ACT-1, ACT-2 and two RDs per 2 x 2.5 ns of data, bound by
    # the command bus (one command per 1.25 ns clock) rather than the data
    out[f"strided {size_name(2 * quarter)}"] = [(2 * quarter * i, False) for i in range(8192)]
    out[f"random {a} B"] = [(int(x) * a, False) for x in rng.integers(0, device.capacity // a, 8192)]
    first = [(a * i, False) for i in range(4096)]
    second = [(stride + a * i, False) for i in range(4096)]
    out["two streams, one bank"] = [x for pair in zip(first, second) for x in pair]
    out["read + write streams"] = [x for pair in zip([(a * i, False) for i in range(4096)],
                                                     [(512 * stride + a * i, True) for i in range(4096)]) for x in pair]
    out["resnet18 tiles"] = plan_trace(a)
    return out


def plan_trace(access: int, limit: int = 16384) -> list[tuple[int, bool]]:
    """The accesses (of ``access`` bytes, as DMA bursts of that size make them) of the first DMA
    commands of resnet18's plan at edge-npu (tiled, bump placement) whose DRAM views are
    strided (tiles), in command order."""
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
        for addr in access_addresses(chunks[:, 0] + shift, chunks[:, 1].copy(), access, access).tolist():
            out.append((addr, cmd.kind == "store"))
        if len(out) >= limit:
            break
    return out[:limit]


def npusim_run(trace: list[tuple[int, bool]], device: DramDevice, queue: int = 32, bank_queue: int = 8,
               row_hit_cap: int = 4, write_high: int | None = None, write_low: int | None = None) -> dict:
    """npusim's controller on ``trace``, offered in its order as the references' drivers offer it: each
    run of reads or of writes is a flow, all from time 0, each more urgent than the next, so the
    front end admits them in turn and waits when the queue the next one needs is full."""
    cfg = ControllerConfig(device, channels=1, ranks=device.ranks, mapping=MAPPING, policy="open", scheduler="frfcfs",
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
    end = max(ctrl.data_end(f) for f in flows)  # (a write flow is done at its admission: its data lands later)
    c = ctrl.counts()
    rd, _, _ = ctrl.latency_sums()
    n = len(trace)
    return {"bandwidth": n * device.access_bytes / end, "latency": rd / max(c["reads"], 1), "hit_rate": c["hits"] / n}


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


class Ramulator2Device(NamedTuple):
    """Ramulator 2's model of one npusim preset: a DRAM standard of its Python front end
    (``ramulator.dram``), org and timing presets, the levels set at the org (one rank, or HBM3's one
    pseudo channel), a controller class with its arguments; ``unlike``, when not empty, says how
    the two still differ in organisation (such a device is not in ``--device all``)."""

    standard: str
    org: str
    timing: str
    levels: str
    controller: str
    controller_args: str = ""
    unlike: str = ""


#: The device of each npusim preset compared (module docstring).
RAMULATOR2_DEVICES = {
    "ddr4-3200": Ramulator2Device("DDR4", "DDR4_8Gb_x8", "DDR4_3200AA", "rank=1", "GenericDDR"),
    "lpddr5-6400": Ramulator2Device("LPDDR5", "LPDDR5_8Gb_x16", "LPDDR5_6400", "rank=1", "LPDDR5",
                                    'wck_sync_mode="always_on", '),
    "ddr5-4800": Ramulator2Device("DDR5", "DDR5_16Gb_x8", "DDR5_4800AN", "rank=1", "GenericDDR"),
    "hbm3-6400": Ramulator2Device(
        "HBM3", "HBM3_16Gb_8hi", "HBM3_6400Mbps", "pseudochannel=1", "HBM34",
    ),
}

#: npusim's timing (an expression of ``npusim.dram.controller.timings``, ns) each Ramulator 2
#: timing parameter is set to, in its clock (its nCL is tCL / tCK, rounded). nPPD (PRE to PRE)
#: has none in npusim: 0. Parameters not listed (nCS, nWCKPST, nCAS, nAAD, per-bank refresh,
#: RFM) keep the preset's value: npusim has nothing like them (``differences`` prints them).
NPUSIM_TIMING = {
    "nBL": "tBurst", "nBL_min": "tBurst", "nBL_max": "tBurst", "nCL": "tCL", "nCWL": "tCWL", "nRCD": "tRCD",
    "nRCDRD": "tRCD", "nRCDWR": "tRCD", "nRP": "tRP", "nRPab": "tRP", "nRAS": "tRAS", "nRC": "tRC", "nWR": "tWR",
    "nRTP": "tRTP", "nCCDS": "tCCD_S", "nCCDS_WR": "tCCD_S", "nCCDL": "tCCD_L", "nCCDL_WR": "tCCD_L_WR",
    "nRRDS": "tRRD_S", "nRRDL": "tRRD_L", "nFAW": "tFAW", "nWTRS": "tWTR_S", "nWTRL": "tWTR_L", "nRFC": "tRFC",
    "nREFI": "tREFI", "nRTW": "tRTW", "nCCDR": "tBurst + tRTRS", "nPPD": "0",
}
UNMODELLED = {"rate", "tCK_ps"}

#: Prints, as JSON, the org and the resolved timings (CK) of a device of Ramulator 2's front end.
RAMULATOR2_RESOLVE = """
import json, ramulator
dram = ramulator.dram.{standard}(org_preset={org!r}, timing_preset={timing!r}, {levels})
org, timing = dram.resolve()
print(json.dumps({{"org": org, "timing": timing}}))
"""

#: Ramulator 2's configuration (its Python front end, ``python -m ramulator export``): the device
#: (its timings set to npusim's, ``timing_overrides``), one channel, FR-FCFS, all-bank refresh,
#: open rows, RoBaRaCoCh (= npusim's MAPPING with one channel).
RAMULATOR2_SCRIPT = """
import ramulator
frontend = ramulator.frontend.ReadWriteTrace(clock_ratio=1, path={trace!r})
dram = ramulator.dram.{standard}(org_preset={org!r}, timing_preset={timing!r}, {levels}{overrides})
ctrl = ramulator.controller.{controller}(dram=dram, {controller_args}scheduler=ramulator.scheduler.FRFCFS(),
    refresh_manager=ramulator.refresh_manager.AllBank(), row_policy=ramulator.row_policy.Open(),
    addr_mapper=ramulator.addr_mapper.RoBaRaCoCh())
mem = ramulator.memory_system.GenericDRAM(clock_ratio=1, controllers=[ctrl],
    channel_mapper=ramulator.channel_mapper.CacheLineInterleave())
sim = ramulator.Simulation(frontend, mem)
sim.run()
"""


def ramulator2_python(src: Path, args: list[str]) -> str:
    """Python with Ramulator 2's front end (``src/python``) on the path: its standard output."""
    return subprocess.run([sys.executable, *args], check=True, capture_output=True, text=True,
                          env={"PYTHONPATH": str(src / "python"), "PATH": ""}).stdout


def ramulator2_resolved(src: Path, ram: Ramulator2Device, folder: Path) -> dict:
    """Ramulator 2's org and timings (in its clock, before any override) of ``ram``."""
    script = folder / "ramulator2_resolve.py"
    script.write_text(RAMULATOR2_RESOLVE.format(**ram._asdict()))
    return json.loads(ramulator2_python(src, [str(script)]))


def timing_overrides(device: DramDevice, resolved: dict) -> dict[str, int]:
    """Ramulator 2's timings that differ from npusim's, set to npusim's (NPUSIM_TIMING) in its
    clock: tRFC of DDR4 is 560 tCK in npusim (DRAMsim3's figure), 576 in Ramulator (360 ns)."""
    t = timings(ControllerConfig(device, 1, device.ranks, MAPPING))
    tck = resolved["timing"]["tCK_ps"] / 1000
    out = {}
    for name, value in resolved["timing"].items():
        if name in NPUSIM_TIMING:
            ours = round(eval(NPUSIM_TIMING[name], {}, dict(t)) / tck)
            if ours != value:
                out[name] = ours
    return out


def differences(device: DramDevice, ram: Ramulator2Device, resolved: dict, overrides: dict) -> list[str]:
    """What the comparison of ``device`` sets in Ramulator 2 and what it cannot align."""
    timing = resolved["timing"]
    lines = [f"Ramulator 2 {ram.standard} {ram.org} {ram.timing} ({ram.levels}), controller {ram.controller}; "
             "set to npusim's: " + (", ".join(f"{k} {timing[k]} -> {v}" for k, v in overrides.items()) or "none")]
    kept = [f"{k} {v}" for k, v in timing.items() if k not in NPUSIM_TIMING and k not in UNMODELLED]
    if kept:
        lines.append("  no counterpart in npusim (preset kept): " + ", ".join(kept))
    org = resolved["org"]
    theirs = (org.get("rank", org.get("sid")), org["bankgroup"], org["bank"], org["row"],
              org["column"] * org["channel_width"] // 8, org["channel_width"])
    ours = (device.ranks, device.bankgroups, device.banks_per_group, device.rows, device.page_bytes, device.bus_bits)
    if theirs != ours:
        lines.append(f"  organisation (ranks, bank groups, banks, rows, page bytes, bus bits): Ramulator {theirs}, "
                     f"npusim {ours}")
    tck_ns = timing["tCK_ps"] / 1000
    if abs(tck_ns - device.tCK) > 1e-9:
        lines.append(f"  clock: Ramulator tCK {tck_ns} ns, npusim {device.tCK} ns")
    if ram.unlike:
        lines.append(f"  organisation differs: {ram.unlike}")
    return lines


def ramulator2_config(src: Path, ram: Ramulator2Device, overrides: dict, folder: Path) -> Path:
    (folder / "dummy.trace").write_text("R 0,0,0,0,0,0\n")
    script = RAMULATOR2_SCRIPT.format(trace=str(folder / "dummy.trace"),
                                      overrides="".join(f", {k}={v}" for k, v in overrides.items()), **ram._asdict())
    (folder / "ramulator2_config.py").write_text(script)
    path = folder / "ramulator2.yaml"
    ramulator2_python(src, ["-m", "ramulator", "export", str(folder / "ramulator2_config.py"), "-o", str(path)])
    return path


def ramulator2_build(src: Path, folder: Path) -> Path:
    """Ramulator 2's library and ``benchmarks/dram/ramulator2_driver.cc`` against it (in ``folder``,
    not in the reference's tree: the driver's output changes with the script). Its CMake file
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
    driver = folder / "ramulator2_driver"
    subprocess.run(["g++", "-O2", "-std=c++20", f"-I{src / 'src'}", str(HERE / "dram" / "ramulator2_driver.cc"),
                    f"-L{src}", "-lramulator", "-lyaml-cpp", "-lfmt", f"-Wl,-rpath,{src}", "-o", str(driver)],
                   check=True)
    return driver


def ramulator2_run(driver: Path, config: Path, trace, folder: Path) -> dict:
    path = folder / "trace.txt"
    path.write_text("".join(f"{a:#x} {'W' if w else 'R'}\n" for a, w in trace))
    out = subprocess.run([str(driver), str(config), str(path)], check=True, capture_output=True, text=True).stdout
    n, last, tck, lat = out.split()[-4:]
    stats = dict(line.strip().split(": ", 1) for line in out.splitlines() if ": " in line)
    hits = int(stats["row_hits"])
    # a request moves the device's access (get_tx_bytes: prefetch x channel width, 32 B on LPDDR5);
    # Ramulator 2 completes a write when its WR command issues (its data follows tCWL + tBurst later)
    return {"bandwidth": int(n) * int(stats["tx_bytes"]) / (int(last) * float(tck)),
            "latency": float(lat) * float(tck), "hit_rate": hits / int(n)}


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
        windows = 1 if d.stack_ids else d.ranks  # (HBM3's stack IDs share one activation window)
        bound = max(t["tRRD_S"], t["tFAW"] / 4, t["tRC"] / (d.banks * d.ranks), t["tBurst"]) / windows
        print(f"| {name} | {seq:.1%} | {1 - t['tRFC'] / t['tREFI']:.1%} | {hits:.1%} | {c.end(f) / m:.2f} | "
              f"{bound:.2f} |")


#: npusim as each reference's controller is built: DRAMsim3's PER_BANK command queues (8 per bank
#: behind 32-entry transaction queues, a row-hit cap of 4, writes drained once the write queue is full);
#: Ramulator 2's GenericDDR: npusim's defaults (one 32-entry queue per direction scheduled as a
#: whole, write mode above 0.8 x 32 = 25.6 writes until below 0.2 x 32 = 6.4), with its row-hit
#: cap of 4 (Ramulator 2 has none).
LIKE = {"DRAMsim3": {"write_high": 32, "write_low": 0},
        "Ramulator 2": dict(zip(("write_high", "write_low"), write_watermarks(32)), bank_queue=0)}


def compare(name: str, run, ours_settings: dict, traces_by_name: dict, device: DramDevice) -> bool:
    """Print the table of npusim against one reference; whether every figure is within the targets."""
    print(f"\n{name}, {device.name}\n")
    print(f"| trace | requests | bandwidth GB/s npusim / {name} (diff) | service time ns npusim / {name} (diff) "
          f"| row hits npusim / {name} (diff) |")
    print("|---|---|---|---|---|")
    ok = True
    for trace_name, trace in traces_by_name.items():
        ours, ref = npusim_run(trace, device, **ours_settings), run(trace)
        dbw = ours["bandwidth"] / ref["bandwidth"] - 1
        dlat = ours["latency"] / ref["latency"] - 1
        dhit = 100 * (ours["hit_rate"] - ref["hit_rate"])
        ok &= abs(dbw) <= 0.10 and abs(dlat) <= 0.10 and abs(dhit) <= 5
        print(f"| {trace_name} | {len(trace):,} | {ours['bandwidth']:.2f} / {ref['bandwidth']:.2f} ({dbw:+.1%}) | "
              f"{ours['latency']:.1f} / {ref['latency']:.1f} ({dlat:+.1%}) | {ours['hit_rate']:.1%} / "
              f"{ref['hit_rate']:.1%} ({dhit:+.1f} pt) |", flush=True)
    print("all within the targets" if ok else "NOT all within the targets")
    return ok


def compare_ramulator2(src: Path, driver: Path, device: DramDevice, settings: dict, folder: Path) -> bool:
    """npusim against Ramulator 2's model of ``device`` (RAMULATOR2_DEVICES), its settings printed first."""
    ram = RAMULATOR2_DEVICES[device.name]
    resolved = ramulator2_resolved(src, ram, folder)
    overrides = timing_overrides(device, resolved)
    print("\n" + "\n".join(differences(device, ram, resolved, overrides)))
    config = ramulator2_config(src, ram, overrides, folder)
    return compare("Ramulator 2", lambda t: ramulator2_run(driver, config, t, folder), settings,
                   traces(device, np.random.default_rng(31)), device)


def device_names(values: list[str] | None) -> list[str]:
    """``--device`` values (repeated or comma lists; ``all``: every device Ramulator 2 models like
    npusim) as preset names, in order, each once."""
    names: list[str] = []
    for value in values or ["ddr4-3200"]:
        for name in value.split(","):
            name = name.strip()
            expanded = [n for n, r in RAMULATOR2_DEVICES.items() if not r.unlike] if name == "all" else [name]
            names += [n for n in expanded if n not in names]
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dramsim3", type=Path, help="DRAMsim3 source tree")
    parser.add_argument("--ramulator2", type=Path, help="Ramulator 2 source tree")
    parser.add_argument("--device", action="append", metavar="NAME",
                        help="npusim preset(s) to compare (repeatable or a comma list; default ddr4-3200; 'all': "
                        f"{', '.join(device_names(['all']))}); Ramulator 2 models "
                        f"{', '.join(RAMULATOR2_DEVICES)}, DRAMsim3 ddr4-3200")
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
    devices = device_names(args.device)
    unknown = [n for n in devices if n not in RAMULATOR2_DEVICES]
    if unknown:
        parser.error(f"--device {', '.join(unknown)}: expected one of {', '.join(RAMULATOR2_DEVICES)} or all")
    if args.closed_form or (args.dramsim3 is None and args.ramulator2 is None):
        closed_form()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ok = True
        ramulator2_driver = ramulator2_build(args.ramulator2, folder) if args.ramulator2 is not None else None
        for device in (PRESETS[n] for n in devices):
            if args.dramsim3 is not None and device.name == "ddr4-3200":
                driver, config = dramsim3_build(args.dramsim3), dramsim3_config(args.dramsim3, folder)
                ok &= compare("DRAMsim3", lambda t: dramsim3_run(driver, config, t, folder),
                              {"queue": args.queue, "bank_queue": args.bank_queue, **LIKE["DRAMsim3"]},
                              traces(device, np.random.default_rng(31)), device)
            elif args.dramsim3 is not None:
                print(f"\nDRAMsim3: ddr4-3200 only, not {device.name}")
            if args.ramulator2 is not None:
                ok &= compare_ramulator2(args.ramulator2, ramulator2_driver, device,
                                         {"queue": args.queue, **LIKE["Ramulator 2"]}, folder)
    return 0 if ok else 1  # 1: some figure outside the targets (printed above)


if __name__ == "__main__":
    sys.exit(main())
