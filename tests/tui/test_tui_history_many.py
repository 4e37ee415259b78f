"""F2 with more conversations than it lists (issue 59 item 8): it said nothing of the rest.
Now a line says how many there are, and M lists more."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from spectui.tui.screens.history import HistoryScreen

from fake_engines import PlanEngine, factory_for
from test_history_cap import MANY, many_conversations
from tui_helpers import ready, wait_for


async def test_f2_says_how_many_it_leaves_out_and_m_lists_more(make_app, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path / "data"))
    many_conversations(tmp_path / "data")
    (tmp_path / "history.sqlite3").symlink_to(tmp_path / "data" / "history.sqlite3")  # the app's store
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        await pilot.press(app.first_key("history"))
        await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        await pilot.pause()
        screen = app.screen
        more = screen.query_one("#more", Static)
        assert screen.query_one(DataTable).row_count == 200
        assert more.display and str(more.render()) == f"Showing the newest 200 of {MANY}: M shows 200 more"
        await pilot.press("m")
        assert screen.query_one(DataTable).row_count == MANY and not more.display
        await pilot.press("slash", *"needle")
        await wait_for(pilot, lambda: screen.query_one(DataTable).row_count == MANY)
        screen.limit = 200
        screen.show_matches("needle")
        assert more.display and str(more.render()) == f"Showing the newest 200 of {MANY}: M shows 200 more"
