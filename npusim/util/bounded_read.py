"""Reading an input file whole, bounded: plain or gzipped, never more than a cap in memory.

``read_bounded(path, cap)`` returns the bytes of ``path`` (gunzipped when it starts with the
gzip magic), reading in 1 MiB chunks and stopping as soon as the total passes ``cap``: a
1 MB gzip bomb that would expand to 6 GB, or ``/dev/zero`` behind a name, costs at most the
cap. ``json_cap(limit)`` is the cap for a JSON document: parsed JSON takes about
``JSON_EXPANSION`` times its text in Python objects, so the text may be at most the memory
limit (``NPUSIM_MEMORY_LIMIT`` or the free memory) over that, and at most ``limit``.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from npusim.util.env_knobs import memory_limit

#: Python objects per byte of JSON text (measured: 12-16x on traces and plans), rounded up.
JSON_EXPANSION = 20


class TooLarge(Exception):
    """The input passed the cap (``gzipped``: while expanding)."""

    def __init__(self, cap: int, gzipped: bool):
        super().__init__(cap)
        self.cap, self.gzipped = cap, gzipped


def json_cap(limit: int) -> int:
    """At most ``limit`` bytes, and no more than the memory limit allows parsing."""
    memory = memory_limit()
    return limit if memory is None else min(limit, memory // JSON_EXPANSION)


def read_bounded(path: Path, cap: int) -> bytes:
    """The (gunzipped) bytes of ``path``; TooLarge past ``cap``; OSError, EOFError and gzip
    errors as they come."""
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
        chunks, total = [], 0
        while total <= cap:  # in chunks: read(cap) would allocate it all
            chunk = stream.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    if total > cap:
        raise TooLarge(cap, gzipped)
    return b"".join(chunks)
