"""Training graphs: forward + loss + backward + SGD weight update, built from an inference graph.

OLLA (Steiner et al.) and the memory planners in general are judged on training, where the
activations saved for the backward pass dominate memory. ``make_training_graph(graph)``
builds, from an inference graph:

1. the **forward** ops, unchanged (the inference outputs become activations);
2. a **loss** op per inference output ``y``: reads ``y`` and a ``labels/<y>`` input of the
   same shape, writes the scalar ``loss/<y>`` (a graph output) and ``grad/<y>``;
3. the **backward** ops, in reverse definition order. For a GEMM-like op (Conv, Gemm, MatMul)
   one op per differentiable input: ``grad/<x>`` reads ``grad/<y>`` and the *other* operand
   (the saved activation for a weight gradient, the weight for an input gradient); a bias
   gradient reads ``grad/<y>`` only. For any other op one op reads ``grad/<y>`` and the
   tensors its derivative needs (``SAVED``: Relu its output, Mul its inputs, ...) and writes
   the gradients of all its differentiable inputs. An ``Add`` input of the output's shape
   receives ``grad/<y>`` itself (no copy, as frameworks do); a tensor read by several ops
   sums its partial gradients in one ``Add`` op;
4. an **SGD update** per trainable weight ``w``: reads ``w`` and ``grad/<w>``, writes
   ``<w>/updated`` (a graph output), placed after the whole backward pass as PyTorch's
   ``optimizer.step()`` does.

Every gradient has the shape and dtype of its tensor. A weight is *trainable* when a
``TRAINABLE_KINDS`` op reads it, it has more than one element and a non-integer dtype (so
shape constants, masks and scalar constants are left alone). Gradients flow only through
non-integer tensors that depend on a trainable weight.
"""

from __future__ import annotations

from collections import defaultdict

from npusim.errors import TraceError
from npusim.graph.model import GEMM_KINDS, Gemm, Graph, build_graph

TRAINABLE_KINDS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization",
                             "LayerNormalization", "InstanceNormalization", "Add", "Mul", "Gather", "PRelu"})
INTEGER_DTYPES = frozenset({"int64", "int32", "int16", "uint8", "bool"})
#: Which forward tensors the derivative of an op reads besides grad/<output>:
#: "out" its output, "in" its inputs, "" nothing (shape-only ops). Default: its inputs.
SAVED = {
    "Relu": "out", "Clip": "out", "Sigmoid": "out", "Tanh": "out", "Softmax": "out", "Exp": "out",
    "Add": "", "Sub": "", "Concat": "", "Reshape": "", "Flatten": "", "Transpose": "", "Squeeze": "",
    "Unsqueeze": "", "GlobalAveragePool": "", "AveragePool": "", "Identity": "", "Split": "",
    "MaxPool": "in+out",
}


def _differentiable(t) -> bool:
    return t.dtype not in INTEGER_DTYPES


def trainable_weights(graph: Graph) -> set[int]:
    return {t.id for t in graph.tensors
            if t.kind == "weight" and t.elements > 1 and _differentiable(t)
            and any(graph.ops[c].kind in TRAINABLE_KINDS for c in t.consumers)}


def make_training_graph(graph: Graph) -> Graph:
    """The training graph of ``graph`` (see the module docstring). Raises TraceError if no
    output depends on a trainable weight (nothing to train)."""
    trainable = trainable_weights(graph)
    requires_grad = [False] * graph.n_tensors
    for t in trainable:
        requires_grad[t] = True
    for op in graph.ops:  # definition order is topological
        flows = any(requires_grad[t] for t in op.inputs)
        for t in op.outputs:
            requires_grad[t] = flows and _differentiable(graph.tensors[t])

    def rec(t, name=None, kind=None):
        return dict(name=name or t.name, shape=list(t.shape), dtype=t.dtype, itemsize=t.itemsize,
                    kind=kind or t.kind)

    tensors = [rec(t, kind="activation" if t.kind == "output" else t.kind) for t in graph.tensors]
    ops = [dict(name=o.name, kind=o.kind, inputs=[graph.tensors[t].name for t in o.inputs],
                outputs=[graph.tensors[t].name for t in o.outputs], attrs=dict(o.attrs), macs=o.macs,
                vector_ops=o.vector_ops, gemm=o.gemm) for o in graph.ops]
    partials: dict[int, list[str]] = defaultdict(list)  # tensor id -> names of gradient parts

    def new_grad(t_id: int, suffix: str = "") -> str:
        t = graph.tensors[t_id]
        name = f"grad/{t.name}{suffix}"
        tensors.append(rec(t, name=name, kind="activation"))
        return name

    outputs = [t for t in graph.tensors if t.kind == "output" and requires_grad[t.id]]
    if not outputs:
        raise TraceError(f"graph {graph.name!r}: no output depends on a trainable weight; nothing to train")
    for y in outputs:
        tensors.append(rec(y, name=f"labels/{y.name}", kind="input"))
        tensors.append(dict(name=f"loss/{y.name}", shape=[1], dtype=y.dtype, itemsize=y.itemsize, kind="output"))
        ops.append(dict(name=f"loss/{y.name}", kind="LossGrad", inputs=[y.name, f"labels/{y.name}"],
                        outputs=[f"loss/{y.name}", new_grad(y.id)], vector_ops=3 * y.elements))
        partials[y.id].append(f"grad/{y.name}")

    def gradient_of(t_id: int) -> str:
        """The full gradient of a tensor: its single part, or the sum of its parts."""
        parts = partials[t_id]
        if len(parts) == 1:
            return parts[0]
        name = new_grad(t_id, suffix="/sum")
        ops.append(dict(name=f"{name}", kind="Add", inputs=list(parts), outputs=[name],
                        vector_ops=graph.tensors[t_id].elements * (len(parts) - 1)))
        partials[t_id] = [name]
        return name

    for op in reversed(graph.ops):
        live_outs = [t for t in op.outputs if partials.get(t)]
        if not live_outs:
            continue
        diff_inputs = [t for t in dict.fromkeys(op.inputs) if requires_grad[t]]
        if not diff_inputs:
            continue
        grads_out = [gradient_of(t) for t in live_outs]
        name = lambda t: graph.tensors[t].name  # noqa: E731
        if op.kind in GEMM_KINDS and op.gemm is not None:
            operands = list(dict.fromkeys(op.inputs[:2]))
            for t in diff_inputs:
                g = new_grad(t, suffix=f"@{op.name}")
                others = [name(o) for o in operands if o != t] if t in operands else []
                g_mnk = op.gemm
                if t in operands and t == operands[0]:
                    gemm = Gemm(m=g_mnk.m, n=g_mnk.k, k=g_mnk.n, batch=g_mnk.batch)
                elif t in operands:
                    gemm = Gemm(m=g_mnk.k, n=g_mnk.n, k=g_mnk.m, batch=g_mnk.batch)
                else:
                    gemm = None  # bias: a reduction of grad/<y>
                ops.append(dict(name=f"{op.name}/grad/{name(t)}", kind=f"{op.kind}Grad",
                                inputs=grads_out + others, outputs=[g], gemm=gemm,
                                macs=gemm.macs if gemm else 0,
                                vector_ops=0 if gemm else sum(graph.tensors[o].elements for o in live_outs)))
                partials[t].append(g)
            continue
        passthrough = []
        if op.kind in ("Add", "Sub", "Identity") and len(live_outs) == 1:
            y = graph.tensors[live_outs[0]]
            passthrough = [t for t in diff_inputs if graph.tensors[t].shape == y.shape]
        for t in passthrough:
            partials[t].append(grads_out[0])
        rest = [t for t in diff_inputs if t not in passthrough]
        if not rest:
            continue
        saved_rule = SAVED.get(op.kind, "in")
        saved = []
        if "in" in saved_rule:
            saved += [name(t) for t in dict.fromkeys(op.inputs)]
        if "out" in saved_rule:
            saved += [name(t) for t in op.outputs]
        outs = [new_grad(t, suffix=f"@{op.name}") for t in rest]
        ops.append(dict(name=f"{op.name}/grad", kind=f"{op.kind}Grad",
                        inputs=list(dict.fromkeys(grads_out + saved)), outputs=outs,
                        vector_ops=sum(graph.tensors[t].elements for t in rest)))
        for t, g in zip(rest, outs):
            partials[t].append(g)

    for w in sorted(trainable):
        if not partials.get(w):
            continue
        t = graph.tensors[w]
        g = gradient_of(w)
        tensors.append(rec(t, name=f"{t.name}/updated", kind="output"))
        ops.append(dict(name=f"{t.name}/sgd", kind="SGDUpdate", inputs=[t.name, g],
                        outputs=[f"{t.name}/updated"], vector_ops=2 * t.elements))
    meta = dict(graph.meta)
    meta["training"] = {"from": graph.name, "optimizer": "sgd"}
    return build_graph(f"{graph.name}-train", tensors, ops, meta)
