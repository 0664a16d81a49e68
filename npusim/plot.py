"""Pictures: a plan's memory-time packing, DSE curves and the energy-area Pareto front.

matplotlib is an optional extra (``pip install 'npusim[plot]'``), imported only when a
figure is drawn, always with the file-only Agg backend. Every drawn element carries an SVG
id (``set_gid``) so tests can count rectangles and lines in the SVG instead of looking:

- ``plot_plan``: the packing figure of the papers (e.g. COSMA Fig. 2, OLLA Fig. 5): steps on
  x, scratchpad addresses on y, one rectangle per residency (``residency-N``; one collection
  ``residencies`` above ``MAX_SEPARATE_RECTANGLES``), the steps of each op shaded as a band
  (``op-N``: the tiles of a tiled op, coloured by stream on multi-stream plans), spills
  (``spills``, a marker at the end of the spilled residency) and retrieves (``retrieves``,
  at the start of the retrieved one), and the budget line (``budget``);
- ``plot_dse_curves``: latency, energy and off-chip bytes against the first swept key (the
  scratchpad budget when none is swept), one line per planner and value of the other swept
  keys (``curve-METRIC-TRACE-SERIES``), one row of panels per trace;
- ``plot_pareto``: latency and energy vs silicon area, every feasible point and the front of
  points no other point beats on both (``pareto-METRIC-TRACE``).
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

from npusim.util.atomic_io import atomic_open
from npusim.errors import NpusimError
from npusim.plan.bound import as_bound
from npusim.util.units import format_bytes

FORMATS = ("png", "svg")
# Colours of residencies by tensor kind (a colour-blind-safe palette).
KIND_COLOURS = {"input": "#4477AA", "weight": "#CCBB44", "activation": "#66CCEE",
                "output": "#228833", "workspace": "#BBBBBB"}
DSE_METRICS = (("cycles", "latency (cycles)", 1.0), ("energy_pj", "energy (uJ)", 1e-6),
               ("offchip_bytes", "off-chip bytes (MiB)", 1 / 1024**2))


def require_matplotlib():
    """``matplotlib.pyplot`` on the Agg backend, or a one-line error naming the extra."""
    try:
        import matplotlib  # lazy: an optional extra (npusim[plot]), heavy to import
    except ImportError:
        raise NpusimError("plotting needs matplotlib: pip install 'npusim[plot]'") from None
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "npusim"  # stable ids: identical SVGs for identical input
    import matplotlib.pyplot as plt  # lazy: optional and heavy, as above

    return plt


def parse_formats(spec: str | None) -> tuple[str, ...]:
    formats = tuple(f.strip().lower().lstrip(".") for f in (spec or ",".join(FORMATS)).split(",") if f.strip())
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise NpusimError(f"--format {spec!r}: expected png, svg or both (png,svg)")
    return formats


def figure_svg(fig) -> str:
    """``fig`` as SVG text (for a page that embeds it), the figure then closed; no date in it,
    so a page made twice is the same bytes (as ``save_figure``'s files are)."""
    import matplotlib.pyplot as plt  # lazy: matplotlib is optional

    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg"):]  # the inline element, without the XML prolog


def save_figure(fig, stem: str | Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Write ``stem.png`` / ``stem.svg`` (no date in the SVG, so reruns are identical)."""
    plt = require_matplotlib()
    paths = []
    for fmt in formats:
        path = Path(f"{stem}.{fmt}")
        path.parent.mkdir(parents=True, exist_ok=True)
        metadata = {"Date": None} if fmt == "svg" else {}
        with atomic_open(path, "wb") as handle:  # a figure is whole or absent, as every output
            fig.savefig(handle, format=fmt, dpi=120, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    plt.close(fig)
    return paths


# ---------------------------------------------------------------- plan packing


#: Above this many residencies, rectangles are drawn as one collection (``residencies``):
#: thousands of separate patches make a slow, heavy SVG.
MAX_SEPARATE_RECTANGLES = 2000
#: Op groups (an op and its tiles, a run of steps) labelled on top of the packing figure.
LABELLED_GROUPS = 8
STREAM_COLOURS = ("#EEEEEE", "#FFE4CC", "#DDEEDD", "#E4DDF4")


def plot_plan(plan, stem: str | Path, graph=None, formats: tuple[str, ...] = FORMATS, title: str | None = None) -> list[Path]:
    """The memory-time packing of ``plan``: one rectangle per residency.

    ``plan`` is bound to its graphs (``npusim.plan.bound``; ``graph``: only for a plan that is
    not). The steps of each op (its tiles, for a tiled op) are shaded as one
    band, alternately, with the widest bands labelled by op name; on a multi-stream plan the
    bands take their stream's colour."""
    plt = require_matplotlib()
    from matplotlib.collections import PatchCollection  # lazy: optional and heavy (npusim[plot])
    from matplotlib.patches import Patch, Rectangle  # lazy: optional and heavy
    from matplotlib.ticker import MultipleLocator  # lazy: optional and heavy

    plan = as_bound(plan, graph)
    graph = plan.bound_graph
    fig, ax = plt.subplots(figsize=(10, 5))
    groups = op_groups(plan, graph)
    streams = len(set(plan.streams))
    if len(groups) < plan.n_steps or streams > 1:
        _shade_groups(ax, groups, plan, streams)
    rectangles = [Rectangle((res.first, res.offset), res.last - res.first + 1, res.size,
                            facecolor=KIND_COLOURS.get(graph.tensors[res.tensor].kind, "#BBBBBB"),
                            edgecolor="black", linewidth=0.4)
                  for res in plan.residencies]
    if len(rectangles) <= MAX_SEPARATE_RECTANGLES:
        for n, rect in enumerate(rectangles):
            rect.set_gid(f"residency-{n}")
            ax.add_patch(rect)
    elif rectangles:
        collection = PatchCollection(rectangles, match_original=True, linewidth=0.1)
        collection.set_gid("residencies")
        ax.add_collection(collection)
    spills, retrieves = _transfer_marks(plan)
    for marks, gid, style, label in ((spills, "spills", "rv", "spill"), (retrieves, "retrieves", "g^", "retrieve")):
        if marks:
            xs, ys = zip(*marks)
            size = 6 if len(marks) <= MAX_SEPARATE_RECTANGLES // 4 else 2
            (line,) = ax.plot(xs, ys, style, markersize=size, linestyle="none", label=label)
            line.set_gid(gid)
    budget = ax.axhline(plan.capacity, color="red", linestyle="--", linewidth=1,
                        label=f"budget {format_bytes(plan.capacity)}")
    budget.set_gid("budget")
    ax.set_xlim(0, max(plan.n_steps, 1))
    ax.set_ylim(0, plan.capacity * 1.05)
    ax.set_xlabel("step" + (" (shaded: the tiles of one op)" if plan.tiling else ""))
    ax.set_ylabel("scratchpad address")
    ax.yaxis.set_major_locator(MultipleLocator(_power_of_two_step(plan.capacity)))
    ax.yaxis.set_major_formatter(_bytes_formatter())
    kinds = sorted({graph.tensors[r.tensor].kind for r in plan.residencies})
    handles = [Patch(facecolor=KIND_COLOURS.get(k, "#BBBBBB"), edgecolor="black", label=k) for k in kinds]
    if streams > 1:
        handles += [Patch(facecolor=STREAM_COLOURS[s % len(STREAM_COLOURS)], label=f"stream {s}")
                    for s in sorted(set(plan.streams))]
    handles += [h for h in ax.get_legend_handles_labels()[0]]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    what = f"{len(groups)} ops in {plan.n_steps} steps" if plan.tiling else f"{plan.n_steps} steps"
    ax.set_title(title or f"{plan.graph}: {plan.meta.planner or 'plan'}, {what}, {len(plan.residencies)} residencies, "
                 f"{streams} stream{'s' if streams > 1 else ''}, budget {format_bytes(plan.capacity)}", fontsize=9,
                 pad=70 if any(last > first for first, last, _ in groups) else 6)  # above the op labels
    return save_figure(fig, stem, formats)


def op_groups(plan, graph) -> list[tuple[int, int, str]]:
    """(first step, last step, op name): runs of consecutive steps of one op (its tiles, for a
    tiled op; each untiled op alone)."""
    groups: list[tuple[int, int, str]] = []
    for step, op_id in enumerate(plan.order):
        op = graph.ops[op_id]
        name = op.attrs.get("tile_of", op.name) if op.attrs else op.name
        if groups and groups[-1][2] == name and groups[-1][1] == step - 1:
            groups[-1] = (groups[-1][0], step, name)
        else:
            groups.append((step, step, name))
    return groups


def _shade_groups(ax, groups, plan, streams: int) -> None:
    for n, (first, last, name) in enumerate(groups):
        if streams > 1:
            colour = STREAM_COLOURS[plan.streams[plan.order[first]] % len(STREAM_COLOURS)]
        else:
            colour = "#F2F2F2" if n % 2 else "#FFFFFF"
        band = ax.axvspan(first, last + 1, facecolor=colour, edgecolor="none", zorder=0)
        band.set_gid(f"op-{n}")
    widest = sorted(groups, key=lambda g: (g[0] - g[1], g[0]))[:LABELLED_GROUPS]
    for first, last, name in widest:
        if last > first:
            label = name if len(name) <= 28 else "..." + name[-25:]
            ax.text((first + last + 1) / 2, plan.capacity * 1.01, label, rotation=90, fontsize=5,
                    ha="center", va="bottom", clip_on=False)


def _transfer_marks(plan) -> tuple[list, list]:
    """(x, y) of spill marks (end of the spilled residency) and retrieve marks (its start)."""
    by_tensor = defaultdict(list)
    for res in plan.residencies:
        by_tensor[res.tensor].append(res)
    spills, retrieves = [], []
    for tr in plan.transfers:
        if tr.cause == "spill":
            res = next((r for r in by_tensor[tr.tensor] if r.first <= tr.step <= r.last), None)
            if res is not None:
                spills.append((tr.step + 1, res.offset + res.size / 2))
        elif tr.cause == "retrieve":
            res = next((r for r in by_tensor[tr.tensor] if r.first == tr.step), None)
            if res is not None:
                retrieves.append((tr.step, res.offset + res.size / 2))
    return spills, retrieves


def _power_of_two_step(span: int, ticks: int = 6) -> int:
    """A tick spacing that is a power of two bytes, giving about ``ticks`` ticks."""
    return 1 << max(0, (max(span, 1) // ticks).bit_length())


def compact_bytes(n: float) -> str:
    """Short tick labels: 2MiB, 2.5MiB, 512KiB, 96B."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= factor:
            return f"{n / factor:.3g}{unit}"
    return f"{n:.0f}B"


def _bytes_formatter():
    from matplotlib.ticker import FuncFormatter  # lazy: optional and heavy (npusim[plot])

    return FuncFormatter(lambda value, _pos: compact_bytes(value))


# ---------------------------------------------------------------- DSE


#: Base units of hardware quantities as sweep values hold them (``npusim.dse.sweep``).
BASE_UNITS = {"size": "B", "bandwidth": "B/s", "frequency": "Hz", "energy": "pJ", "power": "W", "time": "s",
              "area": "mm2", "cycles": "cycles"}
#: How the LLM sweep keys read on an axis.
LLM_AXIS = {"prefill": "prefill (prompt tokens)", "decode": "decode step (KV length)", "batch": "batch (sequences)"}
_CAPACITY_KEYS = ("budget", "scratchpad.size")  # drawn as the planned capacity, in bytes


def x_key(swept: list[str]) -> str:
    """The key on the x axis: the first one swept (the scratchpad budget when none is)."""
    return swept[0] if swept else "budget"


def x_value(row: dict, key: str):
    return row["capacity"] if key in _CAPACITY_KEYS else row.get(key)


def x_label(key: str) -> str:
    if key in _CAPACITY_KEYS:
        return "scratchpad budget" if key == "budget" else "scratchpad size (= budget)"
    if key in LLM_AXIS:
        return LLM_AXIS[key]
    from npusim.hw.loader import iter_knobs  # lazy: the hardware knob table; only a hardware sweep needs it

    quantity = next((f.metadata["quantity"] for name, f in iter_knobs() if name == key), "")
    unit = BASE_UNITS.get(quantity, "")
    return f"{key} ({unit})" if unit else key


def series_name(row: dict, swept: list[str]) -> str:
    """A curve's label: the planner plus every swept key other than the x axis."""
    x = x_key(swept)
    extra = [f"{k}={row[k]}" for k in swept if k != x and not (x in _CAPACITY_KEYS and k in _CAPACITY_KEYS)
             and k in row]
    return " ".join([row["planner"], *extra])


def base_trace(row: dict, swept: list[str]) -> str:
    """The trace a point belongs to, without the LLM keys swept into its name
    (``llm:gpt2-small:decode=256:batch=4`` -> ``llm:gpt2-small``): one panel per trace swept."""
    parts = str(row["trace"]).split(":")
    return ":".join(p for p in parts if p.partition("=")[0] not in swept or "=" not in p)


def _feasible(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("status") == "ok" and r.get("capacity") is not None]


def dse_series(rows: list[dict], swept: list[str]) -> dict:
    """{trace: {series: [rows sorted by the x value]}} of the feasible rows."""
    key = x_key(swept)
    out: dict = defaultdict(lambda: defaultdict(list))
    for row in _feasible(rows):
        if x_value(row, key) is not None:
            out[base_trace(row, swept)][series_name(row, swept)].append(row)
    return {t: {s: sorted(rs, key=lambda r: _sortable(x_value(r, key))) for s, rs in sorted(series.items())}
            for t, series in sorted(out.items())}


def _sortable(value):
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))


def _numeric(values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def plot_dse_curves(rows: list[dict], stem: str | Path, swept: list[str], formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Latency, energy and off-chip bytes against the first swept key (the scratchpad budget
    when none is swept), one line per planner and value of the other swept keys, a row of
    panels per trace. Numbers go on a numeric axis (log when they span 8x or more, bytes as
    sizes), anything else (a dataflow) on evenly spaced labelled ticks."""
    return save_figure(dse_figure(rows, swept), stem, formats)


def dse_figure(rows: list[dict], swept: list[str]):
    """The figure of ``plot_dse_curves`` (for a test to read its axes)."""
    plt = require_matplotlib()
    data = dse_series(rows, swept)
    if not data:
        raise NpusimError("no feasible point to plot: every point of the sweep is infeasible")
    key = x_key(swept)
    every = sorted({x_value(r, key) for series in data.values() for pts in series.values() for r in pts},
                   key=_sortable)
    numeric = _numeric(every)
    position = {v: i for i, v in enumerate(every)}
    fig, axes = plt.subplots(len(data), len(DSE_METRICS), figsize=(5 * len(DSE_METRICS), 3.6 * len(data)),
                             squeeze=False)
    for (trace, series), panel in zip(data.items(), axes):
        for ax, (column, label, scale) in zip(panel, DSE_METRICS):
            for name, points in series.items():
                xs = [x_value(r, key) if numeric else position[x_value(r, key)] for r in points]
                ys = [r[column] * scale for r in points]
                (line,) = ax.plot(xs, ys, marker="o", markersize=3, label=name)
                line.set_gid(f"curve-{column}-{trace}-{name}".replace(" ", "_"))
            _x_axis(ax, key, every, numeric)
            ax.set_ylabel(label)
            ax.set_title(f"{trace}: {label}", fontsize=9)
            ax.grid(True, alpha=0.3)
        panel[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _x_axis(ax, key: str, values: list, numeric: bool) -> None:
    """Ticks at the swept values (a few of them when there are many), in their units."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # lazy: matplotlib is optional

    ax.set_xlabel(x_label(key))
    if not numeric:
        ax.xaxis.set_major_locator(FixedLocator(range(len(values))))
        ax.set_xticklabels([str(v) for v in values])
        return
    bytes_axis = key in _CAPACITY_KEYS or x_label(key).endswith("(B)")
    if all(v > 0 for v in values) and max(values) >= 8 * min(values):
        ax.set_xscale("log", base=2 if bytes_axis or key in LLM_AXIS else 10)
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_locator(FixedLocator(values if len(values) <= 12 else values[:: len(values) // 8 + 1]))
    ax.xaxis.set_major_formatter(_bytes_formatter() if bytes_axis else FuncFormatter(lambda v, _pos: si_number(v)))
    ax.tick_params(axis="x", labelrotation=30)


def si_number(value: float) -> str:
    """6.4e9 -> '6.4G', 1024 -> '1024', 0.5 -> '0.5': a tick label in the axis' unit."""
    if float(value).is_integer() and abs(value) < 1e5:
        return f"{int(value)}"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{prefix}"
    return f"{value:.3g}"


def pareto_front(rows: list[dict], x: str = "area_mm2", y: str = "energy_pj") -> list[dict]:
    """Feasible rows no other row beats on both ``x`` and ``y`` (lower is better), by ``x``."""
    front, best = [], float("inf")
    for row in sorted(_with_area(rows), key=lambda r: (r[x], r[y], r["planner"])):
        if row[y] < best:
            front.append(row)
            best = row[y]
    return front


def _with_area(rows: list[dict]) -> list[dict]:
    return [r for r in _feasible(rows) if r.get("area_mm2") is not None]


PARETO_METRICS = (("cycles", "latency (cycles)", 1.0), ("energy_pj", "energy (uJ)", 1e-6))


def varies_area(rows: list[dict]) -> bool:
    """Whether the sweep changed the silicon area (else a Pareto figure is one column of dots)."""
    return len({round(r["area_mm2"], 9) for r in _with_area(rows)}) > 1


def plot_pareto(rows: list[dict], stem: str | Path, formats: tuple[str, ...] = FORMATS,
                swept: list[str] = ()) -> list[Path]:
    """Latency and energy vs silicon area (``npusim.hw.silicon.area_mm2``): every feasible point
    and the Pareto front of each (``pareto-METRIC-TRACE``), a row of two panels per trace (an
    LLM sweep's points are one trace; the other swept keys name the point series)."""
    return save_figure(pareto_figure(rows, swept), stem, formats)


def pareto_figure(rows: list[dict], swept: list[str] = ()):
    """The figure of ``plot_pareto``."""
    plt = require_matplotlib()
    from matplotlib.ticker import FuncFormatter, NullFormatter  # lazy: matplotlib is optional

    swept = list(swept)
    traces = sorted({base_trace(r, swept) for r in _with_area(rows)})
    if not traces:
        raise NpusimError("no feasible point to plot: every point of the sweep is infeasible")
    fig, axes = plt.subplots(len(traces), len(PARETO_METRICS), figsize=(5.5 * len(PARETO_METRICS), 4 * len(traces)),
                             squeeze=False)
    for trace, panel in zip(traces, axes):
        mine = [r for r in _with_area(rows) if base_trace(r, swept) == trace]
        names = {id(r): _pareto_series(r, swept) for r in mine}
        for ax, (column, label, scale) in zip(panel, PARETO_METRICS):
            for name in sorted(set(names.values())):
                pts = [r for r in mine if names[id(r)] == name]
                sc = ax.scatter([r["area_mm2"] for r in pts], [r[column] * scale for r in pts], s=14,
                                alpha=0.7, label=name)
                sc.set_gid(f"points-{column}-{trace}-{name}".replace(" ", "_"))
            front = pareto_front(mine, y=column)
            (line,) = ax.step([r["area_mm2"] for r in front], [r[column] * scale for r in front], where="post",
                              color="black", linewidth=1.2, label="Pareto front")
            line.set_gid(f"pareto-{column}-{trace}")
            areas = [r["area_mm2"] for r in mine]
            if min(areas) > 0 and max(areas) >= 8 * min(areas):
                ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels overlap into a band
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.3g}"))
            ax.tick_params(axis="x", labelrotation=30)
            ax.set_xlabel("area (mm2)")
            ax.set_ylabel(label)
            ax.set_title(f"{trace}: {label.split(' (')[0]} vs area", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _pareto_series(row: dict, swept: list[str]) -> str:
    """The planner and the swept keys that do not change the area (those are the x axis)."""
    extra = [f"{k}={row[k]}" for k in swept if k in LLM_AXIS and k in row]
    return " ".join([row["planner"], *extra])

