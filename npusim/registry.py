"""The planner registry and pipelines.

Planners are found only through the entry-point group ``npusim.planners``: each entry point
is a function ``register(registry)`` that calls ``registry.add(planner)``, or
``registry.add_lazy(names, make)`` to register planners by name and import them when a
pipeline first names one. The built-in ``planners`` package registers itself this way
(``planners.BUILT_IN``), and so can a third-party package.

A planner is any object with ``name``, ``stage`` (one of ``STAGES``), ``description`` and
``run(ctx: PlanningContext) -> None``, which fills its part of the context. It declares the
options it reads (``options``: ``npusim.planner_options.Option`` values) and the context
fields it reads and writes (``reads``, ``writes``: field names of ``PlanningContext``); the
core checks options against those declarations and documents them (``npusim list
--planner``), and ``tests/test_planner_contract.py`` holds every built-in planner to them. A pipeline is
named by joining planner names with ``+`` (``rpo+arena+belady``); stages run in the order of
``STAGES`` whatever the order of the names.
"""

from __future__ import annotations

import numbers
import time
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from collections.abc import Callable, Mapping
from typing import Protocol

from npusim.util import wall_guard
from npusim import planner_options
from npusim.errors import InternalError, NpusimError, PlanError, RegistryError, did_you_mean
from npusim.graph.analysis import check_order
from npusim.graph.model import Graph
from npusim.hw.config import Hardware
from npusim.plan.bound import BoundPlan, bound_to
from npusim.plan.model import Plan, PlanMeta, Residency, Transfer
from npusim.plan.records import ResidencyTable, TransferTable, sorted_records
from npusim.util.progress import reporting, silent

#: fusion -> tiling -> schedule -> stream assignment -> spill policy -> on-chip offsets (with eviction)
#: -> off-chip offsets; joint planners decide the order, spills and offsets at once, so they
#: take the place of the stages in ``JOINT_DECIDES`` and run before the off-chip stage, which
#: lays out the DRAM buffers of their transfers. A joint planner may name the stages it
#: decides in a ``decides`` attribute (``cosma-fs`` takes the pipeline's schedule).
STAGES = ("fusion", "tiling", "schedule", "streams", "spill", "alloc", "joint", "offchip")
JOINT_DECIDES = ("schedule", "streams", "spill", "alloc")
ENTRY_POINT_GROUP = "npusim.planners"

#: Named pipelines: a name here stands for the pipeline it maps to, anywhere a planner name
#: may appear (``--planner scheme-mpmf-greedy``). The four comparison schemes of the COSMA
#: paper (§V-A2): default or minimum-peak (MPMF, ``zhong``) order x Belady or greedy
#: replacement, each with the TFLite-style ``arena`` allocator.
ALIASES = {
    "scheme-default-belady": "default+arena+belady",
    "scheme-default-greedy": "default+arena+greedy-ilp",
    "scheme-mpmf-belady": "zhong+arena+belady",
    "scheme-mpmf-greedy": "zhong+arena+greedy-ilp",
}


class Planner(Protocol):
    name: str
    stage: str
    description: str
    options: tuple  # npusim.planner_options.Option, one per option the planner reads
    reads: tuple  # PlanningContext fields the planner reads
    writes: tuple  # PlanningContext fields the planner fills in

    def run(self, ctx: "PlanningContext") -> None: ...


@dataclass
class PlanningContext:
    """What the stages of a pipeline read and fill in, in turn."""

    graph: Graph
    hw: Hardware
    capacity: int
    alignment: int
    options: Mapping = field(default_factory=dict)  # this stage's declared options (planner_options.StageOptions)
    fusion: dict = field(default_factory=dict)  # GEMM op name -> fused element-wise ops; graph is then fused
    tiling: dict = field(default_factory=dict)  # op name -> tile spec; graph is then the tiled graph
    order: list[int] | None = None
    streams: list[int] | None = None
    spill_policy: object | None = None
    residencies: list[Residency] | None = None
    transfers: list[Transfer] | None = None
    dram: dict = field(default_factory=dict)  # DRAM buffer name -> offset (npusim.plan.dram)
    untiled: Graph | None = None  # the graph as given, once ``graph`` is its tiled expansion
    status: str = "heuristic"
    objective: float | None = None
    bound: float | None = None
    scope: str = ""  # which problem status and bound refer to, when not the whole plan's
    notes: list[str] = field(default_factory=list)  # what a stage traded, one line each (PlanMeta.notes)
    # How many ops ahead the allocator reserves loads when the user gives no prefetch_depth:
    # the tiling stage sets it (tiles are sized to be double-buffered); None: the allocator's own.
    prefetch_depth: int | None = None
    stats: dict = field(default_factory=dict)  # what a stage measured of its search (PlanMeta.stats)
    # ``progress(what, done, total, detail)`` for long stages (npusim.util.progress); silent by default.
    progress: object = silent


class Registry:
    def __init__(self) -> None:
        self._planners: dict[str, Planner] = {}
        # name -> the function that makes its group of planners, for planners registered by
        # name only (``add_lazy``) and not asked for yet
        self._pending: dict[str, Callable[[], list]] = {}

    def add(self, planner: Planner) -> None:
        name = getattr(planner, "name", None)
        if not isinstance(name, str) or not name or "+" in name or name != name.strip() or " " in name:
            raise RegistryError(f"planner name {name!r}: expected a non-empty name without '+' or spaces "
                                "(a pipeline joins names with '+')")
        if not isinstance(getattr(planner, "description", None), str):
            raise RegistryError(f"planner {name!r} has no description (a str: npusim list shows it)")
        if planner.stage not in STAGES:
            raise RegistryError(f"planner {planner.name!r} has stage {planner.stage!r}, expected one of {STAGES}")
        if planner.name in self._planners or planner.name in self._pending:
            raise RegistryError(f"two planners are registered as {planner.name!r}")
        self._planners[planner.name] = planner

    def add_lazy(self, names, make: Callable[[], list]) -> None:
        """Register the planners ``names`` by name; ``make()`` returns them (a list) when one of
        them is first asked for. A pipeline then imports only the planners it names: the
        built-in ones load their solvers (OR-Tools models, METIS, Numba kernels' modules) in
        about 60 ms that a run of the default pipeline does not need."""
        for name in names:
            if name in self._planners or name in self._pending:
                raise RegistryError(f"two planners are registered as {name!r}")
            self._pending[name] = make

    def _make(self, name: str) -> None:
        """Make the group of pending planner ``name`` and register each of them: the group must
        make exactly the planners it was registered as."""
        make = self._pending[name]
        declared = sorted(n for n, m in self._pending.items() if m is make)
        for n in declared:
            del self._pending[n]
        made = list(make())
        if sorted(p.name for p in made) != declared:
            raise RegistryError(f"planners {declared} were registered by name, but their module made "
                                f"{sorted(p.name for p in made)}")
        for planner in made:
            self.add(planner)

    def get(self, name: str) -> Planner:
        if name in self._pending:
            self._make(name)
        if name not in self._planners:
            raise RegistryError(f"unknown planner {name!r}{did_you_mean(name, self.names())}; "
                                f"available: {', '.join(self.names())}")
        return self._planners[name]

    def names(self) -> list[str]:
        return sorted([*self._planners, *self._pending])

    def option_index(self) -> dict[str, list[str]]:
        """Option name -> the planners that declare it (every registered planner)."""
        index: dict[str, list[str]] = {}
        for planner in self.planners():
            for opt in planner_options.declared(planner):
                index.setdefault(opt.name, []).append(planner.name)
        return index

    def planners(self) -> list[Planner]:
        return [self.get(n) for n in self.names()]

    def pipeline(self, spec: str) -> list[Planner]:
        """Parse ``a+b+c`` into planners sorted by stage; at most one planner per stage."""
        names = [part.strip() for part in spec.split("+")]
        names = [n for name in names for n in (ALIASES[name].split("+") if name in ALIASES else [name])]
        if not spec.strip() or any(not n for n in names):
            raise RegistryError(f"pipeline {spec!r}: expected planner names joined by '+'")
        stages = [self.get(n) for n in names]
        seen: dict[str, str] = {}
        for p in stages:
            if p.stage in seen:
                raise RegistryError(f"pipeline {spec!r}: {seen[p.stage]!r} and {p.name!r} are both {p.stage} stages")
            seen[p.stage] = p.name
        spill, alloc = (next((p for p in stages if p.stage == stage), None) for stage in ("spill", "alloc"))
        if spill is not None and alloc is not None and not getattr(alloc, "evicts", False):
            raise RegistryError(
                f"pipeline {spec!r}: {spill.name!r} chooses what an allocator evicts, but {alloc.name!r} keeps every "
                f"tensor for its whole lifetime and never evicts, so it would change nothing; drop {spill.name!r}, "
                f"or use the arena allocator with it ('arena+{spill.name}', one stream)")
        joint = next((p for p in stages if p.stage == "joint"), None)
        if joint is not None:
            # a stage the joint planner decides would be silently overwritten (or, before it,
            # leave it nothing to work on): refuse the pipeline instead
            decides = getattr(joint, "decides", JOINT_DECIDES)
            for stage in decides:
                if stage in seen:
                    raise RegistryError(
                        f"pipeline {spec!r}: the joint planner {joint.name!r} decides the {', '.join(decides)} "
                        f"stages itself, so it cannot be combined with the {stage} stage {seen[stage]!r}; "
                        f"drop {seen[stage]!r} (fusion and tiling stages before it and an off-chip stage after it "
                        "are fine)")
        return sorted(stages, key=lambda p: STAGES.index(p.stage))


_default_registry: Registry | None = None


def default_registry() -> Registry:
    """The registry filled from every installed ``npusim.planners`` entry point (built once)."""
    global _default_registry
    if _default_registry is None:
        registry = Registry()
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            try:
                ep.load()(registry)
            except RegistryError:
                raise
            except Exception as exc:  # a broken plugin must not take npusim down silently
                raise RegistryError(f"planner plugin {ep.name!r} ({ep.value}) failed to register: {exc}") from exc
        if not registry.names():
            raise RegistryError(
                f"no planners registered under entry point group {ENTRY_POINT_GROUP!r}: is npusim installed (pip install -e .)?"
            )
        _default_registry = registry
    return _default_registry


def _require_order(planner: Planner, ctx: PlanningContext) -> None:
    """The order ``planner`` set is a topological permutation of the graph's ops, else a planner
    bug named as one: asked when a later stage fails, which on an invalid order (the arena's
    IndexError, KeyError or "DRAM has no copy") named neither the planner nor the problem.
    A valid order returns, and the later stage's error stands."""
    try:
        order = list(ctx.order)
        odd = next((x for x in order if not isinstance(x, numbers.Integral) or isinstance(x, bool)), None)
        if odd is not None:
            raise PlanError(f"it holds {odd!r}, not an op index")
        check_order(ctx.graph, [int(o) for o in order])
    except (PlanError, TypeError) as exc:
        raise InternalError(f"planner {planner.name!r} ({planner.stage} stage) set an invalid order: {exc}") from None


def run_stage(planner: Planner, ctx: PlanningContext, options: dict | None = None) -> PlanningContext:
    """Run one stage on ``ctx`` as a pipeline does: it sees ``options`` through its own
    declarations (``planner_options.StageOptions``). For tests and benchmarks of one stage."""
    ctx.options = planner_options.StageOptions.for_planner(dict(options or {}), planner)
    planner.run(ctx)
    return ctx


def schedule_order(name: str, graph: Graph, alignment: int, options: dict | None = None,
                   registry: Registry | None = None) -> list[int]:
    """The order the registered schedule stage ``name`` gives ``graph`` (nothing else planned):
    how the core asks a scheduler for an order without importing it."""
    registry = registry or default_registry()
    planner = registry.get(name)
    if planner.stage != "schedule":
        raise RegistryError(f"{name!r} is a {planner.stage} stage, expected a schedule stage")
    given = dict(options or {})
    planner_options.check_given(given, [planner], registry.option_index, name, registry.get)
    ctx = PlanningContext(graph=graph, hw=Hardware(), capacity=0, alignment=alignment, untiled=graph)
    return list(run_stage(planner, ctx, given).order)


def fused_graph(graph: Graph, pipeline: str, options: dict | None = None, registry: Registry | None = None) -> Graph:
    """The graph the stages of ``pipeline`` after its fusion stage plan: ``graph`` itself when
    it has none. Fusion reads no budget, so a budget keyword (M_R, the largest op's working
    set) can be measured on what the pipeline will plan (``workflow.resolve_budget``)."""
    fusion = [p for p in (registry or default_registry()).pipeline(pipeline) if p.stage == "fusion"]
    if not fusion:
        return graph
    ctx = PlanningContext(graph=graph, hw=Hardware(), capacity=0, alignment=1, untiled=graph)
    for planner in fusion:
        run_stage(planner, ctx, options)
    return ctx.graph


class OffchipResume:
    """The last plan's context, kept so that the same pipeline with off-chip stages added runs
    only those (``make_plan(..., resume=)``): ``npusim regress`` plans each trace's tiled
    pipeline, then the same with each of four off-chip planners, which read the plan and
    write only its DRAM offsets (``ctx.dram``). Kept for the same graph and hardware objects,
    budget and options; resumed only when every stage left is an off-chip one."""

    def __init__(self) -> None:
        self._key = None
        self._kept: tuple | None = None  # (context, guard notes, seconds)

    def clear(self) -> None:
        self._key = self._kept = None

    @staticmethod
    def _setting(graph, hw, capacity: int, given: dict) -> tuple:
        return id(graph), id(hw), capacity, repr(sorted(given.items()))

    def start(self, graph, hw, capacity: int, given: dict, stages: list) -> tuple | None:
        """(a copy of the kept context, its guard notes, its planning seconds, the index of the
        first stage left to run) when ``stages`` only add off-chip stages to the kept plan's."""
        if self._kept is None or self._key[0] != self._setting(graph, hw, capacity, given):
            return None
        done = self._key[1]
        left = stages[len(done):]
        if tuple(p.name for p in stages[:len(done)]) != done or not left or any(p.stage != "offchip" for p in left):
            return None
        ctx, notes, seconds = self._kept
        return _copy_context(ctx), list(notes), seconds, len(done)

    def keep(self, graph, hw, capacity: int, given: dict, stages: list, ctx: "PlanningContext", notes: list,
             seconds: float) -> None:
        """Keep a fresh run's context (a copy: the caller goes on with ``ctx``)."""
        self._key = (self._setting(graph, hw, capacity, given), tuple(p.name for p in stages))
        self._kept = (_copy_context(ctx), list(notes), seconds)


def _copy_context(ctx: PlanningContext) -> PlanningContext:
    """A context whose containers are its own (the stages fill ``ctx``'s in place)."""
    def copied(value):
        return type(value)(value) if isinstance(value, (list, dict)) else value
    return replace(ctx, fusion=dict(ctx.fusion), tiling=dict(ctx.tiling), order=copied(ctx.order),
                   streams=copied(ctx.streams), residencies=copied(ctx.residencies),
                   transfers=copied(ctx.transfers), dram=dict(ctx.dram), notes=list(ctx.notes), stats=dict(ctx.stats))


def make_plan(graph: Graph, hw: Hardware, pipeline: str, *, budget: int | None = None,
              options: dict | None = None, registry: Registry | None = None, progress=silent,
              resume: OffchipResume | None = None) -> BoundPlan:
    """Run a pipeline and return its plan, bound to the graphs the stages made (the fused and
    tiled ones, ``npusim.plan.bound``: nobody builds them again). ``budget`` (bytes) defaults
    to the scratchpad size; ``progress`` hears which stage runs and how far long stages got
    (npusim.util.progress). ``resume``: runs only the off-chip stages a plan it kept lacks
    (``OffchipResume``), and keeps this one."""
    registry = registry or default_registry()
    stages = registry.pipeline(pipeline)
    given = dict(options or {})
    planner_options.check_given(given, stages, registry.option_index, pipeline, registry.get)
    capacity = int(budget or hw.scratchpad.size)
    kept = resume.start(graph, hw, capacity, given, stages) if resume is not None else None
    if kept is not None:
        ctx, earlier_notes, earlier_seconds, first = kept
        ctx.progress = progress
    else:
        ctx = PlanningContext(graph=graph, hw=hw, capacity=capacity, alignment=hw.scratchpad.alignment,
                              untiled=graph, progress=progress)
        earlier_notes, earlier_seconds, first = [], 0.0, 0
    start = time.perf_counter()
    order_by = None  # the stage that set the order last
    with reporting(progress), wall_guard.collecting() as guard_notes:  # both heard from solvers deep inside
        guard_notes[:0] = earlier_notes
        for n, planner in enumerate(stages[first:], first + 1):
            progress("planning", n, len(stages), f"{planner.stage} stage {planner.name!r} on {ctx.graph.n_ops:,} ops")
            claim = (ctx.status, ctx.objective, ctx.bound, ctx.scope)
            order = ctx.order
            try:
                run_stage(planner, ctx, given)
            except (Exception, SystemExit) as exc:
                if order_by is not None:  # (a stage failing on an earlier stage's invalid order: name that one)
                    _require_order(order_by, ctx)
                if isinstance(exc, NpusimError):
                    raise
                raise InternalError(f"planner {planner.name!r} ({planner.stage} stage) failed: "  # its own bug (an
                                    f"{type(exc).__name__}: {exc}") from exc  # OSError read as a user's bad path)
            if ctx.order is not order:
                order_by = planner
            if (ctx.status, ctx.objective, ctx.bound) != claim[:3] and ctx.scope == claim[3]:
                ctx.scope = ""  # a new claim that names no scope: an earlier stage's does not apply to it
    if resume is not None and kept is None:  # (a resumed plan leaves the one it started from kept)
        resume.keep(graph, hw, capacity, given, stages, ctx, guard_notes, time.perf_counter() - start)
    if guard_notes:  # the plan's claim may not repeat: say so where its status is explained
        more = f" (and {len(guard_notes) - 1} more)" if len(guard_notes) > 1 else ""
        ctx.scope = "; ".join(filter(None, [ctx.scope, guard_notes[0] + more]))
    if ctx.order is None:
        ctx.order = list(range(ctx.graph.n_ops))
    if ctx.residencies is None:
        raise RegistryError(f"pipeline {pipeline!r} has no allocation stage (add e.g. '+arena')")
    seconds = earlier_seconds + time.perf_counter() - start
    plan = Plan(
        graph=ctx.graph.name, capacity=ctx.capacity, alignment=ctx.alignment,
        order=tuple(ctx.order), streams=tuple(ctx.streams or [0] * ctx.graph.n_ops),
        residencies=sorted_records(ctx.residencies, ResidencyTable),
        transfers=sorted_records(ctx.transfers or (), TransferTable),
        dram=dict(ctx.dram), tiling=dict(ctx.tiling), fusion=dict(ctx.fusion),
        meta=PlanMeta(planner="+".join(n.strip() for n in pipeline.split("+")), options=given,
                      solve_seconds=round(seconds, 6), status=ctx.status,
                      objective=ctx.objective, bound=ctx.bound, scope=ctx.scope, notes=tuple(ctx.notes),
                      stats=dict(ctx.stats)),
    )
    return bound_to(plan, ctx.graph, ctx.untiled, graph)


def check_pipelines(pipelines: list[str], options: dict | None = None) -> None:
    """Raise RegistryError for a pipeline naming an unknown planner or two planners of a stage,
    PlanningError for an option no planner declares or a value a stage cannot take: before a
    sweep or a comparison starts, not as a failed row."""
    registry = default_registry()
    for pipeline in pipelines:
        stages = registry.pipeline(pipeline)
        if options:
            planner_options.check_given(options, stages, registry.option_index, pipeline, registry.get)


def describe_planner(planner) -> str:
    """What ``npusim list --planner NAME`` prints: the planner, its options (from its
    declarations) and the context fields it reads and writes."""
    lines = [f"{planner.name} ({planner.stage} stage): {planner.description}"]
    opts = planner_options.declared(planner)
    lines.append("options:" if opts else "options: none")
    lines += [f"  {opt.describe()}" for opt in opts]
    lines.append(f"reads:  {', '.join(getattr(planner, 'reads', ())) or '-'}")
    lines.append(f"writes: {', '.join(getattr(planner, 'writes', ())) or '-'}")
    return "\n".join(lines)


def planners_markdown(registry: Registry | None = None) -> str:
    """docs/planners.md: every registered planner with its options, reads and writes, and the
    named pipelines (``scripts/planner_docs.py`` writes it; a test keeps it current)."""
    registry = registry or default_registry()
    out = ["# Planners: the reference", "",
           "Generated by `python scripts/planner_docs.py` from the planners' own declarations (`options`, "
           "`reads`, `writes`; `npusim.registry`); do not edit by hand. `npusim list --planner NAME` prints one "
           "entry. A pipeline joins planner names with `+`; its stages run in the order "
           f"{' -> '.join(STAGES)}. Give an option with `--option KEY=VALUE` (or `options=` in Python): a name "
           "no planner declares is refused, a declared one that the pipeline's stages do not read is accepted "
           "(one set of options can go to every pipeline of a sweep).", ""]
    for stage in STAGES:
        members = [p for p in registry.planners() if p.stage == stage]
        if not members:
            continue
        out += [f"## {stage} stage", ""]
        for planner in members:
            out += [f"### `{planner.name}`", "", planner.description + ".", ""]
            for opt in planner_options.declared(planner):
                out.append(f"- `{opt.describe().split(' (', 1)[0]}` ({opt.describe().split(' (', 1)[1]}")
            if planner_options.declared(planner):
                out.append("")
            out += [f"Reads `{'`, `'.join(getattr(planner, 'reads', ())) or '-'}`; writes "
                    f"`{'`, `'.join(getattr(planner, 'writes', ())) or '-'}`.", ""]
    out += ["## Named pipelines", ""] + [f"- `{name}` = `{pipeline}`" for name, pipeline in ALIASES.items()]
    return "\n".join(out) + "\n"

