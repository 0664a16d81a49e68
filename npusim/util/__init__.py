"""Small utilities every room may use: writing files whole (``atomic_io``), reading bounded
inputs (``bounded_read``), the ``NPUSIM_*`` environment knobs (``env_knobs``), progress
lines (``progress``), units (``units``), shipped resources (``resources``), the JSON Schema
checker (``schema_check``), the wall-clock guard of time-limited planners (``wall_guard``) and a
faster constructor of frozen dataclasses made by the 100,000 (``fast_init``).
Nothing here imports anything of npusim but ``npusim.errors``."""
