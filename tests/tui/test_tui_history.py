"""The history screen: search as you type across all conversations, rename, delete after a yes,
titles shown as text (never markup)."""

from __future__ import annotations

import sqlite3

from rich.text import Text
from textual.widgets import DataTable, Input

from spectui.core.events import Source, Step
from spectui.store import Store
from spectui.tui.screens.history import DeleteDialog, HistoryScreen, RenameDialog

from fake_engines import PlanEngine, factory_for
from tui_helpers import notices, ready, reply_done, send, wait_for

SIZE = (110, 36)


def save(store: Store, question: str, answer: str, title: str = "") -> int:
    conversation = store.new_conversation({"k": 4}, title=title)
    store.add_message(conversation, "user", question)
    reply = store.add_message(conversation, "assistant", "")
    store.add_step(reply, 0, Step((1,), (Source.TARGET,), answer), [answer], "", 0.1)
    store.finish_message(reply, answer, "stop")
    return conversation


def saved_history(tmp_path, *conversations) -> list[int]:
    """Conversations saved before the app starts (the app's store opens the same file)."""
    store = Store(tmp_path / "history.sqlite3")
    ids = [save(store, *conversation) for conversation in conversations]
    store.close()
    return ids


def rows(app) -> list[list]:
    table = app.screen.query_one(DataTable)
    return [table.get_row_at(index) for index in range(table.row_count)]


def row_ids(app) -> list[int]:
    return [int(row[0]) for row in rows(app)]


async def open_history(pilot) -> HistoryScreen:
    await ready(pilot)
    await pilot.press(pilot.app.first_key("history"))
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, HistoryScreen))
    await pilot.pause()
    return pilot.app.screen


async def test_titles_that_look_like_markup_are_shown_as_they_are(make_app, tmp_path):
    titles = ["[/x]", "[bold]not bold[/bold]", "a \x1b[2J b"]
    ids = saved_history(tmp_path, *[("q", "a", title) for title in titles])
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await open_history(pilot)
        shown = {int(row[0]): row[3] for row in rows(app)}
        assert all(isinstance(cell, Text) for cell in shown.values())
        assert [shown[i].plain for i in ids] == ["[/x]", "[bold]not bold[/bold]", "a ␛[2J b"]
        assert not any(span.style for cell in shown.values() for span in cell.spans)


async def test_search_finds_a_message_in_an_old_conversation_and_opens_it(make_app, tmp_path):
    old, _, _ = saved_history(
        tmp_path,
        ("how do I sort a list?", "use sorted(); quicksort is what the textbooks show"),
        ("hello", "hi there"),
        ("weather?", "no idea"),
    )
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_history(pilot)
        assert len(row_ids(app)) == 3 and row_ids(app)[-1] == old  # newest first: the old one is last
        await pilot.press(app.first_key("history_search"))
        assert screen.search_box.has_focus
        await pilot.press(*"quick")
        await wait_for(pilot, lambda: row_ids(app) == [old])
        snippet = rows(app)[0][4]
        assert "quicksort is what the textbooks show" in snippet.plain
        marked = [snippet.plain[span.start : span.end] for span in snippet.spans if span.style]
        assert marked == ["quicksort"]
        await pilot.press(*" zebra")  # every word must match
        await wait_for(pilot, lambda: row_ids(app) == [])
        assert "Nothing matches" in str(screen.query_one("#empty").render())
        for _ in " zebra":
            await pilot.press("backspace")
        await wait_for(pilot, lambda: row_ids(app) == [old])
        await pilot.press("enter")  # opens the highlighted match in the chat
        await wait_for(pilot, lambda: app.chat_screen.session.transcript.conversation_id == old)
        assert app.screen is app.chat_screen
        assert app.chat_screen.session.transcript.messages[0]["content"] == "how do I sort a list?"


async def test_escape_clears_the_search_then_leaves(make_app, tmp_path):
    saved_history(tmp_path, ("alpha", "one"), ("beta", "two"))
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_history(pilot)
        await pilot.press(app.first_key("history_search"), *"alph")
        await wait_for(pilot, lambda: len(row_ids(app)) == 1)
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(row_ids(app)) == 2)
        assert screen.search_box.value == "" and screen.table.has_focus
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.chat_screen)


async def test_rename_from_the_screen(make_app, tmp_path):
    first, second = saved_history(tmp_path, ("first question", "a"), ("second question", "b"))
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await open_history(pilot)
        await pilot.press("down")  # the older one
        await pilot.press(app.first_key("history_rename"))
        await wait_for(pilot, lambda: isinstance(app.screen, RenameDialog))
        title_box = app.screen.query_one(Input)
        assert title_box.value == "first question"
        title_box.value = ""
        await pilot.press(*"[/x] renamed", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        await wait_for(pilot, lambda: {int(r[0]): r[3].plain for r in rows(app)}.get(first) == "[/x] renamed")
        assert app.screen.query_one(DataTable).cursor_row == 1  # still on the renamed row
        await pilot.press(app.first_key("history_rename"))
        await wait_for(pilot, lambda: isinstance(app.screen, RenameDialog))
        await pilot.press("x", "escape")  # Esc keeps the title
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
    store = Store(tmp_path / "history.sqlite3", read_only=True)
    assert store.load_conversation(first).title == "[/x] renamed"
    assert store.load_conversation(second).title == "second question"
    assert [hit.id for hit in store.search("renamed")] == [first]
    store.close()


async def test_delete_from_the_screen_asks_first_and_removes_everything(make_app, tmp_path):
    kept, doomed = saved_history(tmp_path, ("keep this", "kept reply"), ("drop this", "doomed reply"))
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await open_history(pilot)
        assert row_ids(app) == [doomed, kept]
        await pilot.press(app.first_key("history_delete"))
        await wait_for(pilot, lambda: isinstance(app.screen, DeleteDialog))
        question = str(app.screen.query_one("#question").render())
        assert f"Delete conversation {doomed}, “drop this”, and its 2 message(s)?" in question
        await pilot.press("n")  # kept
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        assert row_ids(app) == [doomed, kept]
        await pilot.press(app.first_key("history_delete"))
        await wait_for(pilot, lambda: isinstance(app.screen, DeleteDialog))
        await pilot.press("enter")  # the focused button is "Keep"
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        assert row_ids(app) == [doomed, kept]
        await pilot.press(app.first_key("history_delete"))
        await wait_for(pilot, lambda: isinstance(app.screen, DeleteDialog))
        await pilot.press("y")
        await wait_for(pilot, lambda: row_ids(app) == [kept])
        await pilot.press(app.first_key("history_search"), *"doomed")
        await wait_for(pilot, lambda: row_ids(app) == [])
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM messages WHERE conversation_id = ?", (doomed,)).fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == 1
    assert db.execute("SELECT COUNT(*) FROM message_search WHERE message_search MATCH 'doomed'").fetchone()[0] == 0
    db.close()


async def test_the_conversation_open_in_the_chat_is_not_deleted_from_under_it(make_app, tmp_path):
    app = make_app(factory_for(PlanEngine([None, 1])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "current chat")
        await reply_done(pilot)
        current = app.chat_screen.session.transcript.conversation_id
        await open_history(pilot)
        assert row_ids(app) == [current]
        await pilot.press(app.first_key("history_delete"))
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)  # no question asked
        assert any("open in the chat" in notice for notice in notices(app))
        assert row_ids(app) == [current]
