"""Draw hw_configs/sram_table.png: the CACTI 7 SRAM curves npusim interpolates (npusim/hw/sram_table.py).

    python scripts/plot_sram_table.py            # writes hw_configs/sram_table.png
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from npusim.hw.sram_table import CELLS, sram_macro  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "hw_configs" / "sram_table.png"


def main() -> None:
    sizes = [2**k for k in range(12, 27)]  # 4 KiB ... 64 MiB
    titles = ("read energy (pJ/B)", "leakage (mW per MiB)", "area (mm2 per MiB)")
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for cell in CELLS:
        for width, style in ((64, "-"), (512, "--")):
            macros = [sram_macro(s, width, cell) for s in sizes]
            mib = [s / 2**20 for s in sizes]
            axes[0].plot(sizes, [m.read_pj / (width / 8) for m in macros], style, label=f"{cell} {width}-bit")
            axes[1].plot(sizes, [m.leakage_w * 1e3 / x for m, x in zip(macros, mib)], style, label=f"{cell} {width}-bit")
            axes[2].plot(sizes, [m.area_mm2 / x for m, x in zip(macros, mib)], style, label=f"{cell} {width}-bit")
    for ax, label in zip(axes, titles):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("one SRAM macro (bank), bytes")
        ax.set_title(label, fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=6)
    fig.suptitle("CACTI 7, 45 nm: one bank by capacity, port width and cell flavour", fontsize=10)
    fig.tight_layout()
    fig.savefig(OUT, dpi=90)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
