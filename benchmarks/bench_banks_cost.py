"""What ``dram.model: banks`` costs over the bandwidth model (issue 31's speed target: at most
1.3x on the quick start and a 20-point DSE), both measured in this tree in the same run:

    python benchmarks/bench_banks_cost.py              # best of 3 of each, runs alternating
    python benchmarks/bench_banks_cost.py --repeat 5
    python benchmarks/bench_banks_cost.py --llm        # and the LLM decode steps, which stream their
                                                       # weights (the costliest per cycle simulated)

Each run is a fresh interpreter (``bench_speed.best_of`` and ``measure``: ``python -m npusim.cli``, CPU = user +
system of the child, peak resident set), so imports and start-up count as a user sees them.
Prints CPU seconds and peak MiB with each model and the ratio banks / bandwidth.
"""

from __future__ import annotations

import argparse
import tempfile

from bench_speed import HERE, WORKLOADS, best_of

TARGET = 1.3
NAMES = ("quick start", "20-point DSE")
LLM = ("gpt2-small decode step", "llama-3.2-1b decode step")  # (issue 28's budget for the latter: 2 s CPU)
BANKS = ["--set", "dram.model=banks"]
BANDWIDTH = ["--set", "dram.model=bandwidth"]  # (the shipped NPU configs' own model is banks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per model; the least CPU counts (default 3)")
    parser.add_argument("--llm", action="store_true", help="also the LLM decode steps (a minute more)")
    args = parser.parse_args(argv)
    names = NAMES + (LLM if args.llm else ())
    print(f"{'workload':24s} {'bandwidth CPU s':>15s} {'banks CPU s':>11s} {'ratio':>6s} {'bandwidth MiB':>13s} "
          f"{'banks MiB':>9s} {'target':>7s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, cli, _target, _slow in (w for w in WORKLOADS if w[0] in names):
            cli = [a.format(tmp=tmp) for a in cli]
            best = best_of({"bandwidth": (HERE, cli + BANDWIDTH), "banks": (HERE, cli + BANKS)}, args.repeat)
            (bw, bw_mib), (banks, banks_mib) = best["bandwidth"], best["banks"]
            target = f"<= {TARGET}" if name in NAMES else "-"
            print(f"{name:24s} {bw:15.2f} {banks:11.2f} {banks / bw:6.2f} {bw_mib:13.0f} {banks_mib:9.0f} "
                  f"{target:>7s}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
