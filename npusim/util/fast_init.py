"""A faster constructor for frozen, slotted dataclasses made by the 100,000.

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__``
(its own ``__setattr__`` refuses), about twice as slow as filling the slots through their
descriptors. Tiled graphs make 100,000s of tensors and ops, and the arena as many residencies
and transfers: ``positional_constructor(cls)`` gives a function that takes every field, in
declaration order, and returns the same object as ``cls(...)``.
"""

from __future__ import annotations


def positional_constructor(cls):
    """``cls(*values)`` for a frozen, slotted dataclass ``cls`` without ``__post_init__``,
    every field given in declaration order (module docstring)."""
    if "__post_init__" in cls.__dict__ or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} must be a slotted dataclass without __post_init__")
    setters = tuple(cls.__dict__[name].__set__ for name in cls.__dataclass_fields__)
    new = object.__new__

    def make(*values):
        obj = new(cls)
        for setter, value in zip(setters, values):
            setter(obj, value)
        return obj

    return make
