"""The engine host's two ways of talking: what it tells its owner (HostMessages, to the
listeners, on the owner's thread) and what its threads hand it (arrivals, from any thread:
wake() asks the owner's thread to take them, since threads never touch the host's state)."""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator

from spectui.host.messages import HostMessage


class HostMail:
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
