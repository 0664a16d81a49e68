"""Fixed schedules: the model's definition order and reverse post-order."""

from npusim.graph.analysis import default_order, reverse_post_order
from planners.schedule.op_level import op_graph, set_order


class DefaultOrder:
    name = "default"
    stage = "schedule"
    description = "the model's definition order (what PyTorch/ONNX runtimes execute)"
    reads = ("graph", "untiled")
    writes = ("order",)

    def run(self, ctx) -> None:
        set_order(ctx, default_order(op_graph(ctx)))


class ReversePostOrder:
    name = "rpo"
    stage = "schedule"
    description = "reverse post-order of a depth-first search from the sources"
    reads = ("graph", "untiled")
    writes = ("order",)

    def run(self, ctx) -> None:
        set_order(ctx, reverse_post_order(op_graph(ctx)))
