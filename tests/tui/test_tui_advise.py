"""The advise screen (Ctrl+F2, the palette, /advise): the history's replies replayed by
spectui.advise at a cost profile kept beside the history (no model runs: SmolLM2's tokenizer
gives the ids), the recommendation applied to the running chat and kept in the config file,
and the first screen's link once the history holds enough replies."""

from __future__ import annotations

from dataclasses import replace

import pytest

from spectui.advise.advice import advise
from spectui.advise.chats import chat_replies, read_conversations
from spectui.advise.costs import CostProfile, cached_profile_path, profile_json
from spectui.core.engine import Capabilities
from spectui.settings.config import ChatConfig, load_config
from spectui.store.history import Store
from spectui.tui.advise_work import recommended
from spectui.tui.screens.advise import AdviseScreen

from advise_chats import save_chat
from fake_engines import PlanEngine, factory_for
from tui_helpers import notices, ready, send, wait_for

pytestmark = [pytest.mark.real_weights, pytest.mark.usefixtures("fetched_ggufs")]  # SmolLM2's tokenizer, from the cache

SIZE = (120, 44)
MODEL = "smollm2-135m"
CODE = "def area(width, height):\n    return width * height\n"
COSTS = CostProfile(MODEL, "test", 0.01, {1: 1.0, 2: 1.3, 3: 1.6}, piece=3,
                    draft_seconds={"suffix": 0.0001, "ngram": 0.0001})
SWITCHES = Capabilities(live_controls=True, method_switch=True)


@pytest.fixture(scope="module")
def tokenizer():
    from spectui.advise.measure import cached_gguf
    from spectui.models.registry import resolve
    from spectui.models.tokenizer_json import JsonTokenizer

    return JsonTokenizer(cached_gguf(resolve(MODEL)).tokenizer)


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    folder = tmp_path / "config"
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture
def costs_kept(tmp_path):
    """This machine's costs kept beside the app's history, as advise keeps them."""
    kept = cached_profile_path(tmp_path, MODEL, "test")
    kept.parent.mkdir(parents=True)
    kept.write_text(profile_json(COSTS))
    return kept


def copying_chats(path, tokenizer) -> None:
    """Three chats that copy their prompt's code (T = 0) and one sampled at T 0.7."""
    for opening in ("Repeat this code", "Show this again", "Once more"):
        save_chat(path, tokenizer, f"{opening}:\n{CODE}", f"Here it is:\n{CODE}")
    save_chat(path, tokenizer, "Say hello.", "Hello there!", temperature=0.7)


@pytest.fixture
def history(tmp_path, tokenizer, costs_kept):
    path = tmp_path / "history.sqlite3"
    copying_chats(path, tokenizer)
    return path


def expected_advice(path, tokenizer, conversation_id=None):
    """The library's own answer over the same history and costs: what the screen must show."""
    conversations = read_conversations(path, conversation_id=conversation_id)
    selection = chat_replies(conversations, tokenizer, max(tokenizer.get_vocab().values()) + 1)
    return advise(selection, COSTS)


def chat_app(make_app, method: str = "ngram", k: int | str = 2, capabilities: Capabilities = SWITCHES, **options):
    engine = PlanEngine([None, None], capabilities=capabilities, method=method)
    config = ChatConfig(model=MODEL, engine="scripted", method=method, k=k, temperature=0.0)
    return make_app(factory_for(engine), config, **options)


async def advice_shown(pilot) -> AdviseScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, AdviseScreen))
    screen = pilot.app.screen
    await wait_for(pilot, lambda: screen.scope in screen.results)
    await pilot.pause()
    return screen


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector).render())


def table_rows(screen) -> list[list[str]]:
    table = screen.query_one("#advise-table")
    return [[str(cell) for cell in table.get_row_at(index)] for index in range(table.row_count)]


async def test_ctrl_f2_shows_the_replayed_table_and_the_recommendation(make_app, history, tokenizer):
    expected = expected_advice(history, tokenizer)
    app = chat_app(make_app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        screen = await advice_shown(pilot)
        rows = table_rows(screen)
        assert len(rows) == 1 + 4 * 9  # k 0, then every copy drafter × k 1-8 and auto
        assert rows[0][:3] == ["plain", "0", "×1.00"]
        by_arm = {(row[0], row[1]): row for row in rows}
        for arm in expected.arms:  # the library's numbers, every row
            row = by_arm[(arm.drafter, str(arm.k))]
            assert row[2] == f"×{arm.speedup:.2f}" and arm.replies == 3 and len(row) == 7, row
        assert by_arm[("suffix", "4")][2] != "×1.00"  # a real replay: copying the prompt's code pays
        assert {row[3] for row in rows} == {"–"}  # the kept costs hold no llama.cpp plain step
        # every arm rests on the same replies: said once under the table, not in two columns that
        # pushed 'vs llama.cpp' off a 100-column screen ('vs llama.cp', '×1.0')
        assert "Every row: 3 replies" in text_of(screen, "#advise-costs")
        table = screen.query_one("#advise-table")
        assert table.virtual_size.width <= 96, table.virtual_size  # within a 100-column screen's frame
        assert "replayed at T = 0" in text_of(screen, "#advise-predicted")
        assert text_of(screen, "#advise-recommendation") == expected.recommendation()
        assert "Left out: 1 sampled at T > 0" in text_of(screen, "#advise-costs")
        assert "Costs of smollm2-135m on test: plain step 10.0 ms" in text_of(screen, "#advise-costs")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.chat_screen)


async def test_with_llama_cpps_plain_step_kept_each_row_shows_its_speed_over_it(make_app, history, costs_kept, tokenizer):
    from dataclasses import replace

    anchored = replace(COSTS, llamacpp_plain_seconds=0.012)  # k 0 is ×1.20 llama.cpp's
    costs_kept.write_text(profile_json(anchored))
    conversations = read_conversations(history)
    expected = advise(chat_replies(conversations, tokenizer, max(tokenizer.get_vocab().values()) + 1), anchored)
    app = chat_app(make_app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        screen = await advice_shown(pilot)
        rows = table_rows(screen)
        assert rows[0][3] == "×1.20"
        by_arm = {(row[0], row[1]): row for row in rows}
        for arm in expected.arms:
            assert by_arm[(arm.drafter, str(arm.k))][3] == f"×{expected.vs_llamacpp(arm):.2f}"
        assert "vs llama.cpp plain" in text_of(screen, "#advise-recommendation")


async def test_the_palette_and_slash_advise_open_it(make_app, history):
    app = chat_app(make_app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "/advise")
        await advice_shown(pilot)
        await pilot.press("q")
        await wait_for(pilot, lambda: app.screen is app.chat_screen)
        assert app.chat_screen.box.prompt.text == ""  # a command, never sent to the model
        assert not app.chat_screen.session.transcript.entries
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        await pilot.press(*"which drafter")
        await pilot.pause(0.5)  # the palette searches in a worker
        await pilot.press("down", "enter")
        await advice_shown(pilot)


async def test_t_shows_this_chat_only(make_app, history, tokenizer):
    store = Store(history)
    resumed = store.load_conversation(2)
    store.close()
    expected = expected_advice(history, tokenizer, conversation_id=2)
    app = chat_app(make_app, resume=resumed)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        screen = await advice_shown(pilot)
        assert "Every row: 3 replies" in text_of(screen, "#advise-costs")
        await pilot.press("t")
        await wait_for(pilot, lambda: "this chat" in screen.results)
        await pilot.pause()
        assert "Replies of this chat" in text_of(screen, "#advise-scope")
        assert len(table_rows(screen)) == 37 and "Every row: 1 reply," in text_of(screen, "#advise-costs")
        assert text_of(screen, "#advise-recommendation") == expected.recommendation()
        await pilot.press("t")  # back: the whole history's, as computed before
        assert "Every row: 3 replies" in text_of(screen, "#advise-costs")


async def test_a_new_chat_has_no_replies_of_its_own_to_replay(make_app, history):
    app = chat_app(make_app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        screen = await advice_shown(pilot)
        await pilot.press("t")
        await pilot.pause()
        assert "This chat has no saved reply yet" in text_of(screen, "#advise-status")
        assert not screen.query_one("#advise-table").display
        assert not screen.check_action("apply", ())


async def test_a_applies_the_recommendation_and_keeps_it(make_app, history, tokenizer, config_dir):
    choice = recommended(expected_advice(history, tokenizer))
    assert choice.method == "suffix"  # the copies pay: a drafter, not k 0
    app = chat_app(make_app, method="ngram", k=2)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        screen = await advice_shown(pilot)
        assert screen.check_action("apply", ()) and "a: run suffix" in text_of(screen, "#advise-apply")
        await pilot.press("a")
        await pilot.pause()
        assert not screen.check_action("apply", ())  # applied: the key is gone
        assert "Applied: suffix" in text_of(screen, "#advise-apply")
        await pilot.press("escape")
        chat, live = app.chat_screen, app.host.live
        # the engine is switched to the chosen method, as the model screen switches it
        await wait_for(pilot, lambda: app.host.engine is not None and chat.session.config.method == "suffix")
        assert (live.auto, chat.session.config.k) == (True, "auto") if choice.k == "auto" else (live.k, chat.session.config.k) == (choice.k, choice.k)
        assert any("kept in" in note for note in notices(app))
    kept = load_config(config_dir / "config.toml")  # the next chat starts with them
    assert (kept.method, kept.k, kept.history_drafting) == ("suffix", choice.k, choice.history_drafting)


async def test_no_apply_where_the_recommendation_already_runs(make_app, history, tokenizer):
    choice = recommended(expected_advice(history, tokenizer))
    app = chat_app(make_app, method="suffix", k=choice.k)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        screen = await advice_shown(pilot)
        assert not screen.check_action("apply", ())
        assert "already runs suffix" in text_of(screen, "#advise-apply")


async def test_no_apply_where_the_engine_cannot_switch_method(make_app, history, config_dir):
    app = chat_app(make_app, method="ngram", capabilities=Capabilities(live_controls=True))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        screen = await advice_shown(pilot)
        assert not screen.check_action("apply", ())
        assert "cannot switch method" in text_of(screen, "#advise-apply")
        await pilot.press("a")  # does nothing
        await pilot.pause()
        assert app.host.info.method == "ngram" and not (config_dir / "config.toml").exists()


async def test_the_first_screen_links_to_advise_once_there_are_enough_replies(make_app, tmp_path, tokenizer, costs_kept):
    path = tmp_path / "history.sqlite3"
    save_chat(path, tokenizer, "One", "Reply one.")
    save_chat(path, tokenizer, "Two", "Reply two.")
    save_chat(path, tokenizer, "Hot", "Sampled.", temperature=0.7)  # not replayable: not counted
    app = chat_app(make_app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert not app.chat_screen.query("#first-advise")  # two replies at T = 0: not yet
    save_chat(path, tokenizer, "Three", "Reply three.")
    app = chat_app(make_app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        link = app.chat_screen.query_one("#first-advise")
        assert "Your 3 saved replies can say: Ctrl+F2 or /advise" in str(link.render())
        await pilot.click("#first-advise")
        await wait_for(pilot, lambda: isinstance(app.screen, AdviseScreen))


async def test_costs_not_measured_yet_are_measured_with_progress_and_kept(make_app, tmp_path, tokenizer, monkeypatch):
    """No kept profile: the screen says it measures this machine's costs (the library's
    this_machine_profile, its measurement stood in for here: the real one loads the model),
    then shows the table, and the profile is kept for the next time."""
    import threading

    import spectui.advise.measure as measure

    path = tmp_path / "history.sqlite3"
    copying_chats(path, tokenizer)
    go_on = threading.Event()

    def measured(model, context_ids, progress=None, engine=None):
        assert engine is None  # the chat runs another target: a copy is loaded, and the line says why
        assert model.name == MODEL and len(context_ids) > 20  # timed at a conversation's length
        progress("verify widths", 3, 7)
        go_on.wait(20)
        return COSTS

    monkeypatch.setattr(measure, "measure_profile", measured)
    app = chat_app(make_app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        await wait_for(pilot, lambda: isinstance(app.screen, AdviseScreen))
        screen = app.screen
        await wait_for(pilot, lambda: "verify widths" in text_of(screen, "#advise-status"))
        assert ("measuring this machine's costs for smollm2-135m on a copy of it loaded for this (the chat runs"
                " fake-target), once") in text_of(screen, "#advise-status")
        assert screen.query_one("#advise-progress").display
        go_on.set()
        screen = await advice_shown(pilot)
        assert len(table_rows(screen)) == 37
    assert cached_profile_path(tmp_path, MODEL, "test").is_file()


class TimingEngine(PlanEngine):
    """The chat's engine on the advise's target, timing its decodes: each call takes the next
    neighbour share of `busy` (other processes' share of the cores meanwhile)."""

    def __init__(self, busy: list[float], gated: bool = False) -> None:
        super().__init__([None, None], capabilities=replace(SWITCHES, times_decodes=True), method="ngram", gated=gated)
        self.info = replace(self.info, target=MODEL)
        self.busy, self.timed_after = busy, []

    def time_decodes(self, context_ids, widest, rounds, progress=None):
        from spectui.core.engine import DecodeTimings

        self.timed_after.append(len(self.steps))  # the steps of the replies before
        return DecodeTimings({1: [0.01], 2: [0.013], 3: [0.016]}, len(context_ids) - 3, 3, "test",
                             neighbour_share=self.busy.pop(0))


def no_second_copy(monkeypatch) -> None:
    import spectui.advise.measure as measure
    import spectui.engines.ggml.lib as lib
    import spectui.engines.ggml.load as load

    def loaded(*args, **kwargs):
        raise AssertionError("the target was loaded a second time")

    monkeypatch.setattr(load, "load_ggml_engine", loaded)
    monkeypatch.setattr(measure, "llamacpp_plain_step", loaded)
    monkeypatch.setattr(lib, "library_problem", lambda: None)


async def test_costs_are_measured_on_the_chats_engine_once_its_reply_ended(make_app, tmp_path, tokenizer, monkeypatch):
    """The screen loaded a second copy of the target to measure (a 1.5B twice in memory), beside
    the chat's reply: now the chat's engine times its decodes, after the reply in flight."""
    copying_chats(tmp_path / "history.sqlite3", tokenizer)
    no_second_copy(monkeypatch)
    engine = TimingEngine([0.05], gated=True)
    app = make_app(factory_for(engine), ChatConfig(model=MODEL, engine="scripted", method="ngram", k=2, temperature=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "a reply in flight")
        await wait_for(pilot, lambda: len(engine.steps) == 1)
        await pilot.press("ctrl+f2")
        await wait_for(pilot, lambda: isinstance(app.screen, AdviseScreen))
        screen = app.screen
        await wait_for(pilot, lambda: "waiting for the reply to end" in text_of(screen, "#advise-status"))
        assert "for smollm2-135m on the chat's engine" in text_of(screen, "#advise-status")
        engine.release(1)
        screen = await advice_shown(pilot)
        assert engine.timed_after == [2] and len(table_rows(screen)) == 37  # timed once the reply had ended
        assert "Costs of smollm2-135m on test: plain step 10.0 ms" in text_of(screen, "#advise-costs")
    assert cached_profile_path(tmp_path, MODEL, "test").is_file()


async def test_costs_not_measured_on_a_busy_machine_say_what_to_do_here_and_r_measures_again(make_app, tmp_path, tokenizer,
                                                                                          monkeypatch):
    """The screen refused with the command line's advice ('give --costs FILE'): in the chat it
    says what can be done there, and r measures again."""
    copying_chats(tmp_path / "history.sqlite3", tokenizer)
    no_second_copy(monkeypatch)
    engine = TimingEngine([0.6, 0.05])
    app = make_app(factory_for(engine), ChatConfig(model=MODEL, engine="scripted", method="ngram", k=2, temperature=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        screen = await advice_shown(pilot)
        status = text_of(screen, "#advise-status")
        assert status == ("this machine's costs were not measured: other processes took 60% of the cores meanwhile."
                          " r measures again, once the machine is quiet."), status
        assert "--costs" not in status and screen.check_action("measure_again", ())
        assert not screen.query_one("#advise-table").display
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.advice is not None)
        await pilot.pause()
        assert len(table_rows(screen)) == 37 and not screen.check_action("measure_again", ())
        assert engine.timed_after == [0, 0]


def test_the_advise_screen_snapshot(snap_compare, make_app, history):
    """The table, the costs, the recommendation and the apply line over a frozen clock."""
    async def open_advise(pilot) -> None:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        await advice_shown(pilot)

    app = chat_app(make_app, clock=lambda: 0.0)
    assert snap_compare(app, run_before=open_advise, terminal_size=SIZE)


def test_where_no_drafter_pays_the_recommendation_is_k_0_and_keeps_the_method(history, tokenizer):
    from dataclasses import replace

    from spectui.tui.advise_work import config_for, kept_values

    dear = replace(COSTS, verify={1: 1.0, 2: 3.0, 3: 5.0})  # a verify row as dear as two plain steps
    selection = chat_replies(read_conversations(history), tokenizer, max(tokenizer.get_vocab().values()) + 1)
    choice = recommended(advise(selection, dear))
    assert choice is not None and (choice.method, choice.k, choice.words) == (None, 0, "k 0 (plain decoding)")
    assert kept_values(choice) == {"k": 0}
    config = config_for(choice, ChatConfig(method="suffix", k="auto"))
    assert (config.method, config.k) == ("suffix", 0)


async def test_with_history_off_the_key_says_why_and_opens_nothing(make_app):
    app = chat_app(make_app, store=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        await pilot.pause()
        assert app.screen is app.chat_screen
        assert any(note.startswith("History is off") and "advise" in note for note in notices(app))
        assert not app.chat_screen.query("#first-advise")


async def test_a_failing_replay_is_one_line_on_the_screen_and_the_chat_goes_on(make_app, history, monkeypatch):
    import spectui.advise.advice as library

    def broken(*args, **kwargs):
        raise RuntimeError("replay broke\nsecond line")

    monkeypatch.setattr(library, "advise", broken)
    app = chat_app(make_app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+f2")
        screen = await advice_shown(pilot)
        status = text_of(screen, "#advise-status")
        assert status.startswith("advise failed: ") and "replay broke" in status and "\n" not in status
        assert not screen.query_one("#advise-table").display and not screen.check_action("apply", ())
        await pilot.press("escape")
        await send(pilot, "still here")
        await wait_for(pilot, lambda: len(app.chat_screen.session.transcript.entries) >= 2)


async def test_a_k_of_its_own_is_applied_live_without_a_new_engine(make_app, history, tokenizer, config_dir):
    choice = recommended(expected_advice(history, tokenizer))
    assert choice is not None and choice.method == "suffix" and choice.k != 8
    app = chat_app(make_app, method="suffix", k=8)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        engine = app.host.engine
        await pilot.press("ctrl+f2")
        await advice_shown(pilot)
        await pilot.press("a")
        await pilot.pause()
        assert app.host.engine is engine and app.host.state.wanted_swap is None  # the same engine, k live
        assert (app.host.live.k, app.host.live.auto, app.chat_screen.session.config.k) == (choice.k, False, choice.k)
    kept = load_config(config_dir / "config.toml")
    assert (kept.method, kept.k) == ("suffix", choice.k)
