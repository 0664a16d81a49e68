"""Seeded unsafe multi-stream plans: a safe plan, and the same with one race injected.

Used by ``benchmarks/bench_races.py`` and ``tests/test_races.py`` to measure and check race
detection (``npusim.sim.races``, the jittered timed run). Kinds of bug:

- ``reuse``: two tensors the safety relation marks unsafe (their ops are unordered across
  streams) but whose step lifetimes do not overlap get the same scratchpad offset (what a
  single-stream allocator does);
- ``early_free``: a load into a region stops waiting for the previous occupant's last readers
  (the region is freed before they are done);
- ``missing_semaphore``: an op stops waiting for the command that fills one of its inputs
  (a load, or its producer on another stream).

An injection counts only if it is a real race: no chain of semaphores and in-order queues
still orders the two accesses (``ordered``, a plain graph search independent of the
detector's vector clocks); otherwise another candidate is drawn.
"""

from __future__ import annotations

import random
from dataclasses import replace

from npusim.hw.config import Hardware
from npusim.plan.lower import lower
from npusim.plan.safety import safety_relation
from npusim.testing import random_dags
from npusim.workflow import plan_graph

SAFE_PIPELINE = "default+streams-rr+mindspore-mo:size,best-fit"
KINDS = ("reuse", "early_free", "missing_semaphore")


def hardware(streams: int) -> Hardware:
    base = Hardware()
    return replace(base, streams=streams, cores=replace(base.cores, count=streams))


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


def inject_reuse(plan, graph, hw, rng):
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
        program = lower(unsafe, hw)
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


def inject_early_free(plan, graph, hw, rng):
    program = lower(plan, hw)
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


def inject_missing_semaphore(plan, graph, hw, rng):
    program = lower(plan, hw)
    writer = _writers(program)
    options = [(c.id, writer[a.residency]) for c in program.commands if c.kind == "compute"
               for a in c.reads if writer.get(a.residency) in c.waits]
    return _real_race(plan, program, options, rng)


INJECT = {"reuse": inject_reuse, "early_free": inject_early_free, "missing_semaphore": inject_missing_semaphore}


def seeded_cases(graphs: int, rng: random.Random, sizes: tuple[int, int] = (8, 40)):
    """Yield (graph, hw, safe plan, {kind: (plan, program) or None}) for ``graphs`` seeded random
    DAGs whose safe plan uses at least two streams (2-4 streams on as many cores)."""
    families = sorted(random_dags.GENERATORS)
    made = 0
    for g in range(graphs * 3):
        if made == graphs:
            return
        graph = random_dags.GENERATORS[families[g % len(families)]](g, rng.randint(*sizes))
        hw = hardware(rng.randint(2, 4))
        plan = plan_graph(graph, hw, SAFE_PIPELINE, 1 << 22)
        if len(set(plan.streams)) < 2:
            continue
        made += 1
        yield graph, hw, plan, {kind: INJECT[kind](plan, graph, hw, rng) for kind in KINDS}
