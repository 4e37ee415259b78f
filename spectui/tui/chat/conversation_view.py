"""The conversation as one widget: the scroll of messages, replies, files and notes
(ConversationScroll, which it is), with its parts: `/find` over what it shows (Finder) and the
first screen's card in an empty chat (Welcome). A suggestion picked on the card goes up to the
screen as a message (Suggested), for the message box; the rest the parts do on this view.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from spectui.chat_session.session import ChatSession
from spectui.chat_session.stats import PanelData
from spectui.tui.chat.find import Finder
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.chat.welcome import Welcome
from spectui.tui.widgets.first_screen import FirstScreen


class ConversationView(ConversationScroll):
    """session: the chat; panel_data: the figures the stats panel shows (the card's cost of
    its k); next_reply_id: the id the next reply gets (ReplyStreams.next_id)."""

    class Suggested(Message):
        """A suggestion picked on the first screen: its text for the message box."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, session: ChatSession, panel_data: Callable[[], PanelData], next_reply_id: Callable[[], int]) -> None:
        super().__init__(id="conversation")
        self.finder = Finder(self)
        self.welcome = Welcome(session, self, panel_data, next_reply_id)

    def on_first_screen_picked(self, event: FirstScreen.Picked) -> None:
        event.stop()
        self.post_message(self.Suggested(event.suggestion.text))
        self.welcome.picked(event.suggestion)  # its k, if it has one

    def start_over(self) -> None:
        """A new chat: nothing shown, nothing found."""
        self.remove_children()
        self.finder.clear()
