"""Built-in planners. ``register`` is the ``npusim.planners`` entry point."""

from planners.alloc.arena import ArenaAllocator
from planners.alloc.onchip import planners as onchip_planners
from planners.schedule.orders import DefaultOrder, ReversePostOrder
from planners.spill.policies import Belady, LeastRecentlyUsed
from planners.tiling.tiler import Tiler


def register(registry) -> None:
    for planner in (DefaultOrder(), ReversePostOrder(), ArenaAllocator(), Belady(), LeastRecentlyUsed(), Tiler()):
        registry.add(planner)
    from planners.schedule.memory_aware import memory_aware_planners  # issue 5: dp, greedy-mem, zhong, olla

    for planner in memory_aware_planners():
        registry.add(planner)
    for planner in onchip_planners():  # issue 4: whole-schedule offset assignment (alloc stage)
        registry.add(planner)
