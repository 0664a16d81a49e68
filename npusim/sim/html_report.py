"""Reports as self-contained HTML pages (``--html``): a simulation, an LLM run, a DSE sweep.

Everything is inline — styles, the small sorting script, the memory-over-time picture as SVG —
so the file opens offline and can be attached to a design review. Sections: the summary (the
text report, first line included: a jittered or oversized run says so there), where the time
went (the critical path by cause), energy by component, scratchpad and DRAM traffic over
time, and one row per op of the graph as given (its tiles folded in; click a column to sort).
An LLM run's page has its summary, per-token latency over the KV length and a row per
simulated step; a sweep's page is built from these parts by ``npusim.dse.page``.
"""

from __future__ import annotations

import html
import json

from npusim.sim.report import Report, per_op_breakdown
from npusim.util.units import format_bytes

#: Most points of a counter drawn (a long run samples many more): every n-th point is kept.
MAX_POINTS = 1500
#: Colours of the critical-path causes, in the order the report lists them.
PALETTE = ("#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#BBBBBB", "#000000")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 2em; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 0.85em; }
.bar { display: flex; height: 28px; border: 1px solid #999; }
.bar div { height: 100%; }
.legend span { display: inline-block; margin-right: 1.5em; font-size: 0.85em; }
.legend i { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.3em; vertical-align: middle; }
table { border-collapse: collapse; font-size: 0.8em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #eee; cursor: pointer; position: sticky; top: 0; }
td:first-child, th:first-child, td:nth-child(2) { text-align: left; }
.note { color: #a00; font-weight: bold; }
.figure svg { max-width: 100%; height: auto; }
"""

_SORT_SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function (th, column) {
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var down = th.dataset.down !== 'true';
    th.dataset.down = down;
    rows.sort(function (a, b) {
      var x = a.cells[column].dataset.value, y = b.cells[column].dataset.value;
      var nx = parseFloat(x), ny = parseFloat(y);
      var order = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return down ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


def page(title: str, body: list[str]) -> str:
    """A whole page around ``body`` (HTML fragments): styles inline, the sorting script last."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>", *body,
             f"<script>{_SORT_SCRIPT}</script>", "</body></html>"]
    return "\n".join(parts) + "\n"


def report_html(report: Report) -> str:
    """The page of one simulation (a ``str``, UTF-8)."""
    title = f"npusim: {report.graph} on {report.hardware}"
    notes = [n for n in (report.oversize_note, report.jitter_note) if n]
    return page(title, [
        f"<h1>{html.escape(title)} with {html.escape(report.planner)}</h1>",
        *(f'<p class="note">{html.escape(n.strip(" -"))}</p>' for n in notes),
        f'<pre id="summary">{html.escape(report.summary())}</pre>',
        "<h2>Where the time went (critical path)</h2>", _bar(report.stalls, report.cycles, "cycles"),
        "<h2>Energy by component</h2>", _bar({k: v for k, v in report.energy_pj.items() if v > 0},
                                             report.total_energy_pj, "pJ"),
        "<h2>Scratchpad and DRAM over time</h2>", _counters(report),
        "<h2>Ops</h2>", _op_table(report),
    ])


def llm_html(report) -> str:
    """The page of an LLM run (``npusim.llm_run.LlmReport``): its summary, per-token latency
    over the KV length (simulated steps marked) and a row per simulated step."""
    title = f"npusim: {report.model} on {report.hardware}"
    first = report.prefill_tokens
    curve = [(first + i, seconds * 1e3) for i, seconds in enumerate(report.step_seconds)]
    marks = [(s.kv_length, s.seconds * 1e3) for s in report.sampled]
    rows = [{"KV length": s.kv_length, "latency (ms)": s.seconds * 1e3, "cycles": s.cycles,
             "energy (uJ)": s.energy_pj / 1e6, "KV bytes": s.kv_bytes,
             **{f"{cause} (B)": b for cause, b in s.offchip_bytes.items()}} for s in report.sampled]
    return page(title, [
        f"<h1>{html.escape(title)} with {html.escape(report.pipeline)}</h1>",
        f'<pre id="summary">{html.escape(report.summary())}</pre>',
        "<h2>Per-token latency over the KV length</h2>",
        _line_svg(curve, marks, "KV length (tokens)", "ms per decode step"),
        "<h2>Simulated steps</h2>", table(rows),
    ])


def table(rows: list[dict]) -> str:
    """A sortable table of ``rows`` (the first row's keys as columns)."""
    if not rows:
        return "<p>(none)</p>"
    columns = list(rows[0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(row.get(c)) for c in columns) + "</tr>" for row in rows)
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cell(value) -> str:
    if value is None:
        return '<td data-value="">-</td>'
    if isinstance(value, float):
        shown = f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    elif isinstance(value, int) and not isinstance(value, bool):
        shown = f"{value:,}"
    else:
        shown = str(value)
    raw = json.dumps(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
    return f'<td data-value="{html.escape(raw)}">{html.escape(shown)}</td>'


def _line_svg(points: list[tuple[float, float]], marks: list[tuple[float, float]], x_label: str,
              y_label: str) -> str:
    """A line over ``points`` with dots at ``marks``, axes labelled at their ends."""
    if not points:
        return "<p>(no steps)</p>"
    width, height, pad = 1000, 220, 40
    xs, ys = [x for x, _ in points], [y for _, y in points]
    x0, x1 = min(xs), max(max(xs), min(xs) + 1)
    y1 = max(ys) * 1.05 or 1.0
    at = lambda x, y: (pad + (width - 2 * pad) * (x - x0) / (x1 - x0), height - pad - (height - 2 * pad) * y / y1)  # noqa: E731
    line = " ".join("{:.1f},{:.1f}".format(*at(x, y)) for x, y in points)
    dots = "".join('<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="#EE6677"/>'.format(*at(x, y)) for x, y in marks)
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" style="border:1px solid #ccc" '
            f'role="img" aria-label="{html.escape(y_label)}"><polyline fill="none" stroke="#4477AA" points="{line}"/>'
            f'{dots}<text x="{pad}" y="{height - 8}" font-size="12">{html.escape(x_label)}: {x0:,.0f}</text>'
            f'<text x="{width - pad}" y="{height - 8}" font-size="12" text-anchor="end">{x1:,.0f}</text>'
            f'<text x="4" y="14" font-size="12">{html.escape(y_label)} (top {y1:,.3f})</text></svg>')


def _bar(parts: dict, total: float, unit: str) -> str:
    """A stacked bar of ``parts`` (name -> amount) with its legend."""
    if not parts or total <= 0:
        return "<p>(nothing recorded)</p>"
    cells, legend = [], []
    for (name, amount), colour in zip(sorted(parts.items(), key=lambda kv: -kv[1]), colours()):
        share = amount / total
        label = html.escape(f"{name}: {amount:,.0f} {unit} ({share:.1%})")
        cells.append(f'<div style="width:{100 * share:.3f}%;background:{colour}" title="{label}"></div>')
        legend.append(f'<span><i style="background:{colour}"></i>{label}</span>')
    return f'<div class="bar">{"".join(cells)}</div><p class="legend">{"".join(legend)}</p>'


def colours():
    while True:
        yield from PALETTE


def _counters(report: Report) -> str:
    """One SVG per counter track: value over cycles, every point kept up to MAX_POINTS."""
    out = []
    for name, samples in report.counters.items():
        if not samples:
            continue
        step = max(1, len(samples) // MAX_POINTS)
        points = list(samples[::step]) + [samples[-1]]
        end = max(report.cycles, points[-1][0], 1.0)
        top = max(max(v for _, v in points), 1)
        if name == "scratchpad bytes":
            top = max(top, report.capacity)
        width, height = 1000, 160
        steps = []  # a counter holds its value until the next sample: draw steps, not slopes
        for (cycle, value), (after, _) in zip(points, points[1:] + [(end, None)]):
            steps += [(cycle, value), (after, value)]
        coords = " ".join(f"{width * c / end:.1f},{height - height * v / top:.1f}" for c, v in steps)
        budget = ""
        if name == "scratchpad bytes" and report.capacity:
            y = height - height * report.capacity / top
            budget = (f'<line x1="0" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="red" stroke-dasharray="4"/>'
                      f'<text x="4" y="{max(y - 3, 10):.1f}" font-size="11" fill="red">budget '
                      f'{html.escape(format_bytes(report.capacity))}</text>')
        label = format_bytes(top) if "bytes" in name else f"{top:,}"
        out.append(f"<p>{html.escape(name)} (top {html.escape(label)}, over {report.cycles:,.0f} cycles)</p>"
                   f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
                   f'style="border:1px solid #ccc" role="img" aria-label="{html.escape(name)}">'
                   f'<polyline fill="none" stroke="#4477AA" stroke-width="1" points="{coords}"/>{budget}</svg>')
    return "\n".join(out) or "<p>(no counters)</p>"


_OP_COLUMNS = (("op", "op"), ("kind", "kind"), ("tiles", "tiles"), ("start", "start"), ("end", "end"),
               ("cycles", "span (cycles)"), ("busy_cycles", "busy (cycles)"), ("bound", "bound"),
               ("stall_cycles", "stall (cycles)"), ("stalled_on", "waited for"), ("bytes_in", "bytes in"),
               ("bytes_out", "bytes out"))


def _op_table(report: Report) -> str:
    rows = per_op_breakdown(report.op_breakdown)
    shown = [{label: (round(row[key]) if isinstance(row[key], float) else row[key]) for key, label in _OP_COLUMNS}
             for row in rows]
    return f"<p>{len(rows)} ops; click a column to sort.</p>" + table(shown)
