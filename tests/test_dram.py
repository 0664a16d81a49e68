"""The DRAM device model (``dram.model: banks``, npusim/dram/): the C kernel against its
pure-Python reference, timing cases from the datasheets' closed forms, the config errors, and
the simulator driven by planned addresses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from npusim.dram import kernel as K
from npusim.dram.controller import Controller, ControllerConfig, timings
from npusim.dram.kernel import access_addresses
from npusim.dram.presets import PRESETS, default_mapping, device_energy
from npusim.errors import ConfigError


def _config(name, channels=1, **kw):
    d = PRESETS[name]
    return ControllerConfig(d, channels, d.ranks, kw.pop("mapping", default_mapping(d)), **kw)


def _run(backend, cfg, flows, stops):
    """Per stop: (remaining, end, delay) of every flow added so far; then counts and sums."""
    c = Controller(cfg, backend)
    ids, seen, i = [], [], 0
    for stop in stops:
        while i < len(flows) and flows[i][3] <= stop:
            addresses, write, priority, start = flows[i]
            ids.append(c.add_flow(addresses, write, priority, start))
            i += 1
        c.run(stop)
        seen.append([(c.remaining(f), c.end(f), c.delay(f)) for f in ids])
    return seen, c.counts(), c.latency_sums(), c.channel_busy().tolist(), c.bank_busy().tolist()


@pytest.mark.parametrize("trial", range(12))
def test_kernel_matches_reference(trial):
    """Random flows (sequential, random, row-strided; reads and writes; priorities) on every
    preset, page policy, scheduler and queue structure (shared, per-bank), advanced in random
    steps: identical results."""
    rng = np.random.default_rng(trial)
    name = list(PRESETS)[trial % len(PRESETS)]
    d = PRESETS[name]
    mapping = default_mapping(d) if trial % 2 else ("RoBaRaBgCoCh" if d.bankgroups > 1 else "RoBaRaCoCh")
    cfg = _config(name, channels=2, mapping=mapping, policy=("open", "closed", "adaptive")[trial % 3],
                  scheduler=("frfcfs", "fcfs")[trial % 2], row_hit_cap=4, read_queue=8, write_queue=8,
                  write_high=6, write_low=2, powerdown_after=100.0 if trial % 4 == 0 else -1.0,
                  bank_queue=(0, 2, 4)[trial % 3 if trial % 2 else (trial // 2) % 3])
    flows, start = [], 0.0
    for _ in range(5):
        n = int(rng.integers(10, 150))
        kind = rng.integers(3)
        if kind == 0:
            a = rng.integers(0, 1 << 20) // 64 * 64 + 64 * np.arange(n)
        elif kind == 1:
            a = rng.integers(0, 1 << 28, n) // 64 * 64
        else:
            a = rng.integers(0, 1 << 20) // 64 * 64 + 8192 * np.arange(n)
        flows.append((a.astype(np.int64), bool(rng.integers(2)), float(rng.integers(3)), start))
        start += float(rng.integers(0, 500))
    stops = sorted(rng.uniform(0, 20000, 6).tolist()) + [1e9]
    fast = _run("compiled", cfg, flows, stops)
    slow = _run("reference", cfg, flows, stops)
    assert fast == slow
    assert fast[1]["reads"] + fast[1]["writes"] == sum(len(f[0]) for f in flows)


def _stream_flows(rng, n_flows=6):
    """Long sequential reads and writes (row-hit streams), with some random accesses among them."""
    flows, start = [], 0.0
    for i in range(n_flows):
        n = int(rng.integers(200, 900))
        if i % 3 == 2:
            a = rng.integers(0, 1 << 28, n) // 64 * 64
        else:
            a = rng.integers(0, 1 << 22) // 64 * 64 + 64 * np.arange(n)
        flows.append((a.astype(np.int64), bool(i % 4 == 1), float(rng.integers(2)), start))
        start += float(rng.integers(0, 2000))
    return flows


@pytest.mark.parametrize("trial", range(8))
def test_streamed_row_hits_match_reference(trial):
    """The kernel's shortcut for a stream of row hits (``shortcut_pick``, ``lane_step`` in
    bank_core.h: open pages, FR-FCFS, the shared read/write queues, no power-down) times every
    access as the general pick does: against the reference, on every preset, with 1, 2 and 4
    channels and streams of reads and writes."""
    rng = np.random.default_rng(100 + trial)
    name = list(PRESETS)[trial % len(PRESETS)]
    cfg = _config(name, channels=(1, 2, 4)[trial % 3], policy="open", scheduler="frfcfs", row_hit_cap=4, read_queue=8,
                  write_queue=8, write_high=6, write_low=2, bank_queue=0)
    flows = _stream_flows(rng)
    stops = sorted(rng.uniform(0, 40000, 8).tolist()) + [1e9]
    fast = _run("compiled", cfg, flows, stops)
    assert fast == _run("reference", cfg, flows, stops)
    assert fast[1]["hits"] > 0.2 * sum(len(f[0]) for f in flows)


@pytest.mark.parametrize("trial", range(8))
def test_tied_streams_and_draining_queues_match_reference(trial):
    """An op's loads share one urgency, so admission alternates round-robin between two tied
    flows (the kernel's pair lane), and a queue nobody refills drains to empty (its draining
    lane, where the read/write turnaround may change as it shrinks): two or three tied streams
    of reads or writes in different rows, a less urgent one behind them, against the reference,
    advanced in random steps."""
    rng = np.random.default_rng(300 + trial)
    name = list(PRESETS)[trial % len(PRESETS)]
    cfg = _config(name, channels=(1, 2)[trial % 2], policy="open", scheduler="frfcfs", row_hit_cap=4,
                  read_queue=8, write_queue=8, write_high=6, write_low=2, bank_queue=0)
    flows, start = [], 0.0
    for group in range(3):
        write = bool((trial + group) % 2)
        for _ in range(2 + (trial + group) % 2 * (trial % 3 == 0)):  # two tied flows, sometimes three
            n = int(rng.integers(100, 600))
            base = int(rng.integers(0, 1 << 24)) // 64 * 64
            flows.append((base + 64 * np.arange(n, dtype=np.int64), write, 0.0, start))
        flows.append(((int(rng.integers(0, 1 << 24)) // 64 * 64 + 64 * np.arange(50, dtype=np.int64)),
                      not write, 1.0, start))
        start += float(rng.integers(0, 3000))
    stops = sorted(rng.uniform(0, 30000, 8).tolist()) + [1e9]
    fast = _run("compiled", cfg, flows, stops)
    assert fast == _run("reference", cfg, flows, stops)
    assert fast[1]["hits"] > 0.2 * sum(len(f[0]) for f in flows)


def test_a_write_flow_is_done_once_its_last_access_is_in_the_write_queue():
    """Posted writes (DRAMsim3's and gem5's controllers acknowledge a write once it is queued):
    each write is acknowledged when it is admitted, but no sooner than a burst after the
    channel's previous acknowledgement (its data crossed the channel's port at the channel's
    rate), and its flow is done at its last acknowledgement. A store smaller than the write
    queue is done a burst per access after its start while a read stream keeps the channel
    reading (its writes wait for the drain); one larger than the queue waits for slots the
    drain frees. A write flow counts no bank delay (none of it delays the store); ``data_end``
    is when its data reaches the device, after ``end``."""
    for backend in ("compiled", "reference"):
        cfg = _config("lpddr4-3200", read_queue=8, write_queue=8, write_high=6, write_low=2)
        c = Controller(cfg, backend)
        t = c.t
        reads = c.add_flow(np.arange(2000, dtype=np.int64) * 32, False, 1.0, 0.0)
        small = c.add_flow((1 << 24) + np.arange(5, dtype=np.int64) * 32, True, 0.0, 100.0)
        c.run(200.0)
        assert c.done(small) and c.end(small) == 100.0 + 4 * t["tBurst"] and c.remaining(small) == 5
        c.run(1e9)
        assert c.remaining(small) == 0 and c.data_end(small) > c.end(reads) > 100.0
        assert c.delay(small) == 0.0

        c = Controller(cfg, backend)
        big = c.add_flow((1 << 24) + np.arange(50, dtype=np.int64) * 32, True, 0.0, 0.0)
        c.run(1e9)
        # each write's column command, from the reference (the compiled controller keeps no
        # per-access times: it must agree with them through end and data_end)
        ref = Controller(cfg, "reference")
        ref_big = ref.add_flow((1 << 24) + np.arange(50, dtype=np.int64) * 32, True, 0.0, 0.0)
        ref.run(1e9)
        cas = np.sort([r["end"] for r in ref.ref.req.values() if r["flow"] == ref_big]) - t["tCWL"] - t["tBurst"]
        # 8 admitted at its start, then one per write issued (the slot it frees), each
        # acknowledged a burst after the previous at the soonest
        ack = -1e300
        for admitted in [0.0] * 8 + list(cas[:50 - 8]):
            ack = max(admitted, ack + t["tBurst"])
        assert c.end(big) == pytest.approx(ack) and ack > cas[50 - 8 - 1] - 1e-9
        assert c.data_end(big) == pytest.approx(cas[-1] + t["tCWL"] + t["tBurst"])
        assert c.data_end(big) > c.end(big) > 0.0


@pytest.mark.parametrize("trial", range(6))
def test_commands_before_end_is_a_lower_bound(trial):
    """The simulator advances the controller by ``commands_before_end`` column commands without
    looking for completions, so no flow may be done sooner: on random flows (reads and posted
    writes, priorities, flows joining later, some wholly admitted behind more urgent ones) and
    queue structures (unequal queues, per-bank command queues, whose entries are admitted
    without a column command), no channel has issued fewer commands than the bound when the
    first flow is done."""
    rng = np.random.default_rng(40 + trial)
    name = list(PRESETS)[trial % len(PRESETS)]
    rq, wq = int(rng.choice([4, 8, 32])), int(rng.choice([2, 8, 32]))
    cfg = _config(name, channels=(1, 2)[trial % 2], read_queue=rq, write_queue=wq, write_high=max(1, wq - 1),
                  write_low=0, bank_queue=(0, 2, 8)[trial % 3])
    c = Controller(cfg)
    burst = c.t["tBurst"]
    live, now = [], 0.0
    for _ in range(12):
        n = int(rng.integers(1, 600))
        base = int(rng.integers(0, 1 << 22)) // 64 * 64
        live.append(c.add_flow(base + 64 * np.arange(n, dtype=np.int64), bool(rng.integers(2)),
                               float(rng.integers(3)), now))
        live = [f for f in live if not c.done(f)]
        bound = c.commands_before_end(live)
        ahead = c.copy()
        before = ahead.channel_busy()
        while ahead.run(1e15, until_complete=True) and not any(ahead.done(f) for f in live):
            pass
        issued = np.rint((ahead.channel_busy() - before) / burst)
        assert bound <= issued.max()
        now += float(rng.integers(0, 3000))
        c.run(now)


def test_a_wholly_admitted_flow_may_end_with_the_next_commands():
    """A read flow whose accesses are all in the queue may be done within a few commands,
    whatever the more urgent flows still hold: the lower bound counts only its own accesses
    not yet issued (each takes a column command of its channel), none of the urgent flows'."""
    c = Controller(_config("lpddr4-3200"))
    queued = c.add_flow((1 << 24) + 32 * np.arange(4, dtype=np.int64), False, 1.0, 0.0)
    c.run(0.0)  # its 4 accesses admitted
    urgent = c.add_flow(32 * np.arange(1000, dtype=np.int64), False, 0.0, 0.0)
    assert c.commands_before_end([urgent, queued]) == c.remaining(queued) == 4
    while c.run(1e12, until_complete=True) and not c.done(queued):
        pass
    assert c.done(queued) and c.end(queued) < 100.0


def test_the_bound_counts_the_accesses_a_flow_has_queued_on_each_channel():
    """Accesses already in the queue still need their column commands: a read flow of 24
    accesses over two channels, all admitted, ends no sooner than the busier channel's share
    of them, and the bound says as much (the look-ahead then starts that much later)."""
    c = Controller(_config("lpddr4-3200", channels=2, read_queue=32))
    flow = c.add_flow(32 * np.arange(24, dtype=np.int64), False, 0.0, 0.0)
    c.run(0.0)  # all 24 admitted, none issued
    per_channel = c.fc_left[flow]
    assert per_channel.sum() == c.remaining(flow) == 24
    bound = c.commands_before_end([flow])
    assert bound == per_channel.max() > 0
    before = c.channel_busy()
    while c.run(1e12, until_complete=True) and not c.done(flow):
        pass
    issued = np.rint((c.channel_busy() - before) / c.t["tBurst"])
    assert issued.max() >= bound


def test_an_access_a_new_flow_lets_in_is_admitted_when_it_arrives():
    """A write flow and a read stream of one priority take turns at the front end, and the
    write waits whenever the stream's queue is full (head-of-line). A more urgent flow arriving
    at t moves the round-robin on, which lets the write's last access in: it is admitted, and
    the store acknowledged, at t, not back-dated to the last column command before t."""
    for backend in ("compiled", "reference"):
        cfg = _config("lpddr4-3200", read_queue=1, write_queue=8, write_high=8, write_low=0)
        c = Controller(cfg, backend)
        write = c.add_flow((1 << 24) + 32 * np.arange(6, dtype=np.int64), True, 2.0, 0.0)
        c.add_flow(32 * np.arange(400, dtype=np.int64), False, 2.0, 0.0)  # fid above the write's
        t = 0.0
        while t < 5000.0 and not (c.remaining(write) == 6 and waiting(c, write) == 1):
            t += 0.5
            c.run(t)
        assert waiting(c, write) == 1, "the scenario: one write access left, held up by the stream"
        c.add_flow((1 << 25) + np.array([0], dtype=np.int64), True, 1.0, t)
        c.run(t)
        assert c.done(write) and c.end(write) >= t
        assert last_arrival(c, write) == t  # (it waits in the write queue: no drain below 8)


def waiting(c, fid):
    return c.ref.flows[fid].waiting if c.backend == "reference" else int(c.flow_waiting[fid])


def last_arrival(c, fid):
    """When the last access of write flow ``fid`` (channel 0) entered the write queue."""
    if c.backend == "reference":
        last = max(r for r, fields in c.ref.req.items() if fields["flow"] == fid)
        return next(arrival for r, arrival in c.ref.channels[0].wq if r == last)
    last = int(c.flow_last[fid]) - 1
    head, n, depth = int(c.chan_i[0, K.C_WQ_HEAD]), int(c.chan_i[0, K.C_WQ_N]), int(c.G[K.G_WQ])
    return next(float(c.sqa[1, 0, (head + i) % depth]) for i in range(n) if c.sq[1, 0, (head + i) % depth] == last)


def _stream(name, addresses, write=False, channels=1, **kw):
    c = Controller(_config(name, channels, **kw))
    f = c.add_flow(np.asarray(addresses, dtype=np.int64), write, 0.0, 0.0)
    c.run(1e15)
    return c, f


def test_isolated_read_costs_trcd_tcl_burst():
    """JEDEC: a read to a closed bank is ACT, tRCD, RD, tCL, then the burst."""
    for name in PRESETS:
        c, f = _stream(name, [0])
        t = c.t
        assert c.end(f) == pytest.approx(t["tRCD"] + t["tCL"] + t["tBurst"])
        assert c.counts()["misses"] == 1


def test_row_conflict_costs_precharge_and_activate():
    """Two reads to two rows of one bank: the second waits tRAS from the first ACT (or tRTP
    from its RD), tRP, tRCD, tCL and its burst."""
    d = PRESETS["ddr4-3200"]
    c, f = _stream("ddr4-3200", [0, 1 << (6 + 7 + 2 + 2)], mapping="RoChRaBaBgCo")
    t = c.t
    first_rd = t["tRCD"]
    pre = max(t["tRAS"], first_rd + t["tRTP"])
    assert c.end(f) == pytest.approx(pre + t["tRP"] + t["tRCD"] + t["tCL"] + t["tBurst"])
    assert c.counts()["conflicts"] == 1 and d.bankgroups == 4


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_sequential_stream_reaches_peak(name):
    """A sequential read stream reaches >= 90 % of the pins' peak (the rest: refresh, row
    switches), or within 1.5 points of what all-bank refresh leaves, 1 - tRFC / tREFI, where
    that is below 91 % (LPDDR4X: 380 ns every 3.9 us, 90.3 %), and never more than the peak."""
    d = PRESETS[name]
    n = 1 << 15
    c, f = _stream(name, np.arange(n) * d.access_bytes)
    share = n * d.access_bytes / c.end(f) / (d.channel_bandwidth / 1e9)
    refresh_bound = 1 - c.t["tRFC"] / c.t["tREFI"]
    assert min(0.90, refresh_bound - 0.015) <= share <= min(1.0, refresh_bound)
    assert c.counts()["hits"] / n > 0.9


def _bus_device(name, **bus):
    """Preset ``name`` with its command bus changed (``CommandBus`` fields) and no refresh."""
    d = PRESETS[name]
    return dataclasses.replace(d, tREFI=1e12, command_bus=dataclasses.replace(d.command_bus, **bus))


def _bus_stream(device, addresses):
    c = Controller(ControllerConfig(device, 1, device.ranks, default_mapping(device)))
    f = c.add_flow(np.asarray(addresses, dtype=np.int64), False, 0.0, 0.0)
    c.run(1e15)
    return c, f


def test_row_misses_are_bound_by_their_commands_on_the_command_bus():
    """One command per tick of the command bus, each held for its length (Ramulator 2's
    command_cycles, DRAMSys' commandLengthInCycles): random reads whose PRE + ACT + RD hold the
    bus longer than the activation rate allows go no faster than one access per (pre + act +
    cas) ticks, and within 20 % of it (the commands of a picked access go to the first free runs
    of ticks, so runs too short for the next 16-tick ACT stay empty: 86 % of the ticks are used)."""
    d = _bus_device("lpddr4-3200", pre=8, act=16, cas=8)  # 32 ticks of 0.625 ns against a 10 ns ACT rate
    rng = np.random.default_rng(3)
    n = 3000
    c, f = _bus_stream(d, rng.integers(0, d.capacity // d.access_bytes, n) * d.access_bytes)
    per = c.end(f) / n
    bound = 32 * c.t["tCMD"]
    assert c.counts()["hits"] / n < 0.05
    assert bound * 0.999 <= per <= bound * 1.2
    c0, f0 = _bus_stream(_bus_device("lpddr4-3200"), rng.integers(0, d.capacity // d.access_bytes, n) * d.access_bytes)
    assert c0.end(f0) / n < 0.5 * per  # the preset's 10 ticks do not bind there: the ACT rate does


def test_column_commands_longer_than_the_burst_bind_a_stream_unless_the_buses_are_separate():
    """A row-hit stream issues a column command per access: when it holds the bus longer than the
    data burst, the stream goes at one access per column command. HBM's row and column commands
    have a bus each: long ACTs there leave a stream's column commands alone."""
    d = _bus_device("lpddr4-3200", cas=16)  # 10 ns per RD against a 5 ns burst
    n = 4096
    c, f = _bus_stream(d, np.arange(n) * d.access_bytes)
    assert 16 * c.t["tCMD"] <= c.end(f) / n <= 1.06 * 16 * c.t["tCMD"]  # (+ an ACT and tRCD per row: 3 %)
    hbm = PRESETS["hbm2-2000"]
    plain, f1 = _bus_stream(_bus_device("hbm2-2000"), np.arange(n) * hbm.access_bytes)
    slow_acts, f2 = _bus_stream(_bus_device("hbm2-2000", act=6), np.arange(n) * hbm.access_bytes)
    assert slow_acts.end(f2) == pytest.approx(plain.end(f1), rel=0.01)
    shared, f3 = _bus_stream(_bus_device("hbm2-2000", act=6, cas=2, dual=False), np.arange(n) * hbm.access_bytes)
    assert shared.end(f3) > 1.2 * plain.end(f1)  # on one bus, a column command per burst leaves no room


def test_refresh_overhead_matches_trfc_over_trefi():
    """With rows that never change bank state, the loss of a stream is the refresh: tRFC
    every tREFI (LPDDR4X's 380 ns every 3.9 us caps it near 90 %)."""
    d = PRESETS["lpddr4x-4266"]
    t = timings(_config("lpddr4x-4266"))
    n = 1 << 16
    c, f = _stream("lpddr4x-4266", np.arange(n) * d.access_bytes)
    no_refresh = dataclasses.replace(d, tREFI=1e12)
    c2 = Controller(ControllerConfig(no_refresh, 1, 1, default_mapping(d)))
    f2 = c2.add_flow(np.arange(n, dtype=np.int64) * d.access_bytes, False, 0.0, 0.0)
    c2.run(1e15)
    overhead = c.end(f) / c2.end(f2) - 1
    expected = t["tRFC"] / (t["tREFI"] - t["tRFC"])
    assert overhead == pytest.approx(expected, rel=0.25)
    assert c.counts()["refreshes"] == pytest.approx(c.end(f) / t["tREFI"], abs=2)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_random_reads_bound_by_activation_rate(name):
    """Random reads of one access each (nearly every one a row miss or conflict) go no faster
    than the activations allow: one per max(tRRD_S, tFAW / 4) per activation window (a rank;
    HBM3's pseudo channel, whose two stack IDs share theirs) and tRC per bank, and within 25 %
    of that bound (the queue's bank-level parallelism). The addresses are aligned to the
    access, not to 64 B: with 32 B accesses, 64 B-aligned ones never set the address bit that
    LPDDR5's mapping gives to bank group 0, and reach half the banks."""
    d = PRESETS[name]
    rng = np.random.default_rng(5)
    n = 4000
    c, f = _stream(name, rng.integers(0, d.capacity // d.access_bytes, n) * d.access_bytes)
    t = c.t
    windows = 1 if d.stack_ids else d.ranks
    bound = max(t["tRRD_S"], t["tFAW"] / 4, t["tRC"] / (d.banks * d.ranks), t["tBurst"]) / windows
    per = c.end(f) / n
    assert c.counts()["hits"] / n < 0.05
    assert bound * 0.999 <= per <= bound * 1.25


def test_hbm3_stack_ids_share_the_activation_window_and_refresh():
    """HBM3's stack IDs (npusim's ranks of its channel) count their ACTs in one tRRD_S / tFAW
    window and refresh together (JESD238; Ramulator 2's HBM3): random reads go at the pseudo
    channel's activation rate, about half as fast as two independent ranks would allow, and
    both stack IDs of a channel are due for refresh at the same moments."""
    from npusim.dram import kernel as K

    d = PRESETS["hbm3-6400"]
    assert d.stack_ids and d.ranks == 2
    rng = np.random.default_rng(7)
    addresses = rng.integers(0, d.capacity // d.access_bytes, 4000) * d.access_bytes
    shared, f = _stream("hbm3-6400", addresses, channels=2)
    apart = Controller(ControllerConfig(dataclasses.replace(d, stack_ids=False), 2, 2, default_mapping(d)))
    g = apart.add_flow(np.asarray(addresses, dtype=np.int64), False, 0.0, 0.0)
    apart.run(1e15)
    assert shared.end(f) > 1.6 * apart.end(g)
    due = shared.rank_f[:, K.R_NEXT_REF]
    assert due[0] == due[1] and due[2] == due[3] and due[0] != due[2]  # per channel, channels staggered
    assert apart.rank_f[0, K.R_NEXT_REF] != apart.rank_f[1, K.R_NEXT_REF]


def test_hbm3_reports_one_refresh_command_per_channel_and_trefi():
    """A run's ``refreshes`` counts REF commands: on HBM3 one REFab per pseudo channel every
    tREFI refreshes both stack IDs (the energy still charges both)."""
    from npusim import workflow as W
    from npusim.dram.controller import timings
    from npusim.dram.model import controller_config

    hw = W.load_hw("edge-npu", {"dram.model": "banks", "dram.device": "hbm3-6400"})
    report = W.simulate_plan(W.plan_graph(W.load_graph("squeezenet1_0"), hw), hw)
    cfg = controller_config(hw)
    t = timings(cfg)
    seconds = report.cycles / hw.clock
    per_channel = report.dram_stats["refreshes"] / cfg.channels
    assert per_channel == pytest.approx(seconds * 1e9 / t["tREFI"], abs=1.5)
    e = device_energy(cfg.device)
    assert report.energy_pj["dram_refresh"] == pytest.approx(report.dram_stats["refreshes"] * cfg.ranks * e.refresh)


def test_frfcfs_serves_row_hits_before_an_older_conflict():
    """FR-FCFS vs FCFS on two streams alternating between two rows of one bank: FR-FCFS
    batches each row's hits (up to the cap) and gets more hits and a shorter run."""
    row = 1 << (6 + 7 + 2 + 2)
    a = [x for i in range(64) for x in (64 * i, row + 64 * i)]
    fr, f1 = _stream("ddr4-3200", a, mapping="RoChRaBaBgCo", scheduler="frfcfs")
    fc, f2 = _stream("ddr4-3200", a, mapping="RoChRaBaBgCo", scheduler="fcfs")
    assert fr.counts()["hits"] > fc.counts()["hits"] + 50
    assert fr.end(f1) < fc.end(f2)


def test_access_addresses_cover_every_burst_once():
    offsets = np.array([0, 100, 4096], dtype=np.int64)
    sizes = np.array([100, 30, 64], dtype=np.int64)
    got = access_addresses(offsets, sizes, 64, 32).tolist()
    assert got == [0, 32, 64, 96, 128, 160, 4096, 4128]  # bursts 0, 1 (shared by both chunks), 2, 64
    assert access_addresses(offsets, sizes, 64, 128).tolist() == [0, 128, 4096]  # bursts 0+1 in one access


def _plain_access_addresses(offsets, sizes, burst, access):
    """Every DMA burst the chunks touch, once, in issue order; each as its device accesses."""
    bursts = []
    for o, n in zip(offsets, sizes):
        for b in range(o // burst, (o + n - 1) // burst + 1):
            if not bursts or bursts[-1] != b:
                bursts.append(b)
    if burst >= access:
        return [b * burst + j * access for b in bursts for j in range(burst // access)]
    out = []
    for b in bursts:
        a = b * burst // access * access
        if not out or out[-1] != a:
            out.append(a)
    return out


def test_access_addresses_match_a_plain_enumeration():
    """The compiled access addresses are the plain enumeration's: random chunk lists (gaps,
    abutting and overlapping-burst chunks, empty ones), bursts above, at and below the access."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(0, 8))
        offsets = np.cumsum(rng.integers(0, 300, n)).astype(np.int64)
        sizes = rng.integers(0, 200, n).astype(np.int64)
        burst, access = (int(x) for x in rng.choice([16, 32, 48, 64, 96, 128], 2))
        got = access_addresses(offsets, sizes, burst, access).tolist()
        assert got == _plain_access_addresses(offsets.tolist(), sizes.tolist(), burst, access)


def test_c_kernel_layout_is_the_python_one():
    """The C kernel's constants (npusim/native/bank_kernel.c) are the layout kernel.py and the
    controller describe: a column added on one side only would read the wrong state."""
    from npusim.dram import controller, kernel
    C = kernel._C
    assert C.N_TIMING == len(kernel.TIMING_FIELDS) and (C.T_PD, C.T_CMD) == (kernel.T_PD, kernel.T_CMD)
    assert (C.N_G, C.G_WT, C.G_CMD_DUAL) == (kernel.G_STACK_IDS + 1, kernel.G_WT, kernel.G_CMD_DUAL)
    assert C.CMD_STRIDE == kernel.CMD_STRIDE
    assert C.CHAN_I_COLUMNS == kernel.CHAN_I_COLUMNS and C.C_T_SEQ_W == kernel.C_T_SEQ_W
    assert C.RANK_F_COLUMNS == kernel.R_FAW + 4 and C.TQ_COLUMNS == kernel.T_SEQ + 1
    assert (C.SF_DELAY, C.S_PRES) == (kernel.SF_DELAY, kernel.S_PRES)
    assert C.N_LAYOUT == len(controller._STATE) + 1


def test_a_transfer_an_ulp_before_the_controllers_present_starts_at_the_present():
    """SimPy's clock is in cycles: a moment the DRAM model set in ns can come back an ulp
    earlier (58255.000799999994 for 58255.0008 at 1.25 ns per cycle; a transformer at 64 KiB on
    DDR5 with closed pages stopped with an internal error there). The controller never goes back."""
    import simpy

    from npusim import workflow as W
    from npusim.dram.model import BankedDram

    dram = BankedDram(simpy.Environment(), W.load_hw("edge-npu", {"dram.model": "banks"}))
    assert dram._bring_to(58255.0008) == 58255.0008
    assert dram._bring_to(58255.000799999994) == 58255.0008
    assert dram._bring_to(58300.0) == 58300.0


def test_view_chunks_match_render_chunks_reference():
    """The compiled chunks of a strided view (what the banks model turns into addresses) are
    RenderChunks' (npusim.kernels.render_chunks_reference): random views, contiguous tails,
    abutting and overlapping rows, unit and empty axes."""
    from npusim.dram.kernel import view_chunks
    from npusim.kernels.render_chunks import render_chunks_reference

    rng = np.random.default_rng(11)
    for _ in range(400):
        rank = int(rng.integers(0, 5))
        shape = [int(rng.integers(0 if rng.random() < 0.05 else 1, 6)) for _ in range(rank)]
        strides, expected = [], 1
        for d in reversed(shape):  # row-major, then some axes made strided
            strides.insert(0, expected if rng.random() < 0.5 else int(rng.integers(0, 40)))
            expected *= max(d, 1)
        itemsize = int(rng.choice([1, 2, 4]))
        got = view_chunks(np.array(shape, dtype=np.int64), np.array(strides, dtype=np.int64), itemsize)
        want = render_chunks_reference(tuple(shape), tuple(strides), 0, itemsize) if all(shape) else ([], [])
        assert (got[0].tolist(), got[1].tolist()) == (list(want[0]), list(want[1])), (shape, strides, itemsize)


def test_device_energy_from_currents():
    """DDR4 x8 (DRAMsim3's figures): E_act = V (IDD0 tRC - IDD3N tRAS - IDD2N (tRC - tRAS)) x 8 devices."""
    d = PRESETS["ddr4-3200"]
    e = device_energy(d)
    act = 1.2 * (57e-3 * d.tRC - 52e-3 * d.tRAS - 37e-3 * (d.tRC - d.tRAS)) * 8 * 1e3
    assert e.activate == pytest.approx(act)
    assert e.read == pytest.approx(1.2 * (168e-3 - 52e-3) * (8 / 3.2) * 8 * 1e3)


# -- config ---------------------------------------------------------------------------------

def test_bad_dram_config_names_field_and_value():
    from npusim import workflow as W

    with pytest.raises(ConfigError, match=r"dram\.mapping = 'RoRoBaCoCh': a field appears twice"):
        W.load_hw("edge-npu", {"dram.model": "banks", "dram.mapping": "RoRoBaCoCh"})
    with pytest.raises(ConfigError, match=r"dram\.channels = 3: expected a power of two"):
        W.load_hw("edge-npu", {"dram.model": "banks", "dram.channels": 3})
    with pytest.raises(ConfigError, match=r"dram\.device = 'lpddr9': expected one of"):
        W.load_hw("edge-npu", {"dram.device": "lpddr9"})
    # the pins' rate out of range: the field the user set is named, with what would fit
    with pytest.raises(ConfigError, match=r"dram\.channels = 64: .*100 MT/s per pin.*use dram\.channels 1 to 8"):
        W.load_hw("edge-npu", {"dram.model": "banks", "dram.channels": 64})
    with pytest.raises(ConfigError, match=r"dram\.bandwidth = '3GB/s': .*use another dram\.device: lpddr4-3200, "
                                          r"lpddr4x-4266$"):  # the parts that run that slowly
        W.load_hw("edge-npu", {"dram.model": "banks", "dram.device": "hbm3-6400", "dram.bandwidth": "3GB/s"})
    with pytest.raises(ConfigError, match=r"dram\.bandwidth = '1GB/s': .*use dram\.model: bandwidth \(no part runs "
                                          r"that slowly; the slowest, lpddr4-3200, needs at least 1\.6 GB/s\)"):
        W.load_hw("edge-npu", {"dram.model": "banks", "dram.bandwidth": "1GB/s"})
    # more channels than the banks model takes (each access looks at every channel)
    with pytest.raises(ConfigError, match=r"dram\.channels = 1024: expected at most 512"):
        W.load_hw("edge-npu", {"dram.model": "banks", "dram.channels": 1024})
    with pytest.raises(ConfigError, match=r"dram\.bandwidth = '100000GB/s': needs 16,384 channels"):
        W.load_hw("edge-npu", {"dram.model": "banks", "dram.bandwidth": "100000GB/s"})
    hw = W.load_hw("edge-npu", {"dram.model": "banks"})
    from npusim.dram.model import controller_config
    cfg = controller_config(hw)
    assert (cfg.channels, round(cfg.rate)) == (2, 3200)  # 12.8 GB/s = two x16 LPDDR4-3200 channels


# -- the simulator --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_program():
    from npusim import workflow as W
    from npusim.plan.lower import lower

    graph = W.load_graph("bert_tiny")
    # on the bandwidth model: the tests below compare the banks model (``model="banks"``) with it
    hw = W.load_hw("edge-npu", {"scratchpad.size": "256KiB", "dram.model": "bandwidth"})
    plan = W.plan_graph(graph, hw)
    return lower(plan, hw), hw


def _sim(program, hw, **over):
    from dataclasses import replace

    from npusim.sim.engine import simulate
    return simulate(program, replace(hw, dram=replace(hw.dram, **over)))


def test_power_down_saves_background_energy_and_costs_exit_time(small_program):
    """``dram.powerdown_after``: a rank idle that long enters power-down (IDD3P / IDD2P instead
    of IDD3N / IDD2N) and its next access waits tXP: less background energy, no less time, the
    same accesses; 0 (the default) never powers down."""
    program, hw = small_program
    awake = _sim(program, hw, model="banks")
    assert _sim(program, hw, model="banks", powerdown_after=0.0).energy_pj == awake.energy_pj
    asleep = _sim(program, hw, model="banks", powerdown_after=50e-9)
    assert asleep.energy_pj["dram_background"] < awake.energy_pj["dram_background"]
    assert asleep.cycles >= awake.cycles
    assert (asleep.dram_stats["reads"], asleep.dram_stats["writes"]) == (awake.dram_stats["reads"],
                                                                         awake.dram_stats["writes"])
    assert asleep.energy_pj["mac"] == awake.energy_pj["mac"]


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_a_bank_groups_column_timing_is_the_banks_delay(backend):
    """A DDR4 stream kept in one bank group (RoBgRaBaCoCh: its columns, then banks, in one
    group) reads once per tCCD_L (5 ns), the data bus busy for a burst (2.5 ns) of it: half
    idle. The wait beyond the channel's bus is the bank's delay (reported as DRAM bank timing,
    not bandwidth: found by an audit), about tCCD_L - tBurst an access; spread over the bank
    groups (RoRaBaBgCoCh... the default mapping), next to none."""
    cfg = _config("ddr4-3200", mapping="RoBgRaBaCoCh")
    tim = timings(cfg)
    c = Controller(cfg, backend)
    n = 512
    f = c.add_flow(np.arange(n, dtype=np.int64) * 64, False, 0.0, 0.0)
    c.run(1e9)
    per_access = c.delay(f) / n
    assert tim["tCCD_L"] > tim["tBurst"]
    assert per_access == pytest.approx(tim["tCCD_L"] - tim["tBurst"], rel=0.1)
    spread = Controller(_config("ddr4-3200"), backend)
    g = spread.add_flow(np.arange(n, dtype=np.int64) * 64, False, 0.0, 0.0)
    spread.run(1e9)
    assert spread.delay(g) / n < 0.1 * per_access and spread.end(g) < c.end(f)


def _bursts_apart(backend, powerdown_after, gap, bursts):
    """(controller, timings, end, rank times) of ``bursts`` bursts of 64 reads ``gap`` ns apart
    on one LPDDR4 rank with power-down after ``powerdown_after`` ns."""
    cfg = ControllerConfig(device=PRESETS["lpddr4-3200"], channels=1, ranks=1, mapping="RoRaBaCoCh", policy="open",
                           row_hit_cap=4, write_high=26, write_low=6, powerdown_after=powerdown_after)
    c = Controller(cfg, backend=backend)
    t = 0.0
    for i in range(bursts):
        c.add_flow(np.arange(64, dtype=np.int64) * 32 + i * 2048 * 8 * 4, False, 0.0, t)
        c.run(t + gap, until_complete=True)
        t += gap
    c.run(t)
    return c, timings(cfg), t, c.rank_times(t)


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_an_idle_rank_sleeps_between_its_refreshes(backend):
    """Bursts 20 us apart on LPDDR4 (tREFI 3.9 us): a rank idle that long refreshes about five
    times per gap, waking each time for tRFC. It sleeps from tPD after its last data or refresh
    to the next, so power-down is the idle time less tPD and tRFC per wake-up; it was only the
    stretch after a gap's last refresh (10 % of the time where 85 % is due: found by an audit)."""
    c, tim, t, times = _bursts_apart(backend, powerdown_after=100.0, gap=20000.0, bursts=40)
    t_rfc, t_pd = tim["tRFC"], 100.0
    refreshes = c.refreshes_until(t)
    busy = 40 * (64 * tim["tBurst"] + 200.0)  # (the bursts' data and a generous first latency)
    awake_at_most = busy + 40 * t_pd + refreshes * (t_rfc + t_pd)
    asleep = times["pd_precharged"][0] + times["pd_active"][0]
    assert refreshes >= 200 and t - awake_at_most <= asleep <= t


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_a_refresh_does_not_restart_the_power_down_timer(backend):
    """powerdown_after = 10 us on LPDDR4 (tREFI - tRFC = 3.6 us): a rank woken by a refresh
    sleeps again once it is done, as hw_configs/README.md says. The refresh restarted the idle
    timer, so a rank idle for 100 us between bursts never slept (found by a user audit:
    squeezenet at a 1 kHz clock drew exactly the background of no power-down)."""
    t_pd, bursts = 10000.0, 10
    c, tim, t, times = _bursts_apart(backend, powerdown_after=t_pd, gap=100000.0, bursts=bursts)
    busy = bursts * (64 * tim["tBurst"] + 200.0)
    awake_at_most = busy + bursts * t_pd + c.refreshes_until(t) * tim["tRFC"]
    asleep = times["pd_precharged"][0] + times["pd_active"][0]
    assert t - awake_at_most <= asleep <= t and asleep > 0.8 * t


def _gap_run(backend, gap):
    """Two bursts of reads ``gap`` ns apart on an LPDDR4 rank with power-down."""
    cfg = ControllerConfig(device=PRESETS["lpddr4-3200"], channels=1, ranks=1, mapping="RoRaBaCoCh", policy="open",
                           row_hit_cap=4, write_high=26, write_low=6, powerdown_after=100.0)
    c = Controller(cfg, backend=backend)
    flows = []
    for t in (0.0, gap):
        flows.append(c.add_flow(np.arange(64, dtype=np.int64) * 32 + int(t) % 7 * 4096, False, 0.0, t))
        c.run(t + 1e6, until_complete=True)
    c.run(gap + 1e6)
    return [c.end(f) for f in flows], c.counts(), c.rank_times(gap + 1e6), c.latency_sums()


@pytest.mark.parametrize("gap_refreshes", [5, 37])
def test_a_refresh_backlog_in_one_step_is_the_refreshes_one_at_a_time(monkeypatch, gap_refreshes):
    """DRAM idle for many tREFI (a clock of 1 Hz: 1e12 refreshes in a run, taken one at a time
    by the controller's loop, which never ended) takes its refreshes in one closed-form step.
    The reference with a backlog of 2 against the same reference one refresh at a time: the same
    end times, counts and power-down time, up to the rounding of sums."""
    from npusim.dram import reference

    gap = gap_refreshes * timings(_config("lpddr4-3200"))["tREFI"] + 1234.5
    monkeypatch.setattr(reference, "REFRESH_BACKLOG", 10 ** 12)
    one_at_a_time = _gap_run("reference", gap)
    monkeypatch.setattr(reference, "REFRESH_BACKLOG", 2)
    in_one_step = _gap_run("reference", gap)
    assert one_at_a_time[1] == in_one_step[1] and one_at_a_time[1]["refreshes"] >= gap_refreshes
    assert one_at_a_time[0] == pytest.approx(in_one_step[0], rel=1e-12)
    for key, times in one_at_a_time[2].items():
        assert times == pytest.approx(in_one_step[2][key], rel=1e-12), key
    assert one_at_a_time[3] == pytest.approx(in_one_step[3], rel=1e-12)


def test_a_second_of_idle_dram_is_one_step_in_the_kernel_as_in_the_reference():
    """256,000 refreshes owed at once (beyond the kernel's backlog of 65,536): the C kernel and
    the reference agree exactly, and the refreshes done are the ones owed."""
    fast, slow = _gap_run("compiled", 1e9), _gap_run("reference", 1e9)
    assert fast == slow
    assert fast[1]["refreshes"] > 250_000


def test_simulation_reports_rows_and_energy(small_program):
    program, hw = small_program
    base = _sim(program, hw)
    banks = _sim(program, hw, model="banks")
    s = banks.dram_stats
    assert s["row_hits"] + s["row_misses"] + s["row_conflicts"] == s["reads"] + s["writes"] > 0
    assert 0.5 < s["row_hit_rate"] <= 1.0
    assert {"dram_activate", "dram_refresh", "dram_background"} <= set(banks.energy_pj)
    assert banks.energy_pj["dram_activate"] > 0 and not base.dram_stats
    assert s["reads"] * PRESETS["lpddr4-3200"].access_bytes >= base.offchip_read_bytes
    # the same bursts, so the latency moves by bank timing only, a few per cent
    assert banks.cycles == pytest.approx(base.cycles, rel=0.05)
    assert "DRAM rows" in banks.summary()
    assert "DRAM row hit rate %" in banks.counters


@pytest.mark.parametrize("loop", ["compiled", "simpy"])
def test_every_access_is_counted_writes_still_queued_at_the_end_too(small_program, monkeypatch, loop):
    """A store is done once its writes are queued (posted); those still queued when the program
    ends are issued then, so the report counts (and charges the energy of) every access the
    program's transfers make, in either event loop."""
    from npusim.dram.model import BankedDram

    program, hw = small_program
    monkeypatch.setenv("NPUSIM_SIM_LOOP", loop)
    s = _sim(program, hw, model="banks").dram_stats
    from dataclasses import replace
    dram = BankedDram(None, replace(hw, dram=replace(hw.dram, model="banks")), program)
    table = program.commands
    loads = stores = 0
    for i, view in enumerate(table.dram):
        if view is not None:
            n = len(dram.addresses(type("Cmd", (), {"id": i, "dram": view, "tensor": table.tensor[i]})))
            if table.kind_of(i) == "store":
                stores += n
            else:
                loads += n
    assert (s["reads"], s["writes"]) == (loads, stores) and stores > 0


@pytest.mark.parametrize("write_queue", [32, 256])
@pytest.mark.parametrize("elements", [2048, 16384])
def test_posted_stores_move_no_faster_than_the_dram(elements, write_queue):
    """A store is acknowledged once its writes are queued, but no faster than its channels'
    rate: a DRAM-bound program (a Relu streaming its input in and its output out) never ends
    before the DRAM bound, however deep the write queue (posted at once, a store up to the
    queues' size crossed for free)."""
    from npusim import workflow as W
    from npusim.graph.model import build_graph
    from npusim.plan.lower import lower
    from npusim.sim.engine import simulate

    graph = build_graph("relu", [{"name": "x", "shape": [elements], "dtype": "float32", "itemsize": 4,
                                  "kind": "input"},
                                 {"name": "y", "shape": [elements], "dtype": "float32", "itemsize": 4,
                                  "kind": "output"}],
                        [{"name": "r", "kind": "Relu", "inputs": ["x"], "outputs": ["y"]}])
    hw = W.load_hw("tpu-like", {"dram.model": "banks", "dram.write_queue": write_queue})
    report = simulate(lower(W.plan_graph(graph, hw), hw), hw)
    assert report.lower_bounds["dram_cycles"] <= report.cycles <= 1.15 * report.lower_bounds["dram_cycles"]


def test_addresses_change_the_result_only_through_the_device(small_program, monkeypatch):
    """Shifting every buffer by a whole number of address-space periods of the mapping leaves
    every access on the same bank, row and column: the run is identical. The bandwidth model
    ignores addresses. A shift by one column (another channel / bank interleave) may move the
    row statistics, and only those figures the device model produces."""
    import npusim.dram.model as M

    program, hw = small_program
    original = M.bump_layout

    def shifted(delta):
        def layout(*a, **k):
            return {name: base + delta for name, base in original(*a, **k).items()}
        return layout

    ref = _sim(program, hw, model="banks")
    period = PRESETS["lpddr4-3200"].capacity * 2  # rows wrap: the mapping repeats every capacity x channels
    monkeypatch.setattr(M, "bump_layout", shifted(period))
    same = _sim(program, hw, model="banks")
    assert same.cycles == ref.cycles and same.dram_stats == ref.dram_stats
    monkeypatch.setattr(M, "bump_layout", shifted(1024 + 32))
    moved = _sim(program, hw, model="banks")
    assert moved.offchip_bytes == ref.offchip_bytes and moved.energy_pj["mac"] == ref.energy_pj["mac"]
    assert (moved.dram_stats["row_hits"], moved.cycles) != (ref.dram_stats["row_hits"], ref.cycles)
    b1 = _sim(program, hw)
    monkeypatch.setattr(M, "bump_layout", shifted(0))
    assert _sim(program, hw).cycles == b1.cycles


@pytest.mark.parametrize("name", ["lpddr4-3200", "ddr5-4800", "hbm3-6400"])
def test_time_ordered_run_stops_at_each_completion_and_changes_nothing_else(name):
    """``run(until_complete=True)`` (the kernel's time-ordered mode, the simulator's look-ahead)
    returns just after an access makes a flow done (a read's last column command, a write's
    last admission; two flows may be done by one issue and the admission after it) and, run to
    the end, leaves exactly the state a straight run does; with streams of row hits on several
    channels (the kernel's lanes) among random accesses."""
    rng = np.random.default_rng(3)
    cfg = _config(name, channels=2, read_queue=8, write_queue=8, write_high=6, write_low=2)
    flows = [(rng.integers(0, 1 << 22, 300) // 64 * 64, False, 1.0, 0.0),
             (np.arange(400, dtype=np.int64) * 32, True, 0.0, 50.0),
             ((1 << 20) + np.arange(120, dtype=np.int64) * 32, False, 0.0, 80.0)]
    flows += _stream_flows(rng, 5)
    straight, stepped = Controller(cfg), Controller(cfg)
    for c in (straight, stepped):
        ids = [c.add_flow(a.astype(np.int64), w, p, s) for a, w, p, s in flows]
    straight.run(1e15)
    done = []
    while stepped.run(1e15, until_complete=True):
        finished = [f for f in ids if stepped.done(f) and f not in done]
        assert finished
        done += finished
    assert sorted(done) == sorted(ids)
    assert [(straight.end(f), straight.remaining(f)) for f in ids] == \
        [(stepped.end(f), stepped.remaining(f)) for f in ids]
    assert straight.counts() == stepped.counts()
    # (the same delays and latencies, summed in another order across channels: equal to the
    # last bits of a float)
    assert [straight.delay(f) for f in ids] == pytest.approx([stepped.delay(f) for f in ids], rel=1e-12)
    assert straight.latency_sums() == pytest.approx(stepped.latency_sums(), rel=1e-12)


@pytest.mark.parametrize("backend", ["compiled", "reference"])
@pytest.mark.parametrize("bank_queue", [0, 8])
def test_where_the_controller_pauses_changes_nothing(backend, bank_queue):
    """The simulator brings the controller to each transfer's start and to the moments it
    predicts; the same flows at the same starts must give the same result however often the
    controller is paused between them (a transaction queue slot freed by a move to a bank's
    command queue is filled at once, not at the next pause)."""
    rng = np.random.default_rng(5)
    cfg = _config("lpddr4-3200", channels=2, bank_queue=bank_queue, read_queue=32, write_queue=32)
    flows, start = [], 0.0
    for i in range(8):
        n = int(rng.integers(100, 800))
        a = (rng.integers(0, 1 << 26, n) // 32 * 32 if i % 3 == 0 else
             rng.integers(0, 1 << 24) // 64 * 64 + 32 * np.arange(n))
        flows.append((a.astype(np.int64), bool(rng.integers(2)), float(rng.integers(3)), start))
        start += float(rng.integers(100, 2000))

    def run(pauses):
        c = Controller(cfg, backend)
        ids, i = [], 0
        for stop in sorted(pauses) + [1e12]:
            while i < len(flows) and flows[i][3] <= stop:
                c.run(flows[i][3])
                ids.append(c.add_flow(*flows[i]))
                i += 1
            c.run(stop)
        return [(c.end(f), c.delay(f)) for f in ids], c.counts(), c.latency_sums()

    straight = run([])
    for _ in range(3):
        assert run(rng.uniform(0, start + 5000, int(rng.integers(20, 150))).tolist()) == straight


def test_breakdown_names_bank_bound_transfers():
    from npusim.sim.critical_path import CommandTiming, _bank_bound

    t = CommandTiming()
    t.parts = {"load_bandwidth": 300.0, "load_bank_timing": 100.0}
    assert _bank_bound(t, "load")
    t.parts = {"load_bandwidth": 400.0, "load_bank_timing": 100.0}
    assert not _bank_bound(t, "load")
    t.parts = {"store_bandwidth": 10.0}
    assert not _bank_bound(t, "store")


@pytest.mark.parametrize("bank_queue", [0, 4])
def test_pool_compaction_keeps_queued_accesses(bank_queue, monkeypatch):
    """Dropping released flows' accesses from the pool (when they are most of it) renumbers the
    accesses waiting in the scheduler's and transaction queues: the result is the reference's,
    which keeps every access."""
    cfg = _config("lpddr4-3200", channels=2, bank_queue=bank_queue, read_queue=16, write_queue=16)
    monkeypatch.setattr(Controller, "compact_from", 3500)  # at the third flow

    def run(backend):
        c = Controller(cfg, backend)
        big = c.add_flow(np.arange(3000, dtype=np.int64) * 32, False, 0.0, 0.0)
        c.run(20000.0)  # done by then
        c.release(big)
        rng = np.random.default_rng(3)
        live = [c.add_flow(rng.integers(0, 1 << 26, 400) // 32 * 32, False, 1.0, 20000.0),
                c.add_flow((1 << 25) + 32 * np.arange(400, dtype=np.int64), True, 0.0, 20000.0)]
        c.run(20500.0)  # queues full of the live flows' accesses
        live.append(c.add_flow((1 << 24) + 4096 * np.arange(300, dtype=np.int64), False, 0.0, 20500.0))
        if backend == "compiled":
            assert c.n < 3000  # the released flow's accesses were dropped, queues full
        c.run(1e6)
        return [(c.end(f), c.delay(f)) for f in live], c.counts(), c.latency_sums()

    assert run("compiled") == run("reference")


# -- placement for rows (dram.placement: rows) -------------------------------------------------

def _moves_program(sizes, order, steps=None):
    """A stand-in for a Program of whole-buffer DMAs: buffer ``i`` of ``sizes[i]`` bytes moved
    in ``order``, the k-th DMA in step ``steps[k]`` (default: each its own step) -- what
    ``bump_layout`` and ``row_layout`` read: commands, tensors, views, steps."""
    from types import SimpleNamespace as NS

    from npusim.plan.command_table import Command, CommandTable
    from npusim.plan.lower import DramView

    tensors = [NS(name=f"b{i}", view=None) for i in range(len(sizes))]
    steps = list(range(len(order))) if steps is None else steps
    commands = [Command(k, "dma.load", "load", step, tensor=i, dram=DramView(0, (sizes[i],), (1,), 1))
                for k, (i, step) in enumerate(zip(order, steps))]
    return NS(graph=NS(tensors=tensors), commands=CommandTable.from_commands(commands))


SIZES = [5000, 3000, 6000, 2000, 9000, 700, 4096, 1500]


def test_row_layout_crosses_no_boundary_it_need_not_and_packs_the_rest():
    """Every buffer touches ceil(size / stripe) row blocks; one that fits in what is left of the
    current block starts right after the previous buffer (64 B aligned), as with bump; none
    overlap; the bump placement of the same program does cross boundaries it need not."""
    from npusim.dram.model import bump_layout, row_layout

    stripe = 4096
    program = _moves_program(SIZES, range(len(SIZES)))
    rows, bump = row_layout(program, stripe), bump_layout(program)

    def blocks(start, size):
        return (start + size - 1) // stripe - start // stripe + 1

    need = [-(-s // stripe) for s in SIZES]
    assert [blocks(rows[f"b{i}"], s) for i, s in enumerate(SIZES)] == need
    assert [blocks(bump[f"b{i}"], s) for i, s in enumerate(SIZES)] != need
    spans = sorted((rows[f"b{i}"], rows[f"b{i}"] + s) for i, s in enumerate(SIZES))
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))
    end = 0
    for i, s in enumerate(SIZES):  # packed whenever that crosses no extra boundary
        packed = (end + 63) // 64 * 64
        assert rows[f"b{i}"] == (packed if blocks(packed, s) == need[i] else -(-packed // stripe) * stripe)
        end = rows[f"b{i}"] + s


def test_row_stripe_is_the_block_of_whole_rows_under_the_mapping():
    """Everything below the row-selecting fields: page x channels with the bank above the
    columns; x bank groups when they interleave below the columns; one page when the
    columns are the lowest field."""
    from npusim.dram.mapping import parse_mapping
    from npusim.dram.model import row_stripe

    lp4, ddr4 = PRESETS["lpddr4-3200"], PRESETS["ddr4-3200"]
    assert row_stripe(parse_mapping("RoRaBaCoCh", lp4, 2, 1)) == 2 * lp4.page_bytes
    assert row_stripe(parse_mapping("RoRaBaCoBgCh", ddr4, 2, 1)) == 2 * 4 * ddr4.page_bytes
    assert row_stripe(parse_mapping("ChRaBaRoCo", lp4, 2, 1)) == lp4.page_bytes


def test_row_layout_opens_fewer_rows_than_bump_on_reloaded_buffers():
    """Buffers moved again and again in changing orders (re-loaded weights, retrieved spills):
    under rows every move opens the fewest rows its bytes need, under bump about one in
    size/stripe moves opens one more, so rows has fewer activations and a higher row-hit
    rate on the same accesses. (The buffers total ten times the 32 KiB the banks hold open: a
    set that fits in the open rows is served best packed densely, as bump does.)"""
    from npusim.dram.model import bump_layout, row_layout, row_stripe

    cfg = _config("lpddr4-3200", channels=2)
    sizes = [50000, 30000, 60000, 20000, 90000, 7000, 40960, 15000]
    order = list(range(len(sizes)))
    moves = order + order[::-1] + order[1::2] + order[::2] + order[::-3]
    program = _moves_program(sizes, moves)

    def run(layout):
        c = Controller(cfg, "compiled")
        assert row_stripe(c.mapping) == 4096  # 2 KiB pages x 2 channels
        for k, i in enumerate(moves):
            start = layout[f"b{i}"] // 32 * 32
            c.add_flow(np.arange(start, layout[f"b{i}"] + sizes[i], 32, dtype=np.int64), False, float(k), 0.0)
        c.run(1e9)
        counts = c.counts()
        return counts["acts"], counts["hits"] / (counts["hits"] + counts["misses"] + counts["conflicts"])

    acts_rows, hit_rows = run(row_layout(program, 4096))
    acts_bump, hit_bump = run(bump_layout(program))
    assert acts_rows < acts_bump and hit_rows > hit_bump


def test_row_placement_changes_the_result_only_through_the_device(small_program):
    """The placement moves addresses only: the bandwidth model (which ignores them) gives the
    same run under bump and rows; the banked model the same bytes, compute energy and
    transfers, and row statistics of its own."""
    program, hw = small_program
    assert _sim(program, hw, placement="rows").cycles == _sim(program, hw).cycles
    bump = _sim(program, hw, model="banks")
    rows = _sim(program, hw, model="banks", placement="rows")
    assert rows.offchip_bytes == bump.offchip_bytes and rows.energy_pj["mac"] == bump.energy_pj["mac"]
    assert rows.dram_stats["reads"] == bump.dram_stats["reads"]
    assert rows.dram_stats["activations"] != bump.dram_stats["activations"]


def test_buffers_moved_together_start_in_different_banks():
    """A 64 KiB weight and its bias loaded in one step: packed after the weight's last block,
    the bias's block is in the weight's first bank (16 blocks = two turns of the 8 banks), and
    the two streams, in flight at once, fight over it. Under rows the bias starts half the
    banks away; a buffer moved in another step is not moved on; and the two streams run with
    fewer activations than under the no-boundary rule alone."""
    from npusim.dram.mapping import parse_mapping
    from npusim.dram.model import bank_cycle, moved_together, row_layout

    cfg = _config("lpddr4-3200", channels=2)
    mapping = parse_mapping(cfg.mapping, cfg.device, 2, 1)
    stripe, cycle = 4096, bank_cycle(mapping)
    assert cycle == 8
    sizes = [65536, 4096, 4096]
    program = _moves_program(sizes, [0, 1, 2], steps=[0, 0, 1])
    assert moved_together(program) == {"b0": {"b1"}, "b1": {"b0"}, "b2": set()}
    plain, rows = row_layout(program, stripe), row_layout(program, stripe, cycle)

    def bank(address):
        return int(mapping.decode(np.array([address]))["Ba"][0])

    assert bank(plain["b1"]) == bank(plain["b0"])  # rule 1 alone: the same bank
    assert (bank(rows["b1"]) - bank(rows["b0"])) % cycle == cycle // 2
    assert rows["b2"] == rows["b1"] + sizes[1]  # not moved with b0 or b1: packed on

    def acts(layout):
        c = Controller(cfg, "compiled")
        for i in (0, 1):  # both in flight from time 0
            c.add_flow(np.arange(layout[f"b{i}"], layout[f"b{i}"] + sizes[i], 32, dtype=np.int64), False, 0.0, 0.0)
        c.run(1e9)
        return c.counts()["acts"]

    assert acts(rows) < acts(plain)


def test_the_default_controller_is_the_structure_validated_against_ramulator2():
    """hw_configs/README.md's validation claim holds for the default controller only because the
    default is the structure benchmarks/dram_validation.py runs against Ramulator 2 (one queue per
    direction seen whole). Changing either without the other breaks that claim: re-run the
    validation (``--ramulator2``) and move the README's figures with it."""
    import importlib.util
    from pathlib import Path

    from npusim import workflow as W
    from npusim.dram.model import controller_config

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "dram_validation.py"
    spec = importlib.util.spec_from_file_location("dram_validation", path)
    validation = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(validation)
    cfg = controller_config(W.load_hw("edge-npu", {"dram.model": "banks"}))
    like = validation.LIKE["Ramulator 2"]
    assert cfg.bank_queue == like["bank_queue"] == 0
    assert (cfg.write_high, cfg.write_low) == (like["write_high"], like["write_low"]) == (26, 6)
    assert "row_hit_cap" not in like and "queue" not in like  # npusim's own cap and queue depth
    assert (cfg.read_queue, cfg.write_queue) == (32, 32)  # GenericDDR's buffers
    assert cfg.scheduler == "frfcfs" and cfg.policy == "open"


def test_a_mapping_without_bg_puts_the_bank_group_just_below_the_bank_as_ramulator_does():
    """Ramulator's RoBaRaCoCh names one Ba field for the bank group and the bank (the group in
    its low bits): on a part with bank groups it is npusim's RoBaBgRaCoCh, not an error."""
    from npusim.dram.mapping import parse_mapping

    d = PRESETS["ddr4-3200"]
    addresses = np.random.default_rng(0).integers(0, d.capacity, 1000)
    short, spelled = parse_mapping("RoBaRaCoCh", d, 2, 1), parse_mapping("RoBaBgRaCoCh", d, 2, 1)
    assert all((short.decode(addresses)[f] == spelled.decode(addresses)[f]).all() for f in ("Ro", "Ra", "Bg", "Ba", "Co", "Ch"))
    with pytest.raises(ValueError, match="missing field.s. Ba"):
        parse_mapping("RoRaCoCh", d, 2, 1)


def test_where_the_look_ahead_starts_changes_nothing(monkeypatch):
    """The simulator starts its look-ahead for the first completion ``TAIL`` column commands
    before the earliest that completion could be. Where it starts must change nothing: a
    googlenet run whose two transfers start at the moment a flow completes gave one activation
    more with TAIL 4 than with 16 while the DRAM's wake was an ordinary event (ordered by when
    it was scheduled, which the look-ahead's start moves); the wake now comes before the
    moment's other events (found by an audit)."""
    import npusim.dram.model as model
    from npusim import workflow as W

    monkeypatch.setenv("NPUSIM_SIM_LOOP", "simpy")
    hw = W.load_hw("edge-npu", {"dram.model": "banks", "dram.placement": "rows", "scratchpad.size": "128KiB"})
    program = W.lower_plan(W.plan_graph(W.load_graph("googlenet"), hw), hw)
    reports = []
    for tail in (16, 4):
        monkeypatch.setattr(model, "TAIL", tail)
        report = W.simulate_program(program, hw).to_dict()
        report.pop("events"), report.pop("wall_seconds", None)
        reports.append(report)
    assert reports[0] == reports[1]


def test_hit_rates_are_rounded_as_pythons_round_rounds_them():
    """``model.rounded_to_hundredths`` (the compiled run's row hit rate samples, all at once)
    against ``round(v, 2)``: rates, exact ties and their neighbours, large, negative and not
    finite values, to the last bit and the sign of zero."""
    from npusim.dram.model import rounded_to_hundredths

    rng = np.random.default_rng(3)
    hits = rng.integers(0, 10**7, 100_000)
    ties = np.arange(0, 20_001) / 200.0  # k.xx5: exact halves at two decimals where representable
    values = np.concatenate([100.0 * hits / (hits + rng.integers(1, 10**7, len(hits))), rng.random(50_000) * 100,
                             ties, np.nextafter(ties, -1.0), np.nextafter(ties, 200.0), -ties,
                             [1e7, 1e12 + 0.005, 123456789.125, -0.001, -0.005, 0.0, -0.0, 5e-324, np.inf, -np.inf]])
    assert [repr(v) for v in rounded_to_hundredths(values)] == [repr(round(v, 2)) for v in values.tolist()]


def test_rows_name_the_dram_part_as_run():
    """A sweep of dram.device keeps the config's bandwidth, so a part may run below its pin rate
    (lpddr4x-4266 at 3,200 MT/s on edge-npu came out slower than lpddr4-3200, with nothing in
    the row saying so: a DRAM audit). Rows carry the part, its channels and its rate."""
    from npusim.cli.compare import compare_planners
    from npusim.workflow import load_graph, load_hw

    graph = load_graph("squeezenet1_0")
    (row,) = compare_planners(graph, load_hw("edge-npu", {"dram.model": "banks", "dram.device": "lpddr4x-4266"}),
                              ["fuse+tile+default+arena+belady"])
    assert (row["dram_device"], row["dram_channels"], row["dram_rate_mts"]) == ("lpddr4x-4266", 2, 3200)
    (plain,) = compare_planners(graph, load_hw("edge-npu", {"dram.model": "bandwidth"}), ["fuse+tile+default+arena+belady"])
    assert plain["dram_device"] is None  # (the bandwidth model has no part)


def test_the_row_causes_benchmark_names_every_activation():
    """``benchmarks/dram_row_causes.py`` wraps the reference controller's commit and refresh
    (whose signature the refresh backlog changed: it then failed at its first refresh):
    every activation of its replay gets exactly one cause."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "benchmarks/dram_row_causes.py", "--limit", "20000", "bert_tiny"], cwd=repo,
                         capture_output=True, text=True, timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(repo)})
    assert run.returncode == 0, run.stderr[-500:]
    row = next(line for line in run.stdout.splitlines() if line.startswith("| bert_tiny"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    activations = int(cells[2].replace(",", ""))
    causes = [int(c.split()[0].replace(",", "")) for c in cells[3:]]
    assert activations > 0 and sum(causes) == activations


def test_the_part_has_the_rows_the_configs_capacity_needs():
    """edge-npu declares 4 GiB over two LPDDR4 channels of 1 GiB each: addresses past 2 GiB
    wrapped onto the rows of the first two (an LLM's weights above it shared rows with those
    below, found by a user audit). The part gets the rows dram.capacity needs, a power of two."""
    from npusim import workflow as W
    from npusim.dram.mapping import parse_mapping
    from npusim.dram.model import controller_config, sized_to

    cfg = controller_config(W.load_hw("edge-npu"))
    m = parse_mapping(cfg.mapping, cfg.device, cfg.channels, cfg.ranks)
    low, high = m.decode(np.array([4096, 4096 + (3 << 30)]))["Ro"]
    assert low != high and cfg.device.capacity * cfg.channels == 4 << 30
    d = PRESETS["lpddr4-3200"]
    assert sized_to(d, 1 << 20, 2) is d  # (never fewer rows than the preset's)
    bigger = sized_to(d, 3 << 30, 2)  # 3 GiB: rows for 4 GiB, a power of two
    assert bigger.rows == 2 * d.rows and bigger.tRFC == d.tRFC


@pytest.mark.parametrize("after", ["1ps", "1us"])
def test_power_down_never_draws_more_than_staying_awake(after):
    """A rank asleep with a row open was billed twice: as active standby (the row was open) and
    as active power-down, so powerdown_after=1ps raised bert_tiny's DRAM background on tpu-v4
    by 57 % (a fuzzing audit). Each moment of a rank is one state: background with power-down
    is at most the awake one's, and at most every rank in active standby for the whole run."""
    from npusim.dram.model import controller_config
    from npusim.workflow import load_graph, load_hw, run

    graph = load_graph("bert_tiny")
    awake = run(graph, load_hw("tpu-v4"))[1].energy_pj["dram_background"]
    hw = load_hw("tpu-v4", {"dram.powerdown_after": after})
    asleep = run(graph, hw)[1]
    cfg = controller_config(hw)
    e = device_energy(cfg.device)
    ceiling = cfg.channels * cfg.ranks * max(e.active_standby, e.precharged_standby) * asleep.cycles / hw.clock * 1e12
    assert asleep.energy_pj["dram_background"] <= min(awake, ceiling) * (1 + 1e-9)


def test_a_controller_too_big_for_the_memory_is_refused_not_killed(monkeypatch):
    """Every queue entry may hold another flow's access, so the flow table grows with channels
    x queue depth x channels: 512 HBM3 channels with 64-deep bank queues asked 19 GB and the
    kernel killed the run; 48 GiB was a MemoryError reported as an internal error (a fuzzing
    audit). Refused against the memory a simulation may use, naming the knobs; the shipped
    configs fit in far less."""
    from npusim.dram.model import BankedDram
    from npusim.errors import SimulationError
    from npusim.workflow import load_hw

    monkeypatch.setenv("NPUSIM_MEMORY_LIMIT", "1GiB")
    big = load_hw("datacenter-npu", {"dram.device": "hbm3-6400", "dram.bandwidth": "1.6TB/s", "dram.channels": "128",
                                     "dram.bank_queue": "256"})
    with pytest.raises(SimulationError, match="128 channels .* more than the 1.00 GiB available.*fewer dram.channels"):
        BankedDram(None, big)
    for name in ("edge-npu", "mid-npu", "datacenter-npu", "tpu-v1", "tpu-v4"):
        BankedDram(None, load_hw(name))
