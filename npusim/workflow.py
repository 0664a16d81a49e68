"""The recipe the CLI and the tools follow: find inputs, plan, validate, lower, simulate.

Each function is one stage; ``run`` chains them. Everything returned is a plain value.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from pathlib import Path

from npusim.util.env_knobs import memory_limit
from npusim.errors import InternalError, NpusimError, SimulationError, TraceError
from npusim.graph.analysis import default_order, min_required, peak_live_bytes
from npusim.graph.decoder import graph_from_name
from npusim.graph.generators import tpu_v1_workload
from npusim.graph.model import Graph
from npusim.graph.onnx_import import import_onnx
from npusim.graph.trace_io import load_trace
from npusim.hw.config import Hardware
from npusim.hw.loader import load_hardware
from npusim.plan.lower import Program, lower
from npusim.plan.model import STATUSES, Plan
from npusim.plan.bound import BoundPlan, as_bound
from npusim.plan.validate import require_valid
from npusim.util.progress import silent
from npusim.registry import fused_graph, make_plan
from npusim.util.resources import find_resource, missing_resource_message
from npusim.sim.engine import simulate
from npusim.sim.report import Report
from npusim.util.units import UnitError, format_bytes, parse_size

#: Fuses element-wise epilogues into their GEMM op (as NPU compilers do), then tiles only the
#: ops that do not fit, so on a roomy scratchpad it is the fused graph with the arena + Belady.
DEFAULT_PIPELINE = "fuse+tile+default+arena+belady"
BUDGET_KEYWORDS = ("MR", "MH", "MP")


#: name prefixes of generated graphs (no file behind them): a decoder step, a TPU v1 workload
GENERATED_PREFIXES = ("llm:", "tpuv1:")


def is_generated(source: str | Path) -> bool:
    """Whether ``source`` names a generated graph (``GENERATED_PREFIXES``) rather than a file."""
    return str(source).startswith(GENERATED_PREFIXES)


def load_graph(source: str | Path, dtype: str = "int8") -> Graph:
    """A trace by path (``.json``, ``.json.gz``, or ``.onnx`` imported on the fly), by name of a
    file in ``traces/``, or a generated graph: a decoder step ``llm:<preset>:prefill=<P>`` /
    ``llm:<preset>:decode=<L>`` (``npusim.graph.decoder``), or a TPU v1 workload
    ``tpuv1:<mlp0|mlp1|lstm0|lstm1>`` (``npusim.graph.generators.TPU_V1_WORKLOADS``)."""
    if str(source).startswith("llm:"):
        return graph_from_name(str(source))
    if str(source).startswith("tpuv1:"):
        return tpu_v1_workload(str(source).removeprefix("tpuv1:"))
    path = Path(source)
    if path.is_file():
        if path.suffix == ".onnx":
            return import_onnx(path, dtype=dtype)
        return load_trace(path)
    if path.name == str(source):
        found = find_resource("traces", str(source))
        if found is not None:
            return load_trace(found)
    raise TraceError(f"{source}: trace not found; {missing_resource_message('traces', str(source))}")


def load_hw(source: str | Path, overrides: dict | None = None) -> Hardware:
    return load_hardware(source, overrides=overrides)


@dataclass(frozen=True)
class MemoryBounds:
    """The budgets of the COSMA paper, in bytes rounded up to the scratchpad alignment.

    ``m_r``: largest working set of one op (``m_r_op`` needs it); ``m_p``: live-bytes peak of
    the default order; ``m_h`` = (M_R + M_P) / 2.
    """

    m_r: int
    m_r_op: str
    m_p: int

    @property
    def m_h(self) -> int:
        return (self.m_r + self.m_p) // 2


def memory_bounds(graph: Graph, alignment: int = 1) -> MemoryBounds:
    m_r, op = min_required(graph, alignment)
    m_p = peak_live_bytes(graph, default_order(graph), alignment)
    return MemoryBounds(m_r=m_r, m_r_op=graph.ops[op].name, m_p=max(m_p, m_r))


def is_budget_keyword(spec) -> bool:
    """Whether ``spec`` is MR, MH or MP (any case, underscores ignored): a bound of the graph
    planned, not a size."""
    return isinstance(spec, str) and spec.upper().replace("_", "") in BUDGET_KEYWORDS


def resolve_budget(spec: str | int | None, graph: Graph, hw: Hardware, *, allow_oversize: bool = False,
                   pipeline: str | None = None, options: dict | None = None) -> int:
    """Budget in bytes: None = the scratchpad size; a size ('768KiB'); or MR, MH, MP. It must
    fit the hardware's scratchpad (``check_capacity``). A keyword is measured on the graph
    ``pipeline`` plans: after its fusion stage, whose fused ops hold more at once (M_R of the
    unfused graph is below what a fused op needs, and no plan without tiling fits it)."""
    if spec is None:
        return hw.scratchpad.size
    if is_budget_keyword(spec):
        if pipeline is not None:
            graph = fused_graph(graph, pipeline, options)
        bounds = memory_bounds(graph, hw.scratchpad.alignment)
        key = spec.upper().replace("_", "")
        budget = {"MR": bounds.m_r, "MH": bounds.m_h, "MP": bounds.m_p}[key]
    else:
        try:
            budget = parse_size(spec)
        except UnitError as exc:
            raise NpusimError(f"--budget {spec!r}: {exc}; or one of {', '.join(BUDGET_KEYWORDS)}") from None
        if budget <= 0:
            raise NpusimError(f"--budget {spec!r}: must be a positive size")
    check_capacity(budget, hw, f"--budget {spec}", allow_oversize=allow_oversize)
    return budget


def check_capacity(capacity: int, hw: Hardware, what: str, *, allow_oversize: bool = False) -> None:
    """Refuse a budget (or a plan's capacity) the hardware's scratchpad cannot hold, or one
    that is not a multiple of its alignment, naming both numbers; ``allow_oversize`` lets a
    larger one through (the report's first line then says so: ``Report.oversize``)."""
    size, align = hw.scratchpad.size, hw.scratchpad.alignment
    if capacity % align:
        below, above = capacity - capacity % align, capacity + align - capacity % align
        raise NpusimError(f"{what} = {capacity:,} B is not a multiple of {hw.name}'s scratchpad.alignment "
                          f"({align} B); use {f'{below:,} or ' if below else ''}{above:,} B")
    if capacity > size and not allow_oversize:
        raise NpusimError(
            f"{what} = {capacity:,} B is larger than {hw.name}'s scratchpad ({size:,} B, scratchpad.size); "
            f"plan for at most {size:,} B, model a larger scratchpad with --set scratchpad.size=..., "
            "or pass --allow-oversize to plan beyond the hardware anyway")


def check_plan_hardware(plan: Plan, hw: Hardware, what: str, graph: Graph | None = None, *,
                        allow_oversize: bool = False) -> None:
    """A plan read from a file must fit the hardware it is simulated on: its capacity
    (``check_capacity``), an alignment that is a multiple of the scratchpad's, and stream ids
    below the hardware's ``streams`` (a plan for 4 queues cannot run on 2)."""
    check_capacity(plan.capacity, hw, f"{what}: capacity", allow_oversize=allow_oversize)
    align = hw.scratchpad.alignment
    if plan.alignment % align:
        raise NpusimError(f"{what}: alignment = {plan.alignment:,} B is not a multiple of {hw.name}'s "
                          f"scratchpad.alignment ({align} B); plan again for {hw.name}")
    highest = max(plan.streams, default=0)
    if highest >= hw.streams:
        op = plan.streams.index(highest)
        if isinstance(plan, BoundPlan) and plan.bound_graph is not None:
            op = repr(plan.bound_graph.ops[op].name)
        raise NpusimError(f"{what}: op {op} runs on stream {highest}, but {hw.name} has {hw.streams} stream(s) "
                          f"(ids 0 to {hw.streams - 1}); plan again for {hw.name}, or model more with "
                          f"--set streams={highest + 1}")


def plan_graph(graph: Graph, hw: Hardware, pipeline: str = DEFAULT_PIPELINE, budget: int | None = None,
               options: dict | None = None, progress=silent, resume=None) -> BoundPlan:
    """A validated plan of ``graph``, bound to the graphs it refers to (``npusim.plan.bound``);
    ``resume``: ``npusim.registry.OffchipResume``."""
    check_graph_memory(graph)
    plan = make_plan(graph, hw, pipeline, budget=budget, options=options, progress=progress, resume=resume)
    progress("validating the plan", detail=f"{len(plan.order):,} steps, {len(plan.residencies):,} residencies")
    require_valid(plan, source=f"plan from {pipeline!r}", planned=True)  # a planner bug must not reach the simulator
    _require_asked(plan, hw, int(budget or hw.scratchpad.size), pipeline)
    return plan


def _require_asked(plan: Plan, hw: Hardware, budget: int, pipeline: str) -> None:
    """A plan made here is for the budget asked, the scratchpad's alignment and the hardware's
    streams (what ``check_plan_hardware`` holds a plan file to), with a status and finite
    numbers a plan file can hold: a planner that changed them (a plugin's undeclared write; a
    stream id beyond the hardware's, whose lowering made a queue for every id up to it; a NaN
    objective, which ``npusim plan`` wrote and could not read back) has a bug, reported as one."""
    highest, meta = max(plan.streams, default=0), plan.meta
    odd = [(name, value) for name, value in (("objective", meta.objective), ("bound", meta.bound))
           if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value))]
    checks = (  # (what is wrong, the message), the first that holds reported
        (plan.capacity != budget, lambda: f"capacity {plan.capacity:,} B, but the budget asked was {budget:,} B"),
        (plan.alignment != hw.scratchpad.alignment,
         lambda: f"alignment {plan.alignment} B, but {hw.name}'s scratchpad.alignment is {hw.scratchpad.alignment} B"),
        (highest >= hw.streams,
         lambda: f"stream {highest} of op {plan.streams.index(highest)}, but {hw.name} has {hw.streams} stream(s)"),
        (meta.status not in STATUSES, lambda: f"status {meta.status!r}, expected one of {', '.join(STATUSES)}"),
        (bool(odd), lambda: f"{odd[0][0]} {odd[0][1]!r}, expected a finite number or none (a plan file holds no other)"),
    )
    for wrong, message in checks:
        if wrong:
            raise InternalError(f"plan from {pipeline!r}: {message()}: a stage changed what it may not")


def simulate_plan(plan: Plan, hw: Hardware, graph: Graph | None = None, *, jitter: float = 0.0,
                  seed: int | None = None, source: str = "plan", validated: bool = False, progress=silent) -> Report:
    """Validate (unless ``validated``), lower and simulate a bound ``plan`` on ``hw``
    (``graph``: only for a plan not bound to its graph yet)."""
    program = lower_plan(plan, hw, graph, source=source, validated=validated, progress=progress)
    return simulate_program(program, hw, jitter=jitter, seed=seed, progress=progress)


def lower_plan(plan: Plan, hw: Hardware, graph: Graph | None = None, *, source: str = "plan",
               validated: bool = False, progress=silent) -> Program:
    """``simulate_plan``'s first half: the Program of a bound ``plan`` on ``hw``, validated
    first unless ``validated``. A caller that drops its plan then simulates with the plan's
    residencies and transfers freed (a tiled plan's are a few hundred MB)."""
    if not isinstance(hw, Hardware):  # the old argument order (plan, graph, hw)
        raise TypeError(f"simulate_plan(plan, hw, graph=None): hw is a {type(hw).__name__}, expected Hardware")
    plan = as_bound(plan, graph)
    if not validated:
        check_graph_memory(plan.given_graph)
        progress("validating the plan", detail=f"{len(plan.order):,} steps, {len(plan.residencies):,} residencies")
        require_valid(plan, source=source)
    check_simulation_memory(len(plan.order) + len(plan.transfers), source)
    progress("lowering to command queues", detail=f"{len(plan.transfers):,} transfers")
    return lower(plan, hw)


def simulate_program(program: Program, hw: Hardware, *, jitter: float = 0.0, seed: int | None = None,
                     progress=silent) -> Report:
    """``simulate_plan``'s second half: run a Program and check the figures are finite."""
    report = simulate(program, hw, jitter=jitter, seed=seed, progress=progress)
    if not (math.isfinite(report.cycles) and math.isfinite(report.total_energy_pj)):
        # the loader bounds every field; a product of several extreme ones can still overflow
        raise NpusimError(f"{hw.name}: the simulated figures overflow (latency {report.cycles:g} cycles, energy "
                          f"{report.total_energy_pj:g} pJ): the hardware config combines values no NPU has")
    return report


#: Memory one command of a Program takes through lowering, simulation and the report
#: (measured: 3.5 KiB on resnet18 and resnet50 tiled at 64-128 KiB, RSS growth over the plan),
#: rounded up.
BYTES_PER_COMMAND = 4096


#: Memory per element of the largest produced tensor that checking a plan takes: the
#: validator counts how often tiles write each element of a tiled op's output (2 B), plus the
#: element indices of one tile at a time (measured: 2.2 B per element on a 1 GiB output).
BYTES_PER_ELEMENT = 3


def check_graph_memory(graph: Graph) -> None:
    """Refuse before planning a graph whose plans would take more memory to check than the
    limit (``npusim.util.env_knobs.memory_limit``): a 380-byte trace may name a 10 GiB output."""
    limit = memory_limit()
    produced = [t for t in graph.tensors if t.kind in ("activation", "output")]
    if limit is None or not produced:
        return
    big = max(produced, key=lambda t: t.elements)
    need = big.elements * BYTES_PER_ELEMENT
    if need > limit:
        raise NpusimError(
            f"{graph.name}: tensor {big.name!r} has {big.elements:,} elements; planning and checking it takes about "
            f"{format_bytes(need)}, more than the {format_bytes(limit)} available (NPUSIM_MEMORY_LIMIT, or the "
            "machine's free memory); use a smaller shape, or raise NPUSIM_MEMORY_LIMIT")


def check_simulation_memory(commands: int, source: str = "plan") -> None:
    """Refuse before lowering a plan whose simulation would need more memory than the limit
    (``npusim.util.env_knobs.memory_limit``), rather than be stopped by the OOM killer."""
    limit = memory_limit()
    need = commands * BYTES_PER_COMMAND
    if limit is not None and need > limit:
        raise SimulationError(
            f"{source}: simulating its {commands:,} commands needs about {format_bytes(need)}, more than the "
            f"{format_bytes(limit)} available (NPUSIM_MEMORY_LIMIT, or the machine's free memory); plan at a "
            "larger budget (fewer tiles), or raise NPUSIM_MEMORY_LIMIT")


def run(graph: Graph, hw: Hardware, pipeline: str = DEFAULT_PIPELINE, budget: int | None = None,
        *, jitter: float = 0.0, seed: int | None = None) -> tuple[Plan, Report]:
    plan = plan_graph(graph, hw, pipeline, budget)
    return plan, simulate_plan(plan, hw, jitter=jitter, seed=seed, validated=True)
