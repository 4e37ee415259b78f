"""Reading a file the user named (a key, the config, a theme, heads.json): a regular file,
read up to a cap. A link to /dev/zero, a FIFO nobody writes or a file of gigabytes would
otherwise fill memory or hang before any check of its content could refuse it.

The refusals are OSErrors whose strerror is the reason, so callers that already say
"cannot read it (<strerror>)" word them as one line with no change.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

KB = 1024
MB = 1024 * KB

# Caps by kind: far above any real file of that kind, far below what would hurt.
SMALL_FILE_LIMIT = 64 * KB  # an API key
SETTINGS_FILE_LIMIT = 1 * MB  # the config file, a theme, heads.json
TEXT_FILE_LIMIT = 64 * MB  # a prompt or training text
MODEL_JSON_LIMIT = 256 * MB  # a model's tokenizer.json: tens of MB for a large vocabulary


class NotAFile(OSError):
    """A device, FIFO, socket or folder where a file was expected."""


class FileTooLarge(OSError):
    """More bytes than the cap for its kind (or an endless device that passed as a file)."""


def _kind(mode: int) -> str:
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def size_words(limit: int) -> str:
    return f"{limit // MB} MB" if limit >= MB else f"{limit // KB} KB"


def read_capped(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them, else NotAFile or
    FileTooLarge (and OSErrors such as FileNotFoundError as open raises them)."""
    path = Path(path).expanduser()
    # O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(descriptor, "rb") as handle:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "a folder, not a file", str(path))
        if not stat.S_ISREG(mode):
            raise NotAFile(errno.EINVAL, f"{_kind(mode)}, not a regular file", str(path))
        return _read_at_most(handle, limit, str(path))


def read_stream_capped(stream, limit: int, name: str = "stdin") -> bytes:
    """Up to `limit` bytes of a stream (stdin piped from a file, or from /dev/zero)."""
    return _read_at_most(stream, limit, name)


def _read_at_most(handle, limit: int, name: str) -> bytes:
    data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(errno.EFBIG, f"larger than {size_words(limit)}", name)
    return data


def read_capped_text(path: str | os.PathLike, limit: int) -> str:
    """read_capped as UTF-8 (UnicodeDecodeError on a byte that is not)."""
    return read_capped(path, limit).decode("utf-8")


def reason(error: OSError) -> str:
    """The short why of an OSError, for the one line that names the file."""
    return error.strerror or str(error) or type(error).__name__


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Write under a temporary name beside `path`, then rename: a full disk or a kill leaves
    the old file (or none), never a cut or empty one. The OSError is the caller's to word."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    try:
        with open(partial, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
