"""Pilot tests of the figures' honesty (issue 59): "vs plain" and the costs belong to the
model and backend that timed them, and start anew at a switch."""

from __future__ import annotations

from dataclasses import replace

import pytest

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
        await switch_to_ngram(pilot, second)
        assert speed_vs_plain(chat.stats_panel.data)[1] != "measured"  # the old model's plain steps are not this one's
        assert chat.session.stats.costs.target_seconds() is None


async def switch_to_ngram(pilot, engine) -> None:
    """Ctrl+S on the model screen with prompt lookup chosen, until `engine` runs; the panels redrawn."""
    screen = await open_model_screen(pilot)
    screen.query_one("#model-method").value = "ngram"
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: pilot.app.host.engine is engine)
    await pilot.pause()
    pilot.app.chat_screen.refresh_panels()


async def test_after_a_model_switch_the_figures_are_the_new_models_and_count_from_its_first_token(make_app, monkeypatch):
    """The walk: after /model the summary under the conversation kept the old model's γ and
    tok/s, and the new model's first reply read 4.1 tok/s for SmolLM2 (100+): its speed counted
    the prefill of the whole conversation, which the new model had no cache of."""
    from spectui.core.events import Done, Source, Step
    from spectui.host import plan as plan_module

    from spectui.tui.widgets.conversation import ReplyView

    from fake_engines import StepsEngine

    # The new model's reply: 3 s of prefill, then 10 tokens in 0.1 s (100 tok/s; 11 / 3.1 s read 3.5)
    tokens = [Step((i,), (Source.TARGET,), f" w{i}", k=0, verify_seconds=0.01, pieces=(f" w{i}",)) for i in range(11)]
    second = StepsEngine([*tokens, Done("stop", seconds=3.1, time_to_first_token=3.0)], method="ngram")
    monkeypatch.setattr(plan_module, "engine_factory_for", lambda config, models: factory_for(second))
    app = make_app(factory_for(PlanEngine([None, 2, 2, 2, 2])), ChatConfig(engine="embedded", k=2))
    async with app.run_test(size=(80, 30)) as pilot:  # the panel put away: its summary under the conversation
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "on the first model")
        await reply_done(pilot)
        chat.refresh_panels()
        assert chat.stats_panel.data.gamma_reply == 1.0 and chat.stats_panel.data.rate_reply  # the first model's
        await switch_to_ngram(pilot, second)
        summary = str(chat.panels.summary_line.render())
        assert "γ – · – tok/s" in summary, summary  # nothing of the first model's reply
        data = chat.stats_panel.data
        assert (data.gamma_reply, data.rate_reply, data.num_tokens) == (None, None, 0)
        await send(pilot, "on the second")
        await reply_done(pilot)
        chat.refresh_panels()
        assert chat.stats_panel.data.rate_reply == pytest.approx(100.0)
        assert "100.0 tok/s" in str(chat.panels.summary_line.render())
        line = str(chat.query(ReplyView).last().note.render())
        assert "100.0 tok/s · prefill 3.00 s" in line, line


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
        # after how the figure is known ("×0.94 vs plain (busy …) measured" read as if the mark were
        # measured); narrower shapes drop what it rests on first, never the mark
        assert "vs plain measured" in line and line.split(" · ")[0].endswith(f"({BUSY})"), line
        assert f"({BUSY}) measured" not in line
        assert any(BUSY in "".join(text for text, _ in parts) for parts in summary_lines(data))


def test_others_share_of_the_cores():
    from spectui.engines.threads import others_share, usable_cores

    cores = usable_cores()
    assert others_share((0.0, 10.0, 1.0), (2.0, 10.0 + 2.0 * cores, 1.0)) == 1.0  # every core, by others
    assert others_share((0.0, 10.0, 1.0), (2.0, 12.0, 3.0)) == 0.0  # the busy seconds were ours
    assert others_share(None, (1.0, 1.0, 1.0)) is None


async def test_a_reply_whose_k_changed_mid_way_says_so_in_its_note_panel_and_record(make_app):
    """Issue 59: F6/F8 during a reply: the panel kept the old k and the export recorded the
    settings the reply started with."""
    from spectui.store.export import export_markdown
    from spectui.tui.widgets.conversation import ReplyView

    engine = PlanEngine([None, 2, 2, 2], gated=True)
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "change it mid-way")
        engine.release(1)  # the prompt's token, then one step at k 2
        await wait_for(pilot, lambda: len(engine.steps) == 2)
        await pilot.press(app.first_key("k_up"), app.first_key("temperature_up"))
        await pilot.pause()
        engine.release(2)
        await reply_done(pilot)
        note = str(chat.query(ReplyView).last().note.render())
        assert "k 2→3 · T 0.00→0.10" in note
        chat.refresh_panels()
        assert (chat.stats_panel.data.k, chat.stats_panel.data.temperature) == (3, 0.1)
        stored = app.store.load_conversation(chat.session.transcript.conversation_id)
        reply = [m for m in stored.messages if m.role == "assistant"][-1]
        assert reply.stats["ran"] == "k 2→3 · T 0.00→0.10"
        assert "k 2→3 · T 0.00→0.10" in export_markdown(stored)


async def test_the_bar_shows_the_k_and_t_each_step_ran_with(make_app):
    """Issue 59: F6/F8 during a reply and the bar said "k 3 T 0.10" at once, though the steps
    still ran at k 2, T 0; it says what ran and what comes next ("k 2→3"), then what ran."""
    engine = PlanEngine([None, 2, 2, 2], gated=True)
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        bar = app.chat_screen.param_bar
        await send(pilot, "change it mid-way")
        engine.release(1)
        await wait_for(pilot, lambda: len(engine.steps) == 2 and not app.chat_screen.replies.pending)
        await pilot.pause()
        assert "k 2  T 0.00" in bar.plain, bar.plain
        await pilot.press(app.first_key("k_up"), app.first_key("temperature_up"))
        await pilot.pause()
        assert "k 2→3  T 0.00→0.10" in bar.plain, bar.plain  # ran at 2 and 0; the next step at 3 and 0.10
        engine.release(1)
        await wait_for(pilot, lambda: len(engine.steps) == 3 and not app.chat_screen.replies.pending)
        await wait_for(pilot, lambda: "k 3  T 0.10" in bar.plain)
        engine.release(1)
        await reply_done(pilot)
        assert "k 3  T 0.10" in bar.plain


def test_what_ran_reads_the_steps_not_the_settings_the_reply_started_with():
    from spectui.core.events import AutoChoice, Source, Step
    from spectui.core.stats import settings_ran
    from spectui.chat_session.stats import adaptive_fields

    auto = AutoChoice(4, 1.0, None, "chosen")

    def step(k: int, temperature: float = 0.0, chosen: AutoChoice | None = None) -> Step:
        return Step((1,), (Source.TARGET,), "x", k=k, temperature=temperature, auto=chosen)

    adaptive_then_fixed = [step(0), step(4, chosen=auto), step(4, chosen=auto), step(6), step(6, 0.1)]
    assert settings_ran(adaptive_then_fixed) == "k auto→6 · T 0.00→0.10"
    assert settings_ran([step(4), step(4)]) == "k 4 · T 0.00"
    assert settings_ran([step(k) for k in (0, 1, 2, 3, 4, 5, 6)]) == "k 1→…→6 · T 0.00"
    assert settings_ran([step(0), step(4)]) == "k 4 · T 0.00"  # the prompt's token drafts nothing, whatever k
    # F6 ended adaptive k mid-reply: the panel no longer shows adaptive k's last choice (k 4)
    assert adaptive_fields(adaptive_then_fixed) == {}
    assert adaptive_fields(adaptive_then_fixed[:3])["auto"] is auto


def test_a_cut_summary_shortens_the_rest_before_the_reason():
    """Issue 59: at 80 columns the summary read '…24.4 tok/s · k'; at 100 '· k 0: drafting
    does not': the reason for k 0 was the part cut."""
    from spectui.core.events import AutoChoice
    from spectui.chat_session.stats import PanelData, Theory
    from spectui.measure.costs import CostEstimate

    theory = Theory(alpha=0.3, k=0, expected_tokens=1.0, speedup=0.92, best_k=None, best_speedup=None,
                    cost=CostEstimate(0.1, 0.4, estimated=False, verify_ks=(2, 4)), measured_speedup=0.97)
    data = PanelData(k=0, temperature=0.0, gamma_reply=0.31, rate_now=24.4, theory=theory, busy=True,
                     auto=AutoChoice(0, 1.0, None, "match 1: α 0.30 → k 0"))
    whole = "".join(text for text, _ in summary_line(data))
    assert whole.endswith("k 0: drafting does not pay here") and BUSY in whole
    for width in (98, 78, 60):
        line = "".join(text for text, _ in summary_line(data, width))
        assert len(line) <= width and line.endswith(" · k 0: drafting does not pay here"), (width, line)
        assert (BUSY if width > 60 else "(busy)") in line, (width, line)
        assert "vs plain busy" not in line, line  # the walk's '×0.92 vs plain busy machine: …' read as one phrase


def test_the_bars_k_and_t_words():
    from spectui.tui.widgets.param_bar import BarState, k_shown, temperature_shown

    assert k_shown(BarState(k=4)) == "4" and k_shown(BarState(k=4, auto_k=True)) == "auto"  # no reply
    assert k_shown(BarState(k=4, ran_k=4)) == "4"
    assert k_shown(BarState(k=6, ran_k=4)) == "4→6"
    assert k_shown(BarState(k=4, auto_k=True, ran_k=3)) == "auto 3"  # adaptive k's choice for the last step
    assert k_shown(BarState(k=4, ran_k=3, k_text="5")) == "5"  # a server's own k
    assert temperature_shown(BarState(temperature=0.1, ran_temperature=0.0)) == "0.00→0.10"
    assert temperature_shown(BarState(temperature=0.1, ran_temperature=0.1)) == "0.10"


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_the_summary_under_the_conversation_keeps_its_reason_whole_on_screen(make_app, size):
    """Issue 59 item 5, on screen: at 80 columns the summary read '…24.4 tok/s · k', at 100
    (the panel put away) '· k 0: drafting does not'; the rest is cut before the reason."""
    from spectui.core.events import AutoChoice, Done, Source, Step

    from fake_engines import StepsEngine
    from test_tui_layout import screen_lines

    auto = AutoChoice(0, 1.0, None, "match 1: α 0.30, draft 0.00× target → k 0")
    drafted = Step((2, 3, 4), (Source.DRAFT, Source.DRAFT, Source.RECOVERED), " w2 w3 w4", drafted=(2, 3, 50, 51),
                   k=4, verify_seconds=0.03, method="ngram", pieces=(" w2", " w3", " w4"))
    events = [Step((1,), (Source.TARGET,), " w1", k=0), drafted,  # drafts: a figure to show, and so a long line
              *(Step((i,), (Source.TARGET,), f" w{i}", k=0, auto=auto, verify_seconds=0.01) for i in range(5, 9)),
              Done("stop", seconds=0.1, neighbour_share=0.6)]  # busy too: the longest line there is
    engine = StepsEngine(events, method="ngram")
    engine.measured_verify_slope = 0.425
    app = make_app(factory_for(engine), ChatConfig())
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        if chat.stats_panel.display:  # at 100 columns the panel shows until its key puts it away
            await pilot.press(app.first_key("stats"))
        await send(pilot, "hello")
        await reply_done(pilot)
        await wait_for(pilot, lambda: not chat.stats_panel.display)
        await pilot.pause()
        lines = [line.rstrip() for line in screen_lines(app) if "tok/s" in line or "vs plain" in line]
        assert any(line.endswith(" · k 0: drafting does not pay here") for line in lines), lines


def test_the_k0_reasons_verify_cost_says_when_the_chat_timed_it_on_a_busy_machine():
    """Issue 59 item 3: 'a verify of 5 costs 72.3 steps here' with nothing saying the machine
    was busy; the panel's cost line said so, its k 0 reason (the same figure) did not."""
    from spectui.chat_session.stats import PanelData, Theory
    from spectui.core.events import AutoChoice
    from spectui.measure.costs import CostEstimate
    from spectui.tui.k_words import k_zero_words

    def theory(verify_ks: tuple[int, ...] | None) -> Theory:
        return Theory(alpha=0.3, k=0, expected_tokens=1.0, speedup=0.1, best_k=None, best_speedup=None,
                      cost=CostEstimate(0.1, 17.8, estimated=verify_ks is not None, verify_ks=verify_ks))

    auto = AutoChoice(0, 1.0, None, "match 1: α 0.30 → k 0")
    busy = PanelData(k=0, temperature=0.0, theory=theory((2, 4)), busy=True, auto=auto)
    assert k_zero_words(busy)[0] == f"k 0: drafting costs more than it saves here; a verify of 5 costs 72.2 steps here ({BUSY})."
    quiet = replace(busy, busy=False)
    assert k_zero_words(quiet)[0] == "k 0: drafting costs more than it saves here; a verify of 5 costs 72.2 steps here."
    # Timed at load, on a quiet machine (a busy one's is not kept): this reply's busy cores are not its
    loaded = replace(busy, theory=theory((2,)))
    assert BUSY not in k_zero_words(loaded, engine_slope=0.425)[0]
