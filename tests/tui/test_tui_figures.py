"""Pilot tests of the figures' honesty (issue 59): "vs plain" and the costs belong to the
model and backend that timed them, and start anew at a switch."""

from __future__ import annotations

from dataclasses import replace

from spectui.settings.config import ChatConfig
from spectui.tui.summary import BUSY, speed_vs_plain, summary_line, summary_lines

from fake_engines import PlanEngine, factory_for
from test_tui_switch import open_model_screen
from tui_helpers import ready, reply_done, send, wait_for

SIZE = (110, 36)


async def test_vs_plain_starts_anew_after_a_model_switch(make_app, monkeypatch):
    from spectui.host import plan as plan_module

    second = PlanEngine([None, 2, 2, 2])
    monkeypatch.setattr(plan_module, "engine_factory_for", lambda config, models: factory_for(second))
    first = PlanEngine([None, 2, 2, 2, 2])
    app = make_app(factory_for(first), ChatConfig(engine="embedded", k=0))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "plain first")  # k = 0: the chat times plain steps
        await reply_done(pilot)
        await pilot.press(app.first_key("k_up"), app.first_key("k_up"))
        await send(pilot, "then drafting")
        await reply_done(pilot)
        chat.refresh_panels()
        figure, known, basis = speed_vs_plain(chat.stats_panel.data)
        assert known == "measured" and basis == "over this chat's k=0 steps"
        screen = await open_model_screen(pilot)
        screen.query_one("#model-method").value = "ngram"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.host.engine is second)
        await pilot.pause()
        chat.refresh_panels()
        assert speed_vs_plain(chat.stats_panel.data)[1] != "measured"  # the old model's plain steps are not this one's
        assert chat.session.costs.target_seconds() is None


async def test_steps_that_drafted_nothing_are_not_called_k0_steps(make_app):
    """Issue 59: "over this chat's k=0 steps" in a chat at a fixed k 4, where the plain steps
    were k 4 steps that found nothing to draft."""
    engine = PlanEngine([None, 2, None, 2, None, 2])
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "at k 2 throughout")
        await reply_done(pilot)
        chat.refresh_panels()
        figure, known, basis = speed_vs_plain(chat.stats_panel.data)
        assert known == "measured" and basis == "over this chat's undrafted steps"


class NeighbourEngine(PlanEngine):
    """Each reply's Done says what share of the cores other processes held meanwhile."""

    def __init__(self, shares: list[float]) -> None:
        super().__init__([None, 2, None, 2, None, 2])
        self.shares = shares

    def done(self, steps):
        return replace(super().done(steps), neighbour_share=self.shares[len(self.messages_seen) - 1])


async def test_a_figure_timed_on_a_busy_machine_is_marked(make_app):
    engine = NeighbourEngine([0.05, 0.6])
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "a quiet machine")
        await reply_done(pilot)
        chat.refresh_panels()
        assert not chat.stats_panel.data.busy
        assert BUSY not in "".join(text for text, _ in summary_line(chat.stats_panel.data))
        await send(pilot, "a neighbour took the cores")
        await reply_done(pilot)
        chat.refresh_panels()
        data = chat.stats_panel.data
        assert data.busy and speed_vs_plain(data)[1] == "measured"
        line = "".join(text for text, _ in summary_line(data))
        assert f"vs plain ({BUSY})" in line  # before what it rests on, which a narrow screen cuts first
        assert any(BUSY in "".join(text for text, _ in parts) for parts in summary_lines(data))


def test_others_share_of_the_cores():
    from spectui.engines.threads import others_share, usable_cores

    cores = usable_cores()
    assert others_share((0.0, 10.0, 1.0), (2.0, 10.0 + 2.0 * cores, 1.0)) == 1.0  # every core, by others
    assert others_share((0.0, 10.0, 1.0), (2.0, 12.0, 3.0)) == 0.0  # the busy seconds were ours
    assert others_share(None, (1.0, 1.0, 1.0)) is None
