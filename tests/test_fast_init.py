"""npusim.util.fast_init: the slot-filling constructors build what the dataclass's own does."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from npusim.graph.model import Gemm, Op, Tensor, View
from npusim.plan.model import Residency, Transfer
from npusim.plan.lower import Access, Command, DramView
from npusim.plan.transfer_cost import TransferCost
from npusim.util.fast_init import positional_constructor, twin_constructor


@pytest.mark.parametrize("cls, values", [
    (Tensor, (3, "t@r0", (1, 8), "int8", 1, "activation", None, (4, 5), View("t", 8, (1, 8), (16, 1)), (2,))),
    (Op, (4, "op#0", "MatMul", (1, 2), (3,), {"tile_of": "op"}, 64, 8, Gemm(1, 8, 8))),
    (View, ("t", 8, (1, 8), (16, 1))),
    (Residency, (0, 3, 128, 7, 64)),
    (Transfer, (2, "load", 7, "compulsory", 64)),
    (Command, (5, "dma.load", "load", 2, None, 7, "spill", 64, DramView(4096, (2, 8), (16, 1), 1),
               TransferCost(16, 2, 2, 1, 64), (), (Access(3, 7, 128, 64),), (1, 4), (4,))),
])
@pytest.mark.parametrize("constructor", [positional_constructor, twin_constructor])
def test_positional_constructor_builds_what_the_class_builds(cls, values, constructor):
    made, expected = constructor(cls)(*values), cls(*values)
    assert type(made) is cls and made == expected and repr(made) == repr(expected)
    assert hash(made) == hash(expected)
    with pytest.raises(AttributeError):  # still frozen
        setattr(made, next(iter(cls.__dataclass_fields__)), 0)


def test_positional_constructor_refuses_classes_it_cannot_fill():
    @dataclass(frozen=True)
    class Plain:
        x: int

    @dataclass(frozen=True, slots=True)
    class Checked:
        x: int

        def __post_init__(self):
            assert self.x > 0

    for cls in (Plain, Checked):
        for constructor in (positional_constructor, twin_constructor):
            with pytest.raises(TypeError):
                constructor(cls)


def test_twin_constructor_refuses_a_class_its_twin_cannot_become():
    class Odd:  # a slotted class whose layout no twin of its __slots__ can have (a __dict__ from its base)
        pass

    @dataclass(frozen=True, slots=True)
    class WithDict(Odd):
        x: int

    with pytest.raises(TypeError):
        twin_constructor(WithDict)


def test_twin_constructor_builds_a_row_whose_base_is_an_abstract_mapping():
    """BreakdownRow is a Mapping (an ABC with no slots): its twin has that base too, with the
    row's own methods for the abstract ones, and becomes a row equal to the class's."""
    from npusim.sim.critical_path import BreakdownRow

    values = ("op#0", "op", "MatMul", 3, "stream0", "core0", 10, 25.5, 15.5, "array", 0.0, "", 64, 16, 512)
    made, expected = twin_constructor(BreakdownRow)(*values), BreakdownRow(*values)
    assert type(made) is BreakdownRow and made == expected and dict(made) == dict(expected)
    assert repr(made) == repr(expected) and made["macs"] == 512 and len(made) == 15
    with pytest.raises(AttributeError):  # still frozen
        made.op = "other"
