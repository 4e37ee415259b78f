"""What the engine host tells its listener: plain records, one per thing that happened.

The UI turns them into its own messages; a test reads them as they are.
"""

from __future__ import annotations

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
