"""What the engine host tells its listener: plain records, one per thing that happened, the
words of its notes when a load ends, and the mail that carries them (and what its threads
hand it) to the owner's thread.

The UI turns the records into its own messages; a test reads them as they are.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from spectui.core.engine import Engine
from spectui.core.events import LiveValues


@dataclass(frozen=True)
class LoadProgress:
    stage: str
    done: int
    total: int

    @property
    def text(self) -> str:
        percent = f" {100 * self.done / self.total:.0f}%" if self.total else ""
        return f"{self.stage}{percent}"


@dataclass(frozen=True)
class EngineReady:
    engine: Engine
    seconds: float
    restart_note: str | None = None  # set when this was a k restart: how it went
    swapped_to: str | None = None  # set when this engine replaced another (the model screen's choice)
    # v(k)'s slope as the engine timed it on this machine (Engine.measured_verify_slope, across
    # the engine process too); None: not measured. The first screen says the "watch it" cost.
    verify_slope: float | None = None


@dataclass(frozen=True)
class EngineFailed:
    error: str
    restart_note: str | None = None  # set when a k restart failed
    swap_failed: bool = False  # another engine failed to load: the one before goes on (or loads again)


@dataclass(frozen=True)
class RestartPlanned:
    """A k restart waits (key presses settling, a reply or the compare view holding the
    engine); k None: the wish was dropped (the engine already runs that k)."""

    k: int | None


@dataclass(frozen=True)
class SwapPlanned:
    """Another engine (model, draft, method, engine) waits to replace this one: `what` names it."""

    what: str


@dataclass(frozen=True)
class RestartStarted:
    k: int | None  # None: a swap to another engine, not a k restart
    note: str


@dataclass(frozen=True)
class LiveChanged:
    values: LiveValues


@dataclass(frozen=True)
class Notice:
    text: str
    severity: str = "information"  # as Textual's notify takes it: information, warning, error
    timeout: float | None = None


HostMessage = (LoadProgress | EngineReady | EngineFailed | RestartPlanned | SwapPlanned | RestartStarted | LiveChanged
               | Notice)


def ready_note(label: str, seconds: float, restarted_k: int | None, own_k: int | None, swapped_to: str | None) -> str | None:
    """How a restart or a switch went; None for a first load."""
    if restarted_k is not None:
        pinned = f" (it runs k = {own_k}, as its speculative config says)" if own_k not in (None, restarted_k) else ""
        return f"{label} restarted with k = {restarted_k} in {seconds:.1f} s{pinned}; the conversation goes on."
    if swapped_to is not None:
        return f"Switched to {swapped_to} in {seconds:.1f} s; the conversation goes on."
    return None


def failure_text(label: str, error: str, restarted_k: int | None, swapped_to: str | None) -> tuple[str, str | None]:
    """What failed, and what the user can do about it (None: nothing here)."""
    if swapped_to is not None:
        return f"Could not switch to {swapped_to}: {error}", "the model screen can try another"
    if restarted_k is not None:
        return f"Could not restart {label} with k = {restarted_k}: {error}", "press a k key to try again"
    return f"Could not load the engine: {error}", None


def fallback_text(swapped_to: str, error: str, what: str, goes_on: bool) -> tuple[str, str]:
    """A failed switch, and what the chat does: `what`, the engine before, goes on, or loads again."""
    text = f"Could not switch to {swapped_to}: {error}"
    return text, f"{text} · {what} goes on; the model screen can try another" if goes_on else f"{text} · loading {what} again"


class HostMail:
    """The engine host's two ways of talking: what it tells its owner (HostMessages, to the
    listeners, on the owner's thread) and what its threads hand it (arrivals, from any thread:
    wake() asks the owner's thread to take them, since threads never touch the host's state)."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[HostMessage], object]] = []
        self._arrivals: queue.SimpleQueue = queue.SimpleQueue()
        self.wake: Callable[[], object] | None = None  # set by the owner: leads to its pump()

    def listen(self, listener: Callable[[HostMessage], object]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def tell(self, message: HostMessage) -> None:
        for listener in list(self._listeners):
            listener(message)

    def arrive(self, item: object) -> None:
        """From any thread: keep `item` for the owner's thread and wake it."""
        self._arrivals.put(item)
        wake = self.wake
        if wake is not None:
            wake()

    def arrivals(self) -> Iterator[object]:
        """What arrived so far, oldest first; on the owner's thread."""
        while True:
            try:
                yield self._arrivals.get_nowait()
            except queue.Empty:
                return
