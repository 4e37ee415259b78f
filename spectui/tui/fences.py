"""Markdown code fences, line by line: which lines open a code block, hold code, close it.

One rule for the token view (which draws a fence as a code block while the reply streams)
and for the copy key (which takes a block's text), after CommonMark: a fence is three or
more backticks or tildes, indented at most three spaces; a backtick fence's info string
(the language) holds no backtick; the closing fence is the same character, at least as
long, with nothing after it but spaces. A fence left open runs to the end of the text.
No textual here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spectui.core import reasoning

PROSE, OPEN, CODE, CLOSE = "prose", "open", "code", "close"
# A reasoning model's `<think>` block (spectui.core.reasoning), when its tags stand on their
# own lines as models write them: the opening tag's line, the thinking, the closing tag's line.
THINK_OPEN, THINK, THINK_CLOSE = "think-open", "think", "think-close"
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class Fence:
    char: str
    length: int
    indent: int
    language: str


def opening_fence(line: str) -> Fence | None:
    match = _FENCE.match(line)
    if match is None:
        return None
    indent, marks, info = match.groups()
    if marks[0] == "`" and "`" in info:
        return None
    words = info.split()
    return Fence(marks[0], len(marks), len(indent), words[0] if words else "")


def closes(fence: Fence, line: str) -> bool:
    match = _FENCE.match(line)
    return match is not None and match.group(2)[0] == fence.char and len(match.group(2)) >= fence.length \
        and not match.group(3).strip()


class FenceState:
    """Fed the text's lines in order (`feed`); `kind_of` says what a line would be now,
    without moving on: a streaming line's kind can change as its characters arrive."""

    def __init__(self) -> None:
        self.fence: Fence | None = None  # the open fence
        self.thinking = False  # inside a <think> block: no fences there, only its closing tag

    def kind_of(self, line: str) -> str:
        if self.thinking:
            return THINK_CLOSE if line.strip() == reasoning.THINK_CLOSE else THINK
        if self.fence is None:
            if line.strip() == reasoning.THINK_OPEN:
                return THINK_OPEN
            return OPEN if opening_fence(line) is not None else PROSE
        return CLOSE if closes(self.fence, line) else CODE

    def feed(self, line: str) -> str:
        kind = self.kind_of(line)
        if kind == OPEN:
            self.fence = opening_fence(line)
        elif kind == CLOSE:
            self.fence = None
        elif kind in (THINK_OPEN, THINK_CLOSE):
            self.thinking = kind == THINK_OPEN
        return kind

    @property
    def body(self) -> str:
        """The kind of a line that can no longer become a fence or a tag."""
        return CODE if self.fence is not None else THINK if self.thinking else PROSE


def may_become_fence(line: str) -> bool:
    """Could more characters make this line start (or close) a fence? False for nearly every
    line after its first few characters, which spares the streaming view the question."""
    stripped = line.lstrip(" ")
    if reasoning.THINK_OPEN.startswith(line.strip()) or reasoning.THINK_CLOSE.startswith(line.strip()):
        return True
    if len(line) - len(stripped) > 3:
        return False
    head = stripped[:3]
    return head == head[:1] * len(head) and head[:1] in ("", "`", "~")


@dataclass(frozen=True)
class CodeBlock:
    language: str
    text: str  # the lines between the fences, without the newline before the closing one
    closed: bool = True  # False: the text ended inside the block (a reply cut at max tokens)

    @property
    def num_lines(self) -> int:
        return self.text.count("\n") + 1


def code_blocks(text: str) -> list[CodeBlock]:
    """The text's fenced code blocks, in order, as the model wrote them (the fence's
    indentation taken off each line, as CommonMark does)."""
    blocks: list[CodeBlock] = []
    state = FenceState()
    lines: list[str] = []
    for line in text.split("\n"):
        fence = state.fence
        kind = state.feed(line)
        if kind == OPEN:
            lines = []
        elif kind in (CODE, CLOSE):
            assert fence is not None, "code lines and a closing fence come inside an open fence"
            if kind == CODE:
                lines.append(_dedent(line, fence.indent))
            else:
                blocks.append(CodeBlock(fence.language, "\n".join(lines)))
    if state.fence is not None:  # cut off: the block runs to the end (its last newline is no line)
        if lines and not lines[-1]:
            lines.pop()
        blocks.append(CodeBlock(state.fence.language, "\n".join(lines), closed=False))
    return blocks


def _dedent(line: str, indent: int) -> str:
    stripped = line.lstrip(" ")
    return line[min(indent, len(line) - len(stripped)):]
