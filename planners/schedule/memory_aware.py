"""The memory-aware schedulers of this package, for ``planners.register``."""

from planners.joint.olla import OllaJoint, OllaOrder
from planners.schedule.dp import DynamicProgramming
from planners.schedule.greedy import GreedyMemory
from planners.schedule.zhong.planner import ZhongScheduler


def memory_aware_planners() -> list:
    return [DynamicProgramming(), GreedyMemory(), ZhongScheduler(), OllaOrder(), OllaJoint()]
