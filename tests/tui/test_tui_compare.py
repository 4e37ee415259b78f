"""Pilot tests of the compare view: it runs both paths, reruns, sweeps k, marks the best k."""

from __future__ import annotations

from dataclasses import replace

from spectui.measure.compare import best_k
from spectui.engines.scripted import ScriptedEngine
from spectui.tui.screens.compare import CompareScreen

from fake_engines import LIVE, FixedKFactory, PlanEngine, factory_for
from tui_helpers import notices, ready, reply_done, send, wait_for

SIZE = (120, 40)


def screen_lines(app) -> list[str]:
    """The text of each line of the screen as a full redraw writes it."""
    update = app.screen._compositor.render_update(full=True)
    return ["".join(segment.text for strip in line for segment in strip if segment.control is None)
            for line in update.strips]


async def open_compare(pilot, prompt: str = "compare me") -> CompareScreen:
    await ready(pilot)
    await send(pilot, prompt)
    await reply_done(pilot)
    await pilot.press("f4")
    screen = pilot.app.screen
    assert isinstance(screen, CompareScreen)
    await wait_for(pilot, lambda: not screen.state.busy)
    await pilot.pause()
    return screen


def plain(widget) -> str:
    return str(widget.render())


async def test_compare_runs_both_paths_and_reports_from_the_runs_shown(make_app):
    engine = ScriptedEngine(alpha=0.8, step_delay=0.002)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        comparison = screen.state.comparison
        assert [run.path for run in comparison.runs] == ["speculative", "baseline"]
        assert [run.k for run in comparison.runs] == [4, 0]
        assert comparison.identical is True and not comparison.overlapping()
        spec_view = screen.panes["speculative"].token_view
        base_view = screen.panes["baseline"].token_view
        assert spec_view.text == base_view.text == comparison.runs[0].reply.text
        # The speculative pane shows drafted tokens; the baseline has only target tokens.
        spec_kinds = {kind for line in spec_view.rendered_lines() for _, kind in line}
        base_kinds = {kind for line in base_view.rendered_lines() for _, kind in line}
        assert "draft" in spec_kinds and base_kinds == {"target"}
        result = plain(screen.result)
        assert f"speedup ×{comparison.speedup:.2f}" in result
        assert "token-identical ✓" in result
        assert "γ" in plain(screen.panes["speculative"].stats)
        assert "γ" not in plain(screen.panes["baseline"].stats)

        await pilot.press("r")
        await wait_for(pilot, lambda: not screen.state.busy and len(screen.state.comparison.runs) == 4)
        await pilot.pause()
        runs = screen.state.comparison.runs
        # Rounds alternate which path goes first, and no two runs overlap in time.
        assert [run.path for run in runs] == ["speculative", "baseline", "baseline", "speculative"]
        assert all(a.ended <= b.started for a, b in zip(runs, runs[1:]))
        assert "(decode speed, median of 2 rounds)" in plain(screen.result)
        assert f"×{screen.state.comparison.speedup:.2f}" in plain(screen.result)


async def test_sweep_marks_the_measured_best_k(make_app):
    engine = ScriptedEngine(alpha=0.8, step_delay=0.002)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        await pilot.press("s")
        await wait_for(pilot, lambda: not screen.state.busy and len(screen.state.sweep_points) == 9)
        await pilot.pause()
        points = screen.state.sweep_points
        assert [p.k for p in points] == list(range(9))
        assert points[0].gamma is None and all(p.gamma is not None for p in points[1:])
        lines = plain(screen.sweep).splitlines()
        marked = [line for line in lines if "◀ best" in line]
        assert len(marked) == 1
        assert marked[0].startswith(f"k={best_k(points).k} ")


async def test_k_change_starts_a_new_comparison_with_the_new_k(make_app):
    engine = ScriptedEngine(alpha=0.8, step_delay=0.002)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        await pilot.press("f6")
        await wait_for(pilot, lambda: not screen.state.busy and len(screen.state.comparison.runs) == 2)
        await pilot.pause()
        assert [run.k for run in screen.state.comparison.runs] == [5, 0]
        assert "k = 5" in plain(screen.panes["speculative"].title)
        await pilot.press("m")  # the scripted engine has one method: says so, keeps going
        await pilot.pause()
        assert screen.state.method == "draft"
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)


async def test_a_difference_at_temperature_zero_is_shown_as_an_error(make_app):
    # new token ids every reply: the two paths differ, on kernels that promise they would not
    engine = PlanEngine([None, 2, 1], capabilities=replace(LIVE, greedy_identical=True))

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        assert screen.state.comparison.identical is False
        assert "DIFFERENT at token 0" in plain(screen.result)
        assert screen.result.has_class("-problem")


async def test_a_near_tie_is_reported_with_its_token_position_and_gap(make_app):
    """Kernels that promise nothing (bf16): the identity line says where the speculative reply
    left the plain one, both tokens, and how near a tie the plain path was there."""
    engine = PlanEngine([None, 2, 1])
    engine.margin = 0.0039

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        text = plain(screen.result)
        assert "left the plain path at token 0:" in text and "where plain decoding wrote" in text
        assert "top-two gap 0.0039" in text and "broken" not in text


async def test_compare_prompt_opens_the_view_as_soon_as_the_engine_is_ready(make_app):
    engine = ScriptedEngine(alpha=0.8, step_delay=0.002)

    app = make_app(factory_for(engine), compare_prompt="straight to compare")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        screen = app.screen
        await wait_for(pilot, lambda: not screen.state.busy)
        assert screen.state.messages[-1] == {"role": "user", "content": "straight to compare"}
        assert len(screen.state.comparison.finished_of("speculative")) == 1


async def test_f4_during_a_reply_opens_the_compare_view_once_the_reply_ends(make_app):
    # It said "the compare view opens once it ends", and nothing opened.
    engine = PlanEngine([None, 2, 1, None], gated=True)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "compare me after")
        await wait_for(pilot, lambda: len(engine.steps) == 1)
        await pilot.press("f4")
        await pilot.pause()
        assert any("opens once it ends" in text for text in notices(app))
        assert not isinstance(app.screen, CompareScreen)  # never beside a reply
        engine.gated = False  # the compare view's runs stream straight through
        engine.release(3)
        await reply_done(pilot)
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        screen = app.screen
        await wait_for(pilot, lambda: not screen.state.busy)
        assert screen.state.messages == [{"role": "user", "content": "compare me after"}]
        assert len(screen.state.comparison.finished_of("speculative")) == 1
        # Its footer names what F4 does here: it said "f4 compare".
        footer = screen_lines(app)[-1]
        assert "f4 close" in footer and "compare" not in footer, footer


async def test_quit_during_a_run_stops_it_before_the_engine_closes(make_app):
    from spectui.tui.worker import spectui_threads

    engine = ScriptedEngine(alpha=0.8, step_delay=0.05)
    closed_while_running = []
    close = engine.close

    def checked_close():
        closed_while_running.append(any(t.name == "spectui-compare" for t in spectui_threads()))
        close()

    engine.close = checked_close

    app = make_app(factory_for(engine), compare_prompt="a long comparison")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.state.busy)
        panes = app.screen.panes.values()
        await wait_for(pilot, lambda: any(pane.token_view is not None and pane.token_view.text for pane in panes))
        await pilot.press("ctrl+q")  # a run is streaming

    assert engine.closed and closed_while_running == [False]


async def test_fixed_k_engine_compares_against_a_second_engine_without_speculation(make_app):
    factory = FixedKFactory([3, None, 2, 4])

    app = make_app(factory.for_k(4), build_baseline=factory.for_k(0))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        assert factory.built_k == [4, 0]  # the chat's engine, then the baseline, once
        chat_engine, baseline = factory.engines
        runs = screen.state.comparison.runs
        assert [(run.path, run.k) for run in runs] == [("speculative", 4), ("baseline", 0)]
        assert all(s.sources == (s.sources[0],) * len(s.sources) for s in runs[1].reply.steps)
        assert {src.value for s in runs[1].reply.steps for src in s.sources} == {"target"}
        assert "baseline: vllm engine without speculation" in plain(screen.head)
        await pilot.press("f6")  # k is the engine's: the view says so and keeps it
        assert screen.state.k == 4 and factory.built_k == [4, 0]
        await pilot.press("r")
        await wait_for(pilot, lambda: not screen.state.busy and len(screen.state.comparison.runs) == 4)
        assert factory.built_k == [4, 0]  # the baseline engine is reused
        assert not screen.state.comparison.overlapping()
        await pilot.press("escape")
        await wait_for(pilot, lambda: baseline.closed)
        assert not chat_engine.closed  # the chat keeps its engine


async def test_fixed_k_engine_without_a_baseline_says_what_is_missing(make_app):
    factory = FixedKFactory([3, None])

    app = make_app(factory.for_k(4))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        assert screen.state.comparison.runs == []
        assert any("no baseline engine is configured" in n for n in notices(app))
