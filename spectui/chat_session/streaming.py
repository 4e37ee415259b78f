"""The reply in progress, as the session holds it: its id, what it is made with, its steps
as they come (its ReplyTracker), the engine's Control, what the bar says of it, and how it
ended; and the replies a new chat left behind, still running in their threads, of which only
the text is kept, for their history rows. The chat screen's reply view only draws them.
No Textual here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spectui.chat_session.budget import length_note
from spectui.chat_session.reply import EndedReply, ReplyRequest
from spectui.chat_session.reply_words import prefill_detail, problem_text, reply_summary
from spectui.chat_session.stats import ReplyTracker
from spectui.core.engine import Engine
from spectui.core.events import Control, Done, Step
from spectui.core.stats import changed_mid_reply, settings_ran
from spectui.core.words import counted
from spectui.store import APPROXIMATE_NOTE, RowId

if TYPE_CHECKING:
    from spectui.host.host import EngineHost

Arrival = tuple[Step, float]  # a step and when it arrived, on the host's clock
Run = Callable[[int, Engine, Control], None]  # a reply's thread: its id, the engine, its Control


@dataclass(frozen=True)
class Ending:
    """A reply's end: what the chat keeps (ended), and the line under it (summary, problem)."""

    ended: EndedReply
    summary: str
    problem: str | None


@dataclass
class StreamingReply:
    """status/detail: what the bar says of it; cap: the budget it stops at short of the
    context's end; context_known: the engine said its context (a reply that stopped short of
    the cap filled it); before: a continued reply's text so far, earlier its (tokens, steps),
    from_edit: that text holds the user's edit."""

    reply_id: int
    tracker: ReplyTracker
    control: Control
    message_id: int | RowId | None  # a RowId while the history's queue holds its write
    settings: dict  # what it is made with (k, T, seed, method): its history row's, and regenerate's
    cap: int | None = None
    context_known: bool = True
    earlier: tuple[int, int] | None = None
    before: str = ""
    from_edit: bool = False
    status: str = "streaming"
    detail: str = ""
    prefill_from: tuple[float, int] | None = None  # (when, tokens done) of the first prefill progress

    @property
    def text(self) -> str:
        """The reply's text so far, as the model wrote it (a continued one's earlier text first)."""
        return self.before + "".join(step.text for step in self.tracker.steps)

    @property
    def ran(self) -> tuple[int, float] | None:
        """The k and T its last step ran with; None before its second step (the first, the
        prompt's token, drafts nothing whatever k is)."""
        steps = self.tracker.steps
        return (steps[-1].k, steps[-1].temperature) if len(steps) >= 2 else None

    def add(self, arrivals: Sequence[Arrival]) -> bool:
        """Steps arrived, in order; True when what the bar says changed (the prompt is in or
        the engine back, or the k or T the steps ran with)."""
        changed = bool(arrivals) and self.status in ("restarting", "prefill")
        if changed:
            self.status, self.detail = "streaming", ""
        ran = self.ran
        for step, arrived in arrivals:
            self.tracker.add(step, arrived)
        return changed or self.ran != ran

    def prefill(self, first: tuple[float, int], done: int, total: int, now: float) -> bool:
        """A long prompt's prefill progress (first: the earliest report of this batch); False
        once the reply is being cancelled."""
        if self.status == "cancelling":
            return False
        if self.prefill_from is None:
            self.prefill_from = first
        self.status, self.detail = "prefill", prefill_detail(self.prefill_from, done, total, now)
        return True

    def restarting(self, stage: str, done: int, total: int) -> bool:
        """Its engine process had ended and starts again: the bar says so instead of streaming."""
        if self.status == "cancelling":
            return False
        percent = f" {100 * done / total:.0f}%" if total else ""
        self.status, self.detail = "restarting", f"the engine process had ended · {stage}{percent}"
        return True

    def cancel(self) -> None:
        self.control.cancel()
        self.status = "cancelling"

    def restate(self, arrivals: Sequence[Arrival]) -> None:
        """The engine's final record recoloured the reply: its steps, as recorded."""
        self.tracker = ReplyTracker(self.tracker.clock.started)
        for step, arrived in arrivals:
            self.tracker.add(step, arrived)

    def end(self, done: Done | None, error: str | None, ended: float, restated: bool, continue_key: str,
            overflow_hint: str) -> Ending:
        """Its end (done None: the engine failed, `error` says how); restated: its steps came
        again from the engine's record; the keys named in what it says."""
        finish_reason = done.finish_reason if done is not None else "error"
        error = (done.error if done is not None else None) or error
        tracker = self.tracker
        tracker.finish(done, ended)
        stats = tracker.stats()
        approximate = done is not None and done.approximate
        # the engine's own time to its first token (its prefill's), where it said it
        first_token = done.time_to_first_token if done is not None and done.time_to_first_token > 0 else None
        summary = reply_summary(stats, tracker.steps, tracker.decode_rate(), first_token)
        if finish_reason == "length":
            summary += " · " + length_note(self.cap, stats.num_tokens, continue_key, self.context_known)
        problem = problem_text(finish_reason, error)
        if done is not None and done.dropped_messages:
            summary += f" · the {counted(done.dropped_messages, 'oldest message', 'oldest messages')} left out to fit the context"
        if done is not None and done.context_overflow is not None:
            problem = f"{problem}: {overflow_hint}"
        ran = settings_ran(tracker.steps)  # what ran, not what the reply started with: keys act mid-reply
        recorded = stats.as_dict() | ({"colours_approximate": True} if approximate else {}) | ({"ran": ran} if ran else {})
        if first_token:  # a stored reply's line says its speed from the first token on, as this one's
            recorded["time_to_first_token"] = first_token
        if changed_mid_reply(ran):
            summary += f" · {ran}"
        if self.earlier is not None:
            tokens, steps = self.earlier
            recorded |= {"reply_tokens": tokens + stats.num_tokens, "reply_steps": steps + stats.num_steps}
            if self.from_edit:  # the model's tokens are not the whole reply
                recorded["edited"] = True
                summary = f"continued from your edit: {summary}"
            else:
                summary = f"continued: {summary} · the whole reply {counted(tokens + stats.num_tokens, 'token', thousands=True)}"
        if approximate:
            summary += f" · {APPROXIMATE_NOTE}"
        elif restated:
            summary += " · colours from the engine's record"
        return Ending(EndedReply(self.message_id, self.text, finish_reason, error, recorded, tracker, done, self.settings,
                                 continued=self.earlier is not None), summary, problem)


@dataclass
class DetachedReply:
    """A reply still running in its thread after a new chat: only its history row is kept."""

    message_id: int | RowId | None  # a RowId while the history's queue holds its write
    text: list[str] = field(default_factory=list)


class ReplyStreams:
    """The chat's reply in progress (`current`), those a new chat left behind (`detached`),
    and the ids that tell their steps apart. host: runs each reply in a thread of its own."""

    def __init__(self, host: EngineHost) -> None:
        self.host = host
        self.current: StreamingReply | None = None
        self.detached: dict[int, DetachedReply] = {}
        self.next_id = 0

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def start(self, request: ReplyRequest, run: Run) -> StreamingReply:
        """The reply the session asked for (ChatSession.reply_request, .continuation), run in
        the host's reply thread by `run`."""
        host, reply_id = self.host, self.new_id()
        tracker = ReplyTracker(host.clock())  # the reply's clock starts before its thread
        control = host.start_reply(f"spectui-reply-{reply_id}", lambda engine, control: run(reply_id, engine, control),
                                   request.values)
        context_known = host.engine is not None and host.engine.context_length is not None
        self.current = StreamingReply(reply_id, tracker, control, request.message_id, request.settings, request.cap,
                                      context_known, request.earlier, request.before, request.from_edit)
        return self.current

    def cancel(self) -> bool:
        if self.current is None:
            return False
        self.current.cancel()
        return True

    def detach(self) -> None:
        """A new chat: the reply in progress goes on in its thread, for its history row only."""
        current, self.current = self.current, None
        if current is not None:
            current.control.cancel()
            self.detached[current.reply_id] = DetachedReply(current.message_id, [current.text])

    def left_behind(self, reply_id: int, text: str) -> None:
        """A step of a detached reply: only its text is kept."""
        if reply_id in self.detached:
            self.detached[reply_id].text.append(text)

    def end_detached(self, reply_id: int, done: Done | None, error: str | None) -> EndedReply:
        detached = self.detached.pop(reply_id)
        reason = done.finish_reason if done is not None else "error"
        return EndedReply(detached.message_id, "".join(detached.text), reason, error, {})

    def end(self, reply_id: int, done: Done | None, error: str | None, ended: float, continue_key: str,
            overflow_hint: str, restated: Sequence[Arrival] | None = None) -> Ending | None:
        """The current reply's end; None when `reply_id` is not the current one."""
        current = self.current
        if current is None or current.reply_id != reply_id:
            return None
        self.current = None
        if restated is not None:
            current.restate(restated)
        return current.end(done, error, ended, restated is not None, continue_key, overflow_hint)
