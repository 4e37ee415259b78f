"""The conversation's scroll: it follows a streaming reply until the user scrolls up, and
shows a message that waits for the engine (the session keeps its text) until it goes."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content

from spectui.host.messages import EngineFailed, EngineReady, HostMessage, RestartStarted
from spectui.tui.widgets.conversation import SystemNote, UserMessage
from spectui.tui.widgets.token_view import TokenView


class ConversationScroll(VerticalScroll):
    """Following is a state, not read back from the geometry: a scroll to the text's end can
    be cut short by a layout that has not grown the reply yet, which looks just like a user
    who scrolled up a little."""

    following = True
    _restart_note: SystemNote | None = None
    _waiting: UserMessage | None = None

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value >= self.max_scroll_y:  # a wider window clamps the scroll to the end: still there
            self.following = True
        elif new_value < old_value:  # while a reply streams, only the user scrolls up
            self.following = False

    def on_resize(self) -> None:
        self.end_if_following()  # rewrapped text: the end moved

    def end_if_following(self) -> None:
        if self.following:
            self.call_after_refresh(self.scroll_end, animate=False)

    def show_waiting(self, text: str) -> None:
        """`text`, sent while the engine loads, shown until it goes (take_waiting)."""
        self._waiting = UserMessage(text)
        self.mount(self._waiting)
        self.end_if_following()

    def take_waiting(self) -> UserMessage | None:
        """The waiting message's view, now the sent message's (or None: none waited)."""
        shown, self._waiting = self._waiting, None
        return shown

    def note(self, text: str, error: bool = False) -> SystemNote:
        note = SystemNote(text, error=error)
        self.mount(note)
        self.end_if_following()
        return note

    def engine_note(self, event: HostMessage) -> None:
        """What the engine host said that belongs in the conversation: a failed load, and a
        k restart as one note, "restarting…" then how it went (the bar says it too, but a
        narrow terminal cuts the bar's end)."""
        if isinstance(event, RestartStarted):
            self._restart_note = self.note(event.note)
        elif isinstance(event, (EngineReady, EngineFailed)) and event.restart_note is not None:
            note, self._restart_note = self._restart_note, None
            error = isinstance(event, EngineFailed)
            if note is None or not note.is_attached:  # a new chat removed it
                self.note(event.restart_note, error)
            else:
                note.update(Content(event.restart_note))
                note.set_class(error, "-error")
                self.end_if_following()
        elif isinstance(event, EngineFailed):
            self.note(f"Could not load the engine: {event.error}", error=True)

    def follow_text(self, token_view: TokenView) -> None:
        """After the next refresh, bring the reply's last line of text to the bottom."""
        self.call_after_refresh(self._follow, token_view)

    def _follow(self, token_view: TokenView) -> None:
        top = token_view.region.y - self.content_region.y + self.scroll_y
        target = max(0, top + token_view.num_text_lines - self.content_region.height)
        if target > self.scroll_y:
            self.scroll_to(y=target, animate=False)
