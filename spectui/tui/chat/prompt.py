"""The message box: a text area where Enter sends and Shift+Enter / Ctrl+J start a new line.

Many terminals send Shift+Enter as a plain Enter (only those that speak the kitty keyboard
protocol tell them apart), so Ctrl+J, which every terminal sends as its own byte, is the
newline that always works. A paste arrives whole (bracketed paste), so a pasted block stays
one message whatever newlines it holds. ↑ on the first line recalls this chat's earlier
prompts, ↓ on the last line goes forward again. PageUp and PageDown scroll the conversation
(the box is a few lines high: its own pages are rarely wanted), and Tab in the empty box
goes to the first screen's suggestions while they are shown. It is the message box's part
(spectui.tui.chat.message_box), which says upward what it posts.

A paste the terminal does not bracket arrives as one keystroke per character, and the text
area re-wraps the whole line on every edit: 45 KB on one line took minutes. So characters
typed in a burst (the keys already queued for the box) go in as one edit.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import events
from textual.message import Message

from spectui.tui.chat.recall import PromptRecall
from spectui.tui.keys import PROMPT, prompt_bindings
from spectui.tui.widgets.safe_fields import SafeTextArea

# xterm's modifyOtherKeys form of Shift+Enter, as Textual names it.
SHIFT_ENTER_XTERM = "shift+\r"
PAGE_KEYS = {"pageup": -1, "pagedown": 1}


def keys_of(keys: dict[str, str], binding_id: str) -> set[str]:
    return {key.strip() for key in keys[binding_id].split(",")}


# What the box posts, named for the message box (MessageBox.Submitted, on_message_box_submitted):
# they bubble through it to the screen, the prompt being the box's part.
class Submitted(Message, namespace="message_box"):
    """Enter on a line that is not blank: the screen decides what it means."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class Paged(Message, namespace="message_box"):
    """PageUp (-1) or PageDown (1) in the box: for the conversation to scroll."""

    def __init__(self, direction: int) -> None:
        super().__init__()
        self.direction = direction


class ChatPrompt(SafeTextArea):
    BINDINGS = prompt_bindings()
    DEFAULT_CSS = """
    ChatPrompt { height: auto; max-height: 12; min-height: 3; padding: 0 1; }
    """

    def __init__(self, keys: dict[str, str], cursor_blink: bool = True) -> None:
        super().__init__(
            id="prompt", placeholder="Message the model · Enter sends · Ctrl+J new line · F1 help",
            highlight_cursor_line=False, soft_wrap=True, tab_behavior="focus",
        )
        self.cursor_blink = cursor_blink
        self.send_keys = keys_of(keys, "send")
        self.newline_keys = keys_of(keys, "newline") | {SHIFT_ENTER_XTERM}
        # The chat's own keys win over the text area's (F6 would select a line, F7 all).
        taken = {key for binding_id in keys if binding_id not in PROMPT for key in keys_of(keys, binding_id)}
        for key in taken:
            self._bindings.key_to_bindings.pop(key, None)
        self.recall = PromptRecall()
        self.complete: Callable[[str], str | None] = lambda text: None  # Tab: the completed text, or None
        self._typed: list[str] = []  # characters typed in this burst, not yet in the text
        self.empty_tab: Callable[[], bool] = lambda: False  # Tab in the empty box: True if it was taken

    @property
    def value(self) -> str:
        self._insert_typed()
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self._typed.clear()  # typed before the new text: replaced by it
        self.load_text(text)
        self.move_cursor(self.document.end)

    # keys and pastes

    async def on_event(self, event: events.Event) -> None:
        """A typed character waits for the rest of its burst: the first posts the insert
        behind the keys already queued. Any other event puts what waits in first, so keys,
        clicks and pastes keep their order."""
        character = self._typed_character(event)
        if character is not None:
            event.stop()
            event.prevent_default()
            self._typed.append(character)
            if len(self._typed) == 1:
                self.call_later(self._insert_typed)
            return
        self._insert_typed()
        await super().on_event(event)

    def _typed_character(self, event: events.Event) -> str | None:
        """The character a key typed into the text, or None for any other event."""
        if (isinstance(event, events.Key) and event.is_printable and not self.read_only
                and event.key not in self.send_keys | self.newline_keys):
            return event.character
        return None

    def _insert_typed(self) -> None:
        """The burst's characters as one edit, as the text area inserts a typed key."""
        if not self._typed:
            return
        text = "".join(self._typed)
        self._typed.clear()
        self.replace(text, *self.selection, maintain_selection_offset=False)

    async def _on_key(self, event: events.Key) -> None:
        """Runs before the text area's own (which would insert Enter as a newline)."""
        if event.key in self.send_keys:
            self.action_send()
        elif event.key in self.newline_keys:
            self.action_newline()
        elif event.key == "up" and self.cursor_location[0] == 0:
            if not self._show(self.recall.back(self.text)):
                return  # nothing further back: the text area moves to the line's start
        elif event.key == "tab" and self.cursor_location == self.document.end and \
                (completed := self.complete(self.text)) is not None:
            self.value = completed
        elif event.key == "down" and self.recall.browsing and self.cursor_location[0] == self.document.line_count - 1:
            self._show(self.recall.forward())
        elif event.key in PAGE_KEYS:
            self.post_message(Paged(PAGE_KEYS[event.key]))
        elif event.key == "tab" and not self.text:
            if not self.empty_tab():
                return  # the focus moves on, as Tab does
        elif event.key == "tab":  # text with nothing to complete: the focus stays (typed keys went nowhere)
            self.notify("Nothing to complete here", timeout=2)
        else:
            return  # the text area's turn
        event.stop()
        event.prevent_default()

    async def _on_paste(self, event: events.Paste) -> None:
        """The pasted text goes in as it is, newlines and all (terminals paste them as CR)."""
        event.stop()
        event.prevent_default()
        if self.read_only:
            return
        text = event.text.replace("\r\n", "\n").replace("\r", "\n")
        result = self.replace(text, *self.selection)
        self.move_cursor(result.end_location)
        self.focus()

    def action_send(self) -> None:
        if self.text.strip():
            self.post_message(Submitted(self.text))

    def action_newline(self) -> None:
        self.move_cursor(self.replace("\n", *self.selection).end_location)

    def _show(self, recalled: str | None) -> bool:
        if recalled is not None:
            self.value = recalled
        return recalled is not None
