"""Tree drafting in the chat: the candidates verified per step, only for tree steps."""

from __future__ import annotations


from spectui.chat_session.stats import PanelData
from spectui.tui.widgets.stats_panel import panel_lines

from fake_engines import PlanEngine, factory_for
from tui_helpers import ready, reply_done, send, wait_for

SIZE = (110, 36)
PLAN = [None, 2, 0, 3]  # accepted drafts per step (None: the first, plain token)


def drawn_lines(widget) -> list[str]:
    """The widget's rows as drawn on the screen (cropped to its width)."""
    return ["".join(segment.text for segment in widget.render_line(y)).rstrip() for y in range(widget.size.height)]


async def test_tree_steps_show_their_candidates_per_step_and_the_method(make_app):
    engine = PlanEngine(PLAN, tree_nodes=[None, 9, 12, 15], method="medusa", gated=True)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert "fake-target ← fake-draft (medusa)" in app.chat_screen.param_bar.plain
        await send(pilot, "hello")
        panel = app.chat_screen.stats_panel
        engine.release()  # the first tree step
        await wait_for(pilot, lambda: panel.data.tree_nodes_last == 9)
        await pilot.pause()
        lines = drawn_lines(panel.body)  # below the panel's summary lines
        assert "\n tree    9.0 candidates/step\n         last step 9\n" in "\n".join(lines), lines
        engine.release(2)
        await reply_done(pilot)
        lines = drawn_lines(panel.body)  # below the panel's summary lines
        # The panel's default width: the last step's count goes under the mean.
        assert "\n tree    12.0 candidates/step\n         last step 15\n" in "\n".join(lines), lines
        assert panel.data.tree_nodes_mean == 12.0


async def test_chain_steps_show_no_tree_line(make_app):
    engine = PlanEngine(PLAN)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await reply_done(pilot)
        panel = app.chat_screen.stats_panel
        assert panel.data.tree_nodes_mean is None and panel.data.tree_nodes_last is None
        assert "candidates" not in panel.plain and "γ reply" in panel.plain


def test_a_narrow_panel_puts_the_last_step_on_its_own_line():
    data = PanelData(4, 1.0, tree_nodes_mean=104.5, tree_nodes_last=120)
    text = lambda width: ["".join(part[0] for part in line) for line in panel_lines(data, width)]  # noqa: E731
    assert " tree    104.5 candidates/step (last 120)" in text(60)
    narrow = text(30)
    at = narrow.index(" tree    104.5 candidates/step")
    assert narrow[at + 1] == "         last step 120"
    assert " tree" not in "".join(["".join(part[0] for part in line) for line in panel_lines(PanelData(4, 1.0), 60)])
