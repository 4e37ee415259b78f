"""`/find TEXT`: the conversation's messages, replies and files that hold TEXT (any case);
the first match is marked and scrolled into view, n and N go to the next and the previous
(while the message box does not have the focus: `/find` moves it to the conversation)."""

from __future__ import annotations

from spectui.core.safe_text import echoed
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.widgets.attachment import AttachmentView
from spectui.tui.widgets.conversation import ReplyView, UserMessage

FOUND = "-found"


def shown_text(widget: object) -> str | None:
    if isinstance(widget, ReplyView):
        return widget.token_view.text
    if isinstance(widget, (UserMessage, AttachmentView)):
        return widget.text
    return None


class Finder:
    """scroll: the conversation it looks through."""

    def __init__(self, scroll: ConversationScroll) -> None:
        self.scroll = scroll
        self.text = ""
        self.matches: list = []  # one entry per occurrence: the widget that holds it
        self.index = -1

    def find(self, text: str) -> None:
        scroll = self.scroll
        self.clear()
        if not text:
            scroll.notify("/find takes the text to look for: /find parse_row")
            return
        self.text = text
        needle = text.casefold()
        for widget in scroll.children:
            shown = shown_text(widget)
            if shown is not None:
                self.matches.extend([widget] * shown.casefold().count(needle))
        if not self.matches:
            scroll.notify(f"Not in this chat: {echoed(text)}")
            return
        scroll.focus()  # n and N are the conversation's keys, not letters for the box
        self.show(0)

    def step(self, delta: int) -> None:
        if not self.matches:
            self.scroll.notify("Nothing to go to: /find TEXT first")
            return
        self.show((self.index + delta) % len(self.matches))

    def show(self, index: int) -> None:
        if 0 <= self.index < len(self.matches):
            self.matches[self.index].remove_class(FOUND)
        self.index = index
        widget = self.matches[index]
        widget.add_class(FOUND)
        if isinstance(widget, AttachmentView):
            widget.collapsed = False
        self.scroll.following = False
        self.scroll.scroll_to_widget(widget, animate=False, top=True)
        self.scroll.notify(f"{echoed(self.text)}: match {index + 1} of {len(self.matches)} · n next · N previous · Esc back",
                           timeout=3)

    def clear(self) -> None:
        for widget in set(self.matches):
            widget.remove_class(FOUND)
        self.matches, self.index = [], -1
