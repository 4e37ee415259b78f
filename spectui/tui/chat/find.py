"""`/find TEXT`: the conversation's messages, replies and files that hold TEXT (any case);
the first match is marked and scrolled into view, n and N go to the next and the previous
(while the message box does not have the focus: `/find` moves it to the conversation)."""

from __future__ import annotations

from textual.content import Content

from spectui.core.safe_text import echoed, safe_text
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.find_marks import starts
from spectui.tui.widgets.attachment import AttachmentView
from spectui.tui.widgets.conversation import ReplyView, UserMessage

FOUND = "-found"  # the widget that holds the match /find went to (the match itself is marked)
MARK, MARK_CURRENT = "on $warning 30%", "$background on $warning"


def marked_content(text: str, needle: str, current: int) -> Content:
    """`text` as shown (no controls), each match of `needle` marked, the `current`th most."""
    shown = safe_text(text)
    content = Content(shown)
    for index, at in enumerate(starts(shown, needle.lower()) if needle else ()):
        content = content.stylize(MARK_CURRENT if index == current else MARK, at, at + len(needle))
    return content


def mark(widget: object, needle: str, current: int = -1) -> None:
    """Mark `needle`'s matches in what `widget` shows ("" unmarks them)."""
    if isinstance(widget, ReplyView):
        widget.token_view.mark(needle, current)
    elif isinstance(widget, UserMessage):
        widget.update(marked_content(widget.text, needle, current))
    elif isinstance(widget, AttachmentView):
        widget.body.update(marked_content(widget.text, needle, current))


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
        for widget in set(self.matches):
            mark(widget, text)
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
            mark(self.matches[self.index], self.text)
        self.index = index
        widget = self.matches[index]
        widget.add_class(FOUND)
        mark(widget, self.text, self.matches[:index].count(widget))
        if isinstance(widget, AttachmentView):
            widget.collapsed = False
        self.scroll.following = False
        self.scroll.scroll_to_widget(widget, animate=False, top=True)
        self.scroll.notify(f"{echoed(self.text)}: match {index + 1} of {len(self.matches)} · n next · N previous · Esc back",
                           timeout=3)

    def clear(self) -> None:
        for widget in set(self.matches):
            widget.remove_class(FOUND)
            mark(widget, "")
        self.matches, self.index = [], -1
