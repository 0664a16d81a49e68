"""Optimality-preserving sub-graph fusion (Zhong et al., §IV-B, Theorems IV.1, IV.2, Algorithm 1).

A *region* grown from a buffer ``b`` (Algorithm 1: a breadth-first walk over the consumers of
``b`` and their successors, at most ``M`` nodes) is *isolated* (Definition 4) when ``b`` is
its only input, all of ``b``'s readers are inside, and a single buffer ``o`` leaves it. Such a
region is replaced by one hyper-node that runs it in its own minimum-peak order (found by the
DP; ``extra`` = its inner peak minus ``b`` and ``o``), which is safe when:

- **Theorem IV.2** (valley-free region): every way of stopping half-way through the region
  leaves at least max(t0, tn) bytes of it live, t0/tn being its bytes live before/after it
  (``b``/``o``). We check this over *every* internal down-set, not only the chosen order: an
  interleaved outside op would then always see more of the region's bytes than if it ran
  before or after it, and the region's own steps are cheapest at the point of the
  interleaving where the rest of the graph holds the least (exchange argument; the paper's
  proof sketch, made to hold for any internal order);
- **Theorem IV.1** (monotonic linear sequence): a chain whose transient footprint only rises
  (eq. 11) and whose last step is its largest (eq. 12), or only falls (13) and whose first
  step is its largest (14).

Fusion repeats until nothing changes (Algorithm 1's outer loop); fused nodes fuse again, so a
residual block becomes one node, then a chain of them one node (Fig. 6). The property test
checks that the DP's optimal peak of the fused graph equals the original's on random DAGs.
"""

from __future__ import annotations

from dataclasses import dataclass

from planners.schedule.dp import downset_transients, min_peak_schedule
from planners.schedule.problem import MemoryProblem

DEFAULT_MAX_REGION = 12


@dataclass(frozen=True)
class Region:
    nodes: tuple[int, ...]  # nodes of the problem, in the hyper-node's internal order
    source: int  # the input buffer b
    sink: int  # the output buffer o
    extra: int
    theorem: str  # "IV.1" or "IV.2"


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
    """The hyper-node for ``nodes`` if fusing them is safe, else None."""
    sub = problem.region(nodes)
    result = min_peak_schedule(sub, max_ops=len(nodes))
    inner = [nodes[i] for i in result.order]
    boundary = (problem.sizes[b] if problem.producer[b] >= 0 else 0) + problem.sizes[o]
    t0 = sum(s for s, on in zip(sub.sizes, sub.live_at_start) if on)
    tn = sum(s for s, on in zip(sub.sizes, sub.live_at_end) if on)
    full = (1 << sub.n) - 1
    middle = [live for mask, live in downset_transients(sub).items() if mask not in (0, full)]
    if min(middle) >= max(t0, tn):
        return Region(tuple(inner), b, o, result.peak - boundary, "IV.2")
    if _is_chain(sub):
        order = result.order  # the only order of a chain
        steps = sub.profile(order)
        transient = [t0] + _transients(sub, order)
        rising = all(x <= y for x, y in zip(transient, transient[1:])) and max(steps) == steps[-1]
        falling = all(x >= y for x, y in zip(transient, transient[1:])) and max(steps) == steps[0]
        if rising or falling:
            return Region(tuple(inner), b, o, result.peak - boundary, "IV.1")
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


def contract(problem: MemoryProblem, regions: list[Region]) -> MemoryProblem:
    """Replace each (disjoint) region by one hyper-node, keeping node ids topological."""
    p = problem
    region_of = {v: i for i, r in enumerate(regions) for v in r.nodes}
    pos = _positions(p)
    sink_node = {max(r.nodes, key=pos.__getitem__): i for i, r in enumerate(regions)}
    new_id: dict[int, int] = {}
    nodes: list[tuple[str, int]] = []  # ("op", v) or ("region", i)
    for v in p.topological_order():
        if v in region_of:
            if v in sink_node and sink_node[v] == region_of[v]:
                for u in regions[region_of[v]].nodes:
                    new_id[u] = len(nodes)
                nodes.append(("region", region_of[v]))
        else:
            new_id[v] = len(nodes)
            nodes.append(("op", v))
    internal = set()
    for r in regions:
        inside = set(r.nodes)
        for v in r.nodes:
            for x in p.node_inputs[v] + p.node_outputs[v]:
                if x != r.sink and (x != r.source or p.producer[x] < 0) and all(c in inside for c in p.consumers[x]):
                    internal.add(x)
    keep = [x for x in range(p.n_buffers) if x not in internal]
    buf = {x: i for i, x in enumerate(keep)}
    node_inputs, node_outputs, extra, members, names = [], [], [], [], []
    for kind, ref in nodes:
        if kind == "op":
            node_inputs.append(tuple(buf[x] for x in p.node_inputs[ref] if x in buf))
            node_outputs.append(tuple(buf[x] for x in p.node_outputs[ref]))
            extra.append(p.extra[ref])
            members.append(p.members[ref])
            names.append(p.names[ref] if p.names else str(ref))
        else:
            r = regions[ref]
            node_inputs.append((buf[r.source],) if r.source in buf else ())
            node_outputs.append((buf[r.sink],))
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
    """One pass of Algorithm 1 over every buffer: the disjoint safe regions found."""
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


@dataclass(frozen=True)
class FusionResult:
    problem: MemoryProblem
    rounds: int
    fused_by: dict  # theorem -> number of fusions


def fuse(problem: MemoryProblem, max_region: int = DEFAULT_MAX_REGION) -> FusionResult:
    """Fuse until no safe region is left (Algorithm 1's outer loop)."""
    rounds = 0
    counts = {"IV.1": 0, "IV.2": 0}
    while True:
        regions = fusion_round(problem, max_region)
        if not regions:
            return FusionResult(problem, rounds, counts)
        for r in regions:
            counts[r.theorem] += 1
        problem = contract(problem, regions)
        rounds += 1
