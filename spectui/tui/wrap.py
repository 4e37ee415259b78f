"""Incremental word wrap of styled text: appending costs the appended characters only.

A reply streams in one token at a time; re-wrapping the whole reply for every frame would
fall behind a fast GPU. Lines are lists of (char, kind) kept as two parallel lists so the
tail word can move to a new line without splitting runs. No textual import here.

Markdown code fences are followed as the text arrives (spectui.tui.fences): every wrapped
line says which part of a fence it is (`block`), code lines wrap narrower (the view pads
them), and a fence line is never wrapped (the view draws it as the block's label or its
end). A line's kind can change while it streams ("``" becomes "```"): only then, and only
for that line, is it wrapped again; a line stops being watched once its first characters
rule a fence out, so a long reply pays for this a few characters a line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.cells import cell_len

from spectui.tui.fences import CODE, OPEN, PROSE, THINK, FenceState, may_become_fence, opening_fence
from spectui.tui.think_lines import ThinkLines

_PIECES = re.compile(r"\n|\t|[^ \t\n]+| ")
CODE_PAD = 1  # columns of the code block's background left and right of its text
UNWRAPPED = 1 << 30  # a fence line's width: it is drawn as a label, never wrapped
TAB_WIDTH = {PROSE: " ", CODE: "    ", THINK: " "}


class WrappedLine:
    __slots__ = ("chars", "kinds", "width", "last_space", "block", "language")

    def __init__(self, block: str = PROSE) -> None:
        self.chars: list[str] = []
        self.kinds: list[str] = []
        self.width = 0  # cells
        self.last_space = -1  # index of the last space, where a word wrap may cut
        self.block = block  # spectui.tui.fences: prose, or a fence's open / code / close line
        self.language = ""  # an opening fence's info string's first word

    def runs(self) -> list[tuple[str, str]]:
        """Consecutive characters of one kind, joined: what a renderer draws."""
        runs: list[tuple[str, str]] = []
        start = 0
        kinds = self.kinds
        for index in range(1, len(kinds) + 1):
            if index == len(kinds) or kinds[index] != kinds[start]:
                runs.append(("".join(self.chars[start:index]), kinds[start]))
                start = index
        return runs

    @property
    def text(self) -> str:
        return "".join(self.chars)


class StyledWrapper:
    """Styled chunks wrapped to `width` cells; `hidden` kinds are left out.

    rewrapped_from: the first line a fence change wrapped again since the reader last
    looked (None: none); the reader resets it."""

    def __init__(self, width: int, hidden: Iterable[str] = ()) -> None:
        self.width = max(1, width)
        self.code_width = max(1, self.width - 2 * CODE_PAD)
        self.hidden = frozenset(hidden)
        self.lines: list[WrappedLine] = [WrappedLine()]
        self.fences = FenceState()
        self.tags = ThinkLines()  # inline <think> tags put on lines of their own
        self.rewrapped_from: int | None = None
        self._start_line(PROSE)

    def extend(self, chunks: Iterable[tuple[str, str]]) -> None:
        for text, kind in chunks:
            self.append(text, kind)

    def append(self, text: str, kind: str) -> None:
        if kind in self.hidden:
            return
        # Line by line where a tag may be: a line's code fence decides for the lines after it.
        for line in text.splitlines(keepends=True) if "<" in text and "\n" in text else (text,):
            for shown, shown_kind in self.tags.feed(line, kind, in_code=self.fences.fence is not None):
                self._append(shown, shown_kind)

    def flush(self) -> bool:
        """Draw what was held as the start of a tag: the text ended (True if there was any)."""
        held = self.tags.flush()
        for text, kind in held:
            self._append(text, kind)
        return bool(held)

    def _append(self, text: str, kind: str) -> None:
        if "\r" in text:
            text = text.replace("\r", "")
        for piece in _PIECES.findall(text):
            if piece == "\n":
                self._end_line()
                continue
            if piece == "\t":  # spaces, as many as the line's kind indents by
                for space in TAB_WIDTH.get(self._block, " "):
                    self._place(space, kind)
            else:
                self._place(piece, kind)
            if self._watching:
                self._watch(piece, kind)

    # one line of the text (between newlines), watched while it may be a fence

    def _start_line(self, block: str) -> None:
        self._block = block
        self._first = len(self.lines) - 1  # its first wrapped line
        self._watching = True
        self._text = ""  # what it says so far, ghosts left out
        self._chars: list[tuple[str, str]] = []  # ghosts included: to wrap it again

    def _watch(self, piece: str, kind: str) -> None:
        self._chars.extend((char, kind) for char in piece)
        if kind != "ghost":
            self._text += piece
        if may_become_fence(self._text):
            block = self.fences.kind_of(self._text)
        else:
            self._watching = False
            block = self.fences.body
        if block != self._block:
            self._block = block
            self._wrap_again()
        if block == OPEN:
            fence = opening_fence(self._text)
            assert fence is not None, "the line that opened a block is an opening fence"
            self.lines[self._first].language = fence.language

    def _end_line(self) -> None:
        if self._watching:
            self.fences.feed(self._text)
        self.lines.append(WrappedLine(self.fences.body))
        self._start_line(self.lines[-1].block)

    def _wrap_again(self) -> None:
        del self.lines[self._first:]
        self.lines.append(WrappedLine(self._block))
        first = self._first
        self.rewrapped_from = first if self.rewrapped_from is None else min(self.rewrapped_from, first)
        for char, kind in self._chars:
            for shown in TAB_WIDTH.get(self._block, " ") if char == "\t" else char:
                self._put(shown, kind)

    @property
    def _line_width(self) -> int:
        # Reasoning wraps as code does: the view draws a bar in the pad's columns.
        return self.width if self._block == PROSE else self.code_width if self._block in (CODE, THINK) else UNWRAPPED

    # wrapping

    def _place(self, piece: str, kind: str) -> None:
        line = self.lines[-1]
        width = cell_len(piece)
        if piece != " " and line.width + width <= self._line_width:
            # A whole word that fits: the common case, without a per-character loop.
            line.chars.extend(piece)
            line.kinds.extend([kind] * len(piece))
            line.width += width
        else:
            for char in piece:
                self._put(char, kind)

    def _put(self, char: str, kind: str) -> None:
        width = cell_len(char)
        line = self.lines[-1]
        if line.width + width > self._line_width:
            if char == " ":
                # A space at the edge is the break itself; the next line starts clean.
                self.lines.append(WrappedLine(self._block))
                return
            line = self._break(line)
        line.chars.append(char)
        line.kinds.append(kind)
        line.width += width
        if char == " ":
            line.last_space = len(line.chars) - 1

    def _break(self, line: WrappedLine) -> WrappedLine:
        new_line = WrappedLine(self._block)
        cut = line.last_space
        if cut > 0:
            # Move the word after the last space; the space stays at the end of the line.
            new_line.chars = line.chars[cut + 1 :]
            new_line.kinds = line.kinds[cut + 1 :]
            new_line.width = sum(cell_len(c) for c in new_line.chars)
            del line.chars[cut + 1 :]
            del line.kinds[cut + 1 :]
            line.width -= new_line.width
            line.last_space = -1  # this line is closed; never cut it again
        self.lines.append(new_line)
        return new_line

    @property
    def num_lines(self) -> int:
        if len(self.lines) == 1 and not self.lines[0].chars and self.lines[0].block == PROSE:
            return 0
        return len(self.lines)

    def plain_lines(self) -> list[str]:
        return [line.text for line in self.lines[: self.num_lines]]
