"""A faster constructor for slotted dataclasses made by the 100,000.

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__``
(its own ``__setattr__`` refuses), about twice as slow as filling the slots through their
descriptors. Tiled graphs make 100,000s of tensors, ops and views, and the arena as many
residencies and transfers, the simulator as many command timings and timeline entries (whose
default factories would make dicts only for them to be replaced): ``positional_constructor(cls)``
gives a function that takes every field, in declaration order, and returns the same object as
``cls(...)``. Like ``dataclasses`` itself, it writes that function's source (one descriptor
call per field, no loop) and compiles it. ``twin_constructor(cls)`` returns the same object
again 2-3x faster (plain slot stores on a twin class of the same layout, then the class
swapped), for the classes made by the million: lowering's commands.
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


def twin_constructor(cls):
    """``cls(*values)`` as ``positional_constructor(cls)`` makes it, about twice as fast again,
    for the classes made by the million (lowering's commands).

    The object is made as an instance of a mutable twin of ``cls`` (the same slots, in the same
    order, so the same memory layout): its fields are set by plain attribute stores, which the
    interpreter specialises to a direct slot write, where a descriptor's ``__set__`` is a
    generic call each. Then the object is given its real class (``obj.__class__ = cls``, which
    Python allows between classes of one layout): it is a ``cls``, frozen, equal and hashing as
    ``cls(*values)`` would."""
    if "__post_init__" in cls.__dict__ or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} must be a slotted dataclass without __post_init__")
    fields = list(cls.__dataclass_fields__)
    # Bases that add no slots (an ABC such as Mapping) still count for Python's layout test:
    # the twin then has them too, with cls's own methods for their abstract ones (an abstract
    # class is not instantiated, even by object.__new__).
    namespace, bases = {"__slots__": cls.__slots__}, ()
    if all(base.__dict__.get("__slots__") == () for base in cls.__mro__[1:-1]):
        bases = cls.__bases__
        for base in bases:
            namespace.update({name: getattr(cls, name) for name in getattr(base, "__abstractmethods__", ())})
    twin = type(f"_{cls.__name__}Twin", bases, namespace)
    try:  # a class of another layout (a __dict__ or __weakref__ of its own) fails here, not at the first call
        object.__new__(twin).__class__ = cls
    except TypeError:
        raise TypeError(f"{cls.__name__}: its instances' layout is not that of its __slots__ alone") from None
    namespace = {"new": object.__new__, "twin": twin, "cls": cls}
    args = ", ".join(f"v{i}" for i in range(len(fields)))
    body = "".join(f"    obj.{name} = v{i}\n" for i, name in enumerate(fields))
    exec(f"def make({args}):\n    obj = new(twin)\n{body}    obj.__class__ = cls\n    return obj\n", namespace)
    make = namespace["make"]
    make.__doc__ = f"{cls.__name__}({', '.join(fields)}), every field given (npusim.util.fast_init.twin_constructor)"
    return make
