"""Stored replies and conversations back on screen: token views from the saved steps, their numbers."""

from __future__ import annotations

from collections.abc import Callable

from spectui.core.attachments import split_blocks
from spectui.core.events import Done
from spectui.store import APPROXIMATE_NOTE, Conversation, StoredMessage
from spectui.chat_session.reply_words import problem_text, reply_summary
from spectui.chat_session.stats import ReplyTracker
from spectui.core.pieces import display_chunks
from spectui.tui.widgets.attachment import AttachmentView
from spectui.tui.widgets.conversation import ReplyView, SystemNote, UserMessage


def stored_reply(stored: StoredMessage, reply_id: int, show_ghosts: bool) -> tuple[ReplyView, ReplyTracker]:
    if stored.steps:
        chunks = []
        for saved in stored.steps:
            chunks.extend(display_chunks(saved.step, saved.pieces, saved.ghost))
        made = "".join(saved.step.text for saved in stored.steps)
        if stored.content.endswith(made) and len(stored.content) > len(made):  # continued from the user's edit
            chunks.insert(0, (stored.content[: len(stored.content) - len(made)], "edited"))
    else:
        kind = "edited" if stored.finish_reason == "edited" else "target"  # the user's text, not the model's
        chunks = [(stored.content, kind)] if stored.content else []
    view = ReplyView(reply_id, chunks, show_ghosts=show_ghosts)
    tracker = ReplyTracker(0.0)
    for saved in stored.steps:
        tracker.add(saved.step, saved.arrived)
    seconds = stored.stats.get("seconds") or 0.0
    first_token = stored.stats.get("time_to_first_token") or 0.0
    tracker.finish(Done("stop", seconds=seconds, time_to_first_token=first_token), tracker.clock.last_token or 0.0)
    reason = stored.finish_reason or "interrupted"
    summary = reply_summary(tracker.stats(), tracker.steps, tracker.decode_rate(), first_token or None)
    if stored.stats.get("colours_approximate"):
        summary += f" · {APPROXIMATE_NOTE}"
    view.finish(reason, summary, problem_text(reason, stored.error))
    return view, tracker


def stored_conversation(conversation: Conversation, new_id: Callable[[], int], show_ghosts: bool) -> tuple[list, list[ReplyTracker]]:
    """The widgets of a stored conversation, in order, and its replies' trackers (a turn that
    was replaced, superseded, left out). new_id() numbers each reply view."""
    widgets, trackers = [], []
    for stored in conversation.messages:
        if stored.stats.get("superseded"):
            continue
        if stored.role == "user":
            files, question = split_blocks(stored.content)  # attached files: folded blocks, as they were shown
            widgets.extend(AttachmentView(attachment, f"≈{attachment.estimated_tokens:,} tokens") for attachment, _ in files)
            widgets.append(UserMessage(question))
        elif stored.role == "assistant":
            view, tracker = stored_reply(stored, new_id(), show_ghosts)
            widgets.append(view)
            trackers.append(tracker)
    widgets.append(SystemNote(f"Resumed conversation {conversation.id}: {conversation.title}"))
    return widgets, trackers
