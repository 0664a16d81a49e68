"""CPU seconds of ``npusim regress`` (issue 28's budget: 200 s), in total and by pipeline, in one
process as the command runs its cases (``regress.check``):

    python benchmarks/bench_regress.py                         # the goldens as they are
    python benchmarks/bench_regress.py --only 'fcn_resnet50/*'  # a subset (regress --only's glob)
    python benchmarks/bench_regress.py --dram-model bandwidth   # the same cases with their
        # hardware's DRAM timed by that model instead of the configs' own (banks, issue 31).
        # The numbers then differ from the goldens: mismatches are counted, not shown.
    python benchmarks/bench_regress.py --beside /tmp/base       # this tree and another, trace by
        # trace in turn (each against its own goldens), and the ratio

Process CPU (``time.process_time``) of each case, from the end of the one before: planning,
validation, lowering and simulation. Two whole runs of identical code can differ by 10 % as the
machine's speed drifts (CP-SAT's deterministic solves, most of the time, take CPU seconds in
proportion): ``--beside`` runs the two trees one trace after the other, in separate processes,
so a drift touches both alike.
"""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench_speed import tree_env
from npusim.cli import regress
from npusim.workflow import load_hw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=None, help="cases whose id matches (as npusim regress --only)")
    parser.add_argument("--dram-model", choices=("bandwidth", "banks"), default=None,
                        help="time every case's DRAM with this model (default: each config's own)")
    parser.add_argument("--top", type=int, default=12, help="pipelines to list (default 12)")
    parser.add_argument("--beside", type=Path, default=None,
                        help="another source tree (e.g. the base commit's worktree): both trees' cases, trace by trace in turn")
    args = parser.parse_args(argv)
    if args.beside:
        return beside(args.beside.resolve(), args.only, args.dram_model)
    if args.dram_model:
        regress._hardware = functools.lru_cache(maxsize=4)(
            lambda name: load_hw(name, {"dram.model": args.dram_model}))
    seconds: dict[str, float] = defaultdict(float)
    last = [time.process_time()]

    def heard(case) -> None:
        now = time.process_time()
        seconds[case.pipeline] += now - last[0]
        last[0] = now

    start = time.process_time()
    checked, mismatches = regress.check(None, args.only, progress=heard)
    total = time.process_time() - start
    cases_off = len({m.case for m in mismatches})
    print(f"{checked} cases, {total:.1f} s CPU" + (f" (DRAM model: {args.dram_model})" if args.dram_model else "")
          + f"; {cases_off} case(s) off their goldens")
    for pipeline, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {s:7.1f} s  {pipeline}")
    return 0


HERE = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"^(\d+) cases, ([\d.]+) s CPU.*; (\d+) case\(s\) off")


def beside(other: Path, only: str | None, dram_model: str | None) -> int:
    """This tree's and ``other``'s regress CPU, one trace at a time from each in turn (this
    script in a process of each tree, on that tree's goldens), with their ratio."""
    # one trace at a time; a glob given (--only) is run whole, in one turn
    patterns = [only] if only else [f"{t}/*" for t in sorted({case.trace for case in regress.load_goldens(None, None)})]
    totals = {"this": [0, 0.0, 0], "other": [0, 0.0, 0]}  # cases, CPU s, cases off
    print(f"{'cases':30s} {'this CPU s':>10s} {'other CPU s':>11s}")
    for pattern in patterns:
        row = {}
        for label, tree in (("this", HERE), ("other", other)):
            command = [sys.executable, str(Path(__file__).resolve()), "--only", pattern, "--top", "0"]
            if dram_model:
                command += ["--dram-model", dram_model]
            done = subprocess.run(command, cwd=tree, env=tree_env(tree), capture_output=True, text=True)
            found = SUMMARY.match(done.stdout.splitlines()[0]) if done.returncode == 0 and done.stdout else None
            if found is None:
                print(f"{tree}: regress of {pattern} failed: {(done.stderr or done.stdout).strip()[-300:]}",
                      file=sys.stderr)
                return 3
            cases, seconds, off = int(found[1]), float(found[2]), int(found[3])
            totals[label][0] += cases
            totals[label][1] += seconds
            totals[label][2] += off
            row[label] = seconds
        print(f"{pattern:30s} {row['this']:10.1f} {row['other']:11.1f}", flush=True)
    (n, this, off), (m, base, base_off) = totals["this"], totals["other"]
    print(f"this tree: {n} cases, {this:.1f} s CPU, {off} off their goldens; other: {m} cases, {base:.1f} s CPU, "
          f"{base_off} off; ratio {this / base:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
