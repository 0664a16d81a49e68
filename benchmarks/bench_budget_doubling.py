"""Latency when the scratchpad doubles: a roomier scratchpad must not run slower.

For every shipped trace on ``edge-npu`` (or ``--hw``), simulate the default pipeline at
scratchpad sizes 2× apart and print latency per size and the largest rise from one size to
the next (the target of issue 27: no rise above 1 %).

``--traces`` takes trace names or files (``.json`` or ``.onnx``, imported on the fly);
``--models unseen`` adds the architectures outside the shipped set that
``benchmarks/models/unseen.py`` builds (EfficientNet-B0, Swin-T, MobileNetV3-Large), written
to a temporary directory and imported like any ONNX file.

    python benchmarks/bench_budget_doubling.py [--hw mid-npu] [--sizes 1MiB,2MiB,...]
        [--traces resnet18,path/to/model.onnx] [--models unseen] [--option placement_lookahead=0]
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
from pathlib import Path

from npusim.util.resources import list_resources
from npusim.util.units import parse_size
from npusim.workflow import DEFAULT_PIPELINE, load_graph, load_hw, plan_graph, simulate_plan

SIZES = "512KiB,1MiB,2MiB,4MiB,8MiB,16MiB"


def unseen_model_paths(out_dir: str) -> list[str]:
    """Write the models of ``benchmarks/models/unseen.py`` into ``out_dir``; their paths."""
    spec = importlib.util.spec_from_file_location("unseen", Path(__file__).parent / "models" / "unseen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [str(p) for p in module.write_models(out_dir)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hw", default="edge-npu")
    parser.add_argument("--sizes", default=SIZES)
    parser.add_argument("--traces", default="", help="comma-separated trace names or .json/.onnx files")
    parser.add_argument("--models", choices=["unseen"], help="add the models of benchmarks/models/unseen.py")
    parser.add_argument("--pipeline", default=DEFAULT_PIPELINE)
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="planner option, e.g. placement_lookahead=0 (the arena before issue 27's fix)")
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    bad = [o for o in args.option if "=" not in o]
    if bad:
        parser.error(f"--option {bad[0]!r}: expected KEY=VALUE")
    options = dict(o.split("=", 1) for o in args.option)
    traces = args.traces.split(",") if args.traces else ([] if args.models else list_resources("traces"))
    if args.models == "unseen":
        traces += unseen_model_paths(tempfile.mkdtemp(prefix="npusim-unseen-"))
    print(f"{args.hw}, {' '.join([args.pipeline, *args.option])}; sizes " + ", ".join(f"{s // 1024} KiB" for s in sizes))
    worst_overall = 0.0
    for name in traces:
        graph = load_graph(name)
        cycles = []
        for size in sizes:
            hw = load_hw(args.hw, {"scratchpad.size": str(size)})
            try:
                report = simulate_plan(plan_graph(graph, hw, args.pipeline, options=options), hw, validated=True)
            except Exception as exc:  # noqa: BLE001 — report the point and go on
                cycles.append(None)
                print(f"{name} at {size // 1024} KiB: {type(exc).__name__}: {str(exc)[:100]}")
                continue
            cycles.append(report.cycles)
        rises = [b / a - 1 for a, b in zip(cycles, cycles[1:]) if a and b]
        worst = max(rises, default=0.0)
        worst_overall = max(worst_overall, worst)
        print(f"{Path(name).stem:18s} " + " ".join(f"{c / 1e6:9.3f}M" if c else "      n/a" for c in cycles)
              + f"   worst rise {worst:+.2%}", flush=True)
    print(f"worst rise over all traces: {worst_overall:+.2%} (target <= +1%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
