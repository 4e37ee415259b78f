"""Controls only where they act: an engine that runs its own k (a server) gets no k from the
keys, the bar shows the k it reports, and the info screen says in words what it did not report."""

from __future__ import annotations

from fake_openai_server import FakeOpenAI, fake_server
from spectui.engines.server.engine import ServerEngine
from spectui.measure.run import prompt_messages, run_reply
from spectui.core.events import Control, GenerationParams
from spectui.settings.config import ChatConfig
from spectui.tui.screens.info import InfoScreen
from tui_helpers import notices, ready, wait_for


async def test_k_keys_on_a_server_change_nothing_and_say_why(make_app):
    with fake_server(FakeOpenAI(reply="one two")) as url:
        app = make_app(lambda progress: ServerEngine(url), ChatConfig(engine="server", server=url, k=4))
        async with app.run_test(size=(140, 36)) as pilot:
            await ready(pilot)
            bar = app.chat_screen.param_bar
            assert "k ?" in bar.plain  # the server never said its k: not the config's 4
            await pilot.press("f6")
            await wait_for(pilot, lambda: any("cannot send k" in text for text in notices(app)))
            await pilot.pause()
            assert app.host.live.k == 4
            assert "k ?" in bar.plain and "k 5" not in bar.plain


async def test_the_bar_shows_the_k_a_server_reports_not_the_configs(make_app):
    from test_server_units import METRICS_TEXT  # a vLLM /metrics with four draft positions

    with fake_server(FakeOpenAI(reply="one two", metrics=METRICS_TEXT)) as url:
        app = make_app(lambda progress: ServerEngine(url), ChatConfig(engine="server", server=url, k=9))
        async with app.run_test(size=(140, 36)) as pilot:
            await ready(pilot)
            bar = app.chat_screen.param_bar
            assert "k 4" in bar.plain and "k 9" not in bar.plain


async def test_the_info_screen_of_a_server_has_words_not_placeholders(make_app):
    with fake_server(FakeOpenAI(reply="one two")) as url:
        app = make_app(lambda progress: ServerEngine(url), ChatConfig(engine="server", server=url))
        async with app.run_test(size=(140, 36)) as pilot:
            await ready(pilot)
            app.chat_screen.session.stats.engine_stats = {"server_k": None}
            await pilot.press("f3")
            await wait_for(pilot, lambda: isinstance(app.screen, InfoScreen))
            await pilot.pause()
            text = str(app.screen.query_one("#info-rows").render())
    assert "None" not in text and "?" not in text
    assert "not reported" in text and "cannot send k" in text


def test_json_k_is_null_when_the_server_never_says_its_k():
    from spectui.cli.generate import engine_k, reply_json

    fake = FakeOpenAI(reply="one two")
    with fake_server(fake) as url:
        engine = ServerEngine(url)
        k = engine_k(engine, 9)
        reply = run_reply(engine, prompt_messages("hi", None), GenerationParams(max_tokens=8), Control(k or 0))
    assert k is None
    assert reply_json(reply, engine, k)["model"]["k"] is None
    assert "num_speculative_tokens" not in str(fake.seen_bodies)


async def test_compare_runs_adaptive_k_when_the_bar_says_k_auto(make_app):
    from fake_engines import factory_for
    from spectui.engines.scripted import ScriptedEngine
    from spectui.tui.screens.compare import CompareScreen
    from tui_helpers import reply_done, send

    app = make_app(factory_for(ScriptedEngine(alpha=0.85, step_delay=0.002)), ChatConfig(k=4))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.host.live.update(auto=True)
        await send(pilot, "compare me")
        await reply_done(pilot)
        app.chat_screen.action_compare()
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        screen = app.screen
        await wait_for(pilot, lambda: not screen.state.busy and len(screen.state.comparison.runs) == 2)
        await pilot.pause()
        speculative = screen.state.comparison.of("speculative")[0]
        assert any(step.auto is not None for step in speculative.reply.steps)
        assert "k auto (from 4)" in str(screen.head.render())
        assert "k auto (from 4)" in str(screen.panes["speculative"].title.render())


async def test_the_compare_views_speedup_stands_beside_the_theory_prediction(make_app):
    from fake_engines import PlanEngine, factory_for
    from spectui.tui.screens.compare import CompareScreen
    from tui_helpers import reply_done, send

    app = make_app(factory_for(PlanEngine([None, 2, 2, 2])), ChatConfig(k=2))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "compare me")
        await reply_done(pilot)
        chat = app.chat_screen
        assert "measured  ×" not in chat.stats_panel.plain.split("Theory")[1]  # no k = 0 step timed yet
        chat.action_compare()
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        screen = app.screen
        await wait_for(pilot, lambda: not screen.state.busy and len(screen.state.comparison.runs) == 2)
        speedup = screen.state.comparison.speedup
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is chat)
        await pilot.pause()
        theory = chat.stats_panel.plain.split("Theory")[1]
        assert f"measured  ×{speedup:.2f} vs k=0, compare" in theory
        assert theory.count("predicted ×") == 1
