"""The message box's commands: a line that starts with `/` is a command, never sent to the
model; `//` sends the line with one slash fewer. The table, the parsing and the completion
are here (pure, no textual): the chat screen only carries out what they say.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from spectui.core.safe_text import echoed


@dataclass(frozen=True)
class CommandSpec:
    name: str
    usage: str  # what follows the name ("" for nothing)
    help: str

    @property
    def synopsis(self) -> str:
        return f"/{self.name} {self.usage}".rstrip()


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("help", "", "list these commands"),
    CommandSpec("file", "PATH…", "attach files (globs too) to your next message"),
    CommandSpec("files", "", "list the files in this chat"),
    CommandSpec("drop", "NAME", "take an attached file out of the chat"),
    CommandSpec("save", "PATH [N]", "write the last reply's code block (or its Nth) to PATH"),
    CommandSpec("find", "TEXT", "find TEXT in this chat (n / N: next / previous)"),
    CommandSpec("continue", "", "continue the last reply where it stopped"),
    CommandSpec("edit", "", "edit the last reply (then /continue goes on from the edit)"),
    CommandSpec("think", "[on|off]", "thinking on or off, where the model's template has the switch"),
    CommandSpec("max", "N|off", "cap replies at N tokens (off: what the context leaves)"),
    CommandSpec("ctx", "", "show the context used and left"),
    CommandSpec("clear", "", "start a new chat"),
    CommandSpec("model", "", "choose the target, draft and method"),
    CommandSpec("k", "N|auto", "draft N tokens per step, or let k adapt"),
    CommandSpec("t", "X", "set the temperature"),
    CommandSpec("system", "", "edit this chat's system prompt"),
    CommandSpec("export", "[FOLDER]", "write this chat as Markdown, JSON and its trace"),
    CommandSpec("advise", "", "which drafter and k pay for your chats (replayed at T = 0)"),
)
BY_NAME = {spec.name: spec for spec in COMMANDS}


@dataclass(frozen=True)
class Command:
    """A known command: its name, the text after it (`rest`) and that text split as a shell would."""

    name: str
    rest: str = ""

    @property
    def args(self) -> list[str]:
        try:
            return shlex.split(self.rest)
        except ValueError:  # an unbalanced quote: take the words as typed
            return self.rest.split()


@dataclass(frozen=True)
class Unknown:
    name: str

    @property
    def message(self) -> str:
        return f"No command /{echoed(self.name)}: /help lists them (// sends a line that starts with a slash)."


@dataclass(frozen=True)
class Literal:
    """`//…`: the text to send, one slash taken off."""

    text: str


def parse(line: str) -> Command | Unknown | Literal | None:
    """What the box's text asks for; None: an ordinary message."""
    stripped = line.lstrip()
    if not stripped.startswith("/"):
        return None
    if stripped.startswith("//"):
        return Literal(stripped[1:])
    head, _, rest = stripped[1:].partition(" ")
    head, _, more = head.partition("\n")  # a command ends its name at a space or a line's end
    rest = f"{more}\n{rest}".strip() if more else rest.strip()
    name = head.lower()
    return Command(name, rest) if name in BY_NAME else Unknown(head)


def matching(line: str) -> list[CommandSpec]:
    """The commands the box's text could become (the pop-up list): none once a space follows
    the name or the text is not a command."""
    if not line.startswith("/") or line.startswith("//") or any(c.isspace() for c in line):
        return []
    typed = line[1:].lower()
    return [spec for spec in COMMANDS if spec.name.startswith(typed)]


def complete(line: str) -> str | None:
    """Tab: the longest text every matching command starts with (with a space after a whole,
    unique name); None when nothing matches or nothing would be added."""
    names = [spec.name for spec in matching(line)]
    if not names:
        return None
    common = names[0]
    for name in names[1:]:
        while not name.startswith(common):
            common = common[:-1]
    completed = f"/{common}" + (" " if len(names) == 1 else "")
    return completed if completed != line else None


def help_lines() -> list[str]:
    width = max(len(spec.synopsis) for spec in COMMANDS)
    return [f"{spec.synopsis:<{width}}  {spec.help}" for spec in COMMANDS]


K_DIGITS = 6  # /k and /save's N: far past any k or block count, far short of int()'s digit limit


def parse_k(text: str) -> int | str:
    """`/k`'s argument: a whole number of tokens from 0, or "auto". ValueError says why not."""
    word = text.strip().lower()
    if word == "auto":
        return "auto"
    # ASCII digits only ("²" is a digit to str.isdigit, not to int), and few of them: int() of
    # 5,000 digits raises its own limit's message
    if not (word.isascii() and word.isdigit()) or len(word) > K_DIGITS:
        raise ValueError(f"/k takes a whole number from 0 or auto, not {echoed(text.strip())!r}")
    return int(word)


def parse_temperature(text: str) -> float:
    """`/t`'s argument: a temperature from 0. ValueError says why not."""
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"/t takes a temperature such as 0 or 0.7, not {echoed(text.strip())!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"/t takes a temperature from 0, not {echoed(text.strip())!r}")
    return value


def parse_save(args: list[str]) -> tuple[str, int | None]:
    """`/save PATH [N]`: the path and the block's number (from 1), None for the last."""
    if not args or len(args) > 2:
        raise ValueError("/save takes a path and, if you want another than the last, a block's number: /save PATH [N]")
    if len(args) == 2:
        if not (args[1].isascii() and args[1].isdigit()) or len(args[1]) > K_DIGITS or int(args[1]) < 1:
            raise ValueError(f"/save's block number counts from 1, not {echoed(args[1])!r}")
        return args[0], int(args[1])
    return args[0], None
