"""A streamed response opened and read in a thread of its own.

The reply's loop waits on a queue with a timeout instead of on the socket, so it looks at
Esc (control.cancelled) every POLL_S whatever the server sends or withholds, its response
headers included; stopping shuts the socket down, which wakes the reading thread and tells
the server the client has gone.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TypeVar

from spectui.core.events import Control
from spectui.engines.server.sse import SseDecoder
from spectui.engines.server.transport import Abort, ServerError, Stream

T = TypeVar("T")

POLL_S = 0.1
QUEUED_EVENTS = 256  # the reader waits when the reply's loop falls this far behind


class EventReader:
    """The stream `open_stream(abort)` opens: ("refused", ServerError) when it cannot, else
    ("opened", None) once the server answered, its SSE payloads as ("event", text), then
    ("end", None) or ("error", exc)."""

    def __init__(self, open_stream: Callable[[Abort], Stream]) -> None:
        self.open_stream = open_stream
        self.stream: Stream | None = None
        self._abort = Abort()
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
        self._abort.abort()  # the stream's socket, while it connects or waits for headers too
        if self.stream is not None:
            self.stream.abort()

    def _read(self) -> None:
        try:
            self.stream = self.open_stream(self._abort)
        except ServerError as error:
            self._put(("refused", error))
            return
        except Exception as error:  # whatever else opening raised: the reply names it
            self._put(("error", error))
            return
        if not self._put(("opened", None)):
            self.stream.close()
            return
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


def unless_cancelled(work: Callable[[Abort], T], control: Control) -> T | None:
    """work(abort) in a thread of its own, so that Esc ends the wait within POLL_S whatever
    the server does: then it is aborted and None comes back. Its exceptions come back raised."""
    abort = Abort()
    result: queue.Queue = queue.Queue(1)

    def run() -> None:
        try:
            result.put((True, work(abort)))
        except BaseException as error:  # handed to the caller's thread
            result.put((False, error))

    threading.Thread(target=run, name="spectui-server-request", daemon=True).start()
    while True:
        try:
            ok, value = result.get(timeout=POLL_S)
        except queue.Empty:
            if control.cancelled:
                abort.abort()
                return None
            continue
        if ok:
            return value
        raise value
