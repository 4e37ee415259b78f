"""A reply's text wrapped at the widths layout asks for, kept in step with the text as it
streams. Layout may ask for a width other than the one drawn (a scrollbar coming and going):
rebuilding for each would cost O(reply) a frame, so the newest two widths are kept and each
is extended as chunks come. No Textual here; the token view draws what these hold.
"""

from __future__ import annotations

from collections.abc import Iterable

from spectui.core.safe_text import safe_text
from spectui.tui.wrap import StyledWrapper

KEPT_WIDTHS = 2


class Wrappings:
    """chunks: (text, kind) as the model wrote them; show_ghosts: the rejected drafts are laid
    out too; streaming: a tag begun at the end may still be finished by the next chunk."""

    def __init__(self, chunks: Iterable[tuple[str, str]], show_ghosts: bool) -> None:
        self.chunks: list[tuple[str, str]] = list(chunks)
        self.show_ghosts = show_ghosts
        self.streaming = False
        self._by_width: dict[int, StyledWrapper] = {}

    def get(self, width: int) -> StyledWrapper | None:
        """The lines at `width` if they are kept, without laying them out."""
        return self._by_width.get(width)

    def at(self, width: int) -> StyledWrapper:
        wrapper = self._by_width.get(width)
        if wrapper is None:
            wrapper = StyledWrapper(width, () if self.show_ghosts else ("ghost",))
            wrapper.extend(shown_chunks(self.chunks))
            if not self.streaming:
                wrapper.flush()
            if len(self._by_width) >= KEPT_WIDTHS:
                self._by_width.pop(next(iter(self._by_width)))
            self._by_width[width] = wrapper
        return wrapper

    def extend(self, chunks: list[tuple[str, str]]) -> None:
        """More text: every kept width is extended (rewrapped_from says where a fence change began)."""
        self.chunks.extend(chunks)
        visible = shown_chunks(chunks)
        for wrapper in self._by_width.values():
            wrapper.rewrapped_from = None
            wrapper.extend(visible)
            if not self.streaming:  # no more text comes to finish a tag begun at the end
                wrapper.flush()

    def end_stream(self) -> bool:
        """The text is complete: True when a tag held back at its end became text."""
        self.streaming = False
        return any([wrapper.flush() for wrapper in self._by_width.values()])

    def forget(self) -> None:
        """Lay every width out anew (the ghosts shown or hidden)."""
        self._by_width.clear()

    def clear(self) -> None:
        self.chunks = []
        self.forget()


def shown_chunks(chunks: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The model's text with its control characters made visible: the terminal draws them,
    never obeys them (the chat and its history keep the text as it came)."""
    return [(safe_text(text), kind) for text, kind in chunks]
