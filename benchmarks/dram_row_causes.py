"""Where the row activations of ``dram.model: banks`` come from, per trace at edge-npu: the
instrumentation behind ``dram.placement: rows`` (``hw_configs/README.md``, "Placement for rows").

A run is simulated as usual (the Numba controller), recording every flow the DRAM model hands
its controller (start, command, addresses, read or write, priority); the flows are then
replayed in the same order through the pure-Python reference controller
(``npusim.dram.reference``, identical to the kernel: ``tests/test_dram.py``), patched here —
not in the product — to log every access (hit or activation, command, bank, row) and every
refresh. Each activation is then named by what happened to its row before:

- ``first touch``: no command had opened this row of this bank before;
- ``reopen after refresh``: an all-bank refresh closed it (mid-stream, or between two tiles);
- ``reopen, closed by the same tensor``: an access of the same buffer to another row of the
  bank closed it (a strided view crossing rows, or another tile of the tensor);
- ``reopen, closed by another tensor``: another buffer's access did, between two DMAs of this
  one (the bank's single row buffer went to other data in the meantime);
- ``reopen mid-stream, closed by a concurrent stream``: the same, but the reopening DMA had
  itself opened the row before: two streams fighting over a bank while both are in flight,
  what placing concurrently streamed buffers in different banks would remove.

With ``--limit N`` only the flows up to the first N accesses are replayed (the reference is
about 100x slower than the kernel); the counts are then those of that prefix of the run.

    .venv/bin/python benchmarks/dram_row_causes.py [--limit N] [--placement bump|pages|rows] [--bank-queue 8] trace ...
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

import numpy as np

from npusim import workflow as W
from npusim.dram import model as M
from npusim.dram import reference as R
from npusim.dram.controller import Controller
from npusim.plan.dram import buffer_of
from npusim.plan.lower import lower
from npusim.sim.engine import simulate

CAUSES = ("first touch", "reopen after refresh", "reopen, closed by the same tensor",
          "reopen, closed by another tensor", "reopen mid-stream, closed by a concurrent stream")


def record_flows(program, hw) -> tuple[list, object]:
    """Simulate ``program`` and return the flows its DRAM model started, in order:
    (start ns, command id, access addresses, write, priority), and the controller config."""
    flows, current, seen = [], [None], {}
    transfer, add_prepared = M.BankedDram.transfer, Controller.add_prepared

    def recording_transfer(self, nbytes, priority=0.0, cmd=None):
        current[0] = (cmd.id, self.addresses(cmd))
        seen["cfg"] = self.cfg
        return transfer(self, nbytes, priority, cmd)

    def recording_add(self, prepared, lo, hi, write, priority, start):
        cid, addresses = current[0]
        flows.append((start, cid, addresses[lo:hi], bool(write), float(priority)))
        return add_prepared(self, prepared, lo, hi, write, priority, start)

    M.BankedDram.transfer, Controller.add_prepared = recording_transfer, recording_add
    loop = os.environ.get("NPUSIM_SIM_LOOP")
    os.environ["NPUSIM_SIM_LOOP"] = "simpy"  # (the compiled loop drives its C controller, not these)
    try:
        simulate(program, hw)
    finally:
        M.BankedDram.transfer, Controller.add_prepared = transfer, add_prepared
        if loop is None:
            os.environ.pop("NPUSIM_SIM_LOOP")
        else:
            os.environ["NPUSIM_SIM_LOOP"] = loop
    return flows, seen["cfg"]


def replay(flows, cfg, limit: int) -> list:
    """The flows through a logging reference controller; its log: ("access", kind, command,
    bank, row) and ("refresh", rank, banks per rank)."""
    log, tag = [], {}
    commit, refresh = R.ReferenceController._commit, R.ReferenceController._refresh

    def logging_commit(self, ch, queue, k, rid, *rest):
        r = self.req[rid]
        log.append(("access", rest[2], tag[r["flow"]], r["bank"], r["row"]))  # rest: arrival, write, kind, ...
        commit(self, ch, queue, k, rid, *rest)

    def logging_refresh(self, rank, start, due):
        log.append(("refresh", rank, self.BG * self.BPG, 0, 0))  # (a backlog taken at once closes the rows once)
        refresh(self, rank, start, due)

    R.ReferenceController._commit, R.ReferenceController._refresh = logging_commit, logging_refresh
    try:
        ctrl = Controller(cfg, "reference")
        moved = 0
        for fid, (start, cid, addresses, write, priority) in enumerate(flows):
            ctrl.ref.run(start)
            moved += len(addresses)
            if moved > limit:
                break
            ctrl._free = [fid]  # a fresh flow id each (the log names flows by id)
            tag[ctrl.add_prepared(ctrl.prepare(np.asarray(addresses, dtype=np.int64)), 0, len(addresses), write,
                                  priority, start)] = cid
            for done in [f for f, flow in ctrl.ref.flows.items() if flow.remaining == 0]:
                del ctrl.ref.flows[done]  # finished: keep the reference's scans short
        else:
            ctrl.ref.run(1e300)
    finally:
        R.ReferenceController._commit, R.ReferenceController._refresh = commit, refresh
    return log


def causes(log, program) -> tuple[collections.Counter, int]:
    """Activations by cause (module docstring), and the accesses logged."""
    tensors, commands = program.graph.tensors, program.commands
    buffer = {}  # command id -> buffer name

    def buf(cid):
        if cid not in buffer:
            buffer[cid] = buffer_of(tensors[commands[cid].tensor])
        return buffer[cid]

    touched = set()  # (command, bank, row) it accessed
    open_row, closed_by = {}, {}  # bank -> its open row; (bank, row) -> what closed it last (None: a refresh)
    count, accesses = collections.Counter(), 0
    for what, a, cid, bank, row in log:
        if what == "refresh":
            for b in range(a * cid, (a + 1) * cid):  # a: the rank, cid: its banks
                if open_row.get(b, -1) >= 0:
                    closed_by[(b, open_row[b])] = None
                open_row[b] = -1
            continue
        accesses += 1
        if a == R.HIT:
            touched.add((cid, bank, row))
            continue
        if a == R.CONFLICT:
            closed_by[(bank, open_row[bank])] = cid
        if (bank, row) not in closed_by:
            count[CAUSES[0]] += 1
        else:
            closer = closed_by[(bank, row)]
            if closer is None:
                count[CAUSES[1]] += 1
            elif buf(closer) == buf(cid):
                count[CAUSES[2]] += 1
            else:
                count[CAUSES[4] if (cid, bank, row) in touched else CAUSES[3]] += 1
        touched.add((cid, bank, row))
        open_row[bank] = row
    return count, accesses


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--limit", type=int, default=0, help="replay only the flows of the first N accesses")
    parser.add_argument("--placement", default="bump", choices=("bump", "pages", "rows"))
    parser.add_argument("--bank-queue", type=int, default=8, help="dram.bank_queue (hw_configs/README.md's table: 8)")
    args = parser.parse_args(argv)
    print(f"| trace ({args.placement}) | accesses | activations | " + " | ".join(CAUSES) + " |")
    print("|---|---|---|" + "---|" * len(CAUSES))
    for trace in args.traces:
        base = W.load_hw("edge-npu")
        program = lower(W.plan_graph(W.load_graph(trace), base), base)
        hw = W.load_hw("edge-npu", {"dram.model": "banks", "dram.placement": args.placement,
                                    "dram.bank_queue": args.bank_queue})
        flows, cfg = record_flows(program, hw)
        count, accesses = causes(replay(flows, cfg, args.limit or sys.maxsize), program)
        acts = sum(count.values())
        cells = " | ".join(f"{count[c]:,} ({count[c] / max(acts, 1):.0%})" for c in CAUSES)
        print(f"| {trace} | {accesses:,} | {acts:,} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
