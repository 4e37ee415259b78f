"""A streamed response read in a thread of its own.

The reply's loop waits on a queue with a timeout instead of on the socket, so it looks at
Esc (control.cancelled) every POLL_S whatever the server sends or withholds; stopping shuts
the socket down, which wakes the reading thread and tells the server the client has gone.
"""

from __future__ import annotations

import queue
import threading

from spectui.engines.server.sse import SseDecoder
from spectui.engines.server.transport import Stream

POLL_S = 0.1
QUEUED_EVENTS = 256  # the reader waits when the reply's loop falls this far behind


class EventReader:
    """SSE payloads of `stream`, as ("event", text), then ("end", None) or ("error", exc)."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._items: queue.Queue = queue.Queue(QUEUED_EVENTS)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._read, name="spectui-server-stream", daemon=True)
        self._thread.start()

    def next(self, timeout: float = POLL_S) -> tuple[str, object] | None:
        """The next item, or None when nothing came within `timeout`."""
        try:
            return self._items.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self) -> None:
        """Stop reading (from the reply's thread): the reading thread ends on its own."""
        self._stopped.set()
        self.stream.abort()

    def _read(self) -> None:
        decoder = SseDecoder()
        try:
            for chunk in self.stream.chunks():
                for event in decoder.feed(chunk):
                    if not self._put(("event", event)):
                        return
                if self._stopped.is_set():
                    return
            self._put(("end", None))
        except Exception as error:  # network, protocol, an over-long line: the reply names it
            self._put(("error", error))
        finally:
            self.stream.close()

    def _put(self, item: tuple[str, object]) -> bool:
        while not self._stopped.is_set():
            try:
                self._items.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False
