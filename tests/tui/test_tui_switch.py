"""Safe switching: the model screen refuses what cannot load before it switches, and a switch
that fails to load leaves the chat on the engine it had, usable, with the reason shown."""

from __future__ import annotations

from fake_engines import PlanEngine, factory_for
from spectui.host.state import Phase
from spectui.settings.config import ChatConfig
from spectui.tui.screens.model import ModelScreen
from tui_helpers import notices, ready, reply_done, send, wait_for

SIZE = (110, 36)


async def open_model_screen(pilot) -> ModelScreen:
    pilot.app.chat_screen.action_model()
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModelScreen))
    await pilot.pause()
    return pilot.app.screen


async def test_the_model_screen_refuses_the_draft_method_for_a_target_without_a_draft(make_app, monkeypatch):
    from spectui.host import plan as plan_module

    built = []
    monkeypatch.setattr(plan_module, "engine_factory_for", lambda config, models: built.append(config) or factory_for(None))
    app = make_app(factory_for(PlanEngine([None, 1])), ChatConfig(engine="embedded", k=4))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = await open_model_screen(pilot)
        screen.query_one("#model-target").value = "smollm2-135m"
        screen.query_one("#model-method").value = "draft"
        await pilot.press("ctrl+s")
        await pilot.pause()
        error = str(screen.query_one("#model-error").render())
        assert app.screen is screen and "has no preset draft model" in error
        assert built == [] and app.host.state.wanted_swap is None and app.host.state.ready


async def test_a_switch_that_fails_to_load_leaves_the_chat_on_its_engine(make_app, monkeypatch):
    from spectui.host import plan as plan_module

    def failing_factory(config, models):
        def build(progress):
            raise RuntimeError("no weights for that model")

        return build

    monkeypatch.setattr(plan_module, "engine_factory_for", failing_factory)
    first = PlanEngine([None, 1])
    app = make_app(factory_for(first), ChatConfig(engine="embedded", k=4))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        screen = await open_model_screen(pilot)
        screen.query_one("#model-target").value = "smollm2-135m"
        screen.query_one("#model-method").value = "ngram"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: any("Could not switch" in text for text in notices(app)))
        await wait_for(pilot, lambda: "● ready" in chat.param_bar.plain)
        assert app.host.engine is first and not first.closed
        assert chat.session.config.model is None and chat.session.config.method != "ngram"  # the config it runs
        notes = [str(note.render()) for note in chat.query("SystemNote")]
        assert any("no weights for that model" in note and "goes on" in note for note in notes)
        await send(pilot, "still here?")
        await reply_done(pilot)
        assert len(first.messages_seen) == 1


async def test_a_message_sent_while_a_switch_loads_goes_to_the_engine_kept_when_it_fails(make_app, monkeypatch):
    import threading

    from spectui.host import plan as plan_module

    release = threading.Event()

    def failing_factory(config, models):
        def build(progress):
            release.wait(20)
            raise RuntimeError("no weights for that model")

        return build

    monkeypatch.setattr(plan_module, "engine_factory_for", failing_factory)
    first = PlanEngine([None, 1])
    app = make_app(factory_for(first), ChatConfig(engine="embedded", k=4))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = await open_model_screen(pilot)
        screen.query_one("#model-method").value = "ngram"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.host.state.phase is Phase.SWITCHING)
        await send(pilot, "sent while it loads")
        assert app.chat_screen.session.waiting is not None
        release.set()
        await wait_for(pilot, lambda: first.messages_seen)
        await reply_done(pilot)
        assert first.messages_seen[0][-1]["content"] == "sent while it loads"


async def test_the_model_screen_marks_cached_models_fits_80x24_and_offers_the_engines_methods(make_app, monkeypatch):
    """Issue 59: F11's list marked no model cached, was cut at 80×24 (placeholders and the
    list), and offered eagle3 and mtp on the CPU's embedded engine, which cannot run them."""
    from rich.cells import cell_len
    from textual.widgets import Input, Select

    from test_tui_layout import screen_lines

    rows = [{"alias": "smollm2-135m", "cached": True}, {"alias": "qwen2.5-coder-1.5b", "cached": False}]
    monkeypatch.setattr("spectui.models.inventory.model_rows", lambda: rows)
    app = make_app(factory_for(PlanEngine([None])), ChatConfig(engine="embedded"))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        screen = await open_model_screen(pilot)
        for field in screen.query(Input):
            assert cell_len(field.placeholder) <= field.content_region.width, field.placeholder  # nothing cut
        methods = [value for _, value in screen.query_one("#model-method", Select)._options]
        assert "eagle3" not in methods and "mtp" not in methods and {"auto", "draft", "ngram", "suffix"} <= set(methods)
        body = screen.query_one("#model-body")
        body.focus()
        await pilot.press("end")  # the list's last line, reached by scrolling (the scroll animates)
        await wait_for(pilot, lambda: "The conversation stays." in "\n".join(screen_lines(app)))
        shown = "\n".join(screen_lines(app))
        assert "● smollm2-135m" in shown and "○ qwen2.5-coder-1.5b" in shown, shown
        screen.query_one("#model-engine", Select).value = "vllm"
        await pilot.pause()
        methods = [value for _, value in screen.query_one("#model-method", Select)._options]
        assert "eagle3" in methods and "mtp" in methods
