"""Tab in the message box: a command's name after `/`, a path after `@` or after `/file`
(the box's text in, the completed text out; None: Tab does what it did before), and the
pop-up list of commands while a `/` is typed."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from spectui.core.attachments import common_start, path_completions
from spectui.core.commands import complete, matching

PATH_COMMANDS = ("/file ", "/save ")


def complete_box(text: str, cwd: str | None = None) -> str | None:
    if matching(text):
        return complete(text)
    head, _, word = text.rpartition(" ")
    head = f"{head} " if _ else ""
    if word.startswith("@"):
        prefix, word = "@", word[1:]
    elif any(text.lstrip().startswith(command) for command in PATH_COMMANDS) and head:
        prefix = ""
    else:
        return None
    found = path_completions(word, cwd)
    longest = common_start(found)
    if not found or longest == word:
        return None
    return f"{head}{prefix}{longest}"


def hint_lines(text: str, limit: int = 8) -> list[str]:
    """What the pop-up list shows under a `/` being typed."""
    return [f"{spec.synopsis}  · {spec.help}" for spec in matching(text)[:limit]]


class CommandHints(Static):
    """The pop-up list of the commands a `/` being typed could become; Tab completes."""

    DEFAULT_CSS = """
    CommandHints { display: none; padding: 0 1; height: auto; max-height: 9;
                   background: $panel; color: $text-muted; }
    CommandHints.-open { display: block; }
    """

    def show(self, text: str) -> None:
        lines = hint_lines(text)
        self.set_class(bool(lines), "-open")
        if lines:
            self.update(Content("\n".join(lines + ["Tab completes · Enter runs"])))
