"""A conversation as Markdown, JSON or a per-step JSONL trace, as the chat shows it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

from spectui.core.reasoning import split_reasoning
from spectui.core.record import step_record
from spectui.core.safe_text import safe_text
from spectui.store.records import Conversation, StoredMessage

APPROXIMATE_NOTE = "colours approximate (the server did not say which tokens were drafts)"  # γ stays exact when it sent counts


def is_superseded(message: StoredMessage) -> bool:
    return bool(message.stats.get("superseded"))


def shown_messages(conversation: Conversation) -> list[StoredMessage]:
    """The messages the chat shows: every export leaves out the turns that regenerate or
    edit replaced (they stay in the file, as SHOWN leaves them out of search and counts)."""
    return [message for message in conversation.messages if not is_superseded(message)]


def export_markdown(conversation: Conversation) -> str:
    """The conversation as Markdown to read or share: what the model wrote is shown with its
    control characters made visible (the trace in JSONL keeps the text exact). The header
    holds what the chat started with; each reply's own settings follow it (keys change them)."""
    lines = [f"# {conversation.title or f'Conversation {conversation.id}'}", ""]
    settings = conversation.settings
    if settings:
        described = ", ".join(f"{key} {value}" for key, value in settings.items() if value is not None)
        lines += [f"_started with {described}_", ""]
    for message in shown_messages(conversation):
        lines.append(f"## {message.role}")
        lines.append("")
        reasoning, answer = split_reasoning(message.content) if message.role == "assistant" else ("", message.content)
        if reasoning:  # apart from the answer, folded where Markdown is rendered
            lines += ["<details><summary>reasoning</summary>", "", reasoning, "", "</details>", ""]
        lines.append(answer)
        if message.role == "assistant":
            note = _reply_note(message)
            if note:
                lines += ["", f"_{note}_"]
        lines.append("")
    return safe_text("\n".join(lines))


def _reply_note(message: StoredMessage) -> str:
    # The settings this reply ran with: keys change k and T mid-chat, so the header's are not its.
    parts = []
    if isinstance(message.stats.get("ran"), str):  # the k and T its steps ran with, changes and all
        parts.append(message.stats["ran"])
    elif message.settings.get("auto_k"):
        parts.append("k auto")
    elif "k" in message.settings:
        parts.append(f"k {message.settings['k']}")
    if "temperature" in message.settings and "ran" not in message.stats:
        parts.append(f"T {message.settings['temperature']:.2f}")
    if message.settings.get("method"):
        parts.append(str(message.settings["method"]))
    if message.settings.get("seed") is not None:
        parts.append(f"seed {message.settings['seed']}")
    gamma = message.stats.get("gamma")
    tau = message.stats.get("tau")
    speed = message.stats.get("tokens_per_s")
    if gamma is not None:
        parts.append(f"γ {gamma:.2f}")
    if tau is not None:
        parts.append(f"τ {tau:.2f}")
    if speed:
        parts.append(f"{speed:.1f} tok/s")
    if message.stats.get("colours_approximate"):
        parts.append(APPROXIMATE_NOTE)
    if message.finish_reason not in (None, "stop"):
        parts.append(f"ended: {message.finish_reason}" + (f" ({message.error})" if message.error else ""))
    return " · ".join(parts)


def export_trace_jsonl(conversation: Conversation) -> Iterator[str]:
    """One JSON object per step of every reply, in order: spectui.core.record's step record
    with the pieces as shown, and where the step sits."""
    for message in shown_messages(conversation):
        for index, stored in enumerate(message.steps):
            step = replace(stored.step, pieces=stored.pieces, rejected_text=stored.ghost)
            yield json.dumps(
                {
                    "conversation_id": conversation.id,
                    "message_id": message.id,
                    "step": index,
                    "arrived": stored.arrived,
                    **step_record(step),
                },
                ensure_ascii=False,
            )


def reply_parts(message: StoredMessage) -> dict:
    """A message's content; a reply's reasoning apart from its answer (the trace keeps the text whole)."""
    if message.role != "assistant":
        return {"content": message.content}
    reasoning, answer = split_reasoning(message.content)
    return {"content": answer, **({"reasoning": reasoning} if reasoning else {})}


def export_json(conversation: Conversation) -> str:
    """The conversation as one JSON document: what the chat shows, each message with its
    settings (k, T, method, seed of each reply) and stats; the per-step trace is the JSONL."""
    messages = [
        {
            "id": message.id,
            "role": message.role,
            **reply_parts(message),
            **({"finish_reason": message.finish_reason} if message.role == "assistant" else {}),
            **({"error": message.error} if message.error else {}),
            **({"settings": message.settings} if message.settings else {}),
            **({"stats": message.stats} if message.stats else {}),
        }
        for message in shown_messages(conversation)
    ]
    document = {
        "id": conversation.id,
        "title": conversation.title,
        "created": conversation.created,
        "updated": conversation.updated,
        "settings": conversation.settings,
        "messages": messages,
    }
    return json.dumps(document, ensure_ascii=False, indent=2, default=str) + "\n"
