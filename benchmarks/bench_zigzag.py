"""npusim against ZigZag on four of ZigZag's bundled accelerators (issue 30): ResNet-18's 21
conv/FC layers, each alone, on the mirrored configs ``hw_configs/zigzag-*.yaml`` — latency in
total and on the worst layer that is not DRAM-bound, on-chip energy in total and by level, DRAM
energy — against ZigZag 3.9.1's results (``tests/fixtures/zigzag/``, made by
``scripts/zigzag_reference.py``; ``npusim/testing/zigzag.py`` computes the rows).

    python benchmarks/bench_zigzag.py                  # after: each design on its mirror (~1 min)
    python benchmarks/bench_zigzag.py --before         # and before: each on tpu-like's 32x32 R x C rule
    python benchmarks/bench_zigzag.py meta_prototype   # one design

Each table's ``ratio`` is npusim / ZigZag; the targets (``TARGETS``) and the rows that miss them
are listed under it. Ratios only: no wall-clock figure.
"""

from __future__ import annotations

import argparse

from npusim.testing import zigzag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("designs", nargs="*", help=f"ZigZag accelerators (default: {', '.join(zigzag.available())})")
    parser.add_argument("--before", action="store_true",
                        help="also each design on tpu-like (an R x C core with PE registers: the mirror before "
                             "cores.unroll and cores.levels)")
    args = parser.parse_args(argv)
    t = zigzag.TARGETS
    print(f"targets: latency ±{t['latency_total']:.0%} total, ±{t['latency_layer']:.0%} per layer not DRAM-bound; "
          f"on-chip energy ±{t['onchip_total']:.0%} total, ±{t['onchip_level']:.0%} per level\n")
    latencies = {}
    for design in args.designs or zigzag.available():
        runs = (("before", "tpu-like"), ("after", None)) if args.before else (("after", None),)
        for label, hardware in runs:
            result = zigzag.compare(design, hardware=hardware)
            latencies[design, label] = result["total"]["latency"]
            print(f"[{label}] " + zigzag.table(result))
            missed = zigzag.misses(result)
            print("  misses: " + ("; ".join(missed) if missed else "none") + "\n")
    for label in ("before", "after"):
        pairs = {d: v for (d, lab), v in latencies.items() if lab == label}
        if len(pairs) < 2:
            continue
        order = lambda i: sorted(pairs, key=lambda d: pairs[d][i])  # noqa: E731
        print(f"[{label}] latency order, fastest first: ZigZag {' < '.join(order(1))}; npusim {' < '.join(order(0))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
