"""The memory-aware scheduling problem, shared by every scheduler in this package.

A ``MemoryProblem`` is a DAG of *nodes* (ops, or fused hyper-nodes) that read and write
*buffers* (tensors, with sizes rounded up to the allocation alignment). Its cost model is the
one of ``npusim.graph.analysis``: a buffer is live from the step of its producer (or of its
first consumer, if it has none) to the step of its last consumer, both inclusive; the
footprint of a step (Zhong et al.'s *stable* footprint, Definition 2) is the sum of the live
buffers plus the node's ``extra`` bytes; the peak of an order is the largest footprint. So
``MemoryProblem.from_graph(g, a).peak(order) == peak_live_bytes(g, order, a)``.

Three additions let one type serve fused graphs and parts of graphs:
- ``extra[v]``: bytes a node needs besides its buffers (Zhong's ES_k): a weight read by one op
  only is folded into that op's ``extra``; a fused hyper-node keeps its inner peak there;
- ``live_at_start[b]``: a buffer made before this (sub-)problem starts, live from step 0
  until its last consumer (Zhong's INPUT tensors, eq. 5);
- ``live_at_end[b]``: a buffer still needed after this (sub-)problem ends, live until the last
  step.
``members[v]`` lists the graph ops a node stands for, in the order they run, so a schedule of
nodes expands to a schedule of ops.
"""

from __future__ import annotations

from dataclasses import dataclass

from npusim.errors import InternalError, PlanningError
from npusim.graph.analysis import aligned, topological
from npusim.graph.model import Graph


@dataclass(frozen=True)
class MemoryProblem:
    sizes: tuple[int, ...]
    producer: tuple[int, ...]  # node that writes the buffer, -1 if none
    consumers: tuple[tuple[int, ...], ...]
    node_inputs: tuple[tuple[int, ...], ...]  # distinct buffers each node reads
    node_outputs: tuple[tuple[int, ...], ...]
    extra: tuple[int, ...]
    members: tuple[tuple[int, ...], ...]
    live_at_start: tuple[bool, ...]
    live_at_end: tuple[bool, ...]
    names: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.node_inputs)

    @property
    def n_buffers(self) -> int:
        return len(self.sizes)

    # -- construction ----------------------------------------------------------------------
    @staticmethod
    def from_graph(graph: Graph, align: int = 1, fold_weights: bool = True) -> "MemoryProblem":
        """One node per op, one buffer per tensor some op touches; with ``fold_weights``, a
        tensor without a producer read by a single op (a weight, mostly) becomes ``extra``
        bytes of that op instead."""
        extra = [0] * graph.n_ops
        buffer_of: dict[int, int] = {}
        sizes, producer, consumers = [], [], []
        for t in graph.tensors:
            size = int(aligned(t.size, align))
            if fold_weights and t.producer is None and len(t.consumers) == 1:
                extra[t.consumers[0]] += size
                continue
            if t.producer is None and not t.consumers:
                continue
            buffer_of[t.id] = len(sizes)
            sizes.append(size)
            producer.append(-1 if t.producer is None else t.producer)
            consumers.append(tuple(t.consumers))
        node_inputs = tuple(tuple(buffer_of[t] for t in dict.fromkeys(op.inputs) if t in buffer_of)
                            for op in graph.ops)
        node_outputs = tuple(tuple(buffer_of[t] for t in op.outputs) for op in graph.ops)
        nb = len(sizes)
        return MemoryProblem(
            sizes=tuple(sizes), producer=tuple(producer), consumers=tuple(consumers),
            node_inputs=node_inputs, node_outputs=node_outputs, extra=tuple(extra),
            members=tuple((i,) for i in range(graph.n_ops)),
            live_at_start=(False,) * nb, live_at_end=(False,) * nb,
            names=tuple(op.name for op in graph.ops),
        )

    # -- structure -------------------------------------------------------------------------
    def predecessors(self) -> list[list[int]]:
        return [sorted({self.producer[b] for b in ins} - {-1}) for ins in self.node_inputs]

    def successors(self) -> list[list[int]]:
        return [sorted({c for b in outs for c in self.consumers[b]}) for outs in self.node_outputs]

    def ancestor_masks(self) -> list[int]:
        """Bitmask of the ancestors of each node (not the node itself)."""
        preds = self.predecessors()
        masks = [0] * self.n
        for v in self.topological_order():
            m = 0
            for p in preds[v]:
                m |= masks[p] | (1 << p)
            masks[v] = m
        return masks

    def descendant_masks(self) -> list[int]:
        succ = self.successors()
        masks = [0] * self.n
        for v in reversed(self.topological_order()):
            m = 0
            for s in succ[v]:
                m |= masks[s] | (1 << s)
            masks[v] = m
        return masks

    def topological_order(self) -> list[int]:
        """Kahn's algorithm, smallest ready id first (deterministic)."""
        return topological(self.predecessors())

    def working_set(self, v: int) -> int:
        """Bytes node ``v`` needs while it runs: a lower bound on any order's peak."""
        return sum(self.sizes[b] for b in self.node_inputs[v] + self.node_outputs[v]) + self.extra[v]

    def lower_bound(self) -> int:
        return max((self.working_set(v) for v in range(self.n)), default=0)

    # -- cost of an order ------------------------------------------------------------------
    def lifetimes(self, order: list[int]) -> tuple[list[int], list[int]]:
        """First and last live step of every buffer (-1, -1 if never live)."""
        step = [0] * self.n
        for s, v in enumerate(order):
            step[v] = s
        last_step = len(order) - 1
        first, last = [], []
        for b in range(self.n_buffers):
            uses = [step[c] for c in self.consumers[b]]
            if self.producer[b] >= 0:
                uses.append(step[self.producer[b]])
            lo = 0 if self.live_at_start[b] else (min(uses) if uses else -1)
            hi = last_step if self.live_at_end[b] else (max(uses) if uses else -1)
            if lo < 0 and hi >= 0:
                lo = 0
            first.append(lo)
            last.append(hi if lo >= 0 else -1)
        return first, last

    def profile(self, order: list[int]) -> list[int]:
        """Footprint of every step of ``order``."""
        first, last = self.lifetimes(order)
        delta = [0] * (len(order) + 1)
        for b in range(self.n_buffers):
            if first[b] >= 0:
                delta[first[b]] += self.sizes[b]
                delta[last[b] + 1] -= self.sizes[b]
        out, acc = [], 0
        for s, v in enumerate(order):
            acc += delta[s]
            out.append(acc + self.extra[v])
        return out

    def peak(self, order: list[int]) -> int:
        return max(self.profile(order), default=0)

    def expand(self, order: list[int]) -> list[int]:
        """The graph-op order a node order stands for."""
        return [op for v in order for op in self.members[v]]

    def is_topological(self, order: list[int]) -> bool:
        if sorted(order) != list(range(self.n)):
            return False
        step = {v: s for s, v in enumerate(order)}
        return all(step[p] < step[v] for v, preds in enumerate(self.predecessors()) for p in preds)

    def check_order(self, order: list[int]) -> None:
        if sorted(order) != list(range(self.n)):
            raise InternalError(f"schedule of {len(order)} nodes is not a permutation of {self.n}")
        seen = set()
        preds = self.predecessors()
        for v in order:
            if any(p not in seen for p in preds[v]):
                raise InternalError(f"node {v} is scheduled before one of its predecessors")
            seen.add(v)

    # -- sub-problems ----------------------------------------------------------------------
    def region(self, nodes: list[int], before: set[int] | None = None,
               after: set[int] | None = None) -> "MemoryProblem":
        """The induced problem of ``nodes`` run contiguously (local node i is ``nodes[i]``).

        Buffers made before it (by a node outside, or without a producer but read by one of
        ``before``) are ``live_at_start``; buffers read after it (by a node outside, or by one
        of ``after`` when given) are ``live_at_end``; buffers the region does not touch are
        dropped (they add the same bytes to every one of its steps)."""
        local = {v: i for i, v in enumerate(nodes)}
        touched = dict.fromkeys(b for v in nodes for b in self.node_inputs[v] + self.node_outputs[v])
        buf_local = {b: i for i, b in enumerate(touched)}
        sizes, producer, consumers, start, end = [], [], [], [], []
        for b in touched:
            p = self.producer[b]
            inside_p = p in local
            sizes.append(self.sizes[b])
            producer.append(local[p] if inside_p else -1)
            consumers.append(tuple(local[c] for c in self.consumers[b] if c in local))
            outside_c = [c for c in self.consumers[b] if c not in local]
            made_before = (p >= 0 and not inside_p) or (
                p < 0 and before is not None and any(c in before for c in outside_c))
            start.append(self.live_at_start[b] or made_before)
            needed_after = bool(outside_c) if after is None else any(c in after for c in outside_c)
            end.append(self.live_at_end[b] or needed_after)
        sub = MemoryProblem(
            sizes=tuple(sizes), producer=tuple(producer), consumers=tuple(consumers),
            node_inputs=tuple(tuple(buf_local[b] for b in self.node_inputs[v]) for v in nodes),
            node_outputs=tuple(tuple(buf_local[b] for b in self.node_outputs[v]) for v in nodes),
            extra=tuple(self.extra[v] for v in nodes), members=tuple(self.members[v] for v in nodes),
            live_at_start=tuple(start), live_at_end=tuple(end),
            names=tuple(self.names[v] for v in nodes) if self.names else (),
        )
        return sub
