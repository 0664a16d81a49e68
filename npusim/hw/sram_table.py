"""SRAM energy, leakage and area by capacity and port width, from a CACTI 7 table.

The table (``npusim/hw/data/sram_cacti7_45nm.csv``) was generated with CACTI 7.0 as bundled
by ZigZag (github.com/KULeuven-MICAS/zigzag, ``zigzag/cacti/cacti_master``) at 45 nm, 360 K,
by ``scripts/cacti_sram_table.py`` (its docstring gives the CACTI settings): one row per SRAM
macro of 1 KiB ... 64 MiB (x2) with a 32 ... 1024-bit read/write port, for CACTI's three ITRS
flavours ``hp``, ``lop`` and ``lstp``. Columns: read and write energy per access (pJ), leakage
(mW, subthreshold + gate), area (mm^2).

Between table points a figure is interpolated linearly in log(figure) against log2(capacity)
and log2(width): a power law between neighbours, which is how SRAM energy, leakage and area
scale (they span 4-5 decades over the table). Outside the table, the capacity is extrapolated
with the power law of the two end points and the width is clamped to 32 ... 1024 bits (a
narrower port is modelled as the 32-bit macro, a wider one as several 1024-bit macros side by
side, which is what a memory compiler would give).
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).with_name("data") / "sram_cacti7_45nm.csv"
TECHNOLOGY = "45nm"
CELLS = ("lop", "lstp", "hp")
MIN_WIDTH, MAX_WIDTH = 32, 1024
SOURCE = "CACTI 7.0 (ZigZag's bundled build), 45 nm, scripts/cacti_sram_table.py"


@dataclass(frozen=True)
class Macro:
    """One SRAM macro's figures: pJ per access of its full port width, W and mm^2."""

    read_pj: float
    write_pj: float
    leakage_w: float
    area_mm2: float


@functools.cache
def _table(cell: str) -> dict[int, list[tuple[int, Macro]]]:
    """width (bits) -> [(capacity bytes, Macro)] sorted by capacity, for one cell flavour."""
    rows: dict[int, list[tuple[int, Macro]]] = {}
    with open(TABLE, newline="") as f:
        for r in csv.DictReader(f):
            if r["cell"] != cell:
                continue
            macro = Macro(float(r["read_pj"]), float(r["write_pj"]), float(r["leakage_mw"]) * 1e-3,
                          float(r["area_mm2"]))
            rows.setdefault(int(r["width_bits"]), []).append((int(r["capacity_bytes"]), macro))
    if not rows:
        raise ValueError(f"{TABLE}: no rows for cell {cell!r}; expected one of {', '.join(CELLS)}")
    return {w: sorted(points, key=lambda p: p[0]) for w, points in sorted(rows.items())}


def _log_interpolate(x: float, points: list[tuple[float, Macro]]) -> Macro:
    """The Macro at log2-coordinate ``x`` from (log2-coordinate, Macro) points sorted by x:
    log(figure) linear in x, extrapolated with the end segment outside the points."""
    if len(points) == 1:
        return points[0][1]
    i = 1
    while i < len(points) - 1 and points[i][0] < x:
        i += 1
    (x0, a), (x1, b) = points[i - 1], points[i]
    t = (x - x0) / (x1 - x0)

    def mix(u: float, v: float) -> float:
        return math.exp(math.log(u) + t * (math.log(v) - math.log(u)))

    return Macro(mix(a.read_pj, b.read_pj), mix(a.write_pj, b.write_pj), mix(a.leakage_w, b.leakage_w),
                 mix(a.area_mm2, b.area_mm2))


def sram_macro(capacity: int, width_bits: int, cell: str = "lop") -> Macro:
    """Figures of one SRAM macro of ``capacity`` bytes with a ``width_bits``-bit port.

    A port wider than 1024 bits is ``ceil(width / 1024)`` 1024-bit macros side by side, each
    holding its share of the capacity (energy per access, leakage and area add up)."""
    if capacity <= 0 or width_bits <= 0:
        raise ValueError(f"an SRAM macro needs a capacity and a port width > 0, got {capacity} B, {width_bits} bit")
    table = _table(cell)
    if width_bits > MAX_WIDTH:
        parts = math.ceil(width_bits / MAX_WIDTH)
        one = sram_macro(max(capacity // parts, 1), MAX_WIDTH, cell)
        return Macro(one.read_pj * parts, one.write_pj * parts, one.leakage_w * parts, one.area_mm2 * parts)
    width = max(width_bits, MIN_WIDTH)
    size = math.log2(capacity)
    by_width = [(math.log2(w), _log_interpolate(size, [(math.log2(c), m) for c, m in points]))
                for w, points in table.items()]
    return _log_interpolate(math.log2(width), by_width)
