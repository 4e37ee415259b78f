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
