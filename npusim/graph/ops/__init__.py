"""What each operator kind is and does, one table each: ``kinds`` (the families of kinds, the
one place a module asks "is this a GEMM?"), ``rules`` (what an op of a kind must satisfy in a
trace), ``shapes`` (the shape relations and attribute types the rules use) and ``costs`` (its
work from its shapes). Which part of an input one output box reads is ``npusim.graph.regions``."""
