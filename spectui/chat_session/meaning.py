"""What a line submitted in the message box means: a message to send now, one to wait for
the engine, one refused (it stays in the box), a question about files that would leave this
machine, a `/` command (with the message below a `/file` line), or the user's edit of the
last reply. The session decides (ChatSession.meaning); the screen acts on the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spectui.core.commands import Command


Severity = Literal["information", "warning", "error"]  # a notice's, as Textual names them


@dataclass(frozen=True)
class Send:
    """Send `text` now: the box empties."""

    text: str


@dataclass(frozen=True)
class Wait:
    """The engine is still loading: `text` is shown and goes once it is ready."""

    text: str


@dataclass(frozen=True)
class Refuse:
    """Not sent, for `why`; the line stays in the box to be sent later or put right."""

    why: str
    severity: Severity = "information"


@dataclass(frozen=True)
class Ask:
    """Its `@path` files would go to a server: `lines` say where; the next Enter sends them."""

    lines: tuple[str, ...]


@dataclass(frozen=True)
class RunCommand:
    """A `/` command (never sent to the model); `then`: what the lines below it mean, if any."""

    command: Command
    then: Meaning | None = None


@dataclass(frozen=True)
class KeepEdit:
    """The box held the last reply's text: `text` replaces the reply."""

    text: str


Meaning = Send | Wait | Refuse | Ask | RunCommand | KeepEdit


def file_then_message(command: Command) -> tuple[Command, str | None]:
    """`/file PATH…` on the first line and a request below it (the first screen's suggestion):
    the files are attached and the lines below go to the model with them."""
    if command.name != "file" or "\n" not in command.rest:
        return command, None
    paths, _, message = command.rest.partition("\n")
    return Command(command.name, paths.strip()), message.strip() or None
