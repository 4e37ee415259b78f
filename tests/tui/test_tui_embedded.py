"""The TUI over the real embedded loop (tiny random models): the screen matches the engine."""

from __future__ import annotations

import pytest

from spectui.settings.config import ChatConfig
from spectui.core.engine import Capabilities, EngineInfo
from spectui.core.stats import summarize
from spectui.core.pieces import SOURCE_KIND
from spectui.tui.widgets.conversation import ReplyView

from tiny_models import SlowProposer
from fake_engines import RecordingEngine
from tui_helpers import ready, reply_done, send, wait_for


@pytest.fixture
def tiny_engine(tiny_target, tiny_draft, tiny_tokenizer):
    from spectui.engines.torch_backend.backend import torch_engine
    from spectui.engines.torch_backend.backend import torch_draft_proposer

    info = EngineInfo("embedded", "tiny", "tiny-draft", "draft", "float32", "cpu", Capabilities(live_controls=True))
    engine = torch_engine(tiny_target, tiny_tokenizer, torch_draft_proposer(tiny_draft), info)
    return RecordingEngine(engine, raw_prompt=True)  # the tiny tokenizer has no chat template


async def test_embedded_reply_shows_engine_sources_and_gamma(make_app, tiny_engine):
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


@pytest.mark.real_weights
async def test_real_weights_chat_streams_colours_and_takes_a_k_change(make_app):
    """SmolLM2 through the chat template, drafted by its own dynamic-int8 copy."""
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    inner = build_embedded_engine(EngineOptions(model="smollm2-135m", draft="smollm2-135m", method="draft", k=3),
                                  resolve_pair("smollm2-135m", "smollm2-135m"))
    # On a fast CPU the whole reply can end before the pilot's key press lands: a short
    # pause per step keeps it streaming while the key is pressed.
    inner.proposer = SlowProposer(inner.proposer, 0.05)
    engine = RecordingEngine(inner)

    app = make_app(lambda progress: engine, ChatConfig(k=3, max_tokens=120), store=True)
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        await send(pilot, "Write a Python function that adds two numbers.")
        await wait_for(pilot, lambda: len(engine.steps) >= 3, timeout=120)
        before = len(engine.steps)
        await pilot.press("f6")  # k 3 -> 4 while the reply streams
        pressed_after = len(engine.steps)
        chat = app.chat_screen
        await wait_for(pilot, lambda: chat.session.reply is None and not chat.replies.pending, timeout=600)
        await pilot.pause()
        steps = engine.steps
        # The step in flight at the key press keeps its k; the next one has the new k
        # (the last steps may draft fewer: a reply never drafts past max_tokens).
        assert len(steps) > pressed_after + 2
        assert all(s.k == 3 for s in steps[1:before])
        assert steps[pressed_after + 1].k == 4 and len(steps[pressed_after + 1].drafted) == 4
        token_view = app.chat_screen.query_one(ReplyView).token_view
        assert token_view.text == "".join(s.text for s in steps)
        assert "def " in token_view.text
        stats = summarize(steps, 1.0)
        assert stats.num_accepted > 0
        panel = app.chat_screen.stats_panel
        assert panel.data.gamma_reply == pytest.approx(stats.gamma)
        assert f"γ reply {stats.gamma:.2f}" in panel.plain
