"""COSMA's tensor-overlap analysis (§III-F): which variables and pairs can matter at all.

- Op windows: op v can only run in [ASAP(v), ALAP(v)] = [|anc(v)|, n-1-|des(v)|] (one op per
  step). A fixed schedule makes every window a single step (eq. 16). ``radius`` optionally
  narrows each window to within ``radius`` steps of a hint order (a restriction: the plan is
  then not proven optimal over all orders).
- Tensor windows: a tensor can only be on chip from its birth (its producer's window, or its
  first consumer's, for data loaded from DRAM; step 0 if resident at entry) to its last
  consumer's latest step (the end of the part if a later part reads it).
- Pairs: two tensors can share a step only if their windows overlap, and not if every reader
  of one is a strict ancestor of every op that can bring the other on chip (the first is dead
  by then — the model frees tensors after their last reader, see ``cosma.model``).
"""

from __future__ import annotations

from dataclasses import dataclass

from planners.joint.cosma.problem import COMPULSORY, DRAM, MAKE, RESIDENT, CosmaPart


@dataclass(frozen=True)
class Windows:
    op: tuple[tuple[int, int], ...]  # (first, last) step of each op
    tensor: tuple[tuple[int, int], ...]  # (first, last) step each tensor may be on chip
    anc: tuple[int, ...]  # ancestor bitmask of each op (under the fixed order, if fixed)

    def cells(self) -> int:
        """(tensor, step) cells: the size of the time-indexed model."""
        return sum(hi - lo + 1 for lo, hi in self.tensor if hi >= lo)


def op_windows(part: CosmaPart, order: list[int] | None = None, fixed: bool = False,
               radius: int | None = None) -> list[tuple[int, int]]:
    n = part.steps
    if fixed:
        return [(s, s) for s in _positions(order, n)]
    anc = part.ancestor_masks()
    des = [0] * n
    for v in range(n):
        m = anc[v]
        while m:
            low = m & -m
            des[low.bit_length() - 1] += 1
            m ^= low
    wins = [(bin(anc[v]).count("1"), n - 1 - des[v]) for v in range(n)]
    if radius is not None and order is not None:
        pos = _positions(order, n)
        wins = [(max(lo, pos[v] - radius), min(hi, pos[v] + radius)) for v, (lo, hi) in enumerate(wins)]
    return wins


def _positions(order, n):
    pos = [0] * n
    for s, v in enumerate(order):
        pos[v] = s
    return pos


def tensor_windows(part: CosmaPart, ops: list[tuple[int, int]]) -> list[tuple[int, int]]:
    last = part.steps - 1
    out = []
    for a in range(part.n_tensors):
        readers = part.consumers[a]
        end = max((ops[c][1] for c in readers), default=-1)
        if part.needed_after[a]:
            end = last
        st = part.entry[a]
        if st == MAKE:
            start = ops[part.producer[a]][0]
            end = max(end, ops[part.producer[a]][1])
        elif st in (COMPULSORY, DRAM):
            start = min((ops[c][0] for c in readers), default=last + 1)
            if not readers:  # not read here: it stays in DRAM, nothing to decide
                end = -1
        else:  # RESIDENT
            start = 0
            end = max(end, 0)
        out.append((start, end))
    return out


def coexisting_pairs(part: CosmaPart, win: "Windows") -> list[tuple[int, int]]:
    """Pairs whose windows overlap and that precedence does not keep apart (only the big-M
    encoding needs them: the interval encodings take every tensor of a step's window)."""
    tw, anc = win.tensor, win.anc
    births = []
    for a in range(part.n_tensors):
        st = part.entry[a]
        births.append((part.producer[a],) if st == MAKE else part.consumers[a] if st in (COMPULSORY, DRAM) else ())

    def dead_before(a: int, b: int) -> bool:  # every reader of a runs strictly before b can appear
        if part.needed_after[a] or not part.consumers[a] or not births[b]:
            return False
        if part.entry[a] == MAKE and not part.consumers[a]:
            return False
        return all(anc[x] >> c & 1 for x in births[b] for c in part.consumers[a])

    by_start = sorted(range(part.n_tensors), key=lambda a: tw[a])
    active: list[int] = []
    pairs = []
    for b in by_start:
        lo, hi = tw[b]
        if hi < lo:
            continue
        active = [a for a in active if tw[a][1] >= lo]
        for a in active:
            if not (dead_before(a, b) or dead_before(b, a)):
                pairs.append((min(a, b), max(a, b)))
        active.append(b)
    return sorted(pairs)


def analyse(part: CosmaPart, order: list[int] | None = None, fixed: bool = False,
            radius: int | None = None) -> Windows:
    ow = op_windows(part, order, fixed, radius)
    tw = tensor_windows(part, ow)
    if fixed:  # exact precedence = the order itself
        anc, before = [0] * part.steps, 0
        for v in order:
            anc[v] = before
            before |= 1 << v
    else:
        anc = part.ancestor_masks()
    return Windows(tuple(ow), tuple(tw), tuple(anc))


__all__ = ["Windows", "analyse", "op_windows", "tensor_windows", "coexisting_pairs", "RESIDENT", "DRAM"]
