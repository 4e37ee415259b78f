"""The PROMPT of generate and compare: words on the command line, the text on stdin, or both.

`spectui generate "explain this" - < file.py` joins the instruction and the file; with no
PROMPT at all, a piped stdin is the whole message.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Optional

import typer

from spectui.core.errors import UsageError
from spectui.core.files import TEXT_FILE_LIMIT, FileTooLarge, read_stream_capped

STDIN = "-"



def prompt_argument(command: str) -> Any:  # typer.Argument says Any: its class is not public API
    """The PROMPT argument of `command`, its example naming that command."""
    return typer.Argument(
        metavar="PROMPT",
        help="The user message. Several parts are joined by blank lines; - is the text on stdin, "
        f"e.g. cat f.py | spectui {command} 'explain this' -. With no PROMPT, a piped stdin is the message.",
        show_default=False,
    )


FilesOption = Annotated[
    Optional[list[str]],
    typer.Option("--file", "-f", metavar="PATH",
                 help="Attach a file (its name, size, hash and text go into the message); repeatable, globs too.",
                 show_default=False),
]

# Spelled out (not built by a call) so the type checker reads them as types.
PromptArgument = Annotated[Optional[list[str]], prompt_argument("generate")]
ComparePromptArgument = Annotated[Optional[list[str]], prompt_argument("compare")]
STDIN_HINT = "spectui: reading the prompt from stdin; Ctrl+D ends it"


def read_prompt(parts: list[str] | None, example: str = 'spectui generate "def add(a, b):"') -> tuple[str, bool]:
    """(the prompt, whether it came from stdin) from PROMPT parts, with - as stdin's text."""
    parts = list(parts or [])
    if not parts and not sys.stdin.isatty():
        parts = [STDIN]
    if parts.count(STDIN) > 1:
        raise UsageError("- (stdin) can be given once")
    text = "\n\n".join(read_stdin() if part == STDIN else part for part in parts)
    if not text.strip():
        raise UsageError(f"the prompt is empty: give the message to reply to, e.g. {example}")
    return text, STDIN in parts


def read_stdin() -> str:
    # bytes, then UTF-8 with replacement: a file with a stray byte is still a prompt;
    # capped: stdin from /dev/zero would otherwise fill memory
    if sys.stdin.isatty():  # typed at a terminal: say what it is waiting for, and how it ends
        print(STDIN_HINT, file=sys.stderr, flush=True)
    try:
        data = read_stream_capped(sys.stdin.buffer, TEXT_FILE_LIMIT)
    except FileTooLarge as error:
        raise UsageError(f"the prompt on stdin is {error.strerror}: give a smaller file") from None
    return data.decode("utf-8", errors="replace").strip("\n")


def with_files(patterns: list[str] | None, text: str) -> str:
    """The message with the files -f names ahead of it, as the chat's /file attaches them; a
    file that cannot be attached (missing, binary, a FIFO, too large) is one line and no run."""
    if not patterns:
        return text
    from spectui.core.attachments import expand, message_with, read_attachment

    paths, problems = expand(patterns)
    read = [read_attachment(path) for path in paths]
    problems += [item for item in read if isinstance(item, str)]
    if problems:
        raise UsageError(f"--file: {'; '.join(problems)}")
    return message_with([item for item in read if not isinstance(item, str)], text)


def check_files(patterns: list[str] | None) -> list[str]:
    """The chat's -f files, checked before the app starts (the app attaches them)."""
    with_files(patterns, "")
    return list(patterns or [])
