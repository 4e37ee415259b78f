"""The last reply edited by the user (`/edit`, or the edit key on a picked reply): its text
goes into the message box; Enter puts the edit in its place (shown as the user's text, not
the model's) and the reply can then be continued from it (Turns.continue_last): what the
model writes next follows the edit, and prompt lookup drafts from it. The reply as the
model made it stays in history, superseded (ChatSession.keep_reply_edit).
"""

from __future__ import annotations

from collections.abc import Callable

from spectui.chat_session.session import EDITED, ChatSession
from spectui.tui.chat.message_box import MessageBox
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.widgets.conversation import ReplyView


class ReplyEdit:
    """view: the reply whose text the box holds while it is edited; continue_key: the key
    that goes on from an edit; redraw: the bar and panels."""

    def __init__(self, session: ChatSession, scroll: ConversationScroll, box: MessageBox, continue_key: str,
                 redraw: Callable[[], None]) -> None:
        self.session, self.scroll, self.box = session, scroll, box
        self.continue_key, self.redraw = continue_key, redraw
        self.view: ReplyView | None = None

    def start(self, view: ReplyView | None) -> bool:
        """The last reply's text into the box (`view`: the reply picked, which must be the last).
        False, and a line that says why, when it cannot be edited now."""
        replies = list(self.scroll.query(ReplyView))
        entry = self.session.transcript.last("assistant")
        if self.session.turn_open:
            self.scroll.notify("Wait for the reply to end (Esc cancels it) before you edit it.")
        elif entry is None or not replies:
            self.scroll.notify("No reply to edit yet.")
        elif view is not None and view is not replies[-1]:
            self.scroll.notify("Only the last reply can be edited: the turns after it answered it as it was.")
        else:
            self.view = replies[-1]
            self.session.editing = "reply"
            self.box.fill(entry.content)
            self.redraw()
            return True
        return False

    def keep(self, text: str) -> None:
        """Enter: the edit replaces the reply, on screen and in the transcript."""
        view = self.view
        assert view is not None, "keep() follows start()"
        self.view = None
        self.box.clear()
        if not self.session.keep_reply_edit(text):
            self.scroll.notify("The reply to edit is gone.")
            return
        view.reopen()
        view.token_view.clear()
        view.token_view.append_chunks([(text, EDITED)] if text else [])
        view.finish(EDITED, f"edited by you: {self.continue_key} or /continue goes on from here")
        self.redraw()
        self.scroll.screen.refresh_bindings()

    def stop(self) -> bool:
        """Esc while editing: the reply stays as it was. False when no reply was edited."""
        if self.view is None:
            return False
        self.view, self.session.editing = None, None
        self.box.set_text("")
        self.redraw()
        return True
