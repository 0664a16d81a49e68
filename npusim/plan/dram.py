"""DRAM buffers: what a plan's ``dram`` section is keyed by, and how big the arena is.

A *DRAM buffer* is one tensor's copy in DRAM. A whole tensor's buffer is named after the
tensor; a tile (a ``View``) addresses the buffer of its ``base``, the tensor of the untiled
graph it is a view of. ``Plan.dram`` maps buffer name -> byte offset, so one offset places
every tile of a tensor at its fixed position inside it (TAA paper, Section II-C), and the
same names mean the same thing in a tiled and an untiled plan.

Weights sit in a region of their own (they live for the whole run); every other buffer
(inputs, outputs, spilled tensors, tiled feature maps, partial sums) is in the *arena*,
whose size — the highest ``offset + size`` over its buffers — is the off-chip peak a plan
with a DRAM layout reports.
"""

from __future__ import annotations

from npusim.graph.model import Graph, Tensor


def buffer_of(tensor: Tensor) -> str:
    """The name of the DRAM buffer a DMA of ``tensor`` reads or writes."""
    return tensor.view.base if tensor.view is not None else tensor.name


def buffer_tensor(name: str, graph: Graph, untiled: Graph | None = None) -> Tensor | None:
    """The tensor a buffer holds: of the untiled graph when it has it, else of ``graph``."""
    for g in (untiled, graph):
        if g is not None and name in g.tensor_by_name:
            return g.tensor_by_name[name]
    return None


def buffer_size(name: str, graph: Graph, untiled: Graph | None = None) -> int:
    """Bytes of a buffer. Without the untiled graph, a base known only through its views is
    as large as the furthest byte any of them addresses."""
    tensor = buffer_tensor(name, graph, untiled)
    if tensor is not None:
        return tensor.size
    end = 0
    for t in graph.tensors:
        v = t.view
        if v is not None and v.base == name:
            last = v.offset + sum((n - 1) * s for n, s in zip(v.shape, v.strides))
            end = max(end, (last + 1) * t.itemsize)
    return end


def is_weight_buffer(name: str, graph: Graph, untiled: Graph | None = None) -> bool:
    tensor = buffer_tensor(name, graph, untiled)
    if tensor is not None:
        return tensor.kind == "weight"
    return any(t.kind == "weight" for t in graph.tensors if t.view is not None and t.view.base == name)


def known_buffers(graph: Graph) -> set[str]:
    """Names a ``dram`` section may use: whole tensors of ``graph`` and bases of its views."""
    return {buffer_of(t) for t in graph.tensors}


def arena_bytes(dram: dict, graph: Graph, untiled: Graph | None = None) -> int:
    """Highest ``offset + size`` over the non-weight buffers of a DRAM layout."""
    return max((off + buffer_size(n, graph, untiled) for n, off in dram.items()
                if not is_weight_buffer(n, graph, untiled)), default=0)
