"""Regenerate npusim/hw/data/sram_cacti7.csv: SRAM energy, leakage and area by size, from CACTI 7.

npusim does not run CACTI: it interpolates this table (npusim/hw/memory_model.py). The table
was made with CACTI 7.0 as bundled by ZigZag (github.com/KULeuven-MICAS/zigzag,
zigzag/cacti/cacti_master, built with its makefile) and this script:

    python scripts/cacti_sram_table.py /path/to/cacti_master/cacti > npusim/hw/data/sram_cacti7.csv

Each row is one SRAM macro (a scratchpad bank): a plain RAM (``cache type "ram"``, no tags),
one bank, one read/write port, no ECC, at 360 K, with ``block size`` = the port width, for
every capacity from 1 KiB to 64 MiB (x2) and port widths 32 ... 1024 bit, with the three ITRS
cell/peripheral flavours CACTI models: ``hp`` (high performance: fast, leaky), ``lop`` (low
operating power) and ``lstp`` (low standby power: slow, barely leaks). CACTI picks the
internal organisation (its default objective: minimal energy-delay^2 within 20 % of the best
delay). Columns: read/write energy per access (pJ), leakage power (mW: subthreshold + gate),
area (mm^2), access and cycle time (ns).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

CAPACITIES = [1024 * 2**i for i in range(17)]  # 1 KiB ... 64 MiB
WIDTHS = [32, 64, 128, 256, 512, 1024]  # port width in bits
CELLS = {"hp": "itrs-hp", "lop": "itrs-lop", "lstp": "itrs-lstp"}

#: lines of ZigZag's CACTI template (cacti_master/cache.cfg_temp) replaced per macro; every other
#: line (wire models, IO defaults CACTI needs even for a plain RAM) is kept as ZigZag ships it
SETTINGS = {
    "-size (bytes)": "{size}",
    "-block size (bytes)": "{block}",
    "-output/input bus width": "{width}",
    "-read-write port": "1",
    "-exclusive read port": "0",
    "-exclusive write port": "0",
    "-technology (u)": "{node}",
    "-Add ECC -": '"false"',
    "-Print input parameters -": '"false"',
}


def config_text(template: str, **values) -> str:
    """The template with each SETTINGS line set, and every ITRS flavour set to ``values['cell']``."""
    lines = []
    for line in template.splitlines():
        for key, value in SETTINGS.items():
            if line.startswith(key + " "):
                line = f"{key} {value.format(**values)}"
        if not line.startswith("//"):
            line = re.sub(r'"itrs-(hp|lop|lstp)"', f'"{values["cell"]}"', line)
        lines.append(line)
    return "\n".join(lines) + "\n"

FIELDS = {
    "read_nj": r"Total dynamic read energy per access \(nJ\): ([\d.eE+-]+)",
    "write_nj": r"Total dynamic write energy per access \(nJ\): ([\d.eE+-]+)",
    "leak_mw": r"Total leakage power of a bank \(mW\): ([\d.eE+-]+)",
    "gate_mw": r"Total gate leakage power of a bank \(mW\): ([\d.eE+-]+)",
    "access_ns": r"Access time \(ns\): ([\d.eE+-]+)",
    "cycle_ns": r"Cycle time \(ns\):\s+([\d.eE+-]+)",
    "dims": r"Cache height x width \(mm\): ([\d.eE+-]+) x ([\d.eE+-]+)",
}


def run_one(cacti: str, template: str, node_um: float, cell: str, size: int, width: int) -> str | None:
    """One CSV row, or None when CACTI finds no organisation for this macro."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "sram.cfg")
        with open(cfg, "w") as f:
            f.write(config_text(template, size=size, block=width // 8, node=node_um, cell=CELLS[cell], width=width))
        # CACTI reads its tech_params/ relative to the working directory
        out = subprocess.run([cacti, "-infile", cfg], capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.abspath(cacti)), timeout=600).stdout
    found = {k: re.search(p, out) for k, p in FIELDS.items()}
    if not all(found.values()):
        return None
    v = {k: float(m.group(1)) for k, m in found.items()}
    height, width_mm = (float(x) for x in found["dims"].groups())
    return (f"{round(node_um * 1000)},{cell},{size},{width},{v['read_nj'] * 1e3:.5g},{v['write_nj'] * 1e3:.5g},"
            f"{v['leak_mw'] + v['gate_mw']:.5g},{height * width_mm:.5g},{v['access_ns']:.4g},{v['cycle_ns']:.4g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cacti", help="path to the CACTI 7 binary (its tech_params/ beside it)")
    parser.add_argument("--node", type=float, default=0.045, help="technology in um (default 0.045)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    with open(os.path.join(os.path.dirname(os.path.abspath(args.cacti)), "cache.cfg_temp")) as f:
        template = f.read()
    print("node_nm,cell,capacity_bytes,width_bits,read_pj,write_pj,leakage_mw,area_mm2,access_ns,cycle_ns")
    grid = [(cell, size, width) for cell in CELLS for size in CAPACITIES for width in WIDTHS]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        rows = pool.map(lambda g: run_one(args.cacti, template, args.node, *g), grid)
        for (cell, size, width), row in zip(grid, rows):
            if row is None:
                print(f"no organisation: {cell} {size} B {width} bit", file=sys.stderr)
            else:
                print(row, flush=True)


if __name__ == "__main__":
    main()
