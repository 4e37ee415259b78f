"""What the chat says about its history queue (spectui.store.write_queue): a write that
fails, and a lock held by another process, said once after a second and again when it frees."""

from __future__ import annotations

from collections.abc import Callable

from spectui.store import HistoryQueue

LOCKED_NOTICE = "History is locked by another spectui; saving when it frees."


class HistoryWatch:
    """check() runs on the UI thread every EVERY_S: it reads the queue's state, never SQLite."""

    EVERY_S = 0.25
    NOTICE_AFTER_S = 1.0

    def __init__(self, history: HistoryQueue, notify: Callable[..., None],
                 withdraw: Callable[[str], None] = lambda message: None) -> None:
        self.history = history
        self.notify = notify
        self.withdraw = withdraw  # takes a notice off the screen before its timeout
        self.locked = False
        self.dropped_said = 0

    def check(self) -> None:
        while self.history.errors:
            self.notify(f"History not saved: {self.history.errors.popleft()}", severity="warning")
        if self.history.dropped_steps > self.dropped_said:
            self.dropped_said = self.history.dropped_steps
            self.notify(f"History: {self.dropped_said} step(s) of a reply not saved (too many waited)", severity="warning")
        stalled = self.history.stalled_for() >= self.NOTICE_AFTER_S
        if stalled and not self.locked:
            self.notify(LOCKED_NOTICE, severity="warning", timeout=30)
        elif self.locked and not stalled and self.history.idle:
            self.withdraw(LOCKED_NOTICE)  # else it stays up to its 30 s, saying a lock that is gone
            self.notify("History saved: the other spectui let go of it.")
        self.locked = stalled or (self.locked and not self.history.idle)
