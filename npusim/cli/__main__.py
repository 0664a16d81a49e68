"""``python -m npusim.cli``: the ``npusim`` command."""

import gc

# Importing npusim (NumPy, YAML, the simulator) at the default thresholds runs ~70 young
# collections over nothing but the modules being built (~10 ms); ``command`` then sets the
# command's own (``npusim.cli.GC_THRESHOLDS``).
gc.disable()
from npusim.cli import command  # noqa: E402 (after the collector is paused)

gc.enable()
command()
