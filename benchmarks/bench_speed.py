"""CPU seconds and peak memory of the workloads users run by the hundred (issue 28), with this
tree against another one in the same run, e.g. the commit a change started from:

    git worktree add /tmp/base 517f421            # or: git archive REF | tar -x -C /tmp/base
    python benchmarks/bench_speed.py /tmp/base                 # the fast workloads, best of 3
    python benchmarks/bench_speed.py /tmp/base --slow --repeat 1   # and the ones taking minutes

Every run is a fresh interpreter (``python -m npusim.cli ...``) with the tree first on
``PYTHONPATH``, so imports, start-up and exit count as a user sees them. CPU is the child's
user + system time and memory its peak resident set, both from ``os.wait4``: CPU seconds do
not grow with the machine's load as wall time does, so the ratio this / other stays
meaningful on a busy machine (runs of the two trees alternate). The growth curves in ops are
``bench_scaling.py``'s; this script prints the issue's target beside each figure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

#: (name, CLI arguments, issue 28's target in CPU seconds, slow: takes minutes)
WORKLOADS = (
    ("quick start", ["simulate", "resnet50", "--hw", "edge-npu"], 1.0, False),
    ("resnet50 at 64 KiB", ["simulate", "resnet50", "--hw", "edge-npu", "--budget", "64KiB"], 3.0, False),
    ("20-point DSE", ["dse", "resnet18", "--hw", "edge-npu", "--sweep", "scratchpad.size=256KiB..5MiB:+256KiB",
                      "--no-cache", "--jobs", "1", "-o", "{tmp}/dse.csv"], None, False),
    ("gpt2-small decode step", ["simulate", "llm:gpt2-small:decode=512", "--hw", "edge-npu"], None, False),
    ("llama-3.2-1b decode step", ["simulate", "llm:llama-3.2-1b:decode=1024", "--hw", "edge-npu"], 2.0, True),
    ("gpt2-small prefill 512 + decode 128",
     ["simulate", "llm:gpt2-small", "--prefill", "512", "--decode", "128", "--hw", "edge-npu"], 10.0, True),
    ("fcn_resnet50 at 64 KiB", ["simulate", "fcn_resnet50", "--hw", "edge-npu", "--budget", "64KiB"], 60.0, True),
)


def tree_env(tree: Path) -> dict:
    """The environment of a run from ``tree``: bytecode cached, as a user's install has it."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(tree: Path, args: list[str]) -> tuple[float, float]:
    """(CPU seconds, peak MiB) of one run of ``npusim ARGS`` from ``tree``."""
    env = tree_env(tree)
    child = subprocess.Popen([sys.executable, "-m", "npusim.cli", *args], cwd=tree, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    error = child.stderr.read().decode(errors="replace").strip().splitlines()
    child.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{tree}: npusim {' '.join(args)} failed: {error[-1] if error else status}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def best_of(runs: dict[str, tuple[Path, list[str]]], repeat: int) -> dict[str, tuple[float, float]]:
    """Each labelled run's (CPU seconds, peak MiB) with the least CPU over ``repeat`` rounds, the
    runs alternating within a round (so a change of load touches them alike)."""
    best = {label: (float("inf"), 0.0) for label in runs}
    for _ in range(repeat):
        for label, (tree, cli) in runs.items():
            cpu, mib = measure(tree, cli)
            if cpu < best[label][0]:
                best[label] = (cpu, mib)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the other source tree (e.g. the base commit's worktree)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tree; the least CPU counts (default 3)")
    parser.add_argument("--slow", action="store_true", help="also the workloads that take minutes")
    parser.add_argument("--only", help="comma-separated substrings of workload names")
    args = parser.parse_args(argv)
    wanted = [w for w in WORKLOADS if (args.slow or not w[3])
              and (not args.only or any(s in w[0] for s in args.only.split(",")))]
    print(f"{'workload':38s} {'this CPU s':>10s} {'other CPU s':>11s} {'ratio':>6s} {'this MiB':>9s} "
          f"{'other MiB':>9s} {'target':>7s}")
    for tree in (HERE, args.other.resolve()):  # compile both trees' bytecode before timing anything
        subprocess.run([sys.executable, "-c", "import npusim.cli, npusim.registry as r; r.default_registry()"],
                       cwd=tree, env=tree_env(tree), check=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, cli, target, _ in wanted:
            cli = [a.format(tmp=tmp) for a in cli]
            best = best_of({"this": (HERE, cli), "other": (args.other.resolve(), cli)}, args.repeat)
            (this, this_mib), (other, other_mib) = best["this"], best["other"]
            print(f"{name:38s} {this:10.2f} {other:11.2f} {this / other:6.3f} {this_mib:9.0f} {other_mib:9.0f} "
                  f"{'' if target is None else f'<= {target:g}':>7s}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
