"""The argument parser of the ``npusim`` command: one function per subcommand.

``build_parser(handlers)`` takes the function that runs each subcommand, by name
(``npusim.cli.HANDLERS``), so this module holds the command line's words and ``npusim.cli`` what
they do.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Callable

from npusim import __version__
from npusim.errors import did_you_mean
from npusim.workflow import DEFAULT_PIPELINE


def build_parser(handlers: dict[str, Callable]) -> argparse.ArgumentParser:
    """The ``npusim`` parser; ``handlers[name]`` runs subcommand ``name`` (``args.func``)."""
    parser = OneLineErrorParser(prog="npusim", description="Cycle-approximate NPU simulator with the memory planner in the loop.")
    parser.add_argument("--version", action="version", version=f"npusim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add in _SUBCOMMANDS.items():
        add(sub, handlers[name])
    return parser


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse whose errors are one line (exit 2, as argparse's own): the subcommand, the
    problem, a "did you mean" for a misspelt option and where the help is — not the usage
    block, and an unknown option is blamed on the subcommand it was given to."""

    #: the command line being parsed (for error's hints)
    given: list[str] = []

    def parse_args(self, args=None, namespace=None):
        OneLineErrorParser.given = list(sys.argv[1:] if args is None else args)
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._subcommand_parser(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _subcommand_parser(self, parsed) -> argparse.ArgumentParser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices.get(getattr(parsed, action.dest, None), self)
        return self

    def error(self, message: str):
        # a required group of one spelling shown (the others are deprecated, not in --help)
        message = re.sub(r"^one of the arguments (\S+) is required$", r"the following arguments are required: \1",
                         message)
        words = [w.split("=")[0] for w in message.split(":", 1)[-1].split() if w.startswith("--")]
        hint = "".join(did_you_mean(w, self._option_string_actions) for w in words) \
            if message.startswith("unrecognized") else ""
        if message.startswith("argument ") and message.endswith(": expected one argument"):
            names = message[len("argument "):-len(": expected one argument")].split("/")
            given = OneLineErrorParser.given
            value = next((given[i + 1] for i in range(len(given) - 1) if given[i] in names), "")
            if value.startswith("-"):  # argparse took the value for an option
                hint = f"; a value that starts with '-' is given as {names[-1]}={value}"
        sys.stderr.write(f"{self.prog}: error: {message}{hint} (see {self.prog} --help)\n")
        sys.exit(2)


#: The hardware a command uses when --hw is not given (the quick start's).
DEFAULT_HW = "edge-npu"


class DeprecatedSpelling(argparse.Action):
    """An old spelling of an option: stores into the current one's destination and says so
    in one line on stderr (one spelling per concept across commands: ``--planner``,
    ``-o/--output``, positional traces, ``--hw``)."""

    def __init__(self, option_strings, dest, current: str, **kwargs):
        self.current = current
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"npusim: note: {option_string} is deprecated, use {self.current}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _hw_arg(p, what: str = "hardware YAML file or name in hw_configs/") -> None:
    p.add_argument("--hw", default=DEFAULT_HW, help=f"{what} (default {DEFAULT_HW})")


def _pipelines_arg(p, default: str | None) -> None:
    """--planner with one or several pipelines (dse, compare); --planners is the old spelling.
    Without a default one of the two is required (a group: argparse counts an option as given
    only under its own spelling)."""
    either = p.add_mutually_exclusive_group(required=default is None)
    either.add_argument("--planner", default=default, metavar="PIPELINE[,PIPELINE...]",
                        help="planner pipelines separated by commas, e.g. default+arena+belady,rpo+arena+lru"
                             + (f" (default {default})" if default else ""))
    either.add_argument("--planners", dest="planner", action=DeprecatedSpelling, current="--planner")


def _option_arg(p) -> None:
    """--option, repeatable: planner options given to every pipeline of the command."""
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="planner option for every pipeline (each stage reads what it declares; npusim list "
                        "--planner NAME), e.g. time_limit=10, tile_objective=bytes")


def _output_arg(p, help_text: str, default: str | None = None, required: bool = False) -> None:
    """-o/--output; --out is the old spelling (``required``: one of them, as --planner)."""
    either = p.add_mutually_exclusive_group(required=required)
    either.add_argument("-o", "--output", default=default, help=help_text)
    either.add_argument("--out", dest="output", action=DeprecatedSpelling, current="-o/--output")


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


#: ``--jitter-amount``'s range. Below 0.001 (a command stretched by less than 0.1 %) a uniform
#: or per-queue schedule stretches nothing a cycle count shows (1e-300 reported the unjittered
#: run under a JITTERED label); above 100, beyond the stalled queue's factor
#: (``npusim.sim.jitter.STALL_FACTOR``), times grow past meaning and then overflow.
MIN_JITTER_AMOUNT, MAX_JITTER_AMOUNT = 0.001, 100.0


def jitter_amount(text: str) -> float:
    """An argparse type: a number from MIN_JITTER_AMOUNT to MAX_JITTER_AMOUNT."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not MIN_JITTER_AMOUNT <= value <= MAX_JITTER_AMOUNT:
        raise argparse.ArgumentTypeError(f"expected a number from {MIN_JITTER_AMOUNT:g} to {MAX_JITTER_AMOUNT:g}, "
                                         f"got {text!r}")
    return value


def _planning_args(p) -> None:
    """The arguments of every command that plans: simulate and plan."""
    p.add_argument("trace", help="trace file or name in traces/ (e.g. resnet50); .onnx is imported on the fly")
    _hw_arg(p)
    p.add_argument("--planner",
                   help=f"planner pipeline (default {DEFAULT_PIPELINE}; 'tile' streams ops that do not fit), e.g. rpo+arena+lru")
    p.add_argument("--budget", help="scratchpad budget: a size (768KiB) or MR, MH, MP; default: the scratchpad size")
    p.add_argument("--allow-oversize", action="store_true", help="plan for a budget (or simulate a plan) larger than the hardware's scratchpad.size; the report says so")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a hardware field, e.g. dram.bandwidth=12.8GB/s")
    _option_arg(p)
    p.add_argument("--offchip", metavar="PLANNER",
                   help="off-chip (DRAM) planner appended to the pipeline: taa, offchip-so, offchip-offsets, offchip-naive")


def _add_simulate(sub, handler: Callable) -> None:
    p = sub.add_parser("simulate", help="plan (or load a plan) and simulate it")
    _planning_args(p)
    p.add_argument("--plan", help="simulate this plan JSON instead of planning (it is validated first)")
    p.add_argument("--report", help="write the report as JSON here")
    p.add_argument("--timeline", help="write a Chrome-trace / Perfetto timeline here")
    p.add_argument("--html", metavar="FILE", help="write the report as one self-contained HTML page here (summary, "
                                                  "critical path, energy, memory over time, sortable ops)")
    p.add_argument("--breakdown", help="write one CSV row per op here (its tiles folded in): start, end, cycles, "
                                       "busy cycles, bound, stall cycles and what it waited for, bytes in/out")
    p.add_argument("--breakdown-tiles", metavar="CSV", help="as --breakdown, one row per tile and core part as run")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--jitter", type=non_negative_int, metavar="SEED",
                   help="a race test: stretch compute and DMA times randomly and let the seed pick an adversarial "
                        "schedule (a stalled, rushed or slowed queue), to explore other interleavings; the latency "
                        "of such a run can be many times the design's, and the report says it is jittered")
    p.add_argument("--jitter-amount", type=jitter_amount,
                   help="with --jitter: the random stretch of each command, up to this fraction of its time (0.001 to 100) "
                        "(default 0.5), on top of the schedule the seed picks")
    p.add_argument("--prefill", type=int, metavar="P", help="LLM run (trace llm:<preset>): prompt tokens")
    p.add_argument("--decode", type=int, metavar="D", help="LLM run: tokens to generate, one decode step each")
    p.add_argument("--batch", type=int, help="LLM run: sequences decoded together (default 1; for one step, "
                                             "in the trace: llm:<preset>:decode=N:batch=B)")
    p.add_argument("--samples", type=int, help="LLM run: decode steps simulated, spread over the D steps, the "
                                               "first and the last among them (so at least 2); the others are "
                                               "interpolated (default 5)")
    p.add_argument("--kv-on-chip", metavar="none|N|auto",
                   help="LLM run: layers whose KV cache stays in the scratchpad across steps; auto (default): "
                        "the fastest of a few counts, tried on the last step")
    p.set_defaults(func=handler)


def _add_plan(sub, handler: Callable) -> None:
    p = sub.add_parser("plan", help="write a plan JSON")
    _planning_args(p)
    _output_arg(p, "plan JSON to write (- for standard output)", required=True)
    p.add_argument("--timings", action="store_true", help="also write meta.solve_seconds (wall clock: not reproducible)")
    p.set_defaults(func=handler)


def _add_validate(sub, handler: Callable) -> None:
    p = sub.add_parser("validate", help="check a plan JSON with the independent validator")
    p.add_argument("trace")
    p.add_argument("--plan", required=True)
    p.set_defaults(func=handler)


def _add_info(sub, handler: Callable) -> None:
    p = sub.add_parser("info", help="summarise a trace (sizes, M_R, peaks) or a hardware config (area, power)")
    p.add_argument("trace", nargs="?", help="trace to summarise; without it, --hw's area and power budget")
    p.add_argument("--hw", help="round sizes up to this hardware's alignment; alone: its area and power budget")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a hardware field, e.g. dram.device=ddr5-4800 (to see another DRAM part)")
    p.set_defaults(func=handler)


def _add_import(sub, handler: Callable) -> None:
    p = sub.add_parser("import", help="import an ONNX model as a trace")
    p.add_argument("model", help="ONNX file")
    p.add_argument("-o", "--output", help="trace to write (.json or .json.gz)")
    p.add_argument("--dtype", default="int8", choices=("int8", "fp16", "fp32"), help="dtype of float tensors")
    p.add_argument("--dim", action="append", metavar="NAME=N",
                   help="bind a symbolic dimension (repeatable): --dim batch=1 --dim seq=128")
    p.add_argument("--training", action="store_true",
                   help="build the training graph: forward, backward (saved activations, gradients) and SGD update")
    p.set_defaults(func=handler)


def _add_dse(sub, handler: Callable) -> None:
    p = sub.add_parser("dse", help="design-space exploration: sweep hardware keys, budgets and planners")
    p.add_argument("trace", nargs="+", help="one or more traces (names in traces/ or files)")
    _hw_arg(p)
    p.add_argument("--sweep", action="append", metavar="KEY=SPEC",
                   help="a hardware key or 'budget' with A..B:xF (geometric), A..B:+S (linear) or V1,V2,...; "
                        "repeat for a cartesian product, e.g. scratchpad.size=64KiB..8MiB:x2")
    _pipelines_arg(p, DEFAULT_PIPELINE)
    _option_arg(p)
    p.add_argument("--max-points", type=int, default=2000, help="refuse a sweep of more points (default 2000)")
    p.add_argument("--budget", help="budget of every point unless 'budget' is swept (size or MR, MH, MP)")
    p.add_argument("--allow-oversize", action="store_true",
                   help="plan budgets larger than the scratchpad.size of a point (else such a point is infeasible)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="fixed hardware override")
    p.add_argument("--jobs", type=int, default=1, help="parallel workers (processes, or dask workers)")
    p.add_argument("--backend", default="local", choices=("local", "dask"), help="where points run")
    p.add_argument("--scheduler", help="dask scheduler address (tcp://host:8786); default: a LocalCluster")
    _output_arg(p, "results file; .csv and .json are both written (default dse-results.csv)", "dse-results.csv")
    p.add_argument("--cache-dir", default=".npusim-cache", help="cache of finished points (resumable)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--plot", action="store_true", help="also draw OUT-curves and OUT-pareto figures")
    p.add_argument("--html", metavar="FILE", help="also write one self-contained page: the figures and a sortable "
                                                  "row per point")
    p.add_argument("--format", default="png,svg", help="figure formats with --plot: png, svg or png,svg")
    p.add_argument("--progress", action="store_true", help="show the progress bar even when not on a terminal")
    p.add_argument("--timings", action="store_true", help="also write the solve_seconds column (wall clock: not reproducible)")
    p.set_defaults(func=handler)


def _add_compare(sub, handler: Callable) -> None:
    p = sub.add_parser("compare", help="compare planner pipelines on one trace and hardware")
    p.add_argument("trace", help="trace file or name in traces/")
    _hw_arg(p)
    _pipelines_arg(p, None)
    _option_arg(p)
    p.add_argument("--budget", help="scratchpad budget: a size or MR, MH, MP; default: the scratchpad size")
    p.add_argument("--allow-oversize", action="store_true", help="plan for a budget (or simulate a plan) larger than the hardware's scratchpad.size; the report says so")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a hardware field")
    p.add_argument("--format", default="text", choices=("text", "csv", "json"))
    p.add_argument("--timings", action="store_true", help="also give each planner's solve time (wall clock: not "
                                                          "reproducible)")
    _output_arg(p, "write the table here instead of printing it")
    p.set_defaults(func=handler)


def _add_plot_plan(sub, handler: Callable) -> None:
    p = sub.add_parser("plot-plan", help="draw a plan's memory-time packing (PNG/SVG)")
    p.add_argument("plan", help="plan JSON (from npusim plan)")
    p.add_argument("--trace", required=True, help="the trace the plan is for")
    p.add_argument("-o", "--output", help="output path without suffix (default: the plan's path)")
    p.add_argument("--format", default="png,svg", help="png, svg or png,svg")
    p.add_argument("--title", help="figure title")
    p.set_defaults(func=handler)


def _add_regress(sub, handler: Callable) -> None:
    p = sub.add_parser("regress", help="check (or --update) the golden traffic files in traces/expected/")
    p.add_argument("--update", action="store_true", help="rewrite the goldens from fresh runs")
    p.add_argument("--only", metavar="PATTERN", help="cases whose id TRACE/HW/PIPELINE/BUDGET matches (glob or substring)")
    p.add_argument("--dir", help="folder of golden files (default: traces/expected)")
    p.set_defaults(func=handler)


def _add_doctor(sub, handler: Callable) -> None:
    p = sub.add_parser("doctor", help="list every problem of plans, traces or hardware configs, with the fix to try")
    p.add_argument("files", nargs="+", help="plan JSON, trace (.json, .json.gz, .onnx) or hardware YAML files")
    p.add_argument("--trace", help="the trace a plan is for")
    p.add_argument("--hw", help="also simulate a valid plan on this hardware (jittered when multi-stream)")
    p.add_argument("--seeds", type=int, default=8, help="jitter seeds tried on a multi-stream plan (default 8)")
    p.set_defaults(func=handler)


def _add_list(sub, handler: Callable) -> None:
    p = sub.add_parser("list", help="list planners, hardware configs and traces")
    p.add_argument("--planner", metavar="NAME", help="describe one planner: its options, with types, defaults and "
                   "bounds, and what it reads and writes")
    p.set_defaults(func=handler)


def _add_experiment(sub, handler: Callable) -> None:
    p = sub.add_parser("experiment", help="reproduce a paper's evaluation (cosma: COSMA vs the four schemes)")
    p.add_argument("name", choices=("cosma",), help="which experiment")
    p.add_argument("trace", nargs="*", help="traces (default: the human-designed and NAS sets present)")
    p.add_argument("--traces", dest="trace", action=DeprecatedSpelling, current="positional traces",
                   type=lambda text: [t.strip() for t in text.split(",") if t.strip()])
    _hw_arg(p, "hardware the plans are simulated on")
    p.add_argument("--budgets", default="MR,MH,MP", help="subset of MR,MH,MP")
    p.add_argument("--params", action="store_true", help="plan weights too (default: activations only)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per exact solve (default 60)")
    p.add_argument("--dnc-time-limit", type=float, default=120.0, help="seconds per cosma-dnc plan (default 120)")
    p.add_argument("--wall-clock", action="store_true",
                   help="time limits in wall seconds on this machine (default: deterministic solver time, "
                        "so the CSV repeats exactly)")
    _output_arg(p, "folder for cosma.csv and cosma.png (default cosma-experiment)", "cosma-experiment")
    p.add_argument("--no-plot", action="store_true", help="skip the bar chart")
    p.set_defaults(func=handler)


#: Each subcommand's parser builder, in the order ``npusim --help`` lists them.
_SUBCOMMANDS = {
    "simulate": _add_simulate,
    "plan": _add_plan,
    "validate": _add_validate,
    "info": _add_info,
    "import": _add_import,
    "dse": _add_dse,
    "compare": _add_compare,
    "plot-plan": _add_plot_plan,
    "regress": _add_regress,
    "doctor": _add_doctor,
    "list": _add_list,
    "experiment": _add_experiment,
}
