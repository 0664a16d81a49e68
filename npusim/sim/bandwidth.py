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

from operator import itemgetter

import simpy
from simpy.events import Event, Timeout  # built directly: env.event() and env.timeout() go through a descriptor


#: Where a flow's fields sit in its record (a list, updated in place).
LEFT, PRIORITY, DONE, ID = range(4)


class SharedBandwidth:
    """The bus: the flows in flight, as records [bytes left, priority, done event, id] by id
    (in start order), and the most urgent of them, moving.

    ``_moving`` (the records of the flows of the most urgent priority, in the order they
    started) is kept up to date as flows start and end, rather than searched for at every
    update."""

    def __init__(self, env: simpy.Environment, bytes_per_cycle: float) -> None:
        self.env = env
        self.rate = bytes_per_cycle
        self._flows: dict[int, list] = {}
        self._moving: list[list] = []  # the flows holding the bus: those of the most urgent priority
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
        flow = [float(nbytes), priority, done, self._next_id]
        self._flows[self._next_id] = flow
        self._next_id += 1
        moving = self._moving
        if not moving or priority == moving[0][PRIORITY]:
            moving.append(flow)  # flows start in id order: the list stays in start order
        elif priority < moving[0][PRIORITY]:
            self._moving = [flow]
        self._schedule()
        return done

    def _advance(self) -> None:
        """Move the moving flows' bytes on to now, the bus shared equally among them."""
        now = self.env._now  # Environment.now without the property call
        dt = now - self._last
        moving = self._moving  # empty exactly when no flow is in flight
        if moving and dt > 0:
            share = self.rate * dt / len(moving)
            for flow in moving:
                flow[LEFT] -= share
            self.busy_cycles += dt
        self._last = now

    def _schedule(self) -> None:
        moving = self._moving
        if not moving:
            self._pending = None
            return
        soonest = min([flow[LEFT] for flow in moving])
        delay = max(soonest, 0.0) * len(moving) / self.rate
        self._pending = Timeout(self.env, delay)
        self._pending.callbacks.append(self._wake)

    def _wake(self, timeout: Timeout) -> None:
        if timeout is not self._pending:
            return  # a start or end since then rescheduled the next completion
        self._advance()
        moving = self._moving
        # Relative tolerance: remaining bytes are floats accumulated over many updates.
        limit = 1e-6 * max(1.0, self.rate)
        finished = [flow for flow in moving if flow[LEFT] <= limit]
        if finished:
            still = [flow for flow in moving if not flow[LEFT] <= limit]
        else:  # the nearest one (the first of them on a tie), despite rounding
            nearest = min(moving, key=itemgetter(LEFT))
            finished, still = [nearest], [flow for flow in moving if flow is not nearest]
        for flow in finished:
            del self._flows[flow[ID]]
            flow[DONE].succeed()
        self._moving = still or self._most_urgent()
        self._schedule()

    def _most_urgent(self) -> list[list]:
        """The flows of the most urgent priority among those in flight, in start order."""
        if not self._flows:
            return []
        top = min(flow[PRIORITY] for flow in self._flows.values())
        return [flow for flow in self._flows.values() if flow[PRIORITY] == top]
