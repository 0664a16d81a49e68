"""OR-Tools' CP-SAT, loaded on first use.

Importing ``ortools.sat.python.cp_model`` takes about 0.4 s (it brings pandas); heuristic
pipelines never build a model, so they should not pay for it (issue 28). ``cp_model`` here
stands in for the module: its first attribute access imports the real one, every access
forwards to it. The exact planners write ``cp_model.CpModel()`` as before.
"""

from __future__ import annotations

import importlib


class _LoadedOnFirstUse:
    def __init__(self, name: str) -> None:
        self._name, self._module = name, None

    def __getattr__(self, attr: str):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


cp_model = _LoadedOnFirstUse("ortools.sat.python.cp_model")


def add_hints(model, pairs) -> None:
    """Hint each ``(variable or literal, value)`` of ``pairs`` to ``model``, in their order:
    what a loop of ``model.add_hint`` writes (a negated literal becomes its variable with the
    opposite value, as there), in one extend of the proto's two repeated fields.
    ``add_hint`` costs ~2.4 us a call through the proto wrapper, this ~0.3 us: the exact
    planners hint every variable of models with up to millions of them."""
    variables, values = [], []
    for var, value in pairs:
        index = var.index
        if index >= 0:
            variables.append(index)
            values.append(int(value))
        else:
            variables.append(-index - 1)
            values.append(int(not value))
    hint = model.model_proto.solution_hint
    hint.vars.extend(variables)
    hint.values.extend(values)
