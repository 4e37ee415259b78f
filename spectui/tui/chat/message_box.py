"""The message box as one widget: the pop-up list of `/` commands (CommandHints) over the
prompt (ChatPrompt), with what they keep: the hints' text, Tab's completion, ↑ ↓ through this
chat's earlier lines. It tells the screen what happened with its own messages (a line sent,
a page key) and takes text, focus and the chat's lines through its methods; nothing outside
reaches into the prompt's parts.

It draws nothing of its own: a group as tall as what it holds, no border or padding. It
holds the one-column margin its parts had: a vertical layout narrows every `1fr` width by
its children's widest margin, so the conversation above stays as wide as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Self

from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalGroup
from textual.widgets import TextArea

from spectui.tui.chat.completion import CommandHints, complete_box
from spectui.tui.chat.prompt import ChatPrompt, Paged, Submitted


class MessageBox(VerticalGroup):
    """keys: the config's (send, newline, the chat's keys the text area must not take);
    cwd: where `@path` and `/file` completion starts (the session's, as it changes);
    empty_tab: Tab in the empty box, True when something took it (the first screen's list)."""

    DEFAULT_CSS = "MessageBox { height: auto; margin: 0 1; }"

    Submitted = Submitted  # its prompt posts them; they bubble up through the box
    Paged = Paged

    def __init__(self, keys: dict[str, str], cwd: Callable[[], str | None], empty_tab: Callable[[], bool],
                 cursor_blink: bool = True) -> None:
        super().__init__(id="message-box")
        self.hints = CommandHints()
        self.prompt = ChatPrompt(keys, cursor_blink)
        self.prompt.complete = lambda text: complete_box(text, cwd())
        self.prompt.empty_tab = empty_tab

    def compose(self) -> ComposeResult:
        yield self.hints
        yield self.prompt

    # what it keeps in step

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        self.hints.show(self.prompt.text)

    # what the screen asks of it

    @property
    def text(self) -> str:
        """What the box holds now (characters typed in a burst included)."""
        return self.prompt.value

    def set_text(self, text: str) -> None:
        """`text` in the box instead of what it held, the cursor at its end."""
        self.prompt.value = text

    def fill(self, text: str) -> None:
        """`text` in the box, and the focus here."""
        self.prompt.value = text
        self.prompt.focus()

    def clear(self) -> None:
        """Empty the box as an edit: keys typed after the Enter that sent it still land here."""
        self.prompt.clear()

    def focus(self, scroll_visible: bool = True) -> Self:
        """The focus goes to the text area."""
        self.prompt.focus(scroll_visible)
        return self

    def typed(self, key: events.Key) -> None:
        """A character typed elsewhere (nothing took it): into the box, with the focus."""
        self.prompt.focus()
        if key.character:
            self.prompt.insert(key.character)

    def remember(self, text: str) -> None:
        """A line sent: ↑ brings it back."""
        self.prompt.recall.add(text)

    def recall_lines(self, lines: Iterable[str] = ()) -> None:
        """The lines ↑ goes through: a new chat's none, a stored chat's questions."""
        self.prompt.recall.reset(lines)
