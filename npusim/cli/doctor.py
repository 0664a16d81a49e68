"""``npusim doctor``: every problem of a plan, trace or hardware config, each with the fix to try.

Where ``npusim validate`` says *that* a plan is wrong, the doctor goes through everything it
can check and says what to change:

- a hardware YAML: each bad key (the loader stops at the first; the doctor sets the key aside
  and loads again, up to ``MAX_ROUNDS`` times, so every bad value is listed);
- a trace (.json, .json.gz, .onnx): whether it loads, and its memory bounds;
- a plan JSON (needs ``--trace``): load errors, then every validator violation with a fix for
  its kind, then (with ``--hw``) a simulation, jittered over ``seeds`` seeds on a
  multi-stream plan, to catch races the static checks cannot see.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from npusim.errors import ConfigError, NpusimError, SimulationError
from npusim.graph.contract import trace_problems
from npusim.graph.trace_io import read_trace_document
from npusim.hw import loader
from npusim.plan.io import load_plan
from npusim.plan.validate import validate
from npusim.util.resources import find_resource

MAX_ROUNDS = 20

#: The fix to try for each validator violation kind (npusim.plan.validate).
FIXES = {
    "order": "reorder 'order' so every op comes after the producers of its inputs, each op once "
             "(or re-plan: npusim plan TRACE --hw HW -o plan.json)",
    "streams": "give every op a stream >= 0 in 'streams' (ops not listed run on stream 0)",
    "range": "keep residency 'first'/'last' and transfer 'step' within 0 .. len(order) - 1",
    "size": "make the residency 'size' at least the tensor's bytes rounded up to 'alignment' (or drop "
            "'size' to get that default)",
    "capacity": "move the residency so offset + size <= 'capacity', or plan for a larger --budget",
    "alignment": "use an 'offset' that is a multiple of 'alignment'",
    "overlap": "move one of the two residencies to free addresses or end one before the other starts; "
               "on several streams use a multi-stream safe allocator (e.g. mindspore-mo:size,best-fit)",
    "empty_residency": "add a 'load' transfer at the residency's first step, or start it at its producer's step",
    "not_resident": "add a residency of the tensor that covers the op's step (and a load if it is in DRAM)",
    "not_ready": "load the tensor at (or before) the step of the op that reads it",
    "load_without_copy": "store the tensor (cause 'spill') before loading it back; only inputs and weights "
                         "start in DRAM",
    "transfer_residency": "move the transfer to a step inside one of its tensor's residencies",
    "cause": "use the matching cause: 'compulsory' for the first load of an input or weight, 'writeback' "
             "for storing a graph output, 'spill'/'retrieve' for evicting and reloading an activation",
    "not_written_back": "add a 'store' with cause 'writeback' of the graph output at its producer's step",
    "tiling": "re-plan with the 'tile' stage (tile+default+arena+belady), or fix the op's spec in 'tiling'",
    "dram": "give every DRAM buffer in 'dram' its own non-overlapping range, or drop 'dram'",
    "fusion": "fuse only element-wise ops that alone read the previous link's output into a GEMM op, or "
              "re-plan with the 'fuse' stage (fuse+tile+default+arena+belady)",
}
SIMULATION_FIX = ("the plan races across streams: use a multi-stream safe allocator (mindspore-mo:...), "
                  "or put the ops that share memory on one stream")
_DOTTED = re.compile(r": ([A-Za-z_]+(?:\.[A-Za-z_]+)*) = ")
_UNKNOWN = re.compile(r"unknown key ([A-Za-z_.]+)")


@dataclass(frozen=True)
class Problem:
    where: str
    message: str
    fix: str

    def __str__(self) -> str:
        head = self.message if self.message.startswith(self.where) else f"{self.where}: {self.message}"
        return f"{head}\n    fix: {self.fix}"


def kind_of(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".yaml", ".yml")):
        return "hardware"
    if path.suffix and not name.endswith((".onnx", ".json.gz", ".json")):  # (a figure, a CSV: no model to re-import)
        return "other"
    if name.endswith((".onnx", ".json.gz")):
        return "trace"
    if name.endswith(".json"):
        try:
            fmt = json.loads(path.read_text()).get("format", "")
        except Exception:  # unreadable: the trace loader will say why
            return "trace"
        return "plan" if str(fmt).startswith("npusim-plan") else "trace"
    return "trace"


def diagnose_hardware(path: Path) -> list[Problem]:
    """Every bad key of a hardware YAML: load, set the failing key aside, load again."""
    problems: list[Problem] = []
    try:
        data = loader.read_yaml(path)
    except ConfigError as error:
        return [Problem(str(path), str(error), "fix the YAML syntax at the line given (keys as in hw_configs/README.md)")]
    for _ in range(MAX_ROUNDS):
        try:
            loader.hardware_from_mapping(data, origin=str(path), base_dir=path.parent)
            break
        except ConfigError as error:
            message = str(error)
            key = _key_in(message)
            problems.append(Problem(str(path), message, _hardware_fix(message, key)))
            if key is None or not _drop(data, key):
                break
    return problems


def _key_in(message: str) -> str | None:
    found = _UNKNOWN.search(message) or _DOTTED.search(message)
    return found.group(1) if found else None


def _hardware_fix(message: str, key: str | None) -> str:
    if "unknown key" in message:
        hint = re.search(r"did you mean '([^']+)'", message)
        return f"rename it to {hint.group(1)!r}" if hint else "remove it (valid keys are listed above)"
    if "extends" in message:
        return "point 'extends' at an existing config that does not extend this one"
    if key:
        return f"set {key} to a value of the kind the message expects (units as in hw_configs/README.md)"
    return "fix the value named above"


def _drop(data: dict, dotted: str) -> bool:
    *blocks, leaf = dotted.split(".")
    target = data
    for block in blocks:
        target = target.get(block) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return False
    return target.pop(leaf, None) is not None or leaf in target


TRACE_FIX = "fix the field or record named above, or re-import the model (npusim import model.onnx -o trace.json)"


def diagnose_trace(path: Path) -> tuple[list[Problem], object]:
    """Every problem of a trace: each tensor and op checked on its own (a trace file), or the
    import's one error (an ONNX model)."""
    from npusim.workflow import load_graph  # lazy: SimPy, Numba (a hardware check needs neither)

    if path.suffix != ".onnx":
        try:
            found = trace_problems(read_trace_document(path), str(path))
        except NpusimError as error:  # unreadable, not JSON
            found = [str(error)]
        if found:
            return [Problem(str(path), message, TRACE_FIX) for message in found], None
    try:
        return [], load_graph(path)
    except NpusimError as error:
        return [Problem(str(path), str(error), TRACE_FIX)], None


def diagnose_plan(path: Path, trace: str | None, hw: str | None, seeds: int = 8) -> list[Problem]:
    from npusim.workflow import check_plan_hardware, load_graph, load_hw, simulate_plan  # lazy: SimPy, Numba

    if trace is None:
        return [Problem(str(path), "a plan is checked against its trace", "add --trace TRACE")]
    try:
        graph = load_graph(trace)
    except NpusimError as error:
        return [Problem(str(trace), str(error), "fix the trace first")]
    try:
        plan = load_plan(path, graph)
    except NpusimError as error:
        return [Problem(str(path), str(error), "fix the field named above (format in npusim/plan/io.py), "
                                               "or write a fresh plan with npusim plan")]
    problems = [Problem(str(path), f"[{v.kind}] {v.message}", FIXES.get(v.kind, "re-plan"))
                for v in validate(plan)]
    if problems or hw is None:
        return problems
    try:
        hardware = load_hw(hw)
    except NpusimError as error:
        return [Problem(str(hw), str(error), "fix the hardware config (npusim doctor HW.yaml)")]
    try:
        check_plan_hardware(plan, hardware, "the plan", graph)
    except NpusimError as error:
        problems.append(Problem(str(path), str(error), f"re-plan for {hardware.name} (npusim plan TRACE --hw {hw} "
                                                       "-o plan.json), or simulate it with --allow-oversize"))
    runs = range(seeds + 1) if len(set(plan.streams)) > 1 else range(1)
    for seed in runs:
        try:
            simulate_plan(plan, hardware, jitter=0.5 if seed else 0.0, seed=seed, validated=True)
        except SimulationError as error:
            how = f" with --jitter {seed}" if seed else ""
            problems.append(Problem(str(path), f"simulation{how}: {error}", SIMULATION_FIX))
            break
    return problems


def diagnose(paths: list[str], trace: str | None = None, hw: str | None = None, seeds: int = 8) -> list[Problem]:
    problems: list[Problem] = []
    for name in paths:
        path = _resolve(name)
        if path is None:
            problems.append(Problem(name, "no such file, shipped trace or hardware config",
                                    "check the path (npusim list names the shipped ones)"))
            continue
        kind = kind_of(path)
        if kind == "other":
            problems.append(Problem(str(path), f"not a file doctor checks ({path.suffix})",
                                    "give a trace (.json, .json.gz, .onnx), a plan (.json) or a hardware config (.yaml)"))
        elif kind == "hardware":
            problems += diagnose_hardware(path)
        elif kind == "plan":
            problems += diagnose_plan(path, trace, hw, seeds)
        else:
            problems += diagnose_trace(path)[0]
    return problems


def _resolve(name: str) -> Path | None:
    """A file, or a shipped trace or hardware config by name (as every other command takes them)."""
    path = Path(name)
    if path.is_file():
        return path
    if path.name != name:
        return None
    return find_resource("hw_configs", name) or find_resource("traces", name)

