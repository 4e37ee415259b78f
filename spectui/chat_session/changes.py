"""What the `/` commands change in a chat session, and what they say of it: the files
(`/drop`), the reply cap (`/max`), the context (`/ctx`, and the files that would overflow it),
the thinking switch (`/think`). ValueError says why a command's argument was refused."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from spectui.chat_session.attached import Sent
from spectui.chat_session.budget import context_line, parse_max
from spectui.chat_session.session import ChatSession
from spectui.core.attachments import Attachment, estimate_tokens
from spectui.core.words import counted

if TYPE_CHECKING:
    from spectui.host.host import EngineHost

NO_SWITCH = "This model's chat template has no thinking switch (Qwen3-style enable_thinking): it thinks as it is made to."


def parse_think(text: str, now: bool) -> bool:
    """`/think`'s argument: on or off; nothing turns it the other way. ValueError says why not."""
    word = text.strip().lower()
    if not word:
        return not now
    if word in ("on", "off"):
        return word == "on"
    raise ValueError(f"/think takes on or off, not {text.strip()[:40]!r}")


def drop_file(session: ChatSession, name: str) -> tuple[Attachment | Sent | None, str]:
    """`/drop NAME`: the file out of the chat (a sent one out of its turn, whose row follows)."""
    dropped, line = session.files.drop(name)
    if isinstance(dropped, Sent):
        session.transcript.rewrite(dropped.entry)
    return dropped, line


def context_note(session: ChatSession) -> str | None:
    """One line when the chat with its waiting files would not fit the model's context."""
    engine = session.host.engine
    context = engine.context_length if engine is not None else None
    if context is None or not session.files.pending:
        return None
    used = sum(estimate_tokens(entry.content) for entry in session.transcript.entries) + session.files.pending_tokens()
    if used < context:
        return None
    return (f"With the files waiting, the chat is ≈{used:,} tokens; the model holds {context:,}: "
            f"≈{used - context + 1:,} too many. /drop a file or /clear for a new chat.")


def set_max(session: ChatSession, text: str) -> str:
    """`/max N|off`: the replies' cap from now on. ValueError says why not."""
    cap = parse_max(text)
    session.config = replace(session.config, max_tokens=cap)
    return f"Replies stop at {counted(cap, 'token', thousands=True)} from now on." if cap is not None \
        else "Replies may fill what the model's context leaves from now on."


def context_used(session: ChatSession) -> str:
    """`/ctx`: what the model's cache held after the last reply, else the chat's text counted."""
    engine, last = session.host.engine, session.last_reply
    used, approximate = None, False
    if last is not None and last.done is not None and last.done.prompt_token_ids:
        used = len(last.done.prompt_token_ids) + last.clock.num_tokens
    elif session.transcript.entries:
        used, approximate = sum(estimate_tokens(entry.content) for entry in session.transcript.entries), True
    return context_line(used, engine.context_length if engine is not None else None, session.config.max_tokens, approximate)


def has_thinking_switch(host: EngineHost) -> bool:
    capabilities = host.capabilities
    return capabilities is not None and capabilities.thinking_switch


def set_thinking(session: ChatSession, text: str = "") -> str:
    """`/think on|off` (nothing: the other way): what to say. ValueError says why not."""
    if not has_thinking_switch(session.host):
        raise ValueError(NO_SWITCH)
    session.thinking = parse_think(text, session.thinking)
    return "Thinking on: the next replies think first" if session.thinking else "Thinking off: the next replies answer at once"
