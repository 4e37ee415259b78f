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
    aside = plan.path.with_name(plan.path.name + ".bak") if plan.old is not None else None
    try:
        written = write_user_file(plan.path, plan.text, overwrite=plan.old is not None, backup=plan.old is not None)
    except OSError as error:
        return f"{plan.path}: not written ({reason(error)})"
    lines = plan.text.count("\n")
    kept = f" · the old file kept as {aside.name}" if aside is not None else ""
    return f"Saved {written} · {lines} lines{kept}"
