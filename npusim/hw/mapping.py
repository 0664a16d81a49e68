"""Spatial unrolling and the core's local memory levels: ZigZag's cost model of one op on one core.

A core that declares ``cores.unroll`` (and optionally ``cores.levels``) is described the way
ZigZag describes an accelerator (KU Leuven MICAS, ``zigzag-dse`` 3.9.1; the file and function
of every formula below are named): an operational array whose dimensions each unroll one loop
dimension of the op, memory levels between the PEs and the scratchpad that hold some operands
and are shared by some array dimensions, and a temporal mapping — the loop order and which loops
each level holds — chosen per op. This module computes, for one op (``LoopNest``) on such a core:

- **cycles** (``zigzag/cost_model/cost_model.py``, ``calc_overall_latency``): the temporal loops'
  iterations, ∏ ⌈size_d / unroll_d⌉ over the loop dimensions (``ideal_temporal_cycle``; an
  unrolled dimension larger than the loop it unrolls is cut to it, and one that does not divide
  it leaves a last, partial iteration — ``SpatialMappingConversionStage``), plus the systolic
  drain of the array dimensions named in ``cores.systolic`` (``systolic_drain_cycle``: unroll − 1
  per such dimension, once per op). A local level (or the scratchpad) whose port cannot move
  what the mapping needs in that time bounds the op instead (a bandwidth bound, module
  ``level_cycles``; ZigZag's own ``stall_slack_comb`` also penalises a transfer that exceeds its
  update window when a level is not double-buffered, which npusim does not model);
- **accesses and energy per level** (``zigzag/mapping/mapping.py``, ``Mapping.calc_data_access``
  and ``calc_req_mem_bw_and_data_transfer_rate``; ``cost_model.py``, ``_calc_memory_access`` and
  ``calc_memory_energy_cost``): for each operand (W weights, I inputs, O outputs) at each of its
  levels, the elements read towards the PEs, written from above, written from below (outputs and
  partial sums) and read back up, from the reuse the temporal loops below a level and the
  spatial broadcasts give, converted to port-width word accesses:

      words = ⌈elements per period × bits / min_width⌉ × min_width / width × periods × instances

  and charged at the level's ``read_energy`` / ``write_energy`` per word. The scratchpad is the
  top level of every operand: what it delivers to (and takes from) the core is its traffic here;
  what it exchanges with DRAM is the DMA's (``npusim.sim.engine``);
- **the temporal mapping** (``zigzag/opt/loma/engine.py``, ``LomaEngine``; ``memory_allocator.py``,
  ``MemoryAllocator``): every ordering of the op's temporal loop prime factors (at most
  ``LPF_LIMIT`` factors: the dimension with the most factors has its two smallest merged until
  the limit holds) is allocated bottom-up to the levels — each level gets the longest run of
  innermost remaining loops whose data still fits, operands sharing a level split it to minimise
  the traffic to the level above — and its bottom loops irrelevant to an operand sink to the
  level below (``TemporalMapping.innermost_stationary_loop_merge_down``). The ordering with the
  fewest cycles (above) wins, then the least on-chip energy. ZigZag's ``MinimalLatencyStage``
  (``stages/results/reduce_stages.py``) ranks the same way but by its ``latency_total2``, which adds
  on-loading the first data from DRAM, off-loading the last and its stalls: of mappings with equal
  temporal cycles it may take one that spends more on-chip energy to save a few of those cycles.
  npusim leaves DRAM to its DMA, which overlaps it with compute, and takes the cheapest
  (``docs/validation.md``, "ZigZag's other accelerators");

Relevance of the loop dimensions to the operands (ZigZag's ``O[b][g][k][oy][ox] +=
W[g][k][c][fy][fx] · I[b][g][c][iy][ix]``, ``zigzag/parser/onnx/conv_parser.py``): W depends on
G, K, C, FY, FX; O on B, G, K, OY, OX; I on B, G, C and, partially, on OY with FY (IY = sy·OY +
dy·FY) and OX with FX — the sliding window's overlap is reuse (``mapping_assist_funcs.
decouple_pr_loop``). A GEMM (M × K by K × N, ``batch`` of them) is the 1×1 convolution OX = M,
C = K, K = N, B = batch (ZigZag names its M dimension D; npusim maps it on OX so an array that
unrolls output pixels runs GEMMs too).

A level that cannot hold one element of an operand for the PEs below it is bypassed for that
operand (ZigZag rejects the mapping instead): a 1-byte weight register cannot hold an fp16
weight, so an fp16 op on an int8 design reads its weights from the level above.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from dataclasses import dataclass, field

OPERANDS = ("W", "I", "O")
DIMS = ("B", "G", "K", "C", "OY", "OX", "FY", "FX")
#: ZigZag's ``lpf_limit`` (LomaEngine): at most this many temporal loop prime factors are ordered.
LPF_LIMIT = 6
#: Name of the top level (the scratchpad) in per-level figures.
SCRATCHPAD = "scratchpad"


@dataclass(frozen=True)
class LoopNest:
    """One op's loop dimensions (``DIMS``), strides and dilations, and operand bit widths.

    ``iy``/``ix``: the input's rows and columns (an input tile never needs more);
    ``weights_batched``: W depends on B (a batched MatMul's second operand, attention)."""

    sizes: tuple[tuple[str, int], ...]
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    iy: int = 0
    ix: int = 0
    w_bits: int = 8
    i_bits: int = 8
    o_bits: int = 8
    psum_bits: int = 16
    weights_batched: bool = False
    pack_groups: bool = False  # a grouped conv's groups unrolled where the array unrolls K

    @functools.cached_property
    def size(self) -> dict[str, int]:
        return dict(self.sizes)

    @property
    def macs(self) -> int:
        return math.prod(self.size.values())


@dataclass(frozen=True)
class Level:
    """A memory level as the model sees it: capacity in bits, the operands it holds, the array
    dimensions (by the loop dimension they unroll) one instance is shared over (``None``: all),
    its port width and access granularity in bits, pJ per word read and written."""

    name: str
    bits: float
    operands: tuple[str, ...]
    shared_over: tuple[str, ...] | None
    width: int
    min_width: int
    read_pj: float
    write_pj: float
    read_ports: int = 1
    write_ports: int = 1
    rw_port: bool = False  # one port for reads and writes (the scratchpad: bytes_per_cycle in all)


@dataclass(frozen=True)
class Core:
    """The core as the model sees it: the array dimensions (loop dimension, unroll), the
    systolic ones, and the levels innermost first, the scratchpad last."""

    unroll: tuple[tuple[str, int], ...]
    systolic: tuple[str, ...]
    levels: tuple[Level, ...]


@dataclass
class LevelTraffic:
    """Word accesses, energy and busy cycles of one level for one op (all its instances)."""

    reads: float = 0.0
    writes: float = 0.0
    energy_pj: float = 0.0
    read_cycles: float = 0.0  # one instance's port-cycles of reads
    write_cycles: float = 0.0
    read_ports: int = 1
    write_ports: int = 1
    rw_port: bool = False

    @property
    def cycles(self) -> float:
        """Cycles the busiest ports of one instance need: reads and writes spread over the
        level's read and write ports (ZigZag allocates each direction to a port; spreading them
        evenly is npusim's approximation), or both on one port (the scratchpad)."""
        if self.rw_port:
            return self.read_cycles + self.write_cycles
        return max(self.read_cycles / self.read_ports, self.write_cycles / self.write_ports)


@dataclass
class CoreCost:
    """What one op costs on the core: ``temporal`` cycles (+ drain), the bound the levels' ports
    put on them, ``cycles`` the larger, and the traffic of every level (``SCRATCHPAD`` last)."""

    temporal: float
    drain: float
    levels: dict[str, LevelTraffic]
    order: tuple[tuple[str, int], ...] = ()
    allocation: dict[str, tuple[tuple[tuple[str, int], ...], ...]] = field(default_factory=dict)

    @property
    def compute(self) -> float:
        return self.temporal + self.drain

    @property
    def cycles(self) -> float:
        return max(self.compute, max((t.cycles for t in self.levels.values()), default=0.0))

    @property
    def scratchpad_bound(self) -> bool:
        """Whether the scratchpad's port, not the array, sets the cycles (the op moves more
        through it than its port carries in the temporal cycles)."""
        port = self.levels.get(SCRATCHPAD)
        return port is not None and port.cycles > self.compute and port.cycles >= self.cycles

    @property
    def local_energy_pj(self) -> float:
        return sum(t.energy_pj for name, t in self.levels.items() if name != SCRATCHPAD)


class NoMapping(ValueError):
    """No temporal mapping fits the levels (a level too small for what is unrolled below it)."""


# -- relevance ------------------------------------------------------------------------------------

def relevant(op: str, nest: LoopNest) -> frozenset[str]:
    if op == "W":
        return frozenset({"G", "K", "C", "FY", "FX"} | ({"B"} if nest.weights_batched else set()))
    if op == "O":
        return frozenset({"B", "G", "K", "OY", "OX"})
    return frozenset({"B", "G", "C"})


def irrelevant(op: str, nest: LoopNest) -> frozenset[str]:
    """Dimensions ``op`` does not depend on (I: K only; OY, OX, FY, FX are partially relevant)."""
    if op == "I":
        return frozenset({"K"})
    return frozenset(DIMS) - relevant(op, nest)


#: I's partially relevant data dimensions and the loop pair each follows (IY = sy·OY + dy·FY)
PR = {"IY": ("OY", "FY"), "IX": ("OX", "FX")}


def pr_size(sa: int, a: int, sb: int, b: int) -> int:
    """Distinct c = sa·i + sb·j for i < a, j < b (ZigZag ``LayerNode.calc_pr_dimension_size``)."""
    g = math.gcd(sa, sb)
    return a * b - max(0, b - sa // g) * (a - sb // g)


def _pr_dim(nest: LoopNest, data_dim: str, sizes: dict[str, float]) -> float:
    """IY or IX spanned by the OY/FY (OX/FX) loop sizes in ``sizes``, clipped to the input
    (``LayerNode.calc_tensor_dim``, whose ``int`` of fractional unrollings is kept)."""
    out_dim, filter_dim = PR[data_dim]
    axis = 0 if data_dim == "IY" else 1
    span = pr_size(nest.stride[axis], int(sizes.get(out_dim, 1)), nest.dilation[axis], int(sizes.get(filter_dim, 1)))
    total = nest.iy if axis == 0 else nest.ix
    return min(span, total) if total else span


def tensor_elements(op: str, nest: LoopNest, sizes: dict[str, float]) -> float:
    """Elements of ``op`` spanned by loop ``sizes`` (``LayerNode.calc_tensor_size``)."""
    n = 1.0
    for d in relevant(op, nest):
        n *= sizes.get(d, 1)
    if op == "I":
        n *= _pr_dim(nest, "IY", sizes) * _pr_dim(nest, "IX", sizes)
    return n


# -- spatial mapping ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Spatial:
    """The op's spatial mapping: per array dimension (loop dim, fractional unroll for energy,
    integer unroll), and the temporal loop sizes left (``get_temporal_loops``)."""

    dims: tuple[tuple[str, float, int], ...]
    temporal: tuple[tuple[str, int], ...]


def spatial_mapping(core: Core, nest: LoopNest) -> Spatial:
    """ZigZag's ``SpatialMappingConversionStage.convert_user_spatial_mapping``: an unroll larger
    than the loop is cut to it; one that does not divide it becomes size / ⌈size / unroll⌉
    (fractional, for energy; its integer part for latency) and leaves ⌈size / unroll⌉ iterations."""
    size = nest.size
    dims, left = [], dict(size)
    for d, u in core.unroll:
        if d == "K" and nest.pack_groups:
            d = "G"
        n = size.get(d, 1)
        u = min(u, n)
        trips = -(-n // u)
        dims.append((d, n / trips, int(n / trips)))
        left[d] = trips
    temporal = tuple((d, s) for d, s in left.items() if s > 1)
    return Spatial(tuple(dims), temporal)


def prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def loop_factors(temporal: tuple[tuple[str, int], ...], limit: int = LPF_LIMIT) -> list[tuple[str, int]]:
    """The temporal loops as prime factors, at most ``limit`` (never fewer than the loop
    dimensions): the dimension with the most factors has its two smallest merged until the
    limit holds (``LomaEngine.get_prime_factors`` and ``limit_lpfs``)."""
    factors = {d: sorted(prime_factors(s)) for d, s in temporal}
    limit = max(limit, len(factors))
    while sum(len(f) for f in factors.values()) > limit:
        d = max(factors, key=lambda k: len(factors[k]))  # the first of the most factored, as max()
        f = factors[d]
        f[:2] = [f[0] * f[1]]
        f.sort()
    lpfs = [(d, p) for d, fs in factors.items() for p in fs]
    return lpfs or [("B", 1)]


def distinct_orderings(lpfs: list[tuple[str, int]]) -> list[tuple[tuple[str, int], ...]]:
    """Distinct orderings of a multiset, generated without repeats (next-permutation)."""
    items = sorted(lpfs)
    out = [tuple(items)]
    n = len(items)
    while True:
        i = n - 2
        while i >= 0 and items[i] >= items[i + 1]:
            i -= 1
        if i < 0:
            return out
        j = n - 1
        while items[j] <= items[i]:
            j -= 1
        items[i], items[j] = items[j], items[i]
        items[i + 1:] = reversed(items[i + 1:])
        out.append(tuple(items))


# -- the operands' memory chains ------------------------------------------------------------------

@dataclass(frozen=True)
class Chain:
    """One operand's levels (indices into ``Core.levels``, innermost first) and, per arch level
    (0: below its first level, ..., len(levels): above its top), the spatial loops first shared
    at that level: (loop dim, fractional unroll)."""

    levels: tuple[int, ...]
    spatial: tuple[tuple[tuple[str, float], ...], ...]


def _place_spatial(core: Core, levels: list[int], sp: Spatial) -> tuple[tuple[tuple[str, float], ...], ...]:
    """Spatial loops per arch level: an array dimension's unroll sits below the lowest of the
    operand's levels that is shared over it (``generate_mapping_per_mem_lvl``)."""
    placed, out = set(), []
    for li in levels:
        shared = core.levels[li].shared_over
        here = tuple((d, f) for j, (d, f, _) in enumerate(sp.dims)
                     if j not in placed and (shared is None or d in shared) and not placed.add(j))
        out.append(here)
    out.append(tuple((d, f) for j, (d, f, _) in enumerate(sp.dims) if j not in placed))
    return tuple(out)


def operand_bits(op: str, nest: LoopNest, final: bool = False) -> int:
    if op == "W":
        return nest.w_bits
    if op == "I":
        return nest.i_bits
    return nest.o_bits if final else nest.psum_bits


def chains(core: Core, nest: LoopNest, sp: Spatial) -> dict[str, Chain]:
    """Every operand's chain; a level too small for one element per PE below it is bypassed."""
    out = {}
    for op in OPERANDS:
        levels = [i for i, lv in enumerate(core.levels) if op in lv.operands]
        reduces = any(nest.size.get(d, 1) > 1 for d in irrelevant("O", nest)) if op == "O" else False
        bits = operand_bits(op, nest, final=not reduces)
        while True:
            spatial = _place_spatial(core, levels, sp)
            below: dict[str, float] = {}
            bypass = None
            for j, li in enumerate(levels[:-1]):  # the top (scratchpad) holds whatever is left
                for d, f in spatial[j]:
                    below[d] = below.get(d, 1) * f
                if tensor_elements(op, nest, below) * bits > core.levels[li].bits:
                    bypass = li
                    break
            if bypass is None:
                break
            levels.remove(bypass)
        out[op] = Chain(tuple(levels), spatial)
    return out


# -- one temporal ordering ------------------------------------------------------------------------

class _Search:
    """LOMA's allocation of orderings of the loop factors ``items`` (``MemoryAllocator``), with
    what every ordering shares computed once: operand sizes by (operand, chain position, set of
    temporal loops held) and each operand's traffic by its loops per level."""

    def __init__(self, core: Core, nest: LoopNest, chs: dict[str, Chain], items: list[tuple[str, int]]):
        self.core, self.nest, self.chs, self.items = core, nest, chs, items
        self.o_ir = irrelevant("O", nest)
        self.sizes: dict[tuple, float] = {}
        self.masks: dict[int, dict[str, float]] = {}
        self.traffic: dict[tuple, tuple] = {}
        # spatial loops held at each chain position, and whether unrolled O reductions sit above it
        self.spatial: dict[str, list[dict[str, float]]] = {}
        self.ir_above: dict[str, list[bool]] = {}
        for op, ch in chs.items():
            run: dict[str, float] = {}
            held = []
            for lv in ch.spatial[:-1]:
                for d, f in lv:
                    run[d] = run.get(d, 1) * f
                held.append(dict(run))
            self.spatial[op] = held
            self.ir_above[op] = [any(d in self.o_ir for lv in ch.spatial[j + 1:] for d, _ in lv)
                                 for j in range(len(ch.levels))]

    def _dims(self, mask: int) -> dict[str, float]:
        dims = self.masks.get(mask)
        if dims is None:
            dims = {}
            for i, (d, s) in enumerate(self.items):
                if mask >> i & 1:
                    dims[d] = dims.get(d, 1) * s
            self.masks[mask] = dims
        return dims

    def size(self, op: str, j: int, mask: int, bits: int) -> float:
        key = (op, j, mask, bits)
        found = self.sizes.get(key)
        if found is None:
            dims = dict(self.spatial[op][j])
            for d, s in self._dims(mask).items():
                dims[d] = dims.get(d, 1) * s
            found = self.sizes[key] = tensor_elements(op, self.nest, dims) * bits
        return found

    def allocate(self, order: tuple[int, ...]) -> dict[str, list[list[int]]] | None:
        """Per operand, the loop factors (indices into ``items``) each of its levels holds, or
        None when a level cannot hold what is below it (``MemoryAllocator.run``)."""
        items, n = self.items, len(order)
        suffix = [1.0] * (n + 1)
        for k in range(n - 1, -1, -1):
            suffix[k] = suffix[k + 1] * items[order[k]][1]
        pos = dict.fromkeys(OPERANDS, 0)
        mask = dict.fromkeys(OPERANDS, 0)
        at = dict.fromkeys(OPERANDS, 0)
        tm: dict[str, list[list[int]]] = {op: [] for op in OPERANDS}
        for li, level in enumerate(self.core.levels):
            here = [op for op in OPERANDS if at[op] < len(self.chs[op].levels) and self.chs[op].levels[at[op]] == li]
            if not here:
                continue
            options = []
            for op in here:
                j, p = at[op], pos[op]
                top = j == len(self.chs[op].levels) - 1
                if op == "O":
                    partial = self.ir_above[op][j] or any(items[i][0] in self.o_ir for i in order[p:])
                    bits = self.nest.psum_bits if partial else self.nest.o_bits
                else:
                    bits = operand_bits(op, self.nest)
                m = mask[op]
                first = self.size(op, j, m, bits)
                if top:
                    options.append([(n - p, 0.0, 0.0)])
                    continue
                if first > level.bits:
                    return None
                opts = [(0, first, suffix[p] * first)]
                for k in range(p, n):
                    m |= 1 << order[k]
                    size = self.size(op, j, m, bits)
                    if size > level.bits:
                        break
                    opts.append((k + 1 - p, size, suffix[k + 1] * size))
                options.append(opts)
            choice = _best_split(options, level.bits)
            if choice is None:
                return None
            for op, taken in zip(here, choice):
                p = pos[op]
                tm[op].append(list(order[p:p + taken]))
                for i in order[p:p + taken]:
                    mask[op] |= 1 << i
                pos[op] = p + taken
                at[op] += 1
        return tm


def _best_split(options: list[list[tuple[int, float, float]]], capacity: float) -> list[int] | None:
    """How many loops each operand sharing a level takes, from its options (loops taken, bits
    held, elements moved to the level above): the combination whose data fits and moves the
    fewest, of equals the last (``find_best_loop_combination``); None: not even the first fits."""
    if len(options) == 1:
        opts = options[0]
        best = min(a for _, _, a in opts)
        return [max(n for n, _, a in opts if a <= best)]
    best, choice = math.inf, None
    for i, combo in enumerate(itertools.product(*options)):
        if sum(c[1] for c in combo) > capacity:
            if i == 0:
                return None
            continue
        moved = sum(c[2] for c in combo)
        if moved <= best:
            best, choice = moved, [c[0] for c in combo]
    return choice


def _merge_down(tm: list[list], ir: frozenset[str]) -> tuple[list[list], float]:
    """The bottom loops of a level that are irrelevant to the operand sink to the level below;
    at the lowest level they count as MAC-level stationarity (``TemporalMapping.
    innermost_stationary_loop_merge_down``)."""
    prev = [list(x) for x in tm]
    while True:
        st = [[] for _ in prev]
        cur = [list(x) for x in prev]
        mac = 1.0
        for level, loops in enumerate(prev):
            for d, s in loops:
                if d in ir:
                    if level == 0:
                        mac *= s
                        st[0].append((d, s))
                    else:
                        st[level - 1].append((d, s))
                    cur[level].remove((d, s))
                else:
                    st[level].extend(cur[level])
                    break
        if st == prev:
            return st, mac
        prev = st


def _decouple(nest: LoopNest, levels: list[list]) -> list[list]:
    """I's OY/FY and OX/FX loops as the data they span (``IY_r``/``IX_r``) and the reuse of
    their overlap (``IY_ir``/``IX_ir``), level by level bottom-up (``decouple_pr_loop``)."""
    cum = {"IY": {"OY": 1, "FY": 1}, "IX": {"OX": 1, "FX": 1}}
    prev_r = {"IY": 1.0, "IX": 1.0}
    prev_ir = {"IY": 1.0, "IX": 1.0}
    out = []
    for loops in levels:
        new = []
        for d, s in loops:
            data = "IY" if d in ("OY", "FY") else "IX" if d in ("OX", "FX") else None
            if data is None:
                new.append((d, s))
                continue
            cum[data][d] *= s
            r = _pr_dim(nest, data, cum[data])
            ir = math.prod(cum[data].values()) / r
            new.append((data + "_r", r / prev_r[data]))
            new.append((data + "_ir", ir / prev_ir[data]))
            prev_r[data], prev_ir[data] = r, ir
        out.append(new)
    return out


def _split(levels: list[list], r_dims, ir_dims) -> tuple[list[float], list[float]]:
    r = [math.prod(s for d, s in lv if d in r_dims) for lv in levels]
    ir = [math.prod(s for d, s in lv if d in ir_dims) for lv in levels]
    return r, ir


def _words(amount: float, bits: int, count: float, units: float, level: Level) -> float:
    """Word accesses (``CostModelEvaluation._calc_memory_access``)."""
    if not amount or not bits:
        return 0
    return int(math.ceil(amount * bits / level.min_width) * (level.min_width / level.width) * count * units)


def _busy(amount: float, bits: int, count: float, level: Level) -> float:
    """Cycles one instance's port is busy: ⌈bits per period / width⌉ per period."""
    if not amount or not bits:
        return 0.0
    return math.ceil(amount * bits / level.width) * count


def op_traffic(core: Core, nest: LoopNest, ch: Chain, op: str, loops: list[list], mac_st: float):
    """One operand's traffic at each of its levels for its temporal ``loops`` per level (after
    the merge-down, with ``mac_st`` the MAC-level stationarity): [(level, reads, writes, pJ,
    read cycles, write cycles)] in word accesses, and the temporal cycles."""
    n = len(ch.levels)
    r_dims = set(relevant(op, nest))
    ir_dims = set(irrelevant(op, nest))
    if op == "I":
        r_dims |= {"IY_r", "IX_r"}
        ir_dims |= {"IY_ir", "IX_ir"}
    seed = [[]] + [list(lv) for lv in loops] + [[]]
    su = [list(x) for x in ch.spatial]  # length n + 1
    a1 = [seed[lv] + su[lv] for lv in range(n + 1)]  # each level's temporal loops with the spatial ones it serves
    a2 = [[]] + [seed[lv + 1] + su[lv] for lv in range(n + 1)]  # ... with those of the level below
    spatial = su
    if op == "I":
        a1, a2, spatial = _decouple(nest, a1), _decouple(nest, a2), _decouple(nest, su)
    _, ir1 = _split(a1, r_dims, ir_dims)
    r2, _ = _split(a2, r_dims, ir_dims)
    data = [round(x) for x in _cumprod(r2)]  # elements one instance below each level holds
    units = [round(round(math.prod(f for lv in su[k:] for _, f in lv), 3)) for k in range(n + 1)]
    unique = [math.prod(f for lv in spatial[k:] for d, f in lv if d in r_dims) for k in range(n + 1)]
    boost = [round(unique[k] / unique[k + 1]) for k in range(n)] + [1]
    cabl = list(_cumprod(math.prod(s for _, s in lv) for lv in loops))
    total = cabl[-1] if cabl else 1.0
    cel = [mac_st if op != "O" else 1] + cabl  # cycles of one period of each level
    if op == "O":
        flags = [any(d in ir_dims and s > 1 for d, s in lv) for lv in a1]
        psum = [any(flags[j + 1:]) for j in range(n)] + [False]
        caal = [math.prod(ir1[k:]) for k in range(n + 1)] + [1, 1]
        o_size = tensor_elements("O", nest, nest.size)
    out = []
    for m, li in enumerate(ch.levels):
        level = core.levels[li]
        inst = units[m + 1]
        top = m == n - 1
        count = total // cel[m]
        below = data[m] * boost[m]  # what one instance exchanges with the level below per period
        up, count_up = (data[m + 1], total // cel[m + 1]) if not top else (0, 0)
        if op != "O":
            bits = operand_bits(op, nest)
            rd, wr = _words(below, bits, count, inst, level), _words(up, bits, count_up, inst, level)
            rc, wc = _busy(below, bits, count, level), _busy(up, bits, count_up, level)
        else:  # written from below (partial sums read back down), read up (and written back)
            psum_bits, final_bits = nest.psum_bits, nest.o_bits
            below = int(below)
            back_down = int(o_size * (caal[m + 1] - 1))
            back_up = int(o_size * (caal[m + 2] - 1))
            w_bits = psum_bits if back_down else final_bits
            up_bits = psum_bits if back_up else final_bits
            wr, wc = _words(below, w_bits, count, inst, level), _busy(below, w_bits, count, level)
            rd, rc = _words(up, up_bits, count_up, inst, level), _busy(up, up_bits, count_up, level)
            if psum[m] and back_down:
                rd += _words(below, psum_bits, count, inst, level)
                rc += _busy(below, psum_bits, count, level)
            if psum[m + 1] and back_up and not top:
                wr += _words(up, psum_bits, count_up, inst, level)
                wc += _busy(up, psum_bits, count_up, level)
        out.append((level.name, rd, wr, rd * level.read_pj + wr * level.write_pj, rc, wc))
    return out, total


def traffic(core: Core, nest: LoopNest, chs: dict[str, Chain], tm: dict[str, list[list]]) -> tuple[
        dict[str, LevelTraffic], float]:
    """Every level's word accesses, energy and port cycles for the temporal mapping ``tm`` (per
    operand, the loops of each of its levels, innermost first), and the temporal cycles."""
    out: dict[str, LevelTraffic] = {}
    total = 1.0
    for op in OPERANDS:
        loops, mac_st = _merge_down(tm[op], irrelevant(op, nest))
        entries, total = op_traffic(core, nest, chs[op], op, loops, mac_st)
        _add(out, core, entries)
    return out, total


def _add(out: dict[str, LevelTraffic], core: Core, entries) -> None:
    for name, rd, wr, pj, rc, wc in entries:
        t = out.get(name)
        if t is None:
            lv = next(x for x in core.levels if x.name == name)
            t = out[name] = LevelTraffic(read_ports=lv.read_ports, write_ports=lv.write_ports, rw_port=lv.rw_port)
        t.reads += rd
        t.writes += wr
        t.energy_pj += pj
        t.read_cycles += rc
        t.write_cycles += wc


def _cumprod(xs):
    acc = 1.0
    for x in xs:
        acc *= x
        yield acc


# -- the search -----------------------------------------------------------------------------------

def drain_cycles(core: Core, sp: Spatial) -> float:
    """Systolic drain: unroll − 1 along each systolic array dimension (``systolic_drain_cycle``)."""
    return sum(max(math.ceil(f) - 1, 0) for (d, f, _), (ud, _) in zip(sp.dims, core.unroll) if ud in core.systolic)


@functools.lru_cache(maxsize=4096)
def core_cost(core: Core, nest: LoopNest, lpf_limit: int = LPF_LIMIT) -> CoreCost:
    """The op's cost on the core with the best temporal mapping: the fewest cycles, then the
    least energy over the levels (module docstring)."""
    return _search(core, nest, lpf_limit, energy=True)


@functools.lru_cache(maxsize=16384)
def core_cycles(core: Core, nest: LoopNest, lpf_limit: int = LPF_LIMIT) -> tuple[float, float, bool]:
    """(cycles, drain, whether the scratchpad's port sets them) of the op with the best temporal
    mapping: ``core_cost(...).cycles``, found sooner — the search stops at the first mapping no
    port slows below its temporal cycles."""
    cost = _search(core, nest, lpf_limit, energy=False)
    return cost.cycles, cost.drain, cost.scratchpad_bound


def _search(core: Core, nest: LoopNest, lpf_limit: int, energy: bool) -> CoreCost:
    sp = spatial_mapping(core, nest)
    chs = chains(core, nest, sp)
    drain = drain_cycles(core, sp)
    items = sorted(loop_factors(sp.temporal, lpf_limit))
    floor = math.prod(s for _, s in items) + drain  # no mapping is faster
    search = _Search(core, nest, chs, items)
    first_index = {}
    for i, item in enumerate(items):
        first_index.setdefault(item, i)
    irr = {op: irrelevant(op, nest) for op in OPERANDS}
    memo: dict[tuple, tuple] = {}
    best_rank, best = None, None
    for order in distinct_orderings(items):
        used = Counter()
        indices = []
        for item in order:  # equal factors take their indices in turn
            indices.append(first_index[item] + used[item])
            used[item] += 1
        tm = search.allocate(tuple(indices))
        if tm is None:
            continue
        levels: dict[str, LevelTraffic] = {}
        total = 1.0
        for op in OPERANDS:
            loops, mac_st = _merge_down([[items[i] for i in lv] for lv in tm[op]], irr[op])
            key = (op, tuple(tuple(sorted(lv)) for lv in loops), mac_st)
            found = memo.get(key)
            if found is None:
                found = memo[key] = op_traffic(core, nest, chs[op], op, loops, mac_st)
            entries, total = found
            _add(levels, core, entries)
        cost = CoreCost(float(total), drain, levels, order,
                        {op: tuple(tuple(items[i] for i in lv) for lv in tm[op]) for op in OPERANDS})
        rank = (cost.cycles, sum(t.energy_pj for t in levels.values()) if energy else 0.0)
        if best_rank is None or rank < best_rank:
            best_rank, best = rank, cost
            if not energy and cost.cycles <= floor:
                break
    if best is None:
        raise NoMapping(f"no temporal mapping of {dict(nest.sizes)} fits the core's levels")
    return best
