"""make_training_graph on a tiny MLP and a tiny conv net, against tensor lists written by hand."""

import pytest

from npusim.errors import TraceError
from npusim.graph.analysis import default_order, lifetimes
from npusim.graph.model import build_graph
from npusim.graph.training import make_training_graph
from npusim.hw.config import Hardware
from npusim.plan.validate import validate
from npusim.workflow import load_graph, run


def t(name, shape, kind="activation"):
    return dict(name=name, shape=shape, dtype="int8", itemsize=1, kind=kind)


def tiny_mlp():
    tensors = [t("x", [2, 4], "input"), t("W1", [4, 8], "weight"), t("h", [2, 8]), t("b1", [8], "weight"),
               t("h1", [2, 8]), t("a", [2, 8]), t("W2", [8, 3], "weight"), t("y", [2, 3], "output")]
    ops = [dict(name="mm1", kind="MatMul", inputs=["x", "W1"], outputs=["h"], gemm=dict(m=2, n=8, k=4), macs=64),
           dict(name="add1", kind="Add", inputs=["h", "b1"], outputs=["h1"], vector_ops=16),
           dict(name="relu", kind="Relu", inputs=["h1"], outputs=["a"], vector_ops=16),
           dict(name="mm2", kind="MatMul", inputs=["a", "W2"], outputs=["y"], gemm=dict(m=2, n=3, k=8), macs=48)]
    return build_graph("mlp", tensors, ops)


def tiny_convnet():
    tensors = [t("x", [1, 3, 8, 8], "input"), t("w", [4, 3, 3, 3], "weight"), t("cb", [4], "weight"),
               t("c", [1, 4, 8, 8]), t("r", [1, 4, 8, 8]), t("p", [1, 4, 1, 1]), t("f", [1, 4]),
               t("W", [4, 2], "weight"), t("B2", [2], "weight"), t("y", [1, 2], "output")]
    ops = [dict(name="conv", kind="Conv", inputs=["x", "w", "cb"], outputs=["c"], gemm=dict(m=64, n=4, k=27)),
           dict(name="relu", kind="Relu", inputs=["c"], outputs=["r"], vector_ops=256),
           dict(name="gap", kind="GlobalAveragePool", inputs=["r"], outputs=["p"], vector_ops=256),
           dict(name="flatten", kind="Flatten", inputs=["p"], outputs=["f"]),
           dict(name="fc", kind="Gemm", inputs=["f", "W", "B2"], outputs=["y"], gemm=dict(m=1, n=2, k=4))]
    return build_graph("convnet", tensors, ops)


def tensor_list(graph):
    return sorted((x.name, x.shape, x.kind) for x in graph.tensors)


def op_list(graph):
    names = [x.name for x in graph.tensors]
    return [(o.name, [names[i] for i in o.inputs], [names[i] for i in o.outputs]) for o in graph.ops]


def test_mlp_tensors_and_ops_by_hand():
    g = make_training_graph(tiny_mlp())
    assert tensor_list(g) == sorted([
        ("x", (2, 4), "input"), ("W1", (4, 8), "weight"), ("h", (2, 8), "activation"),
        ("b1", (8,), "weight"), ("h1", (2, 8), "activation"), ("a", (2, 8), "activation"),
        ("W2", (8, 3), "weight"), ("y", (2, 3), "activation"),
        ("labels/y", (2, 3), "input"), ("loss/y", (1,), "output"), ("grad/y", (2, 3), "activation"),
        ("grad/a@mm2", (2, 8), "activation"), ("grad/W2@mm2", (8, 3), "activation"),
        ("grad/h1@relu", (2, 8), "activation"), ("grad/b1@add1", (8,), "activation"),
        ("grad/W1@mm1", (4, 8), "activation"),
        ("W1/updated", (4, 8), "output"), ("b1/updated", (8,), "output"), ("W2/updated", (8, 3), "output"),
    ])
    assert op_list(g) == [
        ("mm1", ["x", "W1"], ["h"]), ("add1", ["h", "b1"], ["h1"]), ("relu", ["h1"], ["a"]),
        ("mm2", ["a", "W2"], ["y"]),
        ("loss/y", ["y", "labels/y"], ["loss/y", "grad/y"]),
        ("mm2/grad/a", ["grad/y", "W2"], ["grad/a@mm2"]),       # input gradient needs the weight
        ("mm2/grad/W2", ["grad/y", "a"], ["grad/W2@mm2"]),      # weight gradient needs the saved activation
        ("relu/grad", ["grad/a@mm2", "a"], ["grad/h1@relu"]),  # Relu's derivative reads its output
        ("add1/grad", ["grad/h1@relu"], ["grad/b1@add1"]),     # h gets grad/h1@relu itself
        ("mm1/grad/W1", ["grad/h1@relu", "x"], ["grad/W1@mm1"]),
        ("W1/sgd", ["W1", "grad/W1@mm1"], ["W1/updated"]),
        ("b1/sgd", ["b1", "grad/b1@add1"], ["b1/updated"]),
        ("W2/sgd", ["W2", "grad/W2@mm2"], ["W2/updated"]),
    ]
    mm1w = g.op("mm1/grad/W1")
    assert (mm1w.gemm.m, mm1w.gemm.n, mm1w.gemm.k) == (4, 8, 2) and mm1w.macs == 64


def test_convnet_tensors_by_hand():
    g = make_training_graph(tiny_convnet())
    grads = sorted((x.name, x.shape) for x in g.tensors if x.name.startswith("grad/"))
    assert grads == sorted([
        ("grad/y", (1, 2)), ("grad/f@fc", (1, 4)), ("grad/W@fc", (4, 2)), ("grad/B2@fc", (2,)),
        ("grad/p@flatten", (1, 4, 1, 1)), ("grad/r@gap", (1, 4, 8, 8)), ("grad/c@relu", (1, 4, 8, 8)),
        ("grad/w@conv", (4, 3, 3, 3)), ("grad/cb@conv", (4,)),
    ])
    updated = sorted(x.name for x in g.tensors if x.kind == "output")
    assert updated == ["B2/updated", "W/updated", "cb/updated", "loss/y", "w/updated"]
    ops = dict((name, (ins, outs)) for name, ins, outs in op_list(g))
    assert ops["conv/grad/w"] == (["grad/c@relu", "x"], ["grad/w@conv"])
    assert ops["conv/grad/cb"] == (["grad/c@relu"], ["grad/cb@conv"])
    assert ops["relu/grad"] == (["grad/r@gap", "r"], ["grad/c@relu"])
    # no input gradient for the graph input x
    assert not any(x.name == "grad/x" or x.name.startswith("grad/x@") for x in g.tensors)


def test_saved_activation_lives_into_the_backward_pass():
    g = make_training_graph(tiny_mlp())
    life = lifetimes(g, default_order(g))
    a = g.tensor("a").id
    assert life.last[a] == [o.name for o in g.ops].index("relu/grad")


def test_residual_gradients_are_summed():
    tensors = [t("x", [4], "input"), t("w", [4, 4], "weight"), t("u", [4]), t("v", [4]), t("y", [4], "output")]
    ops = [dict(name="mm", kind="MatMul", inputs=["x", "w"], outputs=["u"], gemm=dict(m=1, n=4, k=4)),
           dict(name="relu", kind="Relu", inputs=["u"], outputs=["v"]),
           dict(name="add", kind="Add", inputs=["u", "v"], outputs=["y"])]
    g = make_training_graph(build_graph("res", tensors, ops))
    total = g.op("grad/u/sum")
    assert sorted(g.tensors[i].name for i in total.inputs) == ["grad/u@relu", "grad/y"]


def test_nothing_to_train_is_an_error():
    tensors = [t("x", [4], "input"), t("y", [4], "output")]
    g = build_graph("plain", tensors, [dict(name="r", kind="Relu", inputs=["x"], outputs=["y"])])
    with pytest.raises(TraceError, match="nothing to train"):
        make_training_graph(g)


@pytest.mark.parametrize("name", ["resnet18", "bert_tiny"])
def test_training_graphs_of_traces_plan_and_simulate(name):
    g = make_training_graph(load_graph(name))
    assert g.n_ops > 2 * load_graph(name).n_ops
    hw = Hardware()
    plan, report = run(g, hw, "default+arena+belady", budget=64 << 20)
    assert validate(plan, g) == []
    assert report.offchip_bytes["writeback"] == sum(x.size for x in g.tensors if x.kind == "output")
