"""DRAM bandwidth granted to the transfers in flight: the most urgent share it, the rest wait.

Each transfer carries a priority (the simulator passes the step its data is needed at: a
load of step s before the op at s, a store of step s just after it). The transfers of the
most urgent priority that are moving data share ``bytes_per_cycle`` equally (processor
sharing: the loads of one op arrive band by band together); less urgent ones wait until
those are done, or until a more urgent one arrives and takes the bus from them. A transfer in
its descriptor-setup or latency phase holds no bandwidth, so others use the bus meanwhile.

Why not one fair share for all: with several DMA channels a prefetch for a later op would
slow the load the next op is waiting for, so giving the planner more room (deeper prefetch)
could make a run slower. Serving earlier steps first is what an in-order DMA queue does
(its channels only hide setup and latency) and what DMA engines with per-channel priorities
set by the compiler do; with it, work issued early never delays work the program needs
sooner.

Completion times are recomputed only when a transfer starts or ends, so the cost is a few
SimPy events per transfer, not one per burst.
"""

from __future__ import annotations

import simpy
from simpy.events import Event, Timeout  # built directly: env.event() and env.timeout() go through a descriptor


class SharedBandwidth:
    """The bus: flows in flight (id -> bytes left, priority), the most urgent ones moving.

    ``_moving`` (the ids of the flows of the most urgent priority, in the order they started)
    is kept up to date as flows start and end, rather than searched for at every update."""

    def __init__(self, env: simpy.Environment, bytes_per_cycle: float) -> None:
        self.env = env
        self.rate = bytes_per_cycle
        self._remaining: dict[int, float] = {}
        self._priority: dict[int, float] = {}
        self._done: dict[int, simpy.Event] = {}
        self._moving: list[int] = []  # the flows holding the bus: those of the most urgent priority
        self._next_id = 0
        self._last = 0.0
        self._pending = None  # the timeout of the next completion; earlier ones are stale
        self.busy_cycles = 0.0

    def transfer(self, nbytes: float, priority: float = 0.0, cmd=None) -> simpy.Event:
        """An event that fires when ``nbytes`` have crossed the bus (lower ``priority`` first);
        ``cmd`` (the DMA command) is for ``npusim.dram.model.BankedDram``, ignored here."""
        done = Event(self.env)
        if nbytes <= 0:
            done.succeed()
            return done
        self._advance()
        flow = self._next_id
        self._next_id += 1
        self._remaining[flow] = float(nbytes)
        self._priority[flow] = priority
        self._done[flow] = done
        moving = self._moving
        if not moving or priority == self._priority[moving[0]]:
            moving.append(flow)  # flow ids grow: the list stays in start order
        elif priority < self._priority[moving[0]]:
            self._moving = [flow]
        self._schedule()
        return done

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last
        if self._remaining and dt > 0:
            moving = self._moving
            share = self.rate * dt / len(moving)
            remaining = self._remaining
            for flow in moving:
                remaining[flow] -= share
            self.busy_cycles += dt
        self._last = now

    def _schedule(self) -> None:
        moving = self._moving
        if not moving:
            self._pending = None
            return
        soonest = min(map(self._remaining.__getitem__, moving))
        delay = max(soonest, 0.0) * len(moving) / self.rate
        self._pending = Timeout(self.env, delay)
        self._pending.callbacks.append(self._wake)

    def _wake(self, timeout: Timeout) -> None:
        if timeout is not self._pending:
            return  # a start or end since then rescheduled the next completion
        self._advance()
        moving, remaining = self._moving, self._remaining
        # Relative tolerance: remaining bytes are floats accumulated over many updates.
        limit = 1e-6 * max(1.0, self.rate)
        finished = [f for f in moving if remaining[f] <= limit]
        if not finished:
            finished = [min(moving, key=remaining.get)]
        for flow in finished:
            del remaining[flow]
            del self._priority[flow]
            self._done.pop(flow).succeed()
        self._moving = [f for f in moving if f in remaining] or self._most_urgent()
        self._schedule()

    def _most_urgent(self) -> list[int]:
        """The flows of the most urgent priority among those in flight, in start order."""
        if not self._remaining:
            return []
        top = min(self._priority[f] for f in self._remaining)
        return [f for f in self._remaining if self._priority[f] == top]
