"""One side of the compare view: the latest run of its path, streaming, and its numbers."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from spectui.tui.widgets.token_view import TokenView

TITLES = {"speculative": "Speculative", "baseline": "Baseline (k = 0)"}


class ComparePane(Vertical):
    DEFAULT_CSS = """
    ComparePane { width: 1fr; height: 1fr; padding: 0 1; border: round $primary 40%; }
    ComparePane > .pane-title { text-style: bold; color: $primary; }
    ComparePane > VerticalScroll { height: 1fr; }
    ComparePane > .pane-stats { color: $text-muted; height: auto; }
    """

    def __init__(self, path: str) -> None:
        super().__init__(id=f"pane-{path}")
        self.path = path
        self.title = Static(TITLES[path], classes="pane-title")
        self.scroll = VerticalScroll()
        self.stats = Static("waiting for its turn", classes="pane-stats")
        self.token_view: TokenView | None = None

    def compose(self) -> ComposeResult:
        yield self.title
        yield self.scroll
        yield self.stats

    def start_run(self, k: str, number: int) -> None:
        """k: the speculative path's k in words ("k = 4", "k auto (from 4)")."""
        detail = k if self.path == "speculative" else "every token from the target"
        self.title.update(Content(f"{TITLES[self.path]} · {detail} · run {number}"))
        self.stats.update(Content("streaming…"))
        self.scroll.remove_children()
        self.token_view = TokenView()
        self.token_view.streaming = True
        self.scroll.mount(self.token_view)

    def append(self, chunks: list[tuple[str, str]]) -> None:
        if self.token_view is not None:
            self.token_view.append_chunks(chunks)
            self.scroll.scroll_end(animate=False)

    def end_run(self, summary: str) -> None:
        if self.token_view is not None:
            self.token_view.streaming = False
        self.stats.update(Content(summary))
