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
from npusim.graph.model import Gemm, Graph, build_graph
from npusim.graph.ops.kinds import GEMM_KINDS, TRAINABLE_KINDS

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


def _requires_grad(graph: Graph, trainable: set[int]) -> list[bool]:
    """Which tensors get a gradient: the trainable weights and every non-integer tensor that
    depends on one."""
    requires_grad = [False] * graph.n_tensors
    for t in trainable:
        requires_grad[t] = True
    for op in graph.ops:  # definition order is topological
        flows = any(requires_grad[t] for t in op.inputs)
        for t in op.outputs:
            requires_grad[t] = flows and _differentiable(graph.tensors[t])
    return requires_grad


def _record(t, name=None, kind=None) -> dict:
    return dict(name=name or t.name, shape=list(t.shape), dtype=t.dtype, itemsize=t.itemsize,
                kind=kind or t.kind)


class _TrainingBuilder:
    """The tensor and op records of a training graph as they are appended, and the gradient
    parts of each forward tensor (``partials``: tensor id -> names of gradient parts)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.tensors = [_record(t, kind="activation" if t.kind == "output" else t.kind) for t in graph.tensors]
        self.ops = [dict(name=o.name, kind=o.kind, inputs=[graph.tensors[t].name for t in o.inputs],
                         outputs=[graph.tensors[t].name for t in o.outputs], attrs=dict(o.attrs), macs=o.macs,
                         vector_ops=o.vector_ops, gemm=o.gemm) for o in graph.ops]
        self.partials: dict[int, list[str]] = defaultdict(list)

    def name(self, t_id: int) -> str:
        return self.graph.tensors[t_id].name

    def new_grad(self, t_id: int, suffix: str = "") -> str:
        t = self.graph.tensors[t_id]
        name = f"grad/{t.name}{suffix}"
        self.tensors.append(_record(t, name=name, kind="activation"))
        return name

    def gradient_of(self, t_id: int) -> str:
        """The full gradient of a tensor: its single part, or the sum of its parts."""
        parts = self.partials[t_id]
        if len(parts) == 1:
            return parts[0]
        name = self.new_grad(t_id, suffix="/sum")
        kind = "Add" if len(parts) == 2 else "Sum"  # ONNX's Add takes two operands, Sum any number
        self.ops.append(dict(name=f"{name}", kind=kind, inputs=list(parts), outputs=[name],
                             vector_ops=self.graph.tensors[t_id].elements * (len(parts) - 1)))
        self.partials[t_id] = [name]
        return name

    def add_loss(self, y) -> None:
        """Step 2: the loss op of inference output ``y``."""
        self.tensors.append(_record(y, name=f"labels/{y.name}", kind="input"))
        self.tensors.append(dict(name=f"loss/{y.name}", shape=[1], dtype=y.dtype, itemsize=y.itemsize,
                                 kind="output"))
        self.ops.append(dict(name=f"loss/{y.name}", kind="LossGrad", inputs=[y.name, f"labels/{y.name}"],
                             outputs=[f"loss/{y.name}", self.new_grad(y.id)], vector_ops=3 * y.elements))
        self.partials[y.id].append(f"grad/{y.name}")

    def add_backward(self, op, requires_grad: list[bool]) -> None:
        """Step 3: the backward ops of one forward op (none if no gradient reaches it or it has
        no differentiable input)."""
        live_outs = [t for t in op.outputs if self.partials.get(t)]
        if not live_outs:
            return
        diff_inputs = [t for t in dict.fromkeys(op.inputs) if requires_grad[t]]
        if not diff_inputs:
            return
        grads_out = [self.gradient_of(t) for t in live_outs]
        if op.kind in GEMM_KINDS and op.gemm is not None:
            self._backward_gemm(op, live_outs, diff_inputs, grads_out)
        else:
            self._backward_other(op, live_outs, diff_inputs, grads_out)

    def _backward_gemm(self, op, live_outs, diff_inputs, grads_out) -> None:
        """One gradient op per differentiable input of a GEMM-like op: it reads grad/<y> and the
        other operand (a bias gradient: grad/<y> only)."""
        operands = list(dict.fromkeys(op.inputs[:2]))
        for t in diff_inputs:
            g = self.new_grad(t, suffix=f"@{op.name}")
            others = [self.name(o) for o in operands if o != t] if t in operands else []
            g_mnk = op.gemm
            if t in operands and t == operands[0]:
                gemm = Gemm(m=g_mnk.m, n=g_mnk.k, k=g_mnk.n, batch=g_mnk.batch)
            elif t in operands:
                gemm = Gemm(m=g_mnk.k, n=g_mnk.n, k=g_mnk.m, batch=g_mnk.batch)
            else:
                gemm = None  # bias: a reduction of grad/<y>
            self.ops.append(dict(name=f"{op.name}/grad/{self.name(t)}", kind=f"{op.kind}Grad",
                                 inputs=grads_out + others, outputs=[g], gemm=gemm,
                                 macs=gemm.macs if gemm else 0,
                                 vector_ops=0 if gemm else sum(self.graph.tensors[o].elements for o in live_outs)))
            self.partials[t].append(g)

    def _backward_other(self, op, live_outs, diff_inputs, grads_out) -> None:
        """Any other op: inputs of an Add/Sub/Identity of the output's shape take grad/<y>
        itself; one op reads grad/<y> and what the derivative needs (``SAVED``) and writes the
        gradients of the other differentiable inputs."""
        passthrough = []
        if op.kind in ("Add", "Sub", "Identity") and len(live_outs) == 1:
            y = self.graph.tensors[live_outs[0]]
            passthrough = [t for t in diff_inputs if self.graph.tensors[t].shape == y.shape]
        for t in passthrough:
            self.partials[t].append(grads_out[0])
        rest = [t for t in diff_inputs if t not in passthrough]
        if not rest:
            return
        saved_rule = SAVED.get(op.kind, "in")
        saved = []
        if "in" in saved_rule:
            saved += [self.name(t) for t in dict.fromkeys(op.inputs)]
        if "out" in saved_rule:
            saved += [self.name(t) for t in op.outputs]
        outs = [self.new_grad(t, suffix=f"@{op.name}") for t in rest]
        self.ops.append(dict(name=f"{op.name}/grad", kind=f"{op.kind}Grad",
                             inputs=list(dict.fromkeys(grads_out + saved)), outputs=outs,
                             vector_ops=sum(self.graph.tensors[t].elements for t in rest)))
        for t, g in zip(rest, outs):
            self.partials[t].append(g)

    def add_update(self, w: int) -> None:
        """Step 4: the SGD update of trainable weight ``w`` (none if no gradient reached it)."""
        if not self.partials.get(w):
            return
        t = self.graph.tensors[w]
        g = self.gradient_of(w)
        self.tensors.append(_record(t, name=f"{t.name}/updated", kind="output"))
        self.ops.append(dict(name=f"{t.name}/sgd", kind="SGDUpdate", inputs=[t.name, g],
                             outputs=[f"{t.name}/updated"], vector_ops=2 * t.elements))


def make_training_graph(graph: Graph) -> Graph:
    """The training graph of ``graph`` (see the module docstring). Raises TraceError if no
    output depends on a trainable weight (nothing to train)."""
    trainable = trainable_weights(graph)
    requires_grad = _requires_grad(graph, trainable)
    outputs = [t for t in graph.tensors if t.kind == "output" and requires_grad[t.id]]
    if not outputs:
        raise TraceError(f"graph {graph.name!r}: no output depends on a trainable weight; nothing to train")
    build = _TrainingBuilder(graph)
    for y in outputs:
        build.add_loss(y)
    for op in reversed(graph.ops):
        build.add_backward(op, requires_grad)
    for w in sorted(trainable):
        build.add_update(w)
    meta = dict(graph.meta)
    meta["training"] = {"from": graph.name, "optimizer": "sgd"}
    return build_graph(f"{graph.name}-train", build.tensors, build.ops, meta)
