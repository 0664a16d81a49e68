"""The tile stage (``planners.tiling.tiler``) of this tree against another one: every op's
chosen tile spec must be identical, and the CPU seconds of the stage are printed side by side.

    git -C . worktree add --detach /tmp/base main
    python benchmarks/bench_tile_search.py /tmp/base              # every case below
    python benchmarks/bench_tile_search.py /tmp/base resnet50     # the cases whose trace starts so

The cases: the 15 shipped traces × hardware {edge-npu, mid-npu, tpu-like} × budgets {the
scratchpad, 256KiB, 64KiB, 32KiB}, and the GPT-2 and Llama decode steps on edge-npu. Each tree
runs in a fresh interpreter with itself first on ``PYTHONPATH`` (bytecode cached, the garbage
collector set as the CLI sets it); for each case it runs the default pipeline up to the end of
the tile stage and records the stage's output, ``ctx.tiling`` (op name -> spec, in op order),
or the error that refused the case (a budget below an op's smallest tile: the CLI's exit 2),
which must then be the same error in both trees. The memo of chosen specs is emptied before
each case, so every case searches afresh. The two trees run side by side (two processes);
the CPU time is the stage's (``time.process_time``), once per case: compare totals, not single
cases (the machine may be shared).

Last run (branch ``tiler`` against main 71672ed, on a loaded two-core machine): 182 cases,
0 different (nine refused at 32KiB in both: fcn_resnet50, nasnetalarge and r2plus1d_18 on
each hardware); tile stage 453.7 s against 533.6 s in all. The low budgets' stage is mostly
the expansion of the tiled graph (``npusim.graph.tiling.expand``), which the search's
speed does not touch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

TRACES = ["bert_tiny", "densenet121", "fcn_resnet50", "googlenet", "hrnet_w18_small", "inception_v3", "mnasnet1_0",
          "mobilenet_v2", "nasnetalarge", "r2plus1d_18", "resnet18", "resnet50", "squeezenet1_0", "transformer",
          "vit_b_16"]
HARDWARE = ["edge-npu", "mid-npu", "tpu-like"]
BUDGETS = [None, "256KiB", "64KiB", "32KiB"]
#: (trace, hardware, budget or None for the scratchpad)
CASES = ([(t, h, b) for t in TRACES for h in HARDWARE for b in BUDGETS]
         + [("llm:gpt2-small:decode=512", "edge-npu", None), ("llm:llama-3.2-1b:decode=1024", "edge-npu", None)])


def case_name(case) -> str:
    trace, hw, budget = case
    return f"{trace} {hw} {budget or 'default'}"


class _Tiled(Exception):
    """Raised after the tile stage: the later stages are not what is compared."""


def worker(names: list[str], out: str) -> None:
    import gc
    import time

    from npusim.cli import GC_THRESHOLDS
    from npusim.errors import NpusimError
    from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget
    from planners.tiling import tiler

    gc.set_threshold(*GC_THRESHOLDS)
    run = tiler.Tiler.run
    seen = {}

    def timed_run(self, ctx):
        start = time.process_time()
        run(self, ctx)
        seen["seconds"] = time.process_time() - start
        seen["tiling"] = [[name, spec] for name, spec in ctx.tiling.items()]
        raise _Tiled

    tiler.Tiler.run = timed_run
    results = {}
    for case in CASES:
        name = case_name(case)
        if name not in names:
            continue
        trace, hw_name, budget = case
        tiler._CHOSEN.clear()  # search afresh in each case
        seen.clear()
        try:
            graph, hw = load_graph(trace), load_hw(hw_name)
            plan_graph(graph, hw, budget=resolve_budget(budget, graph, hw) if budget else None)
            results[name] = {"error": "the tile stage did not run"}
        except _Tiled:
            results[name] = {"tiling": seen["tiling"], "seconds": seen["seconds"]}
        except NpusimError as exc:
            results[name] = {"error": f"{type(exc).__name__}: {exc}", "seconds": seen.get("seconds", 0.0)}
    Path(out).write_text(json.dumps(results))


def run(trees: list[Path], names: list[str]) -> list[dict]:
    """Each tree's results, its worker started in a fresh interpreter, all at once."""
    with tempfile.TemporaryDirectory() as scratch:
        workers = []
        for n, tree in enumerate(trees):
            out = Path(scratch) / f"{n}.json"
            env = {**os.environ, "PYTHONPATH": str(tree)}
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as users have it
            workers.append((subprocess.Popen([sys.executable, __file__, "--worker", str(out), *names], cwd=tree,
                                             env=env), out))
        for worker_process, _ in workers:
            if worker_process.wait():
                raise SystemExit(f"a worker failed (exit {worker_process.returncode})")
        return [json.loads(out.read_text()) for _, out in workers]


def first_difference(a: dict, b: dict) -> str:
    if "error" in a or "error" in b:
        return f"this: {a.get('error', 'tiled')}; other: {b.get('error', 'tiled')}"
    for (name_a, spec_a), (name_b, spec_b) in zip(a["tiling"], b["tiling"]):
        if (name_a, spec_a) != (name_b, spec_b):
            return f"op {name_a}: {spec_a} / op {name_b}: {spec_b}"
    return f"{len(a['tiling'])} / {len(b['tiling'])} ops tiled"


def main() -> int:
    if sys.argv[1] == "--worker":
        worker(sys.argv[3:], sys.argv[2])
        return 0
    other, prefixes = Path(sys.argv[1]).resolve(), sys.argv[2:]
    names = [case_name(c) for c in CASES if not prefixes or any(c[0].startswith(p) for p in prefixes)]
    this, that = run([HERE, other], names)
    differ = 0
    for name in names:
        a, b = this[name], that[name]
        same = a.get("tiling") == b.get("tiling") and a.get("error") == b.get("error")
        differ += not same
        outcome = f"{len(a['tiling'])} ops tiled" if "tiling" in a else "refused"
        print(f"{name:<45} {outcome:<15} {'identical' if same else 'DIFFERENT':<9}  "
              f"this {a.get('seconds', 0):.3f} s  other {b.get('seconds', 0):.3f} s")
        if not same:
            print(f"    {first_difference(a, b)}")
    total_a = sum(this[n].get("seconds", 0) for n in names)
    total_b = sum(that[n].get("seconds", 0) for n in names)
    print(f"{len(names)} cases, {differ} different; tile stage CPU: this {total_a:.2f} s, other {total_b:.2f} s "
          f"({total_b / max(total_a, 1e-9):.2f}x)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
