"""Engine info: what runs, where, and whether k can change mid-reply."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static


def info_lines(app, engine_stats: dict) -> list[tuple[str, str]]:
    engine = app.engine
    if engine is None:
        state = app.engine_error if app.engine_status == "failed" else f"loading {app.loading_detail}"
        return [("engine", state)]
    info = engine.info
    rows = [
        ("engine", info.name),
        ("target", info.target),
        ("draft", info.draft or "–"),
        ("method", info.method),
        ("dtype", info.dtype),
        ("device", info.device),
        ("k changes", "next step (live)" if info.live_k else "next reply"),
        ("provenance", "exact" if info.exact else "inferred from chunk sizes"),
    ]
    if app.load_seconds is not None:
        rows.append(("loaded in", f"{app.load_seconds:.1f} s"))
    for key, value in engine_stats.items():
        if key != "traceback" and not isinstance(value, (dict, list)):
            rows.append((key, str(value)))
    return rows


class InfoScreen(ModalScreen):
    BINDINGS = [Binding("escape,f3,q", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    InfoScreen { align: center middle; }
    InfoScreen > Vertical {
        width: 70; height: auto; max-height: 90%; padding: 1 2;
        background: $panel; border: round $primary;
    }
    InfoScreen .title { text-style: bold; color: $primary; margin-bottom: 1; }
    """

    def __init__(self, engine_stats: dict | None = None) -> None:
        super().__init__()
        self.engine_stats = engine_stats or {}

    def compose(self) -> ComposeResult:
        rows = info_lines(self.app, self.engine_stats)
        parts: list = []
        for name, value in rows:
            parts += [(f"{name:<12}", "$text-muted"), (value, "bold"), "\n"]
        with Vertical():
            yield Static("Engine", classes="title")
            yield Static(Content.assemble(*parts[:-1]), id="info-rows")
