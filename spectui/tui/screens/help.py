"""Help: the keys (as remapped), the token legend in the current theme, the words."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.theme import Theme
from textual.widgets import Static

from spectui.settings.config import KEY_DESCRIPTIONS
from spectui.tui.keys import ACTIONS, key_display
from spectui.tui.widgets.token_view import TokenView

LEGEND = [
    (" accepted draft ", "draft"),
    ("  ", "target"),
    (" correction ", "recovered"),
    ("  ", "target"),
    (" bonus ", "bonus"),
    ("  ", "target"),
    (" plain ", "target"),  # one word per colour: the card's and README's
    ("  ", "target"),
    (" rejected draft ", "ghost"),
]

FIXED_KEYS = [
    ("↑ / ↓", "earlier prompts of this chat (message box, first line)"),
    ("Ctrl+P", "every action by name, with its keys"),
    ("Ctrl+Q", "quit"),
]

# Term, meaning: drawn in two columns, so a long meaning wraps under itself.
GLOSSARY = [
    ("k", "draft tokens proposed per step (vLLM: num_speculative_tokens)"),
    ("γ", "draft acceptance rate = accepted drafts / drafted tokens"),
    ("τ", "mean acceptance length = 1 + accepted / drafting steps (vLLM's definition)"),
    ("α", "per-token acceptance, estimated from the steps (est.). Leviathan et al. write γ for k "
          "and α for the per-token acceptance."),
    ("E(α,k)", "(1 − α^(k+1)) / (1 − α): tokens per step the theory predicts"),
    ("c", "the draft's cost per token, relative to a target step (est. from timings)"),
    ("v(k)", "the target's cost for a step that checks k drafts, relative to a step with none "
             "(v(0) = 1; from the timings at the k values measured)"),
    ("best k", "the k that maximises E(α,k) / (k·c + v(k)), the predicted speedup"),
    ("accepted draft", "drafted and kept"),
    ("correction", "the target's own token at the first rejected draft (not an error)"),
    ("bonus", "the target's extra token after all k drafts were accepted"),
    ("plain", "came from the target alone (first token, k = 0, or no draft offered)"),
]


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,f1,q", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 84; max-width: 100%; height: 90%; padding: 1 2;
        background: $panel; border: round $primary;
    }
    HelpScreen .title { text-style: bold; color: $primary; margin-top: 1; }
    HelpScreen #help-title { text-style: bold; color: $accent; }
    HelpScreen TokenView { margin: 1 0; }
    HelpScreen #keys, HelpScreen #glossary, HelpScreen .row { height: auto; }
    HelpScreen .key { width: 23; text-style: bold; color: $accent; }
    HelpScreen .term { width: 16; text-style: bold; }
    HelpScreen .meaning { width: 1fr; }
    HelpScreen #remap { margin-top: 1; }
    """

    def __init__(self, keys: dict[str, str]) -> None:
        super().__init__()
        self.keys = keys  # binding id -> keys, as remapped by the config file

    def compose(self) -> ComposeResult:
        keys = [(key_display(self.keys[binding_id]), KEY_DESCRIPTIONS[binding_id]) for binding_id in ACTIONS]
        with VerticalScroll():
            yield Static("spectui help · Esc closes", id="help-title")
            yield Static("Tokens", classes="title")
            yield TokenView(LEGEND, show_ghosts=True, id="legend")
            yield Static(f"Theme: {self.app.theme} (Ctrl+T cycles; themes/ in the config dir adds more)", id="theme-name")
            yield Static("Keys", classes="title")
            with Vertical(id="keys"):
                yield from two_columns(keys + FIXED_KEYS, "key")
            yield Static("Words and numbers", classes="title")
            with Vertical(id="glossary"):
                yield from two_columns(GLOSSARY, "term")
            yield Static(Content("Keys are remapped in the [keys] table of the config file (spectui config path)."),
                         id="remap")

    def on_mount(self) -> None:
        # Follow theme changes made while help is open, so the legend is always current.
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Theme) -> None:
        self.query_one("#theme-name", Static).update(
            f"Theme: {theme.name} (Ctrl+T cycles; themes/ in the config dir adds more)"
        )


def two_columns(rows: Iterable[tuple[str, str]], left: str) -> ComposeResult:
    """Rows of a left column (class `left`) and a meaning that wraps under itself; plain text
    both (a "[keys]" is shown, not read as markup)."""
    for term, meaning in rows:
        with Horizontal(classes="row"):
            yield Static(Content(term), classes=left)
            yield Static(Content(meaning), classes="meaning")
