"""Text fields that show what is typed, pasted or loaded into them without the terminal
obeying it: a pasted ESC, a system prompt from a file or a title from the history reach the
screen as pictures (␛); the field's value keeps the characters as they are."""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip
from textual.widgets import Input, TextArea

from spectui.core.safe_text import safe_cells


def visible_strip(strip: Strip) -> Strip:
    segments = list(strip)
    shown = [segment if segment.control else Segment(safe_cells(segment.text), segment.style) for segment in segments]
    if all(a.text == b.text for a, b in zip(segments, shown)):
        return strip
    return Strip(shown)


class SafeTextArea(TextArea):
    def render_line(self, y: int) -> Strip:
        return visible_strip(super().render_line(y))


class SafeInput(Input):
    def render_line(self, y: int) -> Strip:
        return visible_strip(super().render_line(y))
