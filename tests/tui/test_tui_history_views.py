"""History after regenerate and edit in the app: export, search and counts say what the chat
shows (issue 40)."""

from __future__ import annotations

from spectui.store import export_markdown

from fake_engines import PlanEngine, factory_for
from tui_helpers import notices, ready, reply_done, send

SIZE = (110, 36)


async def test_export_search_and_count_after_regenerate_and_edit(make_app):
    app = make_app(factory_for(PlanEngine([None, 1])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "hello there")
        await reply_done(pilot)
        await pilot.press("f10")  # regenerate as it was made
        await reply_done(pilot)
        await pilot.press("ctrl+f10")  # regenerate with the live settings
        await reply_done(pilot)
        await send(pilot, "tell me about rome")
        await reply_done(pilot)
        await pilot.press("f12")  # edit the last question
        chat.box.prompt.value = "tell me about paris"
        await pilot.press("enter")
        await reply_done(pilot)
        store, conversation_id = app.store, chat.session.transcript.conversation_id
        markdown = export_markdown(store.load_conversation(conversation_id))
        assert markdown.count("## assistant") == 2 and markdown.count("## user") == 2
        assert "rome" not in markdown and "paris" in markdown
        assert store.search("rome") == [] and store.search("paris")
        assert store.conversation_summary(conversation_id).num_messages == 4


async def test_exports_and_screenshots_go_to_the_data_folder_not_the_working_directory(
        make_app, tmp_path, monkeypatch):
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(data))
    monkeypatch.chdir(work)
    app = make_app(factory_for(PlanEngine([None, 1])), screenshot_dir=None, export_dir=None)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "hello there")
        await reply_done(pilot)
        conversation_id = app.chat_screen.session.transcript.conversation_id
        await pilot.press("ctrl+s")
        await pilot.pause()
        [shot] = (data / "screenshots").glob("*.svg")
        assert any(str(shot.resolve()) in notice for notice in notices(app))
        await pilot.press("f2", "e")
        await pilot.pause()
        await pilot.press("enter")  # the folder offered: the data folder's exports
        await pilot.pause()
        names = sorted(path.name for path in (data / "exports").iterdir())
        assert names == [f"spectui-chat-{conversation_id}.{ext}" for ext in ("json", "md", "trace.jsonl")]
        assert any(str((data / "exports").resolve()) in notice for notice in notices(app))
        typed = tmp_path / "typed"
        await pilot.press("e")
        await pilot.pause()
        app.screen.query_one("#folder").value = str(typed)
        await pilot.press("enter")
        await pilot.pause()
        assert (typed / f"spectui-chat-{conversation_id}.json").is_file()
        await pilot.press("e")
        await pilot.pause()
        await pilot.press("escape")  # nothing written
        await pilot.pause()
    assert list(work.iterdir()) == []
