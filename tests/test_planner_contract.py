"""The planners' contract: each declares its options and the planning-context fields it reads
and writes (npusim.registry), and the code keeps to the declarations.

Each built-in planner runs inside a recording proxy of the context: every field it (or a
helper it calls) reads or assigns is recorded, and must be in its declared ``reads`` /
``writes``. Reading an undeclared option raises InternalError in any run (StageOptions)."""

from __future__ import annotations

import dataclasses

import pytest

from npusim.errors import InternalError, PlanningError, RegistryError
from npusim.planner_options import Option, StageOptions, check_given
from npusim.registry import PlanningContext, Registry, default_registry, make_plan
from npusim.testing.single_ops import conv_graph
from npusim.workflow import memory_bounds

from helpers import every_planner_pipeline, hardware_with_two_streams, nine_op_cell

FIELDS = {f.name for f in dataclasses.fields(PlanningContext)}


class Recorder:
    """Forwards to a PlanningContext and records the fields read and assigned."""

    def __init__(self, ctx) -> None:
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "read", set())
        object.__setattr__(self, "written", set())

    def __getattr__(self, name):
        self.read.add(name)
        return getattr(self._ctx, name)

    def __setattr__(self, name, value) -> None:
        self.written.add(name)
        setattr(self._ctx, name, value)


class Recording:
    """A planner that runs the wrapped one on a Recorder and keeps what it saw."""

    def __init__(self, planner, seen: dict) -> None:
        self._planner, self._seen = planner, seen
        for attr in ("name", "stage", "description", "options", "reads", "writes", "evicts", "decides"):
            if hasattr(planner, attr):
                setattr(self, attr, getattr(planner, attr))

    def run(self, ctx) -> None:
        recorder = Recorder(ctx)
        self._planner.run(recorder)
        read, written = self._seen.setdefault(self._planner.name, (set(), set()))
        read |= recorder.read
        written |= recorder.written


def test_every_planner_declares_options_reads_and_writes():
    for planner in default_registry().planners():
        names = [opt.name for opt in getattr(planner, "options", ())]
        assert len(names) == len(set(names)), f"{planner.name}: an option declared twice: {names}"
        for opt in getattr(planner, "options", ()):
            assert isinstance(opt, Option) and opt.doc, (planner.name, opt)
            if opt.default is not None and opt.kind in ("int", "float", "bool", "choice"):
                assert opt.parse(opt.default, planner.name) == opt.default, (planner.name, opt.name)
        assert set(planner.reads) <= FIELDS and set(planner.writes) <= FIELDS, planner.name
        assert planner.writes, f"{planner.name} declares no field it fills in"


def test_planners_keep_to_their_declared_reads_and_writes():
    seen: dict = {}
    registry = Registry()
    for planner in default_registry().planners():
        registry.add(Recording(planner, seen))
    graph, hw = nine_op_cell(), hardware_with_two_streams()
    bounds = memory_bounds(graph, hw.scratchpad.alignment)
    budgets = {"MR": bounds.m_r, "roomy": 1 << 20, "tight": max(64, bounds.m_r // 2)}
    runs = [(graph, pipeline, budgets[budget], {}) for pipeline, budget in every_planner_pipeline().values()]
    # tiled graphs take other branches (op-level orders, tiled scopes)
    conv = conv_graph(16, 16, 16)
    runs += [(conv, f"tile+{p}", 16 << 10, {"tile_all": True}) for p in
             ("default+arena+belady", "rpo+arena+lru", "greedy-mem+tflite-arena", "zhong+arena+belady", "olla",
              "cosma-fs", "default+arena+belady+taa")]
    for g, pipeline, budget, options in runs:
        try:
            make_plan(g, hw, pipeline, budget=budget, registry=registry,
                      options={"time_limit": 0.5, "workers": 1, **options})
        except (PlanningError, RegistryError):
            pass  # a refusal still ran the stages before it, which were recorded
    planners = {p.name: p for p in default_registry().planners()}
    assert len(seen) >= len(planners) - 2, sorted(set(planners) - set(seen))
    for name, (read, written) in sorted(seen.items()):
        planner = planners[name]
        assert written <= set(planner.writes), f"{name} writes {sorted(written - set(planner.writes))} undeclared"
        assert read <= set(planner.reads) | set(planner.writes), \
            f"{name} reads {sorted(read - set(planner.reads) - set(planner.writes))} undeclared"


def test_reading_an_undeclared_option_is_an_internal_error():
    class Sloppy:
        name, stage, description = "sloppy", "schedule", "reads an option it does not declare"
        options = (Option("depth", "int", 3, "how deep"),)
        reads, writes = ("graph", "options"), ("order",)

        def run(self, ctx) -> None:
            ctx.options["width"]

    view = StageOptions.for_planner({"depth": "7"}, Sloppy())
    assert view["depth"] == 7 and "depth" in view
    with pytest.raises(InternalError, match="'sloppy' reads option 'width', which it does not declare"):
        Sloppy().run(type("Ctx", (), {"options": view})())


def test_options_are_checked_against_the_declarations():
    known = default_registry().option_index()
    assert "time_limit" in known and "taa_sort" in known and "max_tiles" in known
    stages = default_registry().pipeline("tile+zhong+arena+belady+taa")
    with pytest.raises(PlanningError, match=r"unknown planner option 'time_limt' \(did you mean 'time_limit'\?\)"):
        check_given({"time_limt": 3}, stages, known, "p")
    with pytest.raises(PlanningError, match=r"zhong: option time_limit='fast', expected a number in"):
        check_given({"time_limit": "fast"}, stages, known, "p")
    with pytest.raises(PlanningError, match=r"taa: option taa_sort='random', expected one of size, lifetime"):
        check_given({"taa_sort": "random"}, stages, known, "p")
    check_given({"time_limit": "5", "max_cells": 100}, stages, known, "p")  # cosma's option: another pipeline's


def test_options_given_are_what_the_plan_records():
    plan = make_plan(nine_op_cell(), hardware_with_two_streams(), "tile+default+arena+belady",
                     options={"time_limit": 3}, budget=1 << 20)
    assert plan.meta.options == {"time_limit": 3}  # no stage writes into the options


def test_planner_reference_is_generated_from_the_declarations(capsys):
    import runpy
    from pathlib import Path

    from npusim.cli import main

    repo = Path(__file__).resolve().parents[1]
    checker = runpy.run_path(str(repo / "scripts" / "planner_docs.py"))
    assert checker["main"](["--check"]) == 0, "docs/planners.md is out of date: python scripts/planner_docs.py"
    assert main(["list", "--planner", "zhong"]) == 0
    out = capsys.readouterr().out
    for opt in default_registry().get("zhong").options:
        assert f"  {opt.name} (" in out
    assert main(["list", "--planner", "zhongg"]) == 2
    assert "did you mean 'zhong'" in capsys.readouterr().err


def test_built_in_planners_are_registered_by_name_and_made_on_first_use():
    """``planners.BUILT_IN`` registers every built-in planner by name (``Registry.add_lazy``);
    asking for one makes its module's group, which must be exactly the names it was declared
    under, and leaves the other groups unmade."""
    import planners

    registry = Registry()
    planners.register(registry)
    declared = sorted(n for _, _, names in planners.BUILT_IN for n in names)
    assert registry.names() == declared and len(set(declared)) == len(declared)
    assert registry._pending and not registry._planners
    assert registry.get("zhong").stage == "schedule"
    assert sorted(registry._planners) == ["dp", "greedy-mem", "zhong"]  # its group, no other
    made = registry.planners()
    assert [p.name for p in made] == declared and not registry._pending
    assert sorted(registry.option_index()) == sorted(default_registry().option_index())


def test_a_group_that_makes_other_planners_than_declared_is_refused():
    class Stage:
        stage, description, options, reads, writes = "schedule", "a stage", (), ("graph",), ("order",)

        def __init__(self, name):
            self.name = name

    registry = Registry()
    registry.add_lazy(["one", "two"], lambda: [Stage("one"), Stage("three")])
    with pytest.raises(RegistryError, match=r"planners \['one', 'two'\] were registered by name, but their module "
                                            r"made \['one', 'three'\]"):
        registry.get("two")
    registry.add(Stage("four"))
    with pytest.raises(RegistryError, match="two planners are registered as 'four'"):
        registry.add_lazy(["four"], lambda: [])


def test_options_are_checked_without_loading_every_planner():
    """An option the pipeline's own stages declare needs no index of every planner; an
    option they do not is looked up in it (then every planner is made)."""
    import planners

    registry = Registry()
    planners.register(registry)
    stages = registry.pipeline("tile+default+arena+belady")
    check_given({"max_tiles": 10}, stages, registry.option_index, "p")
    assert registry._pending  # the other groups are still unmade
    check_given({"time_limit": 5}, stages, registry.option_index, "p")  # another planner's option
    assert not registry._pending
    with pytest.raises(PlanningError, match="unknown planner option 'time_limt'"):
        check_given({"time_limt": 5}, stages, registry.option_index, "p")


# ------------------------------------------------------------------ a plugin that breaks its contract

class _Misbehaving:
    """A stage that does its job (``inner``'s) and then one thing it may not (``harm``)."""

    def __init__(self, name, inner, harm, extra_writes=()):
        self.name, self.stage, self.inner, self.harm = name, inner.stage, inner, harm
        self.description = f"{inner.name}, misbehaving"
        self.reads = tuple(getattr(inner, "reads", ())) + ("hw",)
        self.writes = tuple(getattr(inner, "writes", ())) + tuple(extra_writes)
        self.options = getattr(inner, "options", ())

    def __getattr__(self, attr):  # (evicts, decides, ...: the inner stage's)
        return getattr(self.inner, attr)

    def run(self, ctx):
        self.inner.run(ctx)
        self.harm(ctx)


@pytest.mark.parametrize("name, base, harm, message", [
    # a stream id beyond the hardware's: the direct run used 8 queues on 2-stream hardware, and
    # an id of 10**9 made the lowering build a queue for every id up to it (24 GB, then killed)
    ("st-high", "streams-rr", lambda ctx: setattr(ctx, "streams", [ctx.hw.streams + 5] * len(ctx.order)),
     r"stream 7 of op 0, but mid-npu has 2 stream\(s\)"),
    ("st-huge", "streams-rr", lambda ctx: setattr(ctx, "streams", [10 ** 9] * len(ctx.order)),
     "stream 1000000000 of op 0"),
    # a budget the stage raised: printed as an --allow-oversize run that nobody asked for
    ("cap-x4", "default", lambda ctx: setattr(ctx, "capacity", ctx.capacity * 4),
     "capacity 16,777,216 B, but the budget asked was 4,194,304 B"),
    # what a plan file cannot hold: `npusim plan` wrote "objective": NaN and refused to read it
    ("nan-objective", "so-size", lambda ctx: setattr(ctx, "objective", float("nan")),
     "objective nan, expected a finite number or none"),
    ("great", "so-size", lambda ctx: setattr(ctx, "status", "great"), "status 'great', expected one of optimal"),
])
def test_a_stage_that_changes_the_hardware_or_budget_is_a_planner_bug(monkeypatch, name, base, harm, message):
    """What ``--plan`` files are held to (the budget, the scratchpad's alignment, the hardware's
    streams), a plan made here is too, as a planner bug (exit 3): found by an API audit with
    plugins that did each of these."""
    from npusim.workflow import load_graph, load_hw, plan_graph

    registry = default_registry()
    extra = {"cap-x4": ("capacity",), "nan-objective": ("objective",), "great": ("status",)}.get(name, ())
    monkeypatch.setitem(registry._planners, name, _Misbehaving(name, registry.get(base), harm, extra))
    pipeline = {"streams-rr": f"default+{name}+so-size", "so-size": f"default+{name}"}.get(base, f"{name}+so-size")
    with pytest.raises(InternalError, match=message):
        plan_graph(load_graph("squeezenet1_0"), load_hw("mid-npu"), pipeline)


def test_transfer_sizes_are_validated(monkeypatch):
    """A stage that multiplied its transfers' sizes by ten set the report's off-chip bytes and
    DRAM energy at will (zero or negative too) while the validator passed the plan: a transfer
    moves its tensor's bytes, as a plan file's reader sets them."""
    from npusim.plan.validate import validate
    from npusim.workflow import load_graph, load_hw, plan_graph

    def inflate(ctx):
        ctx.transfers = [dataclasses.replace(tr, size=tr.size * 10) for tr in ctx.transfers]

    registry = default_registry()
    monkeypatch.setitem(registry._planners, "inflate", _Misbehaving("inflate", registry.get("so-size"), inflate))
    graph, hw = load_graph("squeezenet1_0"), load_hw("mid-npu")
    with pytest.raises(InternalError, match=r"\[size\] load of '.*' at step \d+: size \d+ B, expected its tensor's"):
        plan_graph(graph, hw, "default+inflate")
    plan = plan_graph(graph, hw, "default+so-size")
    assert validate(plan) == []
    bad = dataclasses.replace(plan, transfers=[dataclasses.replace(tr, size=-tr.size) for tr in plan.transfers])
    assert {v.kind for v in validate(bad)} == {"size"}


@pytest.mark.parametrize("name, description, message", [
    ("r+plus", "x", "planner name 'r\\+plus': expected a non-empty name without '\\+'"),
    ("", "x", "planner name '': expected a non-empty name"),
    ("fine", None, "planner 'fine' has no description"),
])
def test_registering_a_planner_that_could_not_be_used_is_refused(name, description, message):
    """A name with '+' registered and could never be named in a pipeline; one without a
    description ran but made `npusim list --planner NAME` an internal error (an API audit)."""
    planner = type("P", (), {"name": name, "stage": "schedule", "run": lambda self, ctx: None})()
    if description is not None:
        planner.description = description
    with pytest.raises(RegistryError, match=message):
        Registry().add(planner)


def test_the_most_streams_lower_and_more_are_refused():
    """A command's queue is a one-byte code: a plan file with ops on 130 streams (of a
    200-stream config) was an internal error, an int8 overflow, in lowering (an API audit).
    The hardware takes at most 124 streams, and a plan that uses all of them lowers."""
    from npusim.errors import ConfigError
    from npusim.plan.lower import lower
    from npusim.workflow import load_graph, load_hw, plan_graph

    with pytest.raises(ConfigError, match="streams = 125: expected at most 124"):
        load_hw("mid-npu", {"streams": 125})
    hw = load_hw("mid-npu", {"streams": 124, "scratchpad.size": "64MiB"})
    graph = load_graph("googlenet")
    plan = plan_graph(graph, hw, "default+streams-rr+so-size")
    every = dataclasses.replace(plan, streams=[i % 124 for i in range(len(plan.order))])
    program = lower(every, hw)
    queues = program.commands.column("queue")
    assert len(program.commands.queue_names) == 2 + 124 and queues.min() >= 0 and queues.max() == 125  # (load, store)


@pytest.mark.parametrize("harm, message", [
    (lambda ctx: setattr(ctx, "order", list(reversed(ctx.order))), "order is not topological"),
    (lambda ctx: setattr(ctx, "order", [*ctx.order[:-1], len(ctx.order) + 5]), "not a permutation"),
    (lambda ctx: setattr(ctx, "order", [*ctx.order[:-1], "x"]), "it holds 'x', not an op index"),
])
def test_a_stage_failing_on_an_invalid_order_names_the_stage_that_set_it(monkeypatch, harm, message):
    """The arena failed on a plugin's invalid order with "must be loaded at step 0 but DRAM
    has no copy", an IndexError or a TypeError, naming neither the planner nor the problem
    (an API audit): the stage that set the order is named, with what is wrong with it."""
    from npusim.workflow import load_graph, load_hw, plan_graph

    registry = default_registry()
    monkeypatch.setitem(registry._planners, "bad-order", _Misbehaving("bad-order", registry.get("default"), harm))
    with pytest.raises(InternalError, match=f"planner 'bad-order' \\(schedule stage\\) set an invalid order: .*{message}"):
        plan_graph(load_graph("squeezenet1_0"), load_hw("mid-npu"), "bad-order+arena+belady")


@pytest.mark.parametrize("error", [FileNotFoundError(2, "No such file or directory"), SystemExit(7), KeyError(64)])
def test_a_planners_own_failure_is_an_internal_error_naming_it(monkeypatch, error):
    """A planner's open('/nonexistent/...') exited 2 as if the user's path were bad, and its
    SystemExit(7) ended the run with no message (an API audit): both are its bug (exit 3)."""
    from npusim.workflow import load_graph, load_hw, plan_graph

    def fail(ctx):
        raise error

    registry = default_registry()
    monkeypatch.setitem(registry._planners, "broken", _Misbehaving("broken", registry.get("so-size"), fail))
    with pytest.raises(InternalError, match=f"planner 'broken' \\(alloc stage\\) failed: {type(error).__name__}"):
        plan_graph(load_graph("squeezenet1_0"), load_hw("mid-npu"), "default+broken")
