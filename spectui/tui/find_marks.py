"""Where /find's text sits in a reply's drawn lines: the characters to mark, so the match is
marked, not the whole message (issue 59). No Textual here: the token view draws the marks.

A match is looked for line by line, in prose and code lines (not in a fence's edge or a
reasoning block); one that a wrap splits across two lines is not marked."""

from __future__ import annotations

from collections.abc import Sequence

from spectui.tui.fences import CODE, PROSE
from spectui.tui.wrap import WrappedLine

Span = tuple[int, int, bool]  # start, end (characters of the line's text), the match /find went to


def folded(text: str) -> str:
    """`text` in lower case, character for character (a character whose lower case is longer,
    as İ's is, stays as it is), so positions in it are positions in `text`."""
    return "".join(low if len(low := char.lower()) == 1 else char for char in text)


def starts(text: str, needle: str) -> list[int]:
    """Where `needle` (lower case) starts in `text`, any case, matches not overlapping."""
    found, at, haystack = [], 0, folded(text)
    while needle and (at := haystack.find(needle, at)) >= 0:
        found.append(at)
        at += len(needle)
    return found


class LineMarks:
    def __init__(self, needle: str, current: int = -1) -> None:
        self.needle = folded(needle)
        self.current = current  # which match, counted from the first line's first, is /find's now
        self._before: list[int] | None = None  # per line: the matches in the lines above it

    def forget(self) -> None:
        """The lines changed (new text, another width, a fold): count again."""
        self._before = None

    def _counts(self, lines: Sequence[WrappedLine]) -> list[int]:
        if self._before is None or len(self._before) != len(lines) + 1:
            before = [0]
            for line in lines:
                before.append(before[-1] + len(self._starts(line)))
            self._before = before
        return self._before

    def _starts(self, line: WrappedLine) -> list[int]:
        return starts(line.text, self.needle) if line.block in (PROSE, CODE) else []

    def spans(self, lines: Sequence[WrappedLine], y: int) -> list[Span]:
        """Line `y`'s matches."""
        first = self._counts(lines)[y]
        size = len(self.needle)
        return [(at, at + size, first + index == self.current) for index, at in enumerate(self._starts(lines[y]))]


def marked_runs(runs: Sequence[tuple[str, str]], spans: Sequence[Span]) -> list[tuple[str, str, str | None]]:
    """(text, kind) runs cut where the spans begin and end: (text, kind, mark), mark being
    "found-current", "found" or None."""
    if not spans:
        return [(text, kind, None) for text, kind in runs]
    out: list[tuple[str, str, str | None]] = []
    position = 0
    for text, kind in runs:
        end = position + len(text)
        cuts = sorted({position, end} | {edge for start, stop, _ in spans for edge in (start, stop) if position < edge < end})
        for left, right in zip(cuts, cuts[1:]):
            mark = next(("found-current" if current else "found" for start, stop, current in spans
                         if start <= left and right <= stop), None)
            out.append((text[left - position:right - position], kind, mark))
        position = end
    return out
