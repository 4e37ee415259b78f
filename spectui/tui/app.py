"""SpectuiApp: themes, keys, the command palette, the screens, and the engine host wired to
Textual's loop: `host.start()` (it may begin before the app, the engine loading while the
UI draws), then `SpectuiApp(host, config, store).run()`. The host (spectui.host) owns the
engine; the app hands it the loop (a wake-up, timers) and closes it on the way out.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from rich.console import RenderableType
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen

from spectui.core.files import write_user_file
from spectui.core.safe_text import safe_text
from spectui.settings.config import ChatConfig
from spectui.store import Conversation, HistoryQueue, Store, data_folder
from spectui.themes import DEFAULT_THEME, FALLBACK_SOURCES, SpectuiTheme, load_themes, theme_errors, theme_variables
from spectui.tui.heap import defer_full_collections
from spectui.tui.history_watch import HistoryWatch
from spectui.tui.keys import app_bindings, remapped
from spectui.core.errors import SpectuiError
from spectui.tui.messages import ExportWanted, ShowConversation
from spectui.tui.theming import textual_theme, token_variables

if TYPE_CHECKING:
    from spectui.host.host import EngineHost
    from spectui.tui.screens.chat import ChatScreen


class SpectuiApp(App):
    TITLE = "spectui"
    BINDINGS = [*app_bindings()]  # a list of Textual's BindingType, as App declares it
    CSS = """
    Screen { background: $background; }
    Footer { background: $panel; }
    """

    def __init__(
        self,
        host: EngineHost,
        config: ChatConfig | None = None,
        store: Store | None = None,
        *,
        resume: Conversation | None = None,
        themes: dict[str, SpectuiTheme] | None = None,
        screenshot_dir: Path | None = None,
        export_dir: Path | None = None,
        cursor_blink: bool = True,
        compare_prompt: str | None = None,
        history_off: str | None = None,
        attach: list[str] | None = None,
    ) -> None:
        super().__init__()
        self.host = host
        self.config = config or ChatConfig()
        self.store = store  # reads (the history screen) go straight to it
        # the chat's writes: queued for a thread of their own, so a lock never freezes the UI
        self.history = HistoryQueue(store) if store is not None else None
        self.history_left: str | None = None  # at quit: the turns the locked history did not take
        self.resume = resume
        self._themes_given = themes is not None
        self.spectui_themes = themes if themes is not None else load_themes()
        # Where Ctrl+S and the history's export write: the data folder unless told otherwise.
        self.screenshot_dir = screenshot_dir or data_folder("screenshots")
        self.export_dir = export_dir or data_folder("exports")
        self.cursor_blink = cursor_blink  # off for snapshot tests: a blink phase is not a regression
        self.compare_prompt = compare_prompt  # `spectui compare PROMPT`: open the compare view at once
        self.history_off = history_off  # why the chat runs without history (the store did not open)
        self.attach = attach or []  # `spectui chat -f`: files for the first message
        self.chat_screen: ChatScreen | None = None
        for theme in self.spectui_themes.values():
            self.register_theme(textual_theme(theme))

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return theme_variables(FALLBACK_SOURCES)

    def get_css_variables(self) -> dict[str, str]:
        variables = super().get_css_variables()  # also kept as self.theme_variables: updated in place
        variables.update(token_variables(self.current_theme, variables, self.no_color))
        return variables

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """Toasts carry errors from servers and files: shown as text, never as markup ("[/]"
        would raise) and never with raw controls."""
        super().notify(safe_text(message), title=safe_text(title), severity=severity, timeout=timeout, markup=False)

    def copy_to_clipboard(self, text: str) -> None:
        """Every copy (the copy keys, a text area's selection) as the screen shows it: no
        escape from a reply or a paste reaches the clipboard to run where it is pasted."""
        super().copy_to_clipboard(safe_text(text))

    def on_mount(self) -> None:
        from spectui.tui.screens.chat import ChatScreen

        self._gc_thresholds = defer_full_collections()
        self._exit_on_signals()
        self.set_keymap(remapped(self.config.keys))
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
        self.chat_screen = ChatScreen(self.host, self.config, self.history, conversation=self.resume,
                                      compare_prompt=self.compare_prompt, cursor_blink=self.cursor_blink)
        self.push_screen(self.chat_screen)
        if self.attach:
            self.call_after_refresh(self.chat_screen.commands.attach, self.attach)
        if self.history is not None:
            self.history_watch = HistoryWatch(self.history, self.notify, self.withdraw_notice)
            self.set_interval(HistoryWatch.EVERY_S, self.history_watch.check)
        self.host.start()  # if the command did not start it before the app
        self.host.attach(lambda: self.call_later(self.host.pump), self.set_timer)

    def withdraw_notice(self, message: str) -> None:
        """Take the notices that say `message` off the screen now."""
        for notification in [n for n in self._notifications if n.message == message]:
            self._unnotify(notification)

    def exit(self, result: object = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        self.host.drop_restart()  # the screens let the engine go as they close: no restart then
        super().exit(result, return_code, message)

    def on_unmount(self) -> None:
        gc.set_threshold(*self._gc_thresholds)
        if self.history is not None:  # a moment to save; what the lock keeps goes to a file
            self.history_left = self.history.close()
        self.host.close(timeout=15.0)

    def _exit_on_signals(self) -> None:
        """`kill -INT` (the terminal's Ctrl+C is a key here), `kill` (TERM) and a closed
        terminal (HUP): leave as Ctrl+Q does, the terminal restored (main screen, no mouse
        tracking). Left to Python, TERM and HUP end the process where it stands, and the
        KeyboardInterrupt of INT lands wherever the main thread is (a handler that catches
        everything there can swallow it and leave the app running)."""
        import asyncio
        import signal
        import sys

        loop = asyncio.get_running_loop()
        resume_only_after_a_stop()
        hangup = () if sys.platform == "win32" else (signal.SIGHUP,)
        for signum in (signal.SIGINT, signal.SIGTERM, *hangup):
            try:
                loop.add_signal_handler(signum, lambda code=128 + signum: self.exit(return_code=code))
            except (RuntimeError, NotImplementedError, ValueError):
                return  # not the main thread (tests), or a platform without loop signal handlers

    def get_system_commands(self, screen: Screen) -> Iterator[SystemCommand]:
        from spectui.tui.palette import palette_commands

        yield from super().get_system_commands(screen)
        yield from palette_commands(self, screen, self.config.keys)

    def get_key_display(self, binding: Binding) -> str:
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
            open_id = self.chat_screen.session.transcript.conversation_id if self.chat_screen else None
            screen = HistoryScreen(self.store, self.export_dir, open_id, writes=self.history)
            self.push_screen(screen, self._open_conversation)

    def action_advise(self) -> None:
        from spectui.tui.screens.advise import AdviseScreen

        if self.store is None:
            self.notify("History is off (no store): advise replays your saved replies.")
        elif self.chat_screen is not None and self.screen is self.chat_screen:
            self.wait_for_history()  # the last reply's rows may still wait in the queue
            self.push_screen(AdviseScreen(self.chat_screen.session, self.store.path))

    def on_export_wanted(self, message: ExportWanted) -> None:
        """`/export`: the chat's files, once its rows left the history's queue."""
        self.wait_for_history()
        written = export_chat(self.store, message.conversation_id(), message.folder or self.export_dir, self.notify)
        if written is not None:
            message.written(written)

    def wait_for_history(self, timeout: float = 2.0) -> None:
        """Wait (a moment at most) for the chat's queued history writes: an export reads them."""
        import time

        deadline = time.monotonic() + timeout
        while self.history is not None and not self.history.idle and time.monotonic() < deadline:
            time.sleep(0.01)

    def _open_conversation(self, conversation_id: int | None) -> None:
        if conversation_id is not None and self.chat_screen is not None:
            assert self.store is not None, "the history screen that chose the conversation reads the store"
            self.chat_screen.post_message(ShowConversation(self.store.load_conversation(conversation_id)))

    def theme_names(self) -> list[str]:
        return sorted(self.spectui_themes, key=lambda n: (n != DEFAULT_THEME, n))

    def action_next_theme(self) -> None:
        names = self.theme_names()
        index = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(index + 1) % len(names)]
        self.notify(f"Theme: {self.theme} (theme = \"{self.theme}\" in the config keeps it)")

    def action_screenshot(self) -> None:
        from textual._files import generate_datetime_filename

        try:
            self.screenshot_dir.mkdir(parents=True, exist_ok=True)
            # a new, dated name, through the one safe writer: never onto a file already there
            name = generate_datetime_filename(self.title, ".svg")
            path = write_user_file(self.screenshot_dir / name, self.export_screenshot()).resolve()
        except OSError as error:
            self.notify(f"Screenshot not saved in {self.screenshot_dir}: {error.strerror or error}", severity="error")
            return
        self.notify(f"Saved {path}")


def export_chat(store: Store | None, conversation_id: int | None, folder: Path,
                notify: Callable[..., None]) -> tuple[Path, Path, Path] | None:
    """The history's export (Markdown, JSON, the trace) of the chat, this chat's own files
    replaced; None, and a notice that says why, where there is nothing to export or it failed."""
    from spectui.tui.screens.history import write_exports

    if store is None or conversation_id is None:
        notify("Nothing to export yet: the chat is saved once its first message is sent"
               if store is not None else "History is off: there is no stored chat to export.")
        return None
    try:
        return write_exports(store, conversation_id, folder, overwrite=True)
    except (SpectuiError, OSError) as error:
        why = (error.strerror or str(error)) if isinstance(error, OSError) else str(error)
        notify(f"Not exported to {folder}: {why}", severity="error")
        return None


def resume_only_after_a_stop() -> None:
    """Textual's driver takes the terminal back on every SIGCONT. A terminal that hangs up
    (a closed tab, a killed tmux, a dropped SSH) sends SIGCONT with its SIGHUP: taken back
    while the app quits, the dead terminal got a new input thread that spun on it and kept
    the process alive (20-65 % of a core). Resume only after a stop (Ctrl+Z's SIGTSTP)."""
    import signal
    import threading

    if not hasattr(signal, "SIGCONT") or threading.current_thread() is not threading.main_thread():
        return
    stop, resume = signal.getsignal(signal.SIGTSTP), signal.getsignal(signal.SIGCONT)
    if not (callable(stop) and callable(resume)):
        return  # no driver of a real terminal (tests): nothing to guard
    stopped = threading.Event()

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()
        stop(signum, frame)

    def on_resume(signum: int, frame: FrameType | None) -> None:
        if stopped.is_set():
            stopped.clear()
            resume(signum, frame)

    signal.signal(signal.SIGTSTP, on_stop)
    signal.signal(signal.SIGCONT, on_resume)
