"""The chat over the embedded engine in its own process: it streams as in-process, and a
killed engine process costs one reply, not the chat or its history."""

from __future__ import annotations

import os
import signal
from functools import partial

from spectui.settings.config import ChatConfig
from spectui.core.events import Control, GenerationParams, Step
from spectui.tui.widgets.conversation import ReplyView
from tiny_models import build_tiny_engine
from tui_helpers import ready, reply_done, send, wait_for


def process_factory(**options):
    from spectui.engines.process import ProcessEngine

    return lambda progress: ProcessEngine(partial(build_tiny_engine, **options), progress)


async def test_a_reply_streams_from_the_engine_process_with_its_pieces_and_gamma(make_app):
    local = build_tiny_engine()

    app = make_app(process_factory(), ChatConfig(k=4, max_tokens=30))
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        assert app.host.engine.pid != os.getpid()
        await send(pilot, "def add(a, b):")
        await reply_done(pilot)
        view = app.chat_screen.query_one(ReplyView)
        events = local.stream([{"role": "user", "content": "def add(a, b):"}], GenerationParams(max_tokens=30), Control(k=4))
        expected = [e for e in events if isinstance(e, Step)]
        assert view.token_view.text == "".join(s.text for s in expected)
        gamma = sum(s.num_accepted for s in expected) / sum(s.num_drafted for s in expected)
        assert app.chat_screen.stats_panel.data.gamma_reply == gamma
        assert f"γ reply {gamma:.2f}" in app.chat_screen.stats_panel.plain
        if os.path.exists("/proc/stat"):  # the engine process says what the neighbours took meanwhile
            share = app.chat_screen.session.last_reply.done.neighbour_share
            assert share is not None and 0.0 <= share <= 1.0


async def test_killing_the_engine_process_mid_reply_keeps_the_chat_and_the_next_message_restarts_it(make_app):
    app = make_app(process_factory(step_delay=0.15), ChatConfig(k=2, max_tokens=300))
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        await send(pilot, "def add(a, b):")
        chat = app.chat_screen
        await wait_for(pilot, lambda: chat.session.reply is not None and len(chat.session.reply.tracker.steps) >= 3)
        first_pid = app.host.engine.pid
        os.kill(first_pid, signal.SIGKILL)
        await reply_done(pilot)
        view = chat.query(ReplyView)[0]
        note = str(view.note.render())
        assert view.finish_reason == "error" and "partial reply kept" in note
        assert "engine process ended while generating (killed by SIGKILL)" in note
        shown = view.token_view.text
        assert shown
        # The history kept the steps that arrived before the kill.
        stored = app.store.load_conversation(app.store.latest_conversation_id()).messages[-1]
        assert stored.role == "assistant" and stored.content == shown
        assert len(stored.steps) == len(view_steps := chat.session.last_reply.steps) and view_steps
        await send(pilot, "SELECT id")
        # While the new process loads, the bar says so rather than "streaming".
        await wait_for(pilot, lambda: "● restarting" in chat.param_bar.plain, timeout=60)
        assert "the engine process had ended" in chat.param_bar.plain
        await wait_for(pilot, lambda: len(chat.query(ReplyView)) == 2 and chat.session.reply is not None
                       and len(chat.session.reply.tracker.steps) >= 2, timeout=120)
        await wait_for(pilot, lambda: "● streaming" in chat.param_bar.plain)
        assert app.host.engine.pid != first_pid
        chat.action_cancel()
        await reply_done(pilot)
