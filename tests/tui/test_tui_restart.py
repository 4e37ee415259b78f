"""Engines with k fixed at start (vLLM): a k press restarts them; inferred colours.

FixedKFactory builds FixedKEngines and records the k of every build, so a test can see
how many restarts happened and with which k.
"""

from __future__ import annotations

import json
from dataclasses import replace


from spectui.settings.config import ChatConfig
from spectui.core.events import Source
from spectui.measure.metrics import MemoryReading
from spectui.store import export_markdown, export_trace_jsonl
from spectui.core.pieces import SOURCE_KIND
from spectui.tui.widgets.conversation import ReplyView, SystemNote, UserMessage

from fake_engines import FixedKFactory, ManualTimers
from tui_helpers import notices, ready, reply_done, send, shown_kinds, wait_for

SIZE = (110, 36)


def fixed_k_app(make_app, factory: FixedKFactory, k: int = 2, timers: ManualTimers | None = None):
    """The app over FixedKEngines rebuilt for each k; `timers` end the key presses' settling."""
    return make_app(factory.for_k(k), ChatConfig(k=k), build_for_k=factory.for_k, set_timer=timers or ManualTimers())


def notes(app, error: bool | None = None) -> list[str]:
    found = app.chat_screen.query(SystemNote)
    return [str(n.render()) for n in found if error is None or n.has_class("-error") == error]


async def test_k_presses_restart_the_engine_once_with_the_final_k(make_app):
    factory, timers = FixedKFactory([None, 2, 2]), ManualTimers()

    app = fixed_k_app(make_app, factory, timers=timers)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "hello")
        await reply_done(pilot)
        first_engine = app.host.engine
        factory.hold()
        await pilot.press("f6", "f6", "f6")
        assert app.host.live.k == 5 and factory.built_k == [2]  # still settling
        assert len(timers.pending) == 1  # each press started the settling again
        assert "vLLM restarts with k = 5 in a moment" in chat.param_bar.plain
        timers.fire()
        await wait_for(pilot, lambda: "● restarting vLLM with k = 5" in chat.param_bar.plain)
        await wait_for(pilot, lambda: "starting vLLM 0%" in chat.param_bar.plain)
        assert first_engine.closed  # closed before the new one is built
        assert notes(app) == ["Restarting vLLM with k = 5: the conversation stays…"]
        # A message sent now waits for the restarted engine, as during the first load.
        await send(pilot, "while it restarts")
        assert chat.box.prompt.value == ""
        assert "● waiting for the engine · restarting vLLM with k = 5" in chat.param_bar.plain
        factory.release()
        await wait_for(pilot, lambda: app.host.engine is not None)
        await reply_done(pilot)
        assert factory.built_k == [2, 5] and not timers.pending and app.host.state.wanted_k is None  # no second restart
        restart_notes = notes(app)  # the same note, now saying how it went
        assert len(restart_notes) == 1 and restart_notes[0].startswith("vLLM restarted with k = 5 in ")
        # The conversation survives, and the waiting message went to the new engine.
        new_engine = factory.engines[-1]
        assert [m["content"] for m in new_engine.messages_seen[0]] == ["hello", chat.session.transcript.messages[1]["content"],
                                                                      "while it restarts"]
        assert [s.k for s in new_engine.steps] == [5, 5, 5]
        assert len(chat.query(ReplyView)) == 2 and len(chat.query(UserMessage)) == 2
        bar = chat.param_bar.plain
        assert "k 5" in bar and "● ready" in bar and "vllm" in bar and "sources inferred" in bar
        assert (app.host.live.k, app.host.engine_k) == (5, 5)


async def test_a_restart_waits_for_the_streaming_reply(make_app):
    factory, timers = FixedKFactory([None, 2, 2], gated=True), ManualTimers()

    app = fixed_k_app(make_app, factory, timers=timers)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        engine = app.host.engine
        await send(pilot, "go")
        await wait_for(pilot, lambda: len(engine.steps) == 1)
        await pilot.press("f6")
        assert timers.fire() == 1  # the keys have settled: the reply still holds the engine
        await pilot.pause()
        assert factory.built_k == [2] and not engine.closed
        assert "vLLM restarts with k = 3 after this reply" in chat.param_bar.plain
        engine.release(2)
        await reply_done(pilot)
        assert chat.query_one(ReplyView).finish_reason == "stop"
        await wait_for(pilot, lambda: factory.built_k == [2, 3] and app.host.engine is not None)
        assert engine.closed and app.host.engine is factory.engines[-1]


async def test_a_restart_waits_for_the_compare_view_to_close(make_app):
    factory, timers = FixedKFactory([None, 2]), ManualTimers()

    app = fixed_k_app(make_app, factory, timers=timers)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await reply_done(pilot)
        await pilot.press("f6", "f4")  # the compare view holds the engine
        assert type(app.screen).__name__ == "CompareScreen"
        await wait_for(pilot, lambda: not app.screen.state.busy)
        assert timers.fire() == 1
        await pilot.pause()
        assert factory.built_k == [2]
        await pilot.press("escape")
        await wait_for(pilot, lambda: factory.built_k == [2, 3] and app.host.engine is not None)


async def test_a_failed_restart_shows_one_error_and_a_k_press_retries(make_app):
    factory, timers = FixedKFactory([None, 1]), ManualTimers()

    app = fixed_k_app(make_app, factory, timers=timers)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "keep me")
        await reply_done(pilot)
        factory.failures.append("CUDA out of memory")
        await pilot.press("f6")
        timers.fire()
        await wait_for(pilot, lambda: app.host.state.failed)
        await pilot.pause()
        errors = notes(app, error=True)
        assert len(errors) == 1
        assert "Could not restart vLLM with k = 3: RuntimeError: CUDA out of memory" in errors[0]
        assert "● failed" in chat.param_bar.plain
        assert [m["content"] for m in chat.session.transcript.messages][0] == "keep me"
        await send(pilot, "no engine")
        assert chat.box.prompt.text == "no engine"
        await pilot.press("f6")
        timers.fire()
        await wait_for(pilot, lambda: app.host.engine is not None)
        await pilot.pause()  # the host's EngineReady reaches the screen after the engine is set
        assert factory.built_k == [2, 3, 4]
        assert len(notes(app, error=True)) == 1
        assert any("restarted with k = 4" in n for n in notes(app, error=False))
        assert "● ready" in chat.param_bar.plain


def recovered_last(steps):
    """The engine's record says every drafting step ended in a rejection."""
    return tuple(
        replace(step, sources=step.sources[:-1] + (Source.RECOVERED,)) if len(step.token_ids) > 1 else step
        for step in steps
    )


async def test_restated_steps_recolour_the_reply_and_its_history(make_app):
    factory = FixedKFactory([None, 2, 2], restate=recovered_last)

    app = fixed_k_app(make_app, factory)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await reply_done(pilot)
        engine = app.host.engine
        assert [s.sources[-1] for s in engine.steps[1:]] == [Source.BONUS, Source.BONUS]  # as streamed
        view = app.chat_screen.query_one(ReplyView)
        restated = recovered_last(engine.steps)
        assert shown_kinds(view.token_view) == [SOURCE_KIND[s] for step in restated for s in step.sources]
        assert view.token_view.text == "".join(step.text for step in engine.steps)
        assert "colours from the engine's record" in str(view.note.render())
        store = app.store
        conversation = store.load_conversation(store.latest_conversation_id())
        assert [replace(saved.step, pieces=step.pieces, rejected_text=step.rejected_text)
                for saved, step in zip(conversation.messages[-1].steps, restated)] == list(restated)
        trace = [json.loads(line) for line in export_trace_jsonl(conversation)]
        assert [t["sources"][-1] for t in trace] == ["target", "recovered", "recovered"]


async def test_approximate_colours_are_said_in_the_summary_and_the_export(make_app):
    factory = FixedKFactory([None, 2], approximate=True)

    app = fixed_k_app(make_app, factory)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await reply_done(pilot)
        note = str(app.chat_screen.query_one(ReplyView).note.render())
        assert "colours approximate (the server did not say which tokens were drafts)" in note
        store = app.store
        markdown = export_markdown(store.load_conversation(store.latest_conversation_id()))
        assert "colours approximate (the server did not say which tokens were drafts)" in markdown


async def test_memory_from_the_engine_with_its_pool(make_app):
    reading = MemoryReading("RSS", 3 * 2**30, 16 * 2**30, "psutil", pool_bytes=2**30, with_children=True)
    factory = FixedKFactory([None, 1], memory=reading)

    app = fixed_k_app(make_app, factory)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.host.engine.draft_bytes = 300 * 2**20
        await send(pilot, "go")
        await reply_done(pilot)
        panel = app.chat_screen.stats_panel.plain
        assert "RSS (all) 3.0 GiB / 16.0 GiB" in panel
        assert "reserved 1.0 GiB up front" in panel
        assert "draft   300.0 MiB" in panel


async def test_info_screen_says_how_k_changes_and_shows_vllm_figures(make_app):
    stats = {"num_drafted": 4, "num_accepted": 3, "per_step_accepted": [2, 1], "per_step_drafted": [2, 2],
             "reconciled": False}
    factory = FixedKFactory([None, 2, 1], engine_stats=stats)

    app = fixed_k_app(make_app, factory)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "go")
        await reply_done(pilot)
        await pilot.press("f3")
        rows = str(app.screen.query_one("#info-rows").render())
        assert "2, fixed: a change restarts the engine" in rows
        assert "inferred from chunk sizes" in rows
        assert "per-step    2 steps recorded" in rows
        assert "reconciled  no" in rows
        assert "drafted     4" in rows and "accepted    3" in rows
        assert "per_step_drafted" not in rows


async def test_adaptive_k_key_recommends_a_k_for_a_fixed_k_engine_and_restarts_on_a_second_press(make_app):
    # every draft accepted: the measured α is high, so the best k is far above 2
    factory, timers = FixedKFactory([None, 8, 8, 8, 8, 8, 8]), ManualTimers()

    app = fixed_k_app(make_app, factory, timers=timers)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await pilot.press("f9")
        assert any("after a reply with drafts" in n for n in notices(app))
        await send(pilot, "hello")
        await reply_done(pilot)
        chat.refresh_panels()
        assert chat.stats_panel.data.theory.best_k is None  # v(k) timed at k = 2 alone
        await pilot.press("f9")
        assert any("No k to recommend yet: v(k) timed at k=2 only" in n for n in notices(app))
        await pilot.press("f6")  # a reply at k = 3 times a second k
        assert timers.fire() == 1
        await wait_for(pilot, lambda: factory.built_k == [2, 3] and app.host.engine is not None)
        await send(pilot, "again")
        await reply_done(pilot)
        chat.refresh_panels()
        best = chat.stats_panel.data.theory.best_k
        assert best > 3, chat.stats_panel.data.theory
        await pilot.press("f9")
        assert any(f"Recommended k = {best}" in n for n in notices(app))
        assert factory.built_k == [2, 3]  # only recommended so far
        await pilot.press("f9")
        assert timers.fire() == 1
        await wait_for(pilot, lambda: factory.built_k == [2, 3, best] and app.host.engine is not None)
        assert app.host.live.k == best and not app.host.live.auto
