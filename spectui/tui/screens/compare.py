"""Compare view: a placeholder until the compare issue fills it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class CompareScreen(ModalScreen):
    BINDINGS = [Binding("escape,f4,q", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen > Vertical {
        width: 64; height: auto; padding: 1 2;
        background: $panel; border: round $primary;
    }
    CompareScreen .title { text-style: bold; color: $primary; }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Compare view: coming soon", classes="title")
            yield Static(
                "It will run the same prompt twice, speculative and plain (k = 0, every token "
                "from the target), side by side, with tokens/s and the speedup.\n\n"
                "Esc closes this."
            )
