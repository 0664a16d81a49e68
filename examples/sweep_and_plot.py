"""Sweep the scratchpad size for two planners and plot latency, energy and off-chip bytes.

The same as the command

    npusim dse resnet18 --hw edge-npu --sweep scratchpad.size=256KiB..4MiB:x2 \
        --planner tile+default+arena+belady,tile+rpo+arena+lru --plot -o sweep.csv

(sweeping ``budget`` instead plans for less than the scratchpad holds; a budget over
``scratchpad.size`` is infeasible unless ``allow_oversize``)

but through the Python API, which returns the rows as plain dicts. Figures go to the folder
given as the first argument (a temporary folder by default); matplotlib is needed for them
(pip install 'npusim[plot]').

Run: python examples/sweep_and_plot.py [OUT_FOLDER]
"""

import sys
import tempfile
from pathlib import Path

from npusim import dse
from npusim.plot import pareto_front, plot_dse_curves, plot_pareto

sweeps = [dse.parse_sweep("scratchpad.size=256KiB..4MiB:x2")]
points = dse.make_points(["resnet18"], "edge-npu", sweeps, ["tile+default+arena+belady", "tile+rpo+arena+lru"])
result = dse.run_sweep(points, cache_dir=None, progress=False)  # jobs=4 or backend="dask" give the same rows

print(f"{'scratchpad':>10} {'planner':<26} {'cycles':>12} {'energy uJ':>10} {'off-chip B':>12}")
for row in result.rows:  # each row has a column per swept key
    print(f"{row['scratchpad.size']:>10,} {row['planner']:<26} {row['cycles']:>12,.0f} "
          f"{row['energy_pj'] / 1e6:>10.3f} {row['offchip_bytes']:>12,}")

print("energy-area Pareto front (area, scratchpad bytes, energy):")
for row in pareto_front(result.rows):  # area from npusim.hw.silicon: the CACTI scratchpad grows with its size
    print(f"  {row['area_mm2']:6.2f} mm2 {row['capacity']:>10,} B  {row['energy_pj'] / 1e6:.3f} uJ  {row['planner']}")

with tempfile.TemporaryDirectory() as temporary:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(temporary)
    written = plot_dse_curves(result.rows, folder / "sweep-curves", ["scratchpad.size"])
    written += plot_pareto(result.rows, folder / "sweep-pareto")
    print("wrote " + ", ".join(p.name for p in written))
