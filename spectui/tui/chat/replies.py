"""The replies streaming into the conversation, drawn: the session holds each reply's state
(spectui.chat_session.streaming: its id, steps, settings, status and how it ended); this
draws its steps into its view and its end under it.

Steps arrive from the reply's thread in `inbox`, which asks for a frame when they come (at
most 15 a second) and the frame draws whatever is there in one go, so a fast stream costs
one redraw per frame, keys stay responsive, and an idle screen does not wake. A frame is
paid from the same cores as the model's forwards: at 25 tokens a second on a CPU, a frame
per token was 25 draws a second; 15 still read as a stream. A long prompt's prefill
progress comes through the same inbox, so the bar says it before the first step.
A reply left behind by a new chat keeps running in its thread: only its text is kept, for
its history row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from textual.screen import Screen

from spectui.chat_session.reply import EndedReply, ReplyRequest
from spectui.chat_session.session import ChatSession
from spectui.core.engine import Engine
from spectui.core.events import Control
from spectui.core.pieces import display_chunks
from spectui.store import HistoryQueue
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.frames import FrameInbox
from spectui.tui.keys import key_display
from spectui.tui.messages import EngineRestarting, PrefillArrived, ReplyEnded, StepArrived
from spectui.tui.widgets.conversation import ReplyView
from spectui.tui.worker import stream_reply

STREAM_FRAME_SECONDS = 1 / 15
PANEL_SECONDS = 0.25  # the panels while a reply streams: numbers change faster than anyone reads them


def chunks_of(arrivals: Sequence[StepArrived]) -> list[tuple[str, str]]:
    return [chunk for arrived in arrivals for chunk in display_chunks(arrived.step, arrived.pieces, arrived.ghost)]


class Replies:
    """The view of the session's reply in progress (`view`), and the inbox its steps come by.

    screen: posts the replies' messages and draws their frames; redraw_bar: the reply's
    status changed; redraw_panels: the panels' turn. keys: the config's, to name those that
    answer a chat which outgrew the model's context."""

    def __init__(self, screen: Screen, scroll: ConversationScroll, session: ChatSession, store: HistoryQueue | None,
                 redraw_bar: Callable[[], None], redraw_panels: Callable[[], None], keys: dict[str, str]) -> None:
        self.screen, self.scroll, self.session, self.store = screen, scroll, session, store
        self.streams = session.replies
        self.redraw_bar, self.redraw_panels = redraw_bar, redraw_panels
        trim, new_chat = (key_display(keys[name].split(",")[0].strip()) for name in ("trim", "new_chat"))
        self.overflow_hint = f"{trim} resends it without the oldest turns, {new_chat} starts anew"
        self.continue_key = key_display(keys.get("continue_reply", "ctrl+f9").split(",")[0].strip())
        self.view: ReplyView | None = None  # the reply in progress's
        self.inbox: FrameInbox[StepArrived | PrefillArrived] = FrameInbox(screen, self.flush, STREAM_FRAME_SECONDS)
        self._panels_drawn = float("-inf")  # on the host's clock

    @property
    def pending(self) -> bool:
        return bool(self.inbox)

    def start(self, request: ReplyRequest, ghosts: bool, view: ReplyView | None = None) -> None:
        """The reply the session asked for (ChatSession.reply_request, .continuation). A reply
        continued in place streams into its `view`, after the (tokens, steps) its history row holds."""
        messages, params, message_id, earlier = request.messages, request.params, request.message_id, request.earlier
        first_index = earlier[1] if earlier is not None else 0
        host, post, put, store = self.session.host, self.screen.post_message, self.inbox.put, self.store

        def run(reply_id: int, engine: Engine, control: Control) -> None:
            stream_reply(engine, messages, params, control, reply_id, post, put,
                         clock=host.clock, store=store, message_id=message_id, first_index=first_index)

        reply = self.streams.start(request, run)
        if view is None:
            view = ReplyView(reply.reply_id, show_ghosts=ghosts)
            self.scroll.mount(view)
        else:
            view.reopen()
        view.token_view.streaming = True
        self.view = view
        self.scroll.scroll_end(animate=False)
        self.scroll.following = True
        self.screen.refresh_bindings()  # the keys that act on the last reply wait for this one

    def _drain(self) -> tuple[list[StepArrived], list[PrefillArrived]]:
        """Steps of the current reply, in order, and its prefill progress; a detached reply's
        steps only keep their text."""
        batch, progress = [], []
        current = self.streams.current
        current_id = current.reply_id if current is not None else None
        for arrived in self.inbox.take_all():
            if isinstance(arrived, PrefillArrived):
                if arrived.reply_id == current_id:
                    progress.append(arrived)
            elif arrived.reply_id == current_id:
                batch.append(arrived)
            else:
                self.streams.left_behind(arrived.reply_id, arrived.step.text)
        return batch, progress

    def flush(self) -> None:
        if not self.inbox:
            return
        batch, progress = self._drain()
        current, view = self.streams.current, self.view
        if current is None or view is None:
            return
        if not batch:
            if progress and current.prefill((progress[0].arrived, progress[0].done), progress[-1].done,
                                            progress[-1].total, progress[-1].arrived):
                self.redraw_bar()  # how far a long prompt's prefill is, its rate and the time left
            return
        if current.add([(arrived.step, arrived.arrived) for arrived in batch]):
            self.redraw_bar()  # steps come, with the k and T each ran with
        token_view = view.token_view
        following = self.scroll.following
        token_view.append_chunks(chunks_of(batch))
        if following:
            self.scroll.follow_text(token_view)
        now = self.session.host.clock()
        if now - self._panels_drawn >= PANEL_SECONDS:
            self._panels_drawn = now
            self.redraw_panels()

    def restarting(self, message: EngineRestarting) -> bool:
        """The reply's engine process had ended and starts again: say so instead of streaming."""
        current = self.streams.current
        if current is None or current.reply_id != message.reply_id:
            return False
        return current.restarting(message.stage, message.done, message.total)

    def show_ghosts(self, on: bool) -> None:
        for view in self.scroll.query(ReplyView):
            view.token_view.show_ghosts = on

    def show_markdown(self, on: bool) -> None:
        for view in self.scroll.query(ReplyView):
            view.set_markdown(on)

    def left_behind(self) -> None:
        """A new chat detached the reply in progress (ChatSession.start_over): what was queued
        but not drawn joins its text."""
        self.view = None
        self._drain()

    def end(self, message: ReplyEnded, markdown: bool) -> EndedReply | None:
        """Draw a reply's end; None when it was not the current one (a detached one's row is
        finished here)."""
        if message.reply_id in self.streams.detached:
            self._drain()
            return self.streams.end_detached(message.reply_id, message.done, message.error)
        current, view = self.streams.current, self.view
        if current is None or view is None or message.reply_id != current.reply_id:
            return None
        following = self.scroll.following
        self.flush()
        restated = message.restated
        ending = self.streams.end(message.reply_id, message.done, message.error, message.ended, self.continue_key,
                                  self.overflow_hint, [(a.step, a.arrived) for a in restated] if restated is not None else None)
        assert ending is not None, "the current reply's end"
        self.view = None
        if restated is not None:  # the engine's final record recoloured the reply
            view.token_view.clear()
            view.token_view.append_chunks(chunks_of(restated))
        view.finish(ending.ended.finish_reason, ending.summary, ending.problem)
        if markdown:
            view.set_markdown(True)
        if following:
            self.scroll.call_after_refresh(self.scroll.scroll_end, animate=False)
        self.screen.refresh_bindings()
        return ending.ended
