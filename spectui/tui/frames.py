"""Frames on demand: items from worker threads, drawn once per frame while they arrive.

The screens used to poll their inbox 30 times a second, so an idle chat woke 30 times a
second for nothing (0.84-1.03% of a core in a terminal, now 0.65-0.69%: the rest is the
panels' one-second clock). Now the first item after a draw asks for a frame: drawn at once
if a frame time has passed since the last one, else when it has; a flood still gets at most
one draw per frame (python benchmarks/tokenview.py: 29 frames/s, every token shown).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from textual.message_pump import MessagePump

FRAME_SECONDS = 1 / 30

T = TypeVar("T")


class FrameInbox(Generic[T]):
    """A thread-safe queue whose `draw` runs on `screen`'s loop when items are waiting."""

    def __init__(
        self,
        screen: MessagePump,
        draw: Callable[[], None],
        frame_seconds: float = FRAME_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._items: deque[T] = deque()  # appends and pops are atomic: no lock
        self._screen = screen
        self._draw = draw
        self._frame_seconds = frame_seconds
        self._clock = clock
        self._requested = False
        self._last_draw = float("-inf")

    def put(self, item: T) -> None:
        """From any thread."""
        self._items.append(item)
        if not self._requested:
            # Two threads may both get here: the second frame finds an empty inbox.
            self._requested = True
            self._screen.call_later(self._frame_due)

    def take_all(self) -> list[T]:
        items = []
        while self._items:
            items.append(self._items.popleft())
        return items

    def __bool__(self) -> bool:
        return bool(self._items)

    def _frame_due(self) -> None:
        wait = self._last_draw + self._frame_seconds - self._clock()
        if wait > 0:
            self._screen.set_timer(wait, self._draw_now, name="frame")
        else:
            self._draw_now()

    def _draw_now(self) -> None:
        # Cleared before drawing: an item put while `draw` runs asks for the next frame.
        self._requested = False
        if not self._screen.is_attached:
            # The app is quitting or the screen was closed: its widgets take no more mounts,
            # and a frame asked for just before then still arrives.
            return
        self._last_draw = self._clock()
        self._draw()
