"""The first screen of an empty chat: what each colour means, and three ways to start.

The colours are drawn by a TokenView, so they are the current theme's (and its shapes under
NO_COLOR). One suggestion is copy-heavy: a small module shipped with spectui and a request to
edit it, at a fixed k so the first reply shows long runs of kept drafts, with what that k
costs on this machine beside it. A picked suggestion fills the message box; it goes once the
first message is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

import spectui
from spectui.tui.widgets.token_view import TokenView

EXAMPLE = Path(spectui.__file__).parent / "examples" / "csv_tools.py"
WATCH_K = 4  # "watch it": enough drafts per step for long green runs when the reply copies

# (token kind, sample in its style, what it means): one name per source, as README and F1 say
LEGEND = (
    ("draft", " accepted draft ", "the drafter's guess, kept by the model"),
    ("recovered", " correction ", "the model's correction of a guess"),
    ("bonus", " bonus ", "a free extra: every guess was kept"),
    ("target", " plain ", "the model alone"),
    ("ghost", " rejected draft ", "a refused guess (Ctrl+G shows them)"),
)
SAMPLE_WIDTH = max(len(sample) for _, sample, _ in LEGEND) + 1


@dataclass(frozen=True)
class Suggestion:
    title: str
    text: str  # what fills the message box
    shows: str  # what the reply will show
    k: int | None = None  # the fixed k picking it sets ("watch it"); None leaves k as it is


def suggestions(example: Path = EXAMPLE) -> tuple[Suggestion, ...]:
    return (
        Suggestion(f"Edit a file: add type hints to {example.name}",
                   f"/file {example}\nadd type hints to this module, keep everything else, reply with the whole module",
                   f"long runs of kept drafts; k {WATCH_K} for this reply only", WATCH_K),
        Suggestion("Regular output: the months as JSON",
                   "List the twelve months as a JSON array of objects with their name and number of days.",
                   "a repeating shape: many drafts kept"),
        Suggestion("An open question",
                   "What is speculative decoding? Answer in three sentences.",
                   "fresh prose: little to copy, few drafts pay"),
    )


class SuggestionList(OptionList):
    BINDINGS = [Binding("escape", "screen.focus_prompt", "back to the message box", show=False)]


class FirstScreen(Vertical):
    """The empty chat's card; `cost` says what the watch-it k costs here, beside that suggestion."""

    DEFAULT_CSS = """
    FirstScreen { height: auto; margin: 1 0 0 0; padding: 0 1; border: round $primary 40%; }
    FirstScreen > .first-title { color: $primary; text-style: bold; }
    FirstScreen > TokenView { height: auto; }
    FirstScreen > SuggestionList { height: auto; margin: 0; border: none; padding: 0; background: transparent; }
    """

    class Picked(Message):
        def __init__(self, suggestion: Suggestion) -> None:
            super().__init__()
            self.suggestion = suggestion

    def __init__(self, cost: str, example: Path = EXAMPLE, advise: str | None = None) -> None:
        super().__init__(id="first-screen")
        self.advise = advise  # the advise screen's link, once the history has enough replies to say
        self.suggestions = suggestions(example)
        self.list = SuggestionList(*(Option(suggestion_prompt(s, cost)) for s in self.suggestions))

    def compose(self):
        yield Static("What the colours say", classes="first-title")
        for kind, sample, meaning in LEGEND:
            yield TokenView([(sample, kind), (" " * (SAMPLE_WIDTH - len(sample)) + meaning, "target")], show_ghosts=True)
        yield Static("Try one: click it, or Tab and Enter, to fill the box", classes="first-title")
        yield self.list
        if self.advise is not None:
            yield Static(Content.from_markup("[@click=app.advise]$text[/]", text=self.advise), id="first-advise")

    def set_cost(self, cost: str) -> None:
        for index, suggestion in enumerate(self.suggestions):
            if suggestion.k is not None:
                self.list.replace_option_prompt_at_index(index, suggestion_prompt(suggestion, cost))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Picked(self.suggestions[event.option_index]))


def suggestion_prompt(suggestion: Suggestion, cost: str) -> Content:
    """Its title, what the reply shows, and for the watch-it one the k it sets and its cost here."""
    parts: list[str | tuple[str, str]] = [(f"▸ {suggestion.title}", "bold"), "\n", (f"  {suggestion.shows}", "$text-muted")]
    if suggestion.k is not None:
        parts += ["\n", (f"  watch it at k {suggestion.k}: {cost}", "$text-muted")]
    return Content.assemble(*parts)
