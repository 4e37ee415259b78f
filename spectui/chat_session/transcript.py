"""The conversation as the model sees it, and its rows in the history store.

A turn that is replaced (a regenerated reply, an edited message) or a system prompt that
is changed stays in the store, marked superseded in its row's stats, and is left out when
the chat is shown or resumed: nothing typed or generated is lost. A chat's system prompt
is a `system` row; the newest one that is not superseded is the chat's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from spectui.core.events import Message
from spectui.core.reasoning import answer_of
from spectui.core.engine import EngineInfo
from spectui.core.events import LiveSettings
from spectui.store import Conversation, HistoryQueue, RowId, StoredMessage

if TYPE_CHECKING:
    from spectui.settings.config import ChatConfig
    from spectui.chat_session.reply import EndedReply

T = TypeVar("T")

ROLES = ("system", "user", "assistant")


def settings_record(info: EngineInfo | None, config: ChatConfig, live: LiveSettings, own_k: int | str | None = None) -> dict:
    """What a conversation was started with, saved beside it in history (own_k: the k an
    engine that sets its own runs, a server's, in place of the chat's)."""
    return {
        "engine": info.name if info else config.engine,
        "target": info.target if info else config.model,
        "draft": info.draft if info else config.draft,
        "method": info.method if info else config.method,
        "k": own_k if own_k is not None else "auto" if live.auto else live.k,
        "temperature": live.temperature,
        "max_tokens": config.max_tokens,
    }


def history_title(content: str, title: str | None = None) -> str:
    """The title a chat's first message gives its conversation (Store.add_message's rule):
    `title`'s first line when given (a message with files), else the message's."""
    named = title if title and title.strip() else content
    return named.strip().splitlines()[0][:80] if named.strip() else ""


def superseded(message: StoredMessage) -> bool:
    return bool(message.stats.get("superseded"))


@dataclass
class Entry:
    """One message of the chat and its row in the store (row None: not saved)."""

    role: str
    content: str
    row: int | RowId | None = None  # a RowId while its write waits in the history's queue
    settings: dict = field(default_factory=dict)  # a reply's: k, temperature, auto_k, seed, method
    finish_reason: str = "stop"
    error: str | None = None
    stats: dict = field(default_factory=dict)

    @property
    def message(self) -> Message:
        # A reply's reasoning is not sent back: the model is given its answers, as APIs expect.
        content = answer_of(self.content) if self.role == "assistant" else self.content
        return {"role": self.role, "content": content}


class Transcript:
    """entries: what the next reply is asked to continue. A failed history write is a
    warning (`warn`): the chat goes on without it. The store is the chat's HistoryQueue
    (writes return at once, ids as RowIds) or a plain Store."""

    def __init__(self, store: HistoryQueue | None, system: str | None, warn: Callable[[str], None]) -> None:
        self.store = store
        self.default_system = system  # a new chat's system prompt
        self.warn = warn
        self.start_over()

    def start_over(self) -> None:
        system = self.default_system
        self.entries: list[Entry] = [Entry("system", system)] if system else []
        self.conversation: int | RowId | None = None  # None: not saved yet
        self.title: str | None = None  # the history's title for it as this chat gave it (None: unknown)
        # The user's text of the last reply when it ended over the model's context.
        self.overflowed: str | None = None
        # Once the user chose it, every later reply of this chat drops its oldest turns to fit.
        self.truncating = False

    @property
    def conversation_id(self) -> int | None:
        """The conversation's id in the history, once its write ran."""
        return self.conversation.value if isinstance(self.conversation, RowId) else self.conversation

    @property
    def messages(self) -> list[Message]:
        return [entry.message for entry in self.entries]

    @property
    def system(self) -> str:
        return self.entries[0].content if self.entries and self.entries[0].role == "system" else ""

    def resume(self, conversation: Conversation) -> None:
        self.start_over()
        kept = [m for m in conversation.messages if m.role in ROLES and not superseded(m)]
        systems = [m for m in kept if m.role == "system"][-1:]  # the chat's prompt goes first
        self.entries = [Entry(m.role, m.content, m.id, m.settings, m.finish_reason or "interrupted", m.error, m.stats)
                        for m in systems + [m for m in kept if m.role != "system"]]
        self.conversation = conversation.id
        self.title = conversation.title

    def last(self, role: str) -> Entry | None:
        return self.entries[-1] if self.entries and self.entries[-1].role == role else None

    # adding

    def add_user(self, text: str, settings: dict, title: str | None = None) -> None:
        """Add the user's message; the chat's first one opens its conversation in the store
        (titled `title` when the message's first line is not what it asks: a file's header)."""
        first = not any(entry.role == "user" for entry in self.entries)
        self.entries.append(Entry("user", text))
        self.overflowed = None
        if self.conversation is None:
            named = title.strip().splitlines()[0][:80] if title and title.strip() else ""
            self.conversation = self._write(lambda store: store.new_conversation(settings, title=named))
            self.title = history_title(text, title)
            for entry in self.entries[:-1]:  # the system message, if any
                entry.row = self._save(entry)
        elif first:  # the first message edited (F12): the history's title follows it, unless renamed
            self.retitle(history_title(text, title))
        self.entries[-1].row = self._save(self.entries[-1])

    def retitle(self, title: str) -> None:
        """The title this chat gave its conversation, now `title`: not where the user renamed it
        since (the history screen), nor to an empty one."""
        conversation, before = self.conversation, self.title
        if conversation is None or not title or title == before:
            return
        self.title = title
        self._write(lambda store: store.retitle_conversation(conversation, before, title))

    def open_reply(self, settings: dict) -> int | RowId | None:
        """The reply's row (empty until it ends), made with `settings`; returns its id."""
        if (conversation := self.conversation) is None:
            return None
        return self._write(lambda store: store.add_message(conversation, "assistant", "", settings=settings))

    def add_reply(self, ended: EndedReply) -> None:
        """A reply ended (spectui.chat_session.reply.EndedReply): its row, and the message
        unless it was left behind by a new chat."""
        if ended.tracker is not None:
            if ended.continued and self.last("assistant") is not None:
                self.entries.pop()  # the same reply, gone on: same row, longer text
            self.entries.append(Entry("assistant", ended.content, ended.message_id, ended.settings, ended.finish_reason,
                                      ended.error, ended.stats))
            if ended.done is not None and ended.done.context_overflow is not None:
                self.overflowed = self.entries[-2].content
        if (row := ended.message_id) is not None:
            self._write(lambda store: store.finish_message(row, ended.content, ended.finish_reason,
                                                           ended.error, ended.stats))

    # replacing

    def drop_last(self, role: str) -> Entry | None:
        """Take the last message off the chat if it has `role`; its row stays, superseded."""
        entry = self.last(role)
        if entry is not None:
            self.entries.pop()
            self._supersede(entry)
        return entry

    def edit_reply(self, text: str, finish_reason: str) -> Entry | None:
        """The last reply as the user edited it: a row of its own (the model's stays, superseded),
        with no steps yet (a continuation numbers its steps from the first)."""
        old = self.drop_last("assistant")
        if old is None:
            return None
        stats = {"edited": True, "reply_tokens": 0, "reply_steps": 0}
        row = self.open_reply(old.settings)
        if row is not None:
            self._write(lambda store: store.finish_message(row, text, finish_reason, None, stats))
        self.entries.append(Entry("assistant", text, row, old.settings, finish_reason, None, stats))
        return self.entries[-1]

    def set_system(self, text: str) -> None:
        """This chat's system prompt from now on ("" for none): the old row is superseded."""
        old = self.entries.pop(0) if self.system else None
        if old is not None:
            self._supersede(old)
        if text:
            self.entries.insert(0, Entry("system", text))
            if self.conversation is not None:
                self.entries[0].row = self._save(self.entries[0])

    def take_overflowed(self) -> str | None:
        """The message to resend without the oldest turns; the failed attempt (it and its
        empty reply) leaves the prompt, and every later reply truncates."""
        text, self.overflowed = self.overflowed, None
        if text is not None:
            del self.entries[-2:]
            self.truncating = True
        return text

    def rewrite(self, entry: Entry) -> None:
        """An entry's text changed (a file dropped from its turn): its row follows."""
        if (row := entry.row) is not None:
            self._write(lambda store: store.finish_message(row, entry.content, entry.finish_reason,
                                                           entry.error, entry.stats))

    # the store

    def _save(self, entry: Entry) -> int | RowId | None:
        if (conversation := self.conversation) is None:
            return None
        return self._write(lambda store: store.add_message(conversation, entry.role, entry.content))

    def _supersede(self, entry: Entry) -> None:
        if (row := entry.row) is not None:
            stats = entry.stats | {"superseded": True}
            self._write(lambda store: store.finish_message(row, entry.content, entry.finish_reason,
                                                           entry.error, stats))

    def _write(self, write: Callable[[HistoryQueue], T]) -> T | None:
        if self.store is None:
            return None
        try:
            return write(self.store)
        except Exception as error:
            self.warn(f"History not saved: {error}")
            return None
