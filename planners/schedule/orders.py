"""Fixed schedules: the model's definition order and reverse post-order."""

from npusim.graph.analysis import default_order, reverse_post_order


class DefaultOrder:
    name = "default"
    stage = "schedule"
    description = "the model's definition order (what PyTorch/ONNX runtimes execute)"

    def run(self, ctx) -> None:
        ctx.order = default_order(ctx.graph)


class ReversePostOrder:
    name = "rpo"
    stage = "schedule"
    description = "reverse post-order of a depth-first search from the sources"

    def run(self, ctx) -> None:
        ctx.order = reverse_post_order(ctx.graph)
