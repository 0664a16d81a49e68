"""The Report: what a simulation measured, with JSON, CSV-row and Chrome-trace exports."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from npusim.units import format_bytes

ENERGY_COMPONENTS = ("mac", "vector", "scratchpad_read", "scratchpad_write", "dram", "dma_descriptor", "static")


@dataclass(frozen=True)
class TimelineEntry:
    queue: str
    name: str
    kind: str
    step: int
    start: float  # cycles
    end: float
    cause: str | None = None
    nbytes: int = 0


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
    onchip_peak_bytes: int
    offchip_peak_bytes: int
    utilisation: dict  # core / dma / dram -> fraction of the run busy
    lower_bounds: dict  # compute_cycles / dram_cycles: what no schedule can beat
    commands: int
    events: int
    timeline: tuple[TimelineEntry, ...] = field(default=(), repr=False)

    @property
    def total_energy_pj(self) -> float:
        return sum(self.energy_pj.values())

    @property
    def offchip_total_bytes(self) -> int:
        return self.offchip_read_bytes + self.offchip_write_bytes

    def to_dict(self, timeline: bool = False) -> dict:
        data = asdict(self)
        data["total_energy_pj"] = self.total_energy_pj
        data["offchip_total_bytes"] = self.offchip_total_bytes
        if not timeline:
            data.pop("timeline")
        return data

    def save_json(self, path: str | Path, timeline: bool = False) -> None:
        from npusim.atomic_io import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_dict(timeline), indent=1, sort_keys=True) + "\n")

    def csv_row(self) -> dict:
        row = {
            "graph": self.graph, "hardware": self.hardware, "planner": self.planner,
            "status": self.plan_status, "capacity": self.capacity, "cycles": round(self.cycles, 3),
            "seconds": self.seconds, "energy_pj": round(self.total_energy_pj, 3),
            "offchip_bytes": self.offchip_total_bytes, "onchip_peak": self.onchip_peak_bytes,
            "offchip_peak": self.offchip_peak_bytes,
        }
        row.update({f"offchip_{k}": v for k, v in self.offchip_bytes.items()})
        row.update({f"energy_{k}_pj": round(v, 3) for k, v in self.energy_pj.items()})
        return row

    def chrome_trace(self) -> dict:
        """Chrome-trace / Perfetto JSON: one thread per queue, timestamps in microseconds."""
        us = 1e6 / self.clock_hz
        queues = sorted({e.queue for e in self.timeline})
        tid = {q: i for i, q in enumerate(queues)}
        events = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid[q], "args": {"name": q}} for q in queues]
        for e in self.timeline:
            events.append({
                "name": e.name, "cat": e.kind, "ph": "X", "pid": 0, "tid": tid[e.queue],
                "ts": e.start * us, "dur": max(e.end - e.start, 0.0) * us,
                "args": {"step": e.step, "cause": e.cause, "bytes": e.nbytes},
            })
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"graph": self.graph, "hardware": self.hardware, "planner": self.planner}}

    def save_chrome_trace(self, path: str | Path) -> None:
        from npusim.atomic_io import atomic_write_text

        atomic_write_text(path, json.dumps(self.chrome_trace()))

    def summary(self) -> str:
        ob = self.offchip_bytes
        e = self.energy_pj
        lines = [
            f"{self.graph} on {self.hardware} with {self.planner} ({self.plan_status}), "
            f"scratchpad budget {format_bytes(self.capacity)}",
            f"  latency        {self.cycles:,.0f} cycles = {self.seconds * 1e3:.3f} ms"
            f"   (bounds: compute {self.lower_bounds['compute_cycles']:,.0f}, DRAM {self.lower_bounds['dram_cycles']:,.0f} cycles)",
            f"  energy         {self.total_energy_pj / 1e6:.3f} uJ   ("
            + ", ".join(f"{k} {v / 1e6:.3f}" for k, v in e.items()) + " uJ)",
            f"  off-chip bytes {self.offchip_total_bytes:,} (read {self.offchip_read_bytes:,}, write {self.offchip_write_bytes:,})",
            "                 " + ", ".join(f"{k} {v:,}" for k, v in ob.items()),
            f"  on-chip peak   {format_bytes(self.onchip_peak_bytes)}   off-chip peak {format_bytes(self.offchip_peak_bytes)}",
            "  utilisation    " + ", ".join(f"{k} {v:.1%}" for k, v in self.utilisation.items()),
            f"  simulated      {self.commands:,} commands, {self.events:,} events",
        ]
        return "\n".join(lines)
