"""Pilot tests of a reply's budget (issue 59): a chat's reply may fill what the model's
context leaves unless the user caps it, and a reply that stops at a cap says which key goes on."""

from __future__ import annotations

from spectui.core.events import Done
from spectui.engines.prompt import fit_prompt
from spectui.settings.config import ChatConfig
from spectui.tui.widgets.conversation import ReplyView

from fake_engines import PlanEngine, factory_for
from tui_helpers import ready, reply_done, send

SIZE = (110, 36)


class ContextEngine(PlanEngine):
    """A PlanEngine that says its context and ends each reply with `finish`."""

    def __init__(self, context: int | None, finish: str = "stop") -> None:
        super().__init__([None, 2, 2])
        self.context, self.finish = context, finish

    @property
    def context_length(self) -> int | None:
        return self.context

    def done(self, steps):
        return Done(self.finish, seconds=0.5, time_to_first_token=0.05)


async def test_a_chat_reply_may_fill_the_context_unless_capped(make_app):
    engine = ContextEngine(8192)
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "write the whole module")
        await reply_done(pilot)
        assert engine.params_seen[-1].max_tokens == 8192  # the engine cuts it to the room the prompt leaves
    capped = ContextEngine(8192)
    app = make_app(factory_for(capped), ChatConfig(k=2, max_tokens=300))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "write the whole module")
        await reply_done(pilot)
        assert capped.params_seen[-1].max_tokens == 300


async def test_a_reply_stopped_at_a_cap_names_the_key_that_continues_it(make_app):
    engine = ContextEngine(8192, finish="length")
    app = make_app(factory_for(engine), ChatConfig(k=2, max_tokens=7))  # the plan's 7 tokens: the cap
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "write the whole module")
        await reply_done(pilot)
        note = str(app.chat_screen.query(ReplyView).last().note.render())
        assert "stopped at the 7-token cap: Ctrl+F9 or /continue goes on" in note
        assert "max_tokens" not in note


async def test_a_reply_that_filled_the_context_says_so_not_a_cap(make_app):
    engine = ContextEngine(8192, finish="length")
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "write the whole module")
        await reply_done(pilot)
        note = str(app.chat_screen.query(ReplyView).last().note.render())
        assert "the model's context is full" in note and "cap" not in note


async def test_an_engine_that_does_not_say_its_context_gets_a_stand_in_cap(make_app):
    engine = ContextEngine(None, finish="length")
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "hi")
        await reply_done(pilot)
        assert engine.params_seen[-1].max_tokens == 2048
        # 7 tokens did not reach 2,048: the server stopped it at a limit of its own
        assert "stopped at the engine's length limit: Ctrl+F9" in str(app.chat_screen.query(ReplyView).last().note.render())


def test_truncating_for_a_budget_that_fills_the_context_keeps_half_of_it():
    def words(messages):
        return [0] * sum(len(m["content"].split()) for m in messages)

    turns = [{"role": "user", "content": "x " * 20}, {"role": "assistant", "content": "y " * 20},
             {"role": "user", "content": "z " * 10}]
    fitted = fit_prompt(words, turns, max_tokens=100, context_length=100, truncate=True)
    assert fitted.dropped == 0 and fitted.max_tokens == 50  # 50 in the prompt leave 50: half the context
    fitted = fit_prompt(words, [*turns[:2], {"role": "user", "content": "z " * 30}], 100, 100, truncate=True)
    assert fitted.dropped == 2 and fitted.max_tokens == 70
