"""Files the user brings into a chat: read safely, named, hashed, and written into the user's
turn as a fenced block headed by the file's name, so the model (and the drafters, which draft
from the prompt's tokens) see the file's text. No textual here.

A file goes into the turn that follows its `/file` (before the question), never into an
earlier turn: the prompt's beginning stays the same across follow-up questions, so the
engine's KV cache keeps it and a follow-up does not prefill the file again.
"""

from __future__ import annotations

import difflib
import glob
import hashlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from spectui.core.files import KB, MB, FileTooLarge, NotAFile, read_capped, reason, size_words
from spectui.core.safe_text import echoed, safe_text

ATTACHMENT_LIMIT = 512 * KB  # far above a source file anyone asks a small model about
# What the files waiting for one message may come to: far past any small model's context
# (32k tokens ≈ 128 KB), far below the 54 MB a `**/*.py` over site-packages read in one go.
FILES_AT_ONCE = 200
BYTES_AT_ONCE = 4 * MB
NAME_ECHO_LIMIT = 160  # characters of a path a one-line refusal repeats
_COUNT_AT_MOST = 10_000  # a glob over the whole disk stops being walked here
GLOB_SECONDS = 2.0  # a glob still walking folders after this is refused: the chat waits on it
CHARS_PER_TOKEN = 4  # the estimate where the engine gives no tokenizer on this side
_AT_PATH = re.compile(r"(?:^|(?<=\s))@(\S+)")
_BACKTICKS = re.compile(r"`{3,}")
# A block as `block` writes it, read back from a stored turn (a resumed chat).
_BLOCK = re.compile(
    r"File (?P<name>[^\n]+?) · [^\n·]+ · \d+ lines · sha256 (?P<hash>[0-9a-f]{12})\n"
    r"(?P<fence>`{3,})[^\n`]*\n(?P<body>(?:.*?\n)?)(?P=fence)(?:\n\n|\Z)",
    re.DOTALL,
)


@dataclass(frozen=True)
class Attachment:
    name: str  # as the user named it (relative paths stay relative): how the chat calls it
    path: str  # resolved, to tell a file attached twice
    size: int  # bytes
    sha256: str
    text: str

    @property
    def short_hash(self) -> str:
        return self.sha256[:12]

    @property
    def num_lines(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") or not self.text else 1)

    @property
    def estimated_tokens(self) -> int:
        return estimate_tokens(block(self))

    def header(self) -> str:
        return f"File {self.name} · {size_text(self.size)} · {self.num_lines} lines · sha256 {self.short_hash}"


def estimate_tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def size_text(size: int) -> str:
    if size < KB:
        return f"{size} B"
    return f"{size / KB:.1f} KB" if size < 1024 * KB else f"{size / (1024 * KB):.1f} MB"


def expand(patterns: list[str], cwd: str | os.PathLike | None = None,
           waiting: tuple[int, int] = (0, 0)) -> tuple[list[str], list[str]]:
    """The paths the patterns name (globs expanded, sorted, each once) and one line per
    pattern that names nothing. A name that exists as written is that file, never a glob
    (`page[1].txt`). Past FILES_AT_ONCE files or BYTES_AT_ONCE bytes, with the `waiting`
    (files, bytes) already attached, no path and one line that says how many matched."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    paths: list[str] = []
    problems: list[str] = []
    for pattern in patterns:
        expanded = os.path.expanduser(pattern)
        if glob.has_magic(expanded) and not os.path.lexists(base / expanded):
            found = _matches(expanded, base)
            if found is None:
                return [], [f"{echoed(pattern, NAME_ECHO_LIMIT)}: still walking folders after {GLOB_SECONDS:g} s, "
                            "so nothing was attached (name a narrower glob)"]
            if not found:
                problems.append(f"{echoed(pattern, NAME_ECHO_LIMIT)}: no file matches")
            paths.extend(found)
        else:
            paths.append(expanded)
    seen: set[str] = set()
    paths = [p for p in paths if not (p in seen or seen.add(p))]
    over = over_cap(paths, base, waiting)
    return ([], [over]) if over is not None else (paths, problems)


def _matches(pattern: str, base: Path) -> list[str] | None:
    """The glob's matches, sorted, at most _COUNT_AT_MOST + 1 of them; None when walking the
    folders takes past GLOB_SECONDS (`/**/*.xyz` walks the whole disk): the walk, on a thread
    of its own, stops at its next match."""
    found: list[str] = []
    stop = threading.Event()

    def walk() -> None:
        for path in glob.iglob(pattern, root_dir=base, recursive=True):
            if stop.is_set() or len(found) > _COUNT_AT_MOST:
                return
            found.append(path)

    walker = threading.Thread(target=walk, name="glob-walk", daemon=True)
    walker.start()
    walker.join(GLOB_SECONDS)
    if walker.is_alive():
        stop.set()
        return None
    return sorted(found)


def over_cap(paths: list[str], base: Path, waiting: tuple[int, int]) -> str | None:
    """The line that refuses `paths` with the `waiting` (files, bytes), past the caps."""
    files = len(paths) + waiting[0]
    size = waiting[1] + sum(_size(base / path) for path in paths)
    if files <= FILES_AT_ONCE and size <= BYTES_AT_ONCE:
        return None
    count = f"more than {_COUNT_AT_MOST:,}" if len(paths) > _COUNT_AT_MOST else f"{len(paths):,}"
    already = f" (with the {waiting[0]:,} already waiting)" if waiting[0] else ""
    return (f"{count} files match, {size_text(size)}{already}: at most {FILES_AT_ONCE} files and "
            f"{size_words(BYTES_AT_ONCE)} go with one message, so nothing was attached (name fewer)")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def read_attachment(name: str, cwd: str | os.PathLike | None = None) -> Attachment | str:
    """The file `name` as an attachment, or the one line that says why it is not one: a
    folder, a device, a FIFO, a binary, an unreadable or a huge file (never read past the cap)."""
    path = Path(cwd or Path.cwd()) / Path(name).expanduser()
    shown = echoed(name, NAME_ECHO_LIMIT)
    try:
        data = read_capped(path, ATTACHMENT_LIMIT)
    except FileTooLarge:
        return f"{shown}: larger than {size_words(ATTACHMENT_LIMIT)}, not attached"
    except IsADirectoryError:
        return f"{shown}: a folder, not attached (name its files, or a glob such as {shown.rstrip('/')}/*.py)"
    except NotAFile as error:
        return f"{shown}: {reason(error)}, not attached"
    except FileNotFoundError:
        return f"{shown}: no such file"
    except OSError as error:
        return f"{shown}: cannot read it ({reason(error)})"
    if b"\0" in data:
        return f"{shown}: a binary file, not attached"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{shown}: not UTF-8 text (a binary file?), not attached"
    return Attachment(file_name(name), str(path.resolve()), len(data), hashlib.sha256(data).hexdigest(), text)


def file_name(name: str) -> str:
    """A file's name as the chat shows and stores it: one line, every control a visible picture
    (a newline in it would break its block's header, which a resumed chat reads back)."""
    return safe_text(name).replace("\n", "\u240a").replace("\t", "\u2409")


def block(attachment: Attachment) -> str:
    """The file as the model reads it: a header line and a fence longer than any in the file."""
    longest = max((len(run) for run in _BACKTICKS.findall(attachment.text)), default=2)
    fence = "`" * max(3, longest + 1)
    language = Path(attachment.name).suffix.lstrip(".")
    body = attachment.text if attachment.text.endswith("\n") or not attachment.text else attachment.text + "\n"
    return f"{attachment.header()}\n{fence}{language}\n{body}{fence}"


def message_with(attachments: list[Attachment], text: str) -> str:
    """The user's turn: the files first (in the order attached), then what the user wrote."""
    return "\n\n".join([*(block(a) for a in attachments), text]) if attachments else text


def without(content: str, attachment: Attachment, shown: str | None = None) -> str:
    """The turn's text with the file's block (`shown`, else as `block` writes it) taken out (`/drop`)."""
    written = shown if shown is not None else block(attachment)
    return content.replace(written + "\n\n", "", 1).replace(written, "", 1)


def split_blocks(content: str) -> tuple[list[tuple[Attachment, str]], str]:
    """A stored user turn's files (each with its block's exact text) and what the user wrote:
    the blocks `message_with` put at its start, read back."""
    files: list[tuple[Attachment, str]] = []
    position = 0
    while (match := _BLOCK.match(content, position)) is not None:
        body = match.group("body")
        attachment = Attachment(match.group("name"), "", len(body.encode("utf-8")), match.group("hash"), body)
        files.append((attachment, match.group(0).removesuffix("\n\n")))
        position = match.end()
    return files, content[position:]


def changed_lines(old: str, new: str) -> tuple[int, int]:
    """Lines added and removed from `old` to `new`."""
    added = removed = 0
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def change_words(old: str, new: str) -> str:
    """How a file changed, for "x.py changed (...)": lines added and removed, or, where every
    line is the same, that only its line endings differ (a "+0 −0 lines" read as unchanged)."""
    added, removed = changed_lines(old, new)
    if added or removed:
        return f"+{added} −{removed} lines"
    return "only its line endings"  # the same lines: a newline at the end, or \r\n for \n


def at_paths(text: str) -> list[str]:
    """The `@path` words of a message (a trailing comma or full stop is not the path's)."""
    return [match.rstrip(".,;:!?)") for match in _AT_PATH.findall(text)]


def path_completions(word: str, cwd: str | os.PathLike | None = None, limit: int = 50) -> list[str]:
    """The paths `word` could grow into (folders end with /), for Tab after `@` or `/file`."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    folder, slash, start = word.rpartition("/")
    head = folder + slash  # what the completions keep of the word
    where = base / Path(head or ".").expanduser()
    try:
        entries = sorted(os.scandir(where), key=lambda entry: entry.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        if entry.name.startswith(start) and (start.startswith(".") or not entry.name.startswith(".")):
            found.append(f"{head}{entry.name}{'/' if entry.is_dir() else ''}")
    return found[:limit]


def common_start(words: list[str]) -> str:
    return os.path.commonprefix(words) if words else ""
