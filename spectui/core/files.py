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
import secrets
import shutil
import stat
from pathlib import Path
from typing import BinaryIO

from spectui.core.safe_text import safe_line

KB = 1024
MB = 1024 * KB

# Caps by kind: far above any real file of that kind, far below what would hurt.
SMALL_FILE_LIMIT = 64 * KB  # an API key
SETTINGS_FILE_LIMIT = 1 * MB  # the config file, a theme, heads.json
TEXT_FILE_LIMIT = 64 * MB  # a prompt or training text
MODEL_JSON_LIMIT = 256 * MB  # a model's tokenizer.json: tens of MB for a large vocabulary


class NotAFile(OSError):
    """A device, FIFO, socket or folder where a file was expected."""


class WouldOverwrite(FileExistsError):
    """A file is already there and the caller did not say to replace it."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(errno.EEXIST, "already exists", str(path))

    def __str__(self) -> str:
        return f"{safe_line(str(self.filename))} already exists; not overwriting it"


class ReadOnlyFile(PermissionError):
    """A file the user made read-only: the writer goes by rename, which its folder allows, so
    --force (overwrite) would replace it; it is refused instead."""

    def __init__(self, path: str | os.PathLike, mode: int):
        super().__init__(errno.EACCES, f"read-only, mode {mode:04o}", str(path))
        self.mode = mode

    def __str__(self) -> str:
        return f"{safe_line(str(self.filename))} is read-only (mode {self.mode:04o}); not replacing it"


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


def read_stream_capped(stream: BinaryIO, limit: int, name: str = "stdin") -> bytes:
    """Up to `limit` bytes of a stream (stdin piped from a file, or from /dev/zero)."""
    return _read_at_most(stream, limit, name)


def _read_at_most(handle: BinaryIO, limit: int, name: str) -> bytes:
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


def write_user_file(path: Path | str, data: bytes | str, *, overwrite: bool = False, backup: bool = False) -> Path:
    """Write `data` (str as UTF-8) to the file the user named and return the path written.

    Regular files only: a device, FIFO, socket or folder is refused with NotAFile without
    being opened (a FIFO would block, a device would take the bytes); a link is followed
    only to a regular file (its target is written, the link kept). An existing file is
    WouldOverwrite unless `overwrite`; `backup` keeps its old content as `<name>.bak`.
    The bytes go to a temporary file beside the target, fsynced, then renamed over it:
    a full disk or a kill leaves the old file whole, and the old file's mode is kept."""
    target, existing = _replaceable_target(path, overwrite)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    mode = stat.S_IMODE(existing.st_mode) if existing is not None else None
    partial = _write_partial(target, payload, mode)
    try:
        if existing is not None and backup:
            _keep_backup(target)
        if existing is None:
            _link_new(partial, target, path)
        else:
            os.replace(partial, target)
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()
    _sync_folder(target.parent)
    return target


def check_user_file(path: Path | str, *, overwrite: bool = False) -> Path:
    """What write_user_file would refuse, found before the work that makes the data (a bench
    run of an hour): NotAFile, or WouldOverwrite for an existing file unless `overwrite`, and
    ReadOnlyFile for a read-only one even then. Only stat: nothing is opened or written.
    Returns the path a write would go to."""
    return _replaceable_target(path, overwrite)[0]


def _replaceable_target(path: Path | str, overwrite: bool) -> tuple[Path, os.stat_result | None]:
    """_writable_target, and an existing file refused unless `overwrite`, a read-only one always
    (its mode says nobody writes it; root passes os.access, so the bits are read too)."""
    target, existing = _writable_target(Path(path).expanduser())
    if existing is not None and not overwrite:
        raise WouldOverwrite(path)
    if existing is not None and not (existing.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
                                     and os.access(target, os.W_OK)):
        raise ReadOnlyFile(path, stat.S_IMODE(existing.st_mode))
    return target, existing


def _writable_target(path: Path) -> tuple[Path, os.stat_result | None]:
    """The path to write (a link's target) and its stat if a regular file is there, else
    NotAFile for anything that is not a regular file. Only stat: nothing is opened."""
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        return path, None
    target = Path(os.path.realpath(path)) if stat.S_ISLNK(link.st_mode) else path
    try:
        found = os.stat(target)
    except FileNotFoundError:
        raise NotAFile(errno.ENOENT, "a link to nothing, not a regular file", str(path)) from None
    if stat.S_ISDIR(found.st_mode):
        raise NotAFile(errno.EISDIR, "a folder, not a file", str(path))
    if not stat.S_ISREG(found.st_mode):
        raise NotAFile(errno.EINVAL, f"{_kind(found.st_mode)}, not a regular file", str(path))
    return target, found


def _write_partial(target: Path, payload: bytes, mode: int | None) -> Path:
    """A new file beside `target` holding `payload`, on the disk (fsync). Created 0666 less
    the umask, as any new file; given the old file's mode when one is replaced."""
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")
    try:
        with open(partial, "xb") as out:  # "x": never a file that was already there
            out.write(payload)
            out.flush()
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    return partial


def _link_new(partial: Path, target: Path, named: Path | str) -> None:
    """Put `partial` at `target` only if nothing is there yet: a hard link fails when a file
    appeared since the check, where a rename would replace it. Filesystems without hard
    links fall back to the rename."""
    try:
        os.link(partial, target)
    except FileExistsError:
        raise WouldOverwrite(named) from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        os.replace(partial, target)


def _keep_backup(target: Path) -> None:
    """The old content as `<name>.bak` (an older one replaced): a hard link to the old file,
    or a copy where links are not supported, put in place by rename."""
    backup = target.with_name(target.name + ".bak")
    staged = target.with_name(f".{target.name}.{secrets.token_hex(4)}.bak")
    try:
        try:
            os.link(target, staged)
        except OSError:
            shutil.copy2(target, staged)
        os.replace(staged, backup)
    finally:
        with contextlib.suppress(OSError):
            staged.unlink()


def _sync_folder(folder: Path) -> None:
    """fsync the folder so the rename itself survives a power cut (best effort)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def show_report(text: str, markdown: Path | str | None) -> None:
    """A benchmark script's Markdown: printed, and written to `markdown` when given (a rerun
    replaces its report; a device or FIFO there is refused)."""
    print(text)
    if markdown:
        write_user_file(markdown, text, overwrite=True)
