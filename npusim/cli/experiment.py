"""``npusim experiment cosma``: the evaluation of the COSMA paper (§V, Fig. 3, Fig. 4, Table II),
with every plan then simulated.

For each trace and budget (M_R, M_H, M_P) it plans with COSMA and the paper's four schemes
(default or MPMF order × Belady or greedy replacement, each with the ``arena`` allocator),
validates and simulates every plan on the hardware config, and writes one CSV row per plan:
non-compulsory (spill + retrieve) bytes, the reduction vs the best scheme, status, bound,
time to solution, latency and energy. Then a bar chart like Fig. 3 (``cosma.png``).

- Tensor sets: by default activations only (the paper's M_R, M_P); the graph is planned and
  simulated without its weights (``activation_graph``), as with the separate parameter
  buffer of the paper's accelerator. ``params=True`` plans and simulates every tensor.
- Budgets: M_R = largest working set of one op; M_P = the minimum peak footprint, the peak of
  the MPMF order (``zhong``; never above the default order's peak); M_H = (M_R + M_P) / 2.
- Human-designed traces get ``cosma`` (one ILP) and ``cosma-dnc`` (to compare the stitched
  result with the single shot); NAS traces get ``cosma-dnc`` and COSMA-FS on the default and
  the MPMF order (the paper's Table II heuristics). ``cosma`` runs with ``fallback=dnc``: a
  graph whose model exceeds ``max_cells`` is divided and conquered, and the row's ``note``
  says so (``solved by cosma-dnc: ...``).
- The MPMF order is computed once per trace: the MPMF schemes and ``cosma-mpmf`` run on the
  graph with its ops renumbered in that order (``reordered``), where it is the default order;
  their ``solve_seconds`` include the scheduler's time.
- Time limits are CP-SAT deterministic time by default, so the CSV repeats exactly; a loaded
  machine then takes longer in wall time. ``wall_clock=True`` (``--wall-clock``) makes them
  seconds on this machine, which is what the time-to-solution columns are about; ``cosma-dnc``
  then keeps 10 % of its limit for stitching, so it finishes within it.
"""

from __future__ import annotations

import csv
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from npusim.util.atomic_io import atomic_open
from npusim.errors import NpusimError
from npusim.graph.analysis import default_order, min_required, peak_live_bytes
from npusim.graph.model import Graph, build_graph
from npusim.plan.validate import require_valid
from npusim.plot import require_matplotlib, save_figure
from npusim.registry import make_plan, schedule_order
from npusim.util.resources import list_resources
from npusim.workflow import load_graph, load_hw, simulate_plan

HUMAN = ("resnet50", "densenet121", "r2plus1d_18", "fcn_resnet50", "transformer", "vit_b_16",
         "resnet18", "googlenet", "inception_v3", "mobilenet_v2", "mnasnet1_0", "squeezenet1_0", "bert_tiny")
NAS = ("nasnetalarge", "hrnet_w18_small")
SCHEMES = ("scheme-default-belady", "scheme-default-greedy", "scheme-mpmf-belady", "scheme-mpmf-greedy")
BUDGETS = ("MR", "MH", "MP")
COLUMNS = ("trace", "set", "tensors", "budget", "budget_bytes", "method", "non_compulsory_bytes", "spill_bytes",
           "retrieve_bytes", "reduction_vs_best_scheme", "status", "bound", "solve_seconds", "latency_cycles",
           "energy_uj", "dram_energy_uj", "parts", "note")


def activation_graph(graph: Graph) -> Graph:
    """The graph without its weight tensors (ops keep their other inputs)."""
    keep = [t for t in graph.tensors if t.kind != "weight"]
    return build_graph(graph.name, _tensor_records(keep), _op_records(graph, {t.id for t in keep}, graph.ops),
                       meta=dict(graph.meta, tensors="activations"))


def reordered(graph: Graph, order: list[int]) -> Graph:
    """The same graph with its ops renumbered in ``order`` (so ``default`` runs that order)."""
    return build_graph(graph.name, _tensor_records(graph.tensors),
                       _op_records(graph, {t.id for t in graph.tensors}, [graph.ops[v] for v in order]),
                       meta=dict(graph.meta))


def _tensor_records(tensors) -> list[dict]:
    return [dict(name=t.name, shape=list(t.shape), dtype=t.dtype, itemsize=t.itemsize, kind=t.kind) for t in tensors]


def _op_records(graph: Graph, kept: set[int], ops) -> list[dict]:
    name = lambda t: graph.tensors[t].name  # noqa: E731
    return [dict(name=o.name, kind=o.kind, inputs=[name(t) for t in o.inputs if t in kept],
                 outputs=[name(t) for t in o.outputs], attrs=dict(o.attrs), macs=o.macs,
                 vector_ops=o.vector_ops, gemm=o.gemm) for o in ops]


@dataclass(frozen=True)
class Budgets:
    m_r: int
    m_p: int
    mpmf_order: list
    mpmf_seconds: float

    @property
    def m_h(self) -> int:
        return (self.m_r + self.m_p) // 2

    def get(self, key: str) -> int:
        return {"MR": self.m_r, "MH": self.m_h, "MP": self.m_p}[key]


def paper_budgets(graph: Graph, align: int, time_limit: float, wall_clock: bool = False) -> Budgets:
    start = time.perf_counter()
    options = {"time_limit": time_limit, "deterministic": not wall_clock}
    order = schedule_order("zhong", graph, align, options)  # the minimum-peak order, through the registry
    seconds = time.perf_counter() - start
    default_peak = peak_live_bytes(graph, default_order(graph), align)
    mpmf_peak = peak_live_bytes(graph, order, align)
    if default_peak < mpmf_peak:
        order, mpmf_peak = default_order(graph), default_peak
    m_r = min_required(graph, align)[0]
    return Budgets(m_r, max(m_r, mpmf_peak), order, seconds)


def _row(trace, group, tensors, key, budget, method, plan, graph, hw, extra_seconds=0.0, note=""):
    require_valid(plan, source=f"{method} on {trace}")
    report = simulate_plan(plan, hw, validated=True)
    oc = plan.offchip_bytes()
    stats = plan.meta.stats
    return dict(trace=trace, set=group, tensors=tensors, budget=key, budget_bytes=budget, method=method,
                non_compulsory_bytes=oc["spill"] + oc["retrieve"], spill_bytes=oc["spill"],
                retrieve_bytes=oc["retrieve"], reduction_vs_best_scheme="", status=plan.meta.status,
                bound="" if plan.meta.bound is None else int(plan.meta.bound),
                solve_seconds=round(plan.meta.solve_seconds + extra_seconds, 3), latency_cycles=int(report.cycles),
                energy_uj=round(report.total_energy_pj * 1e-6, 3),
                dram_energy_uj=round((report.energy_pj.get("dram_read", 0.0) + report.energy_pj.get("dram_write", 0.0)) * 1e-6, 3),
                parts=stats.get("parts", ""), note=note)


def run_trace(trace: str, group: str, hw, *, params: bool, budgets=BUDGETS, time_limit: float = 60.0,
              dnc_time_limit: float = 120.0, part_ops: int = 40, wall_clock: bool = False,
              log=print) -> list[dict]:
    full = load_graph(trace)
    graph = full if params else activation_graph(full)
    tensors = "activations+params" if params else "activations"
    align = hw.scratchpad.alignment
    b = paper_budgets(graph, align, time_limit, wall_clock)
    by_mpmf = reordered(graph, b.mpmf_order)
    opts = {"time_limit": time_limit, "workers": 2}
    if wall_clock:  # limits in seconds on this machine (time to solution), not deterministic time
        opts["deterministic"] = False
    rows = []
    for key in budgets:
        budget = b.get(key)
        hw_b = hw.with_scratchpad_size(budget)
        plans = []
        for scheme in SCHEMES:
            mpmf = "mpmf" in scheme
            pipeline = scheme.replace("scheme-mpmf", "scheme-default") if mpmf else scheme
            g = by_mpmf if mpmf else graph
            plan = make_plan(g, hw_b, pipeline, budget=budget, options=opts)
            plans.append((scheme, plan, g, b.mpmf_seconds if mpmf else 0.0, ""))
        methods = ["cosma", "cosma-dnc"] if group == "human" else ["cosma-dnc", "cosma-fs", "cosma-mpmf"]
        for method in methods:
            g, pipeline, extra = graph, method, 0.0
            if method == "cosma-mpmf":
                g, pipeline, extra = by_mpmf, "cosma-fs", b.mpmf_seconds
            o = dict(opts, part_ops=part_ops)
            if method == "cosma-dnc":
                o["time_limit"] = dnc_time_limit
            if method == "cosma":  # a graph too big for one model: divide and conquer, noted in the row
                o["fallback"] = "dnc"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                plan = make_plan(g, hw_b, pipeline, budget=budget, options=o)
            fallback = plan.meta.stats.get("fallback")
            notes = [f"solved by {fallback}"] if fallback else []
            note = "; ".join(notes + [str(w.message).split(";")[0] for w in caught])
            plans.append((method, plan, g, extra, note))
        chunk = [_row(trace, group, tensors, key, budget, m, p, g, hw_b, x, note) for m, p, g, x, note in plans]
        best_scheme = min(r["non_compulsory_bytes"] for r in chunk if r["method"] in SCHEMES)
        for r in chunk:
            if best_scheme > 0:
                r["reduction_vs_best_scheme"] = round(1 - r["non_compulsory_bytes"] / best_scheme, 4)
            log(f"{trace:16s} {key} {r['method']:22s} {r['non_compulsory_bytes']:>12,} B  {r['status']:9s} "
                f"{r['solve_seconds']:8.2f} s  {r['latency_cycles']:>12,} cycles  {r['energy_uj']:10.1f} uJ")
        rows.extend(chunk)
    return rows


def summarise(rows: list[dict]) -> dict:
    """The issue's targets: mean reduction vs the best scheme at M_R (human set, where the best
    scheme moves any bytes), median COSMA time on the human set, DnC time per NAS net."""
    import statistics  # lazy: its imports (fractions, decimal) cost every command, not only this one

    human_mr = [r for r in rows if r["set"] == "human" and r["method"] == "cosma" and r["budget"] == "MR"
                and r["reduction_vs_best_scheme"] != ""]
    human_cosma = [r["solve_seconds"] for r in rows if r["set"] == "human" and r["method"] == "cosma"]
    nas_dnc = {}
    for r in rows:
        if r["set"] == "nas" and r["method"] == "cosma-dnc":
            nas_dnc[r["trace"]] = max(nas_dnc.get(r["trace"], 0.0), r["solve_seconds"])
    return dict(
        mean_reduction_at_mr=statistics.mean(r["reduction_vs_best_scheme"] for r in human_mr) if human_mr else None,
        median_cosma_seconds=statistics.median(human_cosma) if human_cosma else None,
        max_dnc_seconds_per_nas_net=nas_dnc,
        all_cosma_le_schemes_when_optimal=all(
            r["non_compulsory_bytes"] <= min(s["non_compulsory_bytes"] for s in rows if s["trace"] == r["trace"]
                                             and s["budget"] == r["budget"] and s["method"] in SCHEMES)
            for r in rows if r["method"] == "cosma" and r["status"] == "optimal"),
    )


def write_csv(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)


def plot_bars(rows: list[dict], stem: Path, formats=("png",)) -> list[Path]:
    """Fig. 3: non-compulsory bytes per method, grouped by trace and budget."""
    plt = require_matplotlib()
    traces = list(dict.fromkeys(r["trace"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cols = min(4, len(traces))
    nrows = -(-len(traces) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    colours = plt.get_cmap("tab10")
    width = 0.8 / len(methods)
    for ax, trace in zip(axes.flat, traces):
        mine = [r for r in rows if r["trace"] == trace]
        keys = list(dict.fromkeys(r["budget"] for r in mine))
        for j, method in enumerate(methods):
            ys = [next((r["non_compulsory_bytes"] / 2**20 for r in mine if r["budget"] == k and r["method"] == method), 0)
                  for k in keys]
            bars = ax.bar([i + j * width - 0.4 + width / 2 for i in range(len(keys))], ys, width,
                          color=colours(j % 10), label=method)
            for key, patch in zip(keys, bars):
                patch.set_gid(f"bar-{trace}-{key}-{method}")
        ax.set_xticks(range(len(keys)), keys)
        ax.set_title(trace, fontsize=9)
        ax.set_ylabel("spill + retrieve (MiB)", fontsize=8)
    for ax in list(axes.flat)[len(traces):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(methods), 4), fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return save_figure(fig, stem, formats)


def run_cosma_experiment(traces: list[str] | None, hw_name: str = "edge-npu", *, params: bool = False,
                         budgets=BUDGETS, time_limit: float = 60.0, dnc_time_limit: float = 120.0,
                         wall_clock: bool = False, out: Path = Path("cosma-experiment"), plot: bool = True,
                         log=print) -> dict:
    available = set(list_resources("traces"))
    if traces:
        missing = [t for t in traces if t not in available and not Path(t).is_file()]
        if missing:
            raise NpusimError(f"trace {missing[0]!r}: not a trace; available: {', '.join(sorted(available))}")
        chosen = traces
    else:
        chosen = [t for t in HUMAN + NAS if t in available]
    bad = [b for b in budgets if b not in BUDGETS]
    if bad or not budgets:
        raise NpusimError(f"--budgets {','.join(budgets)!r}: expected a comma-separated subset of {','.join(BUDGETS)}")
    hw = load_hw(hw_name)
    rows = []
    for trace in chosen:
        group = "nas" if Path(trace).stem in NAS else "human"
        rows.extend(run_trace(trace, group, hw, params=params, budgets=budgets, time_limit=time_limit,
                              dnc_time_limit=dnc_time_limit, wall_clock=wall_clock, log=log))
        write_csv(rows, out / "cosma.csv")  # after every trace: an interrupted run keeps its rows
    summary = summarise(rows)
    paths = [out / "cosma.csv"]
    if plot:
        paths += plot_bars(rows, out / "cosma")
    return dict(rows=rows, summary=summary, paths=paths)
