"""Adaptive k in the chat: the key turns it on, the engine picks k, the panel says why."""

from __future__ import annotations

from spectui.engines.scripted import ScriptedEngine

from fake_engines import factory_for
from tui_helpers import ready, reply_done, send

SIZE = (120, 44)


async def test_f9_turns_adaptive_k_on_and_the_panel_shows_its_choices(make_app):
    engine = ScriptedEngine(alpha=0.85, seed=3)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await pilot.press(app.first_key("k_auto"))
        assert app.host.live.auto and "k auto" in chat.param_bar.plain
        await send(pilot, "What is speculative decoding?")
        await reply_done(pilot)
        steps = chat.session.last_reply.steps
        chosen = [step for step in steps if step.auto is not None]
        assert chosen and len(chosen) == len(steps) - 1  # every step but the prefill's
        assert all(step.k == step.auto.k or step.k < step.auto.k for step in chosen)
        chat.refresh_panels()
        plain = chat.stats_panel.plain
        latest = chosen[-1].auto
        assert f"Adaptive k  k {latest.k}" in plain
        assert latest.reason[:20] in plain
        # one prediction on screen, and the ended reply described over its steps, not its last k
        assert plain.count("predicted ×") == 1 and "realised" not in plain and "best k" not in plain
        assert "k mean" in plain and f"E(α,k={latest.k})" not in plain

        # a k chosen by hand ends adaptive k; the next reply runs that k throughout
        await pilot.press(app.first_key("k_up"))
        assert not app.host.live.auto
        k = app.host.live.k
        await send(pilot, "again")
        await reply_done(pilot)
        later = chat.session.last_reply.steps
        assert all(step.auto is None for step in later)
        assert {step.k for step in later[1:-1]} == {k}
        assert "Adaptive k" not in chat.stats_panel.plain
