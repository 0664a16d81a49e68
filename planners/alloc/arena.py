"""The online arena allocator with eviction (the baseline of the COSMA paper).

It walks the schedule step by step, as a runtime would. For the op at step ``s`` it makes
every input and output resident: inputs not on chip are loaded, outputs allocated, each by
best fit (``BestFitArena``). When a block does not fit, the pipeline's replacement policy
(``belady``, ``lru``) ranks the resident tensors the op does not use, and they are evicted in
that order until it fits; a victim whose data exists only on chip and is needed later is
spilled (stored) first. Graph outputs are written back right after they are produced.
Tensors are freed after their last use.

Timing conventions (see ``npusim.plan.model``): a load at step s happens before op s; a store
at step s after op s. A victim evicted while preparing step s is stored at step s-1 and its
residency ends at s-1.

Placement looks ahead (option ``placement_lookahead``, ``PLACEMENT_LOOKAHEAD`` ops): best fit
alone can strand free bytes between live blocks, so that a later op whose working set fits the
budget finds no gap and must spill and reload whole tensors (EfficientNet-B0 on edge-npu at
4 MiB: a 1.2 MB expanded activation placed above the 200 KB one it is computed from left
605 KB below and 1.18 MB above it, the SiLU Mul two steps later needed 1.2 MB contiguous, and
its two 1.2 MB inputs went out and back: 2 % slower than at 2 MiB). So each placement is
tried forward: the ops of the next steps are placed by best fit on a copy of the arena
(tensors freed after their last use, nothing evicted); when some step would not fit, the
low and high end of every gap that holds the block are tried the same way, and the offset
under which the most steps fit is taken (best fit on ties). It is the placement analogue of
prefetching: free space is kept where the next ops' blocks can go, instead of discovered
missing when they arrive. The search skips the offsets and simulations that cannot change its
answer (``_place_ahead`` says which); tests/test_arena_fast_paths.py compares it with the
plain search on every placement of random and tiled graphs.

If the op's own tensors are fragmented so that even with everything else evicted a block
does not fit, the op's resident inputs are evicted too and everything is placed afresh; this
always succeeds because the budget is at least M_R (checked up front).
"""

from __future__ import annotations

import bisect
from functools import cached_property

import numpy as np

from npusim.errors import InternalError, PlanningError
from npusim.graph.analysis import aligned, min_required
from npusim.graph.model import TENSOR_KINDS, TILED_KINDS, op_fields, tensor_fields
from npusim.plan.records import CAUSE_CODE, KIND_CODE, ResidencyTable, TransferTable
from npusim.planner_options import Option
from planners.alloc.best_fit import BestFitArena
from planners.alloc.prefetch import PREFETCH_OPTIONS, prefetch_depth
from planners.tiling.tiler import PREFETCH_DEPTH

#: Steps ahead a placement is tried forward (module docstring) when the option
#: ``placement_lookahead`` is not given: the tile stage's prefetch depth, so the ops whose
#: loads may be reserved early are also the ops whose blocks a placement keeps room for
#: (with or without the tile stage: fragmentation does not depend on it).
PLACEMENT_LOOKAHEAD = PREFETCH_DEPTH

_NEVER = float("inf")  # the next use of a tensor used no more
#: Steps between two reports of the allocation's progress: a tiled graph has 100,000s of
#: steps of tens of microseconds, and a report per step cost more than its bar shows.
PROGRESS_STEPS = 1024
# The codes of the transfers the arena records (TransferTable.add takes codes).
_LOAD, _STORE = KIND_CODE["load"], KIND_CODE["store"]
_COMPULSORY, _RETRIEVE = CAUSE_CODE["compulsory"], CAUSE_CODE["retrieve"]
_SPILL, _WRITEBACK = CAUSE_CODE["spill"], CAUSE_CODE["writeback"]

class UseTimes:
    """Steps at which each tensor is read or written, for replacement policies."""

    def __init__(self, graph, order):
        arrays = graph.arrays
        self.size = arrays.tensor_size.tolist()  # Tensor.size of each, as Python ints
        # The tensors of each step's op, each once (Op.tensors), as one array in step order:
        # step s's are ``used[step_ptr[s]:step_ptr[s + 1]]`` (read from the graph's arrays).
        order = np.asarray(order, dtype=np.int64)
        ptr, idx = arrays.op_tensor_ptr, arrays.op_tensor_idx
        counts = ptr[order + 1] - ptr[order]
        self.step_ptr = np.zeros(len(order) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.step_ptr[1:])
        self.used = idx[np.repeat(ptr[order] - self.step_ptr[:-1], counts) + np.arange(self.step_ptr[-1])]
        used = self.used.tolist()
        self.step_start = step_ptr = self.step_ptr.tolist()  # step s's first tensor is used[step_start[s]]
        self.step_tensors = [used[step_ptr[s]:step_ptr[s + 1]] for s in range(len(order))]
        # The steps of each tensor, ascending: tensor t's are ``steps[use_ptr[t]:use_ptr[t + 1]]``.
        by_tensor = np.argsort(self.used, kind="stable")  # within a tensor, in step order
        self.use_ptr = np.zeros(graph.n_tensors + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.used, minlength=graph.n_tensors), out=self.use_ptr[1:])
        self.use_step = np.repeat(np.arange(len(order), dtype=np.int64), counts)  # the step of each of ``used``
        steps = self.use_step[by_tensor]
        ends = self.use_ptr[1:]
        last = np.full(graph.n_tensors, -1, dtype=np.int64)  # last use (-1: none)
        has_uses = ends > self.use_ptr[:-1]
        last[has_uses] = steps[ends[has_uses] - 1]
        self.last = last.tolist()
        self._steps_by_tensor = steps  # (``_by_tensor``'s lists are made when first asked)
        # The next use after each of ``used`` (the number of steps when there is none): the
        # following entry of ``steps`` within the tensor's group, put back in step order.
        following = np.append(steps[1:], len(order))
        following[ends[has_uses] - 1] = len(order)
        self.next_step = np.empty_like(steps)
        self.next_step[by_tensor] = following
        # Kept by the allocator as it walks the steps (``accessed``): the step each tensor was
        # last used at, and the position in ``used`` of that use (``next_access``, and an
        # allocator's victim keys); past the last position while it has none.
        self.last_access = [-1] * graph.n_tensors
        self.last_position = [len(used)] * graph.n_tensors

    @cached_property
    def _by_tensor(self) -> tuple[list[int], list[int]]:
        """``(steps, ptr)``: tensor t's steps, ascending, are ``steps[ptr[t]:ptr[t + 1]]``.
        Made when first asked: only evictions ask (none in a run that never runs out of room)."""
        return self._steps_by_tensor.tolist(), self.use_ptr.tolist()

    @cached_property
    def next_after(self) -> list[float]:
        """Per position of ``used``, the next use after it as ``next_use`` says it (infinity if
        none), and infinity past the last position. Made when first asked, as ``_by_tensor``."""
        next_after = self.next_step.astype(object)  # (set on an object array: faster than a comprehension)
        next_after[self.next_step == len(self.step_tensors)] = _NEVER
        return next_after.tolist() + [_NEVER]

    def next_access(self, t: int) -> float:
        """``next_use`` of ``t`` from the step it was last used at (``accessed``): a policy asks it
        of candidates, not used since; infinity before its first use."""
        return self.next_after[self.last_position[t]]

    def next_use(self, t: int, step: int) -> float:
        """First use strictly after ``step`` (infinity if none)."""
        steps, ptr = self._by_tensor
        end = ptr[t + 1]
        i = bisect.bisect_right(steps, step, ptr[t], end)
        return steps[i] if i < end else _NEVER

    def next_uses(self, tensors, step: int) -> list[float]:
        """``next_use`` of each of ``tensors``, in one call (a policy ranking its candidates)."""
        (steps, ptr), found = self._by_tensor, []
        for t in tensors:
            end = ptr[t + 1]
            i = bisect.bisect_right(steps, step, ptr[t], end)
            found.append(steps[i] if i < end else _NEVER)
        return found

    def last_use(self, t: int) -> int:
        return self.last[t]

    def accessed(self, s: int) -> None:
        """Record that step s used its tensors: ``last_access``, and the position of the use
        (``last_position``: what ``next_access`` and victim keys are read at)."""
        last_access, last_position = self.last_access, self.last_position
        for p, t in enumerate(self.step_tensors[s], self.step_start[s]):
            last_access[t] = s
            last_position[t] = p


def check_budget(graph, capacity: int, alignment: int, tiled: bool = False) -> None:
    """Refuse a budget below M_R, naming the op and what would fit: the tile stage (which
    cuts an op's working set), when the pipeline has none, or a budget of at least M_R."""
    need, op = min_required(graph, alignment)
    if capacity < need:
        o = graph.ops[op]
        parts = ", ".join(f"{graph.tensors[t].name} {graph.tensors[t].size} B" for t in o.tensors)
        fix = (f"the tile stage left it whole (it cuts what it can); use a budget >= {need} B" if tiled else
               f"without tiling no plan fits: add the tile stage to the pipeline (tile+...), or use a budget >= {need} B")
        raise PlanningError(
            f"budget {capacity} B is below M_R = {need} B, the working set of op {o.name!r} "
            f"({parts}; sizes rounded up to {alignment} B); {fix}."
        )


def _loads_weights_first(graph, order, weights: set[int]) -> tuple[list[int], list[int]]:
    """``(ptr, idx)``: the inputs of the op at step s, each once, weights first (else in
    argument order), are ``idx[ptr[s]:ptr[s + 1]]``; from the graph's arrays, one stable sort
    for all ops. In step order, so the loads of a window of steps are one slice."""
    arrays = graph.arrays
    ptr, idx = arrays.op_input_ptr, arrays.op_input_idx
    is_weight = np.zeros(graph.n_tensors, dtype=bool)
    is_weight[list(weights)] = True
    op_of = np.repeat(np.arange(graph.n_ops, dtype=np.int64), np.diff(ptr))
    by_op_weights_first = idx[np.argsort(2 * op_of + ~is_weight[idx], kind="stable")]
    order = np.asarray(order, dtype=np.int64)
    counts = ptr[order + 1] - ptr[order]
    step_ptr = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(counts, out=step_ptr[1:])
    in_step_order = by_op_weights_first[np.repeat(ptr[order] - step_ptr[:-1], counts) + np.arange(step_ptr[-1])]
    return step_ptr.tolist(), in_step_order.tolist()


def _tensors_by_kind(graph) -> dict[str, list[int]]:
    """The ids of the tensors of each kind, ascending, from the graph's kind column."""
    kind = graph.arrays.tensor_kind
    return {name: np.flatnonzero(kind == code).tolist() for code, name in enumerate(TENSOR_KINDS + TILED_KINDS)}


def _steps_placing_nothing(steps) -> int:
    """Leading look-ahead steps with no block to place: they fit wherever the new block goes."""
    for n, (new, _) in enumerate(steps):
        if new:
            return n
    return len(steps)


class ArenaAllocator:
    name = "arena"
    stage = "alloc"
    evicts = True  # it asks the pipeline's spill stage what to evict (npusim.registry)
    description = ("online best-fit arena (TFLite style), each block placed so the next ops' blocks fit, "
                   "that evicts by the pipeline's spill policy")
    reads = ("graph", "untiled", "order", "streams", "capacity", "alignment", "spill_policy", "options",
             "prefetch_depth", "progress", "status")
    writes = ("residencies", "transfers", "objective", "notes")
    options = (*PREFETCH_OPTIONS,
               Option("placement_lookahead", "int", PLACEMENT_LOOKAHEAD, "steps ahead each placement is "
                      "tried forward, so best fit does not strand the next ops' blocks (0: plain best fit)",
                      unit="ops", minimum=0))

    def run(self, ctx) -> None:
        graph, order = ctx.graph, ctx.order
        if ctx.streams is not None and len(set(ctx.streams)) > 1:
            # It reuses an address as soon as the step order frees it, which several streams do
            # not keep: such plans race (found by tests/test_property_planners.py).
            raise PlanningError(
                f"arena: the online arena is single-stream, but the plan uses {len(set(ctx.streams))} streams; "
                "use a multi-stream safe allocator (e.g. mindspore-mo:size,best-fit) or drop the streams stage")
        check_budget(graph, ctx.capacity, ctx.alignment, tiled=ctx.untiled is not graph)
        policy = ctx.spill_policy
        state = _ArenaRun(graph, order, ctx.capacity, ctx.alignment, policy, prefetch_depth(ctx),
                          ctx.options["placement_lookahead"])
        inputs, outputs = op_fields(graph, "inputs", "outputs")  # (no Op made per step: npusim.graph.columns)
        for s, op in enumerate(order):
            if s % PROGRESS_STEPS == 0:
                ctx.progress("allocating steps", s, len(order))
            state.step(s, op, inputs[op], outputs[op])
        ctx.progress("allocating steps", len(order), len(order))
        ctx.residencies, ctx.transfers = state.residencies, state.transfers
        if state.evicted_for_overlap:
            ctx.notes.append(f"arena: {state.evicted_for_overlap:,} cached tensors ({state.evicted_for_overlap_bytes:,} B) "
                             "given up to keep the next op's loads double-buffered; they are loaded again when next used")
        if ctx.status == "heuristic":  # an earlier stage's claim (a scheduler's optimal peak) stands
            ctx.objective = float(_moved_bytes(state.transfers, ("spill", "retrieve")))


def _moved_bytes(transfers: TransferTable, causes: tuple[str, ...]) -> int:
    """Bytes the transfers of these causes move."""
    cause, size = transfers.column("cause"), transfers.column("size")
    return sum(int(size[cause == CAUSE_CODE[name]].sum()) for name in causes)  # (np.isin: imports numpy.ma)


class _ArenaRun:
    def __init__(self, graph, order, capacity, alignment, policy, prefetch=0, lookahead=0):
        self.graph = graph
        self.lookahead = lookahead
        self.order = order
        self.n_steps = len(order)
        self.policy = policy
        # Prefetch: after each op, reserve free space for the loads of the next ``prefetch``
        # ops (the next op's first, weights before activations within an op), so the DMA fills
        # them while earlier ops compute; a reservation never evicts anything and is the first
        # thing given up when an op needs room. Also keep stored blocks one step longer (so
        # the next op's output does not wait for the store to drain).
        self.prefetch = prefetch
        self.double_buffer = prefetch > 0
        self.prefetched: set[int] = set()  # reserved at the previous step, load still to issue
        self.held: set[int] = set()  # already stored, kept until the end of this step
        self._last_future = None  # (step, pending, what _future_blocks returned) of the last call
        self.arena = BestFitArena(capacity, alignment)
        alloc_size = aligned(graph.arrays.tensor_size, alignment)
        self.alloc_size = alloc_size.tolist()
        self.uses = UseTimes(graph, order)
        # The policy's order as numbers per use, when it gives them (planners.spill.policies):
        # A candidate's is that of its last use (``UseTimes.last_position``), and candidates are
        # sorted by it. Made at the first eviction (``_ranked``): a run may evict nothing.
        self.keyed = hasattr(policy, "victim_keys")
        self._victim_keys = None
        # Per step: the op's tensors, each once.
        self.step_tensors = self.uses.step_tensors
        self._last_used: list = [None] * len(order)  # per step, made when first asked (_last_used_at)
        # Bytes of the tensors of the steps before each step (its op's, each once): a bound of
        # what a window of steps may place (``_most_bytes_ahead``).
        in_step_order = np.zeros(len(self.uses.used) + 1, dtype=np.int64)
        np.cumsum(alloc_size[self.uses.used], out=in_step_order[1:])
        self.step_bytes = in_step_order[self.uses.step_ptr].tolist()
        self.resident_since: dict[int, int] = {}  # tensor -> first step of its open residency
        of_kind = _tensors_by_kind(graph)
        self.in_dram = set(of_kind["input"] + of_kind["weight"])  # Tensor.in_dram_initially
        self.initially_in_dram = frozenset(self.in_dram)
        self.sources, = tensor_fields(graph, "sources")  # of each tensor: read views load after them
        self.sources_stored: dict[int, int] = {}  # read view -> its leading sources DRAM holds (_loadable)
        self.weights = set(of_kind["weight"])
        # The store after the op that writes a tensor (_finish): graph outputs are written back,
        # tiles that later tiles are read from are written through to DRAM.
        self.store_cause = dict.fromkeys(of_kind["output"], _WRITEBACK)  # (as codes)
        for t in graph.dram_sources:
            self.store_cause.setdefault(t, _SPILL)
        self.load_ptr, self.load_idx = _loads_weights_first(graph, order, self.weights)
        self.loaded_once: set[int] = set()
        self.evicted_for_overlap = 0  # cached tensors given up for the next op's loads (_evict_for_next)
        self.evicted_for_overlap_bytes = 0
        self.residencies = ResidencyTable()  # appended to as columns (npusim.plan.records): 100,000s when tiled
        self.transfers = TransferTable()

    # -- bookkeeping -------------------------------------------------------------------------
    def _open(self, t: int, offset: int, s: int) -> None:
        self.resident_since[t] = s

    def _close(self, t: int, last: int) -> None:
        self.residencies.add(self.resident_since.pop(t), last, self.arena.free(t), t, self.alloc_size[t])

    def _evict(self, t: int, s: int) -> None:
        """Evict ``t`` before step s: spill it at s-1 if DRAM has no copy and it is needed later.
        A prefetch reservation not yet loaded is simply given up."""
        if t in self.prefetched:
            self.prefetched.discard(t)
            self._drop_new(t)
            return
        self.held.discard(t)
        if t not in self.in_dram and self.uses.last[t] >= s:  # used again from step s on
            self.transfers.add(s - 1, _STORE, t, _SPILL, self.uses.size[t])
            self.in_dram.add(t)
        self._close(t, s - 1)

    def _victims(self, pinned: set[int], s: int) -> list[int]:
        candidates = [t for t in self.arena.owners() if t not in pinned]
        if not candidates:
            return []
        # Prefetch reservations hold no data yet: give them up first, the latest-needed first.
        reserved = sorted((t for t in candidates if t in self.prefetched),
                          key=lambda t: (-self.uses.next_use(t, s - 1), t))
        rest = [t for t in candidates if t not in self.prefetched]
        if not rest:
            return reserved
        if self.policy is None:
            if reserved:
                return reserved
            raise PlanningError(
                f"op {self.graph.ops[self.current_op].name!r} at step {s} does not fit in the "
                f"{self.arena.capacity} B budget without evicting; add a spill policy "
                "(e.g. '+belady' or '+lru') to the pipeline"
            )
        return reserved + self._ranked(rest, s)

    def _ranked(self, candidates: list[int], step: int) -> list[int]:
        """``policy.rank(candidates, step, uses)`` (sorting ``candidates``), by the keys of their
        last uses when the policy gives them (``victim_keys``). That is the same order: a
        candidate is resident and no prefetch reservation (those are never ranked), so it was
        used since it was placed, and not since ``last_access`` up to ``step``: its key after
        that use still holds."""
        if not self.keyed:
            return self.policy.rank(candidates, step, self.uses)
        if self._victim_keys is None:  # (a 0 past the last position: a tensor not used yet)
            self._victim_keys = self.policy.victim_keys(self.uses) + [0]
        keys, position = self._victim_keys, self.uses.last_position
        candidates.sort(key=lambda x: keys[position[x]])
        return candidates

    def _make_room(self, t: int, needed: list[int], s: int) -> int | None:
        """An offset for ``t`` when no gap holds it (``step`` asked ``find``): after evicting
        tensors the op at step s does not use (``needed``), in the spill policy's order; None
        when even that leaves no gap."""
        pinned = set(needed)
        offset = None
        if hasattr(self.policy, "choose"):  # set-choosing policies (greedy-ilp)
            chosen = self.policy.choose(self.arena, self.alloc_size[t],
                                        [o for o in self.arena.owners() if o not in pinned], s, self.uses, self.in_dram)
            for victim in chosen or ():
                self._evict(victim, s)
            offset = self.arena.find(self.alloc_size[t])
        victims = iter(self._victims(pinned, s)) if offset is None else iter(())
        while offset is None:
            victim = next(victims, None)
            if victim is None:
                return None
            self._evict(victim, s)
            offset = self.arena.find(self.alloc_size[t])
        return offset

    # -- placement looking ahead (module docstring) --------------------------------------------
    def _place_ahead(self, t: int, best_fit: int, s: int, pending: list[int]) -> int:
        """The offset for ``t`` at step s under which the most of the next ``lookahead`` steps
        fit without evicting (``best_fit`` unless another does better); ``pending`` are the
        op's tensors still to place at this step.

        Shortcuts that leave the answer unchanged: when the largest gap holds ``t`` and every
        future block at once, all steps fit wherever ``t`` goes (asked first of a bound of
        their bytes, ``_most_bytes_ahead``: the most frequent on tiled graphs, 4 placements in
        5 of the Llama step; then of the blocks); when no other gap end holds ``t`` there is
        nothing to compare; no offset fits more steps
        than ``most``, those before the first whose live bytes exceed the budget
        (``_future_blocks``), so the search stops once an offset reaches that, and does not
        start when the leading steps that place nothing (which fit anywhere) reach it; nor
        does it go on when no offset can fit one step more (``_may_fit``)."""
        size = self.alloc_size[t]
        if self.arena.largest_gap() >= size + self._most_bytes_ahead(s, pending):
            self._last_future = None  # not made for this call: the next one makes its own
            return best_fit  # every future block fits beside t at once (the shortcut below, bounded)
        if self._fits_off_chip_ahead(s, t, pending, self.arena.largest_gap() - size):
            self._last_future = None
            return best_fit  # the same, by a closer bound (it scans the steps' tensors)
        candidates = self.arena.gap_ends_holding(size, best_fit)
        if not candidates:
            return best_fit
        future, most, placed_bytes = self._future_blocks(s, t, pending)
        if most < len(future):  # the blocks of the steps before ``most`` (step ``most`` never fits)
            placed_bytes -= sum(nbytes for _, nbytes in future[most][0])
        if self.arena.largest_gap() >= size + placed_bytes:
            return best_fit  # every block of steps 0..most-1 fits beside t: best fit reaches ``most``
        if most <= _steps_placing_nothing(future):
            return best_fit
        # Step ``most`` fits under no offset: simulating it would only find where it fails.
        reachable = future if most == len(future) else future[:most]
        score = self.arena.steps_fitting(t, best_fit, size, reachable)
        if score == most or not self._may_fit(t, future, score):
            return best_fit
        for offset in candidates:
            n = self.arena.steps_fitting(t, offset, size, reachable)
            if n > score:
                best_fit, score = offset, n
                if n == most or not self._may_fit(t, future, n):
                    return best_fit
        return best_fit

    def _most_bytes_ahead(self, s: int, pending: list[int]) -> int:
        """A bound of the bytes of the blocks ``_future_blocks`` places: ``pending`` and every
        tensor of the next ``lookahead`` steps, on chip or not, counted once per step. When
        the largest gap holds ``t`` and that many bytes, it holds ``t`` and all the blocks at
        once, and their live bytes never exceed the budget: so every step fits wherever ``t``
        goes, without making the steps."""
        horizon = min(self.n_steps, s + 1 + self.lookahead)
        most = self.step_bytes[horizon] - self.step_bytes[s + 1]
        for x in pending:
            most += self.alloc_size[x]
        return most

    def _fits_off_chip_ahead(self, s: int, t: int, pending: list[int], room: int) -> bool:
        """Whether a closer bound than ``_most_bytes_ahead`` of the bytes ``_future_blocks``
        places is at most ``room``: the bytes of ``pending`` and of the tensors of the next
        ``lookahead`` steps not on chip but ``t``. Each block it places is one of those
        (counted here once per step it is in, there once): the same bound without making the
        blocks (on the Llama step it decides every placement the first bound does not), and it
        stops as soon as the bytes pass ``room``."""
        size, resident, step_tensors = self.alloc_size, self.resident_since, self.step_tensors
        for x in pending:
            room -= size[x]
        if room < 0:
            return False
        for u in range(s + 1, min(self.n_steps, s + 1 + self.lookahead)):
            for x in step_tensors[u]:
                if x not in resident and x != t:
                    room -= size[x]
                    if room < 0:
                        return False
        return True

    def _may_fit(self, t: int, future, k: int) -> bool:
        """False when step ``k`` of ``future`` fits wherever ``t`` goes in no case: its largest
        block and ``t`` (unless freed by then) fit neither in one gap nor in two of the arena
        with the blocks freed by step k gone. The blocks the look-ahead placed before step k
        only take room, so leaving them out can only make it say True."""
        freed = set()
        for _, tensors in future[1:k + 1]:
            freed.update(tensors)
        largest = max((nbytes for _, nbytes in future[k][0]), default=0)
        first, second = self.arena.largest_gaps_without(freed)
        if t in freed:
            return first >= largest
        size = self.alloc_size[t]
        return first >= size + largest or (first >= max(size, largest) and second >= min(size, largest))

    def _future_blocks(self, s: int, t: int, pending: list[int]):
        """``(steps, most, placed_bytes)``: per step s, s+1, .. s+lookahead, ``steps`` holds
        (blocks ``(tensor, bytes)`` to place there, tensors freed before it), up to the first
        step whose live bytes (the arena's, ``t``'s and the blocks placed minus those freed so
        far) exceed the budget; ``most`` is that step's index, else the number of steps, and
        ``placed_bytes`` the bytes of all the blocks. No offset of ``t`` fits step ``most``:
        blocks that fit never overlap, so their bytes add up to at most the budget; so the
        look-ahead never reaches a step after it, and they are not made.

        Step s places ``pending`` (``t`` is placed already); a later step places its op's
        tensors not yet on chip, after the blocks last used before it are freed (and the
        stored blocks held through step s). A tensor freed before step u > s is one last used
        at u-1 (``_last_used_at``): every tensor of the ops at s..u-1 is on chip or
        placed by then, so no on-chip set needs scanning (a tensor of no bytes may be listed
        as placed or freed; it changes nothing).

        The op's next tensor at the same step (``t`` was the first of the previous call's
        ``pending``, the rest are this one's) has the same later steps: the tensors on chip or
        pending are the same, and ``t``'s bytes moved from the pending ones to the arena
        leave every step's margin to the budget as it was. Those are taken from that call."""
        last = self._last_future
        if last is not None and last[0] == s and last[1] == (t, *pending):
            steps, most, placed_bytes = last[2]
            found = [(steps[0][0][1:], ())] + steps[1:], most, placed_bytes - self.alloc_size[t]
        else:
            found = self._make_future_blocks(s, t, pending)
        self._last_future = (s, tuple(pending), found)
        return found

    def _make_future_blocks(self, s: int, t: int, pending: list[int]):
        size, resident = self.alloc_size, self.resident_since
        horizon = min(self.n_steps, s + 1 + self.lookahead)
        room = self.arena.capacity - self.arena.used - size[t]  # bytes the steps may add
        placing = {t, *pending}
        sizes = [size[x] for x in pending]
        placed_bytes = live = sum(sizes)
        steps = [(list(zip(pending, sizes)), ())]
        if live > room:
            return steps, 0, placed_bytes
        step_tensors, last_used = self.step_tensors, self._last_used
        for u in range(s + 1, horizon):
            blocks, added = [], 0  # (loops, not comprehensions: each of those is a call)
            for x in step_tensors[u]:
                if x not in resident and x not in placing:
                    placing.add(x)
                    nbytes = size[x]
                    blocks.append((x, nbytes))
                    added += nbytes
            freed, freed_bytes = last_used[u - 1] or self._last_used_at(u - 1)
            if u == s + 1 and self.held:  # held through step s, then freed
                freed = freed + [x for x in self.held if self.uses.last[x] < s]
                freed_bytes = sum(size[x] for x in freed)
            placed_bytes += added
            live += added - freed_bytes
            steps.append((blocks, freed))
            if live > room:
                return steps, u - s, placed_bytes
        return steps, len(steps), placed_bytes

    def _last_used_at(self, u: int) -> tuple[list[int], int]:
        """The tensors of step u used there last, and their bytes: the look-ahead's frees after
        step u (in any order: the gaps after a step's frees are the same). Made when first
        asked: the bounds before the look-ahead decide most placements without it."""
        found = self._last_used[u]
        if found is None:
            last, size, tensors, nbytes = self.uses.last, self.alloc_size, [], 0
            for x in self.step_tensors[u]:
                if last[x] == u:
                    tensors.append(x)
                    nbytes += size[x]
            found = self._last_used[u] = (tensors, nbytes)
        return found

    # -- one step ----------------------------------------------------------------------------
    def step(self, s: int, op: int, inputs: tuple[int, ...], outputs: tuple[int, ...]) -> None:
        """Allocate step s, which runs op ``op`` (its ``inputs`` and ``outputs``)."""
        self.current_op = op
        needed = self.step_tensors[s]
        resident, arena, alloc_size = self.resident_since, self.arena, self.alloc_size
        missing = [t for t in needed if t not in resident]
        for k, t in enumerate(missing):
            size = alloc_size[t]
            offset = arena.find(size)  # the common case, a gap holds it: _make_room's first question
            if offset is None:
                offset = self._make_room(t, needed, s)
                if offset is None:  # fragmented by the op's own tensors: start the op afresh
                    return self._restart_op(s, inputs, outputs, needed)
            elif self.lookahead:
                offset = self._place_ahead(t, offset, s, missing[k + 1:])
            arena.place(t, offset, size)
            resident[t] = s  # opened (_open)
        prefetched = self.prefetched
        if prefetched:
            for t in needed:
                if t in prefetched:  # reserved at s-1: the load itself happens now
                    prefetched.discard(t)
                    self._load(t, s)
        if missing:
            for t in missing:
                if t in inputs:
                    self._load(t, s)
        self._finish(s, outputs, needed)

    def _restart_op(self, s: int, inputs: tuple[int, ...], outputs: tuple[int, ...], needed: list[int]) -> None:
        for t in list(self.arena.owners()):
            if self.resident_since.get(t, s) < s and t not in self.prefetched:
                self._evict(t, s)
            else:
                self._drop_new(t)
        # Inputs that arrived by prefetch were loaded this step already: they are in DRAM
        # (inputs, weights or stored tiles), so their reload below is a second load of the same data.
        self.prefetched.clear()
        for t in needed:
            offset = self.arena.allocate(t, self.alloc_size[t])
            assert offset is not None, "budget >= M_R guarantees an empty arena holds one op"
            self._open(t, offset, s)
            if t in inputs:
                self._load(t, s)
        self._finish(s, outputs, needed)

    def _drop_new(self, t: int) -> None:
        """Undo a placement not yet filled (made this step, or a prefetch reservation)."""
        self.resident_since.pop(t)
        self.arena.free(t)
        self.held.discard(t)

    def _load(self, t: int, s: int) -> None:
        if t in self.in_dram or self._loadable(t):
            self.in_dram.add(t)
        else:  # (_loadable is True for a tensor DRAM holds)
            raise InternalError(f"{self.graph.tensors[t].name!r} must be loaded at step {s} but DRAM has no copy")
        cause = _COMPULSORY if t in self.initially_in_dram and t not in self.loaded_once else _RETRIEVE
        self.loaded_once.add(t)
        self.transfers.add(s, _LOAD, t, cause, self.uses.size[t])

    def _finish(self, s: int, outputs: tuple[int, ...], needed: list[int]) -> None:
        self.uses.accessed(s)
        stored = []
        store_cause = self.store_cause
        for t in outputs:
            cause = store_cause.get(t)  # written back or through as soon as produced
            if cause is not None:
                self.transfers.add(s, _STORE, t, cause, self.uses.size[t])
                self.in_dram.add(t)
                stored.append(t)
        not_last = s + 1 < self.n_steps
        # Reserve the next ops' loads while everything live at this step still holds its place.
        if self.prefetch and not_last:
            self._prefetch(s)
        held = self.held
        if held:
            for t in list(held):
                self._close(t, s)
            held.clear()
        # _close of the op's tensors last used here, written out: about two a step
        add_residency, free, resident, alloc_size = self.residencies.add, self.arena.free, self.resident_since, self.alloc_size
        last_use, hold = self.uses.last, self.double_buffer and not_last
        for t in needed:
            if last_use[t] <= s:
                if hold and t in stored:
                    held.add(t)
                else:
                    add_residency(resident.pop(t), s, free(t), t, alloc_size[t])

    def _prefetch(self, s: int) -> None:
        """Reserve space now for the inputs of the next ``prefetch`` ops that can be loaded, in
        the order they are needed (weights first within an op); stop at the first that does
        not fit, so loads stay in step order.

        The next op's inputs are the second buffer of double buffering: to make room for them
        a cached tensor is given up (``_evict_for_next``) when the policy allows; the loads of
        the ops after it never evict anything."""
        resident, in_dram, loadable, sources = self.resident_since, self.in_dram, self._loadable, self.sources
        arena, alloc_size, prefetched, load_ptr = self.arena, self.alloc_size, self.prefetched, self.load_ptr
        first, next_op_end = load_ptr[s + 1], load_ptr[s + 2]  # the next op's: evict for them (docstring)
        window = self.load_idx[first:load_ptr[min(s + 1 + self.prefetch, self.n_steps)]]  # inputs, weights first
        for k, t in enumerate(window, first):
            # not in DRAM and read from no tiles (a partial sum, mostly): not loadable
            if t in resident or (t not in in_dram and not (sources[t] and loadable(t))):
                continue
            size = alloc_size[t]
            offset = arena.find(size)
            if offset is None and k < next_op_end:
                offset = self._evict_for_next(t, s)
            if offset is None:
                return
            arena.place(t, offset, size)
            resident[t] = s  # opened (_open)
            prefetched.add(t)

    def _evict_for_next(self, t: int, s: int) -> int | None:
        """Room for input ``t`` of the op at step s+1 while op s computes, or None.

        A tensor cached for reuse blocks the overlap of the next op's load with this op's
        compute: without the room the load waits for op s to end, then the op waits for the
        load. The victims are tensors with a copy in DRAM (evicting them stores nothing) that
        neither op s nor op s+1 uses and that no op within the prefetch window needs, ranked by
        the pipeline's replacement policy; a reservation for a later op is given up first.
        Each one costs a reload when it is next needed (counted in ``evicted_for_overlap``).
        Nothing is evicted unless the victims together free a gap that holds ``t``."""
        if self.policy is None:
            return None
        reserved, cached, kept = self._overlap_candidates(s)
        if not reserved and not cached:
            return None
        if not self.arena.fits_keeping(self.alloc_size[t], kept):
            return None
        victims = sorted(reserved, key=lambda x: (-self.uses.next_use(x, s), x)) if reserved else []
        if cached:
            victims += self._ranked(cached, s + 1)
        offset = None
        for victim in victims:
            if victim in self.prefetched:
                self.prefetched.discard(victim)
                self._drop_new(victim)
            else:
                self.evicted_for_overlap += 1
                self.evicted_for_overlap_bytes += self.uses.size[victim]
                self._close(victim, s - 1)  # op s does not use it: its bytes are free while op s runs
            offset = self.arena.find(self.alloc_size[t])
            if offset is not None:
                break
        return offset

    def _overlap_candidates(self, s: int) -> tuple[list[int], list[int], list[int]]:
        """``(reserved, cached, kept)``: the owners of the arena ``_evict_for_next`` may give up
        at step s, reservations and cached tensors (docstring there), and the others.

        A tensor is kept when op s or s+1 uses it or an op of the prefetch window (s+2 ..
        s+1+prefetch) needs it. A resident tensor other than a reservation has been used since
        it was placed (placed for op s or before, or reserved and then used), so it is used by
        step s+1+prefetch when it was used at step s or its next use from its last access
        (``UseTimes.next_access``, read inline) is by then: two lookups, rather than sets of those steps'
        tensors."""
        horizon = s + 1 + self.prefetch
        last_access, position, next_after = self.uses.last_access, self.uses.last_position, self.uses.next_after
        next_op, prefetched, held, in_dram = self.step_tensors[s + 1], self.prefetched, self.held, self.in_dram
        reserved, cached, kept = [], [], []
        for x in self.arena.owners():
            if x in prefetched:  # a reservation for a later op (op s's were loaded)
                (kept if x in next_op else reserved).append(x)
            elif last_access[x] < s and next_after[position[x]] > horizon and x in in_dram and x not in held:
                cached.append(x)
            else:
                kept.append(x)
        return reserved, cached, kept

    def _loadable(self, t: int) -> bool:
        """Whether DRAM holds ``t``'s data: ``t`` itself, or every tile a read view is loaded from.
        DRAM only gains tensors (``in_dram`` grows), so the sources found there are not asked
        again: ``sources_stored[t]`` counts the leading ones found so far."""
        in_dram = self.in_dram
        if t in in_dram:
            return True
        sources = self.sources[t]
        i, n = self.sources_stored.get(t, 0), len(sources)
        while i < n and sources[i] in in_dram:
            i += 1
        self.sources_stored[t] = i
        return n > 0 and i == n
