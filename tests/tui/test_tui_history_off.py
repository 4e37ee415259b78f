"""A history that cannot be opened (a read-only folder, a damaged file): the chat runs
without it and says so (issue 42)."""

from __future__ import annotations

from fake_engines import PlanEngine, factory_for
from tui_helpers import notices, ready


async def test_the_chat_without_history_says_why(make_app):
    why = "cannot open history /ro/history.sqlite3: its folder is read-only here"
    app = make_app(factory_for(PlanEngine([None])), store=False, history_off=why)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        messages = notices(app)
    assert f"History is off, nothing is saved: {why}" in messages
