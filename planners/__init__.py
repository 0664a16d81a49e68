"""Built-in planners. ``register`` is the ``npusim.planners`` entry point."""

from planners.alloc.arena import ArenaAllocator
from planners.schedule.orders import DefaultOrder, ReversePostOrder
from planners.spill.policies import Belady, LeastRecentlyUsed


def register(registry) -> None:
    for planner in (DefaultOrder(), ReversePostOrder(), ArenaAllocator(), Belady(), LeastRecentlyUsed()):
        registry.add(planner)
