"""The TUI's files go through the one safe writer (issue 48): an export onto files already
there asks first, and keeps them on a no."""

from __future__ import annotations

from spectui.tui.screens.history import DeleteDialog

from fake_engines import PlanEngine, factory_for
from tui_helpers import notices, ready, reply_done, send, wait_for

SIZE = (110, 36)


async def notes_where_the_export_goes(pilot, tmp_path):
    """One reply, then the user's own file where the chat's Markdown export will be written."""
    await ready(pilot)
    await send(pilot, "hello there")
    await reply_done(pilot)
    conversation_id = pilot.app.chat_screen.session.transcript.conversation_id
    mine = tmp_path / "shots" / f"spectui-chat-{conversation_id}.md"
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("my own notes")
    return mine


async def test_an_export_onto_existing_files_asks_first(make_app, tmp_path):
    app = make_app(factory_for(PlanEngine([None, 1])))
    async with app.run_test(size=SIZE) as pilot:
        mine = await notes_where_the_export_goes(pilot, tmp_path)
        await pilot.press("f2", "e")
        await pilot.pause()
        await pilot.press("enter")  # the folder offered, where the .md is already
        await wait_for(pilot, lambda: isinstance(app.screen, DeleteDialog))
        assert mine.name in str(app.screen.question)
        await pilot.press("n")
        await pilot.pause()
        assert mine.read_text() == "my own notes"
        assert not mine.with_suffix(".json").exists()  # a no writes none of the three
        await pilot.press("e")
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DeleteDialog))
        await pilot.press("y")
        await wait_for(pilot, lambda: "hello there" in mine.read_text())
        assert mine.with_suffix(".json").is_file()
        assert any("Wrote" in notice for notice in notices(app))


async def test_a_screenshot_is_a_new_file_in_the_folder(make_app, tmp_path):
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: any(notice.startswith("Saved") for notice in notices(app)))
    [shot] = (tmp_path / "shots").glob("*.svg")
    assert shot.read_text().startswith("<svg")


async def test_an_export_onto_a_read_only_file_is_refused_in_one_line_and_writes_none(make_app, tmp_path):
    """Replacing (y) went by rename, which the folder allows: a file the user made read-only
    was replaced. It is refused in one line, and none of the three files is written."""
    app = make_app(factory_for(PlanEngine([None, 1])))
    async with app.run_test(size=SIZE) as pilot:
        mine = await notes_where_the_export_goes(pilot, tmp_path)
        mine.chmod(0o444)
        await pilot.press("f2", "e")
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DeleteDialog))
        await pilot.press("y")
        await wait_for(pilot, lambda: any("read-only" in notice for notice in notices(app)))
        assert f"{mine} is read-only (mode 0444); not replacing it" in notices(app)
        assert mine.read_text() == "my own notes" and not mine.with_suffix(".json").exists()
