"""Planner options (``--option KEY=VALUE``) as the planners declare them.

Every planner lists the options it reads in its ``options`` attribute, as ``Option`` values
next to its code (name, kind, default, unit, bounds, a one-line doc). The core knows no
option names of its own: it

- refuses a given option that no registered planner declares (a typo such as ``time_limt``),
  naming the closest declared one; a declared option that this pipeline's stages do not read
  is accepted, so that one set of options can go to every pipeline of a sweep;
- parses each given value against the declarations of the pipeline's stages before any stage
  runs (one clear error for ``time_limit=fast``);
- hands each stage a read-only ``StageOptions`` view holding exactly what it declared, with
  the declared defaults filled in; reading a name the stage did not declare is a bug in the
  planner and raises InternalError, so a declaration cannot drift from the code.

Stages pass data to each other through typed fields of the planning context, never through
the options.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from npusim.errors import InternalError, PlanningError, RegistryError, did_you_mean

KINDS = ("int", "float", "bool", "choice", "text")
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class Option:
    """One planner option: what it is called, what values it takes and what it does."""

    name: str
    kind: str  # one of KINDS
    default: object
    doc: str
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise RegistryError(f"option {self.name!r}: kind {self.kind!r}, expected one of {', '.join(KINDS)}")
        if self.kind == "choice" and self.default not in self.choices:
            raise RegistryError(f"option {self.name!r}: default {self.default!r} is not one of {self.choices}")

    def with_default(self, default) -> "Option":
        """The same option with another default (a planner that wants a different one)."""
        return replace(self, default=default)

    def expected(self) -> str:
        """What a value must be, in words (for errors and the generated reference)."""
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "text":
            return "text"
        what = "an integer" if self.kind == "int" else "a number"
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            return f"{what} in [{low:g}, {high:g}]"
        if low is not None:
            return f"{what} >= {low:g}"
        if high is not None:
            return f"{what} <= {high:g}"
        return what

    def parse(self, value, who: str):
        """``value`` as this option's type, or PlanningError naming planner, option, value and
        what was expected."""
        parsed = self._convert(value)
        if parsed is None or (self.kind in ("int", "float") and not self._in_bounds(parsed)):
            raise PlanningError(f"{who}: option {self.name}={value!r}, expected {self.expected()}")
        return parsed

    def _convert(self, value):
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower() if isinstance(value, (int, str)) else None
            return True if text in _TRUE else False if text in _FALSE else None
        if self.kind == "choice":
            text = str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
            return text if text in self.choices else None
        if self.kind == "text":
            return value if isinstance(value, str) else None
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return None
        try:
            number = float(value)
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        if self.kind == "int":
            return int(number) if number.is_integer() else None
        return number

    def _in_bounds(self, number) -> bool:
        return (self.minimum is None or number >= self.minimum) and (self.maximum is None or number <= self.maximum)

    def describe(self) -> str:
        """One line for ``npusim list --planner`` and docs/planners.md."""
        unit = f" {self.unit}" if self.unit else ""
        if self.default is None:
            return f"{self.name} ({self.expected()}{unit and ','}{unit}): {self.doc}"
        default = str(self.default).lower() if isinstance(self.default, bool) else self.default
        return f"{self.name} ({self.expected()}; default {default}{unit}): {self.doc}"


def declared(planner) -> tuple[Option, ...]:
    """The options ``planner`` declares (none when it declares nothing)."""
    return tuple(getattr(planner, "options", ()) or ())


class StageOptions(Mapping):
    """What one stage may read: the options it declares (``specs``), given values parsed,
    defaults filled. ``key in options`` says whether the user gave the option."""

    def __init__(self, given: Mapping, specs, who: str) -> None:
        self._who = who
        self._specs = {opt.name: opt for opt in specs}
        self._given = {k: v for k, v in given.items() if k in self._specs and v is not None}  # None: not given
        self._values = {name: (spec.parse(self._given[name], who) if name in self._given else spec.default)
                        for name, spec in self._specs.items()}

    @classmethod
    def for_planner(cls, given: Mapping, planner) -> "StageOptions":
        return cls(given, declared(planner), getattr(planner, "name", type(planner).__name__))

    def __getitem__(self, key):
        if key not in self._specs:
            raise InternalError(f"planner {self._who!r} reads option {key!r}, which it does not declare "
                                f"(declared: {', '.join(sorted(self._specs)) or 'none'}); add it to its `options`")
        return self._values[key]

    def get(self, key, default=None):
        """The option's value (given or declared default); ``default`` is ignored: the
        declaration holds the one default."""
        return self[key]

    def __contains__(self, key) -> bool:
        self[key]  # an undeclared name is a bug, even when only tested for
        return key in self._given

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def values(options: Mapping, specs, who: str) -> dict:
    """The values of the options ``specs`` from ``options`` -- a stage's ``StageOptions`` or a
    plain dict (a helper called directly, e.g. from a test) -- parsed, defaults filled."""
    if isinstance(options, StageOptions):
        return {spec.name: options[spec.name] for spec in specs}
    return dict(StageOptions(options, specs, who))


def check_given(given: Mapping, stages: list, known: Mapping[str, list] | Callable[[], Mapping[str, list]],
                pipeline: str, planner: Callable | None = None) -> None:
    """Refuse given options that no registered planner declares (``known``: option name ->
    planners declaring it, or the function that makes that index: called only for an option
    the pipeline's own stages do not declare, as it loads every planner), and values that a
    stage of this pipeline cannot read. An option no stage of it reads is let through (one
    ``--option`` set for several pipelines), but only with a value some planner declaring it
    could read (``planner``: name -> planner, to find them): ``time_limit=abc`` is a mistake
    whichever pipeline runs."""
    own = {opt.name for stage in stages for opt in declared(stage)}
    if callable(known) and any(key not in own for key in given):
        known = known()
    unknown = sorted(key for key in given if key not in own and key not in known)
    if unknown:
        said = ", ".join(f"{key!r}{did_you_mean(str(key), sorted(known))}" for key in unknown)
        reads = sorted({opt.name for stage in stages for opt in declared(stage)})
        raise PlanningError(f"pipeline {pipeline!r}: unknown planner option {said}; the options its stages read "
                            f"are {', '.join(reads) or 'none'} (npusim list --planner NAME describes them)")
    for stage in stages:
        StageOptions.for_planner(given, stage)  # parses every value this stage declares
    for key in sorted(key for key in given if key not in own):
        if planner is None:
            continue
        problems = []
        for name in known[key]:
            specs = [opt for opt in declared(planner(name)) if opt.name == key]
            try:
                StageOptions({key: given[key]}, specs, name)
                break
            except PlanningError as exc:
                problems.append(str(exc).removeprefix(f"{name}: "))
        else:
            raise PlanningError(f"{problems[0]} (no stage of pipeline {pipeline!r} reads it)")
