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
# plain words first (issue 59): what a reader sees, not the method's terms
LEGEND = (
    ("draft", " accepted draft ", "guessed by the small model, kept"),
    ("recovered", " correction ", "the big model's fix of a wrong guess"),
    ("bonus", " bonus ", "a free extra: every guess was kept"),
    ("target", " plain ", "the big model alone, no guessing"),
    ("ghost", " rejected draft ", "a refused guess (Ctrl+G shows them)"),
)
NUMBERS_KEY = "n"  # on the suggestions: the numbers behind the words (what a guess costs here)
SAMPLE_WIDTH = max(len(sample) for _, sample, _ in LEGEND) + 1


@dataclass(frozen=True)
class Suggestion:
    title: str
    text: str  # what fills the message box
    shows: str  # what the reply will show
    k: int | None = None  # the fixed k picking it sets ("watch it"); None leaves k as it is


def suggestions(example: Path = EXAMPLE, offers_k: bool = True) -> tuple[Suggestion, ...]:
    """offers_k: the chat sets k (False where the engine runs its own, a server's: the edit
    then sets none and says none)."""
    return (
        Suggestion(f"Edit a file: add type hints to {example.name}",
                   f"/file {example}\nadd type hints to this module, keep everything else, reply with the whole module",
                   f"long runs of kept drafts; k {WATCH_K} for this reply only" if offers_k else "long runs of kept drafts",
                   WATCH_K if offers_k else None),
        Suggestion("Regular output: the months as JSON",
                   "List the twelve months as a JSON array of objects with their name and number of days.",
                   "a repeating shape: many drafts kept"),
        Suggestion("An open question",
                   "What is speculative decoding? Answer in three sentences.",
                   "fresh prose: little to copy, few drafts pay"),
    )


class SuggestionList(OptionList):
    BINDINGS = [Binding("escape", "screen.focus_prompt", "back to the message box", show=False),
                Binding(NUMBERS_KEY, "numbers", "the numbers")]

    def action_numbers(self) -> None:
        card = self.parent
        if isinstance(card, FirstScreen):
            card.toggle_numbers()


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

    def __init__(self, cost: str, example: Path = EXAMPLE, advise: str | None = None, offers_k: bool = True) -> None:
        super().__init__(id="first-screen")
        self.advise = advise  # the advise screen's link, once the history has enough replies to say
        self.offers_k, self.example = offers_k, example
        self.suggestions = suggestions(example, offers_k)
        self.list = SuggestionList(*(Option(suggestion_prompt(s)) for s in self.suggestions))
        self.numbers = Static(numbers_text(cost, offers_k), id="first-numbers", markup=False)
        self.numbers.display = False

    def compose(self):
        yield Static("What the colours say", classes="first-title")
        for kind, sample, meaning in LEGEND:
            yield TokenView([(sample, kind), (" " * (SAMPLE_WIDTH - len(sample)) + meaning, "target")], show_ghosts=True)
        yield Static("Try one: click it, or Tab and Enter, to fill the box", classes="first-title")
        yield self.list
        yield Static(f"Tab, then {NUMBERS_KEY}: the numbers behind the colours", id="first-numbers-key", markup=False)
        yield self.numbers
        if self.advise is not None:
            yield Static(Content.from_markup("[@click=app.advise]$text[/]", text=self.advise), id="first-advise")

    def set_cost(self, cost: str) -> None:
        self.numbers.update(numbers_text(cost, self.offers_k))

    def set_offers_k(self, offers_k: bool, cost: str) -> None:
        """The engine loaded and runs its own k, or not: the suggestions say so."""
        self.offers_k = offers_k
        self.suggestions = suggestions(self.example, offers_k)
        self.list.clear_options()
        self.list.add_options([Option(suggestion_prompt(s)) for s in self.suggestions])
        self.set_cost(cost)

    def toggle_numbers(self) -> None:
        self.numbers.display = not self.numbers.display

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Picked(self.suggestions[event.option_index]))


def suggestion_prompt(suggestion: Suggestion) -> Content:
    """Its title and, in plain words, what the reply shows."""
    return Content.assemble((f"▸ {suggestion.title}", "bold"), "\n", (f"  {suggestion.shows}", "$text-muted"))


def numbers_text(cost: str, offers_k: bool) -> str:
    """The numbers behind the card's words: what a guess costs here (a verify of k drafts and
    one more token, in plain steps) and what the watch-it k costs; where the engine runs its
    own k (a server), only the first."""
    lines = ["A step drafts k guesses, then the big model checks them all in one verify.",
             f"watch it at k {WATCH_K}: {cost}" if offers_k else f"here: {cost}"]
    return "\n".join(lines)
