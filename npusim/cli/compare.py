"""Planner comparison: run several pipelines on one trace and hardware, one row each.

Each row is ``npusim.sim.metrics.metrics_row`` of one simulated plan. A pipeline that cannot
plan at the budget gives an ``infeasible`` row carrying the error message, so one bad pipeline
does not hide the others.

``format_rows`` prints the rows as a text table (one column per planner, one line per
metric, which reads well with a dozen metrics), as CSV or as JSON (one record per planner).
"""

from __future__ import annotations

import json

from npusim.errors import NOT_THE_POINTS, NpusimError
from npusim.graph.model import Graph
from npusim.hw.config import Hardware
from npusim.registry import check_pipelines, default_registry
from npusim.sim.report import DRAM_DYNAMIC_COMPONENTS, DRAM_STATIC_COMPONENTS, ENERGY_COMPONENTS
from npusim.sim.metrics import (  # noqa: F401 (re-exported: the rows compare prints)
    METRIC_COLUMNS, READ_CAUSES, WALL_CLOCK_COLUMNS, WRITE_CAUSES, infeasible_row, metrics_row, rows_to_csv,
)
from npusim.util.units import format_bytes

FORMATS = ("text", "csv", "json")


def compare_planners(graph: Graph, hw: Hardware, pipelines: list[str], budget: str | int | None = None,
                     *, trace: str | None = None, allow_oversize: bool = False,
                     options: dict | None = None) -> list[dict]:
    """One row per pipeline, in the order given. ``budget`` as for ``--budget``; ``options``
    go to every pipeline (each stage reads what it declares)."""
    from npusim.workflow import is_budget_keyword, plan_graph, resolve_budget, simulate_plan  # lazy: SimPy, Numba

    check_pipelines(pipelines, options)  # an unknown planner or option is the user's error, not a row
    if not is_budget_keyword(budget):  # so is a malformed budget (a keyword is measured per pipeline below)
        resolve_budget(budget, graph, hw, allow_oversize=allow_oversize)
    rows = []
    for pipeline in pipelines:
        # a keyword (MR) is measured on what each pipeline plans: a fused graph needs more
        capacity = resolve_budget(budget, graph, hw, allow_oversize=allow_oversize, pipeline=pipeline,
                                  options=options)
        try:
            plan = plan_graph(graph, hw, pipeline, capacity, options=dict(options or {}))
            report = simulate_plan(plan, hw, validated=True)  # plan_graph validated it
        except NOT_THE_POINTS:
            raise
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
        raise NpusimError(f"--planner {spec!r}: expected pipelines separated by commas, e.g. "
                          "default+arena+belady,rpo+arena+lru")
    return pipelines


# ---------------------------------------------------------------- output


def format_rows(rows: list[dict], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(rows, indent=1) + "\n"
    if fmt == "csv":  # whole cycles, as the text table shows them (a shared bus makes fractions)
        return rows_to_csv([{**row, "cycles": round(row["cycles"])} if row.get("cycles") is not None else row
                            for row in rows])
    if fmt == "text":
        return rows_to_text(rows)
    raise NpusimError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")


# (label, column, formatter) of the text table; None formatter = plain text.
_TEXT_LINES = (
    ("status", "status", None),
    ("plan status", "plan_status", None),
    # what an "optimal" refers to when not the whole plan (PlanMeta.scope): its first clause
    ("  of", "plan_scope", lambda v: v.split(";")[0]),
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
    ("  on-chip dynamic (uJ)", "energy_onchip_pj", lambda v: f"{v / 1e6:.3f}"),
    *((f"  {c} (uJ)", f"energy_{c}_pj", lambda v: f"{v / 1e6:.3f}") for c in ENERGY_COMPONENTS),
    # dram.model: banks (a row the rows leave empty is not printed: rows_to_text)
    *((f"  {c} (uJ)", f"energy_{c}_pj", lambda v: f"{v / 1e6:.3f}")
      for c in (*DRAM_DYNAMIC_COMPONENTS, *DRAM_STATIC_COMPONENTS)),
    ("DRAM part", "dram_device", None),
    ("DRAM channels", "dram_channels", lambda v: f"{v:,}"),
    ("DRAM rate (MT/s)", "dram_rate_mts", lambda v: f"{v:,.0f}"),
    ("DRAM row hit rate", "dram_row_hit_rate", lambda v: f"{v:.1%}"),
    ("DRAM activations", "dram_activations", lambda v: f"{v:,}"),
    ("DRAM refreshes", "dram_refreshes", lambda v: f"{v:,}"),
    ("DRAM ctl. read latency (ns)", "dram_avg_read_latency_ns", lambda v: f"{v:.1f}"),
    ("area (mm2)", "area_mm2", lambda v: f"{v:.2f}"),
    ("solve time (s)", "solve_seconds", lambda v: f"{v:.4f}"),
)


def rows_to_text(rows: list[dict]) -> str:
    """Metrics down, planners across; infeasible planners get their reason below the table."""
    header = ["metric", *(r["planner"] for r in rows)]
    table = [header]
    for label, column, fmt in _TEXT_LINES:
        if label.startswith(("DRAM ", "  dram_activate", "  dram_refresh", "  dram_background")) and all(
                row.get(column) in (None, "") for row in rows):
            continue  # the banks model's rows, in a run without it
        if all(column not in row for row in rows):
            continue  # (solve_seconds without --timings)
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
