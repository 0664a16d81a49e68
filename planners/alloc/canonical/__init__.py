"""Exact offsets for lifetime problems by canonical branch and bound (after MiniMalloc):
``search`` (the search and its pruning rules), ``instance`` (a problem as the search reads it),
``kernel`` (its Numba kernels) and ``reference`` (the same search in plain Python, their oracle)."""
