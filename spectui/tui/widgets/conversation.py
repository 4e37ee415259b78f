"""One user message and one assistant reply, as they sit in the conversation."""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Collapsible, Markdown, Static

from spectui.core.reasoning import split_reasoning
from spectui.core.safe_text import safe_text
from spectui.settings.config import DEFAULT_KEYS
from spectui.tui.widgets.token_view import TokenView


class UserMessage(Static):
    DEFAULT_CSS = """
    UserMessage {
        margin: 1 0 0 0;
        padding: 0 1;
        background: $boost;
        border-left: outer $primary;
        color: $foreground;
    }
    """

    def __init__(self, text: str) -> None:
        super().__init__(Content(safe_text(text)))  # never markup, no controls: typed, pasted or from history
        self.text = text


class SystemNote(Static):
    """A line from the app itself (a loading error, a resumed chat)."""

    DEFAULT_CSS = """
    SystemNote { margin: 1 0 0 0; padding: 0 1; color: $text-muted; }
    SystemNote.-error { color: $error; border-left: outer $error; }
    """

    def __init__(self, text: str, error: bool = False) -> None:
        super().__init__(Content(safe_text(text)), classes="-error" if error else "")


class ReplyView(Vertical):
    """A reply; focused, it is the one the copy keys take (the chat's pick_reply key)."""

    can_focus = True
    BINDINGS = [
        Binding("up", "screen.pick_reply(-1)", "earlier reply"),
        Binding("down", "screen.pick_reply(1)", "later reply"),
        Binding("escape", "screen.focus_prompt", "back to the message box"),
        # The chat's edit key (its id: remapped with it) edits the picked reply, not the last message.
        Binding(DEFAULT_KEYS["edit_last"], "screen.edit_reply", "edit this reply", id="edit_last"),
    ]
    DEFAULT_CSS = """
    ReplyView {
        height: auto;
        margin: 1 0 0 0;
        padding: 0 1;
        border-left: outer $accent 60%;
    }
    ReplyView:focus { border-left: outer $accent; background: $boost; }
    ReplyView > Markdown, ReplyView > Collapsible { display: none; margin: 0; padding: 0; background: transparent; }
    ReplyView.-markdown > Markdown, ReplyView.-markdown > Collapsible { display: block; }
    ReplyView > Collapsible { border-top: none; color: $text-muted; text-style: dim; }
    ReplyView.-markdown > TokenView { display: none; }
    ReplyView > .reply-note { color: $text-muted; height: auto; }
    ReplyView > .reply-note.-problem { color: $warning; }
    """

    def __init__(self, reply_id: int, chunks: Iterable[tuple[str, str]] = (), show_ghosts: bool = False) -> None:
        super().__init__()
        self.reply_id = reply_id
        self.token_view = TokenView(chunks, show_ghosts)
        self.note = Static("", classes="reply-note")
        self.finished = False
        self.finish_reason: str | None = None
        self._markdown: Markdown | None = None

    def compose(self):
        yield self.token_view
        yield self.note

    def finish(self, finish_reason: str, summary: str, problem: str | None = None) -> None:
        """Mark the reply done; a problem (cancelled, error) keeps the partial text and says so."""
        self.finished = True
        self.finish_reason = finish_reason
        self.token_view.streaming = False
        if problem:  # a server's error body may be quoted in it
            self.note.update(Content(safe_text(f"⚠ {problem} · partial reply kept · {summary}")))
            self.note.add_class("-problem")
        else:
            self.note.update(Content(safe_text(summary)))

    def reopen(self) -> None:
        """A finished reply goes on streaming (continued in place): its note and rendered
        Markdown go until it ends again."""
        self.finished, self.finish_reason = False, None
        self.note.update("")
        self.note.remove_class("-problem")
        self.remove_class("-markdown")
        for child in list(self.children):
            if isinstance(child, (Markdown, Collapsible)):
                child.remove()
        self._markdown = None

    def set_markdown(self, on: bool) -> None:
        """Rendered Markdown for a finished reply; a streaming one stays as tokens."""
        if on and self.finished:
            if self._markdown is None:
                reasoning, answer = split_reasoning(self.token_view.text)
                self._markdown = Markdown(safe_text(answer))
                self.mount(self._markdown, before=self.note)
                if reasoning:  # apart from the answer, folded until asked for; plain text, never markup
                    block = Collapsible(Static(Content(safe_text(reasoning))), title="reasoning", collapsed=True)
                    self.mount(block, before=self._markdown)
            self.add_class("-markdown")
        else:
            self.remove_class("-markdown")

    @property
    def markdown_shown(self) -> bool:
        return self.has_class("-markdown")
