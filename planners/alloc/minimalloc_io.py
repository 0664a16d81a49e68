"""Read and write MiniMalloc's CSV format (``id,lower,upper,size``).

Each row is a buffer of ``size`` bytes live over the *half-open* interval ``[lower, upper)``
(google/minimalloc). npusim lifetimes are inclusive step ranges, so ``first = lower`` and
``last = upper - 1``. An optional ``offset`` column (a solution) is read too. The number in a
file name such as ``A.1048576.csv`` is the capacity the original benchmark uses.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from npusim.errors import PlanningError
from planners.alloc.problem import OffsetProblem

COLUMNS = ("id", "lower", "upper", "size")


def load_minimalloc(path: str | Path, alignment: int = 1) -> OffsetProblem:
    """A problem from a MiniMalloc CSV (sizes rounded up to ``alignment``)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PlanningError(f"{path}: cannot read the MiniMalloc CSV ({exc.strerror})") from None
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise PlanningError(f"{path}: no rows; expected a header {','.join(COLUMNS)} and one row per buffer")
    missing = [c for c in COLUMNS if c not in rows[0]]
    if missing:
        raise PlanningError(f"{path}: missing column(s) {missing}; expected header {','.join(COLUMNS)}")
    names, lower, upper, sizes = [], [], [], []
    for line, row in enumerate(rows, start=2):
        try:
            lo, hi, size = int(row["lower"]), int(row["upper"]), int(row["size"])
        except (TypeError, ValueError):
            raise PlanningError(f"{path}:{line}: lower/upper/size must be integers, got "
                                f"{row['lower']!r}, {row['upper']!r}, {row['size']!r}") from None
        if hi <= lo or size < 0:
            raise PlanningError(f"{path}:{line}: buffer {row['id']!r} has lower {lo}, upper {hi}, size {size}; "
                                "expected lower < upper and size >= 0")
        names.append(str(row["id"]))
        lower.append(lo)
        upper.append(hi)
        sizes.append(-(-size // alignment) * alignment)
    return OffsetProblem(sizes=np.array(sizes, dtype=np.int64), first=np.array(lower, dtype=np.int64),
                         last=np.array(upper, dtype=np.int64) - 1, alignment=alignment, names=tuple(names))


def to_minimalloc_csv(problem: OffsetProblem, offsets=None) -> str:
    """The problem (and optionally a solution's offsets) as MiniMalloc CSV text."""
    problem.require_lifetimes("the MiniMalloc export")
    if problem.blocks or problem.conflicts is not None:
        raise PlanningError("the MiniMalloc format holds only lifetimes and sizes; this problem has "
                            "contiguous blocks or an explicit conflict set")
    header = list(COLUMNS) + (["offset"] if offsets is not None else [])
    lines = [",".join(header)]
    for i in range(problem.n):
        row = [problem.name(i) if problem.names else str(i), str(int(problem.first[i])),
               str(int(problem.last[i]) + 1), str(int(problem.sizes[i]))]
        if offsets is not None:
            row.append(str(int(offsets[i])))
        lines.append(",".join(row))
    return "\n".join(lines) + "\n"
