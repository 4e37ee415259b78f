"""The last reply edited by the user (`/edit`, or the edit key on a picked reply): its text
goes into the message box; Enter puts the edit in its place (shown as the user's text, not
the model's) and the reply can then be continued from it (spectui.tui.chat.continuing): what
the model writes next follows the edit, and prompt lookup drafts from it. The reply as the
model made it stays in history, superseded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectui.tui.widgets.conversation import ReplyView

if TYPE_CHECKING:  # the screen holds its helpers: a type-only import, no cycle when the code runs
    from spectui.tui.screens.chat import ChatScreen

EDITED = "edited"  # the finish reason of a reply the user edited: it can be continued


class ReplyEdit:
    """screen: the chat screen; view: the reply whose text the box holds while it is edited."""

    def __init__(self, screen: ChatScreen) -> None:
        self.screen = screen
        self.view: ReplyView | None = None

    @property
    def note(self) -> str:
        """What the bar says of an edit under way."""
        return "editing the last reply: Enter keeps the edit (then /continue goes on from it), Esc leaves it" \
            if self.view is not None else ""

    def start(self, view: ReplyView | None = None) -> None:
        """The last reply's text into the box (`view`: the reply picked, which must be the last)."""
        screen = self.screen
        replies = list(screen.query(ReplyView))
        entry = screen.transcript.last("assistant")
        if screen.replies.current is not None or screen.prompt.waiting is not None:
            screen.notify("Wait for the reply to end (Esc cancels it) before you edit it.")
        elif entry is None or not replies:
            screen.notify("No reply to edit yet.")
        elif view is not None and view is not replies[-1]:
            screen.notify("Only the last reply can be edited: the turns after it answered it as it was.")
        else:
            screen.turns.stop_editing()
            self.view = replies[-1]
            screen.prompt.value = entry.content
            screen.prompt.focus()
            screen.refresh_bar()

    def keep(self, text: str) -> None:
        """Enter: the edit replaces the reply, on screen and in the transcript."""
        screen, view = self.screen, self.view
        assert view is not None, "keep() follows start()"
        self.view = None
        screen.prompt.clear()
        if screen.transcript.edit_reply(text, EDITED) is None:
            screen.notify("The reply to edit is gone.")
            return
        view.reopen()
        view.token_view.clear()
        view.token_view.append_chunks([(text, EDITED)] if text else [])
        key = screen.replies.continue_key
        view.finish(EDITED, f"edited by you: {key} or /continue goes on from here")
        screen.refresh_bar()
        screen.refresh_bindings()

    def stop(self) -> bool:
        """Esc while editing: the reply stays as it was. False when no reply was edited."""
        if self.view is None:
            return False
        self.view = None
        self.screen.prompt.value = ""
        self.screen.refresh_bar()
        return True
