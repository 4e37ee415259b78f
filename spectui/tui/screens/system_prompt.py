"""The system prompt of this chat, edited in a text area; stored with the chat (its
`system` row in history). Ctrl+S keeps it, Esc leaves it as it was."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from spectui.tui.widgets.safe_fields import SafeTextArea


class SystemPromptScreen(ModalScreen):
    """Dismisses with the new prompt ("" for none), or None when nothing changes."""

    BINDINGS = [
        Binding("escape", "dismiss", "cancel"),
        Binding("ctrl+s", "save", "keep it", priority=True),
    ]
    DEFAULT_CSS = """
    SystemPromptScreen { align: center middle; }
    SystemPromptScreen > Vertical {
        width: 84; max-width: 100%; height: auto; max-height: 90%; padding: 1 2;
        background: $panel; border: round $primary;
    }
    SystemPromptScreen #system-title { text-style: bold; color: $accent; margin-bottom: 1; }
    SystemPromptScreen TextArea { height: 12; }
    SystemPromptScreen #system-hint { color: $text-muted; margin-top: 1; }
    """

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("System prompt of this chat · Ctrl+S keeps it · Esc cancels", id="system-title")
            yield SafeTextArea(self.prompt, id="system-text", soft_wrap=True, tab_behavior="focus")
            yield Static("Empty: no system prompt. The next reply follows it; new chats start with the "
                         "config's (system = …).", id="system-hint")

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        area.move_cursor(area.document.end)

    def action_save(self) -> None:
        text = self.query_one(TextArea).text.strip()
        self.dismiss(None if text == self.prompt else text)
