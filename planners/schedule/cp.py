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
