"""The first screen of an empty chat: the colours in the theme's own styles, three suggested
starts (one edits a file shipped with spectui, at a fixed k with its cost here), gone with the
first message; and adaptive k at 0 saying in words why, and what would pay."""

from __future__ import annotations

from spectui.core.events import NOTHING_TO_COPY, AutoChoice, Done, Source, Step
from spectui.engines.scripted import scripted_engine_factory
from spectui.settings.config import ChatConfig
from spectui.tui.widgets.first_screen import EXAMPLE, NUMBERS_KEY, WATCH_K, FirstScreen
from spectui.tui.widgets.token_view import TokenView

from fake_engines import StepsEngine, factory_for
from test_tui_layout import screen_lines
from tui_helpers import ready, reply_done, send, wait_for

SIZE = (100, 40)


def cards(app) -> list[FirstScreen]:
    return list(app.chat_screen.query(FirstScreen))


async def test_the_card_shows_in_an_empty_chat_goes_with_the_first_message_and_comes_back_for_a_new_one(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        text = "\n".join(screen_lines(app))
        assert len(cards(app)) == 1 and "What the colours say" in text and "csv_tools.py" in text, text
        await send(pilot, "What is speculative decoding?")
        await reply_done(pilot)
        assert cards(app) == [] and "What the colours say" not in "\n".join(screen_lines(app))
        await pilot.press(app.first_key("new_chat"))
        await wait_for(pilot, lambda: len(cards(app)) == 1)


async def test_the_legend_draws_each_source_in_the_current_themes_style_under_one_name(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        legend = cards(app)[0].query(TokenView)
        samples = [view.chunks[0] for view in legend]
        assert [kind for _, kind in samples] == ["draft", "recovered", "bonus", "target", "ghost"]
        assert [text.strip() for text, _ in samples][:3] == ["accepted draft", "correction", "bonus"]
        for _ in app.theme_names():
            style = legend.first().get_component_rich_style("tokenview--recovered")
            assert style.color.triplet.hex == app.spectui_themes[app.theme].sources["recovered"].color.lower()
            await pilot.press("ctrl+t")
            await pilot.pause()


async def test_tab_from_the_empty_box_and_enter_picks_the_file_edit_which_fills_the_box_and_sets_k(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await pilot.press(app.first_key("k_auto"))
        assert app.host.live.auto
        await pilot.press("tab")
        assert cards(app)[0].list.has_focus
        await pilot.press("enter")
        await wait_for(pilot, lambda: chat.box.prompt.text != "")
        assert chat.box.prompt.text == f"/file {EXAMPLE}\nadd type hints to this module, keep everything else, reply with the whole module"
        assert chat.box.prompt.has_focus and EXAMPLE.is_file()
        assert app.host.live.k == WATCH_K and not app.host.live.auto  # "watch it": a fixed k


async def test_the_other_suggestions_fill_the_box_and_leave_k_alone(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await pilot.press("tab", "down", "down", "enter")
        await wait_for(pilot, lambda: chat.box.prompt.text != "")
        assert chat.box.prompt.text == "What is speculative decoding? Answer in three sentences."
        assert app.host.live.k == 2


def watch_line(app) -> str:
    return next((line for line in screen_lines(app) if "watch it at k" in line), "")


async def show_numbers(pilot) -> None:
    """The numbers behind the card's words: Tab to its suggestions, then their key."""
    await pilot.press("tab", NUMBERS_KEY)
    await pilot.pause()


async def test_the_watch_it_k_says_its_measured_cost_or_that_it_is_not_measured(make_app):
    engine = StepsEngine([])
    app = make_app(factory_for(engine), ChatConfig())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await show_numbers(pilot)
        assert "watch it at k 4: cost not yet measured" in watch_line(app)

    engine = StepsEngine([])
    engine.measured_verify_slope = 0.425  # as ggml times it at load
    app = make_app(factory_for(engine), ChatConfig())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await show_numbers(pilot)
        await wait_for(pilot, lambda: "2.7" in watch_line(app))
        assert "watch it at k 4: a verify of 5 costs 2.7 steps here" in watch_line(app)
        assert any("v(k) = 1 + 0.42k plain steps, as measured here" in line for line in screen_lines(app))


def plain_steps(reason: str) -> list[Step | Done]:
    auto = AutoChoice(0, 1.0, None, reason)
    return [Step((1,), (Source.TARGET,), " w1", k=0),
            *(Step((i,), (Source.TARGET,), f" w{i}", k=0, auto=auto, verify_seconds=0.01) for i in range(2, 6)),
            Done("stop", seconds=0.1)]


async def test_adaptive_k_at_0_says_why_in_words_and_what_would_pay(make_app):
    engine = StepsEngine(plain_steps(NOTHING_TO_COPY), method="ngram")
    app = make_app(factory_for(engine), ChatConfig())
    async with app.run_test(size=(120, 50)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await reply_done(pilot)
        chat = app.chat_screen
        chat.refresh_panels()
        words = " ".join(chat.stats_panel.plain.split())
        assert "Adaptive k k 0" in words
        assert "k 0: nothing to copy from yet" in words
        assert "What pays: a reply that copies text the model has seen: attach a file and ask for an edit." in words
        await pilot.resize_terminal(80, 24)  # the panel steps aside: its one-line summary says it short
        await wait_for(pilot, lambda: not chat.stats_panel.display)
        await pilot.pause()
        assert any("k 0: nothing to copy yet" in line for line in screen_lines(app))

    engine = StepsEngine(plain_steps("match 1: α 0.30, draft 0.00× target → k 0"), method="ngram")
    engine.measured_verify_slope = 0.425
    app = make_app(factory_for(engine), ChatConfig())
    async with app.run_test(size=(120, 50)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await reply_done(pilot)
        chat = app.chat_screen
        chat.refresh_panels()
        words = " ".join(chat.stats_panel.plain.split())
        assert "k 0: drafting costs more than it saves here; a verify of 5 costs 2.7 steps here." in words
        assert "What pays:" in words


def build_timed_engine(progress=None) -> StepsEngine:
    """A fake engine that timed v(k) as ggml does at load, built in the engine process."""
    engine = StepsEngine([])
    engine.measured_verify_slope = 0.425
    return engine


async def test_the_watch_it_cost_crosses_from_the_engine_process(make_app):
    """The chat runs its engine in a process of its own: the slope it timed there once never
    reached the card, which said "cost not yet measured" beside every ggml model."""
    from spectui.engines.process import ProcessEngine

    app = make_app(lambda progress: ProcessEngine(build_timed_engine, progress), ChatConfig())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await show_numbers(pilot)
        await wait_for(pilot, lambda: "2.7" in watch_line(app))
        assert "watch it at k 4: a verify of 5 costs 2.7 steps here" in watch_line(app)


async def test_a_starters_k_lasts_for_its_reply_only_and_the_card_says_so(make_app):
    """Issue 59: after the starter set "watch it" k 4, Ctrl+N opened a new chat still at k 4."""
    app = make_app(scripted_engine_factory(), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat, live = app.chat_screen, app.host.live
        assert any(f"k {WATCH_K} for this reply only" in line for line in screen_lines(app))
        await pilot.press(app.first_key("k_auto"))  # the user's own choice: adaptive k
        await pilot.press("tab", "enter")
        await wait_for(pilot, lambda: chat.box.prompt.text != "")
        assert (live.k, live.auto) == (WATCH_K, False)
        chat.box.prompt.value = "add type hints"  # its reply, whatever the text
        await pilot.press("enter")
        await reply_done(pilot)
        assert live.auto and live.k == 2  # back to the user's k once the starter's reply ended
        assert chat.conversation.welcome.starter is None

        await pilot.press(app.first_key("new_chat"))
        await wait_for(pilot, lambda: len(cards(app)) == 1)
        await pilot.press("tab", "enter")  # picked, then a new chat before sending it
        await wait_for(pilot, lambda: chat.box.prompt.text != "")
        assert (live.k, live.auto) == (WATCH_K, False)
        await pilot.press(app.first_key("new_chat"))
        await pilot.pause()
        assert live.auto and live.k == 2


async def test_a_k_the_user_chose_after_the_starter_stays(make_app):
    app = make_app(scripted_engine_factory(), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat, live = app.chat_screen, app.host.live
        await pilot.press("tab", "enter")
        await wait_for(pilot, lambda: chat.box.prompt.text != "")
        await pilot.press(app.first_key("k_up"))  # k 5, by hand
        await pilot.press(app.first_key("new_chat"))
        await pilot.pause()
        assert (live.k, live.auto) == (WATCH_K + 1, False)


def test_one_word_per_colour_on_the_card_and_in_help():
    """Issue 59: F1 said "target" where the card and README say "plain"."""
    from spectui.tui.screens.help import GLOSSARY, LEGEND as HELP_LEGEND
    from spectui.tui.widgets.first_screen import LEGEND as CARD_LEGEND

    card = {kind: sample.strip() for kind, sample, _ in CARD_LEGEND}
    shown = {kind: text.strip() for text, kind in HELP_LEGEND if text.strip()}
    assert shown == card
    terms = {term for term, _ in GLOSSARY}
    assert {"accepted draft", "correction", "bonus", "plain"} <= terms and "target" not in terms


def test_the_readmes_colour_table_says_the_cards_word_for_each_colour():
    """Issue 59: one word per colour everywhere; the README's table said "was drafted and
    accepted" where the card and F1 say "accepted draft"."""
    from pathlib import Path

    from spectui.tui.widgets.first_screen import LEGEND as CARD_LEGEND

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("| colour (dark theme) | the token… |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("|") and "---" not in line]
    words = [sample.strip() for _, sample, _ in CARD_LEGEND]
    assert len(rows) == len(words)
    for row, word in zip(rows, words):
        assert word in row.lower(), (word, row)


async def test_the_card_says_plain_words_first_and_the_numbers_behind_a_key(make_app):
    """Issue 59: the first screen read "a verify of 5 costs 4.6 steps here" and "v(k)=1+0.48k"
    before anything in plain words. The words come first; the numbers behind a key."""
    engine = StepsEngine([])
    engine.measured_verify_slope = 0.425
    app = make_app(factory_for(engine), ChatConfig())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        text = "\n".join(screen_lines(app))
        assert "guessed by the small model, kept" in text
        assert f"Tab, then {NUMBERS_KEY}: the numbers behind the colours" in text
        assert "verify" not in text and "v(k)" not in text and "steps here" not in text, text
        await show_numbers(pilot)
        assert "a verify of 5 costs 2.7 steps here" in "\n".join(screen_lines(app))
        await pilot.press(NUMBERS_KEY)
        await pilot.pause()
        assert "verify of 5" not in "\n".join(screen_lines(app))


async def test_with_a_server_the_card_and_footer_offer_no_k(make_app):
    """Issue 59: with `--engine server` the card offered "k 4 for this reply only" (a k the
    server never runs) and the footer F5/F6/F9. Neither does; picking the starter leaves k."""
    from dataclasses import replace

    from spectui.core.engine import TEMPERATURE, Capabilities

    engine = StepsEngine([])  # as a server declares itself: the temperature is sent, k is its own
    engine.info = replace(engine.info, capabilities=Capabilities(exact_provenance=False, reply_controls=frozenset({TEMPERATURE})))
    app = make_app(factory_for(engine), ChatConfig(engine="server", server="http://127.0.0.1:9", k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.host.k_from_engine
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert "csv_tools.py" in text and "k 4" not in text and "for this reply only" not in text, text
        footer = screen_lines(app)[-1]
        for action in ("k_down", "k_up", "k_auto"):
            assert app.first_key(action) not in footer, footer
        await show_numbers(pilot)
        assert watch_line(app) == ""  # no watch-it k to cost
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.chat_screen.box.prompt.text != "")
        assert app.host.live.k == 2 and app.chat_screen.conversation.welcome.starter is None
