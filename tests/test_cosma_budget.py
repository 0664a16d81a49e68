"""cosma-dnc's wall-clock budget: the parts' solves leave a margin for stitching and the plan."""

import time

import planners.joint.cosma_dnc as dnc
from npusim.graph.random_dags import nas_cell
from npusim.workflow import memory_bounds
from planners.joint.cosma_dnc import STITCH_MARGIN

from test_cosma import checked_plan


def test_dnc_parts_share_the_limit_minus_the_stitch_margin(monkeypatch):
    granted = []
    real = dnc.solve_part

    def recording(part, win, opts, warm, overlap):
        granted.append((time.perf_counter(), opts.time_limit, opts.deterministic))
        return real(part, win, opts, warm, overlap)

    monkeypatch.setattr(dnc, "solve_part", recording)
    graph = nas_cell(3, 4, seed=5)
    bounds = memory_bounds(graph, 64)
    limit = 8.0
    plan = checked_plan(graph, "cosma-dnc", bounds.m_h, time_limit=limit, deterministic=False, part_ops=6)
    assert plan.meta.options["cosma_stats"]["parts"] > 1
    assert granted and all(not det for _, _, det in granted)
    # every solve is granted at most what is left before the solve budget's deadline
    # (measured from the first grant, which is no earlier than the planner's start)
    first = granted[0][0]
    assert max(at + seconds - first for at, seconds, _ in granted) <= limit * (1 - STITCH_MARGIN) + 0.05
