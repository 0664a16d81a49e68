"""Sweeps of a design-space exploration (``npusim.dse``): ``KEY=SPEC`` parsed into values in
base units. ``KEY`` is a dotted hardware key (``scratchpad.size``, ``dram.bandwidth``...),
``budget`` (sizes or MR/MH/MP), or for a generated decoder (``llm:<preset>``) ``prefill``,
``decode`` or ``batch``; ``SPEC`` is ``A..B:xF`` (geometric), ``A..B:+S`` (linear) or
``V1,V2,..``."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from npusim.dram.mapping import check_own
from npusim.util import units
from npusim.errors import NpusimError, did_you_mean
from npusim.hw.loader import check_range, iter_knobs, parse_choice

BUDGET_KEY = "budget"
#: Sweep keys of a generated decoder (trace ``llm:<preset>``): each point is one prefill
#: (``prefill`` = prompt tokens) or one decode step (``decode`` = KV length), ``batch`` sequences.
LLM_KEYS = ("prefill", "decode", "batch")
MAX_POINTS_PER_SWEEP = 10_000  # a typo like 1B..1GiB:+1 should fail fast, not hang


class DseError(NpusimError):
    """A sweep is malformed, or a worker runs a different npusim or sees a different trace."""


@dataclass(frozen=True)
class Sweep:
    key: str
    values: tuple


def parse_sweep(text: str) -> Sweep:
    """``KEY=A..B:x2`` | ``KEY=A..B:+S`` | ``KEY=V1,V2`` -> a Sweep with values in base units."""
    if "=" not in text:
        raise DseError(f"--sweep {text!r}: expected KEY=A..B:xF, KEY=A..B:+S or KEY=V1,V2,... "
                       "e.g. scratchpad.size=64KiB..8MiB:x2")
    key, spec = (part.strip() for part in text.split("=", 1))
    quantity = _quantity_of(key, text)
    if ".." in spec:
        values = _range_values(spec, quantity, text)
    else:
        values = [parse_value(v.strip(), quantity, text) for v in spec.split(",") if v.strip()]
    if not values:
        raise DseError(f"--sweep {text!r}: no values")
    if len(set(map(repr, values))) != len(values):
        raise DseError(f"--sweep {text!r}: a value is given twice")
    _check_each(key, quantity, values, text)
    return Sweep(key, tuple(values))


def _check_each(key: str, quantity: str, values, text: str) -> None:
    """A value the field refuses on its own (a negative queue depth) is bad input (exit 2), not an
    infeasible point: the range the loader holds every field to, checked here before any run."""
    field = knob_fields().get(key)
    if field is None or quantity == "budget":
        return
    for value in values:
        try:
            if quantity == "choice":  # a typo (dram.device=ddr3) is bad input, not an infeasible point
                parse_choice(value, field.metadata["choices"])
            check_own(key, value)  # and so are a mapping without a rank field and 3 channels, whatever the device
            check_range(value, quantity, field.metadata.get("maximum"), field.metadata.get("minimum"))
        except (units.UnitError, ValueError) as exc:
            raise DseError(f"--sweep {text!r}: {value!r}: {exc}") from None


@functools.cache
def knob_fields() -> dict:
    return dict(iter_knobs())


@functools.cache
def knob_quantities() -> dict[str, str]:
    return {key: f.metadata["quantity"] for key, f in iter_knobs()}


def _quantity_of(key: str, text: str) -> str:
    if key == BUDGET_KEY:
        return "budget"
    if key in LLM_KEYS:
        return "int"
    knobs = knob_quantities()
    if key not in knobs:
        hint = did_you_mean(key, [*knobs, BUDGET_KEY])
        raise DseError(f"--sweep {text!r}: unknown key {key!r}{hint}; expected 'budget' or a hardware "
                       f"key such as scratchpad.size, dram.bandwidth, cores.pe_rows")
    if key == "name":
        raise DseError(f"--sweep {text!r}: the config name cannot be swept")
    return knobs[key]


def parse_value(raw: str, quantity: str, text: str):
    """One value in base units (int when whole); text for choices, MR/MH/MP for budgets."""
    try:
        if quantity == "budget":
            if raw.upper() in ("MR", "MH", "MP"):
                return raw.upper()
            return units.parse_size(raw)
        if quantity in ("str", "choice"):
            return raw
        if quantity == "int":  # as the hardware file takes it: an integer literal
            try:
                return int(raw, 10)
            except ValueError:
                raise units.UnitError("expected an integer such as 16") from None
        if quantity == "size":
            return units.parse_size(raw)
        number = units.parse(raw, quantity)
        return int(number) if number == int(number) and abs(number) < 2**53 else number
    except units.UnitError as exc:
        raise DseError(f"--sweep {text!r}: {raw!r}: {exc}") from None


def _range_values(spec: str, quantity: str, text: str) -> list:
    if quantity in ("str", "choice"):
        raise DseError(f"--sweep {text!r}: a {quantity} key takes a list (V1,V2), not a range")
    bounds, _, step = spec.partition(":")
    low_raw, _, high_raw = bounds.partition("..")
    low, high = (parse_value(v.strip(), quantity if quantity != "budget" else "size", text)
                 for v in (low_raw, high_raw))
    if not step or step[0] not in "x+" or len(step) < 2:
        raise DseError(f"--sweep {text!r}: a range needs a step: ':x2' (geometric) or ':+64KiB' (linear)")
    if low > high:
        raise DseError(f"--sweep {text!r}: the range starts above its end ({low} > {high})")
    whole = quantity in ("size", "int", "budget")
    if step[0] == "x":
        factor = _parse_number(step[1:], text)
        if factor <= 1:
            raise DseError(f"--sweep {text!r}: a geometric factor must be > 1, got {factor}")
        if low <= 0:
            raise DseError(f"--sweep {text!r}: a geometric range must start above 0")
        count = math.floor(math.log(high / low) / math.log(factor) + 1e-9) + 1
        values = [low * factor**i for i in range(min(count, MAX_POINTS_PER_SWEEP + 1))]
    else:
        stride = parse_value(step[1:].strip(), quantity if quantity != "budget" else "size", text)
        if stride <= 0:
            raise DseError(f"--sweep {text!r}: a linear step must be > 0")
        count = math.floor((high - low) / stride + 1e-9) + 1
        values = [low + stride * i for i in range(min(count, MAX_POINTS_PER_SWEEP + 1))]
    if count > MAX_POINTS_PER_SWEEP:  # the range's own count, not where the listing stopped
        raise DseError(f"--sweep {text!r}: {count:,} values, more than {MAX_POINTS_PER_SWEEP:,}: a larger step?")
    if whole:
        return list(dict.fromkeys(int(round(v)) for v in values))
    return [int(v) if v == int(v) else v for v in values]


def _parse_number(raw: str, text: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise DseError(f"--sweep {text!r}: {raw!r} is not a number") from None
