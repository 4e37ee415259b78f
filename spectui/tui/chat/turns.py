"""The chat's turns on screen: a message sent (or waiting for the engine), the last reply
regenerated or continued, the last message edited and sent again, a new chat, a stored one.

The session (spectui.chat_session) decides what a line means and what a reply is started
with, and keeps the conversation; the turns mount and remove the widgets that show it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spectui.chat_session.changes import set_thinking
from spectui.chat_session.meaning import Ask, KeepEdit, Meaning, Refuse, RunCommand, Severity, Wait
from spectui.chat_session.reply import ReplyRequest
from spectui.chat_session.session import ChatSession
from spectui.store import Conversation
from spectui.tui.chat.commands import ChatCommands, remove_file_views, show_file_views
from spectui.tui.chat.conversation_view import ConversationView
from spectui.tui.chat.message_box import MessageBox
from spectui.tui.chat.replies import Replies
from spectui.tui.chat.reply_edit import ReplyEdit
from spectui.tui.replay import stored_conversation
from spectui.tui.widgets.conversation import ReplyView, UserMessage


@dataclass(frozen=True)
class TurnParts:
    """What the turns show the chat in: the conversation view (its first screen's card and
    `/find` with it), the message box, the replies. redraw: the bar and the panels; ghosts:
    whether new replies show their rejected drafts."""

    conversation: ConversationView
    box: MessageBox
    replies: Replies
    redraw: Callable[[], None]
    ghosts: Callable[[], bool]


class Turns:
    """session: the chat; parts: its widgets; commands: the box's `/` commands.
    edited: the last turn's widgets while its message is back in the box."""

    def __init__(self, session: ChatSession, parts: TurnParts, commands: ChatCommands) -> None:
        self.session, self.parts, self.commands = session, parts, commands
        self.edited: tuple[UserMessage, ReplyView] | None = None
        self.reply_edit = ReplyEdit(session, parts.conversation, parts.box, parts.replies.continue_key, parts.redraw)

    def notify(self, text: str, severity: Severity = "information") -> None:
        self.parts.conversation.notify(text, severity=severity)

    # a line typed

    def submit(self, typed: str) -> None:
        """The message box's Enter."""
        self.act(self.session.meaning(typed))

    def act(self, meaning: Meaning) -> None:
        parts, box = self.parts, self.parts.box
        if isinstance(meaning, KeepEdit):
            self.reply_edit.keep(meaning.text)
        elif isinstance(meaning, Refuse):
            self.notify(meaning.why, meaning.severity)
        elif isinstance(meaning, RunCommand):
            box.clear()
            self.commands.run(meaning.command)
            if meaning.then is not None:
                self.act(meaning.then)
        elif isinstance(meaning, Ask):
            self.commands.say(list(meaning.lines), error=True)
        elif isinstance(meaning, Wait):
            parts.conversation.welcome.drop()
            self.commands.attach_mentioned(meaning.text)
            self.session.waiting = meaning.text
            box.clear()
            parts.conversation.show_waiting(meaning.text)
            parts.redraw()
        else:
            self.commands.attach_mentioned(meaning.text)
            box.clear()
            self.send(meaning.text)

    def send(self, text: str, shown: UserMessage | None = None) -> None:
        """Send `text` (already `shown` when it waited for the engine)."""
        session, parts = self.session, self.parts
        if self.edited is not None:  # the edited message replaces the last turn
            for widget in self.edited:
                widget.remove()
            self.edited = None
            remove_file_views(parts.conversation, session.replace_last_turn())
        parts.conversation.welcome.drop()  # the first screen goes with the first message
        self.commands.say(session.files.refresh())
        content, files = session.files.compose(text)
        show_file_views(parts.conversation, files, before=shown)  # the waiting files join this turn
        if shown is None:
            parts.conversation.mount(UserMessage(text))
        parts.box.remember(text)
        session.add_user(text, content, files)
        self.start(session.next_reply())

    def send_waiting(self) -> None:
        """The engine is ready: the message that waited for it goes."""
        text, self.session.waiting = self.session.waiting, None
        if text is not None:
            self.send(text, self.parts.conversation.take_waiting())

    def give_back_waiting(self) -> None:
        """The engine did not come: the waiting message leaves the conversation for the box
        (unless the box holds new text)."""
        text, self.session.waiting = self.session.waiting, None
        if text is None:
            return
        shown = self.parts.conversation.take_waiting()
        if shown is not None:
            shown.remove()
        if not self.parts.box.text:
            self.parts.box.set_text(text)
        self.notify("Your message did not go: it is back in the box.", "warning")

    def start(self, request: ReplyRequest, view: ReplyView | None = None) -> None:
        self.parts.replies.start(request, self.parts.ghosts(), view=view)
        self.parts.redraw()

    # the last turn again

    def resend_trimmed(self) -> None:
        """The chat outgrew the model's context: its last message again, the oldest turns left out."""
        if self.session.reply is None and (text := self.session.transcript.take_overflowed()) is not None:
            self.send(text)
        else:
            self.notify("Nothing to resend: this key answers a chat that grew longer than the model's context.")

    def regenerate(self, as_made: bool) -> None:
        why = self.session.busy("regenerate it")
        if why is None and self.session.host.engine is None:
            why = "The engine is not ready yet."
        if why is not None:
            self.notify(why)
            return
        request, note = self.session.regenerate(as_made)
        self.parts.conversation.query(ReplyView).last().remove()
        self.start(request)
        self.notify(note)

    @property
    def continue_problem(self) -> str | None:
        return self.session.why_not_continue(bool(self.parts.conversation.query(ReplyView)))

    def continue_last(self) -> None:
        """Continue the last reply where it stopped, in its own view, or say why not."""
        problem = self.continue_problem
        if problem is not None:
            self.notify(problem)
            return
        self.start(self.session.continuation(), view=self.parts.conversation.query(ReplyView).last())

    def edit_last(self) -> None:
        """The last message back in the box; sending it replaces that turn."""
        why = self.session.busy("edit your message")
        if why is not None:
            self.notify(why)
            return
        self.reply_edit.stop()
        scroll = self.parts.conversation
        self.edited = (scroll.query(UserMessage).last(), scroll.query(ReplyView).last())
        self.session.editing = "message"
        self.parts.box.fill(self.session.files.question(self.session.transcript.entries[-2]))  # its files go again
        self.parts.redraw()

    def edit_reply(self, view: ReplyView | None = None) -> None:
        """The last reply's text into the box (`view`: the reply picked, which must be the last)."""
        if self.reply_edit.start(view):
            self.edited = None

    def stop_editing(self) -> bool:
        """Esc while editing: the box empties and the turn stays. False when nothing was edited.
        Only Esc ends an edit: a box emptied to retype it is still the edit."""
        if self.reply_edit.stop():
            return True
        if self.edited is None:
            return False
        self.edited, self.session.editing = None, None
        self.parts.box.set_text("")
        self.parts.redraw()
        return True

    def set_thinking(self, text: str = "") -> None:
        """Turn the template's thinking switch as `text` says (nothing: the other way), or say why not."""
        try:
            self.notify(set_thinking(self.session, text))
        except ValueError as error:
            self.notify(str(error), "warning")

    # another chat

    def start_over(self) -> None:
        """A new chat: what streams is left to finish in the background, for its history row."""
        parts = self.parts
        self.give_back_waiting()
        parts.conversation.welcome.give_back_k()  # a starter's k was for its reply, not for the next chat
        self.edited = None
        self.reply_edit.view = None
        self.session.start_over()  # a reply in progress is left to finish for its row
        parts.box.recall_lines()
        parts.replies.left_behind()
        parts.conversation.start_over()

    def resume(self, conversation: Conversation) -> None:
        """Show a stored conversation (its superseded turns left out); new messages continue it."""
        parts = self.parts
        self.start_over()
        widgets, trackers = stored_conversation(conversation, self.session.replies.new_id, parts.ghosts())
        parts.box.recall_lines(self.session.resume(conversation, trackers))
        parts.conversation.mount_all(widgets)
