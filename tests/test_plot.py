"""Pictures: rendered to files and checked by their structure (PNG header, SVG elements)."""

import sys
import xml.etree.ElementTree as ET

import pytest

from helpers import chain_with_skip
from npusim import dse
from npusim.cli import main
from npusim.errors import NpusimError
from npusim.graph.trace_io import save_trace
from npusim.plan.io import save_plan
from npusim.plot import compact_bytes, pareto_front, require_matplotlib
from npusim.workflow import load_hw, plan_graph

pytest.importorskip("matplotlib")
from npusim.plot import dse_figure, plot_dse_curves, plot_pareto, plot_plan  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def svg_ids(path):
    """Every element id of an SVG (matplotlib writes an artist's gid as the id of its <g>)."""
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    return [el.get("id") for el in root.iter() if el.get("id")]


def check_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000


@pytest.fixture(scope="module")
def spilling_plan():
    graph = chain_with_skip()
    plan = plan_graph(graph, load_hw("edge-npu"), "default+arena+belady", 2112)
    assert any(t.cause == "spill" for t in plan.transfers) and any(t.cause == "retrieve" for t in plan.transfers)
    return graph, plan


def test_plan_packing_has_one_rectangle_per_residency(spilling_plan, tmp_path):
    graph, plan = spilling_plan
    png, svg = plot_plan(plan, tmp_path / "packing", graph)
    check_png(png)
    ids = svg_ids(svg)
    assert sum(i.startswith("residency-") for i in ids) == len(plan.residencies) == 8  # 7 tensors, the spilled one twice
    assert {"spills", "retrieves", "budget"} <= set(ids)
    # Deterministic: the same plan draws the same SVG (no date, fixed id salt).
    assert svg.read_text() == plot_plan(plan, tmp_path / "again", graph, formats=("svg",))[0].read_text()


def test_plot_plan_command(capsys, spilling_plan, tmp_path):
    graph, plan = spilling_plan
    trace = save_trace(graph, tmp_path / "chain.json")
    plan_path = tmp_path / "p.json"
    save_plan(plan, plan_path, graph)
    assert main(["plot-plan", str(plan_path), "--trace", str(trace), "--format", "svg"]) == 0
    assert "p.svg" in capsys.readouterr().out
    assert sum(i.startswith("residency-") for i in svg_ids(tmp_path / "p.svg")) == len(plan.residencies)
    assert main(["plot-plan", str(plan_path), "--trace", str(trace), "--format", "gif"]) == 2
    assert "--format 'gif'" in capsys.readouterr().err
    # a folder that does not exist is refused as by every other output (it was created)
    missing = tmp_path / "no" / "such"
    assert main(["plot-plan", str(plan_path), "--trace", str(trace), "-o", str(missing / "p")]) == 2
    assert f"the folder {missing} does not exist" in capsys.readouterr().err and not missing.parent.exists()
    # an invalid plan is drawn (seeing an overlap is how one debugs it), with a warning
    from dataclasses import replace
    first, second = plan.residencies[0], plan.residencies[1]
    overlapping = replace(plan, residencies=[first, replace(second, offset=first.offset, first=first.first,
                                                            last=first.last), *plan.residencies[2:]])
    save_plan(overlapping, tmp_path / "bad.json", graph)
    assert main(["plot-plan", str(tmp_path / "bad.json"), "--trace", str(trace), "--format", "svg"]) == 0
    err = capsys.readouterr().err
    assert "is not a valid plan" in err and "[overlap]" in err and "drawn as it is" in err


def test_tiled_plan_draws_tiles_grouped_per_op(capsys, tmp_path, monkeypatch):
    """The default pipeline's plan of a tiled model (the issue's IndexError): one band per op
    run, rectangles per residency; above the separate-rectangle limit, one collection."""
    import npusim.plot as plot
    from npusim.workflow import load_graph

    graph = load_graph("resnet18")
    plan = plan_graph(graph, load_hw("edge-npu"), "tile+default+arena+belady", 256 * 1024)
    assert plan.tiling
    plan_path = tmp_path / "tiled.json"
    save_plan(plan, plan_path, graph)
    assert main(["plot-plan", str(plan_path), "--trace", "resnet18", "--format", "svg,png"]) == 0, \
        capsys.readouterr().err
    ids = svg_ids(tmp_path / "tiled.svg")
    assert sum(i.startswith("residency-") for i in ids) == len(plan.residencies)
    bands = sum(i.startswith("op-") for i in ids)
    assert bands == len(plot.op_groups(plan, plan_graph_tiled(plan, graph))) >= graph.n_ops
    check_png(tmp_path / "tiled.png")
    monkeypatch.setattr(plot, "MAX_SEPARATE_RECTANGLES", 10)
    (svg,) = plot_plan(plan, tmp_path / "many", graph, formats=("svg",))
    ids = svg_ids(svg)
    assert "residencies" in ids and not any(i.startswith("residency-") for i in ids)


def plan_graph_tiled(plan, graph):
    from npusim.plan.bound import as_bound  # lazy: only this helper uses it

    return as_bound(plan, graph).bound_graph


def test_multi_stream_plan_bands_by_stream(tmp_path):
    from npusim.workflow import load_graph

    graph = load_graph("resnet18")
    plan = plan_graph(graph, load_hw("mid-npu"), "default+streams-rr+mindspore-mo:size,best-fit")
    assert len(set(plan.streams)) > 1
    (svg,) = plot_plan(plan, tmp_path / "streams", graph, formats=("svg",))
    ids = svg_ids(svg)
    assert sum(i.startswith("op-") for i in ids) == graph.n_ops
    assert sum(i.startswith("residency-") for i in ids) == len(plan.residencies)


@pytest.fixture(scope="module")
def sweep_rows(tmp_path_factory):
    trace = str(save_trace(chain_with_skip(), tmp_path_factory.mktemp("t") / "chain.json"))
    sweeps = [dse.parse_sweep("budget=1KiB,2112,3KiB,4KiB")]
    points = dse.make_points([trace], "edge-npu", sweeps, ["default+arena+belady", "rpo+arena+lru"])
    return dse.run_sweep(points, cache_dir=None).rows


def test_dse_curves_have_one_line_per_planner_and_metric(sweep_rows, tmp_path):
    png, svg = plot_dse_curves(sweep_rows, tmp_path / "curves", ["budget"])
    check_png(png)
    curves = [i for i in svg_ids(svg) if i.startswith("curve-")]
    assert len(curves) == 3 * 2  # latency, energy, off-chip bytes x two planners
    assert sum(i.startswith("curve-energy_pj-") for i in curves) == 2


def test_pareto_front_is_the_set_no_point_beats():
    rows = [dict(status="ok", trace="t", planner=p, capacity=c, area_mm2=c * 1.5, energy_pj=e)
            for p, c, e in [("a", 1, 10), ("b", 1, 12), ("a", 2, 8), ("b", 2, 9), ("a", 4, 8), ("b", 8, 5)]]
    rows.append(dict(status="infeasible", trace="t", planner="a", capacity=0, area_mm2=None, energy_pj=None))
    front = pareto_front(rows)
    assert [(r["area_mm2"], r["energy_pj"]) for r in front] == [(1.5, 10), (3, 8), (12, 5)]
    for r in rows[:6]:  # every point off the front is dominated by a point on it
        if r not in front:
            assert any(f["area_mm2"] <= r["area_mm2"] and f["energy_pj"] <= r["energy_pj"] for f in front)


def test_pareto_plot(sweep_rows, tmp_path):
    png, svg = plot_pareto(sweep_rows, tmp_path / "pareto")
    check_png(png)
    ids = svg_ids(svg)
    for metric in ("cycles", "energy_pj"):  # latency and energy against area, each with its front
        assert f"pareto-{metric}-chain" in ids and sum(i.startswith(f"points-{metric}-chain-") for i in ids) == 2


def test_dse_command_plots(capsys, tmp_path):
    out = tmp_path / "r.csv"
    code = main(["dse", "squeezenet1_0", "--hw", "edge-npu", "--sweep", "budget=MR,MP", "--planner",
                 "default+arena+belady,rpo+arena+lru", "-o", str(out), "--no-cache", "--plot", "--allow-oversize"])
    assert code == 0, capsys.readouterr().err
    for name in ("r-curves.png", "r-curves.svg"):
        assert (tmp_path / name).stat().st_size > 5000
    assert sum(i.startswith("curve-") for i in svg_ids(tmp_path / "r-curves.svg")) == 6
    # the budget does not change the silicon: no Pareto figure, and the run says why
    assert not (tmp_path / "r-pareto.png").exists() and "no Pareto figure" in capsys.readouterr().out
    code = main(["dse", "squeezenet1_0", "--sweep", "scratchpad.size=512KiB,1MiB", "-o", str(tmp_path / "s.csv"),
                 "--no-cache", "--plot"])
    assert code == 0 and (tmp_path / "s-pareto.svg").stat().st_size > 5000


def test_all_infeasible_is_a_clear_error(tmp_path):
    rows = [dict(status="infeasible", trace="t", planner="a", capacity=None)]
    with pytest.raises(NpusimError, match="every point of the sweep is infeasible"):
        plot_dse_curves(rows, tmp_path / "x", [])


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(NpusimError, match=r"pip install 'npusim\[plot\]'"):
        require_matplotlib()


@pytest.mark.parametrize("n, text", [(96, "96B"), (2048, "2KiB"), (2.5 * 2**20, "2.5MiB"), (3 * 2**30, "3GiB")])
def test_compact_bytes(n, text):
    assert compact_bytes(n) == text


def _row(trace, planner, capacity, cycles, **swept):
    return dict(trace=trace, planner=planner, status="ok", capacity=capacity, cycles=cycles, energy_pj=cycles * 10.0,
                offchip_bytes=cycles * 3, **swept)


@pytest.mark.parametrize("swept, rows, xlabel, xs, series", [
    (["scratchpad.size"], [_row("r18", "p", c, 100 - c // 65536, **{"scratchpad.size": c}) for c in (262144, 524288, 1048576)],
     "scratchpad size (= budget)", [262144, 524288, 1048576], 1),
    (["dram.bandwidth", "scratchpad.size"],
     [_row("r18", "p", 1 << 20, 10 + b / 1e9, **{"dram.bandwidth": b, "scratchpad.size": s})
      for b in (25.6e9, 6.4e9, 12.8e9) for s in (1 << 20, 2 << 20)],
     "dram.bandwidth (B/s)", [6.4e9, 12.8e9, 25.6e9], 2),
    (["decode", "batch"], [_row(f"llm:gpt2-small:decode={d}:batch={b}", "p", 1 << 20, d * b, decode=d, batch=b)
                           for d in (128, 256, 512, 1024) for b in (1, 4)],
     "decode step (KV length)", [128, 256, 512, 1024], 2),
    ([], [_row("r18", p, c, c % 7 + 1) for p in ("a+arena", "b+arena") for c in (65536, 131072)],
     "scratchpad budget", [65536, 131072], 2),
    (["cores.dataflow"], [_row("r18", "p", 1 << 20, {"os": 3, "ws": 2, "is": 1}[d], **{"cores.dataflow": d})
                          for d in ("ws", "os", "is")], "cores.dataflow", [0, 1, 2], 1),
])
def test_dse_figures_put_the_swept_key_on_x(swept, rows, xlabel, xs, series):
    """The first swept key on x (sorted, with its unit), a line per value of the other keys and
    planner, one row of panels per trace (an LLM sweep's points are one trace), every point drawn."""
    fig = dse_figure(rows, swept)
    axes = fig.axes
    assert len(axes) == 3  # one trace: latency, energy, off-chip bytes
    for ax in axes:
        assert ax.get_xlabel() == xlabel
        lines = ax.get_lines()
        assert len(lines) == series
        assert sum(len(line.get_xdata()) for line in lines) == len(rows)
        assert sorted({float(x) for line in lines for x in line.get_xdata()}) == [float(x) for x in xs]
    if swept and swept[0] == "cores.dataflow":
        assert [t.get_text() for t in axes[0].get_xticklabels()] == ["is", "os", "ws"]
