"""The saved replies a replay runs over: read from the history, their prompts rebuilt.

A reply's prompt is what the engine saw: the chat template applied to the messages before it
(the chat's system prompt first, replaced and regenerated turns left out, as a resumed chat
holds them; an attached file is in its message's text), with the target's tokenizer, by the
engine's own spectui.engines.prompt.chat_prompt_ids. The reply's ids are its steps' ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from spectui.advise.replay import ReplayInput
from spectui.core.errors import UsageError
from spectui.core.events import Message, Step
from spectui.engines.prompt import chat_prompt_ids
from spectui.store.history import Store
from spectui.store.records import Conversation, NoSuchConversation, StoredMessage

ROLES = ("system", "user", "assistant")
# --vocab's rules for a draft with another tokenizer, as the replay's arms name them ("smollm2-135m (SLEM) k 4")
VOCAB_RULE_NAMES = {"tli": "TLI", "slem": "SLEM", "auto": "auto"}


class Tokenizer(Protocol):
    """The target's tokenizer as the replay uses it (JsonTokenizer, or transformers')."""

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str: ...


@dataclass(frozen=True)
class ChatReply(ReplayInput):
    conversation_id: int = 0
    message_id: int = 0
    recorded: tuple[Step, ...] = ()  # the steps the reply ran
    settings: dict = field(default_factory=dict)  # what it ran with (k, auto_k, method, temperature)
    messages: tuple[Message, ...] = ()  # the chat before it, as its prompt ids were built from (bench --history sends them)

    @property
    def arm(self) -> str:
        """The method and k it ran with, as the advice names arms ("suffix k auto", "k 0"); a draft
        with another tokenizer by its name and rule ("smollm2-135m (SLEM) k 4")."""
        method = self.settings.get("method") or next((s.method for s in self.recorded if s.method), "")
        k = "auto" if self.settings.get("auto_k") else self.settings.get("k", "?")
        if k == 0 or not method:
            return "k 0"
        return self.cross_vocab_arm(k) or f"{method} k {k}"

    def cross_vocab_arm(self, k: object) -> str | None:
        """The cross-vocabulary arm it ran as, where its row recorded the draft and the rule (the
        chat records them: an older row, or a draft of the target's tokenizer, has none)."""
        settings = self.settings
        rule, draft = settings.get("vocab"), settings.get("draft")
        if settings.get("method") != "draft" or not draft or rule not in VOCAB_RULE_NAMES:
            return None
        return f"{draft} ({VOCAB_RULE_NAMES[rule]}) k {k}"


@dataclass
class Selection:
    """The replies chosen, and how many were left out and why."""

    replies: list[ChatReply] = field(default_factory=list)
    conversations: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def read_conversations(path: Path, last: int | None = None, conversation_id: int | None = None,
                       since: float | None = None) -> list[Conversation]:
    """The chosen conversations, oldest first (a replay runs them in the order they were had).
    A missing, locked or damaged history raises StoreError (one line); an unknown id NoSuchConversation."""
    if not path.is_file() and conversation_id is not None:
        raise NoSuchConversation(f"no conversation {conversation_id}: no history at {path} yet")
    if not path.is_file():
        raise UsageError(f"no history at {path} yet: chat first (spectui chat saves every reply there)")
    store = Store(path, read_only=True)
    try:
        if conversation_id is not None:
            return [store.load_conversation(conversation_id)]
        summaries = store.list_conversations(limit=1_000_000)  # newest first
        if since is not None:
            summaries = [s for s in summaries if s.updated >= since]
        if last is not None:
            summaries = summaries[:last]
        return [store.load_conversation(s.id) for s in reversed(summaries)]
    finally:
        store.close()


def shown(message: StoredMessage) -> bool:
    return message.role in ROLES and not message.stats.get("superseded")


def chat_replies(conversations: Sequence[Conversation], tokenizer: Tokenizer, vocab_size: int,
                 encode: Callable[[object, list[Message]], list[int]] = chat_prompt_ids) -> Selection:
    """Every finished reply of the conversations with its prompt ids; T > 0 replies and the
    ones this target's tokenizer did not write are counted, not replayed."""
    selection = Selection(conversations=len(conversations))
    for conversation in conversations:
        kept = [m for m in conversation.messages if shown(m)]
        for index, message in enumerate(kept):
            if message.role != "assistant":
                continue
            reply = _reply(conversation.id, message, kept[:index], tokenizer, vocab_size, encode, selection)
            if reply is not None:
                selection.replies.append(reply)
    return selection


def _reply(conversation_id: int, message: StoredMessage, before: list[StoredMessage], tokenizer: Tokenizer, vocab_size: int,
           encode: Callable[[object, list[Message]], list[int]], selection: Selection) -> ChatReply | None:
    steps = tuple(stored.step for stored in message.steps)
    ids = tuple(token for step in steps for token in step.token_ids)
    if message.finish_reason not in ("stop", "length") or not ids:
        selection.skip("unfinished or empty")
        return None
    if not all(step.exact for step in steps):
        selection.skip("from a server (provenance inferred)")
        return None
    if any(step.temperature > 0 for step in steps):
        selection.skip("sampled at T > 0")
        return None
    if max(ids) >= vocab_size or not _same_text(tokenizer, ids, steps):
        selection.skip("written by a model with another tokenizer")
        return None
    systems = [m for m in before if m.role == "system"][-1:]
    messages: list[Message] = [{"role": m.role, "content": m.content} for m in systems + [m for m in before if m.role != "system"]]
    prompt = tuple(encode(tokenizer, messages))
    return ChatReply(prompt, ids, message.finish_reason, conversation_id, message.id, steps, dict(message.settings),
                     tuple(messages))


def _same_text(tokenizer: Tokenizer, ids: Sequence[int], steps: Sequence[Step]) -> bool:
    """The ids decode to the text the reply showed: this tokenizer wrote them."""
    shown_text = "".join(step.text for step in steps)
    decoded = tokenizer.decode(list(ids), skip_special_tokens=True)
    return decoded.strip() == shown_text.strip()
