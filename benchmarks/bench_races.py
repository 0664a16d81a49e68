"""Race detection coverage of the jittered simulator on seeded unsafe multi-stream plans.

    python benchmarks/bench_races.py [--graphs 30] [--seeds 32] [--jitter 4]

For each of ``--graphs`` seeded random DAGs (``npusim.graph.random_dags``, 2-4 streams on as
many cores) a safe plan is made with ``default+streams-rr+mindspore-mo:size,best-fit``
(multi-stream safe by the MindSpore safety relation) and one bug of each kind is injected:

- ``reuse``: two tensors the safety relation marks unsafe (their ops are unordered across
  streams) but whose step lifetimes do not overlap get the same scratchpad offset (what a
  single-stream allocator does);
- ``early_free``: a load into a region stops waiting for the previous occupant's last readers
  (the region is freed before they are done);
- ``missing_semaphore``: an op stops waiting for the command that fills one of its inputs
  (a load, or its producer on another stream).

An injection counts only if it is a real race: no chain of semaphores and in-order queues
still orders the two accesses (``ordered``); otherwise another candidate is drawn.

Each unsafe Program is simulated without jitter, then with jitter seeds 1..``--seeds`` until
the tagged scratchpad raises a SimulationError; the safe plan runs every seed and must never
be flagged. Reported: catch rate, caught without jitter, and seeds needed (mean, max).
"""

from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import replace

from npusim.errors import SimulationError
from npusim.graph import random_dags
from npusim.graph.safety import safety_relation
from npusim.hw.config import Hardware
from npusim.plan.lower import lower
from npusim.sim.engine import simulate
from npusim.workflow import plan_graph

SAFE_PIPELINE = "default+streams-rr+mindspore-mo:size,best-fit"
KINDS = ("reuse", "early_free", "missing_semaphore")


def hardware(streams: int) -> Hardware:
    base = Hardware()
    return replace(base, streams=streams, cores=replace(base.cores, count=streams))


def first_catch(program, plan, graph, hw, seeds: int, jitter: float) -> int | None:
    """0 if caught without jitter, k if first caught by jitter seed k, None if never."""
    for seed in range(seeds + 1):
        try:
            simulate(program, plan, graph, hw, jitter=jitter if seed else 0.0, seed=seed)
        except SimulationError:
            return seed
    return None


def ordered(program, before: int, after: int) -> bool:
    """Does command ``after`` always start after command ``before`` has completed?

    Edges: a waiter starts after what it waits for completes; a compute queue runs one
    command after another; a DMA queue only *issues* in order (its channels overlap), so from
    a DMA command its queue successor is ordered only after its own start, not completion."""
    waiters = {}
    for c in program.commands:
        for w in c.waits:
            waiters.setdefault(w, []).append(c.id)
    next_in_queue = {}
    for ids in program.queues.values():
        for a, b in zip(ids, ids[1:]):
            next_in_queue[a] = b
    first = list(waiters.get(before, []))
    if program.commands[before].kind == "compute" and before in next_in_queue:
        first.append(next_in_queue[before])
    seen, todo = set(first), list(first)
    while todo:
        x = todo.pop()
        if x == after:
            return True
        for y in waiters.get(x, []) + ([next_in_queue[x]] if x in next_in_queue else []):
            if y not in seen:
                seen.add(y)
                todo.append(y)
    return after in seen


def inject_reuse(plan, graph, rng):
    relation = safety_relation(graph, list(plan.order), list(plan.streams))
    by_tensor = {}
    for i, r in enumerate(plan.residencies):
        by_tensor.setdefault(r.tensor, i)
    candidates = []
    for a, b in sorted(relation.pairs()):
        if a in by_tensor and b in by_tensor:
            ra, rb = plan.residencies[by_tensor[a]], plan.residencies[by_tensor[b]]
            if ra.last < rb.first or rb.last < ra.first:  # disjoint in step order: a 1-stream allocator reuses
                candidates.append((abs(ra.first - rb.first), by_tensor[a], by_tensor[b]))
    rng.shuffle(candidates)
    for _, i, j in candidates:
        residencies = list(plan.residencies)
        residencies[j] = replace(residencies[j], offset=residencies[i].offset)
        if residencies[j].offset + residencies[j].size > plan.capacity:
            continue
        unsafe = replace(plan, residencies=tuple(residencies))
        program = lower(unsafe, graph)
        users = {r: [c.id for c in program.commands if any(a.residency == r for a in c.reads + c.writes)]
                 for r in (i, j)}
        if not (all(ordered(program, u, v) for u in users[i] for v in users[j])
                or all(ordered(program, v, u) for u in users[i] for v in users[j])):
            return unsafe, program
    return None


def _writers(program):
    return {a.residency: c.id for c in program.commands for a in c.writes}


def _drop_wait(program, command_id: int, wait: int):
    commands = list(program.commands)
    cmd = commands[command_id]
    commands[command_id] = replace(cmd, waits=tuple(w for w in cmd.waits if w != wait))
    return replace(program, commands=tuple(commands))


def inject_early_free(plan, graph, rng):
    program = lower(plan, graph)
    options = []
    for c in program.commands:
        if c.kind != "load":
            continue
        mine = {a.residency for a in c.writes}
        for w in c.waits:
            other = program.commands[w]
            if other.kind == "compute" and not mine & {a.residency for a in other.reads + other.writes}:
                options.append((c.id, w))  # waits for a previous occupant's user: a release
    return _real_race(plan, program, options, rng)


def _real_race(plan, program, options, rng):
    """The first dropped wait (command, wait) whose order no other semaphore still implies."""
    rng.shuffle(options)
    for command, wait in options:
        unsafe = _drop_wait(program, command, wait)
        if not ordered(unsafe, wait, command):
            return plan, unsafe
    return None


def inject_missing_semaphore(plan, graph, rng):
    program = lower(plan, graph)
    writer = _writers(program)
    options = [(c.id, writer[a.residency]) for c in program.commands if c.kind == "compute"
               for a in c.reads if writer.get(a.residency) in c.waits]
    return _real_race(plan, program, options, rng)


INJECT = {"reuse": inject_reuse, "early_free": inject_early_free, "missing_semaphore": inject_missing_semaphore}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=32, help="jitter seeds tried per unsafe plan")
    parser.add_argument("--jitter", type=float, default=4.0, help="largest relative stretch of a compute or DMA")
    args = parser.parse_args()
    rng = random.Random(0)
    found = {k: [] for k in KINDS}
    safe_runs = safe_flagged = 0
    families = sorted(random_dags.GENERATORS)
    made = 0
    for g in range(args.graphs * 3):
        if made == args.graphs:
            break
        graph = random_dags.GENERATORS[families[g % len(families)]](g, rng.randint(8, 40))
        hw = hardware(rng.randint(2, 4))
        plan = plan_graph(graph, hw, SAFE_PIPELINE, 1 << 22)
        if len(set(plan.streams)) < 2:
            continue
        made += 1
        program = lower(plan, graph)
        for seed in range(args.seeds + 1):
            safe_runs += 1
            try:
                simulate(program, plan, graph, hw, jitter=args.jitter if seed else 0.0, seed=seed)
            except SimulationError as error:
                safe_flagged += 1
                print(f"FALSE POSITIVE on {graph.name} seed {seed}: {error}")
        for kind in KINDS:
            injected = INJECT[kind](plan, graph, rng)
            if injected is not None:
                found[kind].append(first_catch(injected[1], injected[0], graph, hw, args.seeds, args.jitter))
    print(f"{made} multi-stream graphs, jitter {args.jitter}, up to {args.seeds} seeds per plan")
    print(f"{'kind':<20} {'plans':>6} {'caught':>7} {'rate':>7} {'no jitter':>10} {'seeds mean':>11} {'seeds max':>10}")
    for kind in KINDS:
        runs = found[kind]
        caught = [s for s in runs if s is not None]
        jittered = [s for s in caught if s > 0]
        mean = f"{statistics.mean(caught):.1f}" if caught else "-"
        print(f"{kind:<20} {len(runs):>6} {len(caught):>7} {len(caught) / max(len(runs), 1):>7.0%} "
              f"{sum(1 for s in caught if s == 0):>10} {mean:>11} {max(caught, default=0):>10}"
              + (f"   (jitter alone found {len(jittered)})" if jittered else ""))
    print(f"{'safe plans':<20} {safe_runs:>6} runs, flagged {safe_flagged}")


if __name__ == "__main__":
    main()
