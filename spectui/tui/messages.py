"""What the engine host and the generation threads send to the UI.

Steps do not go through Textual's message pump one by one: at thousands of tokens a
second its per-message cost (a thread-safe wake-up and a dispatch each) starves the keys.
The generation thread puts one StepArrived per Step in the screen's inbox (FrameInbox),
which wakes the screen once per frame at most and drains it then; the end of a reply is a
real message, posted after the last step was queued.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from spectui.core.commands import Command
from spectui.core.events import Done, Step
from spectui.host.messages import HostMessage
from spectui.store import Conversation


class HostEvent(Message):
    """What the engine host said (a spectui.host.messages record), on the UI's loop."""

    def __init__(self, event: HostMessage) -> None:
        super().__init__()
        self.event = event


class ShowConversation(Message):
    """Show a stored conversation in the chat (picked in the history screen)."""

    def __init__(self, conversation: Conversation) -> None:
        super().__init__()
        self.conversation = conversation


class EngineRestarting(Message):
    """A reply's engine process had ended and is being started again for it."""

    def __init__(self, reply_id: int, stage: str, done: int, total: int) -> None:
        super().__init__()
        self.reply_id = reply_id
        self.stage = stage
        self.done = done
        self.total = total


@dataclass(frozen=True, slots=True)
class StepArrived:
    """One verify step of reply `reply_id`, already split into per-token pieces."""

    reply_id: int
    step: Step
    pieces: list[str]
    ghost: str
    arrived: float


@dataclass(frozen=True, slots=True)
class PrefillArrived:
    """A long prompt's prefill progress (spectui.core.events.Prefill), through the same inbox
    as the steps: it is drawn before the reply's first step, never after it."""

    reply_id: int
    done: int
    total: int
    arrived: float


class ReplyEnded(Message):
    """The stream ended: with its Done, or with an exception raised inside the engine.

    `restated` holds the whole reply again, split into pieces like the streamed steps,
    when the engine's final record recoloured it (Done.restated_steps)."""

    def __init__(
        self,
        reply_id: int,
        done: Done | None,
        error: str | None,
        ended: float,
        restated: list[StepArrived] | None = None,
    ) -> None:
        super().__init__()
        self.reply_id = reply_id
        self.done = done
        self.error = error
        self.ended = ended
        self.restated = restated


class StoreFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class ActionWanted(Message):
    """A `/` command that does what a key does: the screen (or the app, `app.NAME`) runs `action`."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action = action


class CommandWanted(Message):
    """A message box `/` command picked in the palette: the chat runs it as if it were typed."""

    def __init__(self, command: Command) -> None:
        super().__init__()
        self.command = command


class ExportWanted(Message):
    """`/export [FOLDER]`: the app writes the chat's files (FOLDER None: its export folder) and
    hands their paths to `written`. conversation_id is read once the history's queue ran."""

    def __init__(self, conversation_id: Callable[[], int | None], folder: Path | None,
                 written: Callable[[tuple[Path, ...]], None]) -> None:
        super().__init__()
        self.conversation_id, self.folder, self.written = conversation_id, folder, written
