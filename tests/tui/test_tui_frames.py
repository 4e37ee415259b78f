"""Frames on demand: an inbox asks for a draw when items come, at most once per frame."""

from __future__ import annotations

import threading

from spectui.settings.config import ChatConfig
from spectui.tui.frames import FrameInbox

from fake_engines import PlanEngine, factory_for
from tui_helpers import ready, reply_done, send, wait_for

FRAME = 0.1


class FakeScreen:
    """Records what FrameInbox asks of the screen's loop, to run it when the test says."""

    def __init__(self) -> None:
        self.soon: list = []
        self.is_attached = True
        self.timers: list[tuple[float, object]] = []

    def call_later(self, callback) -> bool:
        self.soon.append(callback)
        return True

    def set_timer(self, delay, callback, name=None):
        self.timers.append((delay, callback))

    def run_soon(self) -> None:
        callbacks, self.soon = self.soon, []
        for callback in callbacks:
            callback()


def make_inbox(now: list[float]):
    screen, drawn = FakeScreen(), []
    inbox: FrameInbox[int] = FrameInbox(screen, lambda: drawn.append(inbox.take_all()), FRAME, lambda: now[0])
    return screen, inbox, drawn


def test_items_ask_for_one_frame_and_are_drawn_together():
    now = [10.0]
    screen, inbox, drawn = make_inbox(now)
    assert not screen.soon  # nothing put: nothing asked
    inbox.put(1)
    inbox.put(2)
    assert len(screen.soon) == 1 and bool(inbox)
    screen.run_soon()
    assert drawn == [[1, 2]] and not inbox and not screen.timers


def test_a_frame_soon_after_the_last_waits_for_the_rest_of_the_frame():
    now = [10.0]
    screen, inbox, drawn = make_inbox(now)
    inbox.put(1)
    screen.run_soon()
    now[0] += 0.03
    inbox.put(2)
    screen.run_soon()
    assert drawn == [[1]]  # not yet: the last draw was 30 ms ago
    (delay, draw), = screen.timers
    assert abs(delay - 0.07) < 1e-9
    inbox.put(3)  # the frame is already asked for
    assert not screen.soon
    draw()
    assert drawn == [[1], [2, 3]]
    inbox.put(4)  # after that draw, a new item asks again
    assert len(screen.soon) == 1


def test_a_frame_due_after_the_screen_went_away_draws_nothing():
    now = [10.0]
    screen, inbox, drawn = make_inbox(now)
    inbox.put(1)
    screen.is_attached = False  # the app quit between the ask and the frame
    screen.run_soon()
    assert drawn == [] and bool(inbox)


def test_items_put_from_threads_are_all_drawn_once():
    now = [10.0]
    screen, inbox, drawn = make_inbox(now)
    threads = [threading.Thread(target=lambda base=base: [inbox.put(base + i) for i in range(500)]) for base in (0, 1000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    screen.run_soon()
    for _, draw in screen.timers:
        draw()
    items = [item for frame in drawn for item in frame]
    assert sorted(items) == list(range(500)) + list(range(1000, 1500))
    assert len(screen.soon) <= 2  # one per thread at most, not one per item


async def test_an_idle_chat_draws_nothing_and_a_reply_draws_per_step(make_app):
    engine = PlanEngine([None, 4, 2, 3], gated=True)
    frames: list[float] = []

    app = make_app(factory_for(engine), ChatConfig(k=4))
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        original = chat.replies.flush

        def counted() -> None:
            frames.append(app.host.clock())
            original()

        chat.replies.inbox._draw = counted
        await pilot.pause(0.3)
        assert frames == []  # ten frame times with nothing to draw: no wake-up
        await send(pilot, "go")
        await wait_for(pilot, lambda: len(engine.steps) == 1 and not chat.replies.pending)
        for step in range(2, 5):
            await pilot.pause(0.15)  # more than a frame apart
            engine.release()
            await wait_for(pilot, lambda: len(engine.steps) == step and not chat.replies.pending)
        await reply_done(pilot)
        assert len(frames) == 4  # one frame per step
        assert chat.session.last_reply.stats().num_tokens == 1 + 5 + 3 + 4


async def test_steps_that_come_while_another_screen_is_up_are_drawn(make_app):
    engine = PlanEngine([None, 4, 2, 3], gated=True)

    app = make_app(factory_for(engine), ChatConfig(k=4))
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "go")
        await wait_for(pilot, lambda: len(engine.steps) == 1)
        await pilot.press("f1")  # help over the chat while the reply streams
        assert type(app.screen).__name__ == "HelpScreen"
        engine.release(2)
        # drawn by frames while the help screen is on top, before the reply's end flushes
        await wait_for(pilot, lambda: len(chat.session.reply.tracker.steps) == 3 and not chat.replies.pending)
        await pilot.press("escape")
        engine.release()
        await reply_done(pilot)
        assert chat.session.last_reply.stats().num_tokens == 1 + 5 + 3 + 4
        assert len(chat.session.last_reply.steps) == 4
