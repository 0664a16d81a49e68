"""Physical address -> (channel, rank, bank group, bank, row, column) of a DRAM device.

A mapping is written as Ramulator's address mappers name them, most significant field
first: ``RoBaRaCoCh`` (row | bank | rank | column | channel), ``ChRaBaRoCo``,
``RoRaBaCoBgCh`` (bank groups just above the channel bits: consecutive accesses of a channel
alternate between groups). Fields: ``Ro`` row, ``Ra`` rank, ``Bg`` bank group, ``Ba`` bank
within its group, ``Co`` column (one access of ``bus bytes x BL`` per column), ``Ch``
channel. Every field appears once; ``Bg`` left out goes just below ``Ba`` (Ramulator's mappers
slice the bank group and the bank as one field ``Ba``, the group in its low bits), so
Ramulator's ``RoBaRaCoCh`` is ``RoBaBgRaCoCh`` here.

Below the fields are the bits of one access (``log2(access bytes)``). Each field takes
``log2(count)`` bits (counts must be powers of two, checked by ``parse_mapping``); the row
takes what is left above the others, modulo the rows of a bank. This is DRAMsim3's and
Ramulator's bit-slicing scheme (DRAMsim3 ``Config::AddressMapping``; Ramulator 2
``RoBaRaCoCh`` address mapper).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.dram.presets import DramDevice

FIELDS = ("Ro", "Ra", "Bg", "Ba", "Co", "Ch")
#: The most channels (``dram.channels``' maximum): the banks model looks at every channel for each
#: access (a 1 PB/s bus of LPDDR4 would be 16,384 channels and run for minutes), and 512 is more
#: than eight stacks of HBM3 have.
MAX_CHANNELS = 512


@dataclass(frozen=True)
class Mapping:
    """Bit positions (shift, bits) of each field above the access offset."""

    text: str
    offset_bits: int
    shift: dict
    bits: dict
    rows: int

    def decode(self, addresses: np.ndarray) -> dict[str, np.ndarray]:
        """Field arrays (int64) of byte addresses."""
        a = np.asarray(addresses, dtype=np.int64) >> self.offset_bits
        out = {}
        for name in FIELDS:
            if name == "Ro":
                out[name] = (a >> self.shift[name]) % self.rows
            else:
                out[name] = (a >> self.shift[name]) & ((1 << self.bits[name]) - 1)
        return out


def _log2(n: int) -> int | None:
    n = int(n)
    return n.bit_length() - 1 if n > 0 and n & (n - 1) == 0 else None


def mapping_fields(text: str) -> list[str]:
    """The fields of mapping ``text``, most significant first (Bg placed just below Ba when left
    out): what any device needs of it, so a sweep can refuse a malformed one before its points.

    Raises ValueError with what was expected."""
    s = str(text).strip()
    tokens = [s[i:i + 2] for i in range(0, len(s), 2)]
    if len(s) % 2 or any(t not in FIELDS for t in tokens):
        raise ValueError(f"expected two-letter fields from {', '.join(FIELDS)}, most significant first, "
                         "e.g. 'RoBaRaCoCh'")
    if len(set(tokens)) != len(tokens):
        raise ValueError("a field appears twice; each of " + ", ".join(FIELDS) + " at most once")
    if "Bg" not in tokens and "Ba" in tokens:  # Ramulator's Ba: the bank group in its low bits
        tokens.insert(tokens.index("Ba") + 1, "Bg")
    missing = [f for f in FIELDS if f not in tokens and f != "Bg"]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}; expected each of Ro, Ra, Ba, Co, Ch once, and Bg "
                         "(left out: just below Ba)")
    return tokens


def check_own(key: str, value) -> None:
    """Raise ValueError (what was expected) when ``dram.channels`` or ``dram.mapping`` is wrong on
    its own, whatever the part and whichever DRAM model runs: a channel count that is not a power
    of two (the mapping slices bits), a mapping that is not one (``mapping_fields``). The loader
    refuses them for every model and a sweep before its points (a malformed field of a
    bandwidth-model config passed ``doctor`` with a note)."""
    if key == "dram.mapping" and value:
        mapping_fields(value)
    elif key == "dram.channels" and value and int(value) & (int(value) - 1):
        raise ValueError("expected a power of two (the address mapping slices bits), or 0")


def parse_mapping(text: str, device: DramDevice, channels: int, ranks: int) -> Mapping:
    """The mapping ``text`` for ``channels`` channels of ``device`` with ``ranks`` ranks each.

    Raises ValueError with what was expected (the loader turns it into a one-line error)."""
    tokens = mapping_fields(text)
    s = "".join(tokens)
    counts = {"Ra": ranks, "Bg": device.bankgroups, "Ba": device.banks_per_group, "Co": device.columns,
              "Ch": channels}
    bits = {}
    for name, count in counts.items():
        b = _log2(count)
        if b is None:
            raise ValueError(f"{name} count {count} is not a power of two: the bit-sliced mapping needs one")
        bits[name] = b
    offset = _log2(device.access_bytes)
    if offset is None:
        raise ValueError(f"access of {device.access_bytes} B is not a power of two")
    bits["Ro"] = max(_log2(device.rows) or 0, 0)
    shift, pos = {}, 0
    for name in reversed(tokens):
        shift[name] = pos
        pos += bits[name]
    shift.setdefault("Bg", 0)
    return Mapping(s, offset, shift, bits, device.rows)
