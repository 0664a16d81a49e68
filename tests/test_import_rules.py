"""The import rules, checked on the source: the layering of docs/architecture.md (a room
imports only rooms on earlier lines; no cycle between rooms), a planner never imports the
simulator, the core reaches planners only through the registry, the product never imports
the test helpers, and an import inside a function says why."""

import ast
import os
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


def layers() -> list[list[str]]:
    """The rooms of docs/architecture.md's ``layers`` block, one list per line."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("```layers\n", 1)[1].split("```", 1)[0]
    return [line.split() for line in block.splitlines() if line.strip()]


def room_of(module: str) -> str | None:
    """``npusim.plan.io`` -> ``npusim.plan``; ``planners.joint.cosma.dnc`` -> ``planners.joint``;
    the package roots stay themselves; anything else (numpy, simpy) is no room."""
    parts = module.split(".")
    if parts[0] not in ("npusim", "planners"):
        return None
    return ".".join(parts[:2])


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name.removesuffix(".__init__")


def _is_module(package: str, name: str) -> bool:
    return (ROOT / package / name).is_dir() or (ROOT / package / f"{name}.py").exists()


def room_imports() -> dict[str, dict[str, list[str]]]:
    """room -> {imported room: [files importing it]}, from every import statement (inside
    functions too), relative imports resolved and ``from npusim import x`` read as ``npusim.x``."""
    graph: dict[str, dict[str, list[str]]] = {}
    for package in ("npusim", "planners"):
        for path in sorted((ROOT / package).rglob("*.py")):
            me = module_name(path)
            package_of_me = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                targets = []
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        up = package_of_me.split(".")[: len(package_of_me.split(".")) - node.level + 1]
                        base = ".".join(up + ([node.module] if node.module else []))
                    if base in ("npusim", "planners"):  # a submodule, or a name of the package itself
                        targets = [f"{base}.{alias.name}" if _is_module(base, alias.name) else base
                                   for alias in node.names]
                    else:
                        targets = [base]
                for target in targets:
                    theirs, mine = room_of(target), room_of(me)
                    if theirs and theirs != mine and theirs != "npusim":  # the lazy root: see the doc
                        graph.setdefault(mine, {}).setdefault(theirs, []).append(str(path.relative_to(ROOT)))
    return graph


def against_layers(graph: dict, rank: dict) -> list[str]:
    return [f"{room} imports {target} ({files[0]})" for room, targets in sorted(graph.items())
            for target, files in sorted(targets.items()) if rank[target] >= rank[room]]


def first_cycle(graph: dict) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(room: str, path: list[str]) -> list[str] | None:
        state[room] = 1
        for nxt in sorted(graph.get(room, ())):
            if state.get(nxt) == 1:
                return path + [room, nxt]
            if nxt not in state and (cycle := visit(nxt, path + [room])):
                return cycle
        state[room] = 2
        return None

    return next((c for room in sorted(graph) if room not in state and (c := visit(room, []))), None)


def test_rooms_import_only_earlier_layers():
    """Every import between rooms goes down the layering docs/architecture.md states."""
    rank = {room: n for n, line in enumerate(layers()) for room in line}
    graph = room_imports()
    rooms = set(graph) | {t for targets in graph.values() for t in targets}
    assert sorted(r for r in rooms if r not in rank) == [], "rooms missing from the layers block"
    assert against_layers(graph, rank) == []


def test_no_cycle_between_rooms():
    assert first_cycle({room: set(targets) for room, targets in room_imports().items()}) is None


def test_the_rules_can_fail():
    """A simulator module importing the workflow, a plan module importing the simulator and
    back: both are caught."""
    rank = {room: n for n, line in enumerate(layers()) for room in line}
    graph = room_imports()
    graph.setdefault("npusim.sim", {})["npusim.workflow"] = ["npusim/sim/probe.py"]
    assert against_layers(graph, rank) == ["npusim.sim imports npusim.workflow (npusim/sim/probe.py)"]
    loops = {room: set(targets) for room, targets in room_imports().items()}
    loops.setdefault("npusim.plan", set()).add("npusim.sim")
    assert first_cycle(loops) is not None
    loops["npusim.plan"].discard("npusim.sim")
    loops.setdefault("planners.alloc", set()).add("planners.offchip")
    assert first_cycle(loops) is not None


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


def test_the_default_pipeline_loads_neither_numba_nor_or_tools():
    """A default `simulate` uses no JIT kernel and no solver, so it loads neither: Numba's
    import and cache load were ~0.7 s of the quick start's CPU and ~100 MB of its memory
    (issue 28). A kernel module imported eagerly by any planner or by the simulator fails this.
    Nor does it import the planners the pipeline does not name (``Registry.add_lazy``): a
    module of them imported at start-up fails it too."""
    import subprocess
    import sys
    code = ("import sys; from npusim.cli import main\n"
            "try:\n    main(['simulate', 'bert_tiny', '--hw', 'edge-npu', '--budget', '256KiB'])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in ('numba', 'ortools') if m in sys.modules))\n"
            "print(sorted(m for m in sys.modules if m.startswith(('planners.joint', 'planners.offchip', "
            "'planners.alloc.onchip', 'planners.schedule.zhong', 'planners.spill.greedy_ilp'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.strip().splitlines()[-2:] == ["[]", "[]"]


def test_the_compiled_loop_and_the_dram_check_load_no_numba(tmp_path):
    """The compiled event loop (``npusim.sim.compiled_loop``) and the DRAM contents check
    (``npusim.sim.dram_memory``) are C (``npusim.native``): a tiled or LLM run, or the
    simulation of a plan with a DRAM layout, does not pay Numba's start-up (~0.25 s)."""
    import subprocess
    import sys
    root = Path(__file__).parent.parent
    plan = tmp_path / "taa.json"
    made = subprocess.run([sys.executable, "-m", "npusim.cli", "plan", "squeezenet1_0", "--hw", "edge-npu",
                           "--budget", "64KiB", "--planner", "tile+default+arena+belady+taa", "-o", str(plan)],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert made.returncode == 0, made.stderr[-500:]
    code = ("import sys; from npusim.cli import main\n"
            "try:\n    main(['simulate', 'squeezenet1_0', '--hw', 'edge-npu', '--plan', sys.argv[1]])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in ('numba', 'npusim.sim.compiled_loop', 'npusim.sim.dram_memory')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(plan)], capture_output=True, text=True, timeout=300,
                         cwd=root, env={**os.environ, "NPUSIM_SIM_LOOP": "compiled"})
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.strip().splitlines()[-1] == "['npusim.sim.compiled_loop', 'npusim.sim.dram_memory']"
