"""Pilot tests of the chat when the conversation outgrows the model's context."""

from __future__ import annotations

from spectui.tui.widgets.conversation import ReplyView

from fake_engines import ContextLimitEngine, factory_for
from tui_helpers import ready, reply_done, send

SIZE = (110, 36)


async def test_a_chat_over_the_context_offers_to_resend_without_the_oldest_turns(make_app):
    engine = ContextLimitEngine()

    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+o")  # nothing to resend yet: a note, no reply
        await pilot.pause()
        assert engine.truncate_asked == []
        await send(pilot, "a long question")
        await reply_done(pilot)
        failed = app.chat_screen.query(ReplyView).last()
        note = str(failed.note.render())
        assert "the conversation is 600 tokens; the model holds 512" in note
        assert "Ctrl+O resends it without the oldest turns" in note and "Ctrl+N starts anew" in note

        await pilot.press("ctrl+o")
        await reply_done(pilot)
        assert engine.truncate_asked == [False, True]
        resent = engine.messages_seen[-1]
        # The message went once, without the failed attempt's empty reply before it.
        assert [m["content"] for m in resent if m["role"] != "system"] == ["a long question"]
        answer = app.chat_screen.query(ReplyView).last()
        assert answer is not failed and answer.finish_reason == "stop"
        assert "the 2 oldest messages left out to fit the context" in str(answer.note.render())

        await pilot.press("ctrl+o")  # the offer is spent once the resend worked
        await pilot.pause()
        assert engine.truncate_asked == [False, True]
        await send(pilot, "a follow-up")  # the chat keeps fitting itself from now on
        await reply_done(pilot)
        assert engine.truncate_asked == [False, True, True]
        await pilot.press(app.first_key("new_chat"))  # a new chat starts whole again
        await send(pilot, "fresh")
        await reply_done(pilot)
        assert engine.truncate_asked == [False, True, True, False]

