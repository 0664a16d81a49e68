"""npusim: a cycle-approximate NPU simulator with the memory planner in the loop.

The flow is Graph -> Plan (planners, bound to the graphs it refers to) -> validate -> Program
(lower) -> SimPy run -> Report. Every arrow is a plain value; see docs/architecture.md.

The public face, importable from ``npusim`` directly::

    from npusim import load_graph, load_hw, plan_graph, simulate_plan
    graph, hw = load_graph("resnet50"), load_hw("edge-npu")
    plan = plan_graph(graph, hw, "tile+default+arena+belady")   # validated
    report = simulate_plan(plan, hw, validated=True)   # the plan carries its graph
    print(report.summary())

Names are imported on first use (``__getattr__``), so ``import npusim`` stays cheap and a
command that needs none of them loads none of SimPy, OR-Tools or Numba.
"""

import importlib

__version__ = "0.1.0"

#: public name -> module that defines it
_PUBLIC = {
    "load_graph": "npusim.workflow", "load_hw": "npusim.workflow", "resolve_budget": "npusim.workflow",
    "plan_graph": "npusim.workflow", "simulate_plan": "npusim.workflow", "run": "npusim.workflow",
    "memory_bounds": "npusim.workflow",
    "make_plan": "npusim.registry", "default_registry": "npusim.registry", "Registry": "npusim.registry",
    "validate": "npusim.plan.validate", "require_valid": "npusim.plan.validate",
    "bind": "npusim.plan.bound", "BoundPlan": "npusim.plan.bound",
    "load_plan": "npusim.plan.io", "save_plan": "npusim.plan.io",
    "lower": "npusim.plan.lower", "simulate": "npusim.sim.engine",
    "Graph": "npusim.graph.model", "graph_from_records": "npusim.graph.contract", "Hardware": "npusim.hw.config", "Plan": "npusim.plan.model",
    "Program": "npusim.plan.lower", "Report": "npusim.sim.report",
    "NpusimError": "npusim.errors", "InternalError": "npusim.errors",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'npusim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
