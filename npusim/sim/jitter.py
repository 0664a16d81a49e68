"""Jitter schedules: how a seeded run stretches commands to explore other interleavings.

Independent small noise on every command averages out over a run: an unordered stream
rarely falls far enough behind (or runs far enough ahead) for a race to show. So the seed
also picks a schedule, cycling through ``MODES`` (``seed mod 5``):

- ``uniform``: every command stretched by a factor in [1, 1 + jitter);
- ``stall``: as uniform, and one queue (the victim) runs ``STALL_FACTOR`` times slower;
- ``rush``: every queue but the victim runs ``STALL_FACTOR`` times slower;
- ``speeds``: each queue gets its own speed, log-uniform in [1, (1 + jitter)^3), which
  reverses the queues' relative progress from seed to seed;
- ``wide``: every command stretched by a factor log-uniform in [1, STALL_FACTOR).

The victim is picked by seed too (``seed // 5``, round the queues in name order), so seeds
1..5 x queues stall and rush every queue once. A compute's cycles are multiplied by the
factor; a DMA's setup is lengthened by (factor - 1) x its unloaded time.
"""

from __future__ import annotations

import numpy as np

MODES = ("uniform", "stall", "rush", "speeds", "wide")
#: How much slower a stalled queue runs: enough to let an unordered queue overtake it.
STALL_FACTOR = 100.0


class JitterSchedule:
    def __init__(self, queues: list[str], jitter: float, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)
        self.jitter = jitter
        k = seed or 0
        self.mode = MODES[k % len(MODES)]
        self.victim = queues[(k // len(MODES)) % len(queues)] if queues else None
        self.speed = dict.fromkeys(queues, 1.0)
        if self.mode == "stall":
            self.speed[self.victim] = STALL_FACTOR
        elif self.mode == "rush":
            self.speed = {q: 1.0 if q == self.victim else STALL_FACTOR for q in queues}
        elif self.mode == "speeds":
            self.speed = {q: float((1.0 + jitter) ** (3.0 * self.rng.random())) for q in queues}

    def stretch(self, queue: str) -> float:
        """The factor (>= 1) of the next command of ``queue``."""
        if self.mode == "wide":
            return float(STALL_FACTOR ** self.rng.random())
        return self.speed[queue] * (1.0 + self.jitter * float(self.rng.random()))
