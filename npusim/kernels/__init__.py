"""Numba kernels, each with a pure-Python reference (added as tiling and TAA land)."""
