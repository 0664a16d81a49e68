"""Write docs/planners.md from the planners' declarations (options, reads, writes).

    python scripts/planner_docs.py          # rewrite docs/planners.md
    python scripts/planner_docs.py --check  # exit 1 if it is out of date (tests/test_planner_contract.py)
"""

from __future__ import annotations

import sys
from pathlib import Path

from npusim.registry import planners_markdown
from npusim.util import generated_doc

OUT = Path(__file__).resolve().parents[1] / "docs" / "planners.md"


def main(argv: list[str] | None = None) -> int:
    return generated_doc.main(OUT, planners_markdown, "python scripts/planner_docs.py", __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
