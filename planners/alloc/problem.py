"""The generic offset-assignment problem, its result, and an independent checker.

One problem serves the scratchpad and the DRAM arena alike (MindSpore paper, Definition 5,
"Offset Assignment for Parallel"):

- *items* with sizes in bytes (already rounded up to the alignment by the builder);
- which pairs may not share addresses: either the items' lifetimes (single stream: two items
  conflict when their inclusive step intervals ``[first, last]`` intersect) or an explicit
  conflict set (the unsafe pairs of the multi-stream safety analysis, ``npusim.plan.safety``);
  lifetimes may be given alongside an explicit set, for the sorts and bounds that use them;
- *contiguous blocks*: tuples of items that must sit back to back, in order
  (``offset(t_j) = offset(t_{j-1}) + size(t_{j-1})``); an item is in at most one block;
- an alignment every offset is a multiple of, and optional pinned offsets.

A solution is an ``OffsetResult``: offsets, the footprint ``max(offset + size)``, the lower
bound it is measured against and the gap to it. ``check_assignment`` re-derives every
constraint from the problem, trusting no algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from npusim.errors import PlanningError


# --------------------------------------------------------------------------------------------
# Conflict relations
# --------------------------------------------------------------------------------------------

class IntervalConflicts:
    """Two items conflict when their inclusive lifetimes ``[first, last]`` intersect."""

    def __init__(self, first: np.ndarray, last: np.ndarray) -> None:
        self.first = np.asarray(first, dtype=np.int64)
        self.last = np.asarray(last, dtype=np.int64)

    @property
    def n(self) -> int:
        return len(self.first)

    def row(self, i: int) -> np.ndarray:
        """Boolean mask of the items conflicting with ``i`` (never ``i`` itself)."""
        mask = (self.first <= self.last[i]) & (self.first[i] <= self.last)
        mask[i] = False
        return mask

    def has(self, i: int, j: int) -> bool:
        return i != j and self.first[i] <= self.last[j] and self.first[j] <= self.last[i]

    def has_many(self, i: int, js: np.ndarray) -> np.ndarray:
        """``has(i, j)`` for each j of ``js`` (a boolean array), in O(len(js))."""
        return (self.first[js] <= self.last[i]) & (self.first[i] <= self.last[js]) & (js != i)

    def degrees(self) -> np.ndarray:
        # #items with first <= last[i]  minus  #items with last < first[i], minus i itself
        sf, sl = np.sort(self.first), np.sort(self.last)
        starts_before_end = np.searchsorted(sf, self.last, side="right")
        ends_before_start = np.searchsorted(sl, self.first, side="left")
        return (starts_before_end - ends_before_start - 1).astype(np.int64)

    def pairs(self) -> np.ndarray:
        """All conflicting pairs ``(i, j)`` with ``i < j``, as an int64 array of shape (m, 2)."""
        order = np.argsort(self.first, kind="stable")
        out = []
        for k, i in enumerate(order):
            # items starting no later than i's end, after i in start order
            for j in order[k + 1:]:
                if self.first[j] > self.last[i]:
                    break
                out.append((min(i, j), max(i, j)))
        return np.array(sorted(out), dtype=np.int64).reshape(-1, 2)


class MatrixConflicts:
    """An explicit symmetric conflict relation stored as rows of uint64 bitset words."""

    def __init__(self, bits: np.ndarray) -> None:
        self.bits = np.ascontiguousarray(bits, dtype=np.uint64)
        self._n = self.bits.shape[0]

    @classmethod
    def from_pairs(cls, n: int, pairs) -> "MatrixConflicts":
        bits = np.zeros((n, max(1, -(-n // 64))), dtype=np.uint64)
        for i, j in pairs:
            i, j = int(i), int(j)
            if i == j:
                continue
            if not (0 <= i < n and 0 <= j < n):
                raise PlanningError(f"conflict pair ({i}, {j}) names an item outside 0..{n - 1}")
            bits[i, j >> 6] |= np.uint64(1) << np.uint64(j & 63)
            bits[j, i >> 6] |= np.uint64(1) << np.uint64(i & 63)
        return cls(bits)

    @property
    def n(self) -> int:
        return self._n

    def row(self, i: int) -> np.ndarray:
        as_bytes = self.bits[i].view(np.uint8)
        return np.unpackbits(as_bytes, bitorder="little")[: self._n].astype(bool)

    def has(self, i: int, j: int) -> bool:
        return bool((int(self.bits[i, j >> 6]) >> (j & 63)) & 1)

    def has_many(self, i: int, js: np.ndarray) -> np.ndarray:
        """``has(i, j)`` for each j of ``js`` (a boolean array), in O(len(js))."""
        js = np.asarray(js, dtype=np.int64)
        return ((self.bits[i, js >> 6] >> (js & 63).astype(np.uint64)) & np.uint64(1)).astype(bool)

    def degrees(self) -> np.ndarray:
        counts = np.unpackbits(self.bits.view(np.uint8), axis=1, bitorder="little")
        return counts.sum(axis=1, dtype=np.int64)

    def pairs(self) -> np.ndarray:
        out = []
        for i in range(self._n):
            js = np.flatnonzero(self.row(i))
            out.extend((i, int(j)) for j in js if j > i)
        return np.array(out, dtype=np.int64).reshape(-1, 2)


# --------------------------------------------------------------------------------------------
# Problem and result
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class OffsetProblem:
    """Items to place. ``sizes`` are the bytes each item reserves (multiples of ``alignment``).

    ``first``/``last``: inclusive lifetimes (needed unless ``conflicts`` is given; also used by
    the breadth/source sorts, the shared-object strategies and the lifetime bound).
    ``conflicts``: an explicit relation (``MatrixConflicts``); None means lifetime overlap.
    ``blocks``: contiguous blocks, each a tuple of >= 2 items in address order.
    ``pinned``: item -> fixed offset. ``names``: for messages.
    """

    sizes: np.ndarray
    first: np.ndarray | None = None
    last: np.ndarray | None = None
    conflicts: MatrixConflicts | None = None
    blocks: tuple[tuple[int, ...], ...] = ()
    alignment: int = 1
    pinned: dict = field(default_factory=dict)
    names: tuple[str, ...] | None = None

    def __post_init__(self):
        sizes = np.asarray(self.sizes, dtype=np.int64)
        object.__setattr__(self, "sizes", sizes)
        n = len(sizes)
        if self.alignment < 1:
            raise PlanningError(f"offset problem: alignment {self.alignment}, expected >= 1")
        if n and sizes.min() < 0:
            i = int(np.argmin(sizes))
            raise PlanningError(f"offset problem: item {self.name(i)!r} has size {sizes[i]}, expected >= 0")
        bad = np.flatnonzero(sizes % self.alignment)
        if bad.size:
            i = int(bad[0])
            raise PlanningError(f"offset problem: item {self.name(i)!r} has size {sizes[i]}, "
                                f"expected a multiple of the alignment {self.alignment}")
        for key in ("first", "last"):
            arr = getattr(self, key)
            if arr is not None:
                arr = np.asarray(arr, dtype=np.int64)
                if len(arr) != n:
                    raise PlanningError(f"offset problem: {key} has {len(arr)} entries, expected {n}")
                object.__setattr__(self, key, arr)
        if (self.first is None) != (self.last is None):
            raise PlanningError("offset problem: give both first and last lifetimes, or neither")
        if self.first is not None:
            bad = np.flatnonzero(self.first > self.last)
            if bad.size:
                i = int(bad[0])
                raise PlanningError(f"offset problem: item {self.name(i)!r} has lifetime "
                                    f"[{self.first[i]}, {self.last[i]}], expected first <= last")
        if self.conflicts is None and self.first is None:
            raise PlanningError("offset problem: give lifetimes (first, last) or an explicit conflict set")
        if self.conflicts is not None and self.conflicts.n != n:
            raise PlanningError(f"offset problem: the conflict set covers {self.conflicts.n} items, expected {n}")
        seen: dict[int, int] = {}
        blocks = tuple(tuple(int(t) for t in b) for b in self.blocks)
        for k, block in enumerate(blocks):
            if len(block) < 2:
                raise PlanningError(f"offset problem: contiguous block {k} {list(block)} has < 2 items")
            for t in block:
                if not 0 <= t < n:
                    raise PlanningError(f"offset problem: contiguous block {k} names item {t}, outside 0..{n - 1}")
                if t in seen:
                    raise PlanningError(f"offset problem: item {self.name(t)!r} is in contiguous blocks "
                                        f"{seen[t]} and {k}; expected at most one")
                seen[t] = k
        object.__setattr__(self, "blocks", blocks)
        pinned = {int(k): int(v) for k, v in dict(self.pinned).items()}
        for t, off in pinned.items():
            if not 0 <= t < n:
                raise PlanningError(f"offset problem: pinned item {t} is outside 0..{n - 1}")
            if off < 0 or off % self.alignment:
                raise PlanningError(f"offset problem: item {self.name(t)!r} is pinned at {off}, expected "
                                    f"a non-negative multiple of {self.alignment}")
            if t in seen:
                raise PlanningError(f"offset problem: item {self.name(t)!r} is both pinned and in a contiguous block")
        object.__setattr__(self, "pinned", pinned)

    # -- views -------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.sizes)

    def name(self, i: int) -> str:
        return self.names[i] if self.names is not None else f"#{i}"

    @property
    def relation(self):
        """The conflict relation: explicit if given, else lifetime overlap."""
        if self.conflicts is not None:
            return self.conflicts
        return IntervalConflicts(self.first, self.last)

    @property
    def has_lifetimes(self) -> bool:
        return self.first is not None

    def require_lifetimes(self, who: str) -> None:
        if self.first is None:
            raise PlanningError(f"{who} needs item lifetimes (first, last); this problem has only a conflict set")

    def block_list(self) -> list[tuple[int, ...]]:
        """Every item in exactly one block: the contiguous blocks, then singletons, by head item."""
        in_block = {t for b in self.blocks for t in b}
        blocks = list(self.blocks) + [(i,) for i in range(self.n) if i not in in_block]
        return sorted(blocks, key=lambda b: b[0])

    def lifetime_bound(self) -> int:
        """Max over steps of the bytes live (the lifetime lower bound, paper Appendix F)."""
        self.require_lifetimes("the lifetime bound")
        if self.n == 0:
            return 0
        steps = np.concatenate([self.first, self.last + 1])
        deltas = np.concatenate([self.sizes, -self.sizes])
        order = np.lexsort((deltas, steps))  # at equal steps, ends (negative) first
        return int(np.cumsum(deltas[order]).max(initial=0))


@dataclass(frozen=True, eq=False)
class OffsetResult:
    """Offsets for every item, the footprint they use, and the bound they are measured against."""

    offsets: np.ndarray
    total: int
    bound: int
    algorithm: str
    status: str = "heuristic"  # one of npusim.plan.model.STATUSES
    seconds: float = 0.0

    @property
    def gap(self) -> float:
        """Relative distance to the bound: total / bound - 1 (0 when the bound is met)."""
        return (self.total / self.bound - 1.0) if self.bound else 0.0


def footprint(problem: OffsetProblem, offsets) -> int:
    offsets = np.asarray(offsets, dtype=np.int64)
    return int((offsets + problem.sizes).max(initial=0))


def make_result(problem: OffsetProblem, offsets, algorithm: str, *, bound: int | None = None,
                status: str = "heuristic", seconds: float = 0.0) -> OffsetResult:
    offsets = np.asarray(offsets, dtype=np.int64)
    if bound is None:
        bound = problem.lifetime_bound() if problem.has_lifetimes else int(problem.sizes.max(initial=0))
    return OffsetResult(offsets=offsets, total=footprint(problem, offsets), bound=int(bound),
                        algorithm=algorithm, status=status, seconds=seconds)


# --------------------------------------------------------------------------------------------
# The independent checker
# --------------------------------------------------------------------------------------------

def check_assignment(problem: OffsetProblem, offsets, limit: int = 20) -> list[str]:
    """Every broken constraint (at most ``limit``), as messages; [] when the assignment is valid."""
    found: list[str] = []
    offsets = np.asarray(offsets, dtype=np.int64)
    n, sizes, name = problem.n, problem.sizes, problem.name
    if len(offsets) != n:
        return [f"{len(offsets)} offsets for {n} items"]
    for i in np.flatnonzero(offsets < 0)[:limit]:
        found.append(f"item {name(int(i))!r}: offset {offsets[i]} < 0")
    for i in np.flatnonzero(offsets % problem.alignment)[:limit]:
        found.append(f"item {name(int(i))!r}: offset {offsets[i]} is not a multiple of {problem.alignment}")
    for t, off in problem.pinned.items():
        if offsets[t] != off:
            found.append(f"item {name(t)!r}: pinned at {off} but placed at {offsets[t]}")
    for block in problem.blocks:
        for a, b in zip(block, block[1:]):
            if offsets[b] != offsets[a] + sizes[a]:
                found.append(f"contiguous block {list(block)}: item {name(b)!r} at {offsets[b]}, expected "
                             f"{offsets[a] + sizes[a]} (right after {name(a)!r})")
    relation = problem.relation
    ends = offsets + sizes
    # Sweep by address: compare each item with the items that started below its end (those
    # after it in address order up to the first that starts at or past its end: a bisection),
    # asking the relation about those pairs only.
    order = np.lexsort((np.arange(n), offsets))
    sorted_offsets = offsets[order]
    for k, i in enumerate(order):
        if len(found) >= limit:
            break
        if sizes[i] == 0:
            continue
        later = order[k + 1:int(np.searchsorted(sorted_offsets, ends[i], side="left"))]
        later = later[sizes[later] > 0]
        if later.size == 0:
            continue
        clash = later[relation.has_many(int(i), later)]
        for j in clash[: limit - len(found)]:
            found.append(f"items {name(int(i))!r} [{offsets[i]}, {ends[i]}) and {name(int(j))!r} "
                         f"[{offsets[j]}, {ends[j]}) conflict but share addresses")
    return found[:limit]
