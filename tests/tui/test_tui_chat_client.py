"""Pilot tests of the chat client's keys (issue 33): the message box, copy, regenerate and
edit, the model screen, the system prompt, the command palette, code blocks while streaming."""

from __future__ import annotations

import base64
import re

import pytest
from textual import events

from spectui.core.events import Source
from spectui.settings.config import DEFAULT_KEYS, KEY_DESCRIPTIONS, ChatConfig
from spectui.store import Store
from spectui.tui.fences import code_blocks
from spectui.tui.keys import ACTIONS, COMPARE_ONLY, key_display
from spectui.tui.widgets.conversation import ReplyView, UserMessage

from fake_engines import PlanEngine, TextEngine, factory_for
from tui_helpers import notices, ready, reply_done, send, wait_for

SIZE = (110, 36)
D, R, B, T = Source.DRAFT, Source.RECOVERED, Source.BONUS, Source.TARGET
# A reply with two code blocks; the second is cut off (the reply stopped at max_tokens).
CODE_REPLY = [
    [("Here", T)],
    [(" is", D), (" a", D), (" function", R)],
    [(":\n", D), ("```", D), ("python", B)],
    [("\n", T)],
    [("def", D), (" add", D), ("(a,", D), (" b):", R)],
    [("\n    ", D), ("return", D), (" a", D), (" +", D), (" b", B)],
    [("\n", T), ("```", D), ("\n", R)],
    [("Run", T), (" it", D), (":", R)],
    [("\n", T), ("```", D), ("bash", R), ("\n", D)],
    [("python", T), (" add.py", D), (" 1", R)],
]
ADD_BLOCK = "def add(a, b):\n    return a + b"


@pytest.fixture
def osc52(monkeypatch):
    """What copying writes to the terminal, decoded: one text per OSC 52 sequence (tmux's
    passthrough wrapping unwrapped). The system clipboard is left alone."""
    monkeypatch.setattr("spectui.tui.clipboard.system_clipboard", lambda text: False)
    monkeypatch.delenv("TMUX", raising=False)
    written: list[str] = []

    def attach(app) -> list[str]:
        app._driver.write = written.append
        return written

    return attach


def decoded(written: list[str]) -> list[str]:
    payloads = re.findall(r"\x1b\]52;c;([A-Za-z0-9+/=]*)\x07", "".join(written).replace("\x1b\x1b", "\x1b"))
    return [base64.b64decode(payload).decode("utf-8") for payload in payloads]


# --- the message box --------------------------------------------------------------------


async def test_a_pasted_three_line_block_is_one_message(make_app):
    engine = PlanEngine([None, 1])

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        chat.box.prompt.focus()
        # A terminal's bracketed paste, with its newlines as CR, as the driver hands it to the app.
        app.post_message(events.Paste("def f(x):\r    y = x * 2\r    return y"))
        await pilot.pause()
        assert not chat.query(UserMessage)  # a paste never sends
        await pilot.press("enter")
        await reply_done(pilot)
        assert [m.text for m in chat.query(UserMessage)] == ["def f(x):\n    y = x * 2\n    return y"]
        assert engine.messages_seen == [[{"role": "user", "content": "def f(x):\n    y = x * 2\n    return y"}]]
        assert chat.box.prompt.text == ""


async def test_ctrl_j_and_shift_enter_start_a_line_and_enter_sends(make_app):
    engine = PlanEngine([None])

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("o", "n", "e", "ctrl+j", "t", "w", "o", "shift+enter", "3")
        assert app.chat_screen.box.prompt.text == "one\ntwo\n3"
        assert engine.messages_seen == []
        await pilot.press("enter")
        await reply_done(pilot)
        assert engine.messages_seen[0][-1]["content"] == "one\ntwo\n3"
        # The footer (when it has room for the newline key) shows both keys.
        await pilot.pause()
        newline = next(b.binding for b in app.screen.active_bindings.values() if b.binding.id == "newline")
        assert app.get_key_display(newline) == "⇧⏎/^j"


async def test_up_recalls_this_chats_prompts_and_down_comes_back(make_app):
    engine = PlanEngine([None])

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        prompt = app.chat_screen.box.prompt
        for text in ("first", "second\nline"):
            await send(pilot, text)
            await reply_done(pilot)
        await pilot.press("d", "r", "a", "f", "t")
        await pilot.press("up")
        assert prompt.text == "second\nline"
        await pilot.press("up")  # the cursor is on the recalled text's last line: up moves within it
        assert prompt.text == "second\nline"
        await pilot.press("up")
        assert prompt.text == "first"
        await pilot.press("up")  # nothing older: it stays
        assert prompt.text == "first"
        await pilot.press("down")
        assert prompt.text == "second\nline"
        await pilot.press("down")
        assert prompt.text == "draft"  # what was being written comes back
        await pilot.press("ctrl+n")  # a new chat has no earlier prompts
        prompt.value = ""
        await pilot.press("up")
        assert prompt.text == ""


async def test_the_chats_keys_win_over_the_text_areas(make_app):
    engine = PlanEngine([None])

    app = make_app(factory_for(engine), ChatConfig(k=4, temperature=0.5))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.chat_screen.box.prompt.value = "some text"
        await pilot.press("f6", "f7")  # a text area selects a line and all with these
        assert app.host.live.k == 5 and app.host.live.temperature == pytest.approx(0.4)
        assert app.chat_screen.box.prompt.text == "some text"


async def test_a_long_line_typed_as_keystrokes_is_rewrapped_once_per_burst_not_per_key(make_app):
    # A paste the terminal does not bracket: one Key per character, posted as fast as the
    # driver reads them. Each edit re-wraps its whole line, so one edit per key was quadratic
    # (45 KB took minutes); a burst goes in as one edit.
    size = 20_000
    text = ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        prompt = app.chat_screen.box.prompt
        prompt.focus()
        await pilot.pause()
        rewrapped = []  # the length of each line an edit re-wrapped
        wrap_range = prompt.wrapped_document.wrap_range

        def counting(start, old_end, new_end):
            rewrapped.extend(len(prompt.document[row]) for row in range(start[0], new_end[0] + 1))
            return wrap_range(start, old_end, new_end)

        prompt.wrapped_document.wrap_range = counting
        for char in text:
            app.post_message(events.Key("space" if char == " " else char, char))
        bound = 4 * size  # linear in what was typed; one edit per key re-wraps ~size² / 2
        await wait_for(pilot, lambda: len(prompt.text) == size or sum(rewrapped) > bound, timeout=300)
        assert sum(rewrapped) <= bound, f"{len(rewrapped)} re-wraps of {sum(rewrapped)} characters"
        assert prompt.text == text
        await pilot.press("x", "backspace", "enter")  # the keys after a burst still act, in order
        await reply_done(pilot)
        assert [m.text for m in app.chat_screen.query(UserMessage)] == [text]


async def test_a_key_press_applies_no_keymap_for_the_keys_left_as_they_are(make_app, monkeypatch):
    # Textual applies the app's keymap to the focused chain on every key press, quadratic in
    # the bindings (~3 ms a key when the keymap restated every key): only changes go in it.
    from textual.binding import BindingsMap

    applied = []
    apply_keymap = BindingsMap.apply_keymap
    monkeypatch.setattr(BindingsMap, "apply_keymap", lambda self, keymap: applied.append(dict(keymap)) or apply_keymap(self, keymap))
    for changed in ({}, {"copy_reply": "ctrl+y"}):
        app = make_app(factory_for(PlanEngine([None])), ChatConfig(keys=dict(DEFAULT_KEYS, **changed)))
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            app.chat_screen.box.prompt.focus()
            applied.clear()
            await pilot.press(*"hello")
            assert app.chat_screen.box.prompt.text == "hello"
            assert all(keymap == changed for keymap in applied), applied[:1]  # only what the user changed
            if not changed:
                assert applied == []


# --- copy --------------------------------------------------------------------------------


async def test_copy_sends_exactly_the_replys_text_through_osc52(make_app, osc52, monkeypatch):
    engine = TextEngine(CODE_REPLY, finish="length")

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        written = osc52(app)
        await ready(pilot)
        await send(pilot, "write add")
        await reply_done(pilot)
        reply_text = "".join(piece for step in CODE_REPLY for piece, _ in step)
        stored = app.store.load_conversation(app.store.latest_conversation_id()).messages[-1].content
        assert stored == reply_text
        await pilot.press("ctrl+l")
        assert decoded(written) == [reply_text]
        assert f"Copied reply 1 · {len(reply_text)} chars" in notices(app)
        assert app.clipboard == reply_text  # Textual's own: Ctrl+V in the message box pastes it
        # Code blocks: the last first, then the one before, round.
        written.clear()
        await pilot.press("ctrl+f")
        await pilot.press("ctrl+f")
        await pilot.press("ctrl+f")
        assert decoded(written) == ["python add.py 1", ADD_BLOCK, "python add.py 1"]
        assert "Copied bash block 2 of 2 of reply 1 · 1 line" in notices(app)
        assert "Copied python block 1 of 2 of reply 1 · 2 lines" in notices(app)
        # Inside tmux the same text also goes wrapped for tmux's passthrough.
        monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")
        written.clear()
        await pilot.press("ctrl+l")
        assert any(chunk.startswith("\x1bPtmux;\x1b\x1b]52;c;") for chunk in written)
        assert decoded(written) == [reply_text, reply_text]


async def test_under_tmuxs_default_set_clipboard_the_copy_is_not_claimed(make_app, osc52, monkeypatch):
    """Issue 59: Ctrl+L said "Copied" under tmux's default `set-clipboard external`, where
    nothing reached the clipboard. It now says the text was sent and why it may not arrive;
    with set-clipboard on (or passthrough allowed) it says Copied."""
    options = {"set-clipboard": "external", "allow-passthrough": "off"}
    asked = []
    monkeypatch.setattr("spectui.tui.clipboard.tmux_option", lambda name: asked.append(name) or options.get(name))
    app = make_app(factory_for(TextEngine(CODE_REPLY, finish="length")))
    async with app.run_test(size=SIZE) as pilot:
        written = osc52(app)
        await ready(pilot)
        await send(pilot, "write add")
        await reply_done(pilot)
        await pilot.press("ctrl+l")
        assert asked == []  # outside tmux nobody asks it
        assert any(n.startswith("Copied reply 1") for n in notices(app))
        monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")
        for key, what in (("ctrl+l", "reply 1"), ("ctrl+f", "bash block 2 of 2 of reply 1")):
            app.clear_notifications()
            await pilot.press(key)
            said = notices(app)
            assert decoded(written) and not any(n.startswith("Copied") for n in said), said
            assert any(n.startswith(f"Sent {what}") and "tmux's set-clipboard is external: it may not reach your clipboard" in n
                       for n in said), said
        options["set-clipboard"] = "on"
        app.clear_notifications()
        await pilot.press("ctrl+l")
        assert any(n.startswith("Copied reply 1") for n in notices(app)), notices(app)


def test_a_tmux_that_does_not_answer_says_nothing():
    import subprocess

    from spectui.tui.clipboard import tmux_blocks, tmux_option

    def slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    assert tmux_option("set-clipboard", run=slow) is None
    answered = subprocess.CompletedProcess(["tmux"], 0, "external\n", "")
    assert tmux_option("set-clipboard", run=lambda *a, **k: answered) == "external"
    assert "could not be read" in (tmux_blocks({"TMUX": "x"}, option=lambda name: None) or "")
    assert tmux_blocks({"TMUX": "x"}, option=lambda name: "all" if name == "allow-passthrough" else "off") is None


async def test_a_picked_reply_is_the_one_copied(make_app, osc52):
    engine = PlanEngine([None, 1])

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        written = osc52(app)
        await ready(pilot)
        for text in ("one", "two", "three"):
            await send(pilot, text)
            await reply_done(pilot)
        views = list(app.chat_screen.query(ReplyView))
        await pilot.press("shift+tab")  # from the message box: the last reply
        assert app.focused is views[2]
        await pilot.press("up", "up", "up")  # no further than the first
        assert app.focused is views[0]
        await pilot.press("down")
        assert app.focused is views[1]
        await pilot.press("ctrl+l")
        assert decoded(written) == [views[1].token_view.text]
        assert any(n.startswith("Copied reply 2 ·") for n in notices(app))
        await pilot.press("escape")  # back to the message box; the copy keys take the last reply again
        assert app.focused is app.chat_screen.box.prompt
        await pilot.press("ctrl+l")
        assert decoded(written)[-1] == views[2].token_view.text
        await pilot.press("ctrl+f")
        assert "Reply 3 has no code block." in notices(app)


# What a hostile server can put in a reply: OSC (retitle), CSI (clear), a C1 CSI, and an
# override that makes "safe<RLO>txt.exe" read "safeexe.txt".
HOSTILE = "\x1b]0;pwned\x07 and \x1b[2J then \x9b2J \x1b]52;c;aGk=\x07 safe\u202etxt.exe\u2066\u200f"
CONTROL_OR_BIDI = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


async def test_the_clipboard_gets_what_the_screen_shows_not_a_replys_escapes(make_app, osc52, monkeypatch):
    reply = [[("Look: ", T), (HOSTILE, D)], [("\n```sh\necho ", T), (HOSTILE, B), ("\n```\n", T)]]
    system: list[str] = []
    monkeypatch.setattr("spectui.tui.clipboard.system_clipboard", lambda text: system.append(text) or True)
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")

    app = make_app(factory_for(TextEngine(reply)))
    async with app.run_test(size=SIZE) as pilot:
        written = osc52(app)
        await ready(pilot)
        await send(pilot, "hello")
        await reply_done(pilot)
        await pilot.press("ctrl+l", "ctrl+f")
        copies = decoded(written)  # the reply and its code block, each as OSC 52 and for tmux
        assert len(copies) == 4 and len(system) == 2
        for text in copies + system + [app.clipboard]:
            assert not CONTROL_OR_BIDI.search(text), ascii(text)
            assert "␛]0;pwned␇" in text and "safe\\u202etxt.exe" in text  # shown, as on the screen
        # Textual's own copies (a selection in the message box) go the same way.
        written.clear()
        app.copy_to_clipboard("pasted " + HOSTILE)
        assert decoded(written) and not CONTROL_OR_BIDI.search(decoded(written)[0] + app.clipboard)


# --- regenerate and edit -----------------------------------------------------------------


async def test_regenerate_uses_the_settings_the_reply_was_made_with(make_app):
    engine = PlanEngine([None, 2, 2])

    app = make_app(factory_for(engine), ChatConfig(k=3, temperature=0.3, seed=7))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "go")
        await reply_done(pilot)
        first = chat.query_one(ReplyView)
        await pilot.press("f6", "f8", "f8")  # the live settings move on: k 4, T 0.5
        await pilot.press("f10")
        await reply_done(pilot)
        assert [(s.k, s.temperature) for s in engine.steps[3:]] == [(3, 0.3)] * 3
        assert engine.params_seen[1].seed == 7
        assert engine.messages_seen[1] == [{"role": "user", "content": "go"}]
        assert [v for v in chat.query(ReplyView)] != [first] and len(chat.query(ReplyView)) == 1
        assert [m["role"] for m in chat.session.transcript.messages] == ["user", "assistant"]
        # With the live settings: k 4, T 0.5, and a new seed, recorded with the reply.
        await pilot.press("ctrl+f10")
        await reply_done(pilot)
        assert [(s.k, s.temperature) for s in engine.steps[6:]] == [(4, 0.5)] * 3
        new_seed = engine.params_seen[2].seed
        assert new_seed is not None and len(chat.query(ReplyView)) == 1
        rows = app.store.load_conversation(chat.session.transcript.conversation_id).messages
        assert [(m.role, bool(m.stats.get("superseded"))) for m in rows] == [
            ("user", False), ("assistant", True), ("assistant", True), ("assistant", False)]
        assert rows[-1].settings == {"k": 4, "temperature": 0.5, "seed": new_seed, "method": "draft"}
        # ... so regenerating that one as it was made takes its seed again.
        await pilot.press("f10")
        await reply_done(pilot)
        assert engine.params_seen[3].seed == new_seed
        assert [(s.k, s.temperature) for s in engine.steps[9:]] == [(4, 0.5)] * 3


async def test_edit_and_resend_replaces_the_last_turn(make_app, tmp_path):
    engine = PlanEngine([None, 1])

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "first")
        await reply_done(pilot)
        await send(pilot, "teh typo")
        await reply_done(pilot)
        await pilot.press("f12")
        assert chat.box.prompt.text == "teh typo"
        assert "editing your last message" in chat.param_bar.plain
        chat.box.prompt.value = "the fix"
        await pilot.press("enter")
        await reply_done(pilot)
        assert engine.messages_seen[-1][2:] == [{"role": "user", "content": "the fix"}]
        assert len(engine.messages_seen[-1]) == 3  # first, its reply, the fix: the typo's turn is gone
        assert [m.text for m in chat.query(UserMessage)] == ["first", "the fix"]
        assert len(chat.query(ReplyView)) == 2
        assert "editing" not in chat.param_bar.plain
        conversation_id = chat.session.transcript.conversation_id
    # Resumed, the conversation is the edited one (the replaced turn stays in history, superseded).
    store = Store(tmp_path / "history.sqlite3")
    conversation = store.load_conversation(conversation_id)
    store.close()
    app = make_app(factory_for(PlanEngine([None])), resume=conversation)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        assert [m.text for m in chat.query(UserMessage)] == ["first", "the fix"]
        assert [m["content"] for m in chat.session.transcript.messages if m["role"] == "user"] == ["first", "the fix"]


async def test_an_edited_first_message_gives_the_history_its_title(make_app, tmp_path):
    """Issue 59: F12 on the first message left the history's title as the old text. The title
    follows the edit; a title the user gave in the history screen meanwhile stays."""
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "teh typo in the title")
        await reply_done(pilot)
        conversation_id = chat.session.transcript.conversation_id
        assert app.store.load_conversation(conversation_id).title == "teh typo in the title"
        await pilot.press("f12")
        chat.box.prompt.value = "the fixed question\nwith a second line"
        await pilot.press("enter")
        await reply_done(pilot)
        assert app.store.load_conversation(conversation_id).title == "the fixed question"
        app.history.rename_conversation(conversation_id, "my own name")
        await pilot.press("f12")
        chat.box.prompt.value = "edited once more"
        await pilot.press("enter")
        await reply_done(pilot)
        assert app.store.load_conversation(conversation_id).title == "my own name"


async def editing_the_last_turn(pilot):
    """A chat with one turn ("keep me"), its message back in the box for editing (F12)."""
    await ready(pilot)
    await send(pilot, "keep me")
    await reply_done(pilot)
    await pilot.press("f12")


async def test_an_edit_survives_an_emptied_box_and_replaces_the_turn(make_app):
    # F12, Ctrl+U, type, Enter: emptying the box ended the edit, so the message became a new
    # turn and the old one stayed (on screen, in the model's context). Only Esc ends an edit.
    engine = PlanEngine([None])
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await editing_the_last_turn(pilot)
        chat = app.chat_screen
        await pilot.press("ctrl+u")
        # Set apart from the status word: it read "● ready editing your last message".
        assert chat.box.prompt.text == "" and "● ready · editing your last message" in chat.param_bar.plain
        await pilot.press(*"fixed")
        await pilot.press("enter")
        await reply_done(pilot)
        assert [m.text for m in chat.query(UserMessage)] == ["fixed"] and len(chat.query(ReplyView)) == 1
        assert engine.messages_seen[-1] == [{"role": "user", "content": "fixed"}]
        assert [m["content"] for m in chat.session.transcript.messages if m["role"] == "user"] == ["fixed"]


async def test_esc_drops_an_edit_and_the_box_empties(make_app):
    # In tmux, Esc after F12 left the edit on: the next message typed went after the old text
    # and replaced the last turn.
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await editing_the_last_turn(pilot)
        chat = app.chat_screen
        assert chat.box.prompt.text == "keep me"
        await pilot.press("escape")
        assert chat.box.prompt.text == "" and "editing" not in chat.param_bar.plain
        await send(pilot, "another")
        await reply_done(pilot)
        assert [m.text for m in chat.query(UserMessage)] == ["keep me", "another"]


# --- the model screen and the system prompt ------------------------------------------------


async def test_the_model_screen_swaps_the_engine_and_the_conversation_goes_on(make_app, monkeypatch):
    from spectui.host import plan as plan_module

    first = PlanEngine([None, 1])
    built: list = []

    def engine_factory_for(config, models):
        def build(progress):
            progress("loading", 1, 2)
            engine = PlanEngine([None, 2], name="embedded")
            built.append((config, engine))
            return engine

        return build

    monkeypatch.setattr(plan_module, "engine_factory_for", engine_factory_for)
    app = make_app(factory_for(first), ChatConfig(engine="embedded", k=3))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "before")
        await reply_done(pilot)
        await pilot.press(app.first_key("model"))
        screen = app.screen
        screen.query_one("#model-target").value = "no-such-model"
        await pilot.press("ctrl+s")
        assert app.screen is screen and "unknown model 'no-such-model'" in str(screen.query_one("#model-error").render())
        screen.query_one("#model-target").value = "smollm2-135m"
        screen.query_one("#model-method").value = "ngram"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: built and app.host.engine is built[0][1])
        config, second = built[0]
        assert (config.model, config.method, config.engine) == ("smollm2-135m", "ngram", "embedded")
        assert first.closed and chat.session.config.model == "smollm2-135m"
        await wait_for(pilot, lambda: "● ready" in chat.param_bar.plain)
        notes = [str(note.render()) for note in chat.query("SystemNote")]
        assert any("Switched to smollm2-135m (ngram) · embedded" in note and "conversation goes on" in note
                   for note in notes)
        await send(pilot, "after")
        await reply_done(pilot)
        before_reply = chat.session.transcript.messages[1]["content"]
        assert second.messages_seen == [[{"role": "user", "content": "before"},
                                         {"role": "assistant", "content": before_reply},
                                         {"role": "user", "content": "after"}]]
        assert len(first.messages_seen) == 1


async def test_the_system_prompt_is_stored_with_the_chat_and_sent(make_app, tmp_path):
    engine = PlanEngine([None])

    app = make_app(factory_for(engine), ChatConfig(system="config default"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "one")
        await reply_done(pilot)
        await pilot.press("ctrl+f12")
        area = app.screen.query_one("#system-text")
        assert area.text == "config default"
        area.load_text("Answer in French.")
        await pilot.press("ctrl+s")
        await send(pilot, "two")
        await reply_done(pilot)
        assert engine.messages_seen[0][0] == {"role": "system", "content": "config default"}
        assert engine.messages_seen[1][0] == {"role": "system", "content": "Answer in French."}
        assert [m["role"] for m in engine.messages_seen[1]] == ["system", "user", "assistant", "user"]
        conversation_id = chat.session.transcript.conversation_id
        await pilot.press("ctrl+n")  # a new chat starts with the config's
        assert chat.session.transcript.system == "config default"
    store = Store(tmp_path / "history.sqlite3")
    conversation = store.load_conversation(conversation_id)
    store.close()
    systems = [(m.content, bool(m.stats.get("superseded"))) for m in conversation.messages if m.role == "system"]
    assert systems == [("config default", True), ("Answer in French.", False)]
    app = make_app(factory_for(engine), ChatConfig(system="config default"), resume=conversation)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.chat_screen.session.transcript.messages[0] == {"role": "system", "content": "Answer in French."}
        await send(pilot, "three")
        await reply_done(pilot)
        assert engine.messages_seen[-1][0] == {"role": "system", "content": "Answer in French."}
        assert [m["role"] for m in engine.messages_seen[-1]].count("system") == 1


# --- the command palette --------------------------------------------------------------------


async def test_every_action_is_in_the_palette_with_its_keys(make_app):
    keys = dict(DEFAULT_KEYS, copy_reply="ctrl+y")

    app = make_app(factory_for(PlanEngine([None])), ChatConfig(keys=keys))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        titles = [command.title for command in app.get_system_commands(app.chat_screen)]
        expected = [i for i in ACTIONS if i not in COMPARE_ONLY]  # the compare view's own keys are its
        # Shown only where they act (tests/tui/test_tui_continue.py): nothing to continue yet, no
        # template with a thinking switch here.
        acting_later = ("continue_reply", "thinking")
        expected = [i for i in expected if i not in acting_later]
        assert not any(title.endswith(f"· {key_display(keys[i])}") for i in acting_later for title in titles)
        for binding_id in expected:
            description = KEY_DESCRIPTIONS[binding_id]
            wanted = f"{description[:1].upper()}{description[1:]} · {key_display(keys[binding_id])}"
            assert wanted in titles, binding_id
        assert any(title.endswith("· Ctrl+Y") and title.startswith("Copy the picked reply") for title in titles)
        # Opened with Ctrl+P, a command runs its action.
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        await pilot.press(*"system", "space", *"prompt")
        await pilot.pause(0.5)  # the palette searches in a worker
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SystemPromptScreen")


# --- code blocks while streaming ----------------------------------------------------------


async def test_a_code_fence_is_a_code_block_while_it_streams(make_app):
    engine = TextEngine(CODE_REPLY, gated=True)

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "write add")
        engine.release(4)  # up to "def add(a, b):" inside the open fence
        await wait_for(pilot, lambda: len(engine.steps) == 5 and not app.chat_screen.replies.pending)
        await pilot.pause()
        token_view = app.chat_screen.query_one(ReplyView).token_view
        blocks = token_view.rendered_blocks()
        assert [block for block, _ in blocks] == ["prose", "open", "code"]
        assert blocks[1][1] == [(" python ", "code-label")]
        # Every token inside keeps its source's kind: def, add, (a, are drafts; b): recovered.
        assert blocks[2][1] == [("def add(a,", "draft"), (" b):", "recovered")]
        code = token_view.get_component_rich_style("tokenview--code")
        strip = token_view.render_line(2)
        styles = [seg.style for seg in strip if seg.text.strip()]
        draft = token_view.get_component_rich_style("tokenview--draft")
        assert styles[0].color == draft.color and styles[0].bgcolor == code.bgcolor
        assert code.bgcolor is not None and code.bgcolor != token_view.rich_style.bgcolor
        engine.release(5)
        await reply_done(pilot)
        blocks = [block for block, _ in token_view.rendered_blocks()]
        assert blocks == ["prose", "open", "code", "code", "close", "prose", "open", "code"]
        assert code_blocks(token_view.text)[0].text == ADD_BLOCK
