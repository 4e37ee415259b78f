"""What a restart waits for: what holds the engine (replies and compare runs in their
threads, an open compare view) and key presses settling (F6 F6 F6 is one restart with
k + 3, not three).

A k restart waits until no use is left; quitting stops them all and waits for their threads,
since closing an engine under a running forward pass pulls its caches away mid-step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


def start_thread(target: Callable[[], None], name: str) -> threading.Thread:
    # Plain daemon threads: a forward pass cannot be interrupted, and quitting must not wait for one.
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


@dataclass(eq=False)
class Use:
    name: str
    stop: Callable[[], None] | None = None  # asks it to end
    reply: bool = False
    thread: threading.Thread | None = None
    after: list[Callable[[], None]] = field(default_factory=list)  # run when released
    uses: "Uses | None" = None

    def release(self) -> None:
        if self.uses is not None:
            self.uses.release(self)


@dataclass(frozen=True)
class Released:
    """A work thread ended: handed to the owner's thread, which releases its Use."""

    use: Use


class Uses:
    """on_release() runs after every release; arrive(Released) comes from work threads."""

    def __init__(self, arrive: Callable[[Released], None], on_release: Callable[[], None]) -> None:
        self._uses: list[Use] = []
        self._arrive = arrive
        self._on_release = on_release

    def __bool__(self) -> bool:
        return bool(self._uses)

    @property
    def replying(self) -> bool:
        return any(use.reply for use in self._uses)

    def hold(self, name: str, stop: Callable[[], None] | None = None) -> Use:
        use = Use(name, stop, uses=self)
        self._uses.append(use)
        return use

    def start_work(self, name: str, body: Callable[[], None], stop: Callable[[], None] | None = None, reply: bool = False) -> Use:
        """Run body() in a thread named `name`, held until it returns."""
        use = self.hold(name, stop)
        use.reply = reply

        def run() -> None:
            try:
                body()
            finally:
                self._arrive(Released(use))

        use.thread = start_thread(run, name)
        return use

    def release(self, use: Use) -> None:
        if use not in self._uses:
            return
        self._uses.remove(use)
        for after in use.after:
            after()
        self._on_release()

    def threads(self) -> list[threading.Thread]:
        return [use.thread for use in self._uses if use.thread is not None]

    def stop_and_wait(self, timeout: float) -> bool:
        """Ask every use to stop, wait up to `timeout` in all for the threads; True if none runs."""
        for use in list(self._uses):
            if use.stop is not None:
                use.stop()
        deadline = time.monotonic() + timeout
        threads = self.threads()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)


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
