"""What holds the engine: replies and compare runs in their threads, an open compare view.

A k restart waits until none is left; quitting stops them all and waits for their threads,
since closing an engine under a running forward pass pulls its caches away mid-step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


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
