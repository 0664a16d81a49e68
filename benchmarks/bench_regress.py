"""CPU seconds of ``npusim regress`` (issue 28's budget: 200 s), in total and by pipeline, in one
process as the command runs its cases (``regress.check``):

    python benchmarks/bench_regress.py                         # the goldens as they are
    python benchmarks/bench_regress.py --only 'fcn_resnet50/*'  # a subset (regress --only's glob)
    python benchmarks/bench_regress.py --dram-model banks       # the same cases with their
        # hardware's DRAM timed by that model: what regress would cost were it the configs' own
        # (issue 31). The numbers then differ from the goldens: mismatches are counted, not shown.

Process CPU (``time.process_time``) of each case, from the end of the one before: planning,
validation, lowering and simulation. Run it on an idle machine or beside a base run.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import defaultdict

from npusim.cli import regress
from npusim.workflow import load_hw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=None, help="cases whose id matches (as npusim regress --only)")
    parser.add_argument("--dram-model", choices=("bandwidth", "banks"), default=None,
                        help="time every case's DRAM with this model (default: each config's own)")
    parser.add_argument("--top", type=int, default=12, help="pipelines to list (default 12)")
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    raise SystemExit(main())
