"""The Plan: what planners decide, and nothing about how the simulator works.

Steps are positions in ``order`` (the papers' discrete timesteps). A *residency* says a tensor
occupies ``[offset, offset + size)`` of the scratchpad from step ``first`` to step ``last``
(inclusive). A tensor spilled and later retrieved has two residencies. A *transfer* is a DMA
action bound to a step: a ``load`` happens before the op at its step runs, a ``store`` after
the op at its step has run. Every transfer carries its cause, so the report can split
off-chip bytes into compulsory loads, write-backs, spills and retrieves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter

LOAD, STORE = "load", "store"
TRANSFER_KINDS = (LOAD, STORE)
#: compulsory: first load of an input or weight; writeback: a graph output reaching DRAM;
#: spill: an activation stored to make room; retrieve: a load of data evicted earlier.
CAUSES = ("compulsory", "writeback", "spill", "retrieve")
STATUSES = ("optimal", "feasible", "heuristic", "timed_out", "hand_written")


@dataclass(frozen=True, order=True, slots=True)
class Residency:
    first: int
    last: int
    offset: int
    tensor: int
    size: int


#: A Residency's fields in declaration order, as a sort key: ``sorted(rs, key=residency_key)``
#: is ``sorted(rs)`` (the dataclass order compares these tuples), without a Python ``__lt__``
#: call per comparison (a tiled plan sorts 100,000s of residencies).
residency_key = attrgetter("first", "last", "offset", "tensor", "size")


@dataclass(frozen=True, order=True, slots=True)
class Transfer:
    step: int
    kind: str
    tensor: int
    cause: str
    size: int


@dataclass(frozen=True)
class PlanMeta:
    planner: str = ""
    options: dict = field(default_factory=dict)
    # Wall-clock time, so not part of a plan's identity: two runs of one planner give equal
    # plans, and plan files leave it out unless asked (npusim.plan.io, ``timings``).
    solve_seconds: float = field(default=0.0, compare=False)
    status: str = "heuristic"
    objective: float | None = None
    bound: float | None = None
    # Which problem ``status`` and ``bound`` refer to when it is not the whole plan's, e.g.
    # the op-level schedule of a tiled graph (``planners.schedule.op_level``); "" otherwise.
    scope: str = ""
    # What a stage traded that the numbers alone do not say (one line each), e.g. cached
    # tensors the arena gave up to keep the next op's loads double-buffered.
    notes: tuple[str, ...] = ()
    # What a stage measured of its own search (e.g. COSMA's parts and fallbacks), for the
    # experiment tables; {} for most planners.
    stats: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """A complete plan for one graph on a scratchpad of ``capacity`` bytes."""

    graph: str
    capacity: int
    alignment: int
    order: tuple[int, ...]
    streams: tuple[int, ...]  # stream of each op, indexed by op id
    residencies: Sequence[Residency]  # a ResidencyTable (npusim.plan.records) unless a field has no column
    transfers: Sequence[Transfer]  # a TransferTable, likewise
    dram: dict = field(default_factory=dict)  # DRAM buffer name -> byte offset, when planned (npusim.plan.dram)
    tiling: dict = field(default_factory=dict)  # op name (untiled graph) -> tile spec, when tiled
    fusion: dict = field(default_factory=dict)  # GEMM op name -> element-wise ops fused into it (npusim.graph.fusion)
    meta: PlanMeta = field(default_factory=PlanMeta)

    def __post_init__(self) -> None:
        """Residencies and transfers are kept as columns (``npusim.plan.records``): planners
        and edits may give any sequence of records."""
        from npusim.plan.records import ResidencyTable, TransferTable, table_of  # lazy: it imports this module

        object.__setattr__(self, "residencies", table_of(self.residencies, ResidencyTable))
        object.__setattr__(self, "transfers", table_of(self.transfers, TransferTable))

    def __eq__(self, other) -> bool:
        """Plans are equal when their fields are, whatever carries them (a ``BoundPlan``
        equals the plan it binds)."""
        if not isinstance(other, Plan):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(Plan) if f.compare)

    @property
    def n_steps(self) -> int:
        return len(self.order)

    def offchip_bytes(self, graph=None) -> dict[str, int]:
        """Bytes crossing the DRAM bus by cause, from the transfers; with the ``graph`` the plan
        indexes (a bound plan's own by default), the bytes overlapping tiles of an input or
        weight read again move from compulsory to retrieve, as the simulator counts them
        (``npusim.plan.rereads``)."""
        graph = graph if graph is not None else getattr(self, "bound_graph", None)
        total = dict.fromkeys(CAUSES, 0)
        transfers = self.transfers
        if hasattr(transfers, "column"):  # a TransferTable: its causes are codes into CAUSES
            cause, size = transfers.column("cause"), transfers.column("size")
            total = {name: int(size[cause == code].sum()) for code, name in enumerate(CAUSES)}
            compulsory = transfers.column("tensor")[cause == CAUSES.index("compulsory")].tolist()
        else:
            for tr in transfers:
                total[tr.cause] += tr.size
            compulsory = [tr.tensor for tr in transfers if tr.cause == "compulsory"]
        if graph is not None:
            from npusim.plan.rereads import move_rereads  # lazy: it imports the graph model
            move_rereads(total, graph, compulsory)
        return total
