"""Layout at the widths terminals have: a footer that fits (F1, F2 and Ctrl+P always there,
the rest by priority as space allows), dialogs inside 80×24, a stats panel the user can put
away, and a transcript that stays at its end through a resize."""

from __future__ import annotations

import pytest

from spectui.engines.scripted import scripted_engine_factory
from spectui.settings.config import ChatConfig

from tui_helpers import ready, reply_done, send, wait_for


def screen_lines(app) -> list[str]:
    """The text of each line of the screen as a full redraw writes it."""
    update = app.screen._compositor.render_update(full=True)
    return ["".join(segment.text for strip in line for segment in strip if segment.control is None)
            for line in update.strips]


def footer_labels(app) -> list[str]:
    """'key description' of every binding the screen could show in its footer."""
    return [f"{app.get_key_display(b.binding)} {b.binding.description}".strip()
            for b in app.screen.active_bindings.values() if b.binding.show]


def shown_labels(line: str, labels: list[str]) -> list[str]:
    """The footer line read as whole labels, one space apart; a cut or mixed label fails."""
    remaining, shown = line.strip(), []
    while remaining:
        label = max((l for l in labels if remaining == l or remaining.startswith(l + " ")), key=len, default=None)
        assert label is not None, f"not a whole key label: {remaining!r} (line {line!r})"
        shown.append(label)
        remaining = remaining[len(label):].lstrip()
    return shown


@pytest.mark.parametrize("width", [80, 100, 160])
async def test_the_footer_fits_with_help_history_and_the_palette_at_every_width(make_app, width):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(width, 24)) as pilot:
        await ready(pilot)
        await pilot.pause()
        footer = screen_lines(app)[-1]
        assert len(footer) == width
        keys, _, palette = footer.rpartition("▏")
        assert palette.strip() == "^p palette", footer
        shown = shown_labels(keys, footer_labels(app))
        assert "f1 help" in shown and "f2 history" in shown, footer
        if width >= 160:
            assert len(shown) >= 12, footer


@pytest.mark.parametrize("binding_id", ["help", "model", "engine_info", "system_prompt"])
async def test_each_dialog_fits_80_by_24_borders_and_all(make_app, binding_id):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        chat = app.screen
        await pilot.press(app.first_key(binding_id))
        await wait_for(pilot, lambda: app.screen is not chat)
        await pilot.pause()
        box = app.screen.children[0]  # the dialog's frame, inside its screen
        region = box.region
        assert region.x >= 0 and region.y >= 0 and region.right <= 80 and region.bottom <= 24, region
        lines = screen_lines(app)
        assert lines[region.y][region.x] == "╭" and lines[region.y][region.right - 1] == "╮", lines[region.y]
        assert lines[region.bottom - 1][region.right - 1] == "╯", lines[region.bottom - 1]


async def test_a_key_hides_and_shows_the_stats_panel(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        assert chat.stats_panel.display and chat.scroll.size.width < 50
        await pilot.press(app.first_key("stats"))
        await pilot.pause()
        assert not chat.stats_panel.display and chat.scroll.size.width >= 75
        await pilot.resize_terminal(100, 24)  # a resize does not bring it back unasked
        await pilot.pause()
        assert not chat.stats_panel.display
        await pilot.press(app.first_key("stats"))
        await pilot.pause()
        assert chat.stats_panel.display


async def test_the_transcript_stays_at_its_end_through_a_resize(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(100, 24)) as pilot:
        await ready(pilot)
        scroll = app.chat_screen.scroll
        for number in range(3):
            await send(pilot, f"question {number}: what is speculative decoding?")
            await reply_done(pilot)
        await pilot.pause()
        assert scroll.max_scroll_y > 0 and scroll.scroll_y == scroll.max_scroll_y
        for width in (80, 160, 80):
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            await pilot.pause()
            assert scroll.scroll_y == scroll.max_scroll_y, (width, scroll.scroll_y, scroll.max_scroll_y)
