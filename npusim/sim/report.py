"""The Report: what a simulation measured, with JSON, CSV-row and Chrome-trace exports."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field, replace
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from npusim.dram.presets import part_label
from npusim.sim.critical_path import BreakdownRow
from npusim.util.atomic_io import atomic_write_text
from npusim.util.units import format_bytes

#: Energy by component (pJ): dynamic energy of the work done, then static energy (leakage and
#: the uncore's static power over the run, ``npusim.hw.silicon``)
DYNAMIC_COMPONENTS = ("mac", "vector", "register_file", "scratchpad_read", "scratchpad_write", "dram_read",
                      "dram_write", "dma_descriptor")
STATIC_COMPONENTS = ("static_scratchpad", "static_cores", "static_uncore")
#: With ``dram.model: banks`` the device's energy (``npusim.dram.model``): activations (dynamic;
#: its reads and writes go to dram_read / dram_write), and refresh and background, which
#: follow the run's length (counted as static)
DRAM_DYNAMIC_COMPONENTS = ("dram_activate",)
DRAM_STATIC_COMPONENTS = ("dram_refresh", "dram_background")
ENERGY_COMPONENTS = DYNAMIC_COMPONENTS + STATIC_COMPONENTS


class Pairs(Sequence):
    """A sequence of pairs held as two arrays: ``pairs[i]`` is the tuple ``(first[i],
    second[i])`` of Python numbers, equal to the tuple of tuples it stands for.

    Why: a run of a million commands records about two million counter samples and two
    million semaphores; as tuples of Python numbers they take ~110 bytes a pair, here 17.
    ``is_int`` marks the firsts held as ints (a counter's cycle where SimPy's clock was still
    an int, ``npusim.sim.compiled_loop``), given back as ints, the rest as floats; without it
    the firsts are given back with the arrays' own type."""

    __slots__ = ("first", "second", "is_int")

    def __init__(self, first, second, is_int=None) -> None:
        self.first, self.second = np.asarray(first), np.asarray(second)
        self.is_int = None if is_int is None else np.asarray(is_int, dtype=np.bool_)

    @classmethod
    def of_samples(cls, samples) -> "Pairs":
        """The (cycle, value) samples a SimPy run recorded (cycles int or float, values int)."""
        cycles = [cycle for cycle, _ in samples]
        return cls(np.array(cycles, dtype=np.float64), np.array([v for _, v in samples], dtype=np.int64),
                   [isinstance(cycle, int) for cycle in cycles])

    def __len__(self) -> int:
        return len(self.first)

    def _firsts(self, index=slice(None)) -> list:
        firsts = self.first[index].tolist()
        if self.is_int is not None:
            for k in np.flatnonzero(self.is_int[index]).tolist():
                firsts[k] = int(firsts[k])
        return firsts

    def __iter__(self):
        return zip(self._firsts(), self.second.tolist())

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(zip(self._firsts(index), self.second[index].tolist()))
        return self._firsts(slice(index, index + 1 or None))[0], self.second[index].item()

    def __eq__(self, other) -> bool:
        if isinstance(other, (Pairs, tuple, list)):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"Pairs({tuple(self)!r})"


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    queue: str
    name: str
    kind: str
    step: int
    start: float  # cycles
    end: float
    cause: str | None = None
    nbytes: int = 0
    lane: str = ""  # the core or DMA channel it ran on (one Perfetto track each)
    command: int = -1  # the Program command it ran (for semaphore arrows)


@dataclass(frozen=True)
class Report:
    graph: str
    hardware: str
    planner: str
    plan_status: str
    capacity: int
    clock_hz: float
    cycles: float
    seconds: float
    energy_pj: dict  # component -> pJ
    energy_by_op_pj: dict  # op name -> pJ (dynamic energy of its compute)
    offchip_bytes: dict  # cause -> bytes
    offchip_read_bytes: int
    offchip_write_bytes: int
    offchip_bus_bytes: int  # bytes the DRAM bus carried: whole bursts (npusim.plan.transfer_cost)
    onchip_peak_bytes: int
    offchip_peak_bytes: int
    utilisation: dict  # core / dma / dram -> fraction of the run busy; array -> MACs / the arrays' peak
    lower_bounds: dict  # compute_cycles / dram_cycles / dma_cycles: what no run of this model beats
    commands: int
    events: int
    stalls: dict = field(default_factory=dict)  # critical-path cycles by cause (npusim.sim.critical_path)
    energy_by_level_pj: dict = field(default_factory=dict)  # on-chip memory level -> dynamic pJ, innermost first
    timeline: tuple[TimelineEntry, ...] = field(default=(), repr=False)
    op_breakdown: tuple = field(default=(), repr=False)  # one row per op run, a mapping (critical_path.BreakdownRow; --breakdown CSV)
    counters: dict = field(default_factory=dict, repr=False)  # name -> ((cycle, value), ...) (a tuple or Pairs)
    semaphores: tuple = field(default=(), repr=False)  # (signalling command, waiting command) pairs (Pairs)
    plan_scope: str = ""  # what plan_status refers to when not the whole plan (PlanMeta.scope)
    plan_notes: tuple = ()  # what the planners traded (PlanMeta.notes)
    scratchpad_size: int = 0  # the hardware's scratchpad.size (a plan may be over it: --allow-oversize)
    core_utilisation: tuple = ()  # per core: fraction of the run it computed
    cores_per_stream: int = 1  # cores each stream's ops were split across (npusim.hw.costs.core_parts)
    streams: int = 1  # command queues of compute the program used
    core_pes: int = 0  # PEs of one core's array (MACs per cycle at its peak)
    area_mm2: dict = field(default_factory=dict)  # part -> mm^2 (npusim.hw.silicon.area_mm2)
    jitter: dict = field(default_factory=dict)  # {"seed", "amount"} of a jittered run (--jitter); {} otherwise
    dram_stats: dict = field(default_factory=dict)  # dram.model: banks: row statistics (npusim.dram.model)

    @property
    def oversize(self) -> bool:
        return self.capacity > self.scratchpad_size > 0

    @property
    def oversize_note(self) -> str:
        if not self.oversize:
            return ""
        return (f" -- OVER the hardware's {format_bytes(self.scratchpad_size)} scratchpad "
                "(--allow-oversize): not a plan this NPU can run")

    @property
    def jitter_note(self) -> str:
        """What a jittered run is: a search for races, whose latency is not the design's."""
        if not self.jitter:
            return ""
        return (f" -- JITTERED (seed {self.jitter['seed']}, amount {self.jitter['amount']:g}): a race test, "
                "not a timing")

    @property
    def status_text(self) -> str:
        """The plan's status, with the problem it refers to when that is not the whole plan."""
        return f"{self.plan_status}: {self.plan_scope}" if self.plan_scope else self.plan_status

    @property
    def total_energy_pj(self) -> float:
        return sum(self.energy_pj.values())

    @property
    def static_energy_pj(self) -> float:
        return sum(v for k, v in self.energy_pj.items() if k in STATIC_COMPONENTS or k in DRAM_STATIC_COMPONENTS)

    @property
    def dynamic_energy_pj(self) -> float:
        return self.total_energy_pj - self.static_energy_pj

    @property
    def total_area_mm2(self) -> float:
        return sum(self.area_mm2.values())

    @property
    def energy_delay_product(self) -> float:
        """Energy x latency, in J·s (lower is better)."""
        return self.total_energy_pj * 1e-12 * self.seconds

    @property
    def offchip_total_bytes(self) -> int:
        return self.offchip_read_bytes + self.offchip_write_bytes

    def _per_core_text(self) -> str:
        busy = self.core_utilisation
        if len(busy) < 2:
            return ""
        if len(busy) <= 8:
            return "   (" + ", ".join(f"core{i} {b:.1%}" for i, b in enumerate(busy)) + ")"
        return f"   (cores {min(busy):.1%} to {max(busy):.1%})"

    @property
    def idle_cores_note(self) -> str:
        """One line when some cores never computed (e.g. one stream and ``cores.split_ops``
        false, or more cores than streams × split), else empty."""
        idle = [i for i, b in enumerate(self.core_utilisation) if b == 0.0]
        if not idle or len(self.core_utilisation) < 2:
            return ""
        names = ", ".join(f"core{i}" for i in idle[:4]) + (", ..." if len(idle) > 4 else "")
        return (f"{len(idle)} of {len(self.core_utilisation)} cores idle ({names}): the program's streams "
                f"drive {len(self.core_utilisation) - len(idle)}; set cores.split_ops=true or add streams "
                "(e.g. a streams-rr stage)")

    @property
    def low_array_note(self) -> str:
        """One line when most of the run is ops that use under 1 % of the array's peak (a
        batch-1 GEMV or a depthwise conv on a large array): the latency is then the array's
        shape, not the planner's doing."""
        if not self.core_pes or self.cycles <= 0:
            return ""
        low, worst = 0.0, None
        cores_of: dict[str, int] = {}  # lane -> the cores it names (a few lanes, 100,000s of rows when tiled)
        for row in self.op_breakdown:
            if type(row) is BreakdownRow:  # its fields read directly
                macs, cycles, bound, lane = row.macs, row.cycles, row.bound, row.lane
                if not macs or cycles <= 0 or bound != "array":
                    continue
            elif not row.get("macs") or row["cycles"] <= 0 or row["bound"] != "array":  # ran on the array
                continue
            else:
                macs, cycles, lane = row["macs"], row["cycles"], row["lane"]
            lane = str(lane)
            cores = cores_of.get(lane)
            if cores is None:
                first, _, last = lane[4:].partition("-") if lane.startswith("core") else ("0", "", "")
                cores = cores_of[lane] = int(last) - int(first) + 1 if last.isdigit() and first.isdigit() else 1
            used = macs / (cycles * self.core_pes * cores)
            if used < LOW_ARRAY_USE:
                low += cycles
                if worst is None or cycles > worst[1]:
                    worst = (row.get("of", row["op"]), cycles, used)
        if low <= 0.5 * self.cycles * max(self.streams, 1) or worst is None:
            return ""
        return (f"{low / (self.cycles * max(self.streams, 1)):.0%} of the run is ops using under {LOW_ARRAY_USE:.0%} of "
                f"the array's peak (longest: {worst[0]} at {worst[2]:.2%}): the array's size or shape, not the plan, "
                "sets this latency")

    @property
    def streams_note(self) -> str:
        """One line when several streams share the cores: each runs its ops on its own cores
        only, so a stream's op never uses the others' (a user comparing pipelines should know)."""
        cores = len(self.core_utilisation)
        if self.streams < 2 or cores < 2:
            return ""
        each = "each on 1 core" if self.cores_per_stream == 1 else f"each on {self.cores_per_stream} cores"
        share = " (they share the cores in turn)" if self.streams > cores else ""
        return (f"{self.streams} streams, {each} of {cores}{share}: an op runs on its stream's cores only, "
                "never split over the others'")

    def to_dict(self, timeline: bool = False) -> dict:
        # the bulky fields are left out of asdict's deep copy (the timeline may be a
        # compiled run's columns, npusim.sim.compiled_loop.RecordedTimeline), the timeline put back as dicts
        data = asdict(replace(self, timeline=(), op_breakdown=(), counters={}, semaphores=()))
        data["timeline"] = [asdict(entry) for entry in self.timeline] if timeline else []
        data["total_energy_pj"] = self.total_energy_pj
        data["static_energy_pj"] = self.static_energy_pj
        data["dynamic_energy_pj"] = self.dynamic_energy_pj
        data["total_area_mm2"] = self.total_area_mm2
        data["offchip_total_bytes"] = self.offchip_total_bytes
        for bulky in ("op_breakdown", "counters", "semaphores"):
            data.pop(bulky)
        if not self.plan_scope:
            data.pop("plan_scope")
        if not self.plan_notes:
            data.pop("plan_notes")
        if not self.jitter:
            data.pop("jitter")
        notes = [n for n in (self.idle_cores_note, self.streams_note, self.low_array_note) if n]
        if notes:  # what the text report's note lines say, for a script reading the JSON
            data["notes"] = notes
        if not timeline:
            data.pop("timeline")
        return data

    def save_breakdown_csv(self, path: str | Path, tiles: bool = False) -> None:
        """One row per op of the graph as given (``tiles``: per tile and per core part, as
        run): start, end, cycles, what bound it, stall cycles before it and what it waited
        for, bytes in and out (``npusim.sim.critical_path.op_breakdown``)."""
        columns = ("op", "of", "kind", "step", "queue", "lane", "start", "end", "cycles", "bound", "stall_cycles",
                   "stalled_on", "bytes_in", "bytes_out", "macs") if tiles else PER_OP_COLUMNS
        rows = self.op_breakdown if tiles else per_op_breakdown(self.op_breakdown)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
        atomic_write_text(path, out.getvalue())

    def save_html(self, path: str | Path) -> None:
        """One self-contained page: summary, critical path, energy, counters, ops (``html_report``)."""
        from npusim.sim.html_report import report_html  # lazy: html_report imports this module

        atomic_write_text(path, report_html(self))

    def save_json(self, path: str | Path, timeline: bool = False) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(timeline), indent=1, sort_keys=True) + "\n")

    def chrome_trace(self) -> dict:
        """Chrome-trace / Perfetto JSON, timestamps in microseconds: one track per core and per
        DMA channel (slices never overlap within a track), counter tracks for scratchpad bytes
        in use and DRAM transfers moving data, and an arrow per cross-queue semaphore."""
        us = 1e6 / self.clock_hz
        tracks = {q: _tracks_of(q) for q in {e.lane or e.queue for e in self.timeline}}
        names = sorted({t for ts in tracks.values() for t in ts}, key=_track_order)
        tid = {q: i for i, q in enumerate(names)}
        events = [{"name": "process_name", "ph": "M", "pid": 0,
                   "args": {"name": f"npusim: {self.graph} on {self.hardware} ({self.planner})"}}]
        events += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid[q], "args": {"name": q}} for q in names]
        where = {}
        for e in self.timeline:
            mine = tracks[e.lane or e.queue]  # an op split over cores appears on each core's track
            for track in mine:
                events.append({
                    "name": e.name, "cat": e.kind, "ph": "X", "pid": 0, "tid": tid[track],
                    "ts": e.start * us, "dur": max(e.end - e.start, 0.0) * us,
                    "args": {"step": e.step, "queue": e.queue, "cause": e.cause, "bytes": e.nbytes,
                             **({"cores": e.lane} if len(mine) > 1 else {})},
                })
            if e.command >= 0:
                where[e.command] = (tid[mine[0]], e.start * us, e.end * us)
        for name, samples in self.counters.items():
            for cycle, value in samples:
                events.append({"name": name, "ph": "C", "pid": 0, "ts": cycle * us, "args": {"value": value}})
        for k, (signal, wait) in enumerate(self.semaphores):
            if signal in where and wait in where:
                (a_lane, a_start, a_end), (b_lane, b_start, _) = where[signal], where[wait]
                inside = max(a_start, a_end - min(1e-3, (a_end - a_start) / 2))  # a point within the slice
                # a waiter of a streamed command starts after its first band, before the signaller
                # ends: the arrow leaves the signaller then, not after (it pointed back in time)
                inside = max(a_start, min(inside, b_start))
                events.append({"name": "semaphore", "cat": "semaphore", "ph": "s", "id": k, "pid": 0,
                               "tid": a_lane, "ts": inside})
                events.append({"name": "semaphore", "cat": "semaphore", "ph": "f", "bp": "e", "id": k, "pid": 0,
                               "tid": b_lane, "ts": b_start})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"graph": self.graph, "hardware": self.hardware, "planner": self.planner}}

    def save_chrome_trace(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps(self.chrome_trace()))

    def _levels_text(self) -> list[str]:
        """The on-chip memory levels' dynamic energy, for a core with local levels
        (``cores.levels``; an R x C core's are the register_file and scratchpad components)."""
        if set(self.energy_by_level_pj) <= {"register_file", "scratchpad"}:
            return []
        return ["  by level       " + ", ".join(f"{k} {v / 1e6:.3f}" for k, v in self.energy_by_level_pj.items())
                + " uJ (register_file = the local levels)"]

    def summary(self) -> str:
        ob = self.offchip_bytes
        e = self.energy_pj
        lines = [
            f"{self.graph} on {self.hardware} with {self.planner} ({self.status_text}), "
            f"scratchpad budget {format_bytes(self.capacity)}" + self.oversize_note + self.jitter_note,
            f"  latency        {self.cycles:,.0f} cycles = "
            + (f"{self.seconds * 1e3:.3f} ms" if self.seconds < 1 else f"{self.seconds:,.3f} s")  # (a slow clock)
            + f"   (bounds: compute {self.lower_bounds['compute_cycles']:,.0f}, DRAM {self.lower_bounds['dram_cycles']:,.0f}, "
            f"DMA {self.lower_bounds.get('dma_cycles', 0):,.0f} cycles)",
            f"  energy         {self.total_energy_pj / 1e6:.3f} uJ = dynamic {self.dynamic_energy_pj / 1e6:.3f} + "
            f"static {self.static_energy_pj / 1e6:.3f} uJ",
            "                 " + ", ".join(f"{k} {v / 1e6:.3f}" for k, v in e.items() if v) + " uJ",
            *self._levels_text(),
            f"  area           {self.total_area_mm2:.2f} mm2   ("
            + ", ".join(f"{k} {v:.2f}" for k, v in self.area_mm2.items() if v) + " mm2)",
            f"  off-chip bytes {self.offchip_total_bytes:,} (read {self.offchip_read_bytes:,}, write {self.offchip_write_bytes:,}; "
            f"{self.offchip_bus_bytes:,} on the bus in whole bursts)",
            "                 " + ", ".join(f"{k} {v:,}" for k, v in ob.items()),
            f"  on-chip peak   {format_bytes(self.onchip_peak_bytes)}   off-chip peak {format_bytes(self.offchip_peak_bytes)}",
            "  utilisation    " + ", ".join(f"{k} {v:.1%}" for k, v in self.utilisation.items())
            + self._per_core_text(),
            f"  simulated      {self.commands:,} commands, {self.events:,} events",
        ]
        d = self.dram_stats
        if d:
            lines.insert(-1, f"  DRAM rows      {part_label(d['device'], d['channels'], d.get('rate_mts'))} {d['mapping']} {d['page_policy']}: row hits "
                             f"{d['row_hit_rate']:.1%} ({d['row_hits']:,} hits, {d['row_misses']:,} misses, "
                             f"{d['row_conflicts']:,} conflicts), {d['activations']:,} ACT, {d['refreshes']:,} REF, "
                             f"controller read latency {d['avg_read_latency_ns']:.1f} ns")
        if self.idle_cores_note:
            lines.insert(-1, "  note           " + self.idle_cores_note)
        if self.streams_note:
            lines.insert(-1, "  note           " + self.streams_note)
        if self.low_array_note:
            lines.insert(-1, "  note           " + self.low_array_note)
        for note in self.plan_notes:
            lines.insert(-1, "  plan note      " + note)
        if self.stalls:
            top = sorted(self.stalls.items(), key=lambda kv: -kv[1])[:5]
            span = max(self.cycles, 1e-9)
            lines.insert(2, "  critical path  " + ", ".join(f"{k} {v / span:.1%}" for k, v in top))
        return "\n".join(lines)


#: An op below this share of its array's peak MACs per cycle counts as barely using it.
LOW_ARRAY_USE = 0.01

#: Columns of the per-op breakdown: ``cycles`` is its span (first start to last end),
#: ``busy_cycles`` the compute its tiles and core parts took in all.
PER_OP_COLUMNS = ("op", "kind", "tiles", "step", "queue", "lane", "start", "end", "cycles", "busy_cycles", "bound",
                  "stall_cycles", "stalled_on", "bytes_in", "bytes_out", "macs")


def per_op_breakdown(rows) -> list[dict]:
    """The breakdown's rows (one per tile and core part) folded into one per op of the graph
    as given, in the order ops started: what bound it and what it waited for are those of most
    of its cycles."""
    groups: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: (r["start"], r["step"])):
        groups.setdefault(row.get("of", row["op"]), []).append(row)
    folded = []
    for name, parts in groups.items():
        bound: dict[str, float] = {}
        stalled: dict[str, float] = {}
        for r in parts:
            bound[r["bound"]] = bound.get(r["bound"], 0.0) + r["cycles"]
            if r["stalled_on"]:
                stalled[r["stalled_on"]] = stalled.get(r["stalled_on"], 0.0) + r["stall_cycles"]
        start, end = min(r["start"] for r in parts), max(r["end"] for r in parts)
        folded.append({
            "op": name, "kind": parts[0]["kind"], "tiles": len({r["op"] for r in parts}),
            "step": min(r["step"] for r in parts), "queue": ",".join(dict.fromkeys(str(r["queue"]) for r in parts)),
            "lane": ",".join(dict.fromkeys(str(r["lane"]) for r in parts)), "start": start, "end": end,
            "cycles": end - start, "busy_cycles": sum(r["cycles"] for r in parts),
            "bound": max(bound, key=bound.get), "stall_cycles": sum(r["stall_cycles"] for r in parts),
            "stalled_on": max(stalled, key=stalled.get) if stalled else "",
            "bytes_in": sum(r["bytes_in"] for r in parts), "bytes_out": sum(r["bytes_out"] for r in parts),
            "macs": sum(r.get("macs", 0) for r in parts),
        })
    return folded


def _tracks_of(lane: str) -> list[str]:
    """The timeline tracks of a lane: ``core2-3`` (an op split over cores 2 and 3) is on
    ``core2`` and ``core3``; every other lane is its own track."""
    if lane.startswith("core") and "-" in lane:
        first, _, last = lane[4:].partition("-")
        if first.isdigit() and last.isdigit():
            return [f"core{i}" for i in range(int(first), int(last) + 1)]
    return [lane]


def _track_order(name: str) -> tuple:
    """core0, core1, ..., core10 before dma0, ...: by prefix, then number."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return (head, int(tail) if tail else -1, name)

