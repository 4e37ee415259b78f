"""Key presses settle before a restart: F6 F6 F6 is one restart with k + 3, not three."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def stop(self) -> None: ...


SetTimer = Callable[[float, Callable[[], None]], Timer]


class Debounce:
    """One callback, run `delay` seconds after the last start() on the owner's thread
    (set_timer), or at once where there is no timer to set."""

    def __init__(self, delay: float, set_timer: SetTimer | None = None) -> None:
        self.delay = delay
        self.set_timer = set_timer
        self._timer: Timer | None = None

    @property
    def settling(self) -> bool:
        return self._timer is not None

    def start(self, callback: Callable[[], None]) -> None:
        self.stop()
        if self.set_timer is None:
            callback()
            return

        def elapsed() -> None:
            self._timer = None
            callback()

        self._timer = self.set_timer(self.delay, elapsed)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
