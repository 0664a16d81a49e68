"""Analyses of a graph under an op order: topological orders, lifetimes, live bytes, bounds.

Definitions (the papers' discrete-time model; step = position in the order):
- a tensor is *live* from the step of its producer (or of its first consumer, for inputs and
  weights, which start in DRAM) to the step of its last consumer (its producer's step if it
  has none); both ends inclusive;
- the *live-bytes profile* sums the sizes of the live tensors at each step;
- ``M_R`` = the largest sum of one op's distinct input and output bytes: no plan, whatever it
  spills, needs less scratchpad than this without tiling;
- ``M_P`` of an order = the peak of its live-bytes profile: with this much scratchpad (and no
  fragmentation) nothing needs to be spilled.

Sizes may be rounded up to an allocation alignment (``align``), as allocators place them.
"""

from __future__ import annotations

import heapq

from dataclasses import dataclass

import numpy as np

from npusim.errors import PlanError
from npusim.graph.model import Graph, op_predecessors


def aligned(size, align: int = 1):
    """``size`` rounded up to a multiple of ``align`` (works on ints and numpy arrays)."""
    return -(-size // align) * align


def default_order(graph: Graph) -> list[int]:
    """The model's definition order (what frameworks run)."""
    return list(range(graph.n_ops))


def predecessors(graph: Graph) -> list[list[int]]:
    """Ops each op must follow (through tensors, or through DRAM for read views), sorted."""
    return [sorted(ps) for ps in op_predecessors(graph)]


def successors(graph: Graph) -> list[list[int]]:
    """Ops that must follow each op, in definition order."""
    succ: list[list[int]] = [[] for _ in graph.ops]
    for op, ps in enumerate(predecessors(graph)):
        for p in ps:
            succ[p].append(op)
    return succ


def topological(preds) -> list[int]:
    """Kahn's algorithm over predecessor lists, the smallest ready index first (deterministic:
    the given order wherever it is already topological); nodes on a cycle are left out."""
    succ: list[list[int]] = [[] for _ in preds]
    waiting = [len(p) for p in preds]
    for v, ps in enumerate(preds):
        for p in ps:
            succ[p].append(v)
    ready = [v for v, n in enumerate(waiting) if not n]
    heapq.heapify(ready)
    order = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for s in succ[v]:
            waiting[s] -= 1
            if not waiting[s]:
                heapq.heappush(ready, s)
    return order


def reverse_post_order(graph: Graph) -> list[int]:
    """Reverse post-order of a depth-first search from the source ops."""
    return dfs_reverse_post_order(successors(graph), predecessors(graph))


def dfs_reverse_post_order(succ: list[list[int]], preds: list[list[int]]) -> list[int]:
    """Reverse post-order of an iterative DFS (no recursion limit) from the nodes without
    predecessors, children visited in the order given."""
    visited = [False] * len(succ)
    post: list[int] = []
    for root in range(len(succ)):
        if preds[root] or visited[root]:
            continue
        visited[root] = True
        stack = [(root, iter(succ[root]))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if not visited[child]:
                    visited[child] = True
                    stack.append((child, iter(succ[child])))
                    break
            else:
                stack.pop()
                post.append(node)
    return post[::-1]


def check_order(graph: Graph, order: list[int]) -> None:
    """Raise PlanError unless ``order`` is a permutation of the ops that respects every edge."""
    if sorted(order) != list(range(graph.n_ops)):
        missing = sorted(set(range(graph.n_ops)) - set(order))
        raise PlanError(
            f"order is not a permutation of the {graph.n_ops} ops"
            + (f" (missing op {graph.ops[missing[0]].name!r})" if missing else " (an op repeats)")
        )
    step = step_of(order)
    for op in graph.ops:
        for t in op.inputs:
            tensor = graph.tensors[t]
            producers = [tensor.producer] if tensor.producer is not None else [
                graph.tensors[s].producer for s in tensor.sources]
            for p in producers:
                if step[p] >= step[op.id]:
                    raise PlanError(
                        f"order is not topological: op {op.name!r} at step {step[op.id]} reads "
                        f"{tensor.name!r}, produced by {graph.ops[p].name!r} at step {step[p]}"
                    )


def step_of(order: list[int]) -> np.ndarray:
    """Inverse permutation: step_of(order)[op] = position of op in order."""
    step = np.empty(len(order), dtype=np.int64)
    step[np.asarray(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int64)
    return step


@dataclass(frozen=True)
class Lifetimes:
    """Per tensor: first and last live step (-1, -1 for tensors no op touches)."""

    first: np.ndarray
    last: np.ndarray


def lifetimes(graph: Graph, order: list[int]) -> Lifetimes:
    step = step_of(order)
    first = np.full(graph.n_tensors, -1, dtype=np.int64)
    last = np.full(graph.n_tensors, -1, dtype=np.int64)
    for t in graph.tensors:
        uses = [int(step[c]) for c in t.consumers]
        if t.producer is not None:
            uses.append(int(step[t.producer]))
        if uses:
            first[t.id] = min(uses)
            last[t.id] = max(uses)
    return Lifetimes(first, last)


def tensor_sizes(graph: Graph, align: int = 1) -> np.ndarray:
    return aligned(graph.arrays.tensor_size, align)


def live_profile(graph: Graph, order: list[int], align: int = 1) -> np.ndarray:
    """Live bytes at each step of ``order`` (int64 array of length n_ops)."""
    life = lifetimes(graph, order)
    sizes = tensor_sizes(graph, align)
    used = life.first >= 0
    delta = np.zeros(graph.n_ops + 1, dtype=np.int64)
    np.add.at(delta, life.first[used], sizes[used])
    np.add.at(delta, life.last[used] + 1, -sizes[used])
    return np.cumsum(delta[:-1])


def peak_live_bytes(graph: Graph, order: list[int], align: int = 1) -> int:
    """M_P of an order: the peak of its live-bytes profile."""
    return int(live_profile(graph, order, align).max(initial=0))


def op_working_set(graph: Graph, align: int = 1) -> np.ndarray:
    """Bytes of each op's distinct inputs and outputs (what must be on chip while it runs)."""
    arr = graph.arrays
    sizes = tensor_sizes(graph, align)
    return np.add.reduceat(sizes[arr.op_tensor_idx], arr.op_tensor_ptr[:-1]) if graph.n_ops else np.zeros(0, np.int64)


def min_required(graph: Graph, align: int = 1) -> tuple[int, int]:
    """(M_R, op id that needs it)."""
    ws = op_working_set(graph, align)
    op = int(np.argmax(ws))
    return int(ws[op]), op
