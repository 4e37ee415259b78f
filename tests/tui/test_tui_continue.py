"""Pilot tests of `/continue` and its key (issue 59): the last reply goes on in place, its
text, colours and history row the same reply's; the model is given the reply so far as an
unfinished assistant message; the key is in the footer only where it acts."""

from __future__ import annotations

from dataclasses import replace

from spectui.core.events import Done
from spectui.settings.config import ChatConfig
from spectui.tui.messages import ShowConversation
from spectui.tui.widgets.conversation import ReplyView

from fake_engines import PlanEngine, factory_for
from test_tui_layout import footer_labels
from tui_helpers import ready, reply_done, send

SIZE = (110, 36)


class CappedEngine(PlanEngine):
    """Its first reply stops at the cap ("length"), the next ones end on their own."""

    def __init__(self) -> None:
        super().__init__([None, 2, 2])

    @property
    def context_length(self) -> int | None:
        return 4096

    def done(self, steps):
        return Done("length" if len(self.messages_seen) == 1 else "stop", seconds=0.5, time_to_first_token=0.05)


def continue_shown(app) -> bool:
    return any(label.endswith(" continue") for label in footer_labels(app))


async def test_continue_goes_on_in_the_same_reply(make_app):
    engine = CappedEngine()
    app = make_app(factory_for(engine), ChatConfig(k=2, max_tokens=7))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "write the whole module")
        await reply_done(pilot)
        first = chat.query(ReplyView).last()
        before = first.token_view.text
        assert continue_shown(app)
        await pilot.press(app.first_key("continue_reply"))
        await reply_done(pilot)
        # The model saw the conversation with the reply so far as the assistant's unfinished message.
        assert engine.messages_seen[-1][-1] == {"role": "assistant", "content": before}
        assert [m["role"] for m in engine.messages_seen[-1]] == ["user", "assistant"]
        views = list(chat.query(ReplyView))
        assert views == [first]  # no new turn: the same view
        assert first.token_view.text == before + "".join(f" w{i}" for i in range(7, 14))
        note = str(first.note.render())
        assert note.startswith("continued: 7 tokens") and "the whole reply 14 tokens" in note
        assert [e.role for e in chat.session.transcript.entries] == ["user", "assistant"]
        assert chat.session.transcript.entries[-1].content == first.token_view.text
        assert not continue_shown(app)  # it ended on its own: nothing to continue
        stored = app.store.load_conversation(chat.session.transcript.conversation_id)
        replies = [m for m in stored.messages if m.role == "assistant"]
        assert len(replies) == 1 and replies[0].content == first.token_view.text
        assert len(replies[0].steps) == 6  # both parts' steps, numbered on


async def test_continue_says_why_not_and_the_command_does_what_the_key_does(make_app):
    engine = CappedEngine()
    app = make_app(factory_for(engine), ChatConfig(k=2, max_tokens=7))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "/continue")
        await pilot.pause()
        assert engine.messages_seen == []
        assert not continue_shown(app)
        await send(pilot, "write it")
        await reply_done(pilot)
        await send(pilot, "/continue")
        await reply_done(pilot)
        assert len(engine.messages_seen) == 2 and engine.messages_seen[-1][-1]["role"] == "assistant"
        await send(pilot, "/continue")  # ended on its own now
        await pilot.pause()
        assert len(engine.messages_seen) == 2
        assert len(chat.query(ReplyView)) == 1


async def test_max_and_ctx(make_app):
    engine = CappedEngine()
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "/max 300")
        await pilot.pause()
        await send(pilot, "hello")
        await reply_done(pilot)
        assert engine.params_seen[-1].max_tokens == 300
        await send(pilot, "/max off")
        await pilot.pause()
        assert chat.session.config.max_tokens is None
        await send(pilot, "/max lots")
        await pilot.pause()
        assert chat.session.config.max_tokens is None  # refused, one line
        await send(pilot, "/ctx")
        await pilot.pause()
        notes = " ".join(str(note.render()) for note in chat.query("SystemNote"))
        assert "of 4,096 tokens used" in notes and "a reply may fill what is left" in notes


class EndingEngine(PlanEngine):
    def __init__(self) -> None:
        super().__init__([None, 2, 2])

    @property
    def context_length(self) -> int | None:
        return 4096


async def test_an_edited_reply_continues_from_the_edit(make_app):
    engine = EndingEngine()
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "write the module")
        await reply_done(pilot)
        assert not continue_shown(app)  # it ended on its own
        reply = chat.query(ReplyView).last()
        reply.focus()  # picked, as Shift+Tab picks it
        await pilot.press(app.first_key("edit_last"))
        await pilot.pause()
        assert chat.box.prompt.value == reply.token_view.text and "editing the last reply" in chat.param_bar.plain
        chat.box.prompt.value = "/def typed(x: int)"  # a reply's text is never a command
        await pilot.press("enter")
        await pilot.pause()
        assert chat.session.transcript.entries[-1].content == "/def typed(x: int)"
        assert reply.token_view.chunks == [("/def typed(x: int)", "edited")]
        assert "edited by you" in str(reply.note.render()) and continue_shown(app)
        await send(pilot, "/continue")
        await reply_done(pilot)
        assert engine.messages_seen[-1][-1] == {"role": "assistant", "content": "/def typed(x: int)"}
        assert list(chat.query(ReplyView)) == [reply]
        whole = reply.token_view.text
        assert whole.startswith("/def typed(x: int) w7") and chat.session.transcript.entries[-1].content == whole
        note = str(reply.note.render())  # the edit is no model token: no "whole reply" count that leaves it out
        assert note.startswith("continued from your edit: ") and "the whole reply" not in note
        stored = app.store.load_conversation(chat.session.transcript.conversation_id)
        kept = [m for m in stored.messages if m.role == "assistant"]
        assert [m.stats.get("superseded", False) for m in kept] == [True, False]  # the model's reply stays in history
        assert kept[-1].content == whole and len(kept[-1].steps) == 3
        await pilot.press(app.first_key("new_chat"))
        chat.post_message(ShowConversation(stored))
        await pilot.pause()
        resumed = chat.query(ReplyView).last()
        assert resumed.token_view.text == whole and resumed.token_view.chunks[0] == ("/def typed(x: int)", "edited")


async def test_esc_leaves_the_reply_and_only_the_last_one_is_edited(make_app):
    engine = EndingEngine()
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "one")
        await reply_done(pilot)
        await send(pilot, "two")
        await reply_done(pilot)
        first, last = list(chat.query(ReplyView))
        first.focus()
        await pilot.press(app.first_key("edit_last"))
        await pilot.pause()
        assert chat.turns.reply_edit.view is None and chat.box.prompt.value == ""
        await send(pilot, "/edit")
        await pilot.pause()
        assert chat.box.prompt.value == last.token_view.text
        chat.box.prompt.focus()
        await pilot.press("escape")
        await pilot.pause()
        assert chat.turns.reply_edit.view is None and chat.box.prompt.value == ""
        assert chat.session.transcript.entries[-1].content == last.token_view.text


class ThinkingEngine(EndingEngine):
    def __init__(self, switch: bool) -> None:
        super().__init__()
        self.info = replace(self.info, capabilities=replace(self.info.capabilities, thinking_switch=switch))


def think_shown(app) -> bool:
    return any(label.endswith(" think") for label in footer_labels(app))


async def test_the_thinking_switch_where_the_template_has_one(make_app):
    engine = ThinkingEngine(switch=True)
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert think_shown(app)
        await send(pilot, "hi")
        await reply_done(pilot)
        assert engine.params_seen[-1].thinking is True
        await pilot.press(app.first_key("thinking"))
        await send(pilot, "again")
        await reply_done(pilot)
        assert engine.params_seen[-1].thinking is False
        await send(pilot, "/think on")
        await send(pilot, "more")
        await reply_done(pilot)
        assert engine.params_seen[-1].thinking is True


async def test_no_thinking_control_where_no_template_has_one(make_app):
    engine = ThinkingEngine(switch=False)
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert not think_shown(app)
        await pilot.press(app.first_key("thinking"))  # not bound here: nothing changes
        await send(pilot, "/think off")
        await pilot.pause()
        assert app.chat_screen.session.thinking is True


async def test_no_k_keys_in_the_footer_where_the_engine_runs_its_own_k(make_app):
    """Issue 59: with --engine server the footer still offered F5/F6/F9 (pressed, they say why not)."""
    from textual.widgets._footer import FooterKey

    from spectui.core.engine import TEMPERATURE
    from spectui.tui.screens.chat_keys import K_ACTIONS

    def shown(app) -> set[str]:
        return {key.action for key in app.chat_screen.query(FooterKey)}

    own_k = EndingEngine()
    controls = frozenset({TEMPERATURE})
    own_k.info = replace(own_k.info, capabilities=replace(own_k.info.capabilities, live_controls=controls,
                                                           reply_controls=controls))
    app = make_app(factory_for(own_k), ChatConfig(k=2))
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert not shown(app) & K_ACTIONS and "temperature(1)" in shown(app)
    app = make_app(factory_for(EndingEngine()), ChatConfig(k=2))
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert K_ACTIONS <= shown(app)


class OneTokenContinuation(CappedEngine):
    """Its first reply stops at the cap; a continuation adds one token (the prefill's) and stops."""

    def stream(self, messages, params, control):
        if self.messages_seen:
            self.plan = [None]
        yield from super().stream(messages, params, control)


async def test_a_one_token_continuation_says_it_is_too_short_to_measure(make_app):
    """The walk: after a continuation of one token the summary read 'vs plain: not measured
    yet', as if a measurement were to come; one token drafts nothing and measures nothing."""
    from spectui.tui.summary import speed_vs_plain

    engine = OneTokenContinuation()
    app = make_app(factory_for(engine), ChatConfig(k=2, max_tokens=7))
    async with app.run_test(size=(80, 30)) as pilot:  # the panel put away: its summary under the conversation
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "write the whole module")
        await reply_done(pilot)
        await pilot.press(app.first_key("continue_reply"))
        await reply_done(pilot)
        chat.refresh_panels()
        assert chat.stats_panel.data.num_tokens == 1
        assert speed_vs_plain(chat.stats_panel.data)[1:] == ("too short to measure", "1 token: nothing drafted")
        summary = str(chat.panels.summary_line.render())
        assert "vs plain too short to measure" in summary and "not measured yet" not in summary, summary
