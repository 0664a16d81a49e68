"""A sweep's HTML page (``npusim dse --html``): its summary, one interactive chart per trace and
metric (hover a point for its settings and numbers), the figures inline and a sortable row per
point; the page's parts come from ``npusim.sim.html_report``."""

from __future__ import annotations

import html
import math

from npusim.plot import DSE_METRICS, dse_series, x_key, x_label, x_value
from npusim.sim.html_report import colours, page, table
from npusim.util.units import format_bytes


def dse_html(rows: list[dict], swept: list[str], figures: list[str], summary: str) -> str:
    """The page of a sweep: its summary, one interactive chart per trace and metric (hover a
    point for its settings and numbers), the figures (SVG text, inline) and a row per point."""
    keep = [k for k in ("trace", "planner", *swept, "status", "cycles", "energy_pj", "offchip_bytes", "area_mm2",
                        "onchip_peak_bytes", "reason") if any(k in r for r in rows)]
    key = x_key(swept)
    charts = []
    for trace, series in dse_series(rows, swept).items():
        for column, label, scale in DSE_METRICS:
            lines = {name: [(x_value(r, key), r[column] * scale, _point_title(r, keep)) for r in points]
                     for name, points in series.items()}
            charts.append(f"<h3>{html.escape(trace)}: {html.escape(label)}</h3>"
                          + _series_svg(lines, x_label(key), label))
    return page("npusim: design-space exploration", [
        "<h1>npusim: design-space exploration</h1>",
        f'<pre id="summary">{html.escape(summary)}</pre>',
        "<h2>Curves (hover a point)</h2>", *charts,
        "<h2>Figures</h2>", *(f'<div class="figure">{svg}</div>' for svg in figures),
        f"<h2>Points ({len(rows)})</h2>", table([{k: r.get(k) for k in keep} for r in rows]),
    ])


def _point_title(row: dict, keys: list[str]) -> str:
    return "; ".join(f"{k} {row[k]:,.6g}" if isinstance(row.get(k), float) else f"{k} {row.get(k)}"
                     for k in keys if row.get(k) not in (None, ""))


def _series_svg(lines: dict, x_label: str, y_label: str) -> str:
    """One polyline per series and a dot per point carrying its details as a tooltip (<title>);
    x spaced by rank when the values are not numbers, log when they span 8x or more."""
    values = sorted({x for pts in lines.values() for x, _, _ in pts}, key=lambda v: (not isinstance(v, (int, float)), v if isinstance(v, (int, float)) else str(v)))
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    logx = numeric and min(values) > 0 and max(values) >= 8 * min(values)
    def xpos(v):
        if not numeric:
            return values.index(v) / max(len(values) - 1, 1)
        lo, hi = (math.log(min(values)), math.log(max(values))) if logx else (min(values), max(values))
        at = math.log(v) if logx else v
        return (at - lo) / (hi - lo) if hi > lo else 0.5

    ys = [y for pts in lines.values() for _, y, _ in pts] or [0.0, 1.0]
    low, high = min(ys), max(ys)
    spread = (high - low) or abs(high) or 1.0
    bottom, top = low - 0.1 * spread, high + 0.1 * spread  # the differences, not the distance from 0
    width, height, pad = 900, 240, 50
    at = lambda v, y: (pad + (width - 2 * pad) * xpos(v),  # noqa: E731
                       height - pad - (height - 2 * pad) * (y - bottom) / (top - bottom))
    parts = []
    for (name, pts), colour in zip(sorted(lines.items()), colours()):
        coords = " ".join("{:.1f},{:.1f}".format(*at(x, y)) for x, y, _ in pts)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}"/>')
        parts += ['<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="{}"><title>{}</title></circle>'.format(
            *at(x, y), colour, html.escape(f"{name}: {title}")) for x, y, title in pts]
    legend = "".join(f'<span><i style="background:{c}"></i>{html.escape(n)}</span>'
                     for n, c in zip(sorted(lines), colours()))
    ticks = "".join('<text x="{:.1f}" y="{}" font-size="11" text-anchor="middle">{}</text>'.format(
        at(v, 0)[0], height - pad + 16, html.escape(_tick(v))) for v in values[:: max(1, len(values) // 10)])
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" style="border:1px solid #ccc" '
            f'role="img" aria-label="{html.escape(y_label)}">{"".join(parts)}{ticks}'
            f'<text x="{width / 2}" y="{height - 8}" font-size="12" text-anchor="middle">{html.escape(x_label)}</text>'
            f'<text x="4" y="14" font-size="12">{html.escape(y_label)}: {low:,.4g} to {high:,.4g}</text></svg>'
            f'<p class="legend">{legend}</p>')


def _tick(value) -> str:
    if isinstance(value, int) and value >= 1024 and value % 1024 == 0:
        return format_bytes(value).replace(".00", "")
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
