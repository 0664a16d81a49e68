"""Lowering (``npusim.plan.lower.lower``) of this tree against another one: the Programs must
be identical field for field, and the CPU seconds of ``lower`` alone are printed side by side.

    git -C . worktree add --detach /tmp/base main
    python benchmarks/bench_lower.py /tmp/base            # every case below
    python benchmarks/bench_lower.py /tmp/base resnet50-64k llama-decode

Each tree runs in a fresh interpreter with itself first on ``PYTHONPATH``; it plans each case
(planning is not what is compared), lowers it three times and keeps the least CPU time
(``time.process_time``, the garbage collector set as the CLI sets it), and writes a digest of
every Program field: the repr of each Command (id, queue, kind, step, op, tensor, cause,
nbytes, dram, cost, reads, writes, waits, streamed) and of every other field but the graph,
which must be the plan's bound graph itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

#: name -> (trace, hardware, pipeline or None for the default, budget or None for the scratchpad)
CASES = {
    "resnet50-default": ("resnet50", "edge-npu", None, None),
    "resnet50-64k": ("resnet50", "edge-npu", None, "64KiB"),
    "mobilenet_v2-128k": ("mobilenet_v2", "edge-npu", None, "128KiB"),
    "gpt2-decode": ("llm:gpt2-small:decode=512", "edge-npu", None, None),
    "bert_tiny-256k": ("bert_tiny", "edge-npu", None, "256KiB"),
    "inception-streams-rr": ("inception_v3", "mid-npu", "default+streams-rr+mindspore-mo:size,best-fit", "1GiB"),
    "googlenet-streams-cat": ("googlenet", "mid-npu", "default+streams-category+mindspore-so:size,first-fit", "1GiB"),
    "mobilenet_v2-taa": ("mobilenet_v2", "edge-npu", "tile+default+arena+belady+taa", None),
    "resnet18-offchip-so": ("resnet18", "edge-npu", "tile+default+arena+belady+offchip-so", None),
    "squeezenet-fuse-tile": ("squeezenet1_0", "edge-npu", "fuse+tile+default+arena+belady", None),
    "llama-decode": ("llm:llama-3.2-1b:decode=1024", "edge-npu", None, None),
}


def worker(names: list[str], out: str) -> None:
    import dataclasses
    import gc
    import time

    from npusim.cli import GC_THRESHOLDS
    from npusim.plan.lower import lower
    from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget

    gc.set_threshold(*GC_THRESHOLDS)
    results = {}
    for name in names:
        trace, hw_name, pipeline, budget = CASES[name]
        graph, hw = load_graph(trace), load_hw(hw_name)
        plan = plan_graph(graph, hw, **({"pipeline": pipeline} if pipeline else {}),
                          budget=resolve_budget(budget, graph, hw, allow_oversize=True) if budget else None)
        seconds = []
        for _ in range(3):
            start = time.process_time()
            program = lower(plan, hw)
            seconds.append(time.process_time() - start)
        digest = {"graph is the plan's": program.graph is plan.bound_graph}
        for f in dataclasses.fields(program):
            if f.name == "commands":
                digest[f.name] = hashlib.sha256("\n".join(map(repr, program.commands)).encode()).hexdigest()
            elif f.name != "graph":
                digest[f.name] = hashlib.sha256(repr(getattr(program, f.name)).encode()).hexdigest()
        results[name] = {"seconds": min(seconds), "commands": len(program.commands), "digest": digest}
    Path(out).write_text(json.dumps(results))


def run(tree: Path, names: list[str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as users have it
        subprocess.run([sys.executable, __file__, "--worker", out.name, *names], cwd=tree, env=env, check=True)
        return json.loads(Path(out.name).read_text())


def main() -> int:
    if sys.argv[1] == "--worker":
        worker(sys.argv[3:], sys.argv[2])
        return 0
    other, names = Path(sys.argv[1]).resolve(), sys.argv[2:] or list(CASES)
    this, that = run(HERE, names), run(other, names)
    differ = 0
    for name in names:
        a, b = this[name], that[name]
        same = a["digest"] == b["digest"] and a["digest"]["graph is the plan's"]
        differ += not same
        print(f"{name:<24} {a['commands']:>7,} commands  {'identical' if same else 'DIFFERENT':<9}  "
              f"this {a['seconds']:.3f} s  other {b['seconds']:.3f} s  ({b['seconds'] / max(a['seconds'], 1e-9):.2f}x)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
