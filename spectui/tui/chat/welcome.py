"""The first screen's card in an empty chat: shown when the chat starts empty and on a new
chat, gone with the first message; a picked suggestion fills the message box."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectui.tui.advise_work import advise_link
from spectui.tui.k_words import measured_slope, verify_words
from spectui.tui.widgets.first_screen import WATCH_K, FirstScreen, Suggestion

if TYPE_CHECKING:  # the screen holds its helpers: a type-only import, no cycle when the code runs
    from spectui.tui.screens.chat import ChatScreen


class Welcome:
    def __init__(self, screen: ChatScreen) -> None:
        self.screen = screen  # the chat screen: its scroll, prompt, host and panel

    @property
    def card(self) -> FirstScreen | None:
        cards = self.screen.scroll.query(FirstScreen)
        return cards.first() if cards else None

    def show(self) -> None:
        if self.card is None:
            self.screen.scroll.mount(FirstScreen(self.cost(), advise=advise_link(getattr(self.screen.app, "store", None), self.screen.config.keys)))

    def drop(self) -> None:
        self.screen.scroll.query(FirstScreen).remove()

    def cost(self) -> str:
        """What the watch-it k costs here: a verify of k + 1, as measured, or that it is not yet."""
        slope = measured_slope(self.screen.stats_panel.data, self.screen.verify_slope)
        return verify_words(WATCH_K, slope)

    def engine_ready(self) -> None:
        card = self.card
        if card is not None:
            card.set_cost(self.cost())

    def picked(self, suggestion: Suggestion) -> None:
        prompt = self.screen.prompt
        prompt.value = suggestion.text
        prompt.focus()
        if suggestion.k is not None:
            self.screen.host.keys.set_k(suggestion.k)

    def tab(self) -> bool:
        """Tab from the empty message box goes to the suggestions; False without a card."""
        card = self.card
        if card is None:
            return False
        card.list.focus()
        return True
