"""User-facing errors.

Every error a user can cause (bad file, bad option, infeasible budget, unsafe plan) is an
``NpusimError``: the CLI prints its message and exits non-zero, without a traceback.
Messages name the file, the field, the value and what was expected.
"""

import difflib


class NpusimError(Exception):
    """Base class of every error npusim reports to a user."""


class ConfigError(NpusimError):
    """A hardware YAML file is malformed or holds a bad value."""


class TraceError(NpusimError):
    """A trace or ONNX model cannot be read or describes an invalid graph."""


class PlanError(NpusimError):
    """A plan file is malformed or fails validation."""


class PlanningError(NpusimError):
    """A planner cannot produce a plan (e.g. the budget is below the minimum)."""


class SimulationError(NpusimError):
    """The simulator caught a plan doing something unsafe (e.g. overwriting live data)."""


class RegistryError(NpusimError):
    """A planner pipeline names an unknown planner or combines stages wrongly."""


class InstallError(NpusimError):
    """npusim's install is incomplete or stale (a C kernel not built, or built before its source
    changed): the message names the fix, which is the user's to make."""


class InternalError(NpusimError):
    """A bug in npusim or in a planner (e.g. a planner's plan fails the validator): the CLI
    says "internal error" and exits 3, where a user's error exits 2."""


#: Errors that say nothing of the point a sweep, comparison or regression tried (npusim's install
#: or a bug): they stop the run instead of becoming its "infeasible" row (or a cached one).
NOT_THE_POINTS = (InstallError, InternalError)


def did_you_mean(name: object, names) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``names`` to a misspelt ``name``, or ``""``:
    the one form every "unknown ..." message uses (``npusim doctor`` reads it back)."""
    close = difflib.get_close_matches(str(name), list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
