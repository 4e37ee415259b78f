"""A reply's code block written back to a file (`/save PATH [N]`): what would change (a
unified diff against the file there), then the write, the old file kept as a backup. A
device, a FIFO or a folder at the path is refused before anything is read or written
(core.files.write_user_file, the one safe writer, writes). No textual here.
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from spectui.core.files import MB, FileTooLarge, NotAFile, read_capped, reason, write_user_file

SAVE_COMPARE_LIMIT = 8 * MB  # an existing file larger than this is not diffed (nor overwritten)


def _kind_problem(path: Path) -> NotAFile | None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    what = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
        "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file"
    return NotAFile(errno.EINVAL, f"{what}, not a regular file", str(path))


def _read_only(path: Path) -> str | None:
    """The mode of an existing file nobody may write (0444), else None. The write goes by
    rename, which the folder allows, so the file's own mode is checked here; root passes
    os.access, so the bits are read too."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) and os.access(path, os.W_OK):
        return None
    return f"{stat.S_IMODE(mode):04o}"


@dataclass(frozen=True)
class SavePlan:
    path: Path  # the file written: a link's target, never the link
    text: str  # what would be written
    old: str | None  # the file there now (None: no file)
    named: Path | None = None  # the link the user named, when `path` is its target

    @property
    def title(self) -> str:
        """The file the question names: the real one, and the link it was reached by."""
        return f"{self.path} (through the link {self.named})" if self.named is not None else str(self.path)

    @property
    def backup(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    @property
    def diff(self) -> str:
        old = self.old if self.old is not None else ""
        return "".join(difflib.unified_diff(old.splitlines(keepends=True), self.text.splitlines(keepends=True),
                                            fromfile=f"{self.path} (now)", tofile=f"{self.path} (the reply's)"))

    @property
    def unchanged(self) -> bool:
        return self.old == self.text


def plan_save(path: str, text: str, cwd: str | os.PathLike | None = None) -> SavePlan | str:
    """What saving `text` at `path` would do, or the one line that says why it cannot."""
    target = Path(cwd or Path.cwd()) / Path(path).expanduser()
    body = text if text.endswith("\n") else text + "\n"
    problem = _kind_problem(target)
    if problem is not None:
        return f"{path}: {reason(problem)}; nothing written"
    if not target.parent.is_dir():
        return f"{path}: no folder {target.parent}; nothing written"
    named = target if target.is_symlink() else None
    target = Path(os.path.realpath(target)) if named is not None else target
    if named is not None and not target.exists():  # never a new file wherever a link points
        return f"{path}: a link to nothing ({target}); nothing written"
    read_only = _read_only(target)
    if read_only is not None:
        return f"{path}: read-only (mode {read_only}); nothing written (make it writable first)"
    try:
        old = read_capped(target, SAVE_COMPARE_LIMIT).decode("utf-8", errors="replace")
    except FileNotFoundError:
        old = None
    except (FileTooLarge, NotAFile, OSError) as error:
        return f"{path}: cannot read what is there ({reason(error)}); nothing written"
    return SavePlan(target, body, old, named)


def save(plan: SavePlan) -> str:
    """Write the plan (the old file kept beside it); the line that says what was done."""
    read_only = _read_only(plan.path)  # made read-only since the question
    if read_only is not None:
        return f"{plan.path}: not written (read-only, mode {read_only})"
    try:
        written = write_user_file(plan.path, plan.text, overwrite=plan.old is not None, backup=plan.old is not None)
    except OSError as error:
        return f"{plan.path}: not written ({reason(error)})"
    lines = plan.text.count("\n")
    aside = written.with_name(written.name + ".bak")  # beside the file written, a link's target
    kept = f" · the old file kept as {aside}" if plan.old is not None and aside.exists() else ""
    return f"Saved {written} · {lines} lines{kept}"
