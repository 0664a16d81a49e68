"""The validation table: npusim against SCALE-Sim, ZigZag, the TPU v1 paper, measured TPU v4
matmul kernels and first-principles bounds, one Markdown row per reference
(``npusim/testing/validation.py`` computes the rows; README "Validation" and docs/validation.md
show and discuss them; ``tests/test_validation.py`` holds each row to its tolerance).

    python benchmarks/validation_table.py            # every row, every kernel shape (~2 min)
    python benchmarks/validation_table.py --quick    # every 4th kernel shape, no 64 KiB GEMM (~20 s)

Ratios and fits only: no wall-clock figure. Rows whose reference lives in ../shared print as
skipped without it.
"""

from __future__ import annotations

import argparse

from npusim.testing.validation import GEMM_SCRATCHPADS, markdown, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="every 4th kernel shape and no 64 KiB GEMM (the CI subset of tests/test_validation.py)")
    args = parser.parse_args(argv)
    sizes = [s for s in GEMM_SCRATCHPADS if not (args.quick and s == "64KiB")]
    print(markdown(rows(kernel_step=4 if args.quick else 1, gemm_scratchpads=sizes)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
