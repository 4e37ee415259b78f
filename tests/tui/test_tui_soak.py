"""Soak: 120 consecutive replies through the pilot, a new chat every 10 as a user would start
one. Memory stays within a bound and every reply is in the history, finished, with all its
steps. What soaks is the app (screen, host, history); the replies are scripted steps of every
source (a real engine's replies cost ~85 % of the soak's time and are what the engine tests check)."""

from __future__ import annotations

import gc
import os
import sqlite3

import psutil
import pytest

from spectui.settings.config import ChatConfig
from spectui.tui.widgets.conversation import ReplyView

from fake_engines import PlanEngine
from tui_helpers import ready, reply_done, send

REPLIES = 120
PER_CHAT = 10
WARM_UP = 20  # replies before the baseline: caches, fonts of the compositor, first allocations
RSS_GROWTH_BOUND_MIB = 40  # after the warm-up, over the next 100 replies
# A reply like the tiny embedded engine's at k 4: ~10 steps, 18 tokens, drafts accepted, rejected, all kept.
PLAN = [None, 1, 0, 4, 0, 1, 2, 0, 1]
PROMPTS = ["def add(a, b):", '{"name": "spectui", "tags": [', "The quick brown fox", "SELECT name FROM"]


def rss_mib() -> float:
    gc.collect()
    return psutil.Process(os.getpid()).memory_info().rss / 2**20


@pytest.mark.slow
async def test_a_hundred_and_twenty_replies_keep_memory_bounded_and_lose_no_history_row(make_app, tmp_path):
    engine = PlanEngine(PLAN)
    figures = {}

    app = make_app(lambda progress: engine, ChatConfig(k=4, max_tokens=16, temperature=0.7))
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        for number in range(1, REPLIES + 1):
            await send(pilot, f"{PROMPTS[number % len(PROMPTS)]} #{number}")
            await reply_done(pilot)
            if number == WARM_UP:
                figures["rss_warm"] = rss_mib()
            if number % PER_CHAT == 0:
                await pilot.press(app.first_key("new_chat"))
                await pilot.pause()
        await pilot.pause()
        figures["rss_end"] = rss_mib()
        figures["reply_views_alive"] = sum(type(o) is ReplyView for o in gc.get_objects())

    with sqlite3.connect(tmp_path / "history.sqlite3") as db:
        conversations = db.execute("SELECT COUNT(*) FROM conversations").fetchone()[0]
        users = db.execute("SELECT COUNT(*) FROM messages WHERE role = 'user'").fetchone()[0]
        replies = db.execute(
            "SELECT COUNT(*) FROM messages WHERE role = 'assistant' AND finish_reason IN ('stop', 'length')"
        ).fetchone()[0]
        steps = db.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    growth = figures["rss_end"] - figures["rss_warm"]
    print(
        f"\nsoak: {REPLIES} replies in {conversations} chats, {steps} steps; RSS {figures['rss_warm']:.0f} MiB"
        f" after {WARM_UP} replies, {figures['rss_end']:.0f} MiB after {REPLIES} (+{growth:.1f} MiB);"
        f" reply views alive {figures['reply_views_alive']}"
    )
    assert (conversations, users, replies) == (REPLIES // PER_CHAT, REPLIES, REPLIES)
    assert steps == len(engine.steps) == REPLIES * len(PLAN)  # every streamed step is a row
    assert growth < RSS_GROWTH_BOUND_MIB
    # A new chat frees the old one's widgets: at most the last chat's are still alive.
    assert figures["reply_views_alive"] <= PER_CHAT
