"""The replies streaming into the conversation.

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
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

from textual.screen import Screen

from spectui.core.engine import Engine
from spectui.core.events import Control
from spectui.core.pieces import display_chunks
from spectui.core.stats import changed_mid_reply, settings_ran
from spectui.store import APPROXIMATE_NOTE, HistoryQueue, RowId
from spectui.tui.chat.bar import prefill_detail, step_ran
from spectui.chat_session.budget import length_note
from spectui.chat_session.reply import EndedReply, ReplyRequest
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.frames import FrameInbox
from spectui.tui.keys import key_display
from spectui.tui.messages import EngineRestarting, PrefillArrived, ReplyEnded, StepArrived
from spectui.tui.replay import problem_text, reply_summary
from spectui.chat_session.stats import ReplyTracker
from spectui.tui.widgets.conversation import ReplyView
from spectui.tui.worker import stream_reply

if TYPE_CHECKING:
    from spectui.host.host import EngineHost

STREAM_FRAME_SECONDS = 1 / 15
PANEL_SECONDS = 0.25  # the panels while a reply streams: numbers change faster than anyone reads them


@dataclass
class ActiveReply:
    reply_id: int
    view: ReplyView
    tracker: ReplyTracker
    control: Control
    message_id: int | RowId | None  # a RowId while the history's queue holds its write
    settings: dict  # what it is made with (k, T, seed, method): its history row's, and regenerate's
    status: str = "streaming"
    detail: str = ""  # what the bar says after the status
    prefill_from: tuple[float, int] | None = None  # (when, tokens done) of the first prefill progress
    cap: int | None = None  # the budget it stops at short of the context's end (spectui.chat_session.budget)
    context_known: bool = True  # the engine said its context: a reply that stopped short of the cap filled it
    earlier: tuple[int, int] | None = None  # a continued reply's (tokens, steps) before this part


@dataclass
class DetachedReply:
    """A reply still running in its thread after a new chat: only its history row is kept."""

    message_id: int | RowId | None  # a RowId while the history's queue holds its write
    text: list[str] = field(default_factory=list)


def chunks_of(arrivals: Sequence[StepArrived]) -> list[tuple[str, str]]:
    return [chunk for arrived in arrivals for chunk in display_chunks(arrived.step, arrived.pieces, arrived.ghost)]


class Replies:
    """The streaming reply (`current`) and the abandoned ones (`detached`) of one screen.

    screen: posts the replies' messages and draws their frames; redraw_bar: the reply's
    status changed; redraw_panels: the panels' turn. keys: the config's, to name those that
    answer a chat which outgrew the model's context."""

    def __init__(self, screen: Screen, scroll: ConversationScroll, host: EngineHost, store: HistoryQueue | None,
                 redraw_bar: Callable[[], None], redraw_panels: Callable[[], None], keys: dict[str, str]) -> None:
        self.screen, self.scroll, self.host, self.store = screen, scroll, host, store
        self.redraw_bar, self.redraw_panels = redraw_bar, redraw_panels
        trim, new_chat = (key_display(keys[name].split(",")[0].strip()) for name in ("trim", "new_chat"))
        self.overflow_hint = f"{trim} resends it without the oldest turns, {new_chat} starts anew"
        self.continue_key = key_display(keys.get("continue_reply", "ctrl+f9").split(",")[0].strip())
        self.current: ActiveReply | None = None
        self.detached: dict[int, DetachedReply] = {}
        self.inbox: FrameInbox[StepArrived | PrefillArrived] = FrameInbox(screen, self.flush, STREAM_FRAME_SECONDS)
        self.next_id = 0
        self._panels_drawn = float("-inf")  # on the host's clock

    @property
    def pending(self) -> bool:
        return bool(self.inbox)

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def start(self, request: ReplyRequest, ghosts: bool, view: ReplyView | None = None) -> None:
        """The reply the session asked for (ChatSession.reply_request, .continuation). A reply
        continued in place streams into its `view`, after the (tokens, steps) its history row holds."""
        messages, params, message_id, earlier = request.messages, request.params, request.message_id, request.earlier
        reply_id = self.new_id()
        if view is None:
            view = ReplyView(reply_id, show_ghosts=ghosts)
            self.scroll.mount(view)
        else:
            view.reopen()
        view.token_view.streaming = True
        first_index = earlier[1] if earlier is not None else 0
        self.scroll.scroll_end(animate=False)
        self.scroll.following = True
        host, post, put, store = self.host, self.screen.post_message, self.inbox.put, self.store

        def run(engine: Engine, control: Control) -> None:
            stream_reply(engine, messages, params, control, reply_id, post, put,
                         clock=host.clock, store=store, message_id=message_id, first_index=first_index)

        tracker = ReplyTracker(host.clock())  # the reply's clock starts before its thread
        control = host.start_reply(f"spectui-reply-{reply_id}", run, request.values)
        context_known = host.engine is not None and host.engine.context_length is not None
        self.current = ActiveReply(reply_id, view, tracker, control, message_id, request.settings, cap=request.cap,
                                   context_known=context_known, earlier=earlier)
        self.screen.refresh_bindings()  # the keys that act on the last reply wait for this one

    def _drain(self) -> tuple[list[StepArrived], list[PrefillArrived]]:
        """Steps of the current reply, in order, and its prefill progress; a detached reply's
        steps only keep their text."""
        batch, progress = [], []
        current_id = self.current.reply_id if self.current is not None else None
        for arrived in self.inbox.take_all():
            if isinstance(arrived, PrefillArrived):
                if arrived.reply_id == current_id:
                    progress.append(arrived)
            elif arrived.reply_id == current_id:
                batch.append(arrived)
            elif arrived.reply_id in self.detached:
                self.detached[arrived.reply_id].text.append(arrived.step.text)
        return batch, progress

    def flush(self) -> None:
        if not self.inbox:
            return
        batch, progress = self._drain()
        current = self.current
        if current is None:
            return
        if not batch:
            if progress:
                self._show_prefill(current, progress)
            return
        if current.status in ("restarting", "prefill"):  # the engine is back, the prompt is in: steps come
            current.status, current.detail = "streaming", ""
            self.redraw_bar()
        ran = step_ran(current)
        for arrived in batch:
            current.tracker.add(arrived.step, arrived.arrived)
        if step_ran(current) != ran:  # the bar shows the k and T each step ran with
            self.redraw_bar()
        token_view = current.view.token_view
        following = self.scroll.following
        token_view.append_chunks(chunks_of(batch))
        if following:
            self.scroll.follow_text(token_view)
        now = self.host.clock()
        if now - self._panels_drawn >= PANEL_SECONDS:
            self._panels_drawn = now
            self.redraw_panels()

    def _show_prefill(self, current: ActiveReply, progress: list[PrefillArrived]) -> None:
        """The bar: how far a long prompt's prefill is, its rate and the time left."""
        if current.status == "cancelling":
            return
        if current.prefill_from is None:
            current.prefill_from = (progress[0].arrived, progress[0].done)
        last = progress[-1]
        current.status = "prefill"
        current.detail = prefill_detail(current.prefill_from, last.done, last.total, last.arrived)
        self.redraw_bar()

    def restarting(self, message: EngineRestarting) -> bool:
        """The reply's engine process had ended and starts again: say so instead of streaming."""
        current = self.current
        if current is None or current.reply_id != message.reply_id or current.status == "cancelling":
            return False
        percent = f" {100 * message.done / message.total:.0f}%" if message.total else ""
        current.status = "restarting"
        current.detail = f"the engine process had ended · {message.stage}{percent}"
        return True

    def show_ghosts(self, on: bool) -> None:
        for view in self.scroll.query(ReplyView):
            view.token_view.show_ghosts = on

    def show_markdown(self, on: bool) -> None:
        for view in self.scroll.query(ReplyView):
            view.set_markdown(on)

    def cancel(self) -> bool:
        if self.current is None:
            return False
        self.current.control.cancel()
        self.current.status = "cancelling"
        return True

    def detach(self) -> None:
        if self.current is None:
            return
        current, self.current = self.current, None
        current.control.cancel()
        self.detached[current.reply_id] = DetachedReply(current.message_id, [current.view.token_view.text])
        self._drain()  # what was queued but not drawn joins the detached text

    def end(self, message: ReplyEnded, markdown: bool) -> EndedReply | None:
        """Draw a reply's end; None when it was not the current one (a detached one's row is
        finished here)."""
        if message.reply_id in self.detached:
            self._drain()
            detached = self.detached.pop(message.reply_id)
            reason = message.done.finish_reason if message.done is not None else "error"
            return EndedReply(detached.message_id, "".join(detached.text), reason, message.error, {})
        if self.current is None or message.reply_id != self.current.reply_id:
            return None
        following = self.scroll.following
        self.flush()
        current, self.current = self.current, None
        done = message.done
        finish_reason = done.finish_reason if done is not None else "error"
        error = (done.error if done is not None else None) or message.error
        token_view = current.view.token_view
        if message.restated is not None:  # the engine's final record recoloured the reply
            current.tracker = ReplyTracker(current.tracker.clock.started)
            for arrived in message.restated:
                current.tracker.add(arrived.step, arrived.arrived)
            token_view.clear()
            token_view.append_chunks(chunks_of(message.restated))
        tracker = current.tracker
        tracker.finish(done, message.ended)
        stats = tracker.stats()
        approximate = done is not None and done.approximate
        summary = reply_summary(stats, tracker.steps)
        if finish_reason == "length":
            summary += " · " + length_note(current.cap, stats.num_tokens, self.continue_key, current.context_known)
        problem = problem_text(finish_reason, error)
        if done is not None and done.dropped_messages:
            summary += f" · the {done.dropped_messages} oldest messages left out to fit the context"
        if done is not None and done.context_overflow is not None:
            problem += f": {self.overflow_hint}"
        ran = settings_ran(tracker.steps)  # what ran, not what the reply started with: keys act mid-reply
        recorded = stats.as_dict() | ({"colours_approximate": True} if approximate else {}) | ({"ran": ran} if ran else {})
        if changed_mid_reply(ran):
            summary += f" · {ran}"
        if current.earlier is not None:
            tokens, steps = current.earlier
            recorded |= {"reply_tokens": tokens + stats.num_tokens, "reply_steps": steps + stats.num_steps}
            if any(kind == "edited" for _, kind in token_view.chunks):  # the model's tokens are not the whole reply
                summary = f"continued from your edit: {summary}"
            else:
                summary = f"continued: {summary} · the whole reply {tokens + stats.num_tokens:,} tokens"
        if approximate:
            summary += f" · {APPROXIMATE_NOTE}"
        elif message.restated is not None:
            summary += " · colours from the engine's record"
        current.view.finish(finish_reason, summary, problem)
        if markdown:
            current.view.set_markdown(True)
        if following:
            self.scroll.call_after_refresh(self.scroll.scroll_end, animate=False)
        self.screen.refresh_bindings()
        return EndedReply(current.message_id, token_view.text, finish_reason, error, recorded, tracker, done,
                          current.settings, continued=current.earlier is not None)
