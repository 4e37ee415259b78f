"""SpectuiApp: loads the engine in a thread, owns themes, keys, history and the screens.

    app = SpectuiApp(engine_factory, config, store)
    app.run()

engine_factory(progress) -> Engine is called in a background thread (loading can take
minutes); progress(stage, done, total) updates the bar. A failure shows as a message.

An engine that takes k when it starts (vLLM: `info.live_k` False) is rebuilt for a new
k through `engine_factory_for_k(k)`: key presses are debounced, a streaming reply ends
first, and the old engine is closed before the new one loads (a GPU holds one).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from textual.app import App

from spectui.settings.config import ChatConfig
from spectui.measure.metrics import MemoryReading, read_memory
from spectui.settings.options import parse_k
from spectui.measure.run import prompt_messages
from spectui.store import Conversation, Store
from spectui.themes import (
    DEFAULT_THEME,
    FALLBACK_SOURCES,
    SpectuiTheme,
    load_themes,
    theme_errors,
    theme_variables,
)
from spectui.tui.theming import textual_theme
from spectui.tui.heap import collect_between_replies, defer_full_collections
from spectui.tui.keys import app_bindings
from spectui.tui.messages import EngineFailed, EngineProgress, EngineReady
from spectui.tui.worker import join_threads, load_engine, restart_engine, start_thread

EngineFactory = Callable[[Callable[[str, int, int], None]], object]
RESTART_DEBOUNCE_S = 0.7  # F6 F6 F6 is one restart with k + 3, not three
ENGINE_LABELS = {"vllm": "vLLM"}


def engine_label(name: str) -> str:
    return ENGINE_LABELS.get(name, name)


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
        engine_factory_for_k: Callable[[int], EngineFactory] | None = None,
        baseline_factory: EngineFactory | None = None,
    ) -> None:
        super().__init__()
        self.engine_factory = engine_factory
        self.engine_factory_for_k = engine_factory_for_k
        self.baseline_factory = baseline_factory  # the compare view's k = 0 engine, when k is fixed
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
        self.loading_since: float | None = None  # when this load or restart began
        self.load_seconds: float | None = None
        # k restarts (engines with k fixed at start)
        self.last_info = None  # the last ready engine's EngineInfo: shown while it restarts
        self.engine_k = parse_k(self.config.k)[0]  # the k the engine was built with
        self.k_fixed = False  # the engine takes k when it starts
        self.wanted_k: int | None = None  # a k waiting for its restart
        self.restarting_k: int | None = None  # the k a restart in flight builds with
        self.restart_failed = False
        self._restart_timer = None
        for theme in self.spectui_themes.values():
            self.register_theme(textual_theme(theme))

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return theme_variables(FALLBACK_SOURCES)

    def on_mount(self) -> None:
        from spectui.tui.screens.chat import ChatScreen

        self._gc_thresholds = defer_full_collections()
        self._exit_on_sigint()

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
        self.loading_since = self.clock()
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

    def _exit_on_sigint(self) -> None:
        """`kill -INT` (the terminal's Ctrl+C is a key here): leave as Ctrl+Q does. Left to
        Python, the KeyboardInterrupt lands wherever the main thread is, and a handler that
        catches everything there can swallow it and leave the app running."""
        import asyncio
        import signal

        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, lambda: self.exit(return_code=130))
        except (RuntimeError, NotImplementedError, ValueError):
            pass  # not the main thread (tests), or a platform without loop signal handlers

    def first_key(self, binding_id: str) -> str:
        """The key that triggers a binding now (after remapping), e.g. for scripted runs."""
        return self.config.keys[binding_id].split(",")[0].strip()

    def read_memory(self) -> MemoryReading | None:
        """The memory probe's reading, with the draft's share when the engine says it.

        An engine may say through an int attribute `draft_bytes` or a "draft_bytes"
        entry in Done.engine_stats.
        """
        engine = self.engine
        reading = self._engine_memory(engine)
        if reading is None:
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

    @staticmethod
    def _engine_memory(engine) -> MemoryReading | None:
        """The engine's own reading (vLLM: its pool, its engine processes), if it has one."""
        memory = getattr(engine, "memory", None)
        if not callable(memory):
            return None
        try:
            return memory()
        except Exception:  # a panel number is not worth an error: the generic probe answers
            return None

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

    @property
    def loading_text(self) -> str:
        """The load's stage and the seconds it has taken so far: a first run converts a model
        for minutes, and some stages (reading a GGUF) have no percentage to move."""
        if self.loading_since is None:
            return self.loading_detail
        elapsed = f"{self.clock() - self.loading_since:.0f} s"
        return f"{self.loading_detail} · {elapsed}" if self.loading_detail else elapsed

    def on_engine_progress(self, message: EngineProgress) -> None:
        percent = f" {100 * message.done / message.total:.0f}%" if message.total else ""
        self.loading_detail = f"{message.stage}{percent}"
        self._engine_changed()

    def on_engine_ready(self, message: EngineReady) -> None:
        restarted_k, self.restarting_k = self.restarting_k, None
        self.engine = message.engine
        self.last_info = message.engine.info
        self.k_fixed = not message.engine.info.live_k
        self.engine_status = "ready"
        self.restart_failed = False
        self.load_seconds = message.seconds
        self.loading_detail = ""
        if restarted_k is not None:
            self.engine_k = restarted_k
            self.config = replace(self.config, k=restarted_k)  # what new conversations record
        chat = self.chat_screen
        server_k = getattr(message.engine, "k", None)
        if chat is not None and self.k_fixed and not self.k_restarts_engine and isinstance(server_k, int):
            chat.k = self.engine_k = server_k  # a server's k is its own: show that one
        self._engine_changed()
        collect_between_replies()
        if restarted_k is not None and chat is not None:
            chat.engine_restarted(self._restarted_text(message.engine, restarted_k, message.seconds))
        if chat is not None and self.k_restarts_engine and chat.k != self.engine_k:
            self.want_engine_k(chat.k)  # pressed while it loaded
        if self.compare_prompt is not None and chat is not None and restarted_k is None:
            chat.open_compare(prompt_messages(self.compare_prompt, self.config.system))

    def _restarted_text(self, engine, k: int, seconds: float) -> str:
        running_k = getattr(engine, "k", k)
        pinned = f" (it runs k = {running_k}, as its speculative config says)" if running_k != k else ""
        name = engine_label(engine.info.name)
        return f"{name} restarted with k = {k} in {seconds:.1f} s{pinned}; the conversation goes on."

    def on_engine_failed(self, message: EngineFailed) -> None:
        restarted_k, self.restarting_k = self.restarting_k, None
        self.engine_status = "failed"
        self.engine_error = message.error
        self.restart_failed = restarted_k is not None
        self._engine_changed()
        if restarted_k is None:
            self.notify(f"Could not load the engine: {message.error}", severity="error", timeout=10)
            return
        text = f"Could not restart {self.engine_label} with k = {restarted_k}: {message.error}"
        if self.chat_screen is not None:
            self.chat_screen.engine_restart_failed(f"{text} · press a k key to try again")
        self.notify(text, severity="error", timeout=10)

    # k restarts

    @property
    def engine_label(self) -> str:
        return engine_label(self.last_info.name) if self.last_info is not None else "the engine"

    @property
    def k_restarts_engine(self) -> bool:
        """A k change rebuilds the engine (it took k when it started) rather than reaching it."""
        return self.engine_factory_for_k is not None and self.k_fixed

    def want_engine_k(self, k: int) -> None:
        """Restart the engine with k once the key presses settle."""
        self.wanted_k = k
        if self._restart_timer is not None:
            self._restart_timer.stop()
        self._restart_timer = self.set_timer(RESTART_DEBOUNCE_S, self._debounce_elapsed)
        self._engine_changed()

    def _debounce_elapsed(self) -> None:
        self._restart_timer = None
        self.restart_if_wanted()

    def restart_if_wanted(self) -> None:
        """Start the wanted restart if nothing holds the engine; called again when that ends."""
        k = self.wanted_k
        if k is None or self._restart_timer is not None or self.engine_status == "loading":
            return  # nothing wanted, keys still settling, or a load in flight (ready looks again)
        if self.engine is not None and k == self.engine_k:
            self.wanted_k = None
            self._engine_changed()
            return
        if self._engine_in_use():
            return
        self.wanted_k = None
        self._start_restart(k)

    def _engine_in_use(self) -> bool:
        chat = self.chat_screen
        if chat is not None and (chat.current is not None or chat.detached):
            return True  # a reply (even an abandoned one) still streams from it
        # The compare view holds the engine while open; the chat screen looks again on resume.
        return any(hasattr(screen, "stop_work") for screen in self.screen_stack)

    def _start_restart(self, k: int) -> None:
        old_engine, self.engine = self.engine, None
        self.engine_status = "loading"
        self.restarting_k = k
        self.loading_detail = ""
        self.loading_since = self.clock()
        self._engine_changed()
        if self.chat_screen is not None:
            self.chat_screen.engine_restarting(f"Restarting {self.engine_label} with k = {k}: the conversation stays…")
        factory = self.engine_factory_for_k(k)
        start_thread(lambda: restart_engine(old_engine, factory, self.post_message, self.clock), "spectui-load")

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
