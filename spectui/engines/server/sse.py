"""Server-sent events: the `data:` payloads of a byte stream, however it was split.

Only what an OpenAI-compatible server sends is handled: `data:` fields (several in one
event are joined by newlines), comment lines, `\\n` or `\\r\\n` line ends. `event:`, `id:`
and `retry:` carry nothing a chat stream needs, so they are skipped.

Each byte is looked at once (a line's pieces wait in a list until its newline comes), and a
line or an event longer than `max_bytes` is refused: a server that never sends a newline
costs bounded memory and linear time, never a stall.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

MAX_EVENT_BYTES = 16 * 2**20  # far above any chunk (vLLM's first one holds the prompt's ids)


class SseTooLong(ValueError):
    """A line or an event past the limit."""


class SseDecoder:
    """Turns byte chunks (split anywhere, even inside a UTF-8 character) into event payloads."""

    def __init__(self, max_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._pending: list[bytes] = []  # the current line's pieces, before its newline
        self._pending_bytes = 0
        self._data_lines: list[str] = []
        self._data_bytes = 0

    def feed(self, chunk: bytes) -> list[str]:
        events: list[str] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            raw = chunk[start:end]
            if self._pending:
                raw = b"".join(self._pending) + raw
                self._pending, self._pending_bytes = [], 0
            start = end + 1
            self._check(len(raw))
            # A whole line holds whole characters, so decoding here never cuts one.
            event = self._line(raw.removesuffix(b"\r").decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        if start < len(chunk):
            self._pending.append(chunk[start:])
            self._pending_bytes += len(chunk) - start
            self._check(self._pending_bytes)
        return events

    def _check(self, size: int) -> None:
        if size + self._data_bytes > self.max_bytes:
            raise SseTooLong(f"the server sent an event longer than {self.max_bytes // 2**20} MiB")

    def _line(self, line: str) -> str | None:
        if not line:  # a blank line ends the event
            if not self._data_lines:
                return None
            event = "\n".join(self._data_lines)
            self._data_lines, self._data_bytes = [], 0
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if field == "data":
            self._data_lines.append(value.removeprefix(" "))
            self._data_bytes += len(value)
        return None


def iter_sse_data(chunks: Iterable[bytes], max_bytes: int = MAX_EVENT_BYTES) -> Iterator[str]:
    """Payloads of complete events. An event the stream cut off before its blank line is
    dropped, as the SSE standard says: half a JSON chunk is no chunk."""
    decoder = SseDecoder(max_bytes)
    for chunk in chunks:
        yield from decoder.feed(chunk)
