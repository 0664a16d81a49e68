"""Parsing of quantities with units, as written in hardware YAML files.

Every parser accepts a plain number (already in the base unit) or a string
``"<number><unit>"`` (spaces allowed) and returns a float or int in the base unit. A plain
frequency or bandwidth below 1e6 (Hz, B/s) or a plain time of 1 ms or more is refused as a
forgotten unit (``PLAUSIBLE_BARE``):

=========  ==========  =====================================================
quantity   base unit   accepted units
=========  ==========  =====================================================
size       byte        B, KB, MB, GB (powers of 1000), KiB, MiB, GiB (1024)
frequency  Hz          Hz, kHz, MHz, GHz
bandwidth  byte/s      B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, TiB/s, and
                       B/cycle (converted with the clock)
energy     pJ          fJ, pJ, nJ, uJ
power      W           uW, mW, W
cycles     cycle       cycle(s) or a plain number
time       s           ps, ns, us, ms, s
area       mm^2        um2, mm2
=========  ==========  =====================================================
"""

from __future__ import annotations

import math
import re

from npusim.util.schema_check import short  # (a bounded repr: a 5,001-digit value is not echoed whole)

_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z/]*2?)\s*$")  # um2, mm2: squared units

SIZE_UNITS = {
    "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3,
    "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3,
}
FREQUENCY_UNITS = {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}
BANDWIDTH_UNITS = {
    "B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,  # (TB/s: an HBM3 stack's 819 GB/s and up)
    "KiB/s": 1024.0, "MiB/s": 1024.0**2, "GiB/s": 1024.0**3, "TiB/s": 1024.0**4,
}
ENERGY_UNITS = {"fJ": 1e-3, "pJ": 1.0, "nJ": 1e3, "uJ": 1e6}
POWER_UNITS = {"uW": 1e-6, "mW": 1e-3, "W": 1.0}
TIME_UNITS = {"ps": 1e-12, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
AREA_UNITS = {"um2": 1e-6, "mm2": 1.0}
CYCLE_UNITS = {"cycle": 1.0, "cycles": 1.0}

QUANTITY_UNITS = {
    "size": SIZE_UNITS,
    "frequency": FREQUENCY_UNITS,
    "bandwidth": BANDWIDTH_UNITS,
    "energy": ENERGY_UNITS,
    "power": POWER_UNITS,
    "time": TIME_UNITS,
    "cycles": CYCLE_UNITS,
    "area": AREA_UNITS,
}


class UnitError(ValueError):
    """A value is not a number with one of the expected units (message says which)."""


def split_quantity(value: object, quantity: str) -> tuple[float, str]:
    """Return (number, unit) of ``value``; the unit is '' for a bare number."""
    if isinstance(value, bool):
        raise UnitError(f"expected a {quantity}, got the boolean {short(value)}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise UnitError(f"expected a finite {quantity}, got {short(value)}")
        return float(value), ""
    if not isinstance(value, str):
        raise UnitError(f"expected a {quantity} such as {example(quantity)!r}, got {short(value)}")
    match = _NUMBER.match(value)
    if not match:
        raise UnitError(f"expected a {quantity} such as {example(quantity)!r}, got {short(value)}")
    number = float(match.group(1))
    if not math.isfinite(number):
        raise UnitError(f"expected a finite {quantity}, got {short(value)}")
    return number, match.group(2)


#: bare numbers are read in the base unit; outside these ranges one almost surely meant
#: another unit ("clock: 800" for 800 MHz is 800 Hz; "bandwidth: 12.8" for GB/s is 12.8 B/s;
#: "latency: 100" for ns is 100 s), which would give absurd figures instead of an error
PLAUSIBLE_BARE = {"frequency": (1e6, math.inf), "bandwidth": (1e6, math.inf), "time": (0.0, 1e-3)}


def _check_plausible_bare(value: object, number: float, quantity: str) -> None:
    low, high = PLAUSIBLE_BARE.get(quantity, (-math.inf, math.inf))
    if number != 0 and not low <= number < high:
        base = next(unit for unit, factor in QUANTITY_UNITS[quantity].items() if factor == 1)
        raise UnitError(f"a bare number is read in {base}, so {short(value)} would be {number:g} {base}, not a "
                        f"plausible {quantity}; write the unit, e.g. {example(quantity)!r}")


def example(quantity: str) -> str:
    return {
        "size": "512KiB", "frequency": "1GHz", "bandwidth": "25.6GB/s",
        "energy": "0.2pJ", "power": "50mW", "time": "100ns", "cycles": "64",
        "area": "0.5mm2",
    }[quantity]


def parse(value: object, quantity: str, *, clock_hz: float | None = None) -> float:
    """Parse ``value`` as ``quantity`` and return it in the base unit.

    ``B/cycle`` bandwidths need ``clock_hz``.
    """
    units = QUANTITY_UNITS[quantity]
    number, unit = split_quantity(value, quantity)
    if unit == "":
        _check_plausible_bare(value, number, quantity)
        return number
    if quantity == "bandwidth" and unit in ("B/cycle", "B/cyc"):
        if clock_hz is None:
            raise UnitError("a bandwidth in B/cycle needs the clock frequency")
        return _finite(number * clock_hz, value, quantity)
    if unit not in units:
        # A common mistake is the case of the unit (e.g. 'kib', 'Mhz'): name the fix.
        hint = next((u for u in units if u.lower() == unit.lower()), None)
        expected = ", ".join(units) + (", B/cycle" if quantity == "bandwidth" else "")
        suggestion = f" (did you mean {hint!r}?)" if hint else ""
        raise UnitError(
            f"unknown {quantity} unit {unit!r} in {short(value)}{suggestion}; expected one of {expected}"
        )
    return _finite(scale(number, units[unit]), value, quantity)


def _finite(number: float, value: object, quantity: str) -> float:
    """``number`` (``value`` in the base unit), unless its unit made it overflow: 1.7e305 KiB
    is a finite number of KiB but no number of bytes."""
    if not math.isfinite(number):
        raise UnitError(f"expected a finite {quantity}, got {short(value)}, which overflows in the base unit")
    return number


def scale(number: float, factor: float) -> float:
    """``number * factor``, dividing by the integer 1/factor for sub-units so that
    100 ns is exactly 1e-07 s (100 * 1e-9 would be 1.0000000000000001e-07)."""
    if factor >= 1:
        return number * factor
    return number / round(1 / factor)


def parse_size(value: object) -> int:
    """Bytes as an int; fractional byte counts are rejected."""
    number = parse(value, "size")
    if number != int(number):
        raise UnitError(f"a size must be a whole number of bytes, got {short(value)} = {number} B")
    return int(number)


def format_bytes(n: float) -> str:
    """Human-readable bytes with binary prefixes, e.g. 1.50 MiB."""
    n = float(n)
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= factor:
            return f"{n / factor:.2f} {unit}"
    return f"{int(n)} B"
