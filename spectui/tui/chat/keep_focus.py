"""The message box keeps the keys (issue 59): focus leaves it only when the user moves it
(Shift+Tab picks a reply, a click, `/find`'s n and N), and a key typed where nothing takes
it goes back to the box with the focus, instead of vanishing. Esc anywhere in the
conversation is the way back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events

from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.widgets.attachment import AttachmentView
from spectui.tui.widgets.conversation import ReplyView

if TYPE_CHECKING:  # the screen holds its helpers: a type-only import, no cycle when the code runs
    from spectui.tui.screens.chat import ChatScreen

FIND_KEYS = ("n", "N")  # `/find`'s next and previous, the conversation's while it has the focus
# Where a typed character would vanish: it goes to the box instead.
STRAYS = (ConversationScroll, ReplyView, AttachmentView)


def stray_key(screen: ChatScreen, event: events.Key) -> bool:
    """A key that reached the screen from the conversation, which nothing took: a character
    goes into the box, Esc goes back to it. True when it was taken here."""
    focused = screen.focused
    if focused is screen.prompt or not isinstance(focused, STRAYS):
        return False
    if event.key == "escape" and screen.replies.current is None:
        screen.commands.finder.clear()
        screen.prompt.focus()
        return True
    if event.is_printable and event.character and event.key not in FIND_KEYS:
        screen.prompt.focus()
        screen.prompt.insert(event.character)
        return True
    return False
