"""The first screen's card in an empty chat: shown when the chat starts empty and on a new
chat, gone with the first message; a picked suggestion fills the message box (the
conversation view says so upward: spectui.tui.chat.conversation_view), its k here.

A starter's k ("watch it") lasts for its reply only: the k (and adaptive k) the user had
come back once that reply ends, or at a new chat before it, unless the user chose another
k meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spectui.chat_session.session import ChatSession
from spectui.chat_session.stats import PanelData
from spectui.core.events import LiveValues
from spectui.tui.advise_work import advise_link
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.k_words import measured_slope, verify_words
from spectui.tui.widgets.first_screen import WATCH_K, FirstScreen, Suggestion


@dataclass(frozen=True)
class StarterK:
    """A starter's k in force: the user's values before it, the starter's, and the first reply
    id after the pick (an older reply, left behind by a new chat, is not the starter's)."""

    before: LiveValues
    during: LiveValues
    first_reply_id: int


class Welcome:
    """The card in `scroll` (the conversation view it is part of); the cost of its k from
    the stats panel's figures (`panel_data`); next_reply_id: the id the next reply gets
    (ReplyStreams.next_id)."""

    def __init__(self, session: ChatSession, scroll: ConversationScroll, panel_data: Callable[[], PanelData],
                 next_reply_id: Callable[[], int]) -> None:
        self.session, self.scroll, self.panel_data = session, scroll, panel_data
        self.next_reply_id = next_reply_id
        self.starter: StarterK | None = None

    @property
    def card(self) -> FirstScreen | None:
        cards = self.scroll.query(FirstScreen)
        return cards.first() if cards else None

    def show(self) -> None:
        if self.card is None:
            advise = advise_link(getattr(self.scroll.app, "store", None), self.session.config.keys)
            self.scroll.mount(FirstScreen(self.cost(), advise=advise, offers_k=self.offers_k()))

    def offers_k(self) -> bool:
        """Whether the chat's k reaches the engine: not a server's, which runs its own (a card
        that offered "k 4" there offered a key that does not act)."""
        host = self.session.host
        return not host.k_from_engine if host.capabilities is not None else self.session.config.engine != "server"

    def drop(self) -> None:
        self.scroll.query(FirstScreen).remove()

    def cost(self) -> str:
        """What the watch-it k costs here: a verify of k + 1, as measured, or that it is not yet."""
        slope = measured_slope(self.panel_data(), self.session.verify_slope)
        formula = f"\nv(k) = 1 + {slope:.2f}k plain steps, as measured here" if slope is not None else ""
        return verify_words(WATCH_K, slope) + formula

    def engine_ready(self) -> None:
        card = self.card
        if card is not None and card.offers_k != self.offers_k():  # the engine turned out to run its own k
            card.set_offers_k(self.offers_k(), self.cost())
        elif card is not None:
            card.set_cost(self.cost())

    def picked(self, suggestion: Suggestion) -> None:
        """A suggestion picked: its k (watch it) for its reply; its text is the box's."""
        if suggestion.k is not None:
            host = self.session.host
            before = self.starter.before if self.starter is not None else host.live.values
            host.keys.set_k(suggestion.k)
            if host.live.values != before:
                self.starter = StarterK(before, host.live.values, self.next_reply_id())

    def reply_ended(self, reply_id: int) -> None:
        """The starter's reply ended: the user's k again."""
        if self.starter is not None and reply_id >= self.starter.first_reply_id:
            self.give_back_k()

    def give_back_k(self) -> None:
        """The k the user had before the starter, unless they chose another since."""
        starter, self.starter = self.starter, None
        live = self.session.host.live
        if starter is not None and live.values == starter.during:
            before = starter.before
            live.update(k=before.k, auto=before.auto, temperature=before.temperature)

    def tab(self) -> bool:
        """Tab from the empty message box goes to the suggestions; False without a card."""
        card = self.card
        if card is None:
            return False
        card.list.focus()
        return True
