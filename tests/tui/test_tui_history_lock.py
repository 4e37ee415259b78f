"""Another process holding the history's lock never freezes the chat (issue 48): 15 s held
once left keys unechoed, Ctrl+Q ignored and an Enter lost, as saving waited on the UI thread."""

from __future__ import annotations

import json
import subprocess
import sys

from spectui.settings.config import ChatConfig
from spectui.store import Store
from spectui.tui.app import SpectuiApp
from spectui.tui.history_watch import LOCKED_NOTICE

from fake_engines import PlanEngine, factory_for
from tui_helpers import make_host, notices, ready, send, wait_for

SIZE = (110, 36)

# Another process in a long write: holds the lock until told (a line on stdin), 40 s at most
# (today's main waits it out on the UI thread, then fails on the missing notice).
HOLD = """
import select, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
db.execute("INSERT INTO settings (key, value) VALUES ('held', '1')")
print("held", flush=True)
select.select([sys.stdin], [], [], 40)
db.execute("ROLLBACK")
"""


async def test_a_locked_history_never_freezes_the_chat_and_loses_no_turn(tmp_path):
    path = tmp_path / "history.sqlite3"
    store = Store(path, wait_for_lock=True)  # as spectui chat opens it
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        config = ChatConfig()
        app = SpectuiApp(make_host(factory_for(PlanEngine([None, 1])), config), config, store,
                         screenshot_dir=tmp_path / "shots", export_dir=tmp_path / "shots", cursor_blink=False)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            chat = app.chat_screen
            await send(pilot, "sent while locked")
            await wait_for(pilot, lambda: chat.session.reply is None and chat.session.transcript.last("assistant"))
            await wait_for(pilot, lambda: any(LOCKED_NOTICE in notice for notice in notices(app)))
            await pilot.press("m", "o", "r", "e")
            assert chat.box.prompt.value == "more"  # the keys echo while the lock is held
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: not app.is_running)
        assert app.history_left is not None and app.history_left.startswith("2 turn(s) not saved")
    finally:
        holder.communicate("go\n", timeout=30)
    store.close()
    [unsaved] = tmp_path.glob("history-unsaved-*.json")
    assert str(unsaved) in app.history_left
    turns = json.loads(unsaved.read_text())["turns"]
    contents = [turn.get("content") for turn in turns]
    assert "sent while locked" in contents
    assert any(turn.get("finish_reason") == "stop" and turn["content"] for turn in turns)  # the reply


async def test_rename_and_delete_on_the_history_screen_wait_for_the_lock_off_the_ui_thread(tmp_path):
    """The history screen's R and D once wrote on the UI thread: a second process's lock froze it."""
    from textual.widgets import DataTable

    from spectui.tui.screens.history import DeleteDialog, HistoryScreen, RenameDialog

    path = tmp_path / "history.sqlite3"
    store = Store(path, wait_for_lock=True)
    ids = []
    for question in ("first question", "second question"):
        ids.append(store.new_conversation({"k": 4}, title=question))
        store.add_message(ids[-1], "user", question)
    kept, doomed = ids
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        config = ChatConfig()
        app = SpectuiApp(make_host(factory_for(PlanEngine([None])), config), config, store,
                         screenshot_dir=tmp_path / "shots", export_dir=tmp_path / "shots", cursor_blink=False)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await pilot.press(app.first_key("history"))
            await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
            screen = app.screen
            table = screen.query_one(DataTable)

            def titles() -> dict[int, str]:
                return {int(row[0]): row[3].plain for row in (table.get_row_at(i) for i in range(table.row_count))}

            await wait_for(pilot, lambda: set(titles()) == {kept, doomed})
            await pilot.press(app.first_key("history_delete"))  # the newest, at the top
            await wait_for(pilot, lambda: isinstance(app.screen, DeleteDialog))
            await pilot.press("y")
            await wait_for(pilot, lambda: app.screen is screen)
            table.move_cursor(row=table.get_row_index(str(kept)))
            await pilot.press(app.first_key("history_rename"))
            await wait_for(pilot, lambda: isinstance(app.screen, RenameDialog))
            await pilot.press("ctrl+u", *"renamed", "enter")
            await wait_for(pilot, lambda: app.screen is screen)
            await wait_for(pilot, lambda: any(LOCKED_NOTICE in notice for notice in notices(app)))
            await pilot.press(app.first_key("history_search"), *"zz")
            assert screen.search_box.value == "zz"  # the keys echo while the lock is held
            await pilot.press("escape")
            assert titles() == {kept: "first question", doomed: "second question"}  # not yet written
            holder.stdin.write("go\n")
            holder.stdin.flush()
            await wait_for(pilot, lambda: titles() == {kept: "renamed"})  # both ran once it freed
            await wait_for(pilot, lambda: any("History saved" in notice for notice in notices(app)))
    finally:
        holder.communicate("go\n" if holder.poll() is None else None, timeout=30)
    assert store.load_conversation(kept).title == "renamed"
    assert [row.id for row in store.list_conversations()] == [kept]
    store.close()
