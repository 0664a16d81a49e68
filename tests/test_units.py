"""Quantities with units, as written in hardware YAML files (npusim.util.units)."""

from __future__ import annotations

import pytest

from npusim.util.units import QUANTITY_UNITS, UnitError, format_bytes, parse, parse_size

# (quantity, text, value in the base unit) - at least one case per unit of every quantity.
EXAMPLES = [
    ("size", "64B", 64), ("size", "2KB", 2000), ("size", "3MB", 3e6), ("size", "1GB", 1e9),
    ("size", "512KiB", 512 * 1024), ("size", "1 MiB", 1024**2), ("size", "4GiB", 4 * 1024**3),
    ("frequency", "50Hz", 50), ("frequency", "2kHz", 2e3), ("frequency", "800MHz", 8e8),
    ("frequency", "1.5GHz", 1.5e9),
    ("bandwidth", "1B/s", 1), ("bandwidth", "2KB/s", 2e3), ("bandwidth", "3MB/s", 3e6),
    ("bandwidth", "25.6GB/s", 25.6e9), ("bandwidth", "1KiB/s", 1024), ("bandwidth", "1.2TB/s", 1.2e12),
    ("bandwidth", "1MiB/s", 1024**2), ("bandwidth", "1GiB/s", 1024**3), ("bandwidth", "2TiB/s", 2 * 1024**4),
    ("energy", "500fJ", 0.5), ("energy", "0.2pJ", 0.2), ("energy", "1nJ", 1e3), ("energy", "2uJ", 2e6),
    ("power", "10uW", 1e-5), ("power", "50mW", 0.05), ("power", "3W", 3),
    ("time", "5ps", 5e-12), ("time", "100ns", 1e-7), ("time", "2us", 2e-6), ("time", "3ms", 3e-3),
    ("time", "1s", 1),
    ("cycles", "1cycle", 1), ("cycles", "64 cycles", 64), ("cycles", "64", 64),
    ("area", "636um2", 636e-6), ("area", "0.5 mm2", 0.5),
]


@pytest.mark.parametrize(("quantity", "text", "expected"), EXAMPLES)
def test_every_unit_parses_to_the_base_unit(quantity, text, expected):
    assert parse(text, quantity) == pytest.approx(expected, rel=1e-12)


def test_examples_cover_every_unit_of_every_quantity():
    covered = {(q, t.lstrip("0123456789. ")) for q, t, _ in EXAMPLES}
    for quantity, table in QUANTITY_UNITS.items():
        for unit in table:
            assert (quantity, unit) in covered, f"no example for {quantity} {unit}"


#: a plausible bare number of each quantity (frequency, bandwidth and time have ranges)
BARE = {"frequency": 8e8, "bandwidth": 12.8e9, "time": 1e-7}


@pytest.mark.parametrize("quantity", sorted(QUANTITY_UNITS))
def test_a_bare_number_is_already_in_the_base_unit(quantity):
    number = BARE.get(quantity, 42)
    assert parse(number, quantity) == number
    assert parse(str(number), quantity) == number
    if quantity not in BARE:
        assert parse(0.5, quantity) == 0.5


@pytest.mark.parametrize("quantity, value, unit", [("frequency", 800, "Hz"), ("bandwidth", "12.8", "B/s"),
                                                   ("time", 100, "s"), ("frequency", 999_999, "Hz")])
def test_a_bare_number_that_forgot_its_unit_is_refused(quantity, value, unit):
    """'clock: 800' meant MHz, 'bandwidth: 12.8' GB/s, 'latency: 100' ns: read in the base
    unit they would give absurd latencies without a word, so they are errors naming the unit."""
    with pytest.raises(UnitError, match=rf"bare number is read in {unit}.*write the unit"):
        parse(value, quantity)
    assert parse(0, quantity) == 0  # zero is left to the loader's range check


def test_sub_units_are_exact():
    # 100 * 1e-9 would be 1.0000000000000001e-07; reports and cache keys want 1e-07.
    assert parse("100ns", "time") == 1e-7
    assert parse("120ns", "time") == 1.2e-7
    assert parse("50mW", "power") == 0.05


@pytest.mark.parametrize("text", ["1e3", "1.5e3", " 1500 ", "+1500", ".5e4 B"])
def test_number_formats(text):
    assert parse(text, "size") == pytest.approx(float(text.replace("B", "")))


def test_spaces_between_number_and_unit_are_allowed():
    assert parse("  1   KiB ", "size") == 1024


@pytest.mark.parametrize(
    ("quantity", "text", "hint"),
    [("size", "1kib", "KiB"), ("size", "1mb", "MB"), ("frequency", "1Mhz", "MHz"),
     ("frequency", "1ghz", "GHz"), ("bandwidth", "1gb/s", "GB/s"), ("energy", "1PJ", "pJ"),
     ("power", "1mw", "mW"), ("time", "1NS", "ns")],
)
def test_a_unit_in_the_wrong_case_names_the_right_spelling(quantity, text, hint):
    with pytest.raises(UnitError, match=f"did you mean '{hint}'"):
        parse(text, quantity)


def test_an_unknown_unit_lists_the_expected_units():
    with pytest.raises(UnitError) as caught:
        parse("1 MB/s", "size")
    message = str(caught.value)
    assert "unknown size unit 'MB/s'" in message
    assert "expected one of B, KB, MB, GB, KiB, MiB, GiB" in message
    assert "did you mean" not in message


def test_a_unit_of_another_quantity_is_rejected():
    with pytest.raises(UnitError, match="unknown frequency unit 'ns'"):
        parse("10ns", "frequency")


def test_bandwidth_in_bytes_per_cycle_uses_the_clock():
    assert parse("16B/cycle", "bandwidth", clock_hz=1e9) == 16e9
    assert parse("8 B/cycle", "bandwidth", clock_hz=800e6) == pytest.approx(6.4e9)


def test_bandwidth_in_bytes_per_cycle_needs_the_clock():
    with pytest.raises(UnitError, match="needs the clock"):
        parse("16B/cycle", "bandwidth")


def test_bandwidth_error_mentions_bytes_per_cycle():
    with pytest.raises(UnitError, match="B/cycle"):
        parse("1 GB", "bandwidth")


def test_negative_values_parse_the_sign_is_checked_by_the_loader():
    # units only converts; the hardware loader decides which ranges are valid.
    assert parse("-1KiB", "size") == -1024
    assert parse(-3, "energy") == -3


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_rejected(value):
    with pytest.raises(UnitError, match="finite"):
        parse(value, "energy")


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "NaN pJ", "infinity"])
def test_non_finite_strings_are_rejected(text):
    with pytest.raises(UnitError):
        parse(text, "energy")


def test_huge_exponents_that_overflow_are_rejected():
    with pytest.raises(UnitError, match="finite"):
        parse("1e999 pJ", "energy")


@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_not_numbers(value):
    # YAML turns `yes`/`no`/`true` into booleans; True must not silently become 1 byte.
    with pytest.raises(UnitError, match="boolean"):
        parse(value, "size")


@pytest.mark.parametrize("value", [None, [1], {"a": 1}, "", "KiB", "1 2 KiB", "1KiB extra", "0x10"])
def test_malformed_values_show_an_example(value):
    with pytest.raises(UnitError, match="such as '512KiB'"):
        parse(value, "size")


def test_parse_size_returns_whole_bytes():
    size = parse_size("1.5KiB")
    assert size == 1536 and isinstance(size, int)


def test_parse_size_rejects_fractional_bytes():
    with pytest.raises(UnitError, match="whole number of bytes"):
        parse_size("0.5B")


def test_unit_error_is_a_value_error():
    assert issubclass(UnitError, ValueError)


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (1536 * 1024, "1.50 MiB"), (4 * 1024**3, "4.00 GiB")],
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text



@pytest.mark.parametrize("text, quantity", [("1.7555597020139804e+305KiB", "size"), ("1e300GB/s", "bandwidth"),
                                            ("2e305 MiB", "size")])
def test_a_finite_number_whose_unit_overflows_is_refused(text, quantity):
    """Found by the slow hardware fuzz: 1.7e305 KiB is finite, its bytes are not (was an
    OverflowError, exit 3, from ``int(inf)``)."""
    with pytest.raises(UnitError, match="overflows in the base unit"):
        parse_size(text) if quantity == "size" else parse(text, quantity)
