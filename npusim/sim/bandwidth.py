"""DRAM bandwidth shared fairly (processor sharing) by the transfers in flight.

With n transfers active each progresses at ``bytes_per_cycle / n``. Completion times are
recomputed only when a transfer starts or ends, so the cost is a few SimPy events per
transfer, not one per burst.
"""

from __future__ import annotations

import simpy


class SharedBandwidth:
    def __init__(self, env: simpy.Environment, bytes_per_cycle: float) -> None:
        self.env = env
        self.rate = bytes_per_cycle
        self._remaining: dict[int, float] = {}
        self._done: dict[int, simpy.Event] = {}
        self._next_id = 0
        self._last = 0.0
        self._generation = 0
        self.busy_cycles = 0.0

    def transfer(self, nbytes: float) -> simpy.Event:
        """An event that fires when ``nbytes`` have crossed the bus."""
        done = self.env.event()
        if nbytes <= 0:
            done.succeed()
            return done
        self._advance()
        flow = self._next_id
        self._next_id += 1
        self._remaining[flow] = float(nbytes)
        self._done[flow] = done
        self._schedule()
        return done

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last
        if self._remaining and dt > 0:
            share = self.rate * dt / len(self._remaining)
            for flow in self._remaining:
                self._remaining[flow] -= share
            self.busy_cycles += dt
        self._last = now

    def _schedule(self) -> None:
        self._generation += 1
        if not self._remaining:
            return
        generation = self._generation
        soonest = min(self._remaining.values())
        delay = max(soonest, 0.0) * len(self._remaining) / self.rate
        self.env.timeout(delay).callbacks.append(lambda _event: self._wake(generation))

    def _wake(self, generation: int) -> None:
        if generation != self._generation:
            return  # a start or end since then rescheduled the next completion
        self._advance()
        # Relative tolerance: remaining bytes are floats accumulated over many updates.
        finished = [f for f, left in self._remaining.items() if left <= 1e-6 * max(1.0, self.rate)]
        if not finished:
            finished = [min(self._remaining, key=self._remaining.get)]
        for flow in finished:
            del self._remaining[flow]
            self._done.pop(flow).succeed()
        self._schedule()
