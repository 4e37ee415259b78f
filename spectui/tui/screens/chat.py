"""The chat screen: conversation and prompt on the left, live panels on the right.

Steps arrive from the generation thread in `inbox`, which asks for a frame when they come
(at most 30 a second) and the frame draws whatever is there in one go, so a fast stream
costs one redraw per frame, keys stay responsive, and an idle screen does not wake.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Input

from spectui.core.events import K_MAX, TEMPERATURE_MAX, TEMPERATURE_STEP, Control, GenerationParams, Message
from spectui.settings.options import parse_k
from spectui.store import APPROXIMATE_NOTE, Conversation
from spectui.tui.frames import FrameInbox
from spectui.tui.heap import collect_between_replies
from spectui.tui.keys import chat_bindings, key_display
from spectui.tui.messages import EngineRestarting, ReplyEnded, StepArrived, StoreFailed
from spectui.tui.replay import problem_text, reply_summary, stored_reply
from spectui.tui.session import PanelData, ReplyTracker, SessionTracker, panel_data
from spectui.core.pieces import display_chunks
from spectui.tui.widgets.conversation import ReplyView, SystemNote, UserMessage
from spectui.tui.widgets.param_bar import BarState, ParamBar
from spectui.tui.widgets.stats_panel import StatsPanel
from spectui.tui.worker import start_thread, stream_reply

NARROW_WIDTH = 70  # columns below which the stats panel is hidden (the conversation keeps >= 32)
PANEL_EVERY_FRAMES = 4  # numbers change faster than anyone reads them: ~8 updates a second


class ConversationScroll(VerticalScroll):
    """The conversation; it follows a streaming reply until the user scrolls up.

    Following is a state, not read back from the geometry: a scroll to the text's end can
    be cut short by a layout that has not grown the reply yet, which looks just like a
    user who scrolled up a little.
    """

    following = True

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value < old_value:  # while a reply streams, only the user scrolls up
            self.following = False
        elif new_value >= self.max_scroll_y:
            self.following = True


@dataclass
class ActiveReply:
    reply_id: int
    view: ReplyView
    tracker: ReplyTracker
    control: Control
    message_id: int | None
    status: str = "streaming"
    detail: str = ""  # what the bar says after the status


@dataclass
class DetachedReply:
    """A reply still running in its thread after a new chat: only its history row is kept."""

    message_id: int | None
    text: list[str] = field(default_factory=list)


class ChatScreen(Screen):
    BINDINGS = chat_bindings()
    DEFAULT_CSS = """
    ChatScreen { layout: vertical; }
    ChatScreen #body { height: 1fr; }
    ChatScreen #main { width: 1fr; height: 1fr; }
    ChatScreen #conversation { height: 1fr; padding: 0 1 1 1; scrollbar-size-vertical: 1; }
    ChatScreen #prompt { margin: 0 1; border: round $primary 40%; background: $surface; }
    ChatScreen #prompt:focus { border: round $primary; }
    """

    def __init__(self, conversation: Conversation | None = None) -> None:
        super().__init__()
        config = self.app.config
        self.k, self.auto_k = parse_k(config.k)
        self.temperature = config.temperature
        self.show_ghosts = config.ghosts
        self.markdown = False
        self.messages: list[Message] = self._opening_messages()
        # The user's text of the last reply when it ended over the model's context.
        self.overflowed: str | None = None
        # Once the user chose it, every later reply of this chat drops its oldest turns to fit.
        self.truncating = False
        self.conversation_id: int | None = None
        self.session = SessionTracker()
        self.current: ActiveReply | None = None
        self.last_reply: ReplyTracker | None = None
        self.detached: dict[int, DetachedReply] = {}
        self.inbox: FrameInbox[StepArrived] = FrameInbox(self, self.flush_steps)
        self._next_reply_id = 0
        self._frames = 0
        self._initial_conversation = conversation
        self._restart_note: SystemNote | None = None
        self._k_offer: int | None = None  # a recommended k waiting for the second key press
        self.param_bar = ParamBar(BarState(), id="params")
        self.stats_panel = StatsPanel(PanelData(self.k, self.temperature), id="stats")

    def compose(self) -> ComposeResult:
        yield self.param_bar
        with Horizontal(id="body"):
            with Vertical(id="main"):
                yield ConversationScroll(id="conversation")
                yield Input(placeholder="Message the model · Enter sends · F1 help", id="prompt")
            yield self.stats_panel
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.set_interval(1.0, self.tick, name="tick")
        if self._initial_conversation is not None:
            self.show_conversation(self._initial_conversation)
        self.engine_changed()
        prompt = self.query_one("#prompt", Input)
        prompt.cursor_blink = self.app.cursor_blink
        prompt.focus()

    # state shown in the bar and the panel

    def _opening_messages(self) -> list[Message]:
        system = self.app.config.system
        return [{"role": "system", "content": system}] if system else []

    @property
    def conversation(self) -> ConversationScroll:
        return self.query_one("#conversation", ConversationScroll)

    def engine_changed(self) -> None:
        """The app's engine state moved (loading, ready, failed): redraw the bar."""
        self.refresh_bar()
        app = self.app
        if app.engine_status == "failed" and not app.restart_failed and not self.query(".-load-error"):
            note = SystemNote(f"Could not load the engine: {app.engine_error}", error=True)
            note.add_class("-load-error")
            self.conversation.mount(note)

    # A k restart is one note in the conversation: "restarting…", then how it went. The bar
    # says it too, but a narrow terminal cuts the bar's end.

    def engine_restarting(self, text: str) -> None:
        self._restart_note = SystemNote(text)
        self.conversation.mount(self._restart_note)
        self._scroll_to_end_if_following()

    def engine_restarted(self, text: str) -> None:
        self._end_restart_note(text, error=False)

    def engine_restart_failed(self, text: str) -> None:
        self._end_restart_note(text, error=True)

    def _end_restart_note(self, text: str, error: bool) -> None:
        note, self._restart_note = self._restart_note, None
        if note is None or not note.is_attached:  # a new chat cleared it meanwhile
            note = SystemNote(text, error=error)
            self.conversation.mount(note)
        else:
            note.update(Content(text))
            note.set_class(error, "-error")
        self._scroll_to_end_if_following()

    def _scroll_to_end_if_following(self) -> None:
        if self.conversation.following:
            self.call_after_refresh(self.conversation.scroll_end, animate=False)

    def bar_status(self) -> tuple[str, str]:
        """The bar's state word and the detail after it."""
        app = self.app
        restart = self._pending_restart_detail()
        if self.current is not None:
            return self.current.status, self.current.detail or restart
        if app.restarting_k is not None:
            return "restarting", f"{app.engine_label} with k = {app.restarting_k} · {app.loading_text}"
        if app.engine_status == "loading":
            return "loading", app.loading_text
        if app.engine_status == "failed":
            if app.restart_failed:
                return "failed", "a k key tries the restart again; Ctrl+Q quits"
            return "failed", "see the message; F1 help, Ctrl+Q quits"
        return "ready", restart

    def _pending_restart_detail(self) -> str:
        app = self.app
        if app.wanted_k is None or app.restarting_k is not None:
            return ""
        when = "after this reply" if self.current is not None else "in a moment"
        return f"{app.engine_label} restarts with k = {app.wanted_k} {when}"

    def refresh_bar(self) -> None:
        app = self.app
        info = app.engine.info if app.engine is not None else app.last_info
        config = app.config
        status, detail = self.bar_status()
        self.param_bar.show(
            BarState(
                target=info.target if info else (config.model or "default model"),
                draft=info.draft if info else config.draft,
                method=info.method if info else config.method,
                engine=info.name if info else config.engine,
                k=self.k,
                auto_k=self.auto_k,
                temperature=self.temperature,
                ghosts=self.show_ghosts,
                markdown=self.markdown,
                status=status,
                detail=detail,
                inferred=info is not None and not info.exact,
            )
        )

    def on_resize(self, event) -> None:
        # The panel keeps its 38 columns: below this width it would leave the conversation
        # a sliver (18 columns at 60), so it steps aside until the terminal is wider.
        self.stats_panel.display = event.size.width >= NARROW_WIDTH

    def tick(self) -> None:
        """Once a second: the panels' clocks and memory, and a loading engine's seconds."""
        self.refresh_panels()
        if self.app.engine_status == "loading":
            self.refresh_bar()

    def refresh_panels(self) -> None:
        reply = self.current.tracker if self.current is not None else self.last_reply
        status = self.current.status if self.current is not None else "idle"
        self.stats_panel.show(
            panel_data(reply, self.session, self.k, self.temperature, self.app.clock(), self.app.read_memory(), status)
        )

    # sending

    @on(Input.Submitted, "#prompt")
    def submit(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        app = self.app
        if app.engine is None:
            if app.engine_status == "failed":
                self.notify(f"No engine: {app.engine_error}", severity="error")
            elif app.restarting_k is not None:
                self.notify(f"{app.engine_label} is restarting with k = {app.restarting_k}; your message stays in the box.")
            else:
                self.notify("The engine is still loading; your message stays in the box.")
            return
        if self.current is not None:
            self.notify("A reply is streaming; Esc cancels it.")
            return
        event.input.clear()
        self.send(text)

    def send(self, text: str) -> None:
        app = self.app
        config = app.config
        self.conversation.mount(UserMessage(text))
        self.messages.append({"role": "user", "content": text})
        message_id = self._record_user_message(text)
        reply_id = self._next_reply_id
        self._next_reply_id += 1
        view = ReplyView(reply_id, show_ghosts=self.show_ghosts)
        view.token_view.streaming = True
        self.conversation.mount(view)
        self.conversation.scroll_end(animate=False)
        self.conversation.following = True
        control = Control(k=self.k, temperature=self.temperature, auto=self.auto_k)
        self.current = ActiveReply(reply_id, view, ReplyTracker(app.clock()), control, message_id)
        self.overflowed = None
        params = GenerationParams(max_tokens=config.max_tokens, top_p=config.top_p, seed=config.seed, truncate=self.truncating)
        engine, messages = app.engine, list(self.messages)
        start_thread(
            lambda: stream_reply(
                engine, messages, params, control, reply_id, self.post_message, self.inbox.put,
                clock=app.clock, store=app.store, message_id=message_id,
            ),
            name=f"spectui-reply-{reply_id}",
        )
        self.refresh_bar()
        self.refresh_panels()

    def _record_user_message(self, text: str) -> int | None:
        """Save the user's message and open the reply's row; returns that row's id."""
        store = self.app.store
        if store is None:
            return None
        try:
            if self.conversation_id is None:
                self.conversation_id = store.new_conversation(self.app.settings_record())
                for message in self.messages[:-1]:  # the system message, if any
                    store.add_message(self.conversation_id, message["role"], message["content"])
            store.add_message(self.conversation_id, "user", text)
            settings = {"k": self.k, "temperature": self.temperature} | ({"auto_k": True} if self.auto_k else {})
            return store.add_message(self.conversation_id, "assistant", "", settings=settings)
        except Exception as error:
            self.notify(f"History not saved: {error}", severity="warning")
            return None

    # receiving

    def _drain_inbox(self) -> list[StepArrived]:
        """Steps of the current reply, in order; a detached reply's only keep their text."""
        batch = []
        current_id = self.current.reply_id if self.current is not None else None
        for arrived in self.inbox.take_all():
            if arrived.reply_id == current_id:
                batch.append(arrived)
            elif arrived.reply_id in self.detached:
                self.detached[arrived.reply_id].text.append(arrived.step.text)
        return batch

    @property
    def pending(self) -> bool:
        return bool(self.inbox)

    def flush_steps(self) -> None:
        if not self.inbox:
            return
        batch = self._drain_inbox()
        current = self.current
        if current is None or not batch:
            return
        if current.status == "restarting":  # the engine is back: its steps are coming
            current.status, current.detail = "streaming", ""
            self.refresh_bar()
        chunks: list[tuple[str, str]] = []
        for arrived in batch:
            current.tracker.add(arrived.step, arrived.arrived)
            chunks.extend(display_chunks(arrived.step, arrived.pieces, arrived.ghost))
        token_view = current.view.token_view
        following = self.conversation.following
        token_view.append_chunks(chunks)
        if following:
            self.call_after_refresh(self._follow, token_view)
        self._frames += 1
        if self._frames % PANEL_EVERY_FRAMES == 0:
            self.refresh_panels()

    def on_engine_restarting(self, message: EngineRestarting) -> None:
        current = self.current
        if current is None or current.reply_id != message.reply_id or current.status == "cancelling":
            return
        percent = f" {100 * message.done / message.total:.0f}%" if message.total else ""
        current.status = "restarting"
        current.detail = f"the engine process had ended · {message.stage}{percent}"
        self.refresh_bar()

    def _text_end_scroll_y(self, token_view) -> int:
        """The scroll offset that puts the reply's last line of text at the bottom."""
        conversation = self.conversation
        top = token_view.region.y - conversation.content_region.y + conversation.scroll_y
        return max(0, top + token_view.num_text_lines - conversation.content_region.height)

    def _follow(self, token_view) -> None:
        target = self._text_end_scroll_y(token_view)
        if target > self.conversation.scroll_y:
            self.conversation.scroll_to(y=target, animate=False)

    def on_reply_ended(self, message: ReplyEnded) -> None:
        if message.reply_id in self.detached:
            self._drain_inbox()
            self._finish_detached(message)
            return
        if self.current is None or message.reply_id != self.current.reply_id:
            return
        following = self.conversation.following
        self.flush_steps()
        current, self.current = self.current, None
        done = message.done
        finish_reason = done.finish_reason if done is not None else "error"
        error = (done.error if done is not None else None) or message.error
        if message.restated is not None:
            self._restate(current, message.restated)
        tracker = current.tracker
        tracker.finish(done, message.ended)
        self.session.add_reply(tracker)
        self.last_reply = tracker
        content = current.view.token_view.text
        self.messages.append({"role": "assistant", "content": content})
        stats = tracker.stats()
        approximate = done is not None and done.approximate
        recorded = stats.as_dict() | ({"colours_approximate": True} if approximate else {})
        self._record_reply(current.message_id, content, finish_reason, error, recorded)
        summary = reply_summary(stats) + (" · stopped at max_tokens" if finish_reason == "length" else "")
        problem = problem_text(finish_reason, error)
        if done is not None and done.dropped_messages:
            summary += f" · the {done.dropped_messages} oldest messages left out to fit the context"
        if done is not None and done.context_overflow is not None:
            self.overflowed = self.messages[-2]["content"]
            problem += f": {key_display(self.app.first_key('trim'))} resends it without the oldest turns, {key_display(self.app.first_key('new_chat'))} starts anew"
        if approximate:
            summary += f" · {APPROXIMATE_NOTE}"
        elif message.restated is not None:
            summary += " · colours from the engine's record"
        current.view.finish(finish_reason, summary, problem)
        if self.markdown:
            current.view.set_markdown(True)
        if finish_reason == "error":
            self.notify(f"The engine failed: {error}", severity="error", timeout=8)
        if following:
            self.call_after_refresh(self.conversation.scroll_end, animate=False)
        self.refresh_bar()
        self.refresh_panels()
        self.call_after_refresh(collect_between_replies)
        self.app.restart_if_wanted()

    def _restate(self, current: ActiveReply, restated: list[StepArrived]) -> None:
        """The engine's final record recoloured the reply: draw it and count it again."""
        tracker = ReplyTracker(current.tracker.clock.started)
        chunks: list[tuple[str, str]] = []
        for arrived in restated:
            tracker.add(arrived.step, arrived.arrived)
            chunks.extend(display_chunks(arrived.step, arrived.pieces, arrived.ghost))
        current.tracker = tracker
        token_view = current.view.token_view
        token_view.clear()
        token_view.append_chunks(chunks)

    def _record_reply(self, message_id, content, finish_reason, error, stats) -> None:
        if self.app.store is None or message_id is None:
            return
        try:
            self.app.store.finish_message(message_id, content, finish_reason, error, stats)
        except Exception as failure:
            self.notify(f"History not saved: {failure}", severity="warning")

    def _finish_detached(self, message: ReplyEnded) -> None:
        detached = self.detached.pop(message.reply_id)
        done = message.done
        reason = done.finish_reason if done is not None else "error"
        self._record_reply(detached.message_id, "".join(detached.text), reason, message.error, {})
        self.app.restart_if_wanted()

    def on_screen_resume(self) -> None:
        self.app.restart_if_wanted()  # a k restart may have waited for the compare view

    def on_store_failed(self, message: StoreFailed) -> None:
        self.notify(f"History stopped saving steps: {message.error}", severity="warning")

    # actions

    def action_k(self, delta: int) -> None:
        new_k = min(max(self.k + delta, 0), K_MAX)
        if new_k == self.k:
            self.notify(f"k stays within 0..{K_MAX}")
            return
        engine = self.app.engine
        if engine is not None and engine.info.name == "server" and not engine.info.live_k:
            self.notify("The server fixed k when it started (num_speculative_tokens); restart it to change k.")
            return
        self.k = new_k
        if self.auto_k:  # a k chosen by hand ends adaptive k
            self.auto_k = False
            if self.current is not None and engine is not None and engine.info.live_k:
                self.current.control.auto = False
        if self.app.k_restarts_engine:
            self.app.want_engine_k(new_k)
            self.refresh_panels()
        else:
            self._apply_live("k", new_k)

    def action_toggle_auto_k(self) -> None:
        engine = self.app.engine
        if engine is not None and not engine.info.live_k:
            self._recommend_k(engine)
            return
        self.auto_k = not self.auto_k
        self._apply_live("auto", self.auto_k)
        self.notify("Adaptive k: on, from the next step" if self.auto_k else f"Adaptive k: off, k = {self.k}")

    def _recommend_k(self, engine) -> None:
        """An engine with k fixed at start cannot follow adaptive k step by step: recommend
        the k the same model picks from what was measured, and restart with it on a second press."""
        theory = self.stats_panel.data.theory
        if theory is None:
            self.notify(f"The {engine.info.name} engine fixes k when it starts; after a reply with drafts, "
                        f"this key recommends a k from the measured acceptance.")
            return
        offered, self._k_offer = self._k_offer, None
        if theory.best_k == self.k:
            self.notify(f"k = {self.k} is already the best k for α {theory.alpha:.2f} (×{theory.best_speedup:.2f} predicted).")
        elif offered == theory.best_k and self.app.k_restarts_engine:
            self.k = theory.best_k
            self.app.want_engine_k(theory.best_k)
            self.refresh_panels()
        else:
            self._k_offer = theory.best_k
            restart = "press the key again to restart it with that k" if self.app.k_restarts_engine else \
                "restart the server with that num_speculative_tokens"
            self.notify(f"Recommended k = {theory.best_k} for α {theory.alpha:.2f}: ×{theory.best_speedup:.2f} "
                        f"predicted against ×{theory.speedup:.2f} at k = {self.k}; {restart}.")

    def action_temperature(self, direction: int) -> None:
        new_t = round(min(max(self.temperature + direction * TEMPERATURE_STEP, 0.0), TEMPERATURE_MAX), 2)
        if new_t == self.temperature:
            return
        self.temperature = new_t
        self._apply_live("temperature", new_t)

    def _apply_live(self, name: str, value) -> None:
        current = self.current
        engine = self.app.engine
        if current is not None and engine is not None:
            if engine.info.live_k:
                setattr(current.control, name, value)  # the engine reads it before its next step
            else:
                shown = f"{value:.2f}" if name == "temperature" else value
                self.notify(
                    f"The {engine.info.name} engine cannot change {name} during a reply: "
                    f"{name} = {shown} applies from the next reply."
                )
        self.refresh_bar()
        self.refresh_panels()

    def action_cancel(self) -> None:
        if self.current is None:
            return
        self.current.control.cancel()
        self.current.status = "cancelling"
        self.refresh_bar()

    def action_toggle_ghosts(self) -> None:
        self.show_ghosts = not self.show_ghosts
        for view in self.query(ReplyView):
            view.token_view.show_ghosts = self.show_ghosts
        engine = self.app.engine
        if self.show_ghosts and engine is not None and engine.info.method == "none":
            self.notify("This engine drafts nothing, so there are no rejected drafts to show.")
        self.refresh_bar()

    def action_toggle_markdown(self) -> None:
        self.markdown = not self.markdown
        for view in self.query(ReplyView):
            view.set_markdown(self.markdown)
        if self.markdown and self.current is not None:
            self.notify("The streaming reply stays as tokens until it ends.")
        self.refresh_bar()

    def action_resend_trimmed(self) -> None:
        if self.overflowed is None or self.current is not None:
            self.notify("Nothing to resend: this key answers a chat that grew longer than the model's context.")
            return
        # The failed attempt (the message and its empty reply) leaves the prompt; the resend brings the message back.
        del self.messages[-2:]
        self.truncating = True
        self.send(self.overflowed)

    def action_new_chat(self) -> None:
        self._detach_current()
        self.conversation.remove_children()
        self.messages = self._opening_messages()
        self.overflowed = None
        self.truncating = False
        self.conversation_id = None
        self.session = SessionTracker()
        self.last_reply = None
        self.refresh_bar()
        self.refresh_panels()
        self.query_one("#prompt", Input).focus()

    def _detach_current(self) -> None:
        if self.current is None:
            return
        current, self.current = self.current, None
        current.control.cancel()
        self.detached[current.reply_id] = DetachedReply(current.message_id, [current.view.token_view.text])
        self._drain_inbox()  # what was queued but not drawn joins the detached text

    def action_engine_info(self) -> None:
        from spectui.tui.screens.info import InfoScreen

        self.app.push_screen(InfoScreen(self.session.engine_stats))

    def action_compare(self) -> None:
        last_user = max((i for i, m in enumerate(self.messages) if m["role"] == "user"), default=None)
        if last_user is None:
            self.notify("Send a prompt first: the compare view runs the last one.")
        else:
            self.open_compare(self.messages[: last_user + 1])

    def open_compare(self, messages: list[Message]) -> None:
        from spectui.tui.screens.compare import CompareScreen

        engine = self.app.engine
        if engine is None:
            self.notify("The engine is not ready yet.")
        elif self.current is not None:
            self.notify("A reply is streaming; the compare view opens once it ends (Esc cancels it).")
        else:
            config = self.app.config
            params = GenerationParams(max_tokens=config.max_tokens, top_p=config.top_p, seed=config.seed)
            self.app.push_screen(CompareScreen(
                engine, list(messages), params, self.k, self.temperature, baseline_factory=self.app.baseline_factory
            ))

    # history

    def show_conversation(self, conversation: Conversation) -> None:
        """Replace what is shown with a stored conversation; new messages continue it."""
        self._detach_current()
        self.conversation.remove_children()
        self.session = SessionTracker()
        self.messages = []
        self.conversation_id = conversation.id
        widgets = []
        for stored in conversation.messages:
            if stored.role == "system":
                self.messages.append({"role": "system", "content": stored.content})
            elif stored.role == "user":
                widgets.append(UserMessage(stored.content))
                self.messages.append({"role": "user", "content": stored.content})
            elif stored.role == "assistant":
                view, tracker = stored_reply(stored, self._next_reply_id, self.show_ghosts)
                self._next_reply_id += 1
                self.session.add_reply(tracker)
                self.last_reply = tracker
                widgets.append(view)
                self.messages.append({"role": "assistant", "content": stored.content})
        widgets.append(SystemNote(f"Resumed conversation {conversation.id}: {conversation.title}"))
        self.conversation.mount_all(widgets)
        self.call_after_refresh(self.conversation.scroll_end, animate=False)
        self.refresh_panels()
