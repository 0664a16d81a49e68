"""``npusim simulate --html``: one self-contained page that opens offline and shows the
report's numbers; rendered in a real headless browser (Debian's Chromium) when one is
installed, with no console errors and the op table sorting on a click."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from npusim.cli import main
from npusim.sim.report import per_op_breakdown
from npusim.workflow import load_graph, load_hw, plan_graph, simulate_plan

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.urls, self.open = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        if tag not in ("meta", "br", "line", "polyline", "input", "img"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in ("line", "polyline"):
            return
        assert self.open and self.open[-1] == tag, (tag, self.open[-5:])
        self.open.pop()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("html")
    path = folder / "r.html"
    graph, hw = load_graph("resnet50"), load_hw("edge-npu")  # the README's quick start
    report = simulate_plan(plan_graph(graph, hw), hw, validated=True)
    report.save_html(path)
    return path, report


def test_the_page_is_self_contained_and_well_formed(page):
    path, report = page
    text = path.read_text(encoding="utf-8")
    parser = _Collect()
    parser.feed(text)
    assert parser.open == ["html"] or parser.open == []  # every element closed
    assert parser.urls == []  # nothing fetched at view time: no src or href at all
    assert {"svg", "table", "script", "pre"} <= set(parser.tags)
    assert f"{report.cycles:,.0f} cycles" in text and report.graph in text
    assert text.count("<tr>") == 1 + len(per_op_breakdown(report.op_breakdown))
    assert len(text.encode()) < 2 << 20


def test_a_jittered_run_says_so_on_the_page(tmp_path, capsys):
    path = tmp_path / "j.html"
    assert main(["simulate", "squeezenet1_0", "--jitter", "2", "--html", str(path)]) == 0
    assert "JITTERED (seed 2, amount 0.5): a race test, not a timing" in path.read_text(encoding="utf-8")


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed (apt-get install chromium)")
def test_the_page_renders_in_a_headless_browser_without_errors(page, tmp_path):
    path, report = page
    run = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                          "--v=0", "--virtual-time-budget=3000", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120)
    dom = run.stdout
    assert run.returncode == 0 and "<table" in dom
    assert f"{report.cycles:,.0f} cycles" in dom
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []
    shot = tmp_path / "shot.png"
    subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1280,2000", path.as_uri()], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000  # something was drawn


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed (apt-get install chromium)")
def test_clicking_a_column_sorts_the_ops(page, tmp_path):
    """The sorting script, run in the browser: a click on 'busy (cycles)' puts the busiest op first."""
    path, report = page
    probe = tmp_path / "probe.html"
    text = path.read_text(encoding="utf-8")
    click = ("<script>var th = Array.prototype.find.call(document.querySelectorAll('th'), "
             "function (h) { return h.textContent === 'busy (cycles)'; }); th.click();"
             "document.title = document.querySelector('tbody tr td').textContent;</script></body>")
    probe.write_text(text.replace("</body>", click), encoding="utf-8")
    run = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000",
                          "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    busiest = max(per_op_breakdown(report.op_breakdown), key=lambda r: r["busy_cycles"])["op"]
    title = re.search(r"<title>(.*?)</title>", run.stdout).group(1)
    assert title == busiest


def _render(path: Path) -> tuple[str, list[str]]:
    run = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                          "--virtual-time-budget=3000", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0
    return run.stdout, [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def test_an_llm_run_and_a_20_point_sweep_have_pages(tmp_path, capsys, chain_trace):
    llm, sweep = tmp_path / "llm.html", tmp_path / "dse.html"
    assert main(["simulate", "llm:gpt2-small", "--hw", "datacenter-npu", "--prefill", "16", "--decode", "4",
                 "--samples", "2", "--kv-on-chip", "none", "--html", str(llm)]) == 0
    text = llm.read_text(encoding="utf-8")
    assert "per-token latency" in text and text.count("<tr>") == 1 + 2 and "<svg" in text
    assert main(["dse", chain_trace, "--sweep", "scratchpad.size=4KiB..80KiB:+4KiB", "--no-cache",
                 "-o", str(tmp_path / "d.csv"), "--html", str(sweep)]) == 0
    text = sweep.read_text(encoding="utf-8")
    assert text.count("<tr>") == 1 + 20 and text.count("<svg") >= 2 + 3  # 3 charts, the curves and Pareto figures
    # the same bytes when made again: the inlined figures carried matplotlib's <dc:date> (an audit)
    assert "<dc:date>" not in text and "<dc:date>" not in llm.read_text(encoding="utf-8")
    assert text.count("<circle") == 20 * 3 and text.count("<title>") >= 1 + 20 * 3  # every point has its tooltip
    for page in (llm, sweep):
        parser = _Collect()
        parser.feed(page.read_text(encoding="utf-8"))
        assert [u for u in parser.urls if not u.startswith("#")] == []  # nothing fetched at view time
        if BROWSER is not None:
            dom, console = _render(page)
            assert "<table" in dom and console == []
