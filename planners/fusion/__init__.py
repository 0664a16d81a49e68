"""The fusion stage: fuse each GEMM-like op with the element-wise ops after it.

``fuse`` walks the graph once: from every op with a GEMM view it follows the chain of
element-wise ops that alone read the previous link's output (``npusim.graph.fusion``'s rules:
an activation, bias, batch-norm scale/shift, requantisation, a residual Add whose other input
is made elsewhere), as long as each link is legal, and fuses the longest such chain. What is
fused is recorded in the plan (``Plan.fusion``) and the later stages plan the fused graph.
"""

from __future__ import annotations

from npusim.graph.fusion import EPILOGUE_KINDS, chain_problem, fuse


def epilogue_chains(graph) -> dict[str, list[str]]:
    """GEMM op name -> the longest legal chain of element-wise ops after it (non-empty). Where
    two GEMMs meet at one op (a residual Add of two branches' convs) the one with more MACs
    takes it: its array time hides the epilogue best."""
    chains, taken = {}, set()
    gemms = sorted((op for op in graph.ops if op.gemm is not None and len(op.outputs) == 1),
                   key=lambda op: (-op.macs, op.id))
    for op in gemms:
        chain: list[str] = []
        current = op.outputs[0]
        while True:
            readers = graph.tensors[current].consumers
            if len(readers) != 1 or graph.ops[readers[0]].kind not in EPILOGUE_KINDS:
                break
            link = graph.ops[readers[0]]
            if link.name in taken or chain_problem(graph, op.name, [*chain, link.name]) is not None:
                break
            chain.append(link.name)
            current = link.outputs[0]
        if chain:
            chains[op.name] = chain
            taken.update(chain)
    return dict(sorted(chains.items(), key=lambda kv: graph.op_by_name[kv[0]].id))


class Fuser:
    name = "fuse"
    stage = "fusion"
    description = "fuse element-wise epilogues (activation, bias, batch norm, residual add) into their GEMM op"
    reads = ("graph",)
    writes = ("fusion", "graph", "untiled")

    def run(self, ctx) -> None:
        chains = epilogue_chains(ctx.graph)
        if chains:
            ctx.fusion = chains
            ctx.graph = ctx.untiled = fuse(ctx.graph, chains)
