"""Pilot tests of the message box keeping the keys (issue 59): Tab with nothing to complete,
Esc after `/find`, and keys typed in the conversation all leave (or bring back) the focus
in the box; the box shows it has the focus."""

from __future__ import annotations

from spectui.settings.config import ChatConfig

from fake_engines import PlanEngine, factory_for
from tui_helpers import ready, reply_done, send

SIZE = (80, 24)


async def test_tab_with_nothing_to_complete_keeps_the_focus(make_app):
    app = make_app(factory_for(PlanEngine([None, 2])), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        chat.box.prompt.value = "/drop csv"
        chat.box.prompt.focus()
        await pilot.press("tab")
        await pilot.pause()
        assert chat.box.prompt.has_focus  # not only brought back by the next key typed
        await pilot.press("x")
        await pilot.pause()
        assert chat.box.prompt.has_focus and chat.box.prompt.text == "/drop csvx"


async def test_esc_after_find_and_typed_keys_come_back_to_the_box(make_app):
    app = make_app(factory_for(PlanEngine([None, 2, 2])), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "hello")
        await reply_done(pilot)
        await send(pilot, "/find w1")
        await pilot.pause()
        assert chat.conversation.has_focus  # n and N go to the matches
        await pilot.press("n")
        await pilot.pause()
        assert chat.conversation.has_focus and chat.box.prompt.text == ""
        await pilot.press("escape")
        await pilot.pause()
        assert chat.box.prompt.has_focus and not chat.conversation.finder.matches
        await send(pilot, "/find w2")
        await pilot.pause()
        await pilot.press("h", "i")  # typing: the box takes it, nothing vanishes
        await pilot.pause()
        assert chat.box.prompt.has_focus and chat.box.prompt.text == "hi"


async def test_the_box_shows_it_has_the_focus(make_app):
    app = make_app(factory_for(PlanEngine([None, 2])), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        focused = chat.box.prompt.styles.border_top
        chat.conversation.focus()
        await pilot.pause()
        assert chat.box.prompt.styles.border_top[0] != focused[0]  # another line, not only another shade
