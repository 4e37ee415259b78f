"""Before `/save` overwrites a file: the unified diff of what would change, and a yes or no.
Y writes it, the old file kept as a backup; N or Esc writes nothing. Enter is no answer: it is
the key that sent `/save`, and a second press of it must not replace a file."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from spectui.core.safe_text import safe_text


def diff_content(diff: str) -> Content:
    """The diff's lines, added green and removed red, as plain text (never markup)."""
    parts: list[tuple[str, str] | str] = []
    for line in safe_text(diff).splitlines(keepends=True):
        if line.startswith("+") and not line.startswith("+++"):
            parts.append((line, "$success"))
        elif line.startswith("-") and not line.startswith("---"):
            parts.append((line, "$error"))
        elif line.startswith("@@"):
            parts.append((line, "$accent"))
        else:
            parts.append(line)
    return Content.assemble(*parts)


class SaveConfirmScreen(ModalScreen[bool]):
    """Dismisses with True to write, False to leave the file as it is."""

    BINDINGS = [
        Binding("y", "answer(True)", "write it", priority=True),
        Binding("n,escape", "answer(False)", "keep the file", priority=True),
    ]
    DEFAULT_CSS = """
    SaveConfirmScreen { align: center middle; }
    SaveConfirmScreen > Vertical {
        width: 100; max-width: 100%; height: auto; max-height: 90%; padding: 1 2;
        background: $panel; border: round $primary;
    }
    SaveConfirmScreen #save-title { text-style: bold; color: $accent; margin-bottom: 1; }
    SaveConfirmScreen #save-warning { color: $warning; margin-bottom: 1; }
    SaveConfirmScreen VerticalScroll { height: auto; max-height: 24; }
    SaveConfirmScreen #save-hint { color: $text-muted; margin-bottom: 1; }
    """

    def __init__(self, path: str, diff: str, warning: str | None = None, new: bool = False) -> None:
        super().__init__()
        self.path, self.diff, self.warning, self.new = path, diff, warning, new

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Content(safe_text(f"{'Write' if self.new else 'Overwrite'} {self.path}?")), id="save-title")
            if self.warning:
                yield Static(Content(self.warning), id="save-warning")
            # the keys above the diff: a long diff on a short terminal never pushes them out of view
            yield Static("Y writes it · N / Esc writes nothing" if self.new else
                         "Y writes it (the old file is kept as a backup) · N / Esc keeps the file", id="save-hint")
            with VerticalScroll():
                yield Static(diff_content(self.diff), id="save-diff")

    def action_answer(self, write: bool) -> None:
        self.dismiss(write)
