"""The validation table: npusim against SCALE-Sim, ZigZag, the TPU v1 paper, measured TPU v4
matmul kernels and first-principles bounds, one Markdown row per reference
(``npusim/testing/validation.py`` computes the rows; README "Validation" and docs/validation.md
show and discuss them; ``tests/test_validation.py`` holds each row to its tolerance).

    python benchmarks/validation_table.py            # every row, every kernel shape (~1 min)
    python benchmarks/validation_table.py --update   # the same, written into README.md's table
    python benchmarks/validation_table.py --quick    # every 4th kernel shape, no 64 KiB GEMM (~20 s)

Ratios and fits only: no wall-clock figure. Rows whose reference lives in ../shared print as
skipped without it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from npusim.util.atomic_io import atomic_write_text
from npusim.testing.validation import GEMM_SCRATCHPADS, markdown, rows

README = Path(__file__).resolve().parents[1] / "README.md"
MARKERS = re.compile(r"(<!-- BEGIN VALIDATION TABLE[^\n]*-->\n).*?(<!-- END VALIDATION TABLE -->)", re.S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="every 4th kernel shape and no 64 KiB GEMM (the CI subset of tests/test_validation.py)")
    parser.add_argument("--update", action="store_true", help="write the table into README.md between its markers")
    args = parser.parse_args(argv)
    if args.update and args.quick:
        parser.error("--update writes the whole table: leave out --quick")
    sizes = [s for s in GEMM_SCRATCHPADS if not (args.quick and s == "64KiB")]
    table = markdown(rows(kernel_step=4 if args.quick else 1, gemm_scratchpads=sizes))
    print(table)
    if args.update:
        text = README.read_text(encoding="utf-8")
        if not MARKERS.search(text):
            parser.error(f"{README}: no VALIDATION TABLE markers")
        atomic_write_text(README, MARKERS.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text, count=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
