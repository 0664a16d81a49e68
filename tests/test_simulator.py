"""Simulator invariants, the tagged scratchpad, DRAM sharing and the compute cost model."""

import csv
import dataclasses

import pytest
import simpy

from npusim.errors import SimulationError
from npusim.graph.model import Gemm
from npusim.hw.config import Hardware
from npusim.plan.lower import lower
from npusim.plan.validate import validate
from npusim.registry import make_plan
from npusim.sim.bandwidth import SharedBandwidth
from npusim.hw.costs import op_cycles, systolic_cycles
from npusim.sim.engine import simulate
from npusim.workflow import load_graph, load_hw, memory_bounds, run

from helpers import SHARED, chain_with_skip

EDGE = load_hw("edge-npu")


@pytest.mark.parametrize("trace", ["resnet50", "bert_tiny", "mobilenet_v2"])
def test_report_invariants(trace):
    graph = load_graph(trace)
    b = memory_bounds(graph, EDGE.scratchpad.alignment)
    plan, report = run(graph, EDGE, "default+arena+belady", b.m_r)
    assert report.offchip_bytes == plan.offchip_bytes()
    assert report.offchip_read_bytes + report.offchip_write_bytes == sum(t.size for t in plan.transfers)
    assert report.cycles >= report.lower_bounds["compute_cycles"] - 1e-6
    assert report.cycles >= report.lower_bounds["dram_cycles"] - 1e-6
    assert report.seconds == pytest.approx(report.cycles / EDGE.clock)
    assert report.total_energy_pj == pytest.approx(sum(report.energy_pj.values()))
    assert all(0.0 <= u <= 1.0 + 1e-9 for u in report.utilisation.values())
    # every op's fold count is at least its MACs over the PEs, so the arrays cannot be busier
    # with MACs than the core is with ops; and the MACs counted are the graph's array MACs
    assert 0.0 < report.utilisation["array"] <= report.utilisation["core"] + 1e-9
    pes = EDGE.cores.pe_rows * EDGE.cores.pe_cols
    assert report.utilisation["array"] * report.cycles * pes == pytest.approx(
        sum(o.macs for o in graph.ops if o.gemm is not None))
    dynamic_compute = sum(report.energy_by_op_pj.values())
    parts = report.energy_pj
    assert dynamic_compute <= parts["mac"] + parts["vector"] + parts["scratchpad_read"] + parts["scratchpad_write"] + 1e-3


@pytest.mark.parametrize("trace", ["resnet50", "bert_tiny", "squeezenet1_0"])
def test_no_spill_when_nothing_must_be_evicted(trace):
    """A budget that holds every tensor the arena places at once needs no spill or retrieve."""
    graph = load_graph(trace)
    roomy = make_plan(graph, EDGE, "default+arena+belady", budget=1 << 40)
    footprint = max(r.offset + r.size for r in roomy.residencies)
    assert footprint >= memory_bounds(graph, EDGE.scratchpad.alignment).m_p
    plan, report = run(graph, EDGE, "default+arena+belady", footprint)
    assert report.offchip_bytes["spill"] == 0 and report.offchip_bytes["retrieve"] == 0


def test_overwrite_of_live_data_is_caught():
    graph = chain_with_skip()
    hw = Hardware()
    plan = make_plan(graph, hw, "default+arena+belady", budget=1 << 16)
    name = {t.name: t.id for t in graph.tensors}
    a = next(r for r in plan.residencies if r.tensor == name["a"])
    # Put c where a lives while a is still needed (by D): the validator and the simulator object.
    broken = tuple(dataclasses.replace(r, offset=a.offset) if r.tensor == name["c"] else r
                   for r in plan.residencies)
    bad = dataclasses.replace(plan, residencies=broken)
    assert any(v.kind == "overlap" for v in validate(bad, graph))
    with pytest.raises(SimulationError) as info:
        simulate(lower(bad, hw, graph), hw)
    msg = str(info.value)
    assert "op 'C' at step 2" in msg and "'c'" in msg and "live tensor 'a'" in msg and "overwrite" in msg


def test_reading_data_that_was_never_loaded_is_caught():
    graph = chain_with_skip()
    hw = Hardware()
    plan = make_plan(graph, hw, "default+arena+belady", budget=1 << 16)
    no_loads = dataclasses.replace(plan, transfers=tuple(t for t in plan.transfers if t.kind != "load"))
    with pytest.raises(SimulationError, match=r"op 'A' at step 0.*reads 'x'"):
        simulate(lower(no_loads, hw, graph), hw)


def test_concurrent_transfers_share_bandwidth():
    env = simpy.Environment()
    dram = SharedBandwidth(env, bytes_per_cycle=8.0)
    n, size = 5, 4000
    finished = []
    for _ in range(n):
        dram.transfer(size).callbacks.append(lambda e: finished.append(env.now))
    env.run()
    assert len(finished) == n
    assert min(finished) >= n * size / 8.0 - 1e-6  # fair sharing: nobody finishes early
    assert max(finished) == pytest.approx(n * size / 8.0)


def test_staggered_transfers_processor_sharing():
    env = simpy.Environment()
    dram = SharedBandwidth(env, bytes_per_cycle=1.0)
    done = {}

    def start(name, at, size):
        yield env.timeout(at)
        yield dram.transfer(size)
        done[name] = env.now

    env.process(start("a", 0, 100))
    env.process(start("b", 50, 100))
    env.run()
    # a alone for 50 cycles (50 B left), then both at 0.5 B/cycle: a ends at 150, b at 200.
    assert done["a"] == pytest.approx(150) and done["b"] == pytest.approx(200)


def test_memory_bound_elementwise_op_takes_bytes_over_bandwidth():
    graph = load_graph("resnet50")
    add = next(o for o in graph.ops if o.kind == "Add")
    wide = dataclasses.replace(EDGE, cores=dataclasses.replace(EDGE.cores, vector_lanes=1024))
    cycles, bound = op_cycles(add, graph, wide)
    moved = sum(graph.tensors[t].size for t in set(add.inputs)) + sum(graph.tensors[t].size for t in add.outputs)
    assert bound == "scratchpad"
    assert cycles == pytest.approx(moved / EDGE.scratchpad.bytes_per_cycle)
    assert cycles > add.macs / wide.cores.vector_lanes  # not its MACs (element count)


def _scalesim_rows():
    path = SHARED / "reference" / "scalesim" / "resnet18_32x32_os" / "per_layer.csv"
    if not path.exists():
        pytest.skip(f"SCALE-Sim reference not found at {path}")
    with open(path) as f:
        return list(csv.DictReader(f))


def test_systolic_cycles_match_scalesim_os_32x32():
    for row in _scalesim_rows():
        gemm = Gemm(m=int(row["M"]), n=int(row["N"]), k=int(row["K"]))
        ours = systolic_cycles(gemm, 32, 32, "os")
        theirs = int(row["compute_cycles"]) + 1  # SCALE-Sim prints the last cycle's index
        assert abs(ours - theirs) <= 0.02 * theirs, row["layer"]


def test_resnet18_convs_map_to_scalesim_gemms():
    """The importer's implicit-GEMM view of each conv equals the one SCALE-Sim simulated."""
    rows = _scalesim_rows()
    graph = load_graph("resnet18")
    ours = sorted((o.gemm.m, o.gemm.n, o.gemm.k) for o in graph.ops if o.gemm is not None)
    theirs = sorted((int(r["M"]), int(r["N"]), int(r["K"])) for r in rows)
    assert ours == theirs


def test_weight_stationary_formula():
    # ws: folds = ceil(K/R) * ceil(N/C), each M + 2R + C - 2 cycles
    assert systolic_cycles(Gemm(m=100, n=40, k=70), 32, 16, "ws") == 3 * 3 * (100 + 64 + 16 - 2)
    assert systolic_cycles(Gemm(m=100, n=40, k=70, batch=2), 32, 16, "os") == 2 * 4 * 3 * (70 + 32 + 16 - 2)


def test_jitter_is_seeded_and_changes_timing_only():
    graph = load_graph("resnet18")
    plan, base = run(graph, EDGE, "default+arena+belady", 4 << 20)
    _, j1 = run(graph, EDGE, "default+arena+belady", 4 << 20, jitter=0.5, seed=7)
    _, j2 = run(graph, EDGE, "default+arena+belady", 4 << 20, jitter=0.5, seed=7)
    assert j1.cycles == j2.cycles and j1.cycles > base.cycles
    assert j1.offchip_bytes == base.offchip_bytes


def test_chrome_trace_export(tmp_path):
    import json

    graph = load_graph("resnet18")
    _, report = run(graph, EDGE, "default+arena+belady", 4 << 20)
    path = tmp_path / "t.json"
    report.save_chrome_trace(path)
    events = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == report.commands
    assert {e["cat"] for e in spans} >= {"Conv", "load", "store"}
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert names == {"core0", "dma0", "dma1"}  # one track per core and per DMA channel


@pytest.mark.parametrize("capacity", [1, 2, 3])
def test_engine_units_and_tasks_keep_simpy_s_event_order(capacity):
    """``engine._Units`` stands for ``simpy.Resource`` and ``engine._Task`` for
    ``simpy.Process`` (of a process nobody waits for): users of both, started and releasing
    at colliding times, must see every grant in the same order at the same time."""
    import random

    from npusim.sim.engine import _Task, _Units

    def trace(make_units, start):
        env = simpy.Environment()
        units, log = make_units(env), []
        rng = random.Random(capacity)

        def user(k, hold):
            request = units.request()
            yield request
            log.append((env.now, "got", k))
            yield env.timeout(hold)
            units.release(request)
            log.append((env.now, "released", k))
            yield env.timeout(0)  # an event between the release and the grant it leads to
            log.append((env.now, "after", k))

        def spawner():
            for k in range(40):
                start(env, user(k, rng.choice([0, 1, 1, 2, 3])))
                if rng.random() < 0.5:
                    yield env.timeout(rng.choice([0, 1]))

        env.process(spawner())
        env.run()
        return log

    expected = trace(lambda env: simpy.Resource(env, capacity), lambda env, g: env.process(g))
    assert trace(lambda env: _Units(env, capacity), _Task) == expected
    assert len({t for t, what, _ in expected if what == "got"}) > 5


def test_the_timeline_draws_every_cross_queue_semaphore():
    """The Perfetto timeline has one flow arrow per semaphore between two queues (a command
    waiting for one on another queue), from within the signalling command's slice to the
    waiting command's start (which may come before the signaller's end: a compute starts after
    its loads' first band, and the arrow then leaves the signaller at that moment: it pointed
    back in time, an audit found). An arrow drawn from the wrong command would start outside
    the signalling slice."""
    graph = load_graph("resnet18")
    hw = load_hw("edge-npu")
    plan, report = run(graph, hw, budget=128 << 10)
    program = lower(plan, hw)
    queue = [c.queue for c in program.commands]
    pairs = [(w, c.id) for c in program.commands for w in c.waits if queue[w] != c.queue]
    assert pairs and list(report.semaphores) == pairs
    us = 1e6 / report.clock_hz
    slices = {e.command: (e.start * us, e.end * us) for e in report.timeline}
    events = [e for e in report.chrome_trace()["traceEvents"] if e.get("cat") == "semaphore"]
    starts = {e["id"]: e["ts"] for e in events if e["ph"] == "s"}
    ends = {e["id"]: e["ts"] for e in events if e["ph"] == "f"}
    assert set(starts) == set(ends) == set(range(len(pairs)))
    backwards_before = 0
    for k, (signal, wait) in enumerate(pairs):
        assert slices[signal][0] <= starts[k] <= slices[signal][1]
        assert ends[k] == slices[wait][0]
        assert starts[k] <= ends[k] or slices[wait][0] < slices[signal][0]  # forward in time
        backwards_before += slices[signal][1] > slices[wait][0]  # (drawn from the signaller's end)
    assert backwards_before > 0  # this run streams: some waiters start before their signaller ends
