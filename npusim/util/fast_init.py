"""A faster constructor for slotted dataclasses made by the 100,000.

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__``
(its own ``__setattr__`` refuses), about twice as slow as filling the slots through their
descriptors. Tiled graphs make 100,000s of tensors, ops and views, and the arena as many
residencies and transfers, the simulator as many command timings and timeline entries (whose
default factories would make dicts only for them to be replaced): ``positional_constructor(cls)``
gives a function that takes every field, in declaration order, and returns the same object as
``cls(...)``. Like ``dataclasses`` itself, it writes that function's source (one descriptor
call per field, no loop) and compiles it.
"""

from __future__ import annotations


def positional_constructor(cls):
    """``cls(*values)`` for a slotted dataclass ``cls`` (frozen or not) without ``__post_init__``,
    every field given in declaration order (module docstring)."""
    if "__post_init__" in cls.__dict__ or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} must be a slotted dataclass without __post_init__")
    fields = list(cls.__dataclass_fields__)
    namespace = {"new": object.__new__, "cls": cls}
    namespace.update({f"set_{i}": cls.__dict__[name].__set__ for i, name in enumerate(fields)})
    args = ", ".join(f"v{i}" for i in range(len(fields)))
    body = "".join(f"    set_{i}(obj, v{i})\n" for i in range(len(fields)))
    exec(f"def make({args}):\n    obj = new(cls)\n{body}    return obj\n", namespace)
    make = namespace["make"]
    make.__doc__ = f"{cls.__name__}({', '.join(fields)}), every field given (npusim.util.fast_init)"
    return make
