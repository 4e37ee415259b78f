"""`spectui screenshots`: the main screens in every theme, from a scripted run, or from a
real model (`--engine embedded`), whose pictures are named <screen>-real-<theme>.

SVG from Textual; PNG beside each when a converter is already installed (cairosvg or
rsvg-convert). Nothing is installed here.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.core.files import write_user_file

if TYPE_CHECKING:  # loaded when the pictures are taken
    from textual.pilot import Pilot

    from spectui.host.plan import Build
    from spectui.settings.config import ChatConfig
    from spectui.tui.app import SpectuiApp
    from spectui.tui.screens.compare import CompareScreen

SIZE = (120, 34)
PROMPTS = ("What is speculative decoding?", "And why is the output unchanged?")
# For a real model: the first screen's file edit (the reply copies an attached module, where
# speculation pays), after a first reply (not shown) that warms the engine up, so the numbers
# on screen are a running engine's.
WARM_UP = "Say hello."
# A real model's replies stop here: about what the chat picture's conversation shows (some 27
# rows of ~78 columns, ~4 characters a token). A chat's own budget, what the context leaves,
# let SmolLM2 write thousands of tokens, the picture showing only their far end.
REPLY_BUDGET = 512
SCREENS = ("chat", "compare", "help", "history")
FIRST_THEME_ONLY = ("markdown", "adaptive")


def fixed_memory(device: str):
    from spectui.measure.metrics import MemoryReading

    return MemoryReading("RSS", 812 * 2**20, 16 * 2**30, "psutil")


async def _wait_for(pilot: Pilot, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise TimeoutError("the scripted run did not reach the expected state")
        await pilot.pause(0.05)


async def _reply(pilot: Pilot, app: SpectuiApp, prompt: str) -> None:
    """Send `prompt` and wait for its reply to end."""
    chat = _chat_of(app)
    chat.box.set_text(prompt)
    await pilot.press("enter")
    await _wait_for(pilot, lambda: chat.session.reply is None and chat.session.last_reply is not None, 600)


def _chat_of(app: SpectuiApp):  # the app's chat screen: only the app imports its class
    assert app.chat_screen is not None, "the app mounts its chat screen as it starts"
    return app.chat_screen


def _compare_of(app: SpectuiApp) -> CompareScreen:
    from spectui.tui.screens.compare import CompareScreen

    assert isinstance(app.screen, CompareScreen), "the compare key opens the compare view"
    return app.screen


async def _shoot(app: SpectuiApp, theme: str, out: Path, screens: list[str], prompts: tuple[str, ...] = PROMPTS,
                 label: str = "", warm_up: str | None = None, ghosts: bool = True) -> list[Path]:
    """ghosts: the chat picture shows the rejected drafts (a real model's reads better without)."""
    written: list[Path] = []
    name_part = f"-{label}" if label else ""

    def save(name: str) -> None:
        path = out / f"{name}{name_part}-{theme}.svg"
        # the pictures are remade on each run: replaced, but only ever as regular files
        write_user_file(path, app.export_screenshot(title=f"spectui · {name} · {theme}"), overwrite=True)
        written.append(path)

    async with app.run_test(size=SIZE) as pilot:
        app.theme = theme
        await _wait_for(pilot, lambda: app.host.engine is not None or app.host.state.failed, 600)
        if warm_up is not None:
            await _reply(pilot, app, warm_up)
            await pilot.press(app.first_key("new_chat"))
        for prompt in prompts:
            await _reply(pilot, app, prompt)
            await pilot.pause(0.1)
        if "chat" in screens:
            if ghosts:
                await pilot.press(app.first_key("ghosts"))
            await pilot.pause(0.2)
            save("chat")
            if ghosts:
                await pilot.press(app.first_key("ghosts"))
        if "markdown" in screens:
            await pilot.press(app.first_key("markdown"))
            await pilot.pause(0.5)
            save("markdown")
            await pilot.press(app.first_key("markdown"))
        if "help" in screens:
            await pilot.press(app.first_key("help"))
            await pilot.pause(0.2)
            save("help")
            await pilot.press("escape")
        if "compare" in screens:
            await _compare_and_sweep(pilot, app)
            save("compare")
            await pilot.press("escape")
        if "history" in screens:
            await pilot.press(app.first_key("history"))
            await pilot.pause(0.2)
            save("history")
            await pilot.press("escape")
        if "adaptive" in screens:
            await pilot.press(app.first_key("k_auto"))
            await _reply(pilot, app, prompts[0])
            await pilot.pause(0.5)  # the conversation scrolls to the reply's end after its last frame
            save("adaptive")
    return written


async def _compare_and_sweep(pilot: Pilot, app: SpectuiApp) -> None:
    """The compare view with its k sweep drawn (all nine points)."""
    await pilot.press(app.first_key("compare"))
    compare = _compare_of(app)
    await _wait_for(pilot, lambda: not compare.state.busy, 600)
    await pilot.press(app.first_key("sweep"))
    await _wait_for(pilot, lambda: not compare.state.busy and len(compare.state.sweep_points) == 9, 600)
    await pilot.pause(0.2)


def take_screenshots(
    out: Path,
    engine_factory: Build | None = None,
    themes: list[str] | None = None,
    screens: list[str] | None = None,
    config: ChatConfig | None = None,
) -> list[Path]:
    """Write <screen>-<theme>.svg (+ .png) into `out`; returns the files written.

    engine_factory: a real engine's build (its pictures are <screen>-real-<theme>, with its
    own memory reading and real_prompts()); None: the scripted engine. screens: which of
    SCREENS + FIRST_THEME_ONLY (default: all; markdown and adaptive in the first theme)."""
    from spectui.engines.scripted import scripted_engine_factory
    from spectui.host.host import EngineHost
    from spectui.host.live import live_from_config
    from spectui.host.plan import EnginePlan
    from spectui.settings.config import ChatConfig
    from spectui.store import Store
    from spectui.themes import load_themes
    from spectui.tui.app import SpectuiApp

    out.mkdir(parents=True, exist_ok=True)
    available = load_themes()
    names = themes or sorted(available, key=lambda n: (n != "dark", n))
    real = engine_factory is not None
    written: list[Path] = []
    for name in names:
        wanted = screens or [*SCREENS, *(FIRST_THEME_ONLY if name == names[0] else ())]
        with tempfile.TemporaryDirectory() as scratch:
            store = Store(Path(scratch) / "history.sqlite3")
            theme_config = replace(config or ChatConfig(), theme=name)
            if real:  # a cap of the user's own stays when it is lower
                theme_config = replace(theme_config, max_tokens=min(theme_config.max_tokens or REPLY_BUDGET, REPLY_BUDGET))
            build = engine_factory or scripted_engine_factory(sleep_virtual=0.25)
            host = EngineHost(EnginePlan(build), live_from_config(theme_config),
                              memory_probe=None if real else fixed_memory)
            app = SpectuiApp(host, theme_config, store, themes=available, cursor_blink=False)
            if real:
                written += asyncio.run(_shoot(app, name, out, wanted, real_prompts(), "real", WARM_UP, ghosts=False))
            else:
                written += asyncio.run(_shoot(app, name, out, wanted))
            store.close()
    for svg in list(written):
        png = svg_to_png(svg)
        if png is not None:
            written.append(png)
    return written


def real_prompts() -> tuple[str, ...]:
    from spectui.tui.widgets.first_screen import suggestions

    return (suggestions()[0].text,)


def png_converter() -> str | None:
    try:
        import cairosvg  # noqa: F401

        return "cairosvg"
    except Exception:
        pass
    return "rsvg-convert" if shutil.which("rsvg-convert") else None


def svg_to_png(svg: Path) -> Path | None:
    converter = png_converter()
    if converter is None:
        return None
    png = svg.with_suffix(".png")
    # Converters collapse Textual's non-breaking spaces; plain spaces kept verbatim render right.
    text = svg.read_text(encoding="utf-8").replace("&#160;", " ").replace("<svg ", '<svg xml:space="preserve" ', 1)
    if converter == "cairosvg":
        import cairosvg

        cairosvg.svg2png(bytestring=text.encode("utf-8"), write_to=str(png))
    else:
        result = subprocess.run(["rsvg-convert", "-o", str(png)], input=text.encode("utf-8"), capture_output=True)
        if result.returncode != 0:
            return None
    return png
