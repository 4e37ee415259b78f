"""The copy keys: a reply's plain text, or one of its code blocks, onto the clipboard.

They take the picked reply (the focused one: the pick_reply key, then ↑ ↓) or else the
last. The text is what the model wrote, as the history stores it (the reply's pieces
joined), never the screen's styling. The code key copies the reply's last code block;
pressed again on the same reply it copies the one before, round the blocks.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.screen import Screen

from spectui.core.reasoning import split_reasoning
from spectui.core.words import counted
from spectui.tui.clipboard import Copied
from spectui.tui.fences import code_blocks
from spectui.tui.widgets.conversation import ReplyView


class ReplyCopier:
    """copy(text) puts the text on the clipboard and says whether it surely arrived."""

    def __init__(self, screen: Screen, copy: Callable[[str], Copied]) -> None:
        self.screen, self.copy = screen, copy
        self._code: tuple[ReplyView, int] | None = None  # the reply and block the code key copied last

    def chosen(self) -> tuple[int, ReplyView] | None:
        """The reply the keys act on, and its number in the conversation (from 1)."""
        views = list(self.screen.query(ReplyView))
        if not views:
            return None
        focused = self.screen.focused
        view = focused if isinstance(focused, ReplyView) and focused in views else views[-1]
        return views.index(view) + 1, view

    def copy_reply(self) -> None:
        chosen = self.chosen()
        if chosen is None:
            self.screen.notify("No reply to copy yet.")
            return
        number, view = chosen
        reasoning, text = split_reasoning(view.token_view.text)
        copied = self.copy(text)
        streaming = " so far (it is still streaming)" if not view.finished else ""
        apart = " · its reasoning left out" if reasoning else ""
        self.screen.notify(f"{copied.verb} reply {number}{streaming} · {counted(len(text), 'char')}{apart}{copied.note}",
                           severity="information" if copied.sure else "warning")

    def copy_code(self) -> None:
        chosen = self.chosen()
        if chosen is None:
            self.screen.notify("No reply to copy from yet.")
            return
        number, view = chosen
        blocks = code_blocks(split_reasoning(view.token_view.text)[1])  # the answer's blocks
        if not blocks:
            self.screen.notify(f"Reply {number} has no code block.")
            return
        index = len(blocks) - 1
        if self._code is not None and self._code[0] is view:
            index = (self._code[1] - 1) % len(blocks)
        self._code = (view, index)
        block = blocks[index]
        copied = self.copy(block.text)
        which = f" {index + 1} of {len(blocks)}" if len(blocks) > 1 else ""
        lines = f"{block.num_lines} line{'s' if block.num_lines != 1 else ''}"
        self.screen.notify(f"{copied.verb} {block.language or 'code'} block{which} of reply {number} · {lines}{copied.note}",
                           severity="information" if copied.sure else "warning")

    def pick(self, step: int) -> bool:
        """Focus the reply `step` away from the picked one (from the message box: the last);
        False when that runs past the last reply (back to the message box, then)."""
        views = list(self.screen.query(ReplyView))
        if not views:
            self.screen.notify("No reply to pick yet.")
            return True
        focused = self.screen.focused
        index = views.index(focused) + step if isinstance(focused, ReplyView) and focused in views else len(views) - 1
        if index >= len(views):
            return False
        views[max(index, 0)].focus()
        return True
