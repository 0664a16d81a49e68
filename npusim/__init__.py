"""npusim: a cycle-approximate NPU simulator with the memory planner in the loop.

The flow is Graph -> Plan (planners) -> validate -> Program (lower) -> SimPy run -> Report.
Every arrow is a plain, serialisable value; see DESIGN.md.
"""

__version__ = "0.1.0"
