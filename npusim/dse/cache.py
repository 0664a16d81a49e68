"""The DSE result cache (``.npusim-cache/``): finished points as authenticated JSON entries.

An entry is found by the point's key (a sha256 of everything that decides its row: trace
content, resolved hardware, pipeline, budget, options, npusim version and the code
fingerprint of ``npusim.dse.fingerprint``) at ``<folder>/<key[:2]>/<key>.json``, and holds
the key, the row (in its column order, so a cached row prints byte-identically to a fresh
one) and an HMAC-SHA256 of both under the cache's secret key.

Trust model. The secret is 32 random bytes made with the cache (``<folder>/secret``, mode
0600 in a folder of mode 0700) and never leaves it: whoever can write an entry but not read
the secret cannot make an entry that is reused, however they recompute a checksum. (Whoever
can read the secret -- the cache's owner, root -- can: the cache protects the results from
other users, damage and stale code, not from its owner.) A secret that is a link, not a
regular file, of the wrong size or readable by others is not used: nothing is read from the
cache (every point is computed, with one warning), and no entry is written.

A read trusts nothing else either:

- the entry is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a symlink is refused, a FIFO cannot
  block), must be a regular file by ``fstat`` and at most ``MAX_ENTRY_BYTES`` long, and at
  most that many bytes are read (``/dev/zero`` behind a name cannot fill memory);
- the JSON must parse, name this format and this key, carry the HMAC of both, and hold only
  finite numbers (a NaN row is never reused, nor written).

Anything else is recomputed, with one warning line on stderr (a missing entry silently).
Entries are written through ``npusim.util.atomic_io`` with ``follow_symlinks=False``: a fresh
``mkstemp`` file in the entry's folder renamed over the entry, so a planted link or FIFO is
replaced, never written through. Entries are JSON, never pickle.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import math
import os
import secrets
import stat
import sys
from pathlib import Path

from npusim.util.atomic_io import OutputError, atomic_open
from npusim.util.finite_json import loads_finite
from npusim.errors import NpusimError

CACHE_FORMAT = "npusim-dse-point/3"
SECRET_NAME = "secret"
SECRET_BYTES = 32
#: A row is ~1 KiB; anything much larger is not an entry this code wrote.
MAX_ENTRY_BYTES = 1 << 20


class BadEntry(Exception):
    """A cache entry that exists but cannot be trusted (the message says why)."""


def row_checksum(key: str, row: dict) -> str:
    """sha256 of the key and the row as written: what the entries of format 2 carried (anyone
    can recompute it; kept to show that it no longer suffices)."""
    return hashlib.sha256(_signed_text(key, row)).hexdigest()


def row_mac(secret: bytes, key: str, row: dict) -> str:
    """HMAC-SHA256 of the key and the row as written (column order included) under ``secret``."""
    return hmac.new(secret, _signed_text(key, row), hashlib.sha256).hexdigest()


def _signed_text(key: str, row: dict) -> bytes:
    return json.dumps([key, row], separators=(",", ":")).encode()


def non_finite(row: dict) -> str | None:
    """The first column holding NaN or an infinity, or None."""
    for column, value in row.items():
        if isinstance(value, float) and not math.isfinite(value):
            return column
    return None


def entry_text(secret: bytes, key: str, row: dict, about: dict) -> str:
    """The entry file's text: provenance first (for people), then key, row and HMAC."""
    return json.dumps({"format": CACHE_FORMAT, **about, "key": key, "row": row,
                       "hmac": row_mac(secret, key, row)}) + "\n"


def parse_entry(text: bytes, key: str, secret: bytes, columns: tuple | list | None = None) -> dict:
    """The row of an entry for ``key``, or ``BadEntry`` saying what is wrong.

    With ``columns``, the row must have exactly these keys in this order (what the code
    that computes rows gives), so a hand-made row cannot reach the results."""
    try:
        data = loads_finite(text)
    except (ValueError, RecursionError) as exc:
        raise BadEntry(f"not JSON ({str(exc)[:60]})") from None
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise BadEntry(f"format {found!r}, expected {CACHE_FORMAT!r}")
    if data.get("key") != key:
        raise BadEntry("the entry is for another key (a copied or renamed file)")
    row = data.get("row")
    if not isinstance(row, dict):
        raise BadEntry("no row")
    mac = data.get("hmac")
    if not isinstance(mac, str) or not hmac.compare_digest(mac, row_mac(secret, key, row)):
        raise BadEntry("HMAC mismatch (the entry was edited, damaged or made without this cache's secret)")
    if columns is not None and list(row) != list(columns):
        raise BadEntry("the row's columns are not the ones this npusim writes")
    if non_finite(row):
        raise BadEntry(f"column {non_finite(row)!r} is not a finite number")
    return row


def read_entry(path: Path) -> bytes | None:
    """The bytes of a regular, non-symlink file of at most MAX_ENTRY_BYTES; None if absent."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not hasattr(os, "O_NOFOLLOW") and path.is_symlink():  # Windows: no O_NOFOLLOW
        raise BadEntry("is a symlink")
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadEntry("is a symlink") from None
        raise BadEntry(f"cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BadEntry("is not a regular file")
        if info.st_size > MAX_ENTRY_BYTES:
            raise BadEntry(f"is {info.st_size:,} bytes, more than an entry's {MAX_ENTRY_BYTES:,}")
        chunks, left = [], MAX_ENTRY_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > MAX_ENTRY_BYTES:
            raise BadEntry(f"grew past {MAX_ENTRY_BYTES:,} bytes while being read")
        return data
    except OSError as exc:
        raise BadEntry(f"cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)


class Cache:
    """Rows of finished points, by key; ``folder=None`` is a cache that holds nothing."""

    def __init__(self, folder: str | Path | None, warn=None, columns: tuple | list | None = None):
        self.folder = Path(folder) if folder is not None else None
        self.columns = columns
        if self.folder is not None and self.folder.exists() and not self.folder.is_dir():
            raise NpusimError(f"--cache-dir {self.folder}: not a folder; expected a folder for the cache "
                              "(or --no-cache)")
        self._warn = warn or (lambda message: print(f"npusim: warning: {message}", file=sys.stderr))
        self._write_failed = False
        self._secret: bytes | None = None
        self._unusable = False  # the secret cannot be trusted: no read, no write

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        if self.folder is None:
            return None
        path = self.path(key)
        secret = self.secret(create=self.folder.is_dir())  # entries of a lost secret: refused, said so
        if secret is None:
            return None
        try:
            self._check_subfolder(path.parent)
            data = read_entry(path)
            return None if data is None else parse_entry(data, key, secret, self.columns)
        except BadEntry as exc:
            self._warn(f"cache entry {path}: {exc}; computing the point again")
            return None

    def put(self, key: str, row: dict, about: dict | None = None) -> None:
        if self.folder is None:
            return
        path = self.path(key)
        if non_finite(row):
            return  # never reused: not worth keeping
        secret = self.secret(create=True)
        if secret is None:
            return
        try:
            self._check_subfolder(path.parent, create=True)
            with atomic_open(path, "w", follow_symlinks=False) as handle:
                handle.write(entry_text(secret, key, row, about or {}))
        except (BadEntry, OutputError, OSError) as exc:
            if not self._write_failed:  # the rows are right; only the resume is lost: say so once
                self._warn(f"cache {self.folder}: cannot store a point ({exc}); continuing without caching")
            self._write_failed = True

    def secret(self, create: bool) -> bytes | None:
        """The cache's HMAC key: read once, made with the cache (``create``); None when there is
        none yet or it cannot be trusted (then one warning, and the cache is not used)."""
        if self._secret is not None or self._unusable:
            return self._secret
        path = self.folder / SECRET_NAME
        try:
            self._secret = _read_secret(path)
            if self._secret is None and create:
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._secret = _make_secret(path)
        except (BadEntry, OSError) as exc:
            self._unusable = True
            self._warn(f"cache {self.folder}: its secret {path} {exc}; computing every point, caching none "
                       "(delete the folder to start a fresh cache)")
        return self._secret

    def _check_subfolder(self, folder: Path, create: bool = False) -> None:
        """The two-letter subfolder must be a real folder, not a link to somewhere else."""
        try:
            info = os.lstat(folder)
        except FileNotFoundError:
            if not create:
                return
            folder.mkdir(parents=True, exist_ok=True)
            info = os.lstat(folder)
        except OSError as exc:  # e.g. a file where the cache folder should be
            raise BadEntry(f"{folder}: {exc.strerror}") from None
        if not stat.S_ISDIR(info.st_mode):
            raise BadEntry(f"{folder} is not a folder (a symlink or file where the cache expects a folder)")


def _read_secret(path: Path) -> bytes | None:
    """The secret's bytes, None if there is none; BadEntry if it cannot be trusted."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadEntry("is a symlink" if exc.errno == errno.ELOOP else f"cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BadEntry("is not a regular file")
        if info.st_mode & 0o077:
            raise BadEntry(f"is readable or writable by others (mode {stat.S_IMODE(info.st_mode):o}, expected 600)")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise BadEntry("belongs to another user")
        data = os.read(fd, SECRET_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != SECRET_BYTES:
        raise BadEntry(f"holds {len(data)} bytes, expected {SECRET_BYTES}")
    return data


def _make_secret(path: Path) -> bytes:
    """A fresh secret, created exclusively with mode 0600 (two sweeps starting together: the
    second reads the first's)."""
    data = secrets.token_bytes(SECRET_BYTES)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        found = _read_secret(path)
        if found is None:
            raise BadEntry("vanished while being made") from None
        return found
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return data
