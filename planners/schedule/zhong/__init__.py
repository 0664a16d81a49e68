"""Zhong et al., "Memory-aware Scheduling for Complex Wired Networks with Iterative Graph
Optimization": fusion (``fusion``), the ILP (``ilp``), partitioning (``partition``) and the
``zhong`` schedule planner (``planner``)."""
