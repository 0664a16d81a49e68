"""The import rules of ../shared/DESIGN.md, checked on the source: a planner never imports the
simulator, and the core reaches planners only through the registry."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Known breaks of the second rule, to be folded into the registry (issue: the house a newcomer
#: can live in); the test fails if one is added, and if one of these is fixed without updating it.
CORE_IMPORTS_OF_PLANNERS = {"npusim/experiment.py"}


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_planners_never_import_the_simulator():
    offenders = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "planners").rglob("*.py")
                       if any(m == "npusim.sim" or m.startswith("npusim.sim.") for m in imported_modules(p)))
    assert offenders == []


def test_the_core_reaches_planners_only_through_the_registry():
    offenders = {str(p.relative_to(ROOT)) for p in (ROOT / "npusim").rglob("*.py")
                 if any(m == "planners" or m.startswith("planners.") for m in imported_modules(p))}
    assert offenders == CORE_IMPORTS_OF_PLANNERS
