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
        label = max((name for name in labels if remaining == name or remaining.startswith(name + " ")), key=len, default=None)
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


async def test_the_footer_keeps_no_key_it_removed(make_app):
    """Every reply refreshes the keys (continue acts once it ends): each refresh recomposed the
    footer, and Textual kept the removed keys through their `compact` watchers (the soak test's
    memory grew ~450 KB a reply)."""
    from spectui.tui.widgets.key_footer import KeyFooter

    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(100, 24)) as pilot:
        await ready(pilot)
        footer = app.screen.query_one(KeyFooter)
        for _ in range(12):
            app.screen.refresh_bindings()
            await pilot.pause()
        await pilot.pause()
        watching = [node for node, _ in getattr(footer, "__watchers", {}).get("compact", [])]
        assert watching and all(node.is_attached for node in watching)
        assert len(watching) <= len(footer.query("FooterKey"))


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


async def test_below_100_columns_the_panel_steps_aside_and_its_key_brings_it_back(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        assert not chat.stats_panel.display and chat.conversation.size.width >= 75
        await pilot.press(app.first_key("stats"))
        await pilot.pause()
        assert chat.stats_panel.display and chat.conversation.size.width < 50
        # The message box holds its parts' margin: the conversation is as wide as the box's text
        # area, as when they were the screen's children (a vertical layout narrows every 1fr part
        # by its widest child margin; without it the conversation grew 2 columns, 6 snapshots changed).
        assert chat.conversation.region.width == chat.box.prompt.region.width
        await pilot.press(app.first_key("stats"))
        await pilot.pause()
        assert not chat.stats_panel.display
        await pilot.resize_terminal(160, 24)  # a resize does not bring it back unasked
        await pilot.pause()
        assert not chat.stats_panel.display
        await pilot.press(app.first_key("stats"))
        await pilot.pause()
        assert chat.stats_panel.display


async def test_the_transcript_stays_at_its_end_through_a_resize(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(100, 24)) as pilot:
        await ready(pilot)
        scroll = app.chat_screen.conversation
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


async def test_help_at_80_columns_wraps_each_meaning_under_itself_and_says_what_it_means(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(80, 100)) as pilot:  # tall enough for all of help (its keys grow)
        await ready(pilot)
        await pilot.press(app.first_key("help"))
        await pilot.pause()
        await pilot.pause()
        inner = [line[1:-1] for line in screen_lines(app) if line.startswith("│")]
        text = "\n".join(inner)
        assert "Keys are remapped in the [keys] table" in text  # not swallowed as markup
        assert any(line.strip().startswith("v(k) ") for line in inner)  # the theory's v(k) is defined
        keys_at = next(i for i, line in enumerate(inner) if line.strip() == "Keys")
        words_at = next(i for i, line in enumerate(inner) if line.strip() == "Words and numbers")
        column = inner[keys_at + 1].index("help")
        for line in inner[keys_at + 1:words_at]:
            if line.strip():  # a key's row, or its meaning going on in the meaning's column
                assert line[2] != " " or line[:column].strip() == "", line


@pytest.mark.parametrize("width", [60, 80, 160])
async def test_the_bar_keeps_k_t_and_the_state_in_view_at_every_width(make_app, width):
    # At 80 columns "● ready" fell off the bar's right edge behind the engine's details.
    from dataclasses import replace

    from fake_engines import PlanEngine, factory_for

    engine = PlanEngine([2, 2])
    engine.info = replace(engine.info, name="embedded", backend="ggml Q4_K_M · 2 threads",
                          target="qwen2.5-coder-1.5b", draft="qwen2.5-coder-0.5b")
    app = make_app(factory_for(engine), ChatConfig())
    async with app.run_test(size=(width, 24)) as pilot:
        await ready(pilot)
        await pilot.pause()
        bar = screen_lines(app)[0]
        assert "● ready" in bar and "k 4" in bar and "T 0.00" in bar and "qwen2.5-coder-1.5b" in bar, bar
        assert ("ggml Q4_K_M" in bar) == (width >= 160), bar  # the detail goes first (F3 keeps it)
