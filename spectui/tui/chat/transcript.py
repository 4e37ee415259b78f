"""The conversation as the model sees it, and its rows in the history store."""

from __future__ import annotations

from collections.abc import Callable

from spectui.core.events import Message
from spectui.store import Conversation


def settings_record(info, config, live) -> dict:
    """What a conversation was started with, saved beside it in history."""
    return {
        "engine": info.name if info else config.engine,
        "target": info.target if info else config.model,
        "draft": info.draft if info else config.draft,
        "method": info.method if info else config.method,
        "k": "auto" if live.auto else live.k,
        "temperature": live.temperature,
        "max_tokens": config.max_tokens,
    }


class Transcript:
    """messages: what the next reply is asked to continue. A failed history write is a
    warning (`warn`): the chat goes on without it."""

    def __init__(self, store, system: str | None, warn: Callable[[str], None]) -> None:
        self.store = store
        self.system = system
        self.warn = warn
        self.start_over()

    def start_over(self) -> None:
        self.messages: list[Message] = [{"role": "system", "content": self.system}] if self.system else []
        self.conversation_id: int | None = None
        # The user's text of the last reply when it ended over the model's context.
        self.overflowed: str | None = None
        # Once the user chose it, every later reply of this chat drops its oldest turns to fit.
        self.truncating = False

    def resume(self, conversation: Conversation) -> None:
        self.start_over()
        roles = ("system", "user", "assistant")
        self.messages = [{"role": m.role, "content": m.content} for m in conversation.messages if m.role in roles]
        self.conversation_id = conversation.id

    def add_user(self, text: str, settings: dict, live) -> int | None:
        """Add the user's message and open the reply's row; returns that row's id."""
        self.messages.append({"role": "user", "content": text})
        self.overflowed = None
        if self.store is None:
            return None
        try:
            if self.conversation_id is None:
                self.conversation_id = self.store.new_conversation(settings)
                for message in self.messages[:-1]:  # the system message, if any
                    self.store.add_message(self.conversation_id, message["role"], message["content"])
            self.store.add_message(self.conversation_id, "user", text)
            reply = {"k": live.k, "temperature": live.temperature} | ({"auto_k": True} if live.auto else {})
            return self.store.add_message(self.conversation_id, "assistant", "", settings=reply)
        except Exception as error:
            self.warn(f"History not saved: {error}")
            return None

    def add_reply(self, ended) -> None:
        """A reply ended (spectui.tui.chat.replies.EndedReply): its row, and the message
        unless it was left behind by a new chat."""
        if ended.tracker is not None:
            self.messages.append({"role": "assistant", "content": ended.content})
            if ended.done is not None and ended.done.context_overflow is not None:
                self.overflowed = self.messages[-2]["content"]
        if self.store is None or ended.message_id is None:
            return
        try:
            self.store.finish_message(ended.message_id, ended.content, ended.finish_reason, ended.error, ended.stats)
        except Exception as failure:
            self.warn(f"History not saved: {failure}")

    def take_overflowed(self) -> str | None:
        """The message to resend without the oldest turns; the failed attempt (it and its
        empty reply) leaves the prompt, and every later reply truncates."""
        text, self.overflowed = self.overflowed, None
        if text is not None:
            del self.messages[-2:]
            self.truncating = True
        return text
