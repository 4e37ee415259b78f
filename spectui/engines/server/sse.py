"""Server-sent events: the `data:` payloads of a byte stream, however it was split.

Only what an OpenAI-compatible server sends is handled: `data:` fields (several in one
event are joined by newlines), comment lines, `\n` or `\r\n` line ends. `event:`, `id:`
and `retry:` carry nothing a chat stream needs, so they are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class SseDecoder:
    """Turns byte chunks (split anywhere, even inside a UTF-8 character) into event payloads."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data_lines: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        self._buffer += chunk
        events: list[str] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                return events
            raw, self._buffer = self._buffer[:end], self._buffer[end + 1 :]
            # A whole line holds whole characters, so decoding here never cuts one.
            event = self._line(raw.removesuffix(b"\r").decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)

    def _line(self, line: str) -> str | None:
        if not line:  # a blank line ends the event
            if not self._data_lines:
                return None
            event = "\n".join(self._data_lines)
            self._data_lines = []
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if field == "data":
            self._data_lines.append(value.removeprefix(" "))
        return None


def iter_sse_data(chunks: Iterable[bytes]) -> Iterator[str]:
    """Payloads of complete events. An event the stream cut off before its blank line is
    dropped, as the SSE standard says: half a JSON chunk is no chunk."""
    decoder = SseDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
