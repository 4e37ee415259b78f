"""Checksums of the files a model folder is made of: recorded when written, checked on use.

The first load after a download (or after a verify found damage) hashes every byte; later
loads make a quick check: each file's size, the full sha256 of the small files and, for the
large weight files, the sha256 of a 4 KiB sample every 128 KiB (any damage that spans 132 KiB
or more, and any truncation, is caught in a few tens of milliseconds). A flip between the
samples written through the filesystem changes the file's stamp (inode, mtime, ctime: the
ctime cannot be set back), recorded beside its hash: a stamp that changed makes the quick
check hash that file whole. `spectui models verify` and `spectui doctor` hash every byte.
spectui.models.cache records which folders passed the full check.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

SMALL_FILE_BYTES = 32 * 1024 * 1024  # hashed whole even in the quick check
SAMPLE_STRIDE = 128 * 1024
SAMPLE_BYTES = 4096
_READ_BYTES = 8 * 1024 * 1024

ByteProgress = Callable[[int, int], None]  # (bytes done, bytes in all)


def sha256_of(path: Path, progress: ByteProgress | None = None, total: int = 0) -> str:
    digest = hashlib.sha256()
    done = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_READ_BYTES):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return digest.hexdigest()


def sampled_sha256(path: Path, size: int) -> str:
    """sha256 of the file's first SAMPLE_BYTES in every SAMPLE_STRIDE bytes, and of its size."""
    digest = hashlib.sha256(size.to_bytes(8, "little"))
    with open(path, "rb", buffering=0) as handle:
        fd = handle.fileno()
        for offset in range(0, size, SAMPLE_STRIDE):
            digest.update(os.pread(fd, SAMPLE_BYTES, offset))
    return digest.hexdigest()


def stamp_of(path: Path) -> list[int]:
    """What any write to the file changes: its inode, mtime and ctime (a stat: no read)."""
    found = path.stat()
    return [found.st_ino, found.st_mtime_ns, found.st_ctime_ns]


def record(folder: Path, names: list[str]) -> dict[str, dict]:
    """{file name: {size, sha256[, sampled_sha256, stamp]}} for the files `names` of `folder`."""
    records = {}
    for name in names:
        path = folder / name
        size = path.stat().st_size
        entry: dict = {"size": size, "sha256": sha256_of(path)}
        if size > SMALL_FILE_BYTES:
            entry["sampled_sha256"] = sampled_sha256(path, size)
            entry["stamp"] = stamp_of(path)
        records[name] = entry
    return records


def _sampled_problem(path: Path, size: int, entry: dict) -> bool:
    """The quick check of a large file: its samples, and every byte where its stamp changed
    since the record (a write the samples may miss). A whole hash that matches takes the new
    stamp into `entry`, for the caller to keep."""
    if sampled_sha256(path, size) != entry["sampled_sha256"]:
        return True
    stamp = stamp_of(path)
    if "stamp" not in entry or entry["stamp"] == stamp:
        return False
    if sha256_of(path) != entry["sha256"]:
        return True
    entry["stamp"] = stamp
    return False


def quick_problem(folder: Path, records: dict[str, dict]) -> str | None:
    """What is wrong with the files of `folder` by the quick check, or None."""
    for name, entry in records.items():
        path = folder / name
        try:
            size = path.stat().st_size
            if size != entry["size"]:
                return f"{name} has {size:,} bytes where {entry['size']:,} were written"
            if "sampled_sha256" in entry:
                if _sampled_problem(path, size, entry):
                    return f"{name} does not match its checksum"
            elif sha256_of(path) != entry["sha256"]:
                return f"{name} does not match its checksum"
        except OSError as error:
            return f"{name} cannot be read ({error.strerror or error})"
    return None


def full_problem(folder: Path, records: dict[str, dict], progress: ByteProgress | None = None) -> str | None:
    """What is wrong with the files of `folder`, every byte hashed; None when all match."""
    total = sum(entry["size"] for entry in records.values())
    done = 0
    for name, entry in records.items():
        path = folder / name
        try:
            size = path.stat().st_size
            if size != entry["size"]:
                return f"{name} has {size:,} bytes where {entry['size']:,} were written"
            start = done

            def report(file_done: int, _total: int) -> None:
                if progress is not None:
                    progress(start + file_done, total)

            if sha256_of(path, report) != entry["sha256"]:
                return f"{name} does not match its checksum"
        except OSError as error:
            return f"{name} cannot be read ({error.strerror or error})"
        done += entry["size"]
    return None
