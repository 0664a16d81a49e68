"""Small utilities every room may use: writing files whole (``atomic_io``), reading bounded
inputs (``bounded_read``), the ``NPUSIM_*`` environment knobs (``env_knobs``), progress
lines (``progress``), units (``units``), shipped resources (``resources``), the JSON Schema
checker (``schema_check``) and the wall-clock guard of time-limited planners (``wall_guard``).
Nothing here imports anything of npusim but ``npusim.errors``."""
