"""Tiles that fit the array: ResNet-18 on SCALE-Sim's 32×32 output-stationary config.

SCALE-Sim v3 (``shared/reference/scalesim/resnet18_32x32_os``) runs every layer untiled on the
32×32 array; npusim at 192 KiB (SCALE-Sim's 3 × 64 KiB SRAMs as one scratchpad) must tile
most of them. Printed: per layer, npusim's array cycles summed over the layer's tiles and
SCALE-Sim's compute cycles, and the ratio for the whole network (target <= 1.05), for the
``time`` tile objective and the ``bytes`` one, with feature maps in DRAM as NCHW (channel
planes: a block of output channels is whole bursts, as in SCALE-Sim's matrix operands) and
as NHWC (there a block of 32 channels writes 32-byte runs, which the tiler avoids when a
candidate moving whole bursts is within 5 % of the fastest). Ratios only: no wall-clock figure.

    python benchmarks/bench_tiling_array.py [--budget 192KiB]
"""

from __future__ import annotations

import argparse
import sys

from npusim.testing.validation import SCALESIM_RESNET18 as REFERENCE
from npusim.testing.validation import scalesim_layers, scalesim_tiled_cycles
from npusim.util.units import parse_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", default="192KiB")
    args = parser.parse_args(argv)
    if not REFERENCE.exists():
        print(f"SCALE-Sim reference not found at {REFERENCE}", file=sys.stderr)
        return 2
    rows = scalesim_layers()
    theirs = sum(int(r["compute_cycles"]) + 1 for r in rows)
    budget = parse_size(args.budget)
    for layout in ("nchw", "nhwc"):
        for objective in ("time", "bytes"):
            ours = scalesim_tiled_cycles(objective, budget, layout)
            total = sum(ours.values())
            print(f"dram.layout={layout} tile_objective={objective}: npusim array cycles {total:,} / "
                  f"SCALE-Sim {theirs:,} = {total / theirs:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
