"""The message box keeps the keys (issue 59): focus leaves it only when the user moves it
(Shift+Tab picks a reply, a click, `/find`'s n and N), and a key typed where nothing takes
it goes back to the box with the focus, instead of vanishing. Esc anywhere in the
conversation is the way back."""

from __future__ import annotations

from textual import events
from textual.widget import Widget

from spectui.tui.chat.find import Finder
from spectui.tui.chat.message_box import MessageBox
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.widgets.attachment import AttachmentView
from spectui.tui.widgets.conversation import ReplyView

FIND_KEYS = ("n", "N")  # `/find`'s next and previous, the conversation's while it has the focus
# Where a typed character would vanish: it goes to the box instead.
STRAYS = (ConversationScroll, ReplyView, AttachmentView)


def stray_key(focused: Widget | None, event: events.Key, box: MessageBox, replying: bool, finder: Finder) -> bool:
    """A key that reached the screen from the conversation (`focused` had it), which nothing
    took: a character goes into the box, Esc goes back to it (while no reply streams: there
    Esc cancels it). True when it was taken here."""
    if focused is box.prompt or not isinstance(focused, STRAYS):
        return False
    if event.key == "escape" and not replying:
        finder.clear()
        box.focus()
        return True
    if event.is_printable and event.character and event.key not in FIND_KEYS:
        box.typed(event)
        return True
    return False
