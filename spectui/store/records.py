"""What the history holds, as Python reads it back, and the errors it raises."""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.core.errors import SpectuiError
from spectui.core.events import Step


class StoreError(SpectuiError):
    """The history database cannot be opened or has no such conversation."""


class NoSuchConversation(StoreError):
    """An id given to rename or delete that the history does not hold: a usage error."""

    exit_code = 2


@dataclass(frozen=True)
class StoredStep:
    step: Step
    pieces: tuple[str, ...]
    ghost: str
    arrived: float


@dataclass
class StoredMessage:
    id: int
    role: str
    content: str
    finish_reason: str | None = None
    error: str | None = None
    settings: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    steps: list[StoredStep] = field(default_factory=list)


@dataclass
class Conversation:
    id: int
    title: str
    created: float
    updated: float
    settings: dict
    messages: list[StoredMessage]


@dataclass(frozen=True)
class ConversationSummary:
    id: int
    title: str
    created: float
    updated: float
    num_messages: int


@dataclass(frozen=True)
class SearchHit(ConversationSummary):
    """A conversation that matched, with its best match's snippet as (text, matched) parts."""

    snippet: tuple[tuple[str, bool], ...]

    @property
    def snippet_text(self) -> str:
        return "".join(text for text, _ in self.snippet)
