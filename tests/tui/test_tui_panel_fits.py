"""A panel that fits: its summary (speed against plain decoding, γ, tok/s) in view at every
terminal size, the rest of it scrolling, and PageUp/PageDown scrolling the conversation
while the message box has the focus."""

from __future__ import annotations

import pytest

from spectui.engines.scripted import scripted_engine_factory
from spectui.settings.config import ChatConfig

from test_tui_layout import screen_lines
from tui_helpers import ready, reply_done, send, wait_for


def summary_shown(lines: list[str]) -> bool:
    text = "\n".join(lines)
    return "vs plain" in text and "γ " in text and "tok/s" in text


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_the_summary_is_in_view_at_every_size_with_adaptive_k(make_app, size):
    app = make_app(scripted_engine_factory(), ChatConfig(k=4))
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await pilot.press(app.first_key("k_auto"))
        await send(pilot, "What is speculative decoding?")
        await reply_done(pilot)
        await pilot.pause()
        assert chat.stats_panel.display == (size[0] >= 100)
        lines = screen_lines(app)
        assert summary_shown(lines), "\n".join(lines)
        figure = chat.stats_panel.summary.plain.splitlines()[0]
        assert "measured" in figure or "predicted" in figure or "not measured yet" in figure, figure
        if chat.stats_panel.display:  # the rest scrolls: Theory, the panel's last part, comes into view
            await pilot.pause()
            chat.stats_panel.query_one("#stats-scroll").scroll_end(animate=False)
            await pilot.pause()
            await pilot.pause()
            lines = screen_lines(app)
            assert any(line.rstrip().endswith("Theory") or "Theory  this reply" in line for line in lines), "\n".join(lines)
            assert summary_shown(lines)


async def test_page_up_and_down_from_the_message_box_scroll_the_conversation(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(100, 24)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        scroll = chat.conversation
        for number in range(3):
            await send(pilot, f"question {number}: what is speculative decoding?")
            await reply_done(pilot)
        await pilot.pause()
        assert scroll.max_scroll_y > 0 and scroll.scroll_y == scroll.max_scroll_y
        chat.box.prompt.value = "a draft I keep"
        assert chat.box.prompt.has_focus
        await pilot.press("pageup")
        await wait_for(pilot, lambda: scroll.scroll_y < scroll.max_scroll_y)
        assert chat.box.prompt.has_focus and chat.box.prompt.text == "a draft I keep"
        while scroll.scroll_y < scroll.max_scroll_y:
            await pilot.press("pagedown")
            await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y and scroll.following
