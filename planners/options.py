"""Reading planner options (``--option KEY=VALUE``) with clear errors for bad values."""

from __future__ import annotations

from npusim.errors import PlanningError


def int_option(options: dict, key: str, default: int, who: str, minimum: int = 1) -> int:
    """``options[key]`` as an integer >= ``minimum`` (``default`` if absent)."""
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise PlanningError(f"{who}: option {key}={value!r}, expected an integer >= {minimum}")
    try:
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise PlanningError(f"{who}: option {key}={value!r}, expected an integer >= {minimum}")
    return number
