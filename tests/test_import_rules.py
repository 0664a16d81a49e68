"""The import rules of ../shared/DESIGN.md, checked on the source: a planner never imports the
simulator, and the core reaches planners only through the registry."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Known breaks of the second rule (none left: npusim/cli/experiment.py asks the registry for
#: Zhong's order through ``npusim.registry.schedule_order``).
CORE_IMPORTS_OF_PLANNERS: set[str] = set()


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


def test_the_core_gets_a_schedule_through_the_registry():
    import pytest

    from npusim.errors import RegistryError
    from npusim.graph.analysis import peak_live_bytes
    from npusim.registry import schedule_order
    from npusim.workflow import load_graph

    graph = load_graph("squeezenet1_0")
    order = schedule_order("zhong", graph, 64, {"time_limit": 5})
    assert sorted(order) == list(range(graph.n_ops))
    assert peak_live_bytes(graph, order, 64) <= peak_live_bytes(graph, list(range(graph.n_ops)), 64)
    with pytest.raises(RegistryError, match="expected a schedule stage"):
        schedule_order("arena", graph, 64)


def _importers(package: str, of: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / package.replace(".", "/")).rglob("*.py")
                  if any(m == of or m.startswith(of + ".") for m in imported_modules(p)))


def test_packages_import_one_way():
    """No loops between packages: the joint planners build on the schedulers, never the other
    way round; the simulator does not call back into the workflow that drives it (the seeded
    unsafe plans of the race benchmark, which plan graphs to damage them, live in
    ``npusim.testing``)."""
    assert _importers("planners.schedule", "planners.joint") == []
    assert _importers("npusim.sim", "npusim.workflow") == []


def test_the_product_never_imports_the_test_helpers():
    """``npusim.testing`` serves tests and benchmarks; the rest of ``npusim`` and ``planners``
    must run without it."""
    testing = ROOT / "npusim" / "testing"
    offenders = [p for p in _importers("npusim", "npusim.testing") + _importers("planners", "npusim.testing")
                 if not (ROOT / p).is_relative_to(testing)]
    assert offenders == []


def test_imports_inside_functions_say_why():
    """Imports sit at the top of a file, so its head shows what it depends on. One inside a
    function (a heavy or optional dependency a cheap module loads only when needed, or a
    cycle) says why on its line: ``# lazy: <why>``."""
    offenders = set()
    for package in ("npusim", "planners"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            text = path.read_text()
            lines = text.splitlines()
            for node in ast.walk(ast.parse(text, rel)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    offenders.update(f"{rel}:{sub.lineno}" for sub in ast.walk(node)
                                     if isinstance(sub, (ast.Import, ast.ImportFrom))
                                     and "# lazy:" not in lines[sub.lineno - 1])
    assert sorted(offenders) == []
