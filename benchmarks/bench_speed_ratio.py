"""Wall time of the README's quick start and a 20-point scratchpad DSE with this checkout against
another source tree in the same run (issue 30's speed target: no more than 1.2x), e.g. main's:

    git archive main | tar -x -C /tmp/main_src
    python benchmarks/bench_speed_ratio.py /tmp/main_src          # best of 3 each, alternating

Each measurement is a fresh interpreter (``python -c``) with the tree first on ``sys.path``, so
imports and per-process caches count as a user sees them; the DSE runs with ``--no-cache`` and one
job. Prints both wall times and the ratio this / other.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
QUICK_START = "from npusim.cli import main; main(['simulate', 'resnet50', '--hw', 'edge-npu'])"
DSE = ("from npusim.cli import main; main(['dse', 'resnet18', '--hw', 'edge-npu', '--sweep', "
       "'scratchpad.size=256KiB..5MiB:+256KiB', '--no-cache', '--jobs', '1', '-o', {out!r}])")


def run(tree: Path, code: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the other source tree (e.g. main exported with git archive)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for label, code in (("quick start", QUICK_START), ("20-point DSE", DSE.format(out=f"{tmp}/dse.csv"))):
            best = {"this": float("inf"), "other": float("inf")}
            for _ in range(args.repeat):
                best["this"] = min(best["this"], run(HERE, code))
                best["other"] = min(best["other"], run(args.other.resolve(), code))
            print(f"{label:14s} this {best['this']:7.2f} s   other {best['other']:7.2f} s   "
                  f"ratio {best['this'] / best['other']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
