"""A simulated plan as one flat row of metrics: the record ``npusim compare`` prints, a DSE
sweep writes per point and the goldens hold.

``metrics_row``: off-chip bytes by cause, split into reads (compulsory, retrieve) and writes
(writeback, spill), on- and off-chip peaks, latency, energy by component, area, bytes on the
DRAM bus (whole bursts), solve time and plan status. ``infeasible_row``: a point that could
not be planned or simulated, with the reason. ``rows_to_csv``: rows as CSV, the metrics first.
"""

from __future__ import annotations

import csv
import io

from npusim.hw.silicon import AREA_PARTS
from npusim.plan.model import Plan
from npusim.sim.report import DRAM_DYNAMIC_COMPONENTS, DRAM_STATIC_COMPONENTS, ENERGY_COMPONENTS, Report

READ_CAUSES = ("compulsory", "retrieve")  # DRAM -> scratchpad
WRITE_CAUSES = ("writeback", "spill")  # scratchpad -> DRAM

#: Row statistics of dram.model: banks (``npusim.dram.model.BankedDram.stats``), prefixed dram_.
DRAM_COLUMNS = ("dram_device", "dram_channels", "dram_rate_mts",  # (the part as run: a sweep of devices keeps
                #   the config's bandwidth, so a device may run below its nominal pin rate)
                "dram_row_hit_rate", "dram_row_hits", "dram_row_misses", "dram_row_conflicts", "dram_activations",
                "dram_refreshes", "dram_avg_read_latency_ns")
#: Columns of every row, in order; energies in pJ, latency in cycles and seconds.
METRIC_COLUMNS = (
    "trace", "hardware", "planner", "budget", "capacity", "status", "plan_status", "plan_scope", "reason",
    "cycles", "latency_s", "energy_pj", "energy_dynamic_pj", "energy_static_pj",
    *(f"energy_{c}_pj" for c in ENERGY_COMPONENTS), "energy_onchip_pj", "energy_by_level",
    "area_mm2", *(f"area_{p}_mm2" for p in AREA_PARTS),
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
        plan_status=report.plan_status, plan_scope=report.plan_scope, reason="", cycles=report.cycles,
        latency_s=report.seconds,
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
    row["energy_onchip_pj"] = onchip_energy_pj(report)
    row["energy_by_level"] = ";".join(f"{name}={pj!r}" for name, pj in report.energy_by_level_pj.items())  # (exact)
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


def onchip_energy_pj(report: Report) -> float:
    """Dynamic on-chip energy (pJ): the MACs, the vector unit and every on-chip memory level (PE
    registers or ``cores.levels``, the scratchpad) — the total's dynamic part less DRAM and DMA
    descriptors, what a sweep over local buffers or unrolling changes."""
    e = report.energy_pj
    return sum(e.get(c, 0.0) for c in ("mac", "vector", "register_file", "scratchpad_read", "scratchpad_write"))


def infeasible_row(*, trace: str, hardware: str, planner: str, budget: object, reason: str,
                   capacity: int | None = None) -> dict:
    """The record of a point that could not be planned or simulated, with the reason."""
    row = dict.fromkeys(METRIC_COLUMNS)
    row.update(trace=trace, hardware=hardware, planner=planner, budget=_budget_label(budget),
               capacity=capacity, status="infeasible", plan_status="", plan_scope="", reason=reason)
    return row


def _budget_label(budget: object) -> object:
    """The budget as asked: bytes, 'MR'/'MH'/'MP' or a size text; 'scratchpad' for the default."""
    return "scratchpad" if budget is None else budget


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
