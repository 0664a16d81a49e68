"""Design-space exploration: simulate every combination of swept hardware knobs, budgets,
planner pipelines and traces, and collect one row of metrics per point.

A sweep (parsed in ``npusim.dse_sweep``) is ``KEY=SPEC``: ``KEY`` is any dotted hardware key (``scratchpad.size``,
``dram.bandwidth``, ``cores.pe_rows``...) or ``budget`` (the scratchpad budget planned for,
as ``--budget``: sizes or MR/MH/MP); ``SPEC`` is

- ``A..B:xF``  geometric: A, A*F, A*F^2, ... up to B (e.g. ``64KiB..8MiB:x2``);
- ``A..B:+S``  linear: A, A+S, A+2S, ... up to B (e.g. ``8..32:+8``);
- ``V1,V2,..`` a list.

Values are read with the key's unit (``npusim.units``) and stored in base units, so CSV
columns are numbers. Points are the cartesian product of the sweeps, times pipelines, times
traces. Every point is keyed by a content hash of the trace file, the resolved hardware, the
pipeline, the budget and options, the npusim version and a fingerprint of the planner and
simulator code (``npusim.code_fingerprint``); finished points are cached as checksummed JSON
(``npusim.result_cache``, ``.npusim-cache/`` by default), so an interrupted sweep resumes
where it stopped and a repeated sweep is free. A point that cannot be planned (budget below M_R, a config whose
alignment exceeds its scratchpad...) is recorded as ``infeasible`` with the error message.

Backends: ``local`` (in-process for ``jobs=1``, else a process pool) and ``dask`` (a
``dask.distributed`` cluster; a LocalCluster when no scheduler address is given). Workers
only compute rows; the caller's process reads and writes the cache and orders the rows by
point, so every backend and job count gives the same rows (wall-clock columns aside).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from tqdm import tqdm

import npusim
from npusim import units
from npusim.code_fingerprint import code_fingerprint
from npusim.compare import (METRIC_COLUMNS, WALL_CLOCK_COLUMNS, check_pipelines, infeasible_row, metrics_row,
                            rows_to_csv)
from npusim.atomic_io import atomic_write_text
from npusim.errors import NpusimError
from npusim.hw.config import Hardware
from npusim.hw.loader import hardware_to_dict
from npusim.resources import find_resource
from npusim.result_cache import CACHE_FORMAT, Cache  # noqa: F401 (CACHE_FORMAT: part of the API)
from npusim.worker_lifetime import die_with
from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget, simulate_plan

from npusim.dse_sweep import (BUDGET_KEY, LLM_KEYS, MAX_POINTS_PER_SWEEP, DseError, Sweep,  # noqa: F401
                              knob_quantities, parse_value, parse_sweep)  # re-exported: npusim.dse's sweep API

DEFAULT_CACHE_DIR = ".npusim-cache"
BACKENDS = ("local", "dask")


# ---------------------------------------------------------------- points


@dataclass(frozen=True)
class Point:
    """One simulation to run: everything a worker needs, all of it picklable."""

    index: int
    trace: str  # name or path, resolved on the worker
    trace_digest: str  # sha256 of the trace file, checked on the worker
    hw_source: str
    settings: tuple  # ((swept key, value), ...) as given, for the row's columns
    hw: Hardware | None  # None when the config itself is invalid (see hw_error)
    hw_error: str
    pipeline: str
    budget: object  # None (scratchpad size), bytes, or "MR"/"MH"/"MP"
    options: tuple = ()
    allow_oversize: bool = False  # a budget over the scratchpad size is planned (else infeasible)
    version: str = npusim.__version__
    code: str = field(default_factory=lambda: code_fingerprint())  # looked up per call: tests patch it

    @property
    def trace_name(self) -> str:
        """The trace's name for rows and plots: ``resnet50`` for ``traces/resnet50.json``."""
        return trace_name(self.trace)

    def cache_key(self) -> str:
        identity = {
            "trace": self.trace_digest,
            "hardware": hardware_to_dict(self.hw) if self.hw is not None else {"error": self.hw_error},
            "pipeline": self.pipeline, "budget": self.budget, "options": dict(self.options),
            "npusim": self.version, "code": self.code,
            **({"allow_oversize": True} if self.allow_oversize else {}),
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def trace_name(source: str) -> str:
    name = Path(str(source)).name
    for suffix in (".json.gz", ".json", ".onnx"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def trace_digest(source: str) -> str:
    """sha256 of the trace file ``source`` names (a path, or a name in traces/); for a generated
    graph (``llm:...``) of the name itself, the generator's code being in the cache key's code
    fingerprint."""
    if str(source).startswith("llm:"):
        load_graph(source)  # a bad name is the user's error here, not a failed point
        return hashlib.sha256(str(source).encode()).hexdigest()
    return _file_digest(str(_trace_path(source)))


@functools.lru_cache(maxsize=64)
def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _trace_path(source: str) -> Path:
    path = Path(source)
    if path.is_file():
        return path
    found = find_resource("traces", str(source)) if path.name == str(source) else None
    if found is None:
        load_graph(source)  # raises the usual "trace not found" message
    return found


def make_points(traces: Iterable[str], hw_source: str, sweeps: list[Sweep], pipelines: list[str], *,
                budget: object = None, base_overrides: dict | None = None, options: dict | None = None,
                allow_oversize: bool = False) -> list[Point]:
    """Every combination, in a fixed order: traces, then sweeps (first sweep slowest), then pipelines."""
    keys = [s.key for s in sweeps]
    if len(set(keys)) != len(keys):
        raise DseError(f"--sweep: key swept twice: {keys}")
    load_hw(hw_source, base_overrides)  # a bad --hw or --set is the user's error, not a point
    check_pipelines(pipelines)  # and so is an unknown planner
    budget = normalise_budget(budget)  # and a malformed --budget
    points = []
    llm_keys = [k for k in keys if k in LLM_KEYS]
    if "prefill" in llm_keys and "decode" in llm_keys:
        raise DseError("--sweep: sweep prefill (prompt tokens) or decode (KV length of one step), not both: "
                       "each point is one graph")
    digests = {}
    for trace in traces:
        for combo in itertools.product(*(s.values for s in sweeps)):
            settings = tuple(zip(keys, combo))
            point_trace = _llm_trace(trace, settings) if llm_keys else trace
            if point_trace not in digests:
                digests[point_trace] = trace_digest(point_trace)
            overrides = dict(base_overrides or {})
            overrides.update((k, v) for k, v in settings if k != BUDGET_KEY and k not in LLM_KEYS)
            point_budget = dict(settings).get(BUDGET_KEY, budget)
            hw, hw_error = _load_hw_or_reason(hw_source, overrides)
            for pipeline in pipelines:
                points.append(Point(index=len(points), trace=point_trace, trace_digest=digests[point_trace],
                                    hw_source=str(hw_source), settings=settings, hw=hw, hw_error=hw_error,
                                    pipeline=pipeline, budget=point_budget,
                                    options=tuple(sorted((options or {}).items())), allow_oversize=allow_oversize))
    return points


def _llm_trace(trace: str, settings) -> str:
    """The decoder graph a point with LLM sweep keys stands for: ``llm:<preset>`` (with any
    fields the trace already gives) and the swept prefill / decode / batch."""
    if not str(trace).startswith("llm:"):
        raise DseError(f"--sweep {', '.join(k for k, _ in settings if k in LLM_KEYS)}: needs a generated decoder "
                       f"as the trace (llm:<preset>, e.g. llm:gpt2-small), got {trace!r}")
    _, model, *given = str(trace).split(":")
    fields = dict(part.partition("=")[::2] for part in given)
    swept = {k: str(v) for k, v in settings if k in LLM_KEYS}
    if "prefill" in swept or "decode" in swept:  # the swept step replaces the trace's own
        fields.pop("prefill", None)
        fields.pop("decode", None)
    fields.update(swept)
    if "prefill" not in fields and "decode" not in fields:
        raise DseError(f"--sweep batch on {trace!r}: give the step in the trace (llm:<preset>:decode=<L> or "
                       ":prefill=<P>) or sweep prefill or decode too")
    order = [k for k in ("prefill", "decode", "batch") if k in fields]
    return ":".join(["llm", model] + [f"{k}={fields[k]}" for k in order])


def normalise_budget(budget: object) -> object:
    """None, bytes, or 'MR'/'MH'/'MP' (so '3MiB' and 3145728 are the same point)."""
    if budget is None or isinstance(budget, int):
        return budget
    try:
        return parse_value(str(budget).strip(), "budget", f"budget={budget}")
    except DseError:
        raise DseError(f"--budget {budget!r}: expected a size such as 768KiB or one of MR, MH, MP") from None


def _load_hw_or_reason(source: str, overrides: dict) -> tuple[Hardware | None, str]:
    try:
        return load_hw(source, overrides), ""
    except NpusimError as exc:  # e.g. scratchpad.size below the alignment: an infeasible point
        return None, str(exc)


# ---------------------------------------------------------------- evaluating one point


@functools.lru_cache(maxsize=8)
def _graph(trace: str):
    return load_graph(trace)


def evaluate_point(point: Point) -> dict:
    """Plan and simulate one point; return its row (``infeasible`` with the reason on error).

    Runs on workers: it checks that the worker's npusim and trace are the caller's, because
    the cache key promises it.
    """
    if point.version != npusim.__version__:
        raise DseError(f"worker runs npusim {npusim.__version__}, the sweep expects {point.version}; "
                       "install the same version on every worker")
    if point.code != code_fingerprint():
        raise DseError("worker runs other planner or simulator code than the sweep (code fingerprint "
                       f"{code_fingerprint()[:12]}, expected {point.code[:12]}: npusim/planners sources, planner "
                       "plugins, Python, OR-Tools, SimPy, NumPy or Numba differ); install the same on every worker")
    if trace_digest(point.trace) != point.trace_digest:
        raise DseError(f"trace {point.trace!r} differs on the worker (content hash mismatch); "
                       "give every worker the same trace files")
    hw_name = point.hw.name if point.hw is not None else Path(point.hw_source).stem
    try:
        if point.hw is None:
            raise NpusimError(point.hw_error)
        graph = _graph(point.trace)
        capacity = resolve_budget(point.budget, graph, point.hw, allow_oversize=point.allow_oversize)
        plan = plan_graph(graph, point.hw, point.pipeline, capacity, options=dict(point.options))
        report = simulate_plan(plan, graph, point.hw)
    except NpusimError as exc:
        return infeasible_row(trace=point.trace_name, hardware=hw_name, planner=point.pipeline,
                              budget=point.budget, reason=str(exc))
    return metrics_row(plan, report, trace=point.trace_name, budget=point.budget)


def with_settings(point: Point, row: dict) -> dict:
    """The row with one column per swept key (after the metric columns)."""
    return {**row, **{key: value for key, value in point.settings}}


# ---------------------------------------------------------------- cache


def cache_about(point: Point) -> dict:
    """What a cache entry records for people reading it (the key decides, not this)."""
    return {"trace": point.trace, "hardware": point.hw_source, "settings": [list(s) for s in point.settings],
            "pipeline": point.pipeline, "budget": point.budget}


# ---------------------------------------------------------------- backends


def _run_local(points: list[Point], jobs: int, done: Callable[[Point, dict], None]) -> None:
    if jobs <= 1 or len(points) <= 1:
        for point in points:
            done(point, evaluate_point(point))
        return
    with ProcessPoolExecutor(max_workers=jobs, mp_context=_worker_context(), initializer=die_with,
                             initargs=(os.getpid(),)) as pool:  # workers end with the sweep, even on SIGKILL
        futures = {pool.submit(evaluate_point, p): p for p in points}
        for future in as_completed(futures):
            done(futures[future], future.result())


def _worker_context():
    """Workers forked from a clean server that has imported npusim once (fast, and no threads
    of the caller are forked); plain spawn where there is no fork (Windows)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["npusim.dse", "npusim.workflow", "npusim.worker_lifetime", "planners"])
        return context
    return multiprocessing.get_context("spawn")


def _run_dask(points: list[Point], jobs: int, scheduler: str | None, done: Callable[[Point, dict], None],
              processes: bool = True) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed as dask_completed  # lazy: optional, heavy
    except ImportError:
        raise DseError("--backend dask needs dask.distributed: pip install 'npusim[dask]'") from None
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=max(jobs, 1), threads_per_worker=1, processes=processes,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futures = client.map(evaluate_point, points, pure=False)
        by_key = {f.key: p for f, p in zip(futures, points)}
        for future in dask_completed(futures):
            done(by_key[future.key], future.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


@dataclass
class SweepResult:
    rows: list[dict]
    computed: int = 0
    cached: int = 0
    seconds: float = 0.0
    points: list[Point] = field(default_factory=list, repr=False)

    @property
    def infeasible(self) -> int:
        return sum(r["status"] != "ok" for r in self.rows)


def run_sweep(points: list[Point], *, jobs: int = 1, backend: str = "local", scheduler: str | None = None,
              cache_dir: str | Path | None = DEFAULT_CACHE_DIR, progress: bool | None = None,
              dask_processes: bool = True) -> SweepResult:
    """Evaluate every point (cached ones are read back), rows in point order."""
    if backend not in BACKENDS:
        raise DseError(f"--backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if jobs < 1:
        raise DseError(f"--jobs {jobs}: expected 1 or more")
    start = time.perf_counter()
    points = [replace(p, index=i) for i, p in enumerate(points)]  # lists may be joined from several sweeps
    cache = Cache(cache_dir, columns=METRIC_COLUMNS)
    rows: dict[int, dict] = {}
    todo = []
    for point in points:
        row = cache.get(point.cache_key())
        if row is None:
            todo.append(point)
        else:
            rows[point.index] = with_settings(point, row)
    disable = not sys.stderr.isatty() if progress is None else not progress
    bar = tqdm(total=len(points), initial=len(rows), desc="npusim dse", unit="pt", disable=disable,
               file=sys.stderr, dynamic_ncols=True)

    def done(point: Point, row: dict) -> None:
        cache.put(point.cache_key(), row, cache_about(point))
        rows[point.index] = with_settings(point, row)
        bar.set_postfix_str(f"{point.trace} {point.pipeline}", refresh=False)
        bar.update(1)

    try:
        if backend == "dask" and todo:  # nothing to compute: do not start a cluster
            _run_dask(todo, jobs, scheduler, done, processes=dask_processes)
        elif backend == "local":
            _run_local(todo, jobs, done)
    finally:
        bar.close()
    ordered = [rows[p.index] for p in points]
    return SweepResult(rows=ordered, computed=len(todo), cached=len(points) - len(todo),
                       seconds=time.perf_counter() - start, points=points)


# ---------------------------------------------------------------- output


def without_wall_clock(rows: list[dict]) -> list[dict]:
    """Rows without their wall-clock columns: what must be identical between two runs."""
    return [{k: v for k, v in row.items() if k not in WALL_CLOCK_COLUMNS} for row in rows]


def write_results(result: SweepResult, out: str | Path, sweeps: list[Sweep], *,
                  timings: bool = False) -> tuple[Path, Path]:
    """``out`` with .csv and .json suffixes; JSON holds the sweep description and the rows.

    Wall-clock columns (``solve_seconds``) are written only with ``timings``, so the files of
    two runs (any ``--jobs``, any backend) are byte-identical."""
    out = Path(out)
    csv_path, json_path = out.with_suffix(".csv"), out.with_suffix(".json")
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    rows = result.rows if timings else without_wall_clock(result.rows)
    columns = [c for c in METRIC_COLUMNS if timings or c not in WALL_CLOCK_COLUMNS]
    atomic_write_text(csv_path, rows_to_csv(rows))
    atomic_write_text(json_path, json.dumps({
        "format": "npusim-dse/1", "npusim": npusim.__version__,
        "sweeps": {s.key: list(s.values) for s in sweeps},
        "columns": [*columns, *(s.key for s in sweeps)],
        "rows": rows,
    }, indent=1) + "\n")
    return csv_path, json_path


def read_results(path: str | Path) -> list[dict]:
    """Rows of a DSE result (.json as written above, or .csv), e.g. to plot them later."""
    path = Path(path)
    try:
        if path.suffix == ".json":
            return json.loads(path.read_text())["rows"]
        with path.open(newline="") as f:
            return [{k: _csv_value(v) for k, v in row.items()} for row in csv.DictReader(f)]
    except (OSError, ValueError, KeyError) as exc:
        raise DseError(f"{path}: cannot read DSE results: {exc}") from None


def _csv_value(text: str):
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def summary(result: SweepResult) -> str:
    """A short text table: one line per point (trace, settings, planner, status, key metrics)."""
    lines = []
    for point, row in zip(result.points, result.rows):
        settings = " ".join(f"{k}={_show(k, v)}" for k, v in point.settings)
        if row["status"] == "ok":
            metrics = (f"{row['cycles']:>14,.0f} cyc {row['energy_pj'] / 1e6:>10.3f} uJ "
                       f"{row['offchip_bytes']:>13,} B off-chip")
        else:
            metrics = "infeasible: " + row["reason"][:90]
        lines.append(f"{point.trace_name:<14} {settings:<28} {point.pipeline:<22} {metrics}")
    lines.append(f"{len(result.rows)} points ({result.cached} cached, {result.computed} computed, "
                 f"{result.infeasible} infeasible) in {result.seconds:.1f} s")
    return "\n".join(lines)


def _show(key: str, value) -> str:
    if isinstance(value, int) and (key == BUDGET_KEY or knob_quantities().get(key) == "size"):
        return units.format_bytes(value).replace(" ", "")
    return str(value)
