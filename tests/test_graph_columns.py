"""A tiled graph stored as columns (``npusim.graph.columns``) is the graph the same records
make as objects: every tensor and op equal field for field (attributes with their keys in
the tiler's order, ints as ints), and every bulk reader that reads the columns instead of the
records (``Graph.arrays``, the field lists, names, views, buffers, extents, sources, cost
signatures) gives what it gives for the object graph."""

import pickle

import numpy as np
import pytest

from npusim.dram.model import _view_extents
from npusim.graph import columns as columns_module
from npusim.graph.model import (
    buffer_names, graph_from_ids, op_attributes, op_fields, op_origins, record_name, tensor_fields,
    tensor_view_getter,
)
from npusim.graph.tiling import expand
from npusim.hw.costs import cost_classes
from npusim.workflow import load_graph, load_hw, plan_graph, resolve_budget

TENSOR_FIELDS = ("id", "name", "shape", "dtype", "itemsize", "kind", "producer", "consumers", "view", "sources")
OP_FIELDS = ("id", "name", "kind", "inputs", "outputs", "attrs", "macs", "vector_ops", "gemm")


def _tiled(trace, budget):
    hw = load_hw("edge-npu")
    graph = load_graph(trace)
    return plan_graph(graph, hw, budget=resolve_budget(budget, graph, hw)).bound_graph


def _expanded_both_ways(monkeypatch, trace, budget):
    """(the tiled graph as columns, the same expansion as objects): the fused graph a plan
    tiled, expanded again with and without columns."""
    hw = load_hw("edge-npu")
    graph = load_graph(trace)
    plan = plan_graph(graph, hw, budget=resolve_budget(budget, graph, hw))
    fused, specs = plan.base_graph, dict(plan.tiling)
    as_columns = expand(fused, specs)
    with monkeypatch.context() as m:
        m.setattr(columns_module.TensorColumns, "of_records", classmethod(lambda cls, *a: None))
        as_objects = expand(fused, specs)
    return as_columns, as_objects


CASES = [("resnet18", "64KiB"),  # convolutions, halos, strided reads, epilogues
         ("llm:gpt2-small:decode=64", "64KiB"),  # partial sums in the core, runs of a shared operand
         ("squeezenet1_0", "32KiB"),  # concatenations, reads of tiles through DRAM
         ("bert_tiny", "64KiB")]


@pytest.mark.parametrize("trace, budget", CASES)
def test_columns_hold_what_the_objects_hold(monkeypatch, trace, budget):
    tiled, objects = _expanded_both_ways(monkeypatch, trace, budget)
    assert type(tiled.tensors).__name__ == "TensorColumns" and type(objects.tensors) is tuple
    assert len(tiled.tensors) == len(objects.tensors) and len(tiled.ops) == len(objects.ops)
    for mine, theirs in [(tiled.tensors, objects.tensors), (tiled.ops, objects.ops)]:
        # repr: the same types (an int, not a NumPy integer), attrs keys in the same order
        assert list(map(repr, mine)) == list(map(repr, theirs))
    assert [list(op.attrs) for op in tiled.ops] == [list(op.attrs) for op in objects.ops]
    assert tiled == objects and tiled.ops == objects.ops and tiled.tensors == objects.tensors
    for name in TENSOR_FIELDS:
        assert tensor_fields(tiled, name) == tensor_fields(objects, name), name
    for name in OP_FIELDS:
        assert op_fields(tiled, name) == op_fields(objects, name), name
    assert op_origins(tiled) == op_origins(objects)
    assert buffer_names(tiled) == buffer_names(objects)
    views, object_views = tensor_view_getter(tiled), tensor_view_getter(objects)
    attributes, object_attributes = op_attributes(tiled), op_attributes(objects)
    assert all(views(t) == object_views(t) for t in range(len(tiled.tensors)))
    assert all(attributes(o) == object_attributes(o) for o in range(len(tiled.ops)))
    assert all(record_name(tiled.tensors, t) == t_obj.name for t, t_obj in enumerate(objects.tensors))
    assert _view_extents(tiled) == _view_extents(objects)
    assert tiled.dram_sources == objects.dram_sources
    assert dict(tiled.tensor_by_name) == objects.tensor_by_name and dict(tiled.op_by_name) == objects.op_by_name
    assert cost_classes(tiled) == cost_classes(objects)
    mine, theirs = tiled.arrays, objects.arrays
    for field in type(mine).__dataclass_fields__:
        assert np.array_equal(getattr(mine, field), getattr(theirs, field)), field
    some = np.arange(0, len(tiled.tensors), 7)
    counts, sources = mine.sources_of(some)
    assert counts.tolist() == [len(objects.tensors[t].sources) for t in some.tolist()]
    assert sources.tolist() == [s for t in some.tolist() for s in objects.tensors[t].sources]


def test_a_pickled_graph_of_columns_comes_back_equal():
    tiled = _tiled("resnet18", "64KiB")
    back = pickle.loads(pickle.dumps(tiled))
    assert back == tiled and type(back.ops) is type(tiled.ops)
    assert back.ops[5] == tiled.ops[5] and back.tensors[-1] == tiled.tensors[-1]


def test_indexing_a_graph_of_columns_works_as_a_tuple_does():
    tiled = _tiled("resnet18", "64KiB")
    ops, tensors = tiled.ops, tiled.tensors
    assert ops[-1] == ops[len(ops) - 1] and tensors[-1].id == len(tensors) - 1
    assert ops[2:5] == [ops[2], ops[3], ops[4]]
    with pytest.raises(IndexError):
        ops[len(ops)]
    assert "x" not in tiled.tensor_by_name and [] not in tiled.tensor_by_name


def _records():
    tensors = [("x", (4, 4), "int8", 1, "input", None, ()), ("y", (4, 4), "int8", 1, "output", None, ())]
    return tensors


@pytest.mark.parametrize("attrs, kept_as_given", [
    ({"tile_of": "op", "box": ((0, 4), (0, 4)), "k": None}, False),  # the tiler's: columns
    ({"tile_of": "op", "box": ((0, 4), (0, 4)), "k": (0, 2), "acc": "core", "k_last": True,
      "epilogue": ["Relu"], "runs": {"a": "first", "b": "last"}}, False),
    ({"tile_of": "op", "box": ((0, 4), (0, 4)), "k": None, "note": 1}, True),  # a key the tiler never writes
    ({"box": ((0, 4), (0, 4)), "tile_of": "op", "k": None}, True),  # another order
    ({"tile_of": "op", "box": [[0, 4], [0, 4]], "k": None}, True),  # lists, not tuples
    ({"tile_of": "op", "box": ((0, 4), (0, 4)), "k": None, "runs": {"a": "somewhere"}}, True),
    ({"kernel": [3, 3]}, True),  # any op's own
])
def test_attributes_come_back_equal_whatever_they_hold(attrs, kept_as_given):
    ops = [("op#0", "Relu", [0], [1], attrs, 16, 16, None)]
    graph = graph_from_ids("g", _records(), ops)
    assert type(graph.ops).__name__ == "OpColumns"
    assert graph.ops[0].attrs == attrs and list(graph.ops[0].attrs) == list(attrs)
    assert (graph.ops.tile_of[0] < 0) == kept_as_given


def test_a_record_no_column_holds_keeps_the_graph_as_objects():
    ops = [("op", "Relu", [0], [1], {}, 2 ** 64, 16, None)]  # MACs past int64
    graph = graph_from_ids("g", _records(), ops)
    assert type(graph.ops) is tuple and graph.ops[0].macs == 2 ** 64


def test_an_op_after_what_it_reads_is_found_by_the_column_order_check():
    """The order test by array (``_order_holds_by_columns``) sends a graph whose op reads what a
    later op makes to the cycle search, which names the cycle."""
    from npusim.errors import TraceError

    tensors = [("x", (4,), "int8", 1, "input", None, ()), ("a", (4,), "int8", 1, "activation", None, ()),
               ("b", (4,), "int8", 1, "output", None, ())]
    in_order = [("p", "Relu", [0], [1], {}, 0, 4, None), ("q", "Relu", [1], [2], {}, 0, 4, None)]
    assert graph_from_ids("g", tensors, in_order).n_ops == 2
    swapped = [("q", "Relu", [1], [2], {}, 0, 4, None), ("p", "Relu", [0], [1], {}, 0, 4, None)]
    graph = graph_from_ids("g", tensors, swapped)  # out of order but acyclic: allowed
    assert [op.name for op in graph.ops] == ["q", "p"]
    cycle = [("p", "Add", [0, 2], [1], {}, 0, 4, None), ("q", "Relu", [1], [2], {}, 0, 4, None)]
    tensors[2] = ("b", (4,), "int8", 1, "activation", None, ())
    with pytest.raises(TraceError, match="cycle"):
        graph_from_ids("g", tensors, cycle)


@pytest.mark.parametrize("first_read", [0, 1])
def test_the_column_order_check_finds_a_read_before_its_producer(first_read):
    """``_order_holds_by_columns`` is False exactly when some op reads a tensor (or a view of
    one) before its producer runs, wherever that tensor stands among the tensors."""
    from npusim.graph.model import _order_holds_by_columns

    a = ("a", (4,), "int8", 1, "activation", None, ())
    x = ("x", (4,), "int8", 1, "input", None, ())
    b = ("b", (4,), "int8", 1, "output", None, ())
    tensors = [a, x, b] if first_read == 0 else [x, a, b]
    ia, ix, ib = (0, 1, 2) if first_read == 0 else (1, 0, 2)
    p = ("p", "Relu", [ix], [ia], {}, 0, 4, None)
    q = ("q", "Relu", [ia], [ib], {}, 0, 4, None)
    assert _order_holds_by_columns(graph_from_ids("g", tensors, [p, q]).tensors)
    assert not _order_holds_by_columns(graph_from_ids("g", tensors, [q, p]).tensors)
    # through a read view's source: r reads view v of a, stored by p; r before p is out of order
    v = ("v", (4,), "int8", 1, "activation", None, (ia,))
    r = ("r", "Relu", [3], [ib], {}, 0, 4, None)
    p_only = ("p", "Relu", [ix], [ia], {}, 0, 4, None)
    assert _order_holds_by_columns(graph_from_ids("g", tensors + [v], [p_only, r]).tensors)
    assert not _order_holds_by_columns(graph_from_ids("g", tensors + [v], [r, p_only]).tensors)


def test_tile_attrs_give_the_dict_the_tiler_wrote_before():
    """``TileAttrs`` (the tiler's compact attributes) read back, through columns and through the
    object fallback, as the dict a tile had: keys in order, runs set by operand."""
    from npusim.graph.columns import TileAttrs

    attrs = TileAttrs(("op", ["Relu"]), ((0, 4), (0, 4)), (0, 2), 2)
    attrs.mark_run("b", "middle")
    attrs.mark_run("a", "first")
    attrs.mark_run("b", "last")  # (a later mark replaces the earlier)
    expected = {"tile_of": "op", "box": ((0, 4), (0, 4)), "k": (0, 2), "acc": "core", "k_last": True,
                "epilogue": ["Relu"], "runs": {"a": "first", "b": "last"}}
    assert attrs.as_dict() == expected
    ops = [("op#0", "Relu", [0], [1], attrs, 16, 16, None)]
    assert graph_from_ids("g", _records(), ops).ops[0].attrs == expected
    big = [("op#0", "Relu", [0], [1], attrs, 2 ** 64, 16, None)]  # kept as objects: the dict all the same
    graph = graph_from_ids("g", _records(), big)
    assert type(graph.ops) is tuple and graph.ops[0].attrs == expected
    assert list(graph.ops[0].attrs) == list(expected)


def _built(records):
    from npusim.graph.columns import OpColumnsBuilder

    builder = OpColumnsBuilder()
    for record in records:
        builder.append(record)
    return builder


@pytest.mark.parametrize("ops", [
    [("op", "Relu", [0], [1], {}, 16, 16, None)],
    [("op", "Relu", [0, 0], [1], {"k": 1}, 16, 16, None)],  # an input named twice is read once
    [("op", "Relu", [0], [1], {}, 2 ** 64, 16, None)],  # past int64: the builder keeps records
])
def test_a_builder_makes_the_graph_its_records_make(ops):
    by_records, by_builder = graph_from_ids("g", _records(), ops), graph_from_ids("g", _records(), _built(ops))
    assert by_builder == by_records and type(by_builder.ops) is type(by_records.ops)
    assert list(map(repr, by_builder.tensors)) == list(map(repr, by_records.tensors))


@pytest.mark.parametrize("ops, message", [
    ([("op", "Relu", [0], [5], {}, 0, 0, None)], "names tensor 5, which does not exist"),
    ([("op", "Relu", [7], [1], {}, 0, 0, None)], "names tensor 7, which does not exist"),
    ([("op", "Relu", [0], [], {}, 0, 0, None)], "has no outputs"),
    ([("p", "Relu", [0], [1], {}, 0, 0, None), ("q", "Relu", [0], [1], {}, 0, 0, None)],
     "'y' is produced by both 'p' and 'q'"),
])
def test_a_builder_is_refused_as_its_records_are(ops, message):
    from npusim.errors import TraceError

    for given in (ops, _built(ops)):
        with pytest.raises(TraceError, match=message):
            graph_from_ids("g", _records(), given)
