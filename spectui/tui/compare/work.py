"""The compare view's work: one round or sweep at a time in the host's work thread, and the
Controls that let a key stop it after the step in flight."""

from __future__ import annotations

import threading
from collections.abc import Callable

from typing import TYPE_CHECKING

from textual.message import Message as TextualMessage

from spectui.core.errors import one_line
from spectui.core.events import Control

if TYPE_CHECKING:
    from spectui.host.host import EngineHost


class WorkEnded(TextualMessage):
    """A round or a sweep finished (or failed with `error`)."""

    def __init__(self, generation: int, error: str | None = None) -> None:
        super().__init__()
        self.generation = generation
        self.error = error


class CompareWork:
    def __init__(self, host: EngineHost, post: Callable[[TextualMessage], object]) -> None:
        self.host = host
        self.post = post
        self.control: Control | None = None
        self.stop_requested = threading.Event()

    def start(self, generation: int, body: Callable[[int], None]) -> None:
        """Run body(generation) in the work thread; WorkEnded is posted however it ends."""
        self.stop_requested.clear()
        post = self.post

        def work() -> None:
            try:
                body(generation)
            except Exception as error:  # shown on screen; the chat behind is untouched
                post(WorkEnded(generation, one_line(error)))
            else:
                post(WorkEnded(generation))

        self.host.uses.start_work("spectui-compare", work, stop=self.cancel)

    def cancellable(self, k: int, temperature: float, auto: bool) -> Control:
        """A run's Control, kept to cancel it; born cancelled once a stop was asked for
        (a stop between two runs must not let the next one run)."""
        # Its own settings, not the chat's LiveSettings: compare runs k = 0 beside k, and a sweep every k.
        control = Control(k, temperature, auto=auto)
        if self.stop_requested.is_set():
            control.cancel()
        self.control = control
        return control

    def cancel(self) -> None:
        self.stop_requested.set()
        if self.control is not None:
            self.control.cancel()
