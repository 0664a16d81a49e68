"""Golden-traffic regression: expected numbers per trace x hardware x pipeline x budget.

A golden file ``traces/expected/TRACE.HARDWARE.yaml`` holds, for each case (a pipeline and
a budget), what the simulation must report: off-chip read bytes (compulsory, retrieve) and
write bytes (writeback, spill), the on- and off-chip peaks, the budget in bytes, latency in
cycles and total energy, plus the plan status. Tolerances are per file, overridable per
case: bytes are exact by default, cycles and energy equal to a relative 1e-9. A provenance
block records who made the numbers: npusim version, git commit, date, the trace's hash, the
full hardware description and the planner options. Wall-clock values are never stored.

``check`` re-simulates every case and reports each number that moved as a row of a diff
table; ``update`` rewrites the files from fresh runs (keeping hand-set tolerances).
``tests/test_goldens.py`` turns every case into a pytest case, so a changed number fails CI.

The default matrix is, over every trace and ``GOLDEN_HARDWARE``, each group of
``GOLDEN_MATRIX``: its pipelines × its budgets. Untiled pipelines run at M_R and M_P (the edge
config's own scratchpad is below most traces' M_R); the tiling pipeline runs at the config's
own scratchpad size, with and without the fusion stage and with each off-chip arena planner; whole-schedule offset assignments (one
and several streams) and the exact schedulers at 1 GiB, where their on-chip peak is the
figure that matters; COSMA at M_R. Exact planners get a short deterministic time limit on one worker
(recorded as the case's options), so their numbers repeat on any machine; on the largest
traces their cases are marked slow (``tests/test_goldens.py``). Adding a planner is adding it
to a group and running ``npusim regress --update``.
"""

from __future__ import annotations

import datetime
import fnmatch
import functools
import hashlib
import json
import math
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

import npusim
from npusim.dse import trace_digest
from npusim.util.atomic_io import atomic_write_text
from npusim.errors import NOT_THE_POINTS, NpusimError
from npusim.hw.loader import hardware_to_dict
from npusim.util.resources import list_resources, search_dirs
from npusim.registry import OffchipResume
from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget, simulate_plan

FORMAT = "npusim-golden/1"
GOLDEN_HARDWARE = ("edge-npu",)
#: "scratchpad" means the hardware's own scratchpad size (no --budget).
SCRATCHPAD_BUDGET = "scratchpad"
GOLDEN_MATRIX = (
    (("default+arena+belady", "default+arena+lru", "rpo+arena+belady", "rpo+arena+lru",
      "greedy-mem+arena+belady"), ("MR", "MP")),
    (("tile+default+arena+belady", "fuse+tile+default+arena+belady"), (SCRATCHPAD_BUDGET,)),
    # Whole-schedule offset assignments (no eviction): at a budget that holds any of them,
    # what they decide is the on-chip peak.
    (("default+naive", "default+tflite-arena", "default+tflm-greedy", "default+so-size", "default+so-breadth",
      "default+so-size-improved", "default+mindspore-so:size,best-fit", "default+mindspore-mo:size,first-fit",
      "default+mindspore-mo:breadth,best-fit", "default+streams-rr+mindspore-mo:size,best-fit",
      "default+streams-category+mindspore-so:size,first-fit"), ("1GiB",)),
    # Off-chip arenas of the tiled plan: what they decide is the off-chip peak.
    (("tile+default+arena+belady+taa", "tile+default+arena+belady+offchip-so",
      "tile+default+arena+belady+offchip-naive", "tile+default+arena+belady+offchip-offsets"), (SCRATCHPAD_BUDGET,)),
    (("default+arena+greedy-ilp",), ("MR", "MP")),
    # Exact planners run on CP-SAT's deterministic time (planners.schedule.solver), so a short
    # limit gives reproducible numbers; the case records it. One worker: two interleaved ones
    # took twice the CPU for the same limit (and two cases at once oversubscribe a 2-core CI).
    (("zhong+tflite-arena", "olla-order+tflite-arena", "olla", "default+exact-offsets"), ("1GiB",),
     {"time_limit": 2, "workers": 1}),
    # cosma refuses a model above max_cells; the golden asks for its divide-and-conquer fallback.
    (("cosma",), ("MR",), {"time_limit": 2, "workers": 1, "fallback": "dnc"}),
    (("cosma-fs", "cosma-mpmf", "cosma-dnc"), ("MR",), {"time_limit": 2, "workers": 1}),
)
GOLDEN_PIPELINES = tuple(p for group in GOLDEN_MATRIX for p in group[0])
GOLDEN_BUDGETS = tuple(dict.fromkeys(b for group in GOLDEN_MATRIX for b in group[1]))
#: planner options of a golden pipeline (the third element of its group, if any)
GOLDEN_OPTIONS = {p: dict(group[2]) for group in GOLDEN_MATRIX if len(group) > 2 for p in group[0]}
DEFAULT_TOLERANCES = {"bytes": {"abs": 0}, "cycles": {"rel": 1e-9}, "energy_pj": {"rel": 1e-9}}


class RegressError(NpusimError):
    """A golden file is malformed or missing."""


@dataclass(frozen=True)
class Case:
    trace: str
    hardware: str
    pipeline: str
    budget: str
    expected: dict
    tolerances: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    file: Path | None = None

    @property
    def id(self) -> str:
        return f"{self.trace}/{self.hardware}/{self.pipeline}/{self.budget}"


@dataclass(frozen=True)
class Mismatch:
    case: str
    metric: str
    expected: object
    actual: object
    allowed: str


# ---------------------------------------------------------------- measuring


@functools.lru_cache(maxsize=2)
def _graph(trace: str):
    return load_graph(trace)


@functools.lru_cache(maxsize=4)
def _hardware(name: str):
    return load_hw(name)


def measure(trace: str, hardware: str, pipeline: str, budget: str, options: dict | None = None,
            resume: OffchipResume | None = None) -> dict:
    """The golden-shaped numbers of one fresh run (``status: infeasible`` with the reason);
    ``resume``: the last plan kept, for a pipeline that only adds off-chip stages to it."""
    graph, hw = _graph(trace), _hardware(hardware)
    try:
        # Goldens cover the papers' budgets (M_R, M_P), which may exceed the scratchpad: the
        # planners' traffic at those budgets is what they pin down.
        capacity = resolve_budget(None if budget == SCRATCHPAD_BUDGET else budget, graph, hw, allow_oversize=True,
                                  pipeline=pipeline, options=options)
        # the wall-clock guard off: an exact planner's numbers must not depend on the machine's
        # load (planners.schedule.solver); not recorded, it plans nothing
        plan = plan_graph(graph, hw, pipeline, capacity, options={**(options or {}), "wall_guard": 0}, resume=resume)
        report = simulate_plan(plan, hw, validated=True)  # plan_graph validated it
    except NOT_THE_POINTS:
        raise
    except NpusimError as exc:
        return {"status": "infeasible", "reason": str(exc)}
    ob = report.offchip_bytes
    return {
        "status": "ok",
        "plan_status": report.plan_status,
        "budget_bytes": plan.capacity,
        "offchip_read": {"compulsory": ob["compulsory"], "retrieve": ob["retrieve"]},
        "offchip_write": {"writeback": ob["writeback"], "spill": ob["spill"]},
        "offchip_bus_bytes": report.offchip_bus_bytes,
        "onchip_peak_bytes": report.onchip_peak_bytes,
        "offchip_peak_bytes": report.offchip_peak_bytes,
        "cycles": report.cycles,
        "energy_pj": report.total_energy_pj,
    }


# ---------------------------------------------------------------- comparing


def _flatten(values: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def tolerance_class(metric: str) -> str | None:
    """Which tolerance applies: 'bytes', 'cycles', 'energy_pj', or None (exact text)."""
    if metric in ("cycles", "energy_pj"):
        return metric
    if metric.startswith(("offchip_read.", "offchip_write.")) or metric.endswith("_bytes"):
        return "bytes"
    return None


def within(expected: object, actual: object, tolerance: dict | None) -> bool:
    if tolerance is None or not isinstance(expected, (int, float)) or not isinstance(actual, (int, float)):
        return expected == actual
    allowed = max(float(tolerance.get("abs", 0)), float(tolerance.get("rel", 0)) * abs(float(expected)))
    return math.isclose(actual, expected, rel_tol=0, abs_tol=allowed) or actual == expected


def _describe(tolerance: dict | None) -> str:
    if not tolerance:
        return "exact"
    return ", ".join(f"{k} {v:g}" for k, v in tolerance.items())


def compare(case: Case, actual: dict) -> list[Mismatch]:
    """Every expected number that the fresh run does not reproduce within its tolerance."""
    tolerances = {**DEFAULT_TOLERANCES, **case.tolerances}
    expected = _flatten(case.expected)
    got = _flatten(actual)
    if "reason" in expected or "reason" in got:  # an infeasible case: its status is the number
        expected.pop("reason", None)
        if got.get("status") != expected.get("status"):
            return [Mismatch(case.id, "status", expected.get("status"), f"{got.get('status')}: "
                             f"{actual.get('reason', '')}"[:200], "exact")]
        return []
    found = []
    for metric in sorted(set(expected) | set(got)):
        tol = tolerances.get(tolerance_class(metric)) if tolerance_class(metric) else None
        exp, act = expected.get(metric, "<missing>"), got.get(metric, "<missing>")
        if not within(exp, act, tol):
            found.append(Mismatch(case.id, metric, exp, act, _describe(tol)))
    return found


def check_case(case: Case, resume: OffchipResume | None = None) -> list[Mismatch]:
    return compare(case, measure(case.trace, case.hardware, case.pipeline, case.budget, case.options, resume))


def _planning_order(cases: list[Case]) -> list[int]:
    """The cases' indices with each pipeline just before those that add off-chip stages to it
    (the same trace, hardware, budget and options): they plan it once (``OffchipResume``)."""
    return sorted(range(len(cases)), key=lambda i: (cases[i].trace, cases[i].hardware, cases[i].budget,
                                                    repr(sorted((cases[i].options or {}).items())),
                                                    cases[i].pipeline))


def _adds_stages_to(case: Case, base: Case) -> bool:
    return ((case.trace, case.hardware, case.budget, case.options) == (base.trace, base.hardware, base.budget, base.options)
            and case.pipeline.startswith(base.pipeline + "+"))


# ---------------------------------------------------------------- golden files


def default_golden_dir() -> Path:
    """``traces/expected`` next to the traces npusim finds first."""
    for folder in search_dirs("traces"):
        if (folder / "expected").is_dir():
            return folder / "expected"
    folders = search_dirs("traces")
    return (folders[0] if folders else Path("traces")) / "expected"


def golden_path(folder: Path, trace: str, hardware: str) -> Path:
    return Path(folder) / f"{trace}.{hardware}.yaml"


def load_golden_file(path: Path) -> list[Case]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise RegressError(f"{path}: cannot read golden file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise RegressError(f"{path}: cannot read golden file: {where}invalid YAML: "
                           f"{getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RegressError(f"{path}: format = {data.get('format') if isinstance(data, dict) else data!r}: "
                           f"expected a mapping with format: {FORMAT}")
    for key in ("trace", "hardware", "cases"):
        if key not in data:
            raise RegressError(f"{path}: missing key {key!r}")
    file_tol = data.get("tolerances") or {}
    cases = []
    for n, entry in enumerate(data["cases"]):
        if not isinstance(entry, dict) or not {"planner", "budget", "expected"} <= set(entry):
            raise RegressError(f"{path}: cases[{n}]: expected a mapping with planner, budget and expected")
        cases.append(Case(trace=data["trace"], hardware=data["hardware"], pipeline=entry["planner"],
                          budget=str(entry["budget"]), expected=entry["expected"],
                          tolerances={**file_tol, **(entry.get("tolerances") or {})},
                          options=entry.get("options") or {}, file=Path(path)))
    return cases


def load_goldens(folder: str | Path | None = None, only: str | None = None) -> list[Case]:
    """Every case of every golden file in ``folder`` (sorted), optionally filtered by ``only``."""
    folder = Path(folder) if folder is not None else default_golden_dir()
    cases = [c for path in sorted(folder.glob("*.yaml")) for c in load_golden_file(path)]
    return [c for c in cases if matches(c.id, only)]


def matches(case_id: str, pattern: str | None) -> bool:
    """Glob on the case id (``resnet50/*/rpo+*/MR``); a pattern without wildcards is a substring."""
    if not pattern:
        return True
    if not any(ch in pattern for ch in "*?["):
        return pattern in case_id
    return fnmatch.fnmatchcase(case_id, pattern)


def default_matrix() -> list[tuple[str, str, str, str]]:
    return [(t, h, p, b) for t in list_resources("traces") for h in GOLDEN_HARDWARE
            for group in GOLDEN_MATRIX for p in group[0] for b in group[1]]


def provenance(trace: str, hardware: str, options: dict) -> dict:
    commit, dirty = _git_state()
    hw = hardware_to_dict(_hardware(hardware))
    return {
        "npusim_version": npusim.__version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "date": datetime.date.today().isoformat(),
        "trace_sha256": trace_digest(trace),
        "hardware_sha256": hashlib.sha256(json.dumps(hw, sort_keys=True).encode()).hexdigest(),
        "hardware": hw,
        "planner_options": options,
    }


def _git_state() -> tuple[str, bool | None]:
    repo = Path(npusim.__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown", None
    return commit, bool(status.strip())


def update_goldens(folder: str | Path | None = None, only: str | None = None) -> tuple[int, list[Path]]:
    """Re-measure the matching cases (default matrix plus cases already on file) and rewrite
    their files, keeping hand-set tolerances and the other cases. Returns (cases, files)."""
    folder = Path(folder) if folder is not None else default_golden_dir()
    folder.mkdir(parents=True, exist_ok=True)
    existing = {c.id: c for c in load_goldens(folder)}
    wanted = {f"{t}/{h}/{p}/{b}": (t, h, p, b) for t, h, p, b in default_matrix()}
    wanted.update({cid: (c.trace, c.hardware, c.pipeline, c.budget) for cid, c in existing.items()})
    files: dict[tuple[str, str], list[str]] = {}
    for cid, (t, h, _, _) in sorted(wanted.items()):
        files.setdefault((t, h), []).append(cid)
    updated, written = 0, []
    for (trace, hardware), ids in sorted(files.items()):
        if not any(matches(cid, only) for cid in ids):
            continue
        path = golden_path(folder, trace, hardware)
        file_tol = _file_tolerances(path)
        entries = []
        for cid in _case_order(ids, wanted):
            old = existing.get(cid)
            _, _, pipeline, budget = wanted[cid]
            options = old.options if old else GOLDEN_OPTIONS.get(pipeline, {})
            expected = old.expected if old and not matches(cid, only) else measure(trace, hardware, pipeline, budget, options)
            updated += old is None or matches(cid, only)
            entry = {"planner": pipeline, "budget": budget}
            if options:
                entry["options"] = options
            own_tol = {k: v for k, v in (old.tolerances if old else {}).items() if file_tol.get(k) != v}
            if own_tol:
                entry["tolerances"] = own_tol
            entry["expected"] = expected
            entries.append(entry)
        doc = {"format": FORMAT, "trace": trace, "hardware": hardware,
               "tolerances": file_tol, "provenance": provenance(trace, hardware, {}), "cases": entries}
        header = (f"# Golden traffic of {trace} on {hardware}; regenerate with:\n"
                  f"#   npusim regress --update --only '{trace}/{hardware}/*'\n")
        atomic_write_text(path, header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100))
        written.append(path)
    return updated, written


def _case_order(ids: list[str], wanted: dict) -> list[str]:
    """Cases of a file by pipeline order of GOLDEN_PIPELINES, then budget order."""
    def key(cid):
        _, _, pipeline, budget = wanted[cid]
        p = GOLDEN_PIPELINES.index(pipeline) if pipeline in GOLDEN_PIPELINES else len(GOLDEN_PIPELINES)
        b = GOLDEN_BUDGETS.index(budget) if budget in GOLDEN_BUDGETS else len(GOLDEN_BUDGETS)
        return (p, pipeline, b, budget)
    return sorted(ids, key=key)


def _file_tolerances(path: Path) -> dict:
    if path.is_file():
        data = yaml.safe_load(path.read_text()) or {}
        if isinstance(data, dict) and isinstance(data.get("tolerances"), dict):
            return data["tolerances"]
    return dict(DEFAULT_TOLERANCES)


# ---------------------------------------------------------------- report


def format_diff(mismatches: list[Mismatch]) -> str:
    """The diff table: one line per number that moved."""
    header = ("case", "metric", "expected", "actual", "delta", "allowed")
    rows = [header]
    for m in mismatches:
        delta = ""
        if isinstance(m.expected, (int, float)) and isinstance(m.actual, (int, float)):
            diff = m.actual - m.expected
            delta = f"{diff:+,}" if isinstance(diff, int) else f"{diff:+.6g}"
            if m.expected:
                delta += f" ({diff / m.expected:+.2e})"
        rows.append((m.case, m.metric, _cell(m.expected), _cell(m.actual), delta, m.allowed))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def check(folder: str | Path | None = None, only: str | None = None, progress=None) -> tuple[int, list[Mismatch]]:
    """(number of cases checked, every mismatch)."""
    where = Path(folder or default_golden_dir())
    if not where.is_dir():
        raise RegressError(f"--dir {where}: no such folder of golden files")
    cases = load_goldens(folder, only)
    if not cases:
        if only:  # the folder has cases, just none by that name
            raise RegressError(f"no golden case in {where} matches --only {only!r}; the case ids look like "
                               "TRACE/HW/PIPELINE/BUDGET, e.g. 'resnet50/edge-npu/default+arena+belady/MR'")
        raise RegressError(f"no golden case in {where}; create them with: npusim regress --update")
    found: list[list[Mismatch]] = [[] for _ in cases]
    resume, base = OffchipResume(), None
    for i in _planning_order(cases):
        case = cases[i]
        if base is None or not _adds_stages_to(case, base):
            resume.clear()  # (what it kept serves no case left: freed now)
            base = case
        found[i] = check_case(case, resume)
        if progress is not None:
            progress(case)
    return len(cases), [m for ms in found for m in ms]
