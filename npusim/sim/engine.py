"""The SimPy model: command queues driving cores, a DMA engine, shared DRAM and a tagged
scratchpad; it executes a Program and returns a Report.

- Each compute queue (one per stream) runs its commands in order on core ``stream mod
  cores.count`` (a SimPy resource), for ``op_cycles`` (``npusim.sim.costs``).
- Each DMA queue issues in order; a command takes one of ``dma.channels`` channels, pays
  descriptor setup, a per-chunk overhead and the DRAM latency, then moves its bytes (rounded
  up to whole bursts per chunk) at the share of DRAM bandwidth it gets (``SharedBandwidth``).
- Semaphores: a command starts only after every command in its ``waits`` has completed.
- The scratchpad checks every read and write against the residency that should be there;
  with a DRAM layout (``plan.dram``) DRAM contents are checked too (``npusim.sim.dram_memory``).

Time is counted in core clock cycles.
"""

from __future__ import annotations

import time

import simpy

from npusim.errors import SimulationError
from npusim.env_knobs import sim_max_seconds

from npusim.graph.model import Graph
from npusim.hw.config import Hardware
from npusim.plan.lower import Command, Program
from npusim.plan.model import CAUSES, Plan
from npusim.plan.resolve import graph_for_plan
from npusim.sim.bandwidth import SharedBandwidth
from npusim.sim import races
from npusim.sim.jitter import JitterSchedule
from npusim.kernels.render_chunks import burst_count
from npusim.sim.costs import op_cycles, scratchpad_bytes
from npusim.sim.report import Report, TimelineEntry
from npusim.sim.scratchpad import TaggedScratchpad
from npusim.sim.dram_memory import DramContents
from npusim.plan.dram import arena_bytes


#: Resource guards: a run may process at most this many events per command (a correct run
#: needs about ten), and may take at most this much wall time (env NPUSIM_SIM_MAX_SECONDS).
MAX_EVENTS_PER_COMMAND = 256
MIN_EVENT_BUDGET = 10_000
MAX_WALL_SECONDS: float | None = None  # None: NPUSIM_SIM_MAX_SECONDS (default 3600), checked per run


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes and enforces the guards."""

    def __init__(self, max_events: int | None = None, max_seconds: float | None = None) -> None:
        super().__init__()
        self.processed = 0
        self.max_events = max_events
        self.max_seconds = max_seconds
        self.deadline = None if max_seconds is None else time.monotonic() + max_seconds

    def step(self) -> None:
        self.processed += 1
        if self.max_events is not None and self.processed > self.max_events:
            raise SimulationError(f"simulation stopped at cycle {self.now:,.0f}: more than {self.max_events:,} "
                                  f"events (MAX_EVENTS_PER_COMMAND = {MAX_EVENTS_PER_COMMAND} per command); "
                                  "the run is not making progress: please report it with the plan")
        if self.deadline is not None and self.processed % 256 == 0 and time.monotonic() > self.deadline:
            raise SimulationError(f"simulation stopped at cycle {self.now:,.0f} after {self.processed:,} events: "
                                  f"over the wall-clock guard of {self.max_seconds:g} s; raise it with "
                                  "NPUSIM_SIM_MAX_SECONDS or simulate a smaller budget/graph")
        super().step()


class _Machine:
    def __init__(self, program: Program, graph: Graph, hw: Hardware, jitter: float, seed: int | None):
        self.program, self.graph, self.hw = program, graph, hw
        self.env = CountingEnvironment(MAX_EVENTS_PER_COMMAND * len(program.commands) + MIN_EVENT_BUDGET,
                                       MAX_WALL_SECONDS if MAX_WALL_SECONDS is not None else sim_max_seconds())
        self.cores = [simpy.Resource(self.env, capacity=1) for _ in range(hw.cores.count)]
        self.channels = simpy.Resource(self.env, capacity=hw.dma.channels)
        self.dram = SharedBandwidth(self.env, hw.dram_bytes_per_cycle)
        self.scratchpad = TaggedScratchpad(program.capacity)
        self.done = [self.env.event() for _ in program.commands]
        self.users_left = [len(u) for u in program.residency_users]
        self.timeline: list[TimelineEntry] = []
        self.schedule = JitterSchedule(list(program.queues), jitter, seed) if jitter > 0 else None
        self.dram_memory: DramContents | None = None  # set by simulate() for a plan with a DRAM layout
        self.jitter = jitter
        self.core_busy = 0.0
        self.channel_busy = 0.0
        self.energy = dict.fromkeys(("mac", "vector", "scratchpad_read", "scratchpad_write", "dram", "dma_descriptor"), 0.0)
        self.energy_by_op: dict[str, float] = {}
        self._cycles: dict[int, float] = {}
        self._energy: dict[int, dict] = {}
        for r, users in enumerate(program.residency_users):
            if not users:
                self.scratchpad.release(r)

    # -- helpers -----------------------------------------------------------------------------
    def _who(self, cmd: Command) -> str:
        if cmd.kind == "compute":
            return f"op {self.graph.ops[cmd.op].name!r} at step {cmd.step} ({cmd.queue})"
        return f"{cmd.kind} of {self.graph.tensors[cmd.tensor].name!r} at step {cmd.step} ({cmd.queue})"

    def _pending(self, cmd: Command):
        """Semaphores of ``cmd`` not yet signalled (waited for one by one: no condition events)."""
        done = self.done
        return [done[w] for w in cmd.waits if not done[w].processed]

    def _complete(self, cmd: Command) -> None:
        self.done[cmd.id].succeed()
        for a in cmd.reads + cmd.writes:
            self.users_left[a.residency] -= 1
            if self.users_left[a.residency] == 0:
                self.scratchpad.release(a.residency)

    def _tensor(self, t: int) -> str:
        return self.graph.tensors[t].name

    # -- queues ------------------------------------------------------------------------------
    def compute_queue(self, commands: list[Command]):
        if not commands:
            return
        stream = int(commands[0].queue.removeprefix("stream"))
        core = self.cores[stream % len(self.cores)]
        # A core that serves only this stream needs no arbitration (saves two events per op).
        shared = self.program.streams > len(self.cores)
        for cmd in commands:
            for event in self._pending(cmd):
                yield event
            if shared:
                req = core.request()
                yield req
            op = self.graph.ops[cmd.op]
            who = lambda cmd=cmd: self._who(cmd)  # noqa: E731  (formatted only for an error)
            for a in cmd.reads:
                self.scratchpad.check_read(a.residency, self._tensor(a.tensor), a.offset, a.size, who)
            for a in cmd.writes:
                self.scratchpad.claim(a.residency, self._tensor(a.tensor), a.offset, a.size, who)
            cycles = self._op_cycles(op)
            if self.schedule is not None:
                cycles *= self.schedule.stretch(cmd.queue)
            start = self.env.now
            yield self.env.timeout(cycles)
            for a in cmd.writes:
                self.scratchpad.fill(a.residency)
            self.core_busy += cycles
            self._account_op(op)
            self.timeline.append(TimelineEntry(cmd.queue, op.name, op.kind, cmd.step, start, self.env.now))
            if shared:
                core.release(req)
            self._complete(cmd)

    def _op_cycles(self, op) -> float:
        cycles = self._cycles.get(op.id)
        if cycles is None:
            cycles = self._cycles[op.id] = op_cycles(op, self.graph, self.hw)[0]
        return cycles

    def dma_queue(self, commands: list[Command]):
        for cmd in commands:
            for event in self._pending(cmd):
                yield event
            req = self.channels.request()
            yield req
            self.env.process(self._dma(cmd, req))

    def _dma(self, cmd: Command, req):
        who = lambda: self._who(cmd)  # noqa: E731  (formatted only for an error)
        for a in cmd.writes:
            self.scratchpad.claim(a.residency, self._tensor(a.tensor), a.offset, a.size, who)
        for a in cmd.reads:
            self.scratchpad.check_read(a.residency, self._tensor(a.tensor), a.offset, a.size, who)
        if self.dram_memory is not None:  # plans with a DRAM layout: live DRAM data is checked too
            self.dram_memory.start(cmd, who)
        dma = self.hw.dma
        start = self.env.now
        v = cmd.dram
        chunks, bursts = burst_count(v.shape, v.strides, v.itemsize, v.address, dma.burst_bytes)
        overhead = dma.setup_cycles + dma.chunk_cycles * chunks + self.hw.dram_latency_cycles
        if self.schedule is not None:  # delay DMAs too (by their unloaded time x (stretch - 1)): races with loads show
            overhead += (self.schedule.stretch(cmd.queue) - 1.0) * (
                overhead + bursts * dma.burst_bytes / self.hw.dram_bytes_per_cycle)
        yield self.env.timeout(overhead)
        yield self.dram.transfer(bursts * dma.burst_bytes)
        if self.dram_memory is not None:
            self.dram_memory.finish(cmd)
        for a in cmd.writes:
            self.scratchpad.fill(a.residency)
        self.channels.release(req)
        self.channel_busy += self.env.now - start
        e = self.hw.energy
        self.energy["dram"] += cmd.nbytes * e.dram_byte
        self.energy["dma_descriptor"] += e.dma_descriptor
        key = "scratchpad_write" if cmd.kind == "load" else "scratchpad_read"
        self.energy[key] += cmd.nbytes * (e.scratchpad_write_byte if cmd.kind == "load" else e.scratchpad_read_byte)
        self.timeline.append(TimelineEntry(cmd.queue, self._tensor(cmd.tensor), cmd.kind, cmd.step, start,
                                           self.env.now, cmd.cause, cmd.nbytes))
        self._complete(cmd)

    def _account_op(self, op) -> None:
        parts = self._op_energy(op)
        for k, v in parts.items():
            self.energy[k] += v
        self.energy_by_op[op.name] = sum(parts.values())

    def _op_energy(self, op) -> dict:
        """Dynamic energy of one run of ``op`` by component (pJ), computed once per op."""
        parts = self._energy.get(op.id)
        if parts is None:
            e = self.hw.energy
            read, written = scratchpad_bytes(op, self.graph)
            dtype = self.graph.tensors[op.outputs[0]].dtype
            parts = self._energy[op.id] = {
                "mac": op.macs * e.mac(dtype),
                "vector": op.vector_ops * e.vector_op,
                "scratchpad_read": read * e.scratchpad_read_byte,
                "scratchpad_write": written * e.scratchpad_write_byte,
            }
        return parts

    def run(self) -> float:
        commands = self.program.commands
        for queue, ids in self.program.queues.items():
            cmds = [commands[i] for i in ids]
            self.env.process(self.compute_queue(cmds) if queue.startswith("stream") else self.dma_queue(cmds))
        self.env.run()
        unfinished = [c for c in commands if not self.done[c.id].triggered]
        if unfinished:
            from npusim.errors import SimulationError

            c = unfinished[0]
            raise SimulationError(f"deadlock: {len(unfinished)} commands never ran, first {self._who(c)} "
                                  f"waiting for commands {list(c.waits)}")
        return self.env.now


def simulate(program: Program, plan: Plan, graph: Graph, hw: Hardware, *, jitter: float = 0.0,
             seed: int | None = None, check_races: bool = True) -> Report:
    """Run ``program`` (lowered from ``plan``) on ``hw`` and measure it.

    ``check_races`` (default) also runs the timing-independent happens-before check
    (``npusim.sim.races``) after the timed run: a race no timing drawn here exposed still
    raises ``SimulationError``.

    ``jitter`` > 0 stretches every compute by a random factor in [1, 1 + jitter) and delays
    every DMA by up to ``jitter`` x its unloaded time, drawn from ``seed``, to explore other
    interleavings of the streams and the DMA queues; the seed also picks an adversarial
    schedule (stall or rush one queue, per-queue speeds, wide delays: ``npusim.sim.jitter``).
    """
    untiled, graph = graph, graph_for_plan(plan.graph, plan.tiling, graph)
    offchip_peak = offchip_footprint(plan, graph, untiled)
    if offchip_peak > hw.dram.capacity:  # the off-chip data would not fit: no meaningful run
        raise SimulationError(f"{untiled.name}: the plan keeps up to {offchip_peak:,} B in DRAM (inputs, weights, "
                              f"outputs and spilled tensors at its peak), above dram.capacity = "
                              f"{hw.dram.capacity:,} B of {hw.name!r}")
    machine = _Machine(program, graph, hw, jitter, seed)
    if plan.dram:
        machine.dram_memory = DramContents(program, graph)
    cycles = machine.run()
    if check_races:
        races.check_races(program, hw.dma.channels, lambda c: machine._who(program.commands[c]),
                          lambda t: graph.tensors[t].name)
    seconds = cycles / hw.clock
    energy = dict(machine.energy)
    energy["static"] = hw.energy.static_power * seconds * 1e12  # W·s -> pJ
    offchip = dict.fromkeys(CAUSES, 0)
    read = write = 0
    for c in program.commands:
        if c.kind in ("load", "store"):
            offchip[c.cause] += c.nbytes
            if c.kind == "load":
                read += c.nbytes
            else:
                write += c.nbytes
    compute_bound = sum(op_cycles(o, graph, hw)[0] for o in graph.ops) / min(hw.cores.count, program.streams)
    dram_bound = (read + write) / hw.dram_bytes_per_cycle
    span = max(cycles, 1e-9)
    return Report(
        graph=graph.name, hardware=hw.name, planner=plan.meta.planner, plan_status=plan.meta.status,
        capacity=plan.capacity, clock_hz=hw.clock, cycles=cycles, seconds=seconds,
        energy_pj=energy, energy_by_op_pj=machine.energy_by_op, offchip_bytes=offchip,
        offchip_read_bytes=read, offchip_write_bytes=write,
        onchip_peak_bytes=machine.scratchpad.peak, offchip_peak_bytes=offchip_peak,
        utilisation={
            "core": machine.core_busy / (span * len(machine.cores)),
            "dma": machine.channel_busy / (span * hw.dma.channels),
            "dram": machine.dram.busy_cycles / span,
        },
        lower_bounds={"compute_cycles": compute_bound, "dram_cycles": dram_bound},
        commands=program.n_commands, events=machine.env.processed,
        timeline=tuple(sorted(machine.timeline, key=lambda e: (e.start, e.queue, e.name))),
    )


def offchip_footprint(plan: Plan, graph: Graph, untiled: Graph | None = None) -> int:
    """DRAM bytes the plan needs: with a DRAM layout, its arena (every buffer but the weights,
    ``npusim.plan.dram``); else one region per tensor moved."""
    if plan.dram:
        return arena_bytes(plan.dram, graph, untiled)
    in_dram = {t.tensor for t in plan.transfers}
    return sum(graph.tensors[t].size for t in in_dram)
