"""Pilot tests: type, stream from a fake engine, read what the screen shows."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from textual.widgets import Markdown

from spectui.core.engine import Capabilities
from spectui.core.stats import summarize
from spectui.settings.config import ChatConfig, DEFAULT_KEYS
from spectui.store import Store
from spectui.core.pieces import SOURCE_KIND
from spectui.tui.widgets.conversation import ReplyView, SystemNote, UserMessage

from fake_engines import PlanEngine, factory_for
from tui_helpers import notices, ready, reply_done, send, shown_kinds, wait_for

SIZE = (110, 36)
PLAN = [None, 4, 2, 0, 4, 1, 3]  # accepted drafts per step (None: the first, plain token)


def expected_kinds(steps) -> list[str]:
    """One kind per token, in order: what the token view must show (ghosts off)."""
    return [SOURCE_KIND[source] for step in steps for source in step.sources]


async def test_reply_streams_with_each_token_in_its_source_style(make_app):
    engine = PlanEngine(PLAN)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await reply_done(pilot)
        view = app.chat_screen.query_one(ReplyView)
        token_view = view.token_view
        assert shown_kinds(token_view) == expected_kinds(engine.steps)
        assert token_view.text == "".join(step.text for step in engine.steps)
        # The drawn segments carry the theme's style for their kind.
        strip = token_view.render_line(0)
        drawn = [(seg.text, seg.style) for seg in strip if seg.text.strip()]
        first_text, first_style = drawn[0]
        assert first_text.strip() == "w0"
        assert first_style == token_view.get_component_rich_style("tokenview--target")
        draft_style = token_view.get_component_rich_style("tokenview--draft")
        assert any(style == draft_style for _, style in drawn)
        theme = app.spectui_themes["dark"]
        assert draft_style.color.triplet.hex == theme.sources["draft"].color.lower()
        # γ, τ and the token count in the panel are the engine's own numbers.
        stats = summarize(engine.steps, 1.0)
        panel = app.chat_screen.stats_panel
        assert panel.data.gamma_reply == pytest.approx(stats.gamma)
        assert f"γ reply {stats.gamma:.2f}" in panel.plain
        assert f"τ       {stats.tau:.2f}" in panel.plain
        assert f"tokens  {stats.num_tokens} in {stats.num_steps} steps" in panel.plain
        assert "TTFT    0.05 s" in panel.plain  # Done.time_to_first_token wins once done
        assert "RSS     100.0 MiB / 8.0 GiB" in panel.plain
        assert len(panel.data.per_position) == 4
        assert panel.data.per_position[0] == pytest.approx(5 / 6)  # 6 drafting steps, 5 kept draft 1


async def test_k_change_applies_to_the_next_step(make_app):
    engine = PlanEngine([None, 4, 4, 4], gated=True)

    app = make_app(factory_for(engine), ChatConfig(k=4))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        engine.release()  # step 1 (k=4)
        await wait_for(pilot, lambda: len(engine.steps) == 2)
        await pilot.press("f6")  # k up, while step 2 waits
        assert app.host.live.k == 5
        engine.release(2)
        await reply_done(pilot)
        assert [s.k for s in engine.steps] == [4, 4, 5, 5]
        assert "k 5" in app.chat_screen.param_bar.plain
        assert app.chat_screen.stats_panel.data.per_position[4:] == (0.0,)  # position 5 exists now (4 of 5 kept)


async def test_engine_without_live_k_says_what_will_happen(make_app):
    engine = PlanEngine([None, 2, 2], Capabilities(), gated=True, name="vllm")  # k read when a reply starts

    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await wait_for(pilot, lambda: len(engine.steps) == 1)
        await pilot.press("f6")
        engine.release(2)
        await reply_done(pilot)
        assert [s.k for s in engine.steps] == [2, 2, 2]  # the running reply kept k
        assert any("vllm engine cannot change k" in n and "k = 3 applies from the next reply" in n for n in notices(app))
        await send(pilot, "again")
        engine.release(2)
        await reply_done(pilot)
        assert engine.steps[-1].k == 3


async def test_temperature_keys_change_control(make_app):
    engine = PlanEngine([None, 1, 1], gated=True)

    app = make_app(factory_for(engine), ChatConfig(temperature=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await wait_for(pilot, lambda: len(engine.steps) == 1)
        await pilot.press("f8", "f8", "f8", "f7")
        engine.release(2)
        await reply_done(pilot)
        assert [s.temperature for s in engine.steps] == [0.0, 0.2, 0.2]
        assert "T 0.20" in app.chat_screen.param_bar.plain


async def test_escape_cancels_and_keeps_the_partial_reply(make_app):
    engine = PlanEngine([None, 3, 3, 3, 3], gated=True)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        engine.release()
        await wait_for(pilot, lambda: len(engine.steps) == 2)
        await pilot.press("escape")
        engine.release(3)
        await reply_done(pilot)
        view = app.chat_screen.query_one(ReplyView)
        assert view.finish_reason == "cancelled"
        assert view.token_view.text == engine.steps[0].text + engine.steps[1].text
        assert "cancelled · partial reply kept" in str(view.note.render())
        assert app.chat_screen.session.transcript.messages[-1] == {"role": "assistant", "content": view.token_view.text}


@pytest.mark.parametrize("failure", ["raise", "done_error"])
async def test_engine_failure_keeps_partial_reply_and_app_usable(make_app, failure):
    options = {"raise_after": 2} if failure == "raise" else {"error_after": 2}
    engine = PlanEngine([None, 2, 2, 2], **options)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "first")
        await reply_done(pilot)
        view = app.chat_screen.query_one(ReplyView)
        assert view.finish_reason == "error"
        assert view.token_view.text == engine.steps[0].text + engine.steps[1].text
        note = str(view.note.render())
        assert "error:" in note and "partial reply kept" in note
        expected = "boom inside stream" if failure == "raise" else "the fake engine gave up"
        assert expected in note
        # Still usable: the next message streams (the fake fails the same way, after 2 steps).
        await send(pilot, "second")
        await reply_done(pilot)
        assert len(app.chat_screen.query(ReplyView)) == 2
        assert engine.messages_seen[1][1]["content"] == view.token_view.text


async def test_multi_turn_passes_the_whole_conversation(make_app):
    engine = PlanEngine([None, 1])

    app = make_app(factory_for(engine), ChatConfig(system="be brief"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "one")
        await reply_done(pilot)
        first_reply = app.chat_screen.session.transcript.messages[-1]["content"]
        await send(pilot, "two")
        await reply_done(pilot)
        assert engine.messages_seen[1] == [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": first_reply},
            {"role": "user", "content": "two"},
        ]


async def test_loading_state_then_error_message_not_a_crash(make_app):
    release = threading.Event()

    def failing_factory(progress):
        progress("weights", 1, 4)
        release.wait(10)
        raise OSError("weights not found: /nope")

    app = make_app(failing_factory)
    async with app.run_test(size=SIZE) as pilot:
        chat = app.chat_screen
        await wait_for(pilot, lambda: "weights 25%" in chat.param_bar.plain)
        assert "● loading" in chat.param_bar.plain
        await send(pilot, "too early")  # it waits for the engine
        assert "● waiting for the engine · loading weights 25%" in chat.param_bar.plain
        release.set()
        await ready(pilot)
        await wait_for(pilot, lambda: chat.query(SystemNote))
        assert app.host.state.failed
        note = chat.query_one(SystemNote)
        assert "Could not load the engine: OSError: weights not found: /nope" in str(note.render())
        await wait_for(pilot, lambda: "● failed" in chat.param_bar.plain)
        # The waiting message did not go: it is back in the box, not in the conversation.
        assert chat.box.prompt.text == "too early"
        assert not chat.query(UserMessage) and chat.session.transcript.messages == []
        await pilot.press("f1")  # the app still works
        assert type(app.screen).__name__ == "HelpScreen"


async def test_loading_shows_its_seconds_while_a_stage_has_no_percentage(make_app):
    release, now = threading.Event(), [100.0]

    def slow_factory(progress):
        progress("qwen convert", 0, 0)  # reading a GGUF: no percentage for a while
        release.wait(10)
        return PlanEngine([None])

    app = make_app(slow_factory, clock=lambda: now[0])
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "● loading qwen convert · 0 s" in app.chat_screen.param_bar.plain)
        now[0] += 12
        await wait_for(pilot, lambda: "● loading qwen convert · 12 s" in app.chat_screen.param_bar.plain)
        release.set()
        await ready(pilot)
        plain = app.chat_screen.param_bar.plain
        assert "● ready" in plain and "convert" not in plain


async def test_a_message_sent_while_the_engine_loads_goes_once_it_is_ready(make_app):
    release = threading.Event()
    engine = PlanEngine([None, 2, 1])

    def slow_factory(progress):
        progress("weights", 2, 5)
        release.wait(20)
        return engine

    app = make_app(slow_factory)
    async with app.run_test(size=SIZE) as pilot:
        chat = app.chat_screen
        await wait_for(pilot, lambda: "weights 40%" in chat.param_bar.plain)
        await send(pilot, "typed while it loads")
        # Shown at once, the box is free again, and the bar says why nothing streams yet.
        assert [m.text for m in chat.query(UserMessage)] == ["typed while it loads"]
        assert chat.box.prompt.value == ""
        assert "● waiting for the engine · loading weights 40%" in chat.param_bar.plain
        await send(pilot, "a second one")  # one message waits at a time
        assert chat.box.prompt.value == "a second one"
        assert any("already waits for the engine" in n for n in notices(app))
        assert engine.messages_seen == []
        release.set()
        await ready(pilot)
        await wait_for(pilot, lambda: len(engine.messages_seen) == 1)
        await reply_done(pilot)
        assert engine.messages_seen[0] == [{"role": "user", "content": "typed while it loads"}]
        assert len(chat.query(UserMessage)) == 1  # not shown twice
        assert chat.query_one(ReplyView).token_view.text == "".join(s.text for s in engine.steps)
        assert "● ready" in chat.param_bar.plain
        reply = app.store.load_conversation(app.store.latest_conversation_id()).messages
        assert [(m.role, m.content) for m in reply][0] == ("user", "typed while it loads")


async def test_ghosts_toggle_shows_rejected_drafts_struck_through(make_app):
    engine = PlanEngine([None, 1, 4])  # k=4: step 1 rejects 3 drafts

    app = make_app(factory_for(engine), ChatConfig(k=4))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await reply_done(pilot)
        token_view = app.chat_screen.query_one(ReplyView).token_view
        kinds = [kind for line in token_view.rendered_lines() for _, kind in line]
        assert "ghost" not in kinds
        await pilot.press("ctrl+g")
        runs = [run for line in token_view.rendered_lines() for run in line]
        ghosts = [text for text, kind in runs if kind == "ghost"]
        assert ghosts == [" w10000 w10001 w10002"]
        # The ghost sits after the accepted draft and before the recovered token.
        order = [kind for _, kind in runs]
        assert order[:4] == ["target", "draft", "ghost", "recovered"]
        style = token_view.get_component_rich_style("tokenview--ghost")
        assert style.strike
        assert "ghosts" in app.chat_screen.param_bar.plain


async def test_markdown_toggle_renders_the_finished_reply(make_app):
    from spectui.engines.scripted import ScriptedEngine

    engine = ScriptedEngine()

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "md")
        await reply_done(pilot)
        view = app.chat_screen.query_one(ReplyView)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: view.query(Markdown) and view.query_one(Markdown).display)
        markdown = view.query_one(Markdown)
        assert markdown.display and not view.token_view.display
        assert markdown.source == view.token_view.text
        await pilot.press("ctrl+r")
        assert view.token_view.display and not view.markdown_shown


async def test_history_is_saved_per_step_and_resumes(make_app, tmp_path):
    engine = PlanEngine([None, 2, 1, 2])

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "remember me")
        await reply_done(pilot)
        lines_before = app.chat_screen.query_one(ReplyView).token_view.rendered_lines()
    store = Store(tmp_path / "history.sqlite3")
    conversation = store.load_conversation(store.latest_conversation_id())
    assert [m.role for m in conversation.messages] == ["user", "assistant"]
    # the store keeps each step's pieces beside it
    assert [s.step for s in conversation.messages[1].steps] == [replace(s, pieces=(), rejected_text="") for s in engine.steps]
    assert [s.pieces for s in conversation.messages[1].steps] == [s.pieces for s in engine.steps]
    assert conversation.messages[1].finish_reason == "stop"

    app = make_app(factory_for(PlanEngine([None])), resume=conversation)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        views = app.chat_screen.query(ReplyView)
        assert len(views) == 1
        assert views.first().token_view.rendered_lines() == lines_before
        assert app.chat_screen.session.transcript.messages[0] == {"role": "user", "content": "remember me"}
        await pilot.press("f2")
        table = app.screen.query_one("DataTable")
        assert table.row_count == 1
        await pilot.press("e")
        await pilot.pause()
        await pilot.press("enter")  # the folder it offers
        await pilot.pause()
        exported = tmp_path / "shots" / f"spectui-chat-{conversation.id}.md"
        assert "remember me" in exported.read_text()
    store.close()


async def test_theme_cycle_restyles_tokens(make_app):
    engine = PlanEngine([None, 2])

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await reply_done(pilot)
        token_view = app.chat_screen.query_one(ReplyView).token_view
        seen = {}
        for _ in app.theme_names():
            style = token_view.get_component_rich_style("tokenview--recovered")
            seen[app.theme] = (style.color.triplet.hex, style.bold, style.underline)
            await pilot.press("ctrl+t")
            await pilot.pause()
        themes = app.spectui_themes
        assert set(seen) == {"dark", "light", "colorblind"}
        for name, (colour, bold, underline) in seen.items():
            assert colour == themes[name].sources["recovered"].color.lower()
        assert seen["colorblind"][2] is True  # underlined, not just another hue


async def test_keys_are_remapped_from_config(make_app):
    engine = PlanEngine([None])
    keys = dict(DEFAULT_KEYS, k_up="f9")

    app = make_app(factory_for(engine), ChatConfig(k=4, keys=keys))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f6")
        assert app.host.live.k == 4
        await pilot.press("f9")
        assert app.host.live.k == 5
        await pilot.press("f1")
        keys_text = " ".join(str(key.render()) for key in app.screen.query("#keys .key"))
        assert "F9" in keys_text and "F6" not in keys_text


async def test_help_legend_uses_the_current_theme(make_app):
    app = make_app(factory_for(PlanEngine([None])), ChatConfig(theme="colorblind"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        legend = app.screen.query_one("#legend")
        kinds = [kind for line in legend.rendered_lines() for text, kind in line if text.strip()]
        assert kinds == ["draft", "recovered", "bonus", "target", "ghost"]
        bonus = legend.get_component_rich_style("tokenview--bonus")
        assert bonus.color.triplet.hex == app.spectui_themes["colorblind"].sources["bonus"].color.lower()
        assert bonus.italic and bonus.bold


async def test_info_compare_screenshot_and_new_chat(make_app, tmp_path):
    engine = PlanEngine([None, 1])

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await reply_done(pilot)
        await pilot.press("f3")
        rows = str(app.screen.query_one("#info-rows").render())
        assert "fake-target" in rows and "next step (live)" in rows
        await pilot.press("escape", "f4")
        assert type(app.screen).__name__ == "CompareScreen"
        await wait_for(pilot, lambda: not app.screen.state.busy)
        await pilot.press("escape", "ctrl+s")
        await pilot.pause()
        assert list((tmp_path / "shots").glob("*.svg"))
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert not app.chat_screen.query(ReplyView)
        assert app.chat_screen.session.transcript.messages == []
        assert app.chat_screen.stats_panel.data.gamma_session is None


async def test_long_reply_keeps_its_last_line_in_view(make_app):
    engine = PlanEngine([None] + [4] * 100, gated=True)

    app = make_app(factory_for(engine), ChatConfig(k=4))
    async with app.run_test(size=(70, 20)) as pilot:
        await ready(pilot)
        await pilot.press(app.first_key("stats"))  # the panel beside it: a narrow conversation, many lines
        await send(pilot, "long")
        chat = app.chat_screen
        assert chat.stats_panel.display
        conversation = chat.conversation
        token_view = chat.query_one(ReplyView).token_view
        def last_line_on_screen() -> bool:
            last_line_y = token_view.region.y + token_view.num_text_lines - 1
            return conversation.content_region.y <= last_line_y < conversation.content_region.bottom

        for batch in range(1, 5):  # the fifth batch would end the reply
            engine.release(20)
            await wait_for(pilot, lambda: len(engine.steps) == 1 + 20 * batch and not chat.replies.pending)
            # The last text line comes on screen while it streams, and nothing blank below it.
            await wait_for(pilot, lambda: last_line_on_screen() and token_view.size.height == token_view.num_text_lines)
        engine.release(20)
        await reply_done(pilot)
        await wait_for(pilot, lambda: conversation.scroll_y == conversation.max_scroll_y)
        assert token_view.size.height == token_view.num_text_lines


async def test_a_streaming_reply_grows_with_its_text_and_the_question_stays_in_view(make_app):
    """Issue 59: at 80×24 a streaming reply reserved 16 lines ahead of its text; the scroll to
    the end showed them blank and pushed the question off the screen."""
    from spectui.tui.widgets.conversation import UserMessage

    engine = PlanEngine([None] * 12, gated=True)
    app = make_app(factory_for(engine), ChatConfig(k=4))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "a short question")
        chat = app.chat_screen
        await wait_for(pilot, lambda: bool(chat.query(ReplyView)) and len(engine.steps) == 1)
        engine.release(3)
        await wait_for(pilot, lambda: len(engine.steps) == 4 and not chat.replies.pending)
        await pilot.pause()
        token_view = chat.query_one(ReplyView).token_view
        question = chat.query_one(UserMessage)
        conversation = chat.conversation.content_region
        assert token_view.streaming
        assert token_view.size.height == token_view.num_text_lines == 1
        assert conversation.y <= question.region.y and question.region.bottom <= conversation.bottom
        assert chat.conversation.max_scroll_y == 0  # all of it fits: nothing to scroll past
        engine.release(20)
        await reply_done(pilot)


async def test_new_chat_while_streaming_still_finishes_the_history_row(make_app, tmp_path):
    engine = PlanEngine([None, 2, 2, 2], gated=True)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "abandon me")
        await wait_for(pilot, lambda: len(engine.steps) == 1 and not app.chat_screen.replies.pending)
        await pilot.press("ctrl+n")
        engine.release(3)
        await wait_for(pilot, lambda: not app.chat_screen.session.replies.detached)
        assert not app.chat_screen.query(ReplyView)
        store = app.store
        reply = store.load_conversation(store.latest_conversation_id()).messages[-1]
        assert reply.finish_reason == "cancelled"
        assert reply.content == engine.steps[0].text


async def test_memory_panel_shows_the_drafts_share_when_the_engine_says(make_app):
    engine = PlanEngine([None, 1])
    engine.draft_bytes = 300 * 2**20

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await reply_done(pilot)
        assert " draft   300.0 MiB" in app.chat_screen.stats_panel.plain


async def test_a_narrow_terminal_gives_the_conversation_the_width(make_app):
    engine = PlanEngine([None, 4, 2])

    app = make_app(factory_for(engine), ChatConfig(k=4))
    async with app.run_test(size=(60, 20)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        assert not chat.stats_panel.display
        await send(pilot, "go")
        await reply_done(pilot)
        assert chat.query_one(ReplyView).token_view.size.width > 50  # not the 18 columns beside the panel
        await pilot.resize_terminal(120, 30)
        await pilot.pause()
        assert chat.stats_panel.display and chat.stats_panel.outer_size.width == 38


async def test_an_error_with_markup_and_escapes_is_toasted_as_text(make_app):
    def failing_factory(progress):
        raise OSError("server said [/] \x1b]0;pwned\x07")

    app = make_app(failing_factory)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.host.state.failed
        await send(pilot, "hello")  # no engine: a toast names the error
        await wait_for(pilot, lambda: app._notifications)
        await pilot.pause()
        toasts = [toast for toast in app._notifications if "server said" in toast.message]
        assert toasts and all("server said [/] ␛]0;pwned␇" in toast.message and not toast.markup for toast in toasts)
