"""The history screen's rename and delete through the chat's write queue (issue 48): run in
order on the writing thread, `done` called once each ran, and kept in the unsaved file when
the history stays locked at quit."""

from __future__ import annotations

import json
import threading

from spectui.store import HistoryQueue, Store


class HeldStore(Store):
    """A writer whose renames wait for `free` (another process's lock, as the queue meets it)."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.free = threading.Event()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self.free.wait(30)
        super().rename_conversation(conversation_id, title)


def test_rename_and_delete_run_in_order_and_say_when_done(tmp_path):
    store = Store(tmp_path / "history.sqlite3")
    kept, doomed = store.new_conversation({}, "kept"), store.new_conversation({}, "doomed")
    writer = HeldStore(tmp_path / "history.sqlite3")
    queue = HistoryQueue(store, writer=writer)
    ran: list[str] = []
    queue.rename_conversation(kept, "renamed", done=lambda: ran.append("rename"))
    queue.delete_conversation(doomed, done=lambda: ran.append("delete"))
    assert ran == [] and store.load_conversation(kept).title == "kept"  # queued, not run on this thread
    writer.free.set()
    assert queue.close(timeout=10) is None
    assert ran == ["rename", "delete"]
    assert [(row.id, row.title) for row in store.list_conversations()] == [(kept, "renamed")]
    store.close()


def test_a_change_the_locked_history_never_took_is_kept_in_the_unsaved_file(tmp_path):
    store = Store(tmp_path / "history.sqlite3")
    kept, doomed = store.new_conversation({}, "kept"), store.new_conversation({}, "doomed")
    writer = HeldStore(tmp_path / "history.sqlite3")
    queue = HistoryQueue(store, writer=writer)
    queue.rename_conversation(kept, "renamed")
    queue.delete_conversation(doomed)
    said = queue.close(timeout=0.2)  # the rename still waits for the lock
    writer.free.set()
    assert said is not None and said.startswith("0 turn(s) and 2 rename/delete(s) not saved")
    [unsaved] = tmp_path.glob("history-unsaved-*.json")
    assert str(unsaved) in said
    changes = json.loads(unsaved.read_text())["turns"]
    assert changes == [{"conversation": kept, "change": "rename", "title": "renamed"},
                       {"conversation": doomed, "change": "delete"}]
    store.close()
