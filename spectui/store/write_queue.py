"""History writes off the UI thread (issue 48): a lock held by another process once froze the chat.

HistoryQueue takes the chat's writes and returns at once; one thread runs them in order on a
connection of its own, waiting out another process's lock as long as it lasts. The ids a
write will give (a new conversation, a message) are handed back as RowId, filled in when
the write runs: the writes after it, queued behind it, read them then. The UI asks
`stalled_for()` to say when saving waits, and `close()` at quit waits a moment, then puts
whatever is still unsaved in a JSON file beside the history: nothing typed is lost.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from collections.abc import Sequence
from pathlib import Path

from spectui.core.files import write_user_file
from spectui.store.history import Store
from spectui.core.events import Step
from spectui.store.records import StoredStep, StoreError

# Steps waiting at most (a long reply under a long lock); past it steps are dropped and
# counted. Turns (messages, their ends) are always kept: a person typed them.
STEP_LIMIT = 20_000


class RowId:
    """The id a queued write gives its row: None until the write ran (or if it failed)."""

    __slots__ = ("value",)

    def __init__(self, value: int | None = None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"RowId({self.value})"


class _Unresolved(Exception):
    """A write that needs an id an earlier, failed write was to give: skipped with it."""


def resolved(value: object) -> object:
    """An int for a RowId that holds one; anything else as it is."""
    if isinstance(value, RowId):
        if value.value is None:
            raise _Unresolved
        return value.value
    return value


@dataclass
class _Write:
    method: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    result: RowId | None = None
    turn: dict | None = None  # what a person typed or read, for the file of unsaved turns
    done: Callable[[], None] | None = None  # called on the writing thread once it ran or failed


class HistoryQueue:
    """Store's writing methods, queued for one thread (the history screen's rename and
    delete too); its reading methods go straight to `store` on the calling thread (WAL: a
    reader never waits on a writer). `writer`: the connection the thread writes with
    (default: a second one)."""

    def __init__(self, store: Store, writer: Store | None = None, step_limit: int = STEP_LIMIT) -> None:
        self.store = store
        self.path = Path(store.path)
        self._writer = writer
        self._step_limit = step_limit
        self._pending: deque[_Write] = deque()
        self._steps_pending = 0
        self._changed = threading.Condition()
        self._busy_since: float | None = None
        self._closing = False
        self.errors: deque[str] = deque()  # for the UI to show: a full disk, a damaged file
        self.dropped_steps = 0
        self._thread = threading.Thread(target=self._work, name="spectui-history", daemon=True)
        self._thread.start()

    def __getattr__(self, name: str):
        return getattr(self.store, name)  # reads: load_conversation, search, list_conversations, ...

    # the writes the chat makes

    def new_conversation(self, settings: dict, title: str = "") -> RowId:
        made = RowId()
        self._put(_Write("new_conversation", (settings, title), result=made,
                         turn={"conversation": "new", "settings": settings}))
        return made

    def add_message(self, conversation_id: int | RowId, role: str, content: str, settings: dict | None = None) -> RowId:
        made = RowId()
        turn = {"conversation": conversation_id, "role": role, "content": content}
        self._put(_Write("add_message", (conversation_id, role, content, settings), result=made, turn=turn))
        return made

    def finish_message(self, message_id: int | RowId, content: str, finish_reason: str, error: str | None = None,
                       stats: dict | None = None) -> None:
        turn = {"message": message_id, "content": content, "finish_reason": finish_reason, "error": error}
        self._put(_Write("finish_message", (message_id, content, finish_reason, error, stats), turn=turn))

    def add_step(self, message_id: int | RowId, index: int, step: Step, pieces: Sequence[str], ghost: str, arrived: float) -> None:
        self._put(_Write("add_step", (message_id, index, step, pieces, ghost, arrived)))

    def replace_steps(self, message_id: int | RowId, steps: Sequence[StoredStep]) -> None:
        self._put(_Write("replace_steps", (message_id, steps)))

    def retitle_conversation(self, conversation_id: int | RowId, old: str | None, title: str) -> None:
        turn = {"conversation": conversation_id, "change": "rename", "title": title}
        self._put(_Write("retitle_conversation", (conversation_id, old, title), turn=turn))

    def set_setting(self, key: str, value: str) -> None:
        self._put(_Write("set_setting", (key, value)))

    # the history screen's changes: behind the chat's writes; `done` (on the writing thread,
    # so it must be thread-safe: a posted message) lets the screen list again once it ran

    def rename_conversation(self, conversation_id: int, title: str, done: Callable[[], None] | None = None) -> None:
        turn = {"conversation": conversation_id, "change": "rename", "title": title}
        self._put(_Write("rename_conversation", (conversation_id, title), turn=turn, done=done))

    def delete_conversation(self, conversation_id: int, done: Callable[[], None] | None = None) -> None:
        turn = {"conversation": conversation_id, "change": "delete"}
        self._put(_Write("delete_conversation", (conversation_id,), turn=turn, done=done))

    # what the UI asks

    @property
    def idle(self) -> bool:
        with self._changed:
            return not self._pending

    def stalled_for(self) -> float:
        """Seconds the write at the head of the queue has been running (0 when none is):
        past a second, another process holds the lock."""
        with self._changed:
            return 0.0 if self._busy_since is None else time.monotonic() - self._busy_since

    def close(self, timeout: float = 0.8) -> str | None:
        """Wait up to `timeout` for the queue to empty; None when all is saved, else the line
        that says how many turns were not and the file they were written to instead."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._closing = True
            self._changed.notify_all()
            while self._pending and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
            left_over = list(self._pending)
            self._pending.clear()
        return self._dump(left_over) if left_over else None

    # the thread

    def _put(self, write: _Write) -> None:
        with self._changed:
            if self._closing:
                raise StoreError("history is closed")
            if write.method == "add_step":
                if self._steps_pending >= self._step_limit:
                    self.dropped_steps += 1
                    return
                self._steps_pending += 1
            self._pending.append(write)
            self._changed.notify_all()

    def _work(self) -> None:
        writer = None
        while True:
            with self._changed:
                while not self._pending and not self._closing:
                    self._changed.wait()
                if not self._pending:
                    break
                write, self._busy_since = self._pending[0], time.monotonic()
            try:
                writer = writer or self._open_writer()
                self._run(writer, write)
            except _Unresolved:
                pass  # the write it depends on failed, and said so
            except Exception as error:  # a full disk, a damaged file: said, and the chat goes on
                self.errors.append(str(error))
            with self._changed:
                if self._pending and self._pending[0] is write:
                    self._pending.popleft()
                self._steps_pending -= write.method == "add_step"
                self._busy_since = None
                self._changed.notify_all()
            if write.done is not None:
                write.done()
        if writer is not None and writer is not self.store:
            writer.close()

    def _open_writer(self) -> Store:
        if self._writer is None:
            memory = str(self.path) == ":memory:"  # a second connection would be another database
            self._writer = self.store if memory else Store(self.path, wait_for_lock=True)
        return self._writer

    @staticmethod
    def _run(writer: Store, write: _Write) -> None:
        args = tuple(resolved(value) for value in write.args)
        value = getattr(writer, write.method)(*args, **write.kwargs)
        if write.result is not None:
            write.result.value = value

    def _dump(self, left_over: list[_Write]) -> str:
        turns = [_plain(write.turn) for write in left_over if write.turn is not None]
        said = sum(bool(turn.get("content")) for turn in turns)  # a message, a reply's end
        changes = sum("change" in turn for turn in turns)  # a rename, a delete
        what = f"{said} turn(s)" + (f" and {changes} rename/delete(s)" if changes else "")
        if not turns:
            steps = sum(write.method == "add_step" for write in left_over)
            return f"{steps} step(s) of the last reply not saved: the history stayed locked by another process"
        target = self.path.with_name(f"history-unsaved-{time.strftime('%Y%m%d-%H%M%S')}.json")
        record = {"history": str(self.path), "why": "the history stayed locked by another process", "turns": turns}
        try:
            write_user_file(target, json.dumps(record, ensure_ascii=False, indent=1, default=str) + "\n")
        except OSError as error:
            return f"{what} not saved: the history stayed locked, and {target} could not be written ({error})"
        return f"{what} not saved to the history (it stayed locked by another process): they are in {target}"


def _plain(turn: dict) -> dict:
    """A turn with its RowIds as the ids they got (None: the row was never made)."""
    return {key: value.value if isinstance(value, RowId) else value for key, value in turn.items()}
