"""The memory-aware schedulers of this package, for ``planners.register`` (OLLA's order and
joint planners live in ``planners.joint.olla``, which builds on this package: registered
there, so this package never imports ``planners.joint``)."""

from planners.schedule.dp import DynamicProgramming
from planners.schedule.greedy import GreedyMemory
from planners.schedule.zhong.planner import ZhongScheduler


def memory_aware_planners() -> list:
    return [DynamicProgramming(), GreedyMemory(), ZhongScheduler()]
