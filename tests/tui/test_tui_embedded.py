"""The TUI over the real embedded loop (tiny random models): the screen matches the engine."""

from __future__ import annotations

import asyncio

import pytest

from spectui.config import ChatConfig
from spectui.engine import EngineInfo
from spectui.stats import summarize
from spectui.tui.token_pieces import SOURCE_KIND
from spectui.tui.widgets.conversation import ReplyView

from tui_fakes import ready, reply_done, send


class RecordingEngine:
    """The embedded engine on the raw prompt (the tiny tokenizer has no chat template)."""

    def __init__(self, engine):
        self.inner = engine
        self.info = engine.info
        self.tokenizer = engine.tokenizer  # what the UI decodes per-token pieces with
        self.steps = []

    def stream(self, messages, params, control):
        prompt_ids = self.tokenizer(messages[-1]["content"])["input_ids"]
        for event in self.inner.stream_ids(prompt_ids, params, control):
            if hasattr(event, "token_ids"):
                self.steps.append(event)
            yield event

    def close(self):
        self.inner.close()


@pytest.fixture
def tiny_engine(tiny_target, tiny_draft, tiny_tokenizer):
    from spectui.engines.embedded.engine import EmbeddedEngine
    from spectui.engines.embedded.proposers import DraftModelProposer

    info = EngineInfo("embedded", "tiny", "tiny-draft", "draft", "float32", "cpu", live_k=True)
    return RecordingEngine(EmbeddedEngine(tiny_target, tiny_tokenizer, DraftModelProposer(tiny_draft), info))


def test_embedded_reply_shows_engine_sources_and_gamma(make_app, tiny_engine):
    async def scenario():
        app = make_app(lambda progress: tiny_engine, ChatConfig(k=4, max_tokens=40))
        async with app.run_test(size=(110, 36)) as pilot:
            await ready(pilot)
            await send(pilot, "def add(a, b):")
            await reply_done(pilot)
            steps = tiny_engine.steps
            assert steps and any(s.num_drafted for s in steps)
            token_view = app.chat_screen.query_one(ReplyView).token_view
            # Every character shown carries the source of the token that produced it.
            assert token_view.text == "".join(s.text for s in steps)
            shown_kinds = {kind for _, kind in token_view.chunks}
            engine_kinds = {SOURCE_KIND[src] for s in steps for src in s.sources}
            assert shown_kinds <= engine_kinds | {"ghost"}
            stats = summarize(steps, 1.0)
            panel = app.chat_screen.stats_panel
            assert panel.data.gamma_reply == pytest.approx(stats.gamma)
            assert panel.data.num_tokens == stats.num_tokens
            assert f"γ reply {stats.gamma:.2f}" in panel.plain

    asyncio.run(scenario())
