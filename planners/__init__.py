"""Built-in planners. ``register`` is the ``npusim.planners`` entry point."""

from planners.alloc.arena import ArenaAllocator
from planners.alloc.onchip import planners as onchip_planners
from planners.fusion import Fuser
from planners.joint.cosma import cosma_planners
from planners.joint.olla import OllaJoint, OllaOrder
from planners.offchip.stage import planners as offchip_planners
from planners.schedule.memory_aware import memory_aware_planners
from planners.schedule.orders import DefaultOrder, ReversePostOrder
from planners.schedule.streams import CategoryStreams, RoundRobinStreams
from planners.spill.greedy_ilp import GreedyReplacement
from planners.spill.policies import Belady, LeastRecentlyUsed
from planners.tiling.tiler import Tiler


def register(registry) -> None:
    built_in = [
        Fuser(),  # fusion of element-wise epilogues
        Tiler(),  # tiling
        DefaultOrder(), ReversePostOrder(), *memory_aware_planners(),  # schedules (dp, greedy-mem, zhong)
        OllaOrder(), OllaJoint(),  # OLLA: its order alone (a schedule), and order + addresses (joint)
        RoundRobinStreams(), CategoryStreams(),  # stream assignment
        Belady(), LeastRecentlyUsed(), GreedyReplacement(),  # replacement policies
        ArenaAllocator(), *onchip_planners(),  # on-chip offsets (online arena; whole-schedule assignments)
        *offchip_planners(),  # off-chip (DRAM) offsets: taa, offchip-naive, offchip-so, offchip-offsets
        *cosma_planners(),  # joint: COSMA (cosma, cosma-fs, cosma-mpmf, cosma-dnc)
    ]
    for planner in built_in:
        registry.add(planner)
