"""DSE results: the rows of a sweep, written as CSV and JSON, read back, and summarised."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import npusim
from npusim.util import units
from npusim.util.atomic_io import atomic_write_text
from npusim.sim.metrics import METRIC_COLUMNS, WALL_CLOCK_COLUMNS, rows_to_csv
from npusim.dse.sweep import BUDGET_KEY, DseError, Sweep, knob_quantities


@dataclass
class SweepResult:
    rows: list[dict]
    computed: int = 0
    cached: int = 0
    seconds: float = 0.0
    points: list = field(default_factory=list, repr=False)  # npusim.dse.Point, one per row

    @property
    def infeasible(self) -> int:
        return sum(r["status"] != "ok" for r in self.rows)




def without_wall_clock(rows: list[dict]) -> list[dict]:
    """Rows without their wall-clock columns: what must be identical between two runs."""
    return [{k: v for k, v in row.items() if k not in WALL_CLOCK_COLUMNS} for row in rows]


def write_results(result: SweepResult, out: str | Path, sweeps: list[Sweep], *,
                  timings: bool = False) -> tuple[Path, Path]:
    """``out`` with .csv and .json suffixes; JSON holds the sweep description and the rows.

    Wall-clock columns (``solve_seconds``) are written only with ``timings``, so the files of
    two runs (any ``--jobs``, any backend) are byte-identical."""
    out = Path(out)
    csv_path, json_path = out.with_suffix(".csv"), out.with_suffix(".json")
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    rows = result.rows if timings else without_wall_clock(result.rows)
    columns = [c for c in METRIC_COLUMNS if timings or c not in WALL_CLOCK_COLUMNS]
    atomic_write_text(csv_path, rows_to_csv(rows))
    atomic_write_text(json_path, json.dumps({
        "format": "npusim-dse/1", "npusim": npusim.__version__,
        "sweeps": {s.key: list(s.values) for s in sweeps},
        "columns": [*columns, *(s.key for s in sweeps)],
        "rows": rows,
    }, indent=1) + "\n")
    return csv_path, json_path


def read_results(path: str | Path) -> list[dict]:
    """Rows of a DSE result (.json as written above, or .csv), e.g. to plot them later."""
    path = Path(path)
    try:
        if path.suffix == ".json":
            return json.loads(path.read_text())["rows"]
        with path.open(newline="") as f:
            return [{k: _csv_value(v) for k, v in row.items()} for row in csv.DictReader(f)]
    except (OSError, ValueError, KeyError) as exc:
        raise DseError(f"{path}: cannot read DSE results: {exc}") from None


def _csv_value(text: str):
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def summary(result: SweepResult) -> str:
    """A short text table: one line per point (trace, settings, planner, status, key metrics)."""
    lines, cells = [], []
    for point, row in zip(result.points, result.rows):
        settings = " ".join(f"{k}={_show(k, v)}" for k, v in point.settings)
        if row["status"] == "ok":
            metrics = (f"{row['cycles']:>14,.0f} cyc {row['energy_pj'] / 1e6:>10.3f} uJ "
                       f"{row['offchip_bytes']:>13,} B off-chip")
            if row.get("dram_row_hit_rate") not in (None, ""):  # dram.model: banks
                metrics += f" {row['dram_row_hit_rate']:>7.2%} row hits"
        else:
            metrics = "infeasible: " + row["reason"][:90]
        cells.append((point.trace_name, settings, point.pipeline, metrics))
    widths = [max((len(c[i]) for c in cells), default=0) for i in range(3)]  # columns line up whatever the names
    for trace, settings, pipeline, metrics in cells:
        lines.append(f"{trace:<{widths[0]}}  {settings:<{widths[1]}}  {pipeline:<{widths[2]}}  {metrics}")
    lines.append(f"{len(result.rows)} points ({result.cached} cached, {result.computed} computed, "
                 f"{result.infeasible} infeasible) in {result.seconds:.1f} s")
    return "\n".join(lines)


#: How a swept value of a quantity reads in the summary: its base unit with an SI prefix.
_SHOWN_UNITS = {"bandwidth": "B/s", "frequency": "Hz", "power": "W", "time": "s"}


def _show(key: str, value) -> str:
    """A swept value as a person writes it: 12.8GB/s, 1GHz, 512KiB (not 12800000000.0)."""
    quantity = "size" if key == BUDGET_KEY else knob_quantities().get(key)
    if isinstance(value, int) and quantity == "size":
        return units.format_bytes(value).replace(" ", "")
    if quantity in _SHOWN_UNITS and isinstance(value, (int, float)) and not isinstance(value, bool):
        for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"),
                               (1e-9, "n")):
            if abs(value) >= factor:
                return f"{value / factor:g}{prefix}{_SHOWN_UNITS[quantity]}"
    return str(value)
