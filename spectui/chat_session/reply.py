"""A reply as the session asks for it (ReplyRequest) and as it hands it back (EndedReply)."""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.core.events import Done, GenerationParams, LiveValues, Message
from spectui.chat_session.stats import ReplyTracker
from spectui.store import RowId


@dataclass(frozen=True)
class ReplyRequest:
    """What a reply is started with: the prompt, its parameters, its history row, what it is
    made with (settings: its row's, and regenerate's), the budget that binds (cap), and for a
    continued reply the (tokens, steps) it had before, its text so far, and whether that text
    holds the user's edit."""

    messages: list[Message]
    params: GenerationParams
    message_id: int | RowId | None
    values: LiveValues
    settings: dict
    cap: int | None
    earlier: tuple[int, int] | None = None
    before: str = ""
    from_edit: bool = False


@dataclass(frozen=True)
class EndedReply:
    message_id: int | RowId | None  # a RowId while the history's queue holds its write
    content: str
    finish_reason: str
    error: str | None
    stats: dict  # what its history row records
    tracker: ReplyTracker | None = None  # None: a detached reply, of which only the row is kept
    done: Done | None = None
    settings: dict = field(default_factory=dict)  # what it was made with (ReplyRequest.settings)
    continued: bool = False  # the last reply went on: its entry is replaced, not added
