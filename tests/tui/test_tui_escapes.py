"""Nothing a model, a server or the history holds is obeyed by the terminal: the chat shows
control characters and escape sequences as symbols (␛) and stores them as they came.

"What reaches the terminal" is read as Textual writes it: every text segment of a full
screen update (styles and cursor moves are Textual's own control segments).
"""

from __future__ import annotations

import asyncio
import re

from hypothesis import HealthCheck, given, settings, strategies as st

from spectui.core.events import Done, Source, Step
from spectui.settings.config import ChatConfig
from spectui.store import Store, export_markdown

from fake_engines import StepsEngine, factory_for
from tui_helpers import ready, reply_done, send, wait_for

# Every C0 control but newline (a segment never holds one), DEL and C1: ESC starts CSI
# (ESC [), OSC (ESC ]), DCS (ESC P), APC (ESC _); U+009B is a one-character CSI. The bidi
# controls reorder the line as laid out (RLO makes "safe<RLO>txt.exe" read "safeexe.txt").
OBEYED = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
ATTACK = (
    "\x1b]0;pwned\x07\x1b[2J\x1b[31m\x9b2J\x1bP+q\x1b\\\x1b_apc\x1b\\\x1b]52;c;aGk=\x07"
    " safe\u202etxt.exe \u2067\u200f\u061c"
)


def text_engine(texts, model_name: str = "fake-target") -> StepsEngine:
    """Streams the given texts, one Step (one target token) each; names itself `model_name`."""
    steps = [Step((number,), (Source.TARGET,), text, pieces=(text,)) for number, text in enumerate(texts)]
    return StepsEngine([*steps, Done("stop", seconds=0.1)], target=model_name, draft=None, method="none")


def terminal_text(app) -> list[str]:
    """The text of every segment a full redraw writes to the terminal."""
    update = app.screen._compositor.render_update(full=True)
    return [
        segment.text for line in update.strips for strip in line for segment in strip if segment.control is None
    ]


def obeyed(app) -> list[str]:
    return [text for text in terminal_text(app) if OBEYED.search(text)]


async def chat_once(pilot, prompt: str) -> None:
    await send(pilot, prompt)
    await reply_done(pilot)
    await pilot.pause()


async def test_an_attack_from_the_model_is_shown_not_obeyed_and_stored_exactly(make_app, tmp_path):
    engine = text_engine(["Hello ", ATTACK, " bye\r\nnext line"])
    app = make_app(factory_for(engine), ChatConfig(engine="server"))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await chat_once(pilot, "user typed \x1b[2J too")
        assert obeyed(app) == []
        shown = "".join(terminal_text(app))
        assert "␛]0;pwned␇␛[2J" in shown  # visible, not dropped
        await pilot.press(app.first_key("markdown"))
        await pilot.pause()
        assert app.chat_screen.query("ReplyView").last().markdown_shown
        assert obeyed(app) == []
        conversation_id = app.chat_screen.session.transcript.conversation_id
    store = Store(tmp_path / "history.sqlite3")
    conversation = store.load_conversation(conversation_id)
    store.close()
    assert conversation.messages[0].content == "user typed \x1b[2J too"
    assert conversation.messages[1].content == "Hello " + ATTACK + " bye\r\nnext line"  # stored byte-exact


def test_the_markdown_export_shows_what_the_screen_shows(tmp_path):
    store = Store(tmp_path / "history.sqlite3")
    conversation_id = store.new_conversation({"k": 4})
    store.add_message(conversation_id, "user", "question " + ATTACK)
    reply = store.add_message(conversation_id, "assistant", "")
    store.finish_message(reply, "a" + ATTACK, "stop")
    markdown = export_markdown(store.load_conversation(conversation_id))
    store.close()
    assert not OBEYED.search(markdown.replace("\n", "")), ascii(markdown)
    assert "safe\\u202etxt.exe" in markdown


async def test_a_pasted_escape_is_shown_in_the_message_box_and_kept_in_its_value(make_app):
    from textual import events

    app = make_app(factory_for(text_engine(["ok"])), ChatConfig(engine="server"))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        prompt = app.chat_screen.box.prompt
        prompt.focus()
        prompt.post_message(events.Paste("look " + ATTACK))
        await pilot.pause()
        await pilot.pause()
        assert prompt.value == "look " + ATTACK
        assert obeyed(app) == []
        shown = "".join(terminal_text(app))
        assert "look ␛]0;pwned" in shown


async def test_a_history_holding_escapes_is_shown_safely_on_resume(make_app, tmp_path):
    store = Store(tmp_path / "history.sqlite3")
    conversation_id = store.new_conversation({"k": 4})
    store.add_message(conversation_id, "user", "question " + ATTACK)
    reply = store.add_message(conversation_id, "assistant", "")
    step = Step((1, 2), (Source.DRAFT, Source.BONUS), "a" + ATTACK, pieces=("a", ATTACK))
    store.add_step(reply, 0, step, ["a", ATTACK], "", 0.1)
    store.finish_message(reply, "a" + ATTACK, "error", error="server said \x1b]0;x\x07")
    conversation = store.load_conversation(conversation_id)
    store.close()

    app = make_app(factory_for(text_engine(["ok"])), resume=conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: app.chat_screen.query("ReplyView"))
        await pilot.pause()
        shown = "".join(terminal_text(app))
        assert shown.count("␛]0;pwned␇␛[2J") == 3  # the question, the reply, the resumed note
        assert obeyed(app) == []


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    replies=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=12),
    raw=st.binary(max_size=80),
    saved=st.lists(st.text(max_size=40), min_size=2, max_size=6),
)
def test_fuzz_server_text_and_history_content_never_reach_the_terminal_raw(make_app, tmp_path, replies, raw, saved):
    # Bytes as a server could send them, decoded the way the SSE reader does.
    texts = replies + [raw.decode("utf-8", "replace"), ATTACK]
    store = Store(tmp_path / "fuzz.sqlite3")
    conversation_id = store.new_conversation({"k": 4})
    store.add_message(conversation_id, "user", saved[0])
    reply = store.add_message(conversation_id, "assistant", "")
    for index, text in enumerate(saved[1:]):
        store.add_step(reply, index, Step((index,), (Source.DRAFT,), text, pieces=(text,)), [text], text[:3], 0.1)
    store.finish_message(reply, "".join(saved[1:]), "stop")
    conversation = store.load_conversation(conversation_id)
    store.close()

    async def scenario():
        app = make_app(factory_for(text_engine(texts)), resume=conversation)
        async with app.run_test(size=(90, 40)) as pilot:
            await ready(pilot)
            await chat_once(pilot, texts[0])
            assert obeyed(app) == [], obeyed(app)
            await pilot.press(app.first_key("markdown"))
            await pilot.pause()
            assert obeyed(app) == [], obeyed(app)

    asyncio.run(scenario())
