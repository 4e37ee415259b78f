"""SpectuiApp: loads the engine in a thread, owns themes, keys, history and the screens.

    app = SpectuiApp(engine_factory, config, store)
    app.run()

engine_factory(progress) -> Engine is called in a background thread (loading can take
minutes); progress(stage, done, total) updates the bar. A failure shows as a message.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from textual.app import App

from spectui.config import ChatConfig
from spectui.metrics import MemoryReading, read_memory
from spectui.run import prompt_messages
from spectui.store import Conversation, Store
from spectui.themes import (
    DEFAULT_THEME,
    FALLBACK_SOURCES,
    SpectuiTheme,
    load_themes,
    theme_errors,
    theme_variables,
)
from spectui.tui.heap import collect_between_replies, defer_full_collections
from spectui.tui.keys import app_bindings
from spectui.tui.messages import EngineFailed, EngineProgress, EngineReady
from spectui.tui.worker import join_threads, load_engine, start_thread

EngineFactory = Callable[[Callable[[str, int, int], None]], object]


class SpectuiApp(App):
    TITLE = "spectui"
    BINDINGS = app_bindings()
    CSS = """
    Screen { background: $background; }
    Footer { background: $panel; }
    """

    def __init__(
        self,
        engine_factory: EngineFactory,
        config: ChatConfig | None = None,
        store: Store | None = None,
        *,
        resume: Conversation | None = None,
        clock: Callable[[], float] = time.monotonic,
        memory_probe: Callable[[str], MemoryReading | None] = read_memory,
        themes: dict[str, SpectuiTheme] | None = None,
        screenshot_dir: Path | None = None,
        cursor_blink: bool = True,
        compare_prompt: str | None = None,
    ) -> None:
        super().__init__()
        self.engine_factory = engine_factory
        self.config = config or ChatConfig()
        self.store = store
        self.resume = resume
        self.clock = clock
        self.memory_probe = memory_probe
        self._themes_given = themes is not None
        self.spectui_themes = themes if themes is not None else load_themes()
        self.screenshot_dir = screenshot_dir or Path.cwd()
        self.cursor_blink = cursor_blink  # off for snapshot tests: a blink phase is not a regression
        self.compare_prompt = compare_prompt  # `spectui compare PROMPT`: open the compare view at once
        self.engine = None
        self.engine_status = "loading"  # loading, ready, failed
        self.engine_error = ""
        self.loading_detail = ""
        self.load_seconds: float | None = None
        for theme in self.spectui_themes.values():
            self.register_theme(theme.to_textual_theme())

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return theme_variables(FALLBACK_SOURCES)

    def on_mount(self) -> None:
        from spectui.tui.screens.chat import ChatScreen

        self._gc_thresholds = defer_full_collections()

        self.set_keymap(dict(self.config.keys))
        if self.config.theme in self.spectui_themes:
            self.theme = self.config.theme
        else:
            self.theme = DEFAULT_THEME
            known = ", ".join(sorted(self.spectui_themes))
            self.notify(f"No theme {self.config.theme!r}; using {DEFAULT_THEME} (known: {known})", severity="warning")
        if not self._themes_given:  # themes from the config dir: say which were skipped
            for problem in theme_errors():
                self.notify(f"Theme skipped: {problem}", severity="warning", timeout=8)
        self.push_screen(ChatScreen(self.resume))
        start_thread(lambda: load_engine(self.engine_factory, self.post_message, self.clock), "spectui-load")

    def on_unmount(self) -> None:
        gc.set_threshold(*self._gc_thresholds)
        chat = self.chat_screen
        if chat is not None and chat.current is not None:
            chat.current.control.cancel()
        for screen in self.screen_stack:
            if hasattr(screen, "stop_work"):  # the compare view's runs
                screen.stop_work()
        # The engine ends a cancelled reply after the step in flight; closing it under a
        # running forward pass would pull its caches away mid-step.
        if not (join_threads("spectui-reply-", timeout=15.0) and join_threads("spectui-compare", timeout=15.0)):
            return
        if self.engine is not None:
            try:
                self.engine.close()
            except Exception:
                pass  # quitting: nothing useful to do with a failing close

    @property
    def chat_screen(self):
        from spectui.tui.screens.chat import ChatScreen

        for screen in self.screen_stack:
            if isinstance(screen, ChatScreen):
                return screen
        return None

    def first_key(self, binding_id: str) -> str:
        """The key that triggers a binding now (after remapping), e.g. for scripted runs."""
        return self.config.keys[binding_id].split(",")[0].strip()

    def read_memory(self) -> MemoryReading | None:
        """The memory probe's reading, with the draft's share when the engine says it.

        An engine may say through an int attribute `draft_bytes` or a "draft_bytes"
        entry in Done.engine_stats.
        """
        engine = self.engine
        reading = self.memory_probe(engine.info.device if engine is not None else "cpu")
        if reading is None or engine is None:
            return reading
        draft_bytes = getattr(engine, "draft_bytes", None)
        chat = self.chat_screen
        if not isinstance(draft_bytes, int) and chat is not None:
            draft_bytes = chat.session.engine_stats.get("draft_bytes")
        if isinstance(draft_bytes, int):
            reading = replace(reading, draft_bytes=draft_bytes)
        return reading

    def settings_record(self) -> dict:
        """What a conversation was started with, saved beside it in history."""
        config = self.config
        info = self.engine.info if self.engine is not None else None
        return {
            "engine": info.name if info else config.engine,
            "target": info.target if info else config.model,
            "draft": info.draft if info else config.draft,
            "method": info.method if info else config.method,
            "k": config.k,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
        }

    # engine loading (messages from the loader thread)

    def on_engine_progress(self, message: EngineProgress) -> None:
        percent = f" {100 * message.done / message.total:.0f}%" if message.total else ""
        self.loading_detail = f"{message.stage}{percent}"
        self._engine_changed()

    def on_engine_ready(self, message: EngineReady) -> None:
        self.engine = message.engine
        self.engine_status = "ready"
        self.load_seconds = message.seconds
        self.loading_detail = ""
        self._engine_changed()
        collect_between_replies()
        if self.compare_prompt is not None and self.chat_screen is not None:
            self.chat_screen.open_compare(prompt_messages(self.compare_prompt, self.config.system))

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.engine_status = "failed"
        self.engine_error = message.error
        self._engine_changed()
        self.notify(f"Could not load the engine: {message.error}", severity="error", timeout=10)

    def _engine_changed(self) -> None:
        chat = self.chat_screen
        if chat is not None and chat.is_mounted:
            chat.engine_changed()

    # app-wide actions

    def action_help(self) -> None:
        from spectui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_history(self) -> None:
        from spectui.tui.screens.history import HistoryScreen

        if self.store is None:
            self.notify("History is off (no store).")
            return
        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen(self.store))

    def open_conversation(self, conversation_id: int) -> None:
        chat = self.chat_screen
        if chat is None or self.store is None:
            return
        chat.show_conversation(self.store.load_conversation(conversation_id))

    def theme_names(self) -> list[str]:
        names = sorted(self.spectui_themes, key=lambda n: (n != DEFAULT_THEME, n))
        return names

    def action_next_theme(self) -> None:
        names = self.theme_names()
        index = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(index + 1) % len(names)]
        self.notify(f"Theme: {self.theme} (theme = \"{self.theme}\" in the config keeps it)")

    def action_screenshot(self) -> None:
        self.screenshot_dir.mkdir(parents=True, exist_ok=True)
        path = self.save_screenshot(path=str(self.screenshot_dir))
        self.notify(f"Saved {path}")
