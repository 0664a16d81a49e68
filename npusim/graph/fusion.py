"""Fused epilogues: a GEMM-like op and the element-wise ops after it, as one op.

NPU compilers run the activation, bias, batch-norm scale/shift, requantisation and residual
Add that follow a convolution or matrix product in the array's output path (the vector unit
works on each output tile as it drains), so the intermediate tensors never reach the
scratchpad. A *fusion* maps a GEMM-like op's name to the names of the element-wise ops fused
into it, in order: ``{"/conv1/Conv": ["/relu/Relu"]}``. ``fuse`` builds the fused graph; a
plan that records a fusion (``Plan.fusion``) refers to it (``npusim.plan.resolve``).

A chain ``g -> e1 -> e2 ...`` is legal (``fusion_problems``) when ``g`` has a GEMM view
(Conv, Gemm, MatMul), each ``e`` is an element-wise kind (``EPILOGUE_KINDS``) whose output has
the GEMM output's shape, and the tensor between two links is read only by the next link,
once, and is not a graph output. So no tensor anything else needs is fused away (a training
graph's saved activations have a second reader, the backward op, and stay), and no cycle can
form: another input of a link (a residual, a bias) cannot depend on the chain.

The fused op keeps the GEMM op's name, kind, MACs and GEMM view and takes the last link's
place in the op list (its inputs are all made by then); its inputs are the GEMM op's
followed by each link's other inputs (``attrs["epilogue_from"]`` is where those start), its
output is the last link's, its vector work the sum of the links' (``attrs["epilogue"]`` lists
their kinds). Its cost: the vector unit runs the epilogue while the array computes, so the op
takes the longer of the two (``npusim.hw.costs.core_cycles``).
"""

from __future__ import annotations


from npusim.errors import PlanError
from npusim.graph.model import Graph, Op, build_graph
from npusim.graph.ops.kinds import EPILOGUE_KINDS

FUSED_SUFFIX = "@fused"



def fused_name(name: str) -> str:
    return name + FUSED_SUFFIX


def chain_problem(graph: Graph, gemm_name: str, links: list[str]) -> str | None:
    """Why ``gemm_name`` followed by ``links`` cannot be fused, or None when it can."""
    op = graph.op_by_name.get(gemm_name)
    if op is None:
        return f"fusion names op {gemm_name!r}, which is not in graph {graph.name!r}"
    if op.gemm is None or len(op.outputs) != 1:
        return f"fusion names {gemm_name!r} ({op.kind}), which is not a GEMM-like op with one output"
    if not links:
        return f"fusion of {gemm_name!r} lists no ops to fuse"
    shape = graph.tensors[op.outputs[0]].shape
    current = op.outputs[0]
    for name in links:
        link = graph.op_by_name.get(name)
        if link is None:
            return f"fusion of {gemm_name!r} names op {name!r}, which is not in graph {graph.name!r}"
        if link.kind not in EPILOGUE_KINDS:
            return f"fusion of {gemm_name!r}: {name!r} is a {link.kind}, not an element-wise epilogue"
        tensor = graph.tensors[current]
        if tensor.consumers != (link.id,) or link.inputs.count(current) != 1:
            return (f"fusion of {gemm_name!r}: {tensor.name!r} is read by other ops than {name!r} (or twice), "
                    "so it cannot be fused away")
        if tensor.kind == "output":
            return f"fusion of {gemm_name!r}: {tensor.name!r} is a graph output, so it cannot be fused away"
        if len(link.outputs) != 1 or graph.tensors[link.outputs[0]].shape != shape:
            return f"fusion of {gemm_name!r}: {name!r} does not keep the output shape {list(shape)}"
        current = link.outputs[0]
    return None


def fusion_problems(graph: Graph, fusion: dict) -> list[str]:
    """Every reason ``fusion`` cannot apply to ``graph`` (empty: it can)."""
    problems, seen = [], set()
    for gemm_name, links in fusion.items():
        if not isinstance(links, (list, tuple)) or not all(isinstance(n, str) for n in links):
            problems.append(f"fusion of {gemm_name!r}: expected a list of op names, got {links!r}")
            continue
        again = seen.intersection([gemm_name, *links])
        if again:
            problems.append(f"fusion of {gemm_name!r}: op {sorted(again)[0]!r} is fused twice")
        seen.update([gemm_name, *links])
        problem = chain_problem(graph, gemm_name, list(links))
        if problem:
            problems.append(problem)
    return problems


def _fused_record(graph: Graph, op: Op, links: list[Op]) -> dict:
    names = [graph.tensors[t].name for t in op.inputs]
    input_kinds = []  # the link each extra input belongs to (batch-norm parameters are per channel)
    current = op.outputs[0]
    for link in links:
        extra = [graph.tensors[t].name for t in link.inputs if t != current]
        names += extra
        input_kinds += [link.kind] * len(extra)
        current = link.outputs[0]
    attrs = dict(op.attrs, epilogue=[link.kind for link in links], epilogue_from=len(op.inputs),
                 epilogue_input_kinds=input_kinds)
    return dict(name=op.name, kind=op.kind, inputs=names, outputs=[graph.tensors[current].name], attrs=attrs,
                macs=op.macs, vector_ops=op.vector_ops + sum(link.vector_ops for link in links), gemm=op.gemm)


def fuse(graph: Graph, fusion: dict) -> Graph:
    """The graph with each chain of ``fusion`` as one op (PlanError if a chain is illegal)."""
    problems = fusion_problems(graph, fusion)
    if problems:
        raise PlanError(problems[0])
    links = {name: [graph.op_by_name[n] for n in chain] for name, chain in fusion.items()}
    # The fused op takes the place of its last link: a residual Add's other input may be made
    # after the GEMM op (a downsample branch), never after the Add.
    at_last_link = {chain[-1].name: name for name, chain in links.items()}
    gone_ops = set(links) | {link.name for chain in links.values() for link in chain[:-1]}
    gone_tensors = set()
    for name, chain in links.items():
        current = graph.op_by_name[name].outputs[0]
        for link in chain:
            gone_tensors.add(current)
            current = link.outputs[0]
    tensors = [dict(name=t.name, shape=list(t.shape), dtype=t.dtype, itemsize=t.itemsize, kind=t.kind)
               for t in graph.tensors if t.id not in gone_tensors]
    ops = []
    for op in graph.ops:
        if op.name in gone_ops:
            continue
        if op.name in at_last_link:
            gemm = graph.op_by_name[at_last_link[op.name]]
            ops.append(_fused_record(graph, gemm, links[gemm.name]))
        else:
            ops.append(dict(name=op.name, kind=op.kind, inputs=[graph.tensors[t].name for t in op.inputs],
                            outputs=[graph.tensors[t].name for t in op.outputs], attrs=op.attrs, macs=op.macs,
                            vector_ops=op.vector_ops, gemm=op.gemm))
    meta = dict(graph.meta, fused_from=graph.name, fusion={k: list(v) for k, v in sorted(fusion.items())})
    return build_graph(fused_name(graph.name), tensors, ops, meta)
