"""cosma-dnc's wall-clock budget: the parts' solves leave a margin for stitching and the plan.

A fake clock stands in for the wall clock (it advances only by the work each solve is said
to take), so the budgeting arithmetic is checked exactly, whatever the machine's speed."""

import planners.joint.cosma as cosma
import planners.joint.cosma.dnc as dnc
from npusim.testing.random_dags import nas_cell
from npusim.workflow import memory_bounds

from tests.helpers import FakeClock
from test_cosma import checked_plan


def test_dnc_parts_share_the_limit_minus_the_stitch_margin(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(dnc, "time", clock)
    monkeypatch.setattr(cosma, "time", clock)
    granted = []
    real = dnc.solve_part

    def recording(part, win, opts, warm, overlap):
        granted.append((clock.now, opts.time_limit, opts.deterministic))
        result = real(part, win, opts, warm, overlap)
        clock.now += 0.6 * opts.time_limit  # each solve uses most of what it was granted
        return result

    monkeypatch.setattr(dnc, "solve_part", recording)
    graph = nas_cell(3, 4, seed=5)
    limit = 8.0
    plan = checked_plan(graph, "cosma-dnc", memory_bounds(graph, 64).m_h, time_limit=limit,
                        deterministic=False, part_ops=6)
    assert plan.meta.stats["parts"] > 1
    assert granted and all(not det for _, _, det in granted)
    # every solve ends by the solve deadline: the limit less the documented 10 % stitching
    # margin (a grant is never below with_limit's 0.05 s floor)
    assert max(at + seconds for at, seconds, _ in granted) <= 0.9 * limit + 0.05
    assert clock.now <= 0.9 * limit + 0.05 * len(granted)
