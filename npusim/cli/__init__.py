"""The ``npusim`` command.

Every user error (an ``NpusimError``) ends in one line on stderr and exit status 2; a plan
that fails validation exits 1. Set NPUSIM_DEBUG=1 to see tracebacks of internal errors.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
import time
from pathlib import Path

# Before numpy loads: its OpenBLAS starts a thread per core that spins for ~0.1 s of CPU waiting
# for work (10-20 % of a quick start's CPU, perf: blas_thread_server). npusim does no linear
# algebra worth a second thread; a user's own setting is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import yaml  # noqa: E402 (after the thread setting)

from npusim.util.atomic_io import atomic_write_text
from npusim.cli.parser import build_parser
from npusim.cli.compare import compare_planners, format_rows, parse_pipelines
from npusim.util.env_knobs import check_all, debug
from npusim.errors import InternalError, NpusimError
from npusim.cli.experiment import run_cosma_experiment
from npusim.graph.analysis import peak_live_bytes, reverse_post_order
from npusim.graph.onnx_import import import_onnx
from npusim.graph.trace_io import save_trace
from npusim.graph.training import make_training_graph
from npusim.hw.loader import list_hardware
from npusim.hw.silicon import budget_text, extrapolated_scratchpad
from npusim.plan.io import load_plan, save_plan, write_plan
from npusim.plan.validate import validate
from npusim.plot import (dse_figure, figure_svg, pareto_figure, parse_formats, plot_dse_curves, plot_pareto, plot_plan,
                         require_matplotlib, varies_area)
from npusim.util.progress import Progress, silent
from npusim.registry import ALIASES, default_registry, describe_planner, fused_graph
from npusim.util.resources import list_resources
from npusim.util.units import format_bytes
from npusim.workflow import (DEFAULT_PIPELINE, check_plan_hardware, load_graph, load_hw, memory_bounds, plan_graph,
                             lower_plan, resolve_budget, simulate_program)

#: ``--jitter-amount`` when not given: the random stretch of a jittered command, as a fraction of its time.
DEFAULT_JITTER_AMOUNT = 0.5


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


def _note_unused_dram_settings(keys, model: str) -> None:
    """Banks-only settings given for a run of the bandwidth model: said on standard error."""
    keys = list(keys)
    if model == "banks" or not any(k.startswith("dram.") for k in keys):
        return
    from npusim.dram.model import unused_banks_settings  # lazy: the banks model's modules (~5 ms), not needed here

    note = unused_banks_settings(keys, model)
    if note:
        print(f"npusim: note: {note}", file=sys.stderr)


def _note_extrapolated_scratchpad(hw) -> None:
    """A scratchpad whose banks are smaller than any SRAM macro of the table: said on standard error."""
    note = extrapolated_scratchpad(hw)
    if note:
        print(f"npusim: note: {note}", file=sys.stderr)


def cmd_info(args) -> int:
    if args.trace is None:
        if not args.hw:
            raise NpusimError("info: give a trace (npusim info resnet18) or a hardware config (npusim info --hw edge-npu)")
        hw = load_hw(args.hw, _hw_overrides(args.set))
        _note_extrapolated_scratchpad(hw)
        print(budget_text(hw))
        return 0
    if args.set and not args.hw:
        raise NpusimError("info: --set overrides a hardware config: give one with --hw")
    graph = load_graph(args.trace)
    align = load_hw(args.hw, _hw_overrides(args.set)).scratchpad.alignment if args.hw else 1
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
    fused = memory_bounds(fused_graph(graph, DEFAULT_PIPELINE), align)  # what --budget MR means by default
    if fused.m_r != bounds.m_r:
        print(f"  M_R, fused       {fused.m_r:>14,} B  ({format_bytes(fused.m_r)}), needed by op {fused.m_r_op!r}: "
              f"--budget MR with a fuse pipeline (the default)")
    print(f"  peak, default    {bounds.m_p:>14,} B  ({format_bytes(bounds.m_p)})")
    rpo = peak_live_bytes(graph, reverse_post_order(graph), align)
    print(f"  peak, rpo        {rpo:>14,} B  ({format_bytes(rpo)})")
    return 0


def cmd_import(args) -> int:
    graph = import_onnx(args.model, dtype=args.dtype, dims=_parse_dims(args.dim, args.model))
    if args.training:
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
    if getattr(args, "plan", None):
        # the plan fixes its pipeline, budget and options: ignoring these would be a silent surprise
        given = [flag for flag, value in (("--planner", args.planner), ("--budget", args.budget),
                                          ("--option", args.option), ("--offchip", args.offchip)) if value]
        if given:
            raise NpusimError(f"--plan {args.plan}: the plan already fixes its pipeline, budget and options; "
                              f"drop {', '.join(given)} (or plan again without --plan)")
        plan = load_plan(args.plan, graph)
        check_plan_hardware(plan, hw, f"--plan {args.plan}", graph, allow_oversize=args.allow_oversize)
        return plan
    offchip = getattr(args, "offchip", None)
    if offchip:
        registry = default_registry()
        stage = registry.get(offchip).stage
        if stage != "offchip":
            choices = ", ".join(p.name for p in registry.planners() if p.stage == "offchip")
            raise NpusimError(f"--offchip {offchip}: {offchip!r} is a planner of the {stage} stage, "
                              f"expected an off-chip one: {choices}")
    pipeline = (DEFAULT_PIPELINE if args.planner is None else args.planner) + (f"+{offchip}" if offchip else "")
    options = _planner_options(getattr(args, "option", None))
    budget = resolve_budget(args.budget, graph, hw, allow_oversize=args.allow_oversize, pipeline=pipeline,
                            options=options)
    return plan_graph(graph, hw, pipeline, budget, options=options, progress=progress)


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


def _planner_options(pairs: list[str] | None) -> dict:
    """``--option KEY=VALUE`` pairs; values are read as YAML scalars (numbers, booleans, text)."""
    options = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise NpusimError(f"--option {pair!r}: expected KEY=VALUE, e.g. time_limit=10")
        key, value = pair.split("=", 1)
        try:
            parsed = yaml.safe_load(value)
        except (yaml.YAMLError, RecursionError):
            parsed = value
        if parsed is not None and not isinstance(parsed, (bool, int, float, str)):
            # a YAML date or timestamp (2024-01-01), a list or a mapping: no option takes one
            raise NpusimError(f"--option {_short(pair)}: {_short(value)} reads as a {type(parsed).__name__}; "
                              "expected a number, true/false or a word (quote a date to pass it as text)")
        if isinstance(parsed, float) and not math.isfinite(parsed):
            raise NpusimError(f"--option {_short(pair)}: expected a finite number")
        options[key.strip()] = parsed
    return options


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def cmd_plan(args) -> int:
    to_stdout = args.output == "-"  # the plan on standard output, the summary on standard error
    if not to_stdout:
        _check_writable(("-o", args.output))
    graph = load_graph(args.trace)
    hw = load_hw(args.hw, _hw_overrides(args.set))
    with Progress("npusim plan") as progress:
        plan = _plan_for(args, graph, hw, progress)
    if to_stdout:
        write_plan(plan, sys.stdout, timings=args.timings)
    else:
        save_plan(plan, args.output, timings=args.timings)
    spill = plan.offchip_bytes()
    print(f"{'standard output' if to_stdout else args.output}: {graph.name} with {plan.meta.planner}, budget "
          f"{plan.capacity:,} B, {len(plan.residencies)} residencies, {len(plan.transfers)} transfers, "
          f"spill {spill['spill']:,} B, retrieve {spill['retrieve']:,} B", file=sys.stderr if to_stdout else sys.stdout)
    return 0


def cmd_validate(args) -> int:
    graph = load_graph(args.trace)
    plan = load_plan(args.plan, graph)
    found = validate(plan)
    if not found:
        print(f"{args.plan}: valid ({len(plan.residencies)} residencies, {len(plan.transfers)} transfers)")
        return 0
    print(f"{args.plan}: {len(found)} violation(s)")
    for v in found:
        print(f"  {v}")
    return 1


def cmd_simulate(args) -> int:
    _check_writable(("--report", args.report), ("--timeline", args.timeline), ("--breakdown", args.breakdown),
                    ("--breakdown-tiles", args.breakdown_tiles), ("--html", args.html))
    if args.prefill is not None or args.decode is not None:
        return _simulate_llm(args)
    llm_only = [flag for flag, value in (("--kv-on-chip", args.kv_on_chip), ("--batch", args.batch),
                                         ("--samples", args.samples)) if value is not None]
    if llm_only:  # (never dropped silently: a batch of 4 would print batch 1's numbers)
        hint = "; for one step, the batch goes in the trace: llm:gpt2-small:decode=64:batch=4" \
            if "--batch" in llm_only else ""
        raise NpusimError(f"{', '.join(llm_only)}: for an LLM run (llm:<preset> --prefill P --decode D){hint}")
    if args.jitter_amount is not None and args.jitter is None:
        raise NpusimError("--jitter-amount: for a --jitter SEED run")
    start = time.perf_counter()
    with Progress("npusim simulate") as progress:
        graph = load_graph(args.trace)
        overrides = _hw_overrides(args.set)
        hw = load_hw(args.hw, overrides)
        _note_unused_dram_settings(overrides, hw.dram.model)
        _note_extrapolated_scratchpad(hw)
        # The plan is not kept: its residencies and transfers are freed once it is lowered.
        program = lower_plan(_plan_for(args, graph, hw, progress), hw, source=args.plan or "plan", progress=progress,
                             validated=not args.plan)  # plan_graph validated a plan it made
        if "dram.placement" in overrides and hw.dram.model == "banks" and program.dram_planned:
            print(f"npusim: note: dram.placement is not used: the plan ({program.planner}) gives every tensor its "
                  "DRAM offset", file=sys.stderr)
        amount = args.jitter_amount if args.jitter_amount is not None else DEFAULT_JITTER_AMOUNT
        report = simulate_program(program, hw, jitter=amount if args.jitter is not None else 0.0,
                                  seed=args.jitter, progress=progress)
    wall = time.perf_counter() - start
    if args.report:
        report.save_json(args.report)
    if args.timeline:
        report.save_chrome_trace(args.timeline)
    if args.breakdown:
        report.save_breakdown_csv(args.breakdown)
    if args.breakdown_tiles:
        report.save_breakdown_csv(args.breakdown_tiles, tiles=True)
    if args.html:
        report.save_html(args.html)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1, sort_keys=True))
    else:
        print(report.summary())
        print(f"  wall time      {wall:.2f} s ({report.events / max(wall, 1e-9):,.0f} events/s overall)")
    _keep_until_exit(graph, program, report)
    return 0


#: What ``str.splitlines`` breaks a line at besides "\n": escaped in a user error, whose text
#: may quote the input (a key with a line separator must not split the one error line).
_OTHER_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def _escape_line_breaks(text: str) -> str:
    """``text`` with every line break but "\\n" escaped: a user error is one line, or several
    that the message itself made (a plan's list of violations)."""
    return text.translate(_OTHER_LINE_BREAKS)


def _one_line(exc: BaseException, limit: int = 500) -> str:
    """An exception's message on one line (a compiled kernel's can span many), at most ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kv_on_chip(text: str) -> str | int:
    """--kv-on-chip: none, auto, or a number of layers (checked against the model in run_llm)."""
    value = text.strip().lower()
    if value in ("none", "auto"):
        return value
    try:
        return int(value)
    except ValueError:
        raise NpusimError(f"--kv-on-chip {text!r}: expected none, auto or a number of layers") from None


def _simulate_llm(args) -> int:
    """``simulate llm:<preset> --prefill P --decode D``: a prefill and sampled decode steps."""
    model = args.trace.removeprefix("llm:")
    if not args.trace.startswith("llm:") or ":" in model:
        raise NpusimError(f"--prefill/--decode: expected a decoder preset as the trace, e.g. llm:gpt2-small, "
                          f"got {args.trace!r}")
    if args.prefill is None or args.decode is None:
        raise NpusimError("--prefill and --decode go together: the prompt's tokens and the tokens to generate")
    unused = [flag for flag, value in (("--plan", args.plan), ("--timeline", args.timeline),
                                       ("--breakdown", args.breakdown), ("--breakdown-tiles", args.breakdown_tiles),

                                       ("--jitter", args.jitter),
                                       ("--jitter-amount", args.jitter_amount)) if value is not None]
    if unused:
        raise NpusimError(f"{', '.join(unused)}: not available for a multi-step LLM run (simulate one step, "
                          f"e.g. {args.trace}:decode={args.prefill}, for those)")
    overrides = _hw_overrides(args.set)
    hw = load_hw(args.hw, overrides)
    _note_unused_dram_settings(overrides, hw.dram.model)
    _note_extrapolated_scratchpad(hw)
    with Progress("npusim simulate") as progress:
        from npusim.llm_run import DEFAULT_SAMPLES, run_llm  # lazy: a multi-step LLM run only

        report = run_llm(model, hw, prefill=args.prefill, decode=args.decode,
                         batch=1 if args.batch is None else args.batch,
                         pipeline=DEFAULT_PIPELINE if args.planner is None else args.planner, budget=args.budget, options=_planner_options(getattr(args, "option", None)),
                         samples=DEFAULT_SAMPLES if args.samples is None else args.samples,
                         kv_on_chip=_kv_on_chip(args.kv_on_chip or "auto"), progress=progress)
    if args.report:
        atomic_write_text(args.report, json.dumps(report.to_dict(), indent=1, sort_keys=True) + "\n")
    if args.html:
        from npusim.sim.html_report import llm_html  # lazy: an LLM run's page only

        atomic_write_text(args.html, llm_html(report))
    print(json.dumps(report.to_dict(), indent=1, sort_keys=True) if args.json else report.summary())
    _keep_until_exit(report)
    return 0


def cmd_dse(args) -> int:
    from npusim import dse  # lazy: brings multiprocessing and tqdm (0.2 s); --help and list stay cheap

    sweeps = [dse.parse_sweep(text) for text in args.sweep or []]
    pipelines = parse_pipelines(args.planner)
    count = len(args.trace) * len(pipelines)
    for sweep in sweeps:
        count *= len(sweep.values)
    if count > args.max_points:  # a range step typed wrong: say so before hours of simulation
        raise NpusimError(f"the sweep has {count:,} points ({len(args.trace)} trace(s) x "
                          f"{' x '.join(str(len(s.values)) for s in sweeps) or '1'} setting(s) x "
                          f"{len(pipelines)} pipeline(s)), above --max-points {args.max_points:,}; "
                          "narrow the ranges or raise --max-points")
    overrides = _hw_overrides(args.set)
    points = dse.make_points(args.trace, args.hw, sweeps, pipelines, budget=args.budget,
                             base_overrides=overrides, allow_oversize=args.allow_oversize,
                             options=_planner_options(args.option))
    if not any(s.key == "dram.model" for s in sweeps) and points and points[0].hw is not None:
        _note_unused_dram_settings([*overrides, *(s.key for s in sweeps)], points[0].hw.dram.model)
    if args.plot:
        formats = parse_formats(args.format)
    if args.plot or args.html:
        require_matplotlib()  # fail before the sweep, not after it
    _check_writable(("--html", args.html), ("-o", args.output))  # (as plan and simulate: no folder made)
    result = dse.run_sweep(points, jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                           cache_dir=None if args.no_cache else args.cache_dir,
                           progress=True if args.progress else None)
    csv_path, json_path = dse.write_results(result, args.output, sweeps, timings=args.timings)
    print(dse.summary(result))
    print(f"wrote {csv_path} and {json_path}")
    if args.plot:
        stem = str(Path(args.output).with_suffix(""))
        swept = [s.key for s in sweeps]
        written = plot_dse_curves(result.rows, f"{stem}-curves", swept, formats)
        if varies_area(result.rows):
            written += plot_pareto(result.rows, f"{stem}-pareto", formats, swept)
        else:
            print("no Pareto figure: no swept key changes the silicon area (sweep scratchpad.size or the cores)")
        print("wrote " + ", ".join(str(p) for p in written))
    if args.html:
        from npusim.dse.page import dse_html as dse_page  # lazy: with npusim.dse, which cmd_dse loads lazily

        swept = [s.key for s in sweeps]
        figures = [figure_svg(dse_figure(result.rows, swept))]
        if varies_area(result.rows):
            figures.append(figure_svg(pareto_figure(result.rows, swept)))
        atomic_write_text(args.html, dse_page(result.rows, swept, figures, dse.summary(result)))
        print(f"wrote {args.html}")
    return 0


def cmd_compare(args) -> int:
    graph = load_graph(args.trace)
    overrides = _hw_overrides(args.set)
    hw = load_hw(args.hw, overrides)
    _note_unused_dram_settings(overrides, hw.dram.model)
    _note_extrapolated_scratchpad(hw)
    rows = compare_planners(graph, hw, parse_pipelines(args.planner), args.budget, trace=args.trace,
                            allow_oversize=args.allow_oversize, options=_planner_options(args.option))
    if not args.timings:  # (the same inputs, the same table: wall-clock seconds only when asked for)
        rows = [{k: v for k, v in row.items() if k != "solve_seconds"} for row in rows]
    text = format_rows(rows, args.format)
    if args.output:
        atomic_write_text(args.output, text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_plot_plan(args) -> int:
    formats = parse_formats(args.format)
    stem = args.output or str(Path(args.plan).with_suffix(""))
    _check_writable(*(("-o" if args.output else "the figure", f"{stem}.{fmt}") for fmt in formats))
    graph = load_graph(args.trace)
    plan = load_plan(args.plan, graph)
    found = validate(plan)
    if found:  # (drawn all the same: seeing an overlap is how one debugs it)
        print(f"warning: {args.plan} is not a valid plan ({len(found)} violation(s), the first: {found[0]}; "
              f"npusim validate lists them): drawn as it is", file=sys.stderr)
    written = plot_plan(plan, stem, formats=formats, title=args.title)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def cmd_regress(args) -> int:
    from npusim.cli import regress  # lazy: brings npusim.dse (multiprocessing, tqdm): --help stays cheap

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
    traces = list(args.trace) or None
    budgets = tuple(b.strip().upper() for b in args.budgets.split(",") if b.strip())
    result = run_cosma_experiment(traces, args.hw, params=args.params, budgets=budgets,
                                  time_limit=args.time_limit, dnc_time_limit=args.dnc_time_limit,
                                  wall_clock=args.wall_clock, out=Path(args.output), plot=not args.no_plot)
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
    from npusim.cli.doctor import diagnose  # lazy: a rare command's module

    problems = diagnose(args.files, trace=args.trace, hw=args.hw, seeds=args.seeds)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s) found" if problems else "no problems found")
    return 1 if problems else 0


def cmd_list(args) -> int:
    if args.planner:
        registry = default_registry()
        name = ALIASES.get(args.planner, args.planner)
        print("\n\n".join(describe_planner(registry.get(n.strip())) for n in name.split("+")))
        return 0
    print("planners:")
    for p in default_registry().planners():
        print(f"  {p.name:<31} {p.stage:<9} {p.description}")
    print("named pipelines:")
    for name, pipeline in ALIASES.items():
        print(f"  {name:<31} = {pipeline}")
    print("hardware:  " + ", ".join(list_hardware()))
    print("traces:    " + ", ".join(list_resources("traces")))
    return 0


#: Allocations between collections of the youngest generation in a command (default 700).
#: Planning and lowering allocate millions of small, long-lived objects (tiles, residencies,
#: commands): the default sends the collector through them again and again. Measured with
#: farm-bench on resnet50 at 256 KiB: 5 % less CPU (median of 6 pairs). At 100,000 the
#: llama-3.2-1b decode step still ran 11 young collections (0.15 s of its ~2.4 s CPU); at
#: 1,000,000 one (0.03 s); fcn_resnet50 at 64 KiB kept its peak memory (1,590 and 1,583 MiB
#: against 1,580 and 1,603 MiB before, in two pairs of runs).
GC_THRESHOLD = 1_000_000

#: The collector's three thresholds in a command: the middle generation is collected after
#: 1,000 collections of the youngest (default 10; it was 50). A collection of it goes through
#: every object that survived a young collection since the last one: on a run of millions of
#: tiles (fcn_resnet50 at 64 KiB, 339k tiled ops) each took 0.56 s, 13 of them 7.3 s of
#: 144 s of CPU; at 1,000 none runs there (139 s against 150 s in one pair under load), and
#: the peak memory of that run, of an LLM prefill + decode (289 MiB) and of a 20-point DSE
#: (50 MiB) did not move: a run's garbage is freed by reference counting, not by the
#: collector (``gc.callbacks`` counts the collections of each generation).
GC_THRESHOLDS = (GC_THRESHOLD, 1000, 100)
#: ... except in the commands that plan and simulate many cases in one process (``regress``,
#: ``dse``, ``compare``, ``experiment``): there the young generation is collected every 100,000
#: allocations. A case's simulator holds its arrays in reference cycles (SimPy's environment and
#: processes), freed only by a collection: at 1,000,000, ``npusim regress`` peaked at 2,362 MiB
#: against 1,387 MiB at 100,000, for the same CPU (193.6 and 192.7 s, idle machine, one run each).
MANY_RUNS_GC_THRESHOLDS = (100_000, 1000, 100)

#: The function that runs each subcommand (``npusim.cli.parser`` builds their arguments).
HANDLERS = {
    "simulate": cmd_simulate,
    "plan": cmd_plan,
    "validate": cmd_validate,
    "info": cmd_info,
    "import": cmd_import,
    "dse": cmd_dse,
    "compare": cmd_compare,
    "plot-plan": cmd_plot_plan,
    "regress": cmd_regress,
    "doctor": cmd_doctor,
    "list": cmd_list,
    "experiment": cmd_experiment,
}


#: What a command built, kept until the process ends when it ends by ``os._exit``
#: (``command``): freed when its handler returns, a tiled run's graphs, program and report
#: are hundreds of thousands of objects freed one by one (~60 ms of CPU on an LLM decode
#: step) just before the exit that skips freeing them. None under ``main`` (tests, library
#: callers): nothing is kept.
_kept_until_exit: list | None = None


def _keep_until_exit(*objects) -> None:
    if _kept_until_exit is not None:
        _kept_until_exit.extend(objects)


def main(argv: list[str] | None = None) -> int:
    """``npusim ARGS``: ``_run`` (below) with the garbage collector set for a command's
    allocations (``GC_THRESHOLDS``), the caller's setting restored after."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        return _run(argv)
    finally:
        gc.set_threshold(*before)


def _run(argv: list[str] | None = None) -> int:
    """Run one command; map every outcome to one line on stderr and an exit status:
    0 done, 1 a plan or golden check failed, 2 a user error (bad input, a file that cannot be
    read or written, a full disk), 3 an internal error (a bug), 130 interrupted. A closed
    pipe on stdout (``npusim list | head -1``) ends quietly with 0."""
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)
    try:
        args = build_parser(HANDLERS).parse_args(argv)
        if args.func in (cmd_regress, cmd_dse, cmd_compare, cmd_experiment):
            gc.set_threshold(*MANY_RUNS_GC_THRESHOLDS)
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
        print(f"npusim: internal error: {_one_line(exc)} (set NPUSIM_DEBUG=1 for the traceback and please "
              "report it)", file=sys.stderr)
        return 3
    except NpusimError as exc:
        print(f"npusim: error: {_escape_line_breaks(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path given on the command line: missing, a folder, no permission
        where = f"{exc.filename}: " if exc.filename is not None else ""
        print(f"npusim: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("npusim: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: say so plainly, traceback on request
        if debug():
            raise
        print(f"npusim: internal error: {type(exc).__name__}: {_one_line(exc)} (set NPUSIM_DEBUG=1 for the "
              "traceback and please report it)", file=sys.stderr)
        return 3
    finally:
        sys.stdout = stdout


def command() -> None:
    """The ``npusim`` command (the console script and ``python -m npusim.cli``): ``main``, then
    an exit that skips freeing the objects the command built, as mypy's does (its
    ``util.hard_exit``). A plan, its tiled graph and its program are millions of objects that
    the interpreter would free one by one at exit: about 5 % of the quick start's CPU and
    seconds on a large tiled run, for nothing the user sees. Everything the command writes is
    already closed (results are written atomically, ``npusim.util.atomic_io``), and standard
    output and error are flushed here; tests call ``main``, which returns.

    Hence also: the collector's thresholds are set as ``main`` sets them but not restored (the
    default's 700 would start a young collection of everything the command allocated since
    the last one, for nothing), and what the command built is kept (``_keep_until_exit``)."""
    global _kept_until_exit
    _kept_until_exit = []
    gc.set_threshold(*GC_THRESHOLDS)
    code = _run()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe was already reported by main
            pass
    os._exit(0 if code is None else code)  # as sys.exit(main()) would


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
    command()
