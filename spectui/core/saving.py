"""A reply's code block written back to a file (`/save PATH [N]`): what would change (a
unified diff against the file there), then the write, the old file kept as a backup. A
device, a FIFO or a folder at the path is refused before anything is read or written.
No textual here.
"""

from __future__ import annotations

import difflib
import errno
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from spectui.core.files import MB, FileTooLarge, NotAFile, read_capped, reason, write_text_atomically

SAVE_COMPARE_LIMIT = 8 * MB  # an existing file larger than this is not diffed (nor overwritten)


class WouldOverwrite(OSError):
    """A file is there and overwrite was not asked for."""


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


def backup_path(path: Path) -> Path:
    """`name.bak`, or the first `name.bak2`, `name.bak3`… not taken: no backup is overwritten."""
    candidate, number = path.with_name(f"{path.name}.bak"), 1
    while candidate.exists() or candidate.is_symlink():
        number += 1
        candidate = path.with_name(f"{path.name}.bak{number}")
    return candidate


def write_user_file(path: str | os.PathLike, data: str | bytes, *, overwrite: bool = False,
                    backup: bool = False) -> Path:
    """Write `data` at `path` (atomically); raises NotAFile at a device, FIFO or folder and
    WouldOverwrite where a file is and `overwrite` is False. With `backup`, the file that was
    there is renamed aside first. Returns the path written."""
    target = Path(path).expanduser()
    problem = _kind_problem(target)
    if problem is not None:
        raise problem
    if target.exists() and not overwrite:
        raise WouldOverwrite(errno.EEXIST, "a file is there", str(target))
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if backup and target.exists():
        aside = backup_path(target)
        try:
            os.link(target, aside)  # the old file's bytes stay as they are under the new name
        except OSError:
            shutil.copy2(target, aside)
    write_text_atomically(target, text)
    return target


@dataclass(frozen=True)
class SavePlan:
    path: Path
    text: str  # what would be written
    old: str | None  # the file there now (None: no file)

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
    try:
        old = read_capped(target, SAVE_COMPARE_LIMIT).decode("utf-8", errors="replace")
    except FileNotFoundError:
        old = None
    except (FileTooLarge, NotAFile, OSError) as error:
        return f"{path}: cannot read what is there ({reason(error)}); nothing written"
    return SavePlan(target, body, old)


def save(plan: SavePlan) -> str:
    """Write the plan (the old file kept beside it); the line that says what was done."""
    aside = backup_path(plan.path) if plan.old is not None else None
    try:
        written = write_user_file(plan.path, plan.text, overwrite=plan.old is not None, backup=plan.old is not None)
    except OSError as error:
        return f"{plan.path}: not written ({reason(error)})"
    lines = plan.text.count("\n")
    kept = f" · the old file kept as {aside.name}" if aside is not None else ""
    return f"Saved {written} · {lines} lines{kept}"
