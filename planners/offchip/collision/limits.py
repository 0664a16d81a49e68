"""The collision search's limits, apart from its Numba kernels so that a planner module can
name them without loading Numba (``npusim.util.lazy_import``)."""

LATTICE_LEVELS = 8  # at most this many strided levels per pattern (more: the chunk sweep)
SEARCH_NODES = 2048  # search nodes before falling back to the chunk sweep (measured: bench_taa)
