"""The validator's fast paths against the validator as it was (``reference_validate``, kept
verbatim): on plans broken at random (ops swapped or repeated in the order; residencies moved
onto each other, misaligned, shrunk, cut short; transfers dropped, doubled, moved or given
another cause) and on tiled graphs
whose tile views are shifted or restrided, both must report the same violations, in the same
order, with the same messages."""

import dataclasses
import random

import pytest

import reference_validate as reference
from npusim.graph.model import build_graph
from npusim.graph.tiling import expand
from npusim.plan.validate import check_tiling, validate
from npusim.testing import random_dags
from npusim.testing.seeded_races import seeded_cases
from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget

EDGE = load_hw("edge-npu")


@pytest.fixture(scope="module")
def plans():
    """A tiled single-stream network that spills, a random DAG at a tight budget, and a
    multi-stream plan."""
    squeezenet = load_graph("squeezenet1_0")
    dag = random_dags.GENERATORS["random_dag"](5, 30)
    multi = next(iter(seeded_cases(1, random.Random(4), sizes=(12, 18))))
    return [plan_graph(squeezenet, EDGE, budget=resolve_budget("64KiB", squeezenet, EDGE)),
            plan_graph(dag, EDGE, budget=resolve_budget("MR", dag, EDGE)), multi[2]]


def break_residencies(plan, rng):
    # Now and then far past int64 (one stream only: the multi-stream check's kernel takes int64)
    huge = (1 << 64, 1 << 70) if len(set(plan.streams)) == 1 else ()
    rs = list(plan.residencies)
    i, j = rng.randrange(len(rs)), rng.randrange(len(rs))
    r = rs[i]
    how = rng.choice(["onto", "shift", "steps", "shrink", "drop", "unknown", "duplicate"])
    if how == "onto":
        rs[i] = dataclasses.replace(r, offset=rs[j].offset)
    elif how == "shift":
        rs[i] = dataclasses.replace(r, offset=r.offset + rng.choice((-4096, -64, -1, 1, 32, 64, 1 << 20) + huge))
    elif how == "steps":
        far = rng.choice((0, 0, 0) + huge)
        rs[i] = dataclasses.replace(r, first=r.first + far + rng.randint(-3, 3), last=r.last + far + rng.randint(-3, 3))
    elif how == "shrink":
        rs[i] = dataclasses.replace(r, size=r.size - rng.choice((1, 64, r.size)))
    elif how == "drop":
        del rs[i]
    elif how == "unknown":
        rs[i] = dataclasses.replace(r, tensor=rng.choice((-1, 1 << 30)))
    else:
        rs.insert(j, r)
    return dataclasses.replace(plan, residencies=tuple(rs))


def break_transfers(plan, rng):
    trs = list(plan.transfers)
    if not trs:
        return plan
    k = rng.randrange(len(trs))
    tr = trs[k]
    how = rng.choice(["drop", "double", "step", "cause", "kind"])
    if how == "drop":
        del trs[k]
    elif how == "double":
        trs.insert(rng.randrange(len(trs)), dataclasses.replace(tr, step=tr.step + rng.choice((0, 0, 1, -1))))
    elif how == "step":
        trs[k] = dataclasses.replace(tr, step=tr.step + rng.choice((-5, -1, 1, 5, 1 << 20)))
    elif how == "cause":
        trs[k] = dataclasses.replace(tr, cause=rng.choice(("compulsory", "retrieve", "spill", "writeback", "bogus")))
    else:
        trs[k] = dataclasses.replace(tr, kind="copy")
    return dataclasses.replace(plan, transfers=tuple(trs))


def break_order(plan, rng):
    order = list(plan.order)
    i, j = rng.randrange(len(order)), rng.randrange(len(order))
    if rng.random() < 0.8:
        order[i], order[j] = order[j], order[i]  # often no longer topological; else steps move
    else:
        order[i] = order[j]  # an op twice, another missing
    return dataclasses.replace(plan, order=tuple(order))


def test_broken_plans_get_the_violations_the_reference_reports(plans):
    rng = random.Random(5)
    kinds, broken = set(), 0
    for plan in plans:
        assert validate(plan) == reference.validate(plan) == []
        for _ in range(25):
            mutant = plan
            for _ in range(rng.randint(1, 4)):
                draw = rng.random()
                mutant = (break_order if draw < 0.08 else break_residencies if draw < 0.6 else break_transfers)(mutant, rng)
            found = validate(mutant)
            assert [(v.kind, v.message) for v in found] == [(v.kind, v.message) for v in reference.validate(mutant)]
            broken += bool(found)
            kinds |= {v.kind for v in found}
    assert broken >= 60  # most mutants break a rule: the lists compared are not empty
    assert {"order", "overlap", "alignment", "capacity", "size", "not_resident", "cause", "duplicate_transfer"} <= kinds


def rebuilt(tiled, views):
    """``tiled`` with the tensors named in ``views`` given those views."""
    names = {t.id: t.name for t in tiled.tensors}
    tensors = [dict(name=t.name, shape=list(t.shape), dtype=t.dtype, itemsize=t.itemsize, kind=t.kind,
                    view=views.get(t.name, t.view), sources=[names[s] for s in t.sources]) for t in tiled.tensors]
    ops = [dict(name=o.name, kind=o.kind, inputs=[names[i] for i in o.inputs], outputs=[names[i] for i in o.outputs],
                attrs=o.attrs) for o in tiled.ops]
    return build_graph(tiled.name, tensors, ops)


def conv_graph():
    t = lambda name, shape, kind="activation": dict(name=name, shape=shape, dtype="int8", itemsize=1, kind=kind)  # noqa: E731
    tensors = [t("x", [1, 8, 20, 20], "input"), t("w", [8, 8, 3, 3], "weight"), t("y", [1, 8, 10, 10]),
               t("z", [1, 8, 10, 10], "output")]
    conv = dict(name="conv", kind="Conv", inputs=["x", "w"], outputs=["y"],
                attrs=dict(group=1, kernel_shape=[3, 3], pads=[1] * 4, strides=[2] * 2), macs=10 * 10 * 8 * 8 * 9)
    relu = dict(name="relu", kind="Relu", inputs=["y"], outputs=["z"], vector_ops=800)
    return build_graph("convnet", tensors, [conv, relu])


def test_shifted_or_restrided_tile_views_get_the_violations_the_reference_reports():
    graph = conv_graph()
    tiled = expand(graph, {"conv": {"block": [1, 4, 5, 5], "k": 0}, "relu": {"block": [1, 8, 5, 10]}})
    viewed = [t for t in tiled.tensors if t.view is not None]
    rng = random.Random(9)
    reports = 0
    for _ in range(40):
        views = {}
        for t in rng.sample(viewed, rng.randint(1, 3)):
            v = t.view
            if rng.random() < 0.5:
                views[t.name] = dataclasses.replace(v, offset=max(0, v.offset + rng.choice((-11, -1, 1, 10, 200))))
            else:  # a stride that makes the view no box of its base
                k = rng.randrange(len(v.strides))
                views[t.name] = dataclasses.replace(v, strides=tuple(s * 2 if d == k else s for d, s in enumerate(v.strides)))
        bases = {t.name: t for t in graph.tensors}
        if any(v.offset + sum((n - 1) * s for n, s in zip(v.shape, v.strides)) >= bases[v.base].elements
               for v in views.values()):
            continue  # past the end of its base: the validator does not expect that (an IndexError in both)
        broken = rebuilt(tiled, views)
        fast, slow = [], []
        check_tiling(graph, broken, lambda kind, msg: fast.append((kind, msg)))
        reference.check_tiling(graph, broken, lambda kind, msg: slow.append((kind, msg)))
        assert fast == slow
        reports += bool(fast)
    assert reports >= 20
