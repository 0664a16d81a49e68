"""Writing output files whole or not at all.

Every file npusim writes (plans, reports, timelines, traces, CSV/JSON results, goldens,
figures, cache entries) goes through :func:`atomic_open` (or its two shorthands): the data
goes to a fresh temporary file in the target's own folder (``tempfile.mkstemp``: an
unpredictable name, created exclusively, so a planted symlink is never followed), is
flushed and ``fsync``-ed, and only then renamed over the target with ``os.replace``, which
is atomic on POSIX and Windows within one file system. A failure at any step (a full disk,
a quota, a crash, an exception of the caller) removes the temporary file and leaves the
previous file, if any, exactly as it was.

One kind of target is written in place instead, because renaming over it would be wrong:
a target that exists and is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO;
``/dev/full`` then fails with ENOSPC as it should). A symlink to a regular file is
followed: the file it points to is replaced, the link stays. The replaced file keeps its
permission bits. A process killed mid-write can leave a ``.NAME.*.tmp`` file beside the
target, never a torn target.

An ``OSError`` while writing becomes an :class:`OutputError` (a user error, exit 2) whose
one-line message names the file, the reason, and that the previous file is untouched.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Iterator

from npusim.errors import NpusimError


class OutputError(NpusimError):
    """An output file could not be written (full disk, no permission, missing folder...)."""


@functools.cache
def _umask() -> int:
    """The process umask (read once: setting it back and forth is not thread-safe)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _describe(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8",
                newline: str | None = None, file_mode: int | None = None,
                follow_symlinks: bool = True) -> Iterator[IO]:
    """A file object for ``path`` that replaces it only when the ``with`` block succeeds.

    ``mode`` is ``"w"`` (text) or ``"wb"`` (bytes). ``file_mode`` is the new file's
    permission bits (default: those of the file replaced, else 0o666 minus the umask, as
    ``open`` would give). With ``follow_symlinks=False`` (the result cache) whatever sits at
    ``path`` -- a symlink, a FIFO, a device -- is itself replaced by the new regular file;
    nothing it points to is opened or written.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    binary = mode == "wb"
    kwargs = {} if binary else {"encoding": encoding, "newline": newline}
    real = Path(os.path.realpath(target)) if follow_symlinks else Path(os.path.abspath(target))
    try:
        st = os.stat(real) if follow_symlinks else os.lstat(real)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {_describe(exc)}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{target}: is a folder, expected a file name")
    if st is not None and not stat.S_ISREG(st.st_mode) and follow_symlinks:
        # a device or FIFO: there is nothing to keep whole, and renaming over it would destroy it
        try:
            with open(real, mode, **kwargs) as handle:
                yield handle
        except OSError as exc:
            raise OutputError(f"{target}: cannot write: {_describe(exc)}") from None
        return
    folder = real.parent
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {_describe(exc)}") from None
    try:
        try:
            handle = os.fdopen(fd, mode, **kwargs)
        except BaseException:
            os.close(fd)
            raise
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
            if hasattr(os, "fchmod"):  # mkstemp made it 0600: keep the old file's mode, or open()'s
                if file_mode is None:
                    regular = st is not None and stat.S_ISREG(st.st_mode)  # not a replaced link's 0777
                    file_mode = stat.S_IMODE(st.st_mode) if regular else 0o666 & ~_umask()
                os.fchmod(handle.fileno(), file_mode)
        os.replace(tmp_name, real)
    except OSError as exc:
        _remove(tmp_name)
        raise OutputError(f"{target}: cannot write: {_describe(exc)} "
                          "(the previous file, if any, is unchanged)") from None
    except BaseException:
        _remove(tmp_name)
        raise
    _fsync_folder(folder)


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8", newline: str | None = None) -> None:
    """Replace ``path`` with ``text``, whole or not at all."""
    with atomic_open(path, "w", encoding=encoding, newline=newline) as handle:
        handle.write(text)


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); harmless where folders cannot be opened."""
    flags = getattr(os, "O_DIRECTORY", None)
    if flags is None:
        return
    try:
        fd = os.open(folder, os.O_RDONLY | flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
