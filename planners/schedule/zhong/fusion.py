"""Optimality-preserving sub-graph fusion (Zhong et al., §IV-B, Theorems IV.1, IV.2, Algorithm 1).

Two kinds of fusion, repeated until nothing changes (Algorithm 1's outer loop); fused nodes
fuse again, so a residual block becomes one node, then a chain of them one node (Fig. 6):

- **Isolated regions** (Definition 4, Theorem IV.2). A region grown from a buffer ``b``
  (Algorithm 1: a breadth-first walk over the consumers of ``b`` and their successors, at
  most ``M`` nodes) is isolated when ``b`` is its only input, all of ``b``'s readers are
  inside, and a single buffer ``o`` leaves it. It becomes one hyper-node that runs it in its
  own minimum-peak order (found by the DP; ``extra`` = its inner peak minus ``b`` and ``o``)
  when every way of stopping half-way through it leaves at least max(t0, tn) bytes of it
  live, t0/tn being its bytes live before/after it (eq. 15, 16). We check this over *every*
  internal down-set, not only the chosen order, because the exchange argument needs it: an
  interleaved outside op then always sees more of the region's bytes than if the region ran
  before or after it, and the region's own steps are cheapest where the rest of the graph
  holds the least. An isolated chain whose transient footprint only rises and whose last
  step is its largest, or only falls and whose first step is its largest, fuses too
  (Theorem IV.1, eq. 11–14).
- **Monotonic edges** (Theorem IV.1 on a two-op sequence u -> v whose link is exclusive:
  all of u's outputs are read by v alone). The paper's linear sequence asks each op for one
  parent and one child; we ask only what the exchange argument uses, so the ends may touch
  the rest of the graph (u many inputs, v many readers):
  *falling*: v reads nothing but u's outputs, v's outputs are no larger than u's
  (eq. 13), and v's step cannot exceed u's even if u's shared inputs stay live
  (out(v) + ES_v <= ES_u + bytes u frees for sure, eq. 14) -> running v at once after u
  never costs more;
  *rising*: u's inputs are read by u alone, are no larger than its outputs (eq. 11), and
  u's step is not above v's (in(u) + ES_u <= out(v) + ES_v, eq. 12) -> running u just
  before v never costs more.
  The hyper-node reads u's (and v's other) inputs, writes v's outputs and keeps the larger
  of the two steps as ``extra``, so its cost is exact.

The property test checks that the DP's optimal peak of the fused graph equals the original's
on random DAGs, and that an order of the fused graph costs the same expanded.
"""

from __future__ import annotations

from dataclasses import dataclass

from planners.schedule.dp import downset_transients, min_peak_schedule
from planners.schedule.problem import MemoryProblem

#: Algorithm 1's M (the paper gives no value). Larger M finds few more regions on our traces
#: (benchmarks/bench_schedulers.py --max-region) while the legality test's DP grows as 2^M.
DEFAULT_MAX_REGION = 12


@dataclass(frozen=True)
class Region:
    nodes: tuple[int, ...]  # nodes of the problem, in the hyper-node's internal order
    extra: int  # the hyper-node's ES: its largest step minus its inputs and outputs
    theorem: str  # "IV.1" (isolated monotone chain), "IV.2" or "IV.1-edge" (monotonic edge)


def boundary(problem: MemoryProblem, nodes) -> tuple[list[int], list[int], set[int]]:
    """(inputs, outputs, internal buffers) of ``nodes`` fused into one node. A buffer is
    internal when all its readers are inside and it is made inside (or is a weight that only
    inside nodes read); the others the hyper-node reads or writes."""
    p = problem
    inside = set(nodes)
    inputs, outputs, internal = [], [], set()
    for x in dict.fromkeys(x for v in nodes for x in p.node_inputs[v] + p.node_outputs[v]):
        own = p.producer[x] in inside
        if (p.consumers[x] and all(c in inside for c in p.consumers[x]) and not p.live_at_end[x]
                and (own or (p.producer[x] < 0 and not p.live_at_start[x]))):
            internal.add(x)
        elif own:
            outputs.append(x)
        else:
            inputs.append(x)
    return inputs, outputs, internal


def grow_regions(problem: MemoryProblem, b: int, max_region: int, topo_pos: list[int]):
    """Candidate regions grown from buffer ``b`` (Algorithm 1's inner loop): yields each
    prefix of the growth that has a single open buffer, ``b`` fully consumed."""
    p = problem
    region: list[int] = []
    inside: set[int] = set()
    available = {b}
    while len(region) < max_region:
        candidates = {c for a in available for c in p.consumers[a] if c not in inside}
        ready = [c for c in candidates
                 if all(x in available or (p.producer[x] < 0 and not p.live_at_start[x])
                        for x in p.node_inputs[c])]
        if not ready:
            return
        v = min(ready, key=lambda c: topo_pos[c])
        region.append(v)
        inside.add(v)
        available.update(p.node_outputs[v])
        if len(region) < 2:
            continue
        touched = {x for u in region for x in p.node_inputs[u] + p.node_outputs[u]}
        open_buffers = [x for x in touched
                        if p.live_at_end[x] or any(c not in inside for c in p.consumers[x])
                        or (p.producer[x] in inside and not p.consumers[x])]
        if len(open_buffers) == 1 and open_buffers[0] != b and p.producer[open_buffers[0]] in inside:
            yield list(region), open_buffers[0]


def _is_chain(sub: MemoryProblem) -> bool:
    preds, succ = sub.predecessors(), sub.successors()
    return all(len(x) <= 1 for x in preds) and all(len(x) <= 1 for x in succ)


def check_region(problem: MemoryProblem, nodes: list[int], b: int, o: int) -> Region | None:
    """The hyper-node for the isolated region ``nodes`` (input ``b``, output ``o``) if fusing
    it is safe, else None."""
    inputs, outputs, _ = boundary(problem, nodes)
    if outputs != [o] or any(x != b for x in inputs):
        return None  # e.g. a weight that outside nodes read too: the region is not isolated
    sub = problem.region(nodes)
    result = min_peak_schedule(sub, max_ops=len(nodes))
    inner = [nodes[i] for i in result.order]
    extra = result.peak - sum(problem.sizes[x] for x in inputs + outputs)
    t0 = sum(s for s, on in zip(sub.sizes, sub.live_at_start) if on)
    tn = sum(s for s, on in zip(sub.sizes, sub.live_at_end) if on)
    full = (1 << sub.n) - 1
    middle = [live for mask, live in downset_transients(sub).items() if mask not in (0, full)]
    if min(middle) >= max(t0, tn):
        return Region(tuple(inner), extra, "IV.2")
    if _is_chain(sub):
        order = result.order  # the only order of a chain
        steps = sub.profile(order)
        transient = [t0] + _transients(sub, order)
        rising = all(x <= y for x, y in zip(transient, transient[1:])) and max(steps) == steps[-1]
        falling = all(x >= y for x, y in zip(transient, transient[1:])) and max(steps) == steps[0]
        if rising or falling:
            return Region(tuple(inner), extra, "IV.1")
    return None


def _transients(sub: MemoryProblem, order: list[int]) -> list[int]:
    """Bytes live after each step of ``order`` (Definition 2's t^i, i >= 1)."""
    first, last = sub.lifetimes(order)
    out = []
    for s in range(len(order)):
        out.append(sum(sub.sizes[x] for x in range(sub.n_buffers)
                       if first[x] >= 0 and first[x] <= s < last[x]
                       or (sub.live_at_end[x] and first[x] <= s)))
    return out


def check_edge(problem: MemoryProblem, u: int, v: int) -> Region | None:
    """The hyper-node (u, v) if the edge u -> v is exclusive and monotonic (module docstring)."""
    p = problem
    outs_u = p.node_outputs[u]
    if u == v or not outs_u or any(set(p.consumers[x]) != {v} or p.live_at_end[x] for x in outs_u):
        return None
    size = lambda xs: sum(p.sizes[x] for x in xs)  # noqa: E731
    a, in_u, out_v = size(outs_u), size(p.node_inputs[u]), size(p.node_outputs[v])
    ex_u, ex_v = p.extra[u], p.extra[v]
    own = [x for x in p.node_inputs[u] if set(p.consumers[x]) == {u} and not p.live_at_end[x]]
    # weights only u or v read vanish into the hyper-node: their bytes move into its ES
    weights = size(x for x in boundary(p, (u, v))[2] if p.producer[x] < 0)
    if set(p.node_inputs[v]) == set(outs_u):  # falling: v can run at once after u
        if out_v <= a and out_v + ex_v <= ex_u + size(own):
            return Region((u, v), a + ex_u - out_v + weights, "IV.1-edge")
    if len(own) == len(p.node_inputs[u]):  # rising: u can run just before v
        if in_u <= a and in_u + ex_u <= out_v + ex_v:
            return Region((u, v), a + ex_v - in_u + weights, "IV.1-edge")
    return None


def contract(problem: MemoryProblem, regions: list[Region]) -> MemoryProblem:
    """Replace each (disjoint) region by one hyper-node, placed where its last node was in
    topological order (every edge into the region ends at a node before that one, every edge
    out of it starts at that one, so ids stay topological)."""
    p = problem
    region_of = {v: i for i, r in enumerate(regions) for v in r.nodes}
    pos = _positions(p)
    sink_node = {max(r.nodes, key=pos.__getitem__): i for i, r in enumerate(regions)}
    bounds = [boundary(p, r.nodes) for r in regions]
    internal = set().union(*(inner for _, _, inner in bounds))
    new_id: dict[int, int] = {}
    nodes: list[tuple[str, int]] = []  # ("op", v) or ("region", i)
    for v in p.topological_order():
        if v in region_of:
            if sink_node.get(v) == region_of[v]:
                for u in regions[region_of[v]].nodes:
                    new_id[u] = len(nodes)
                nodes.append(("region", region_of[v]))
        else:
            new_id[v] = len(nodes)
            nodes.append(("op", v))
    keep = [x for x in range(p.n_buffers) if x not in internal]
    buf = {x: i for i, x in enumerate(keep)}
    node_inputs, node_outputs, extra, members, names = [], [], [], [], []
    for kind, ref in nodes:
        if kind == "op":
            node_inputs.append(tuple(buf[x] for x in p.node_inputs[ref]))
            node_outputs.append(tuple(buf[x] for x in p.node_outputs[ref]))
            extra.append(p.extra[ref])
            members.append(p.members[ref])
            names.append(p.names[ref] if p.names else str(ref))
        else:
            r = regions[ref]
            inputs, outputs, _ = bounds[ref]
            node_inputs.append(tuple(buf[x] for x in inputs))
            node_outputs.append(tuple(buf[x] for x in outputs))
            extra.append(r.extra)
            members.append(tuple(op for v in r.nodes for op in p.members[v]))
            names.append("{" + ",".join(p.names[v] if p.names else str(v) for v in r.nodes) + "}")
    return MemoryProblem(
        sizes=tuple(p.sizes[x] for x in keep),
        producer=tuple(-1 if p.producer[x] < 0 else new_id[p.producer[x]] for x in keep),
        consumers=tuple(tuple(dict.fromkeys(new_id[c] for c in p.consumers[x])) for x in keep),
        node_inputs=tuple(node_inputs), node_outputs=tuple(node_outputs), extra=tuple(extra),
        members=tuple(members), live_at_start=tuple(p.live_at_start[x] for x in keep),
        live_at_end=tuple(p.live_at_end[x] for x in keep), names=tuple(names),
    )


def _positions(problem: MemoryProblem) -> list[int]:
    pos = [0] * problem.n
    for s, v in enumerate(problem.topological_order()):
        pos[v] = s
    return pos


def fusion_round(problem: MemoryProblem, max_region: int = DEFAULT_MAX_REGION) -> list[Region]:
    """One pass of Algorithm 1 over every buffer: the disjoint safe isolated regions found."""
    pos = _positions(problem)
    taken: set[int] = set()
    found = []
    for b in range(problem.n_buffers):
        if problem.live_at_end[b]:
            continue
        for nodes, o in grow_regions(problem, b, max_region, pos):
            if taken.intersection(nodes):
                break
            region = check_region(problem, nodes, b, o)
            if region is not None:
                found.append(region)
                taken.update(nodes)
                break
    return found


def edge_round(problem: MemoryProblem) -> list[Region]:
    """One pass over the exclusive edges, in topological order: the disjoint safe ones."""
    taken: set[int] = set()
    found = []
    succ = problem.successors()
    for u in problem.topological_order():
        if u in taken or len(succ[u]) != 1 or succ[u][0] in taken:
            continue
        region = check_edge(problem, u, succ[u][0])
        if region is not None:
            found.append(region)
            taken.update(region.nodes)
    return found


@dataclass(frozen=True)
class FusionResult:
    problem: MemoryProblem
    rounds: int
    fused_by: dict  # theorem -> number of fusions


def fuse(problem: MemoryProblem, max_region: int = DEFAULT_MAX_REGION, edges: bool = True) -> FusionResult:
    """Fuse until no safe region or edge is left (Algorithm 1's outer loop). Regions first, to
    their fixed point, then one round of edges, and again: taking edges greedily earlier can
    split a region that would have fused whole (resnet50: 13 nodes instead of 7).
    ``edges=False`` keeps to the paper's isolated regions (ablation)."""
    rounds = 0
    counts = {"IV.1": 0, "IV.2": 0, "IV.1-edge": 0}

    def apply(regions: list[Region]) -> None:
        nonlocal problem, rounds
        for r in regions:
            counts[r.theorem] += 1
        problem = contract(problem, regions)
        rounds += 1

    while True:
        while regions := fusion_round(problem, max_region):
            apply(regions)
        pairs = edge_round(problem) if edges else []
        if not pairs:
            return FusionResult(problem, rounds, counts)
        apply(pairs)
