"""Helpers for the test suite and the benchmarks, not part of the product.

- ``random_dags``: seeded random graphs (chains, diamonds, NAS-like cells, fan-outs,
  Erdos-Renyi-style DAGs) for the planners' property tests and benchmarks;
- ``seeded_races``: safe multi-stream plans and the same plans with one race injected, for
  the race detector's tests and benchmark.

Nothing under ``npusim/`` outside this package (nor ``planners/``) imports it.
"""
