"""Every core working: each shipped trace on a multi-core config against its 1-core twin.

For every shipped trace, simulate the default pipeline on ``--hw`` (default ``mid-npu``, 2
cores) and on the same config with ``cores.count=1``, both at the config's own scratchpad,
and print the speed-up (1-core cycles / n-core cycles), the per-core utilisation, and the
off-chip bytes of both (the split changes compute only: the plans are the same unless the
tile stage's estimate, which sees the cores, picks other tiles). The issue's target:
resnet50 on mid-npu >= 1.7x.

    python benchmarks/bench_multicore.py [--hw mid-npu] [--traces a,b]
"""

from __future__ import annotations

import argparse

from npusim.errors import NpusimError
from npusim.util.resources import list_resources
from npusim.workflow import load_graph, load_hw, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hw", default="mid-npu")
    parser.add_argument("--traces", default="", help="comma-separated shipped traces (default: all)")
    args = parser.parse_args(argv)
    traces = args.traces.split(",") if args.traces else list_resources("traces")
    many = load_hw(args.hw)
    one = load_hw(args.hw, {"cores.count": "1"})
    print(f"{args.hw} ({many.cores.count} cores) against cores.count=1, default pipeline, own scratchpad")
    print(f"{'trace':<18}{'1-core cycles':>16}{'n-core cycles':>16}{'speed-up':>10}  per-core utilisation   bytes n/1")
    for name in traces:
        graph = load_graph(name)
        try:
            _, single = run(graph, one)
            _, multi = run(graph, many)
        except NpusimError as exc:
            print(f"{name:<18}refused: {exc}")
            continue
        busy = " ".join(f"{u:.0%}" for u in multi.core_utilisation)
        print(f"{name:<18}{single.cycles:>16,.0f}{multi.cycles:>16,.0f}{single.cycles / multi.cycles:>9.2f}x  "
              f"{busy:<22} {multi.offchip_total_bytes / max(single.offchip_total_bytes, 1):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
