"""What a streaming reply costs the screen, and what a long prompt shows before it: the
prefill's progress in the bar (Esc stops it), frames at a bounded rate whatever the steps'
rate, every token drawn in its colour all the same."""

from __future__ import annotations

import threading
import time

from spectui.core.engine import Engine
from spectui.core.events import Done, Prefill, Source, Step
from spectui.core.pieces import display_chunks, step_pieces
from spectui.settings.config import ChatConfig
from spectui.tui.chat.replies import PANEL_SECONDS, STREAM_FRAME_SECONDS
from spectui.tui.widgets.conversation import ReplyView
from spectui.tui.widgets.token_view import TokenView

from fake_engines import LIVE, PlanEngine, factory_for, fake_info
from tui_helpers import ready, reply_done, send, wait_for


class PrefillingEngine(Engine):
    """Says its prefill of `total` tokens in chunks on a virtual clock (2 s a chunk), then
    waits at `hold` tokens until released or cancelled, as a long prompt on a CPU does."""

    def __init__(self, now: list[float], total: int = 2048, chunk: int = 512, hold: int = 512) -> None:
        self.info = fake_info("fake", "draft", LIVE)
        self.now, self.total, self.chunk, self.hold = now, total, chunk, hold
        self.released = threading.Event()
        self.prefilled = 0  # tokens it got through

    def stream(self, messages, params, control):
        for done in range(0, self.total, self.chunk):
            self.prefilled = done
            yield Prefill(done, self.total)
            while done == self.hold and not self.released.is_set() and not control.cancelled:
                self.released.wait(0.01)
            if control.cancelled:
                yield Done("cancelled")
                return
            self.now[0] += 2.0
        self.prefilled = self.total
        yield Step((1,), (Source.TARGET,), " w1", pieces=(" w1",))
        yield Done("stop", seconds=8.0)


async def test_the_bar_shows_a_long_prompts_prefill_and_esc_stops_it(make_app):
    now = [100.0]
    engine = PrefillingEngine(now)
    app = make_app(factory_for(engine), ChatConfig(k=4), clock=lambda: now[0])
    async with app.run_test(size=(140, 30)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "a long paste")
        await wait_for(pilot, lambda: "prefill 512/2048" in chat.param_bar.plain)
        # two reports 2 s apart: 256 tokens a second, 1536 tokens to go
        assert "● prefill 512/2048 · 256 tok/s · 6 s left" in chat.param_bar.plain
        await pilot.press("escape")
        await reply_done(pilot)
        assert chat.session.last_reply.done.finish_reason == "cancelled"
        assert engine.prefilled == 512  # it stopped where it was, not at the end of the prompt
        assert "prefill" not in chat.param_bar.plain


async def test_the_first_step_after_a_prefill_turns_the_bar_back_to_streaming(make_app):
    now = [100.0]
    engine = PrefillingEngine(now, hold=1536)
    app = make_app(factory_for(engine), ChatConfig(k=4), clock=lambda: now[0])
    async with app.run_test(size=(140, 30)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        seen = []

        def recorded() -> None:
            chat.refresh_bar()
            seen.append(chat.param_bar.plain)

        chat.replies.redraw_bar = recorded
        await send(pilot, "a long paste")
        await wait_for(pilot, lambda: "● prefill 1536/2048" in chat.param_bar.plain)
        engine.released.set()
        await reply_done(pilot)
        assert chat.session.last_reply.done.finish_reason == "stop"
        assert chat.conversation.query(ReplyView).last().token_view.text == " w1"
        after = seen[next(i for i, bar in enumerate(seen) if "1536/2048" in bar) + 1:]
        assert after and "● streaming" in after[0]  # the first step says the prompt is in


class PacedEngine(PlanEngine):
    """PlanEngine's steps, one every `gap` seconds: a reply faster than frames are drawn."""

    def __init__(self, plan, gap: float) -> None:
        super().__init__(plan)
        self.gap = gap

    def stream(self, messages, params, control):
        for event in super().stream(messages, params, control):
            time.sleep(self.gap)
            yield event


async def test_a_fast_stream_is_drawn_at_a_bounded_rate_every_token_in_its_colour(make_app, monkeypatch):
    engine = PacedEngine([None, 3, 0, 4, 1, 2] * 50, gap=0.004)  # 300 steps, faster than 15 frames a second
    updates: list[int] = []
    original = TokenView.append_chunks

    def counted(view, chunks):
        chunks = list(chunks)
        if view.streaming:
            updates.append(len(chunks))
        original(view, chunks)

    monkeypatch.setattr(TokenView, "append_chunks", counted)
    now = [100.0]  # the host's clock stands still: the whole reply is one instant to the panels
    app = make_app(factory_for(engine), ChatConfig(k=4), store=False, clock=lambda: now[0])
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        panels = []
        chat.replies.redraw_panels = lambda: panels.append(1)
        started = time.monotonic()
        await send(pilot, "go")
        await reply_done(pilot)
        elapsed = time.monotonic() - started
        view = chat.conversation.query(ReplyView).last().token_view
        # Every token, in order, in its source's colour: as drawn step by step.
        expected = [chunk for step in engine.steps for chunk in display_chunks(step, *step_pieces(step))]
        assert view.chunks == expected and len(engine.steps) == 300
        assert {kind for _, kind in view.chunks} >= {"draft", "bonus", "recovered", "target"}
    # At most one token-view update per frame (15 a second), many steps in each.
    assert len(updates) <= elapsed / STREAM_FRAME_SECONDS + 2, (len(updates), elapsed)
    assert len(updates) < len(engine.steps) / 2
    # The panels at most once per PANEL_SECONDS of the host's clock: once in an instant.
    assert len(panels) == 1 and PANEL_SECONDS >= 0.2
