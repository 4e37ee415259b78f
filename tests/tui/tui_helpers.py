"""Helpers for the TUI's pilot tests: an app over a fake engine, waits on what the app shows.

The fake engines themselves are in tests/fake_engines.py. A plain module (not conftest) so
test files can import it by name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from spectui.host.host import EngineHost
from spectui.host.live import live_from_config
from spectui.host.plan import EnginePlan
from spectui.measure.metrics import MemoryReading
from spectui.settings.config import ChatConfig


def fixed_memory(device: str) -> MemoryReading:
    return MemoryReading("RSS", 100 * 2**20, 8 * 2**30, "psutil")


def make_host(build, config: ChatConfig, *, build_for_k=None, build_baseline=None, clock=None,
              memory_probe=fixed_memory, set_timer=None) -> EngineHost:
    options = {"clock": clock} if clock is not None else {}
    return EngineHost(EnginePlan(build, build_for_k, build_baseline), live_from_config(config),
                      memory_probe=memory_probe, set_timer=set_timer, **options)


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out waiting for the app"
        await pilot.pause(0.02)


async def send(pilot, text: str) -> None:
    prompt = pilot.app.chat_screen.box.prompt
    prompt.value = text
    prompt.focus()
    await pilot.press("enter")


async def ready(pilot) -> None:
    host = pilot.app.host
    await wait_for(pilot, lambda: host.engine is not None or host.state.failed)
    await pilot.pause()


async def reply_done(pilot) -> None:
    chat, history = pilot.app.chat_screen, pilot.app.history
    await wait_for(pilot, lambda: chat.session.reply is None and not chat.replies.pending)
    # its rows are written by the history's own thread: read back once they are
    await wait_for(pilot, lambda: history is None or history.idle)
    # laid out: its summary line has rows (a snapshot under a busy suite once caught the reply
    # cut short and no summary, one refresh before the layout)
    await wait_for(pilot, lambda: summary_laid_out(chat))
    await pilot.pause()


def summary_laid_out(chat) -> bool:
    """The last finished reply's summary line has its rows (none finished: nothing to wait for)."""
    from spectui.tui.widgets.conversation import ReplyView

    finished = [view for view in chat.query(ReplyView) if view.finished]
    return not finished or finished[-1].note.size.height > 0


def make_app_fixture(tmp_path):
    """make(build, config, store=True, *, build_for_k, build_baseline, clock, set_timer, **app options)."""
    from spectui.store import Store
    from spectui.tui.app import SpectuiApp

    stores = []

    def make(build, config: ChatConfig | None = None, store=True, *, build_for_k=None, build_baseline=None,
             clock=None, set_timer=None, **options):
        config = config or ChatConfig()
        the_store = None
        if store:
            the_store = Store(tmp_path / "history.sqlite3")
            stores.append(the_store)
        host = make_host(build, config, build_for_k=build_for_k, build_baseline=build_baseline, clock=clock,
                         set_timer=set_timer)
        options.setdefault("screenshot_dir", tmp_path / "shots")
        options.setdefault("export_dir", tmp_path / "shots")
        options.setdefault("cursor_blink", False)
        return SpectuiApp(host, config, the_store, **options)

    yield make
    for the_store in stores:
        the_store.close()


def shown_kinds(token_view) -> list[str]:
    """One kind per displayed token, read back from the widget's wrapped lines.

    Fake tokens read " w<i>", so each token is one word: split runs into words.
    """
    kinds = []
    for line in token_view.rendered_lines():
        for text, kind in line:
            kinds += [kind] * text.count("w")
    return kinds


def notices(app) -> list[str]:
    return [n.message for n in app._notifications]
