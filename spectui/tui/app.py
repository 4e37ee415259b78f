"""SpectuiApp: themes, keys, the command palette, the screens, and the engine host wired to
Textual's loop: `host.start()` (it may begin before the app, the engine loading while the
UI draws), then `SpectuiApp(host, config, store).run()`. The host (spectui.host) owns the
engine; the app hands it the loop (a wake-up, timers) and closes it on the way out.
"""

from __future__ import annotations

import gc
from pathlib import Path

from textual.app import App

from spectui.core.safe_text import safe_text
from spectui.settings.config import ChatConfig
from spectui.store import Conversation, Store
from spectui.themes import DEFAULT_THEME, FALLBACK_SOURCES, SpectuiTheme, load_themes, theme_errors, theme_variables
from spectui.tui.heap import defer_full_collections
from spectui.tui.keys import app_bindings
from spectui.tui.messages import ShowConversation
from spectui.tui.theming import textual_theme


class SpectuiApp(App):
    TITLE = "spectui"
    BINDINGS = app_bindings()
    CSS = """
    Screen { background: $background; }
    Footer { background: $panel; }
    """

    def __init__(
        self,
        host,
        config: ChatConfig | None = None,
        store: Store | None = None,
        *,
        resume: Conversation | None = None,
        themes: dict[str, SpectuiTheme] | None = None,
        screenshot_dir: Path | None = None,
        cursor_blink: bool = True,
        compare_prompt: str | None = None,
        history_off: str | None = None,
    ) -> None:
        super().__init__()
        self.host = host
        self.config = config or ChatConfig()
        self.store = store
        self.resume = resume
        self._themes_given = themes is not None
        self.spectui_themes = themes if themes is not None else load_themes()
        self.screenshot_dir = screenshot_dir or Path.cwd()
        self.cursor_blink = cursor_blink  # off for snapshot tests: a blink phase is not a regression
        self.compare_prompt = compare_prompt  # `spectui compare PROMPT`: open the compare view at once
        self.history_off = history_off  # why the chat runs without history (the store did not open)
        self.chat_screen = None
        for theme in self.spectui_themes.values():
            self.register_theme(textual_theme(theme))

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return theme_variables(FALLBACK_SOURCES)

    def notify(self, message: str, *, title: str = "", severity="information", timeout=None, markup: bool = True) -> None:
        """Toasts carry errors from servers and files: shown as text, never as markup ("[/]"
        would raise) and never with raw controls."""
        super().notify(safe_text(message), title=safe_text(title), severity=severity, timeout=timeout, markup=False)

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
        if self.history_off:
            self.notify(f"History is off, nothing is saved: {self.history_off}", severity="warning", timeout=15)
        if not self._themes_given:  # themes from the config dir: say which were skipped
            for problem in theme_errors():
                self.notify(f"Theme skipped: {problem}", severity="warning", timeout=8)
        self.chat_screen = ChatScreen(self.host, self.config, self.store, conversation=self.resume,
                                      compare_prompt=self.compare_prompt, cursor_blink=self.cursor_blink)
        self.push_screen(self.chat_screen)
        self.host.start()  # if the command did not start it before the app
        self.host.attach(lambda: self.call_later(self.host.pump), self.set_timer)

    def exit(self, *args, **kwargs) -> None:
        self.host.drop_restart()  # the screens let the engine go as they close: no restart then
        super().exit(*args, **kwargs)

    def on_unmount(self) -> None:
        gc.set_threshold(*self._gc_thresholds)
        self.host.close(timeout=15.0)

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

    def get_system_commands(self, screen):
        from spectui.tui.palette import palette_commands

        yield from super().get_system_commands(screen)
        yield from palette_commands(self, screen, self.config.keys)

    def get_key_display(self, binding) -> str:
        if binding.id != "newline":
            return super().get_key_display(binding)
        keys = self.config.keys["newline"].split(",")  # all: many terminals send Shift+Enter as Enter
        return "/".join(App.get_key_display(self, binding.with_key(key)).replace("shift+", "⇧") for key in keys)

    def first_key(self, binding_id: str) -> str:
        """The key that triggers a binding now (after remapping), e.g. for scripted runs."""
        return self.config.keys[binding_id].split(",")[0].strip()

    # app-wide actions

    def action_help(self) -> None:
        from spectui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.config.keys))

    def action_history(self) -> None:
        from spectui.tui.screens.history import HistoryScreen

        if self.store is None:
            self.notify("History is off (no store).")
        elif not isinstance(self.screen, HistoryScreen):
            open_id = self.chat_screen.transcript.conversation_id if self.chat_screen else None
            self.push_screen(HistoryScreen(self.store, self.screenshot_dir, open_id), self._open_conversation)

    def _open_conversation(self, conversation_id: int | None) -> None:
        if conversation_id is not None and self.chat_screen is not None:
            self.chat_screen.post_message(ShowConversation(self.store.load_conversation(conversation_id)))

    def theme_names(self) -> list[str]:
        return sorted(self.spectui_themes, key=lambda n: (n != DEFAULT_THEME, n))

    def action_next_theme(self) -> None:
        names = self.theme_names()
        index = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(index + 1) % len(names)]
        self.notify(f"Theme: {self.theme} (theme = \"{self.theme}\" in the config keeps it)")

    def action_screenshot(self) -> None:
        self.screenshot_dir.mkdir(parents=True, exist_ok=True)
        path = self.save_screenshot(path=str(self.screenshot_dir))
        self.notify(f"Saved {path}")
