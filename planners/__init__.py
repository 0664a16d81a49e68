"""Built-in planners. ``register`` is the ``npusim.planners`` entry point.

The planners are registered by name (``Registry.add_lazy``): a module is imported when a
pipeline names one of its planners, so a run of the default pipeline does not import the
solvers of the others (COSMA's and OLLA's CP-SAT models, METIS, the exact allocators: about
60 ms of every start). ``tests/test_planner_contract.py`` holds each group's names to the planners
its module makes.
"""

import importlib

#: The built-in planners, by the module that makes them: (module, the class or function there
#: that makes them, the names of the planners it makes).
BUILT_IN = (
    ("planners.fusion", "Fuser", ("fuse",)),  # fusion of element-wise epilogues
    ("planners.tiling.tiler", "Tiler", ("tile",)),  # tiling
    ("planners.schedule.orders", "DefaultOrder", ("default",)),  # schedules
    ("planners.schedule.orders", "ReversePostOrder", ("rpo",)),
    ("planners.schedule.memory_aware", "memory_aware_planners", ("dp", "greedy-mem", "zhong")),
    ("planners.joint.olla", "OllaOrder", ("olla-order",)),  # OLLA: its order alone (a schedule),
    ("planners.joint.olla", "OllaJoint", ("olla",)),  # and order + addresses (joint)
    ("planners.schedule.streams", "RoundRobinStreams", ("streams-rr",)),  # stream assignment
    ("planners.schedule.streams", "CategoryStreams", ("streams-category",)),
    ("planners.spill.policies", "Belady", ("belady",)),  # replacement policies
    ("planners.spill.policies", "LeastRecentlyUsed", ("lru",)),
    ("planners.spill.greedy_ilp", "GreedyReplacement", ("greedy-ilp",)),
    ("planners.alloc.arena", "ArenaAllocator", ("arena",)),  # on-chip offsets: the online arena,
    ("planners.alloc.onchip", "planners", (  # and whole-schedule assignments
        "naive", "tflite-arena", "tflm-greedy", "so-size", "so-breadth", "so-size-improved", "exact-offsets",
        # the MindSpore paper's allocators: family x sort x fit (``planners.alloc.mindspore``)
        *(f"mindspore-{family}:{sort},{fit}" for family in ("so", "mo")
          for sort in ("breadth", "size", "source", "unsafe") for fit in ("best-fit", "first-fit")))),
    ("planners.offchip.stage", "planners", ("taa", "offchip-naive", "offchip-so", "offchip-offsets")),  # off-chip
    ("planners.joint.cosma", "cosma_planners", ("cosma", "cosma-fs", "cosma-mpmf", "cosma-dnc")),  # joint: COSMA
)


def register(registry) -> None:
    for module, maker, names in BUILT_IN:
        registry.add_lazy(names, _maker(module, maker))


def _maker(module: str, maker: str):
    """A function returning the planners that ``module.maker`` makes, as a list."""
    def make() -> list:
        made = getattr(importlib.import_module(module), maker)()
        return made if isinstance(made, list) else [made]
    return make
