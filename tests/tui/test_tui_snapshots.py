"""Snapshot tests of the chat screen in each theme (pytest-textual-snapshot).

A scripted engine with virtual timings, a frozen clock and a fixed memory reading make
every number on screen repeat exactly. Update after a deliberate change with
`pytest tests/tui/test_tui_snapshots.py --snapshot-update` and look at the SVGs.
"""

from __future__ import annotations

import pytest

from spectui.settings.config import ChatConfig
from spectui.tui.app import SpectuiApp
from spectui.engines.scripted import scripted_engine_factory

from spectui.core.events import Source

from fake_engines import TextEngine, factory_for
from tui_helpers import fixed_memory, make_host, ready, reply_done, send

SIZE = (110, 34)


def chat_app(theme: str, ghosts: bool = True) -> SpectuiApp:
    config = ChatConfig(theme=theme, ghosts=ghosts, k=4)
    host = make_host(scripted_engine_factory(), config, clock=lambda: 0.0, memory_probe=fixed_memory)
    return SpectuiApp(host, config, None, cursor_blink=False)


async def one_reply(pilot) -> None:
    await ready(pilot)
    await send(pilot, "What is speculative decoding?")
    await reply_done(pilot)


@pytest.mark.parametrize("theme", ["dark", "light", "colorblind"])
def test_chat_screen_in_each_theme(snap_compare, theme):
    assert snap_compare(chat_app(theme), run_before=one_reply, terminal_size=SIZE)


def test_help_screen_legend(snap_compare):
    async def open_help(pilot) -> None:
        await ready(pilot)
        await pilot.press("f1")

    assert snap_compare(chat_app("colorblind"), run_before=open_help, terminal_size=SIZE)


def test_a_code_fence_streams_as_a_code_block_with_each_tokens_colour(snap_compare):
    """The reply stops inside its second fence (max_tokens), as a streaming one stands mid-block:
    both blocks are drawn as code, a label on top, every token in its source's colour."""
    draft, recovered, bonus, target = Source.DRAFT, Source.RECOVERED, Source.BONUS, Source.TARGET
    engine = TextEngine([
        [("Here", target)], [(" is", draft), (" a", draft), (" function", recovered)],
        [(":\n", draft), ("```", draft), ("python", bonus)], [("\n", target)],
        [("def", draft), (" add", draft), ("(a,", draft), (" b):", recovered)],
        [("\n    ", draft), ("return", draft), (" a", draft), (" +", draft), (" b", bonus)],
        [("\n", target), ("```", draft), ("\n", recovered)],
        [("Run", target), (" it", draft), (":", recovered)],
        [("\n", target), ("```", draft), ("bash", recovered), ("\n", draft)],
        [("python", target), (" add.py", draft), (" 1", recovered)],
    ], finish="length")
    config = ChatConfig(theme="dark", k=4)
    host = make_host(factory_for(engine), config, clock=lambda: 0.0, memory_probe=fixed_memory)
    assert snap_compare(SpectuiApp(host, config, None, cursor_blink=False), run_before=one_reply, terminal_size=SIZE)


@pytest.mark.parametrize("width", [80, 160])
def test_chat_screen_footer_and_panels_at_80_and_160_columns(snap_compare, width):
    """The footer keeps F1, F2 and Ctrl+P and fits whole keys; at 80 the panel steps aside and
    its summary shows as one line under the conversation."""
    assert snap_compare(chat_app("dark"), run_before=one_reply, terminal_size=(width, 24))


def test_chat_screen_under_no_color(snap_compare, monkeypatch):
    """NO_COLOR: the sources by shape (drafts underlined, corrections bold, bonus italic)."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(chat_app("dark"), run_before=one_reply, terminal_size=SIZE)
