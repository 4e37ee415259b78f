"""The compare runs' steps on their way to the panes: put from the work thread, drawn a frame at a time."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message_pump import MessagePump

from spectui.core.events import Step
from spectui.core.pieces import display_chunks, step_pieces
from spectui.tui.compare.pane import ComparePane
from spectui.tui.frames import FrameInbox


@dataclass(frozen=True, slots=True)
class RunStarted:
    path: str
    k: str  # "k = 4", "k auto (from 4)"
    number: int  # 1-based, within its path


@dataclass(frozen=True, slots=True)
class StepShown:
    path: str
    chunks: list[tuple[str, str]]


class CompareStream:
    """Queues each run's start and steps per path; flush draws what came, in order, into the panes."""

    def __init__(self, screen: MessagePump, panes: dict[str, ComparePane]) -> None:
        self.panes = panes
        self.inbox: FrameInbox[RunStarted | StepShown] = FrameInbox(screen, self.flush)

    def run_started(self, path: str, k: str, number: int) -> None:
        self.inbox.put(RunStarted(path, k, number))

    def on_step(self, path: str, step: Step) -> None:
        self.inbox.put(StepShown(path, display_chunks(step, *step_pieces(step))))

    def flush(self) -> None:
        pending: dict[str, list[tuple[str, str]]] = {}
        for item in self.inbox.take_all():
            if isinstance(item, RunStarted):
                self._append_pending(pending)
                pending = {}
                self.panes[item.path].start_run(item.k, item.number)
            else:
                pending.setdefault(item.path, []).extend(item.chunks)
        self._append_pending(pending)

    def _append_pending(self, pending: dict[str, list[tuple[str, str]]]) -> None:
        for path, chunks in pending.items():
            self.panes[path].append(chunks)
