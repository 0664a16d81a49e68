"""Reference pages generated from the code (docs/trace-format.md, docs/planners.md): write
one, or check that the committed copy is current (the tests do)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from npusim.util.atomic_io import atomic_write_text


def main(out: Path, render: Callable[[], str], command: str, description: str, argv: list[str] | None = None) -> int:
    """``command`` rewrites ``out`` from ``render()``; with ``--check`` it exits 1 (saying how
    to regenerate it) when ``out`` differs from what ``render()`` makes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {out.name} is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = out.read_text(encoding="utf-8") if out.exists() else ""
        if current != text:
            print(f"{out} is out of date: run {command}", file=sys.stderr)
            return 1
        return 0
    out.parent.mkdir(exist_ok=True)
    atomic_write_text(out, text)
    print(f"wrote {out}")
    return 0
