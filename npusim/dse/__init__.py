"""Design-space exploration: simulate every combination of swept hardware knobs, budgets,
planner pipelines and traces, and collect one row of metrics per point.

A sweep (parsed in ``npusim.dse.sweep``) is ``KEY=SPEC``: ``KEY`` is any dotted hardware key (``scratchpad.size``,
``dram.bandwidth``, ``cores.pe_rows``...) or ``budget`` (the scratchpad budget planned for,
as ``--budget``: sizes or MR/MH/MP); ``SPEC`` is

- ``A..B:xF``  geometric: A, A*F, A*F^2, ... up to B (e.g. ``64KiB..8MiB:x2``);
- ``A..B:+S``  linear: A, A+S, A+2S, ... up to B (e.g. ``8..32:+8``);
- ``V1,V2,..`` a list.

Values are read with the key's unit (``npusim.util.units``) and stored in base units, so CSV
columns are numbers. Points are the cartesian product of the sweeps, times pipelines, times
traces. Every point is keyed by a content hash of the trace file, the resolved hardware, the
pipeline, the budget and options, the npusim version and a fingerprint of the planner and
simulator code (``npusim.dse.fingerprint``); finished points are cached as checksummed JSON
(``npusim.dse.cache``, ``.npusim-cache/`` by default), so an interrupted sweep resumes
where it stopped and a repeated sweep is free. A point that cannot be planned (budget below M_R, a config whose
alignment exceeds its scratchpad...) is recorded as ``infeasible`` with the error message.

Backends (``npusim.dse.backends``): ``local`` (in-process for ``jobs=1``, else a process pool)
and ``dask`` (a ``dask.distributed`` cluster; a LocalCluster when no scheduler address is
given). Workers only compute rows; the caller's process reads and writes the cache and orders
the rows by point, so every backend and job count gives the same rows (wall-clock columns
aside). Results are written, read and summarised by ``npusim.dse.results``.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from tqdm import tqdm

import npusim
from npusim.dse.fingerprint import code_fingerprint
from npusim.util.env_knobs import memory_limit, progress_seconds
from npusim.util.units import format_bytes
from npusim.registry import check_pipelines
from npusim.sim.metrics import METRIC_COLUMNS, infeasible_row, metrics_row
from npusim.errors import NOT_THE_POINTS, NpusimError
from npusim.hw.config import Hardware
from npusim.hw.loader import hardware_to_dict
from npusim.util.resources import find_resource
from npusim.dse.cache import CACHE_FORMAT, Cache  # noqa: F401 (CACHE_FORMAT: part of the API)
from npusim.workflow import is_generated, load_graph, load_hw, plan_graph, resolve_budget, simulate_plan

from npusim.dse.backends import run_dask, run_local
from npusim.dse.results import (SweepResult, read_results, summary, without_wall_clock,  # noqa: F401
                                write_results)  # re-exported: npusim.dse's results API
from npusim.dse.sweep import (BUDGET_KEY, LLM_KEYS, MAX_POINTS_PER_SWEEP, DseError, Sweep,  # noqa: F401
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
    graph (``llm:...``, ``tpuv1:...``) of the name itself, the generator's code being in the cache
    key's code fingerprint."""
    if is_generated(source):
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
    check_pipelines(pipelines, options)  # and so is an unknown planner or option
    if budget is not None and BUDGET_KEY in keys:  # (each point's would silently replace it)
        raise DseError(f"--budget {budget}: the budget is swept (--sweep {BUDGET_KEY}=...); give one of them")
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
        capacity = resolve_budget(point.budget, graph, point.hw, allow_oversize=point.allow_oversize,
                                  pipeline=point.pipeline, options=dict(point.options))
        plan = plan_graph(graph, point.hw, point.pipeline, capacity, options=dict(point.options))
        report = simulate_plan(plan, point.hw, validated=True)  # plan_graph validated it
    except NOT_THE_POINTS:
        raise
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


#: The most workers a sweep starts, and the memory one takes (a Python process with NumPy,
#: Numba, OR-Tools and SimPy loaded, planning a mid-size trace), rounded up.
MAX_JOBS = 1024
WORKER_BYTES = 256 << 20


def check_jobs(jobs: int, workers: int | None = None) -> None:
    """``--jobs`` within 1..MAX_JOBS, and the ``workers`` a sweep would start (at most one per
    point) within what the memory limit holds (one-line errors)."""
    if not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise DseError(f"--jobs {jobs}: expected 1 to {MAX_JOBS}")
    limit = memory_limit()
    if workers is not None and limit is not None and workers > 1 and workers * WORKER_BYTES > limit:
        raise DseError(f"--jobs {jobs}: {workers} workers need about {format_bytes(workers * WORKER_BYTES)}, more than the "
                       f"{format_bytes(limit)} available (NPUSIM_MEMORY_LIMIT, or the free memory); use --jobs "
                       f"{max(1, limit // WORKER_BYTES)} or fewer")


def run_sweep(points: list[Point], *, jobs: int = 1, backend: str = "local", scheduler: str | None = None,
              cache_dir: str | Path | None = DEFAULT_CACHE_DIR, progress: bool | None = None,
              dask_processes: bool = True) -> SweepResult:
    """Evaluate every point (cached ones are read back), rows in point order."""
    if backend not in BACKENDS:
        raise DseError(f"--backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    check_jobs(jobs)
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
    workers = min(jobs, max(len(todo), 1))  # never more workers than points to compute
    check_jobs(jobs, workers)
    disable = not sys.stderr.isatty() if progress is None else not progress
    bar = tqdm(total=len(points), initial=len(rows), desc="npusim dse", unit="pt", disable=disable,
               file=sys.stderr, dynamic_ncols=True)

    quiet_lines = disable and progress is None  # off a terminal: a line now and then, as other commands do
    every, last = progress_seconds(), [time.perf_counter()]

    def done(point: Point, row: dict) -> None:
        cache.put(point.cache_key(), row, cache_about(point))
        rows[point.index] = with_settings(point, row)
        bar.set_postfix_str(f"{point.trace} {point.pipeline}", refresh=False)
        bar.update(1)
        now = time.perf_counter()
        if quiet_lines and now - last[0] >= every:
            last[0] = now
            finished, spent = len(rows), now - start
            left = spent / max(finished - (len(points) - len(todo)), 1) * (len(points) - finished)
            print(f"npusim dse: point {finished} of {len(points)}, {spent:.0f} s, about {left:.0f} s left",
                  file=sys.stderr, flush=True)

    try:
        if backend == "dask" and todo:  # nothing to compute: do not start a cluster
            run_dask(todo, workers, scheduler, evaluate_point, done, processes=dask_processes)
        elif backend == "local":
            run_local(todo, workers, evaluate_point, done)
    finally:
        bar.close()
    ordered = [rows[p.index] for p in points]
    return SweepResult(rows=ordered, computed=len(todo), cached=len(points) - len(todo),
                       seconds=time.perf_counter() - start, points=points)


