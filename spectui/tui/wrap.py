"""Incremental word wrap of styled text: appending costs the appended characters only.

A reply streams in one token at a time; re-wrapping the whole reply for every frame would
fall behind a fast GPU. Lines are lists of (char, kind) kept as two parallel lists so the
tail word can move to a new line without splitting runs. No textual import here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.cells import cell_len

_PIECES = re.compile(r"\n|[^ \n]+| ")


class WrappedLine:
    __slots__ = ("chars", "kinds", "width", "last_space")

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.kinds: list[str] = []
        self.width = 0  # cells
        self.last_space = -1  # index of the last space, where a word wrap may cut

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
    """Styled chunks wrapped to `width` cells; `hidden` kinds are left out."""

    def __init__(self, width: int, hidden: Iterable[str] = ()) -> None:
        self.width = max(1, width)
        self.hidden = frozenset(hidden)
        self.lines: list[WrappedLine] = [WrappedLine()]

    def extend(self, chunks: Iterable[tuple[str, str]]) -> None:
        for text, kind in chunks:
            self.append(text, kind)

    def append(self, text: str, kind: str) -> None:
        if kind in self.hidden:
            return
        if "\t" in text or "\r" in text:
            text = text.replace("\t", " ").replace("\r", "")
        for piece in _PIECES.findall(text):
            line = self.lines[-1]
            width = cell_len(piece)
            if piece != "\n" and piece != " " and line.width + width <= self.width:
                # A whole word that fits: the common case, without a per-character loop.
                line.chars.extend(piece)
                line.kinds.extend([kind] * len(piece))
                line.width += width
            else:
                for char in piece:
                    self._put(char, kind)

    def _put(self, char: str, kind: str) -> None:
        if char == "\n":
            self.lines.append(WrappedLine())
            return
        if char == "\r":
            return
        if char == "\t":
            char = " "
        width = cell_len(char)
        line = self.lines[-1]
        if line.width + width > self.width:
            if char == " ":
                # A space at the edge is the break itself; the next line starts clean.
                self.lines.append(WrappedLine())
                return
            line = self._break(line)
        line.chars.append(char)
        line.kinds.append(kind)
        line.width += width
        if char == " ":
            line.last_space = len(line.chars) - 1

    def _break(self, line: WrappedLine) -> WrappedLine:
        new_line = WrappedLine()
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
        if len(self.lines) == 1 and not self.lines[0].chars:
            return 0
        return len(self.lines)

    def plain_lines(self) -> list[str]:
        return [line.text for line in self.lines[: self.num_lines]]
