"""``npusim experiment cosma``: the table, the figure, the graph transforms it relies on."""

import csv

import pytest

from npusim.cli import main
from npusim.errors import NpusimError
from npusim.cli.experiment import COLUMNS, SCHEMES, activation_graph, paper_budgets, reordered, run_cosma_experiment, summarise
from npusim.graph.analysis import peak_live_bytes
from npusim.testing.random_dags import nas_cell
from npusim.workflow import load_graph


def test_activation_graph_drops_only_weights():
    g = load_graph("resnet18")
    a = activation_graph(g)
    assert a.n_ops == g.n_ops
    assert {t.kind for t in a.tensors} == {t.kind for t in g.tensors} - {"weight"}
    assert sum(t.size for t in a.tensors) == sum(t.size for t in g.tensors if t.kind != "weight")


def test_reordered_graph_runs_the_order_as_default():
    from planners.schedule.greedy import greedy_order
    from planners.schedule.problem import MemoryProblem

    g = nas_cell(2, 3, seed=3)
    order = greedy_order(MemoryProblem.from_graph(g), "smallest_step")
    r = reordered(g, order)
    assert [op.name for op in r.ops] == [g.ops[v].name for v in order]
    assert peak_live_bytes(r, list(range(r.n_ops)), 64) == peak_live_bytes(g, order, 64)


def test_budgets_follow_the_paper():
    g = activation_graph(load_graph("resnet18"))
    b = paper_budgets(g, 64, 5)
    assert b.m_r <= b.m_h <= b.m_p <= peak_live_bytes(g, list(range(g.n_ops)), 64)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("exp")
    return out, run_cosma_experiment(["resnet18"], budgets=("MR",), time_limit=5, dnc_time_limit=10,
                                     out=out, log=lambda *_: None)


def test_experiment_writes_rows_for_cosma_and_every_scheme(small_run):
    out, result = small_run
    with open(out / "cosma.csv") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == COLUMNS
    assert sorted(r["method"] for r in rows) == sorted(SCHEMES + ("cosma", "cosma-dnc"))
    cosma = next(r for r in rows if r["method"] == "cosma")
    best = min(int(r["non_compulsory_bytes"]) for r in rows if r["method"] in SCHEMES)
    if cosma["status"] == "optimal":
        assert int(cosma["non_compulsory_bytes"]) <= best
    assert all(int(r["latency_cycles"]) > 0 and float(r["energy_uj"]) > 0 for r in rows)
    assert (out / "cosma.png").stat().st_size > 0
    assert result["summary"]["median_cosma_seconds"] is not None


def test_summary_averages_reductions_at_mr():
    rows = [dict(trace=t, set="human", budget="MR", method=m, status="optimal", solve_seconds=s,
                 non_compulsory_bytes=b, reduction_vs_best_scheme=red)
            for t, m, s, b, red in (("a", "cosma", 1.0, 10, 0.9), ("a", SCHEMES[0], 0.0, 100, ""),
                                    ("b", "cosma", 3.0, 0, 1.0), ("b", SCHEMES[1], 0.0, 50, ""))]
    s = summarise(rows)
    assert s["mean_reduction_at_mr"] == pytest.approx(0.95)
    assert s["median_cosma_seconds"] == 2.0
    assert s["all_cosma_le_schemes_when_optimal"]


def test_cli_runs_the_experiment_and_rejects_bad_input(tmp_path, capsys):
    assert main(["experiment", "cosma", "squeezenet1_0", "--budgets", "MR", "--time-limit", "5",
                 "-o", str(tmp_path), "--no-plot"]) == 0
    assert "mean reduction" in capsys.readouterr().out
    assert (tmp_path / "cosma.csv").exists()
    assert main(["experiment", "cosma", "nope", "-o", str(tmp_path)]) == 2
    assert main(["experiment", "cosma", "resnet18", "--budgets", "MX", "-o", str(tmp_path)]) == 2
    with pytest.raises(NpusimError, match="not a trace"):
        run_cosma_experiment(["nope"], out=tmp_path)
