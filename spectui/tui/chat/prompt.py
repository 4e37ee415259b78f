"""The prompt. A message sent while the engine loads waits, shown in the conversation, and
goes once the engine is ready; if the engine does not come, it is back in the box."""

from __future__ import annotations

from textual.widgets import Input

from spectui.tui.widgets.conversation import UserMessage


class ChatPrompt(Input):
    def __init__(self, cursor_blink: bool = True) -> None:
        super().__init__(placeholder="Message the model · Enter sends · F1 help", id="prompt")
        self.cursor_blink = cursor_blink
        self.waiting: UserMessage | None = None

    def wait(self, text: str, scroll) -> None:
        """Show `text` in the conversation until the engine is ready."""
        self.clear()
        self.waiting = UserMessage(text)
        scroll.mount(self.waiting)
        scroll.end_if_following()

    def take_waiting(self) -> UserMessage | None:
        shown, self.waiting = self.waiting, None
        return shown

    def give_back(self) -> bool:
        """The waiting message leaves the conversation for the box (unless the box holds
        new text). False if none was waiting."""
        shown = self.take_waiting()
        if shown is None:
            return False
        shown.remove()
        if not self.value:
            self.value = shown.text
        return True
