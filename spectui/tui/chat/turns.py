"""The chat's turns: a message sent (or waiting for the engine), the last reply regenerated,
the last message edited and sent again.

Regenerating or editing replaces the last turn on screen and in the transcript; its rows
stay in history, superseded (spectui.tui.chat.transcript). Regenerate takes the k, T and
seed the reply was made with; its live variant takes the current k and T and a new seed
(a new sample; the seed is recorded, so that one can be made again).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from spectui.core.events import GenerationParams, LiveValues
from spectui.tui.chat.budget import binding_cap, reply_budget
from spectui.tui.chat.reply_edit import ReplyEdit
from spectui.tui.chat.reply_settings import describe_values, engine_k, made_with, message_text, reply_settings
from spectui.tui.chat.transcript import settings_record
from spectui.tui.replay import stored_conversation
from spectui.tui.session import SessionTracker
from spectui.tui.widgets.conversation import ReplyView, UserMessage

if TYPE_CHECKING:  # the screen holds its helpers: a type-only import, no cycle when the code runs
    from spectui.store import Conversation
    from spectui.tui.screens.chat import ChatScreen

EDITING_NOTE = "editing your last message: sending replaces that turn (Esc keeps it)"


class Turns:
    """screen: the chat screen, whose parts (host, config, prompt, scroll, transcript,
    replies) these turns change; editing: the last turn's widgets while its message is edited."""

    def __init__(self, screen: ChatScreen) -> None:
        self.screen = screen
        self.editing: tuple[UserMessage, ReplyView] | None = None
        self.reply_edit = ReplyEdit(screen)  # the last reply edited, not the message
        self.thinking = True  # the template's switch, where it has one (spectui.tui.chat.thinking)

    def submit(self, typed: str) -> None:
        """The message box's Enter."""
        screen, host = self.screen, self.screen.host
        if self.reply_edit.view is not None:  # the box holds the reply's text, commands and all
            self.reply_edit.keep(typed)
            return
        text = screen.commands.intercept(message_text(typed))
        if text is None:
            return  # a command: done, never sent
        if screen.replies.current is not None:
            screen.notify("A reply is streaming; Esc cancels it.")
        elif screen.prompt.waiting is not None:
            screen.notify("A message already waits for the engine; this one stays in the box.")
        elif host.state.failed and host.engine is None:
            screen.notify(f"No engine: {host.state.error}", severity="error")
        elif not screen.commands.may_send_mentioned(text):
            return  # its @path files would go to a server: the next Enter sends them
        elif host.engine is None:
            screen.welcome.drop()
            screen.commands.attach_mentioned(text)
            screen.prompt.wait(text, screen.scroll)
            screen.refresh_bar()
        else:
            screen.commands.attach_mentioned(text)
            screen.prompt.clear()
            screen.send(text)

    def send(self, text: str, shown: UserMessage | None = None) -> None:
        """Send `text` (already `shown` when it waited for the engine)."""
        screen = self.screen
        if self.editing is not None:  # the edited message replaces the last turn
            for widget in self.editing:
                widget.remove()
            self.editing = None
            screen.transcript.drop_last("assistant")
            screen.commands.take_back_files(screen.transcript.drop_last("user"))
        screen.welcome.drop()  # the first screen goes with the first message
        content, files = screen.commands.compose(text, before=shown)  # the waiting files join this turn
        if shown is None:
            screen.scroll.mount(UserMessage(text))
        screen.prompt.recall.add(text)
        host = screen.host
        screen.transcript.add_user(content, settings_record(host.info, screen.config, host.live, engine_k(host)),
                                   title=text if files else None)
        screen.commands.files.mark_sent(files, screen.transcript.entries[-1])
        self.start_reply(screen.host.live.values, screen.config.seed)

    def start_reply(self, values: LiveValues, seed: int | None) -> None:
        screen = self.screen
        config, transcript = screen.config, screen.transcript
        settings = reply_settings(values, seed, screen.host.info, engine_k(screen.host))
        context = screen.host.engine.context_length if screen.host.engine is not None else None
        params = GenerationParams(max_tokens=reply_budget(config.max_tokens, context), top_p=config.top_p, seed=seed,
                                  truncate=transcript.truncating, thinking=self.thinking)
        message_id = transcript.open_reply(settings)
        screen.replies.start(transcript.messages, params, message_id, screen.show_ghosts, values, settings,
                             cap=binding_cap(config.max_tokens, context))
        screen.refresh_bar()
        screen.refresh_panels()

    def resend_trimmed(self) -> None:
        """The chat outgrew the model's context: its last message again, the oldest turns left out."""
        screen = self.screen
        if screen.replies.current is None and (text := screen.transcript.take_overflowed()) is not None:
            screen.send(text)
        else:
            screen.notify("Nothing to resend: this key answers a chat that grew longer than the model's context.")

    def regenerate(self, as_made: bool) -> None:
        screen, host = self.screen, self.screen.host
        if self._busy("regenerate it"):
            return
        if host.engine is None:
            screen.notify("The engine is not ready yet.")
            return
        reply, live = screen.transcript.last("assistant"), host.live.values
        assert reply is not None, "_busy found the reply to regenerate"
        values, seed, note = made_with(reply.settings, live, screen.config.seed, host.info) if as_made \
            else (live, random.randrange(2**31), "")
        screen.transcript.drop_last("assistant")
        screen.query(ReplyView).last().remove()
        self.start_reply(values, seed)
        screen.notify(f"Regenerating the last reply with {describe_values(values, seed)}{note}")

    def edit_last(self) -> None:
        """The last message back in the box; sending it replaces that turn."""
        screen = self.screen
        if self._busy("edit your message"):
            return
        self.reply_edit.stop()
        self.editing = (screen.query(UserMessage).last(), screen.query(ReplyView).last())
        screen.prompt.value = screen.commands.files.question(screen.transcript.entries[-2])  # its files go again
        screen.prompt.focus()
        screen.refresh_bar()

    def stop_editing(self) -> bool:
        """Esc while editing: the box empties and the turn stays. False when nothing was edited.
        Only Esc ends an edit: a box emptied to retype it is still the edit."""
        if self.reply_edit.stop():
            return True
        if self.editing is None:
            return False
        self.editing = None
        self.screen.prompt.value = ""
        self.screen.refresh_bar()
        return True

    def start_over(self) -> None:
        """A new chat: what streams is left to finish in the background, for its history row."""
        screen = self.screen
        screen.give_back_waiting()
        screen.welcome.give_back_k()  # a starter's k was for its reply, not for the next chat
        self.editing = None
        self.reply_edit.view = None
        screen.compare_after_reply = None  # F4's prompt belonged to the chat left behind
        screen.prompt.recall.reset()
        screen.replies.detach()
        screen.scroll.remove_children()
        screen.transcript.start_over()
        screen.commands.files.reset()
        screen.commands.finder.clear()
        screen.session = SessionTracker()
        screen.last_reply = None

    def resume(self, conversation: Conversation) -> None:
        """Show a stored conversation (its superseded turns left out); new messages continue it."""
        screen = self.screen
        self.start_over()
        screen.transcript.resume(conversation)
        screen.commands.files.restore(screen.transcript.entries)
        screen.prompt.recall.reset(screen.commands.files.question(entry) for entry in screen.transcript.entries
                                   if entry.role == "user")
        widgets, trackers = stored_conversation(conversation, screen.replies.new_id, screen.show_ghosts)
        for tracker in trackers:
            screen.session.add_reply(tracker)
        screen.last_reply = trackers[-1] if trackers else None
        screen.scroll.mount_all(widgets)

    @property
    def note(self) -> str:
        """What the bar says of an edit under way."""
        return EDITING_NOTE if self.editing is not None else self.reply_edit.note

    def _busy(self, doing: str) -> bool:
        """Say why the last turn cannot be replaced now, if it cannot."""
        screen = self.screen
        if screen.replies.current is not None or screen.prompt.waiting is not None:
            screen.notify(f"Wait for the reply to end (Esc cancels it) before you {doing}.")
        elif screen.transcript.last("assistant") is None or len(screen.transcript.entries) < 2:
            screen.notify(f"No reply to {doing} yet.")
        else:
            return False
        return True
