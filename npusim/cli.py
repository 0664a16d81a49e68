"""The ``npusim`` command.

Every user error (an ``NpusimError``) ends in one line on stderr and exit status 2; a plan
that fails validation exits 1. Set NPUSIM_DEBUG=1 to see tracebacks of internal errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from npusim import __version__
from npusim.errors import InternalError, NpusimError
from npusim.progress import Progress, silent
from npusim.workflow import DEFAULT_PIPELINE


def _hw_overrides(pairs: list[str] | None) -> dict:
    overrides = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise NpusimError(f"--set {pair!r}: expected KEY=VALUE, e.g. scratchpad.size=256KiB")
        key, value = pair.split("=", 1)
        if not key.strip():
            raise NpusimError(f"--set {pair!r}: the key before '=' is empty, expected e.g. scratchpad.size=256KiB")
        overrides[key.strip()] = value.strip()
    return overrides


def cmd_info(args) -> int:
    from npusim.workflow import load_graph, load_hw, memory_bounds
    from npusim.graph.analysis import peak_live_bytes, reverse_post_order
    from npusim.units import format_bytes

    if args.trace is None:
        if not args.hw:
            raise NpusimError("info: give a trace (npusim info resnet18) or a hardware config (npusim info --hw edge-npu)")
        from npusim.hw.silicon import budget_text

        print(budget_text(load_hw(args.hw)))
        return 0
    graph = load_graph(args.trace)
    align = load_hw(args.hw).scratchpad.alignment if args.hw else 1
    bounds = memory_bounds(graph, align)
    kinds = {}
    for t in graph.tensors:
        kinds.setdefault(t.kind, [0, 0])
        kinds[t.kind][0] += 1
        kinds[t.kind][1] += t.size
    macs = sum(o.macs for o in graph.ops)
    print(f"{graph.name}: {graph.n_ops} ops, {graph.n_tensors} tensors, {macs:,} MACs")
    for kind in ("input", "weight", "activation", "output"):
        n, size = kinds.get(kind, (0, 0))
        print(f"  {kind:<11} {n:5d} tensors  {size:>14,} B  ({format_bytes(size)})")
    note = f" (sizes rounded up to {align} B)" if align > 1 else ""
    print(f"  M_R              {bounds.m_r:>14,} B  ({format_bytes(bounds.m_r)}), needed by op {bounds.m_r_op!r}{note}")
    print(f"  peak, default    {bounds.m_p:>14,} B  ({format_bytes(bounds.m_p)})")
    rpo = peak_live_bytes(graph, reverse_post_order(graph), align)
    print(f"  peak, rpo        {rpo:>14,} B  ({format_bytes(rpo)})")
    return 0


def cmd_import(args) -> int:
    from npusim.graph.onnx_import import import_onnx
    from npusim.graph.trace_io import save_trace

    graph = import_onnx(args.model, dtype=args.dtype, dims=_parse_dims(args.dim, args.model))
    if args.training:
        from npusim.graph.training import make_training_graph

        graph = make_training_graph(graph)
    out = Path(args.output) if args.output else Path(args.model).with_suffix(".json").name
    save_trace(graph, out)
    what = "training graph: forward, backward, SGD update" if args.training else args.dtype
    print(f"{args.model} -> {out}: {graph.n_ops} ops, {graph.n_tensors} tensors ({what})")
    return 0


def _parse_dims(pairs, model) -> dict[str, int]:
    """``--dim name=N`` flags as a dict (one-line errors naming the flag)."""
    dims = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit() or int(value) <= 0:
            raise NpusimError(f"{model}: --dim {pair!r}: expected NAME=N with N a positive integer, e.g. --dim seq=128")
        dims[name.strip()] = int(value)
    return dims


def _plan_for(args, graph, hw, progress=silent):
    from npusim.plan.io import load_plan
    from npusim.workflow import check_capacity, plan_graph, resolve_budget

    if getattr(args, "plan", None):
        # the plan fixes its pipeline, budget and options: ignoring these would be a silent surprise
        given = [flag for flag, value in (("--planner", args.planner), ("--budget", args.budget),
                                          ("--option", args.option), ("--offchip", args.offchip)) if value]
        if given:
            raise NpusimError(f"--plan {args.plan}: the plan already fixes its pipeline, budget and options; "
                              f"drop {', '.join(given)} (or plan again without --plan)")
        plan = load_plan(args.plan, graph)
        check_capacity(plan.capacity, hw, f"--plan {args.plan}: capacity", allow_oversize=args.allow_oversize)
        return plan
    budget = resolve_budget(args.budget, graph, hw, allow_oversize=args.allow_oversize)
    offchip = getattr(args, "offchip", None)
    if offchip:
        from npusim.registry import default_registry

        registry = default_registry()
        stage = registry.get(offchip).stage
        if stage != "offchip":
            choices = ", ".join(p.name for p in registry.planners() if p.stage == "offchip")
            raise NpusimError(f"--offchip {offchip}: {offchip!r} is a planner of the {stage} stage, "
                              f"expected an off-chip one: {choices}")
    pipeline = (args.planner or DEFAULT_PIPELINE) + (f"+{offchip}" if offchip else "")
    return plan_graph(graph, hw, pipeline, budget, options=_planner_options(getattr(args, "option", None)),
                      progress=progress)


def _check_writable(*flags_and_paths) -> None:
    """Fail before minutes of planning, not after, when an output file cannot be written."""
    for flag, path in flags_and_paths:
        if not path:
            continue
        target = Path(path)
        if target.is_dir():
            raise NpusimError(f"{flag} {path}: is a folder, expected a file name")
        if not target.resolve().parent.is_dir():
            raise NpusimError(f"{flag} {path}: the folder {target.parent} does not exist")


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _planner_options(pairs: list[str] | None) -> dict:
    """``--option KEY=VALUE`` pairs; values are read as YAML scalars (numbers, booleans, text)."""
    import yaml

    options = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise NpusimError(f"--option {pair!r}: expected KEY=VALUE, e.g. time_limit=10")
        key, value = pair.split("=", 1)
        try:
            options[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            options[key.strip()] = value
    return options


def cmd_plan(args) -> int:
    from npusim.plan.io import save_plan
    from npusim.workflow import load_graph, load_hw

    _check_writable(("-o", args.output))
    graph = load_graph(args.trace)
    hw = load_hw(args.hw, _hw_overrides(args.set))
    with Progress("npusim plan") as progress:
        plan = _plan_for(args, graph, hw, progress)
    save_plan(plan, graph, args.output, timings=args.timings)
    spill = plan.offchip_bytes()
    print(f"{args.output}: {graph.name} with {plan.meta.planner}, budget {plan.capacity:,} B, "
          f"{len(plan.residencies)} residencies, {len(plan.transfers)} transfers, "
          f"spill {spill['spill']:,} B, retrieve {spill['retrieve']:,} B")
    return 0


def cmd_validate(args) -> int:
    from npusim.plan.io import load_plan
    from npusim.plan.validate import validate
    from npusim.workflow import load_graph

    graph = load_graph(args.trace)
    plan = load_plan(args.plan, graph)
    found = validate(plan, graph)
    if not found:
        print(f"{args.plan}: valid ({len(plan.residencies)} residencies, {len(plan.transfers)} transfers)")
        return 0
    print(f"{args.plan}: {len(found)} violation(s)")
    for v in found:
        print(f"  {v}")
    return 1


def cmd_simulate(args) -> int:
    from npusim.workflow import load_graph, load_hw, simulate_plan

    _check_writable(("--report", args.report), ("--timeline", args.timeline), ("--breakdown", args.breakdown))
    if args.prefill is not None or args.decode is not None:
        return _simulate_llm(args)
    start = time.perf_counter()
    with Progress("npusim simulate") as progress:
        graph = load_graph(args.trace)
        hw = load_hw(args.hw, _hw_overrides(args.set))
        plan = _plan_for(args, graph, hw, progress)
        report = simulate_plan(plan, graph, hw, jitter=args.jitter_amount if args.jitter is not None else 0.0,
                               seed=args.jitter, source=args.plan or "plan", progress=progress)
    wall = time.perf_counter() - start
    if args.report:
        report.save_json(args.report)
    if args.timeline:
        report.save_chrome_trace(args.timeline)
    if args.breakdown:
        report.save_breakdown_csv(args.breakdown)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1, sort_keys=True))
    else:
        print(report.summary())
        print(f"  wall time      {wall:.2f} s ({report.events / max(wall, 1e-9):,.0f} events/s overall)")
    return 0


def _simulate_llm(args) -> int:
    """``simulate llm:<preset> --prefill P --decode D``: a prefill and sampled decode steps."""
    from npusim.llm_run import run_llm
    from npusim.workflow import load_hw

    model = args.trace.removeprefix("llm:")
    if not args.trace.startswith("llm:") or ":" in model:
        raise NpusimError(f"--prefill/--decode: expected a decoder preset as the trace, e.g. llm:gpt2-small, "
                          f"got {args.trace!r}")
    if args.prefill is None or args.decode is None:
        raise NpusimError("--prefill and --decode go together: the prompt's tokens and the tokens to generate")
    unused = [flag for flag, value in (("--plan", args.plan), ("--timeline", args.timeline),
                                       ("--breakdown", args.breakdown), ("--jitter", args.jitter)) if value]
    if unused:
        raise NpusimError(f"{', '.join(unused)}: not available for a multi-step LLM run (simulate one step, "
                          f"e.g. {args.trace}:decode={args.prefill}, for those)")
    hw = load_hw(args.hw, _hw_overrides(args.set))
    with Progress("npusim simulate") as progress:
        report = run_llm(model, hw, prefill=args.prefill, decode=args.decode, batch=args.batch,
                         pipeline=args.planner or DEFAULT_PIPELINE, budget=args.budget,
                         options=_planner_options(getattr(args, "option", None)), samples=args.samples,
                         progress=progress)
    if args.report:
        from npusim.atomic_io import atomic_write_text

        atomic_write_text(args.report, json.dumps(report.to_dict(), indent=1, sort_keys=True) + "\n")
    print(json.dumps(report.to_dict(), indent=1, sort_keys=True) if args.json else report.summary())
    return 0


def cmd_dse(args) -> int:
    from npusim import dse
    from npusim.compare import parse_pipelines

    sweeps = [dse.parse_sweep(text) for text in args.sweep or []]
    pipelines = parse_pipelines(args.planners)
    count = len(args.trace) * len(pipelines)
    for sweep in sweeps:
        count *= len(sweep.values)
    if count > args.max_points:  # a range step typed wrong: say so before hours of simulation
        raise NpusimError(f"the sweep has {count:,} points ({len(args.trace)} trace(s) x "
                          f"{' x '.join(str(len(s.values)) for s in sweeps) or '1'} setting(s) x "
                          f"{len(pipelines)} pipeline(s)), above --max-points {args.max_points:,}; "
                          "narrow the ranges or raise --max-points")
    points = dse.make_points(args.trace, args.hw, sweeps, pipelines, budget=args.budget,
                             base_overrides=_hw_overrides(args.set), allow_oversize=args.allow_oversize)
    if args.plot:
        from npusim.plot import parse_formats, require_matplotlib

        formats = parse_formats(args.format)
        require_matplotlib()  # fail before the sweep, not after it
    result = dse.run_sweep(points, jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                           cache_dir=None if args.no_cache else args.cache_dir,
                           progress=True if args.progress else None)
    csv_path, json_path = dse.write_results(result, args.out, sweeps, timings=args.timings)
    print(dse.summary(result))
    print(f"wrote {csv_path} and {json_path}")
    if args.plot:
        from npusim.plot import plot_dse_curves, plot_pareto

        stem = str(Path(args.out).with_suffix(""))
        swept = [s.key for s in sweeps]
        written = plot_dse_curves(result.rows, f"{stem}-curves", swept, formats)
        written += plot_pareto(result.rows, f"{stem}-pareto", formats)
        print("wrote " + ", ".join(str(p) for p in written))
    return 0


def cmd_compare(args) -> int:
    from npusim.compare import compare_planners, format_rows, parse_pipelines
    from npusim.workflow import load_graph, load_hw

    graph = load_graph(args.trace)
    hw = load_hw(args.hw, _hw_overrides(args.set))
    rows = compare_planners(graph, hw, parse_pipelines(args.planners), args.budget, trace=args.trace,
                            allow_oversize=args.allow_oversize)
    text = format_rows(rows, args.format)
    if args.output:
        from npusim.atomic_io import atomic_write_text

        atomic_write_text(args.output, text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_plot_plan(args) -> int:
    from npusim.plan.io import load_plan
    from npusim.plot import parse_formats, plot_plan
    from npusim.workflow import load_graph

    formats = parse_formats(args.format)
    graph = load_graph(args.trace)
    plan = load_plan(args.plan, graph)
    stem = args.output or str(Path(args.plan).with_suffix(""))
    written = plot_plan(plan, graph, stem, formats, title=args.title)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def cmd_regress(args) -> int:
    from npusim import regress

    if args.update:
        cases, files = regress.update_goldens(args.dir, args.only)
        print(f"updated {cases} case(s) in {len(files)} golden file(s)")
        return 0
    total, done = len(regress.load_goldens(args.dir, args.only)), [0]
    with Progress("npusim regress") as progress:
        def tick(case) -> None:
            done[0] += 1
            progress("golden cases", done[0], total, f"{case.trace}/{case.hardware}/{case.pipeline}/{case.budget}")

        checked, mismatches = regress.check(args.dir, args.only, progress=tick)
    if mismatches:
        print(regress.format_diff(mismatches))
        failed = len({m.case for m in mismatches})
        print(f"{checked} golden case(s): {failed} mismatched, {len(mismatches)} number(s) moved; "
              "if the change is intended: npusim regress --update")
        return 1
    print(f"{checked} golden case(s): all match")
    return 0


def cmd_experiment(args) -> int:
    from npusim.experiment import run_cosma_experiment

    traces = [t.strip() for t in args.traces.split(",") if t.strip()] if args.traces else None
    budgets = tuple(b.strip().upper() for b in args.budgets.split(",") if b.strip())
    result = run_cosma_experiment(traces, args.hw, params=args.params, budgets=budgets,
                                  time_limit=args.time_limit, dnc_time_limit=args.dnc_time_limit,
                                  wall_clock=args.wall_clock, out=Path(args.out), plot=not args.no_plot)
    s = result["summary"]
    red = s["mean_reduction_at_mr"]
    print(f"mean reduction of non-compulsory bytes vs the best scheme at M_R (human set): "
          f"{'n/a' if red is None else f'{red:.1%}'}")
    med = s["median_cosma_seconds"]
    print(f"median cosma time to solution (human set): {'n/a' if med is None else f'{med:.2f} s'}")
    for trace, sec in s["max_dnc_seconds_per_nas_net"].items():
        print(f"cosma-dnc on {trace}: at most {sec:.1f} s per budget")
    print("wrote " + ", ".join(str(p) for p in result["paths"]))
    return 0


def cmd_doctor(args) -> int:
    from npusim.doctor import diagnose

    problems = diagnose(args.files, trace=args.trace, hw=args.hw, seeds=args.seeds)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s) found" if problems else "no problems found")
    return 1 if problems else 0


def cmd_list(args) -> int:
    from npusim.hw.loader import list_hardware
    from npusim.registry import default_registry
    from npusim.resources import list_resources

    print("planners:")
    for p in default_registry().planners():
        print(f"  {p.name:<31} {p.stage:<9} {p.description}")
    print("hardware:  " + ", ".join(list_hardware()))
    print("traces:    " + ", ".join(list_resources("traces")))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="npusim", description="Cycle-approximate NPU simulator with the memory planner in the loop.")
    parser.add_argument("--version", action="version", version=f"npusim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def planning_args(p):
        p.add_argument("trace", help="trace file or name in traces/ (e.g. resnet50); .onnx is imported on the fly")
        p.add_argument("--hw", required=True, help="hardware YAML file or name in hw_configs/ (e.g. edge-npu)")
        p.add_argument("--planner",
                       help=f"planner pipeline (default {DEFAULT_PIPELINE}; 'tile' streams ops that do not fit), e.g. rpo+arena+lru")
        p.add_argument("--budget", help="scratchpad budget: a size (768KiB) or MR, MH, MP; default: the scratchpad size")
        p.add_argument("--allow-oversize", action="store_true", help="plan for a budget (or simulate a plan) larger than the hardware's scratchpad.size; the report says so")
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a hardware field, e.g. dram.bandwidth=12.8GB/s")
        p.add_argument("--option", action="append", metavar="KEY=VALUE",
                       help="planner option, e.g. time_limit=10, max_tiles=500000, tile_all=true, stream_capacity=32")
        p.add_argument("--offchip", metavar="PLANNER",
                       help="off-chip (DRAM) planner appended to the pipeline: taa, offchip-so, offchip-offsets, offchip-naive")

    p = sub.add_parser("simulate", help="plan (or load a plan) and simulate it")
    planning_args(p)
    p.add_argument("--plan", help="simulate this plan JSON instead of planning (it is validated first)")
    p.add_argument("--report", help="write the report as JSON here")
    p.add_argument("--timeline", help="write a Chrome-trace / Perfetto timeline here")
    p.add_argument("--breakdown", help="write one CSV row per op here: start, end, cycles, bound, stall cycles "
                                       "and what it waited for, bytes in/out")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--jitter", type=_non_negative_int, metavar="SEED", help="stretch compute times randomly (seeded) to explore interleavings")
    p.add_argument("--jitter-amount", type=float, default=0.5, help="largest relative stretch with --jitter (default 0.5)")
    p.add_argument("--prefill", type=int, metavar="P", help="LLM run (trace llm:<preset>): prompt tokens")
    p.add_argument("--decode", type=int, metavar="D", help="LLM run: tokens to generate, one decode step each")
    p.add_argument("--batch", type=int, default=1, help="LLM run: sequences decoded together (default 1)")
    p.add_argument("--samples", type=int, default=5, help="LLM run: decode steps simulated, spread over the D "
                                                          "steps; the others are interpolated (default 5)")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("plan", help="write a plan JSON")
    planning_args(p)
    p.add_argument("-o", "--output", required=True, help="plan JSON to write")
    p.add_argument("--timings", action="store_true", help="also write meta.solve_seconds (wall clock: not reproducible)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("validate", help="check a plan JSON with the independent validator")
    p.add_argument("trace")
    p.add_argument("--plan", required=True)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("info", help="summarise a trace (sizes, M_R, peaks) or a hardware config (area, power)")
    p.add_argument("trace", nargs="?", help="trace to summarise; without it, --hw's area and power budget")
    p.add_argument("--hw", help="round sizes up to this hardware's alignment; alone: its area and power budget")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("import", help="import an ONNX model as a trace")
    p.add_argument("model", help="ONNX file")
    p.add_argument("-o", "--output", help="trace to write (.json or .json.gz)")
    p.add_argument("--dtype", default="int8", choices=("int8", "fp16", "fp32"), help="dtype of float tensors")
    p.add_argument("--dim", action="append", metavar="NAME=N",
                   help="bind a symbolic dimension (repeatable): --dim batch=1 --dim seq=128")
    p.add_argument("--training", action="store_true",
                   help="build the training graph: forward, backward (saved activations, gradients) and SGD update")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("dse", help="design-space exploration: sweep hardware keys, budgets and planners")
    p.add_argument("trace", nargs="+", help="one or more traces (names in traces/ or files)")
    p.add_argument("--hw", required=True, help="hardware YAML file or name in hw_configs/")
    p.add_argument("--sweep", action="append", metavar="KEY=SPEC",
                   help="a hardware key or 'budget' with A..B:xF (geometric), A..B:+S (linear) or V1,V2,...; "
                        "repeat for a cartesian product, e.g. scratchpad.size=64KiB..8MiB:x2")
    p.add_argument("--planners", default=DEFAULT_PIPELINE,
                   help=f"pipelines separated by commas (default {DEFAULT_PIPELINE}, as for simulate)")
    p.add_argument("--max-points", type=int, default=2000, help="refuse a sweep of more points (default 2000)")
    p.add_argument("--budget", help="budget of every point unless 'budget' is swept (size or MR, MH, MP)")
    p.add_argument("--allow-oversize", action="store_true",
                   help="plan budgets larger than the scratchpad.size of a point (else such a point is infeasible)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="fixed hardware override")
    p.add_argument("--jobs", type=int, default=1, help="parallel workers (processes, or dask workers)")
    p.add_argument("--backend", default="local", choices=("local", "dask"), help="where points run")
    p.add_argument("--scheduler", help="dask scheduler address (tcp://host:8786); default: a LocalCluster")
    p.add_argument("--out", default="dse-results.csv", help="results file; .csv and .json are both written")
    p.add_argument("--cache-dir", default=".npusim-cache", help="cache of finished points (resumable)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--plot", action="store_true", help="also draw OUT-curves and OUT-pareto figures")
    p.add_argument("--format", default="png,svg", help="figure formats with --plot: png, svg or png,svg")
    p.add_argument("--progress", action="store_true", help="show the progress bar even when not on a terminal")
    p.add_argument("--timings", action="store_true", help="also write the solve_seconds column (wall clock: not reproducible)")
    p.set_defaults(func=cmd_dse)

    p = sub.add_parser("compare", help="compare planner pipelines on one trace and hardware")
    p.add_argument("trace")
    p.add_argument("--hw", required=True, help="hardware YAML file or name in hw_configs/")
    p.add_argument("--planners", required=True, help="pipelines separated by commas, e.g. default+arena+belady,rpo+arena+lru")
    p.add_argument("--budget", help="scratchpad budget: a size or MR, MH, MP; default: the scratchpad size")
    p.add_argument("--allow-oversize", action="store_true", help="plan for a budget (or simulate a plan) larger than the hardware's scratchpad.size; the report says so")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a hardware field")
    p.add_argument("--format", default="text", choices=("text", "csv", "json"))
    p.add_argument("-o", "--output", help="write the table here instead of printing it")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("plot-plan", help="draw a plan's memory-time packing (PNG/SVG)")
    p.add_argument("plan", help="plan JSON (from npusim plan)")
    p.add_argument("--trace", required=True, help="the trace the plan is for")
    p.add_argument("-o", "--output", help="output path without suffix (default: the plan's path)")
    p.add_argument("--format", default="png,svg", help="png, svg or png,svg")
    p.add_argument("--title", help="figure title")
    p.set_defaults(func=cmd_plot_plan)

    p = sub.add_parser("regress", help="check (or --update) the golden traffic files in traces/expected/")
    p.add_argument("--update", action="store_true", help="rewrite the goldens from fresh runs")
    p.add_argument("--only", metavar="PATTERN", help="cases whose id TRACE/HW/PIPELINE/BUDGET matches (glob or substring)")
    p.add_argument("--dir", help="folder of golden files (default: traces/expected)")
    p.set_defaults(func=cmd_regress)

    p = sub.add_parser("doctor", help="list every problem of plans, traces or hardware configs, with the fix to try")
    p.add_argument("files", nargs="+", help="plan JSON, trace (.json, .json.gz, .onnx) or hardware YAML files")
    p.add_argument("--trace", help="the trace a plan is for")
    p.add_argument("--hw", help="also simulate a valid plan on this hardware (jittered when multi-stream)")
    p.add_argument("--seeds", type=int, default=8, help="jitter seeds tried on a multi-stream plan (default 8)")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("list", help="list planners, hardware configs and traces")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("experiment", help="reproduce a paper's evaluation (cosma: COSMA vs the four schemes)")
    p.add_argument("name", choices=("cosma",), help="which experiment")
    p.add_argument("--traces", help="comma-separated traces (default: the human-designed and NAS sets present)")
    p.add_argument("--hw", default="edge-npu", help="hardware the plans are simulated on (default edge-npu)")
    p.add_argument("--budgets", default="MR,MH,MP", help="subset of MR,MH,MP")
    p.add_argument("--params", action="store_true", help="plan weights too (default: activations only)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per exact solve (default 60)")
    p.add_argument("--dnc-time-limit", type=float, default=120.0, help="seconds per cosma-dnc plan (default 120)")
    p.add_argument("--wall-clock", action="store_true",
                   help="time limits in wall seconds on this machine (default: deterministic solver time, "
                        "so the CSV repeats exactly)")
    p.add_argument("--out", default="cosma-experiment", help="folder for cosma.csv and cosma.png")
    p.add_argument("--no-plot", action="store_true", help="skip the bar chart")
    p.set_defaults(func=cmd_experiment)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; map every outcome to one line on stderr and an exit status:
    0 done, 1 a plan or golden check failed, 2 a user error (bad input, a file that cannot be
    read or written, a full disk), 3 an internal error (a bug), 130 interrupted. A closed
    pipe on stdout (``npusim list | head -1``) ends quietly with 0."""
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)
    try:
        args = build_parser().parse_args(argv)
        from npusim.env_knobs import check_all

        check_all()  # NPUSIM_* variables: a bad value is one line here, not a failure deep inside
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe or full disk behind stdout shows here, not at exit
        return code
    except BrokenPipeError:  # before OSError, its base class: the reader stopped reading
        _detach(stdout)
        return 0
    except StdoutError as exc:  # e.g. `npusim list > /dev/full`
        _detach(stdout)
        print(f"npusim: error: cannot write to standard output: {exc}", file=sys.stderr)
        return 2
    except InternalError as exc:  # before NpusimError, its base class: a bug, not the user's doing
        print(f"npusim: internal error: {exc} (set NPUSIM_DEBUG=1 for the traceback and please report it)",
              file=sys.stderr)
        return 3
    except NpusimError as exc:
        print(f"npusim: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path given on the command line: missing, a folder, no permission
        where = f"{exc.filename}: " if exc.filename is not None else ""
        print(f"npusim: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("npusim: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: say so plainly, traceback on request
        from npusim.env_knobs import debug

        if debug():
            raise
        print(f"npusim: internal error: {type(exc).__name__}: {exc} (set NPUSIM_DEBUG=1 for the traceback "
              "and please report it)", file=sys.stderr)
        return 3
    finally:
        sys.stdout = stdout


class StdoutError(Exception):
    """Writing to standard output failed (not a closed pipe): told apart from other OSErrors."""


class _GuardedStdout:
    """sys.stdout while a command runs: its write errors become StdoutError."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.strerror or str(exc)) from None

    def flush(self):
        try:
            return self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.strerror or str(exc)) from None

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _detach(stream) -> None:
    """Point ``stream``'s file descriptor at devnull so the interpreter's flush at exit
    cannot fail again (the recipe of the Python docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (tests, embedding)
        pass


if __name__ == "__main__":
    sys.exit(main())
