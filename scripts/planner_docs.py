"""Write docs/planners.md from the planners' declarations (options, reads, writes).

    python scripts/planner_docs.py          # rewrite docs/planners.md
    python scripts/planner_docs.py --check  # exit 1 if it is out of date (tests/test_planner_contract.py)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from npusim.registry import planners_markdown

OUT = Path(__file__).resolve().parents[1] / "docs" / "planners.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/planners.md is out of date")
    args = parser.parse_args(argv)
    text = planners_markdown()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: python scripts/planner_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
