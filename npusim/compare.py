"""Planner comparison: run several pipelines on one trace and hardware, one row each.

``metrics_row`` is the flat record of one simulated plan (also the row of a DSE sweep and
the source of the golden numbers): off-chip bytes by cause, split into reads (compulsory,
retrieve) and writes (writeback, spill), on- and off-chip peaks, latency, energy by
component, bytes on the DRAM bus (whole bursts), solve time and plan status. A pipeline that cannot plan at the budget gives an
``infeasible`` row carrying the error message, so one bad pipeline does not hide the others.

``format_rows`` prints the rows as a text table (one column per planner, one line per
metric, which reads well with a dozen metrics), as CSV or as JSON (one record per planner).
"""

from __future__ import annotations

import csv
import io
import json

from npusim.errors import NpusimError
from npusim.graph.model import Graph
from npusim.hw.config import Hardware
from npusim.plan.model import Plan
from npusim.hw.silicon import AREA_PARTS
from npusim.registry import default_registry
from npusim.sim.report import DRAM_DYNAMIC_COMPONENTS, DRAM_STATIC_COMPONENTS, ENERGY_COMPONENTS, Report
from npusim.units import format_bytes

READ_CAUSES = ("compulsory", "retrieve")  # DRAM -> scratchpad
WRITE_CAUSES = ("writeback", "spill")  # scratchpad -> DRAM
FORMATS = ("text", "csv", "json")

#: Row statistics of dram.model: banks (``npusim.dram.model.BankedDram.stats``), prefixed dram_.
DRAM_COLUMNS = ("dram_row_hit_rate", "dram_row_hits", "dram_row_misses", "dram_row_conflicts", "dram_activations",
                "dram_refreshes", "dram_avg_read_latency_ns")
#: Columns of every row, in order; energies in pJ, latency in cycles and seconds.
METRIC_COLUMNS = (
    "trace", "hardware", "planner", "budget", "capacity", "status", "plan_status", "reason",
    "cycles", "latency_s", "energy_pj", "energy_dynamic_pj", "energy_static_pj",
    *(f"energy_{c}_pj" for c in ENERGY_COMPONENTS), "area_mm2", *(f"area_{p}_mm2" for p in AREA_PARTS),
    "edp_js", "energy_per_inference_uj",
    "offchip_bytes", "offchip_read_bytes", "offchip_write_bytes", "offchip_bus_bytes",
    *(f"offchip_{c}_bytes" for c in (*READ_CAUSES, *WRITE_CAUSES)),
    "onchip_peak_bytes", "offchip_peak_bytes",
    # dram.model: banks only (empty with the bandwidth model): npusim.dram.model
    *(f"energy_{c}_pj" for c in (*DRAM_DYNAMIC_COMPONENTS, *DRAM_STATIC_COMPONENTS)), *DRAM_COLUMNS,
    "solve_seconds",
)
#: Wall-clock columns: the only values that differ between two runs of the same point.
WALL_CLOCK_COLUMNS = ("solve_seconds",)


def metrics_row(plan: Plan, report: Report, *, trace: str, budget: object = None) -> dict:
    """The flat, JSON-safe record of one simulated plan."""
    row = dict.fromkeys(METRIC_COLUMNS)
    row.update(
        trace=trace, hardware=report.hardware, planner=report.planner,
        budget=_budget_label(budget), capacity=plan.capacity, status="ok",
        plan_status=report.plan_status, reason="", cycles=report.cycles, latency_s=report.seconds,
        energy_pj=report.total_energy_pj, energy_dynamic_pj=report.dynamic_energy_pj,
        energy_static_pj=report.static_energy_pj, area_mm2=report.total_area_mm2,
        edp_js=report.energy_delay_product, energy_per_inference_uj=report.total_energy_pj / 1e6,
        offchip_bytes=report.offchip_total_bytes,
        offchip_read_bytes=report.offchip_read_bytes, offchip_write_bytes=report.offchip_write_bytes,
        offchip_bus_bytes=report.offchip_bus_bytes, onchip_peak_bytes=report.onchip_peak_bytes, offchip_peak_bytes=report.offchip_peak_bytes,
        solve_seconds=plan.meta.solve_seconds,
    )
    for component in ENERGY_COMPONENTS:
        row[f"energy_{component}_pj"] = report.energy_pj.get(component, 0.0)
    for part in AREA_PARTS:
        row[f"area_{part}_mm2"] = report.area_mm2.get(part, 0.0)
    for cause in (*READ_CAUSES, *WRITE_CAUSES):
        row[f"offchip_{cause}_bytes"] = report.offchip_bytes.get(cause, 0)
    if report.dram_stats:
        for c in (*DRAM_DYNAMIC_COMPONENTS, *DRAM_STATIC_COMPONENTS):
            row[f"energy_{c}_pj"] = report.energy_pj.get(c, 0.0)
        for column in DRAM_COLUMNS:
            row[column] = report.dram_stats[column.removeprefix("dram_")]
    return row


def infeasible_row(*, trace: str, hardware: str, planner: str, budget: object, reason: str,
                   capacity: int | None = None) -> dict:
    """The record of a point that could not be planned or simulated, with the reason."""
    row = dict.fromkeys(METRIC_COLUMNS)
    row.update(trace=trace, hardware=hardware, planner=planner, budget=_budget_label(budget),
               capacity=capacity, status="infeasible", plan_status="", reason=reason)
    return row


def _budget_label(budget: object) -> object:
    """The budget as asked: bytes, 'MR'/'MH'/'MP' or a size text; 'scratchpad' for the default."""
    return "scratchpad" if budget is None else budget


def compare_planners(graph: Graph, hw: Hardware, pipelines: list[str], budget: str | int | None = None,
                     *, trace: str | None = None, allow_oversize: bool = False) -> list[dict]:
    """One row per pipeline, in the order given. ``budget`` as for ``--budget``."""
    from npusim.workflow import plan_graph, resolve_budget, simulate_plan  # lazy: SimPy, Numba; dse imports this module

    check_pipelines(pipelines)  # an unknown planner name is the user's error, not a row
    capacity = resolve_budget(budget, graph, hw, allow_oversize=allow_oversize)  # so is a malformed budget
    rows = []
    for pipeline in pipelines:
        try:
            plan = plan_graph(graph, hw, pipeline, capacity)
            report = simulate_plan(plan, graph, hw)
        except NpusimError as exc:
            rows.append(infeasible_row(trace=trace or graph.name, hardware=hw.name, planner=pipeline,
                                       budget=budget, reason=str(exc), capacity=capacity))
            continue
        rows.append(metrics_row(plan, report, trace=trace or graph.name, budget=budget))
    return rows


def parse_pipelines(spec: str) -> list[str]:
    """``"a+b,c+d"`` -> ``["a+b", "c+d"]`` (a comma separates pipelines). A comma inside a
    planner's own name (``mindspore-mo:size,first-fit``) does not: a piece that completes the
    name of a registered planner with the last stage before it stays with it."""
    names = set(default_registry().names())
    pipelines: list[str] = []
    for piece in spec.split(","):
        piece = piece.strip()
        if pipelines and f"{pipelines[-1].rsplit('+', 1)[-1]},{piece.split('+', 1)[0]}" in names:
            pipelines[-1] += f",{piece}"
        elif piece:
            pipelines.append(piece)
    if not pipelines:
        raise NpusimError(f"--planners {spec!r}: expected pipelines separated by commas, e.g. "
                          "default+arena+belady,rpo+arena+lru")
    return pipelines


def check_pipelines(pipelines: list[str]) -> None:
    """Raise RegistryError for a pipeline naming an unknown planner or two planners of a stage."""
    registry = default_registry()
    for pipeline in pipelines:
        registry.pipeline(pipeline)


# ---------------------------------------------------------------- output


def format_rows(rows: list[dict], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(rows, indent=1) + "\n"
    if fmt == "csv":
        return rows_to_csv(rows)
    if fmt == "text":
        return rows_to_text(rows)
    raise NpusimError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")


def rows_to_csv(rows: list[dict]) -> str:
    columns = list(METRIC_COLUMNS)
    for row in rows:  # extra columns (e.g. swept keys) after the metrics, in first-seen order
        columns += [k for k in row if k not in columns]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
    return out.getvalue()


# (label, column, formatter) of the text table; None formatter = plain text.
_TEXT_LINES = (
    ("status", "status", None),
    ("plan status", "plan_status", None),
    ("budget", "capacity", lambda v: format_bytes(v)),
    ("latency (cycles)", "cycles", lambda v: f"{v:,.0f}"),
    ("latency (ms)", "latency_s", lambda v: f"{v * 1e3:.3f}"),
    ("off-chip total (B)", "offchip_bytes", lambda v: f"{v:,}"),
    *((f"  {c} (B)", f"offchip_{c}_bytes", lambda v: f"{v:,}") for c in (*READ_CAUSES, *WRITE_CAUSES)),
    ("on-chip peak (B)", "onchip_peak_bytes", lambda v: f"{v:,}"),
    ("off-chip peak (B)", "offchip_peak_bytes", lambda v: f"{v:,}"),
    ("energy (uJ)", "energy_pj", lambda v: f"{v / 1e6:.3f}"),
    ("  dynamic (uJ)", "energy_dynamic_pj", lambda v: f"{v / 1e6:.3f}"),
    ("  static (uJ)", "energy_static_pj", lambda v: f"{v / 1e6:.3f}"),
    *((f"  {c} (uJ)", f"energy_{c}_pj", lambda v: f"{v / 1e6:.3f}") for c in ENERGY_COMPONENTS),
    ("area (mm2)", "area_mm2", lambda v: f"{v:.2f}"),
    ("solve time (s)", "solve_seconds", lambda v: f"{v:.4f}"),
)


def rows_to_text(rows: list[dict]) -> str:
    """Metrics down, planners across; infeasible planners get their reason below the table."""
    header = ["metric", *(r["planner"] for r in rows)]
    table = [header]
    for label, column, fmt in _TEXT_LINES:
        cells = [label]
        for row in rows:
            value = row.get(column)
            cells.append("-" if value is None or value == "" else (fmt(value) if fmt else str(value)))
        table.append(cells)
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = []
    for n, line in enumerate(table):
        first = line[0].ljust(widths[0])
        rest = [cell.rjust(w) for cell, w in zip(line[1:], widths[1:])]
        lines.append("  ".join([first, *rest]).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        if row["status"] != "ok":
            lines.append(f"{row['planner']}: {row['reason']}")
    if rows:
        lines.insert(0, f"{rows[0]['trace']} on {rows[0]['hardware']}, budget {rows[0]['budget']}")
    return "\n".join(lines) + "\n"
