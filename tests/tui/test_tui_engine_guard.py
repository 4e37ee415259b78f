"""The chat's own guard: whatever an engine raises or sends, one reply ends with a line and
the chat goes on (issue 42: a server's 1e11 drafted tokens once took the whole app down)."""

from __future__ import annotations

import pytest

from spectui.core.events import Source, Step
from spectui.tui.widgets.conversation import ReplyView

from fake_engines import PlanEngine, factory_for
from tui_helpers import ready, reply_done, send

SIZE = (110, 36)


class RaisingEngine(PlanEngine):
    """Streams a step, then raises `error` in the first reply; later replies stream whole."""

    def __init__(self, error: BaseException) -> None:
        super().__init__([None, None])
        self.error = error

    def stream(self, messages, params, control):
        first_reply = not self.messages_seen
        for event in super().stream(messages, params, control):
            yield event
            if first_reply and isinstance(event, Step):
                raise self.error


class AbsurdEngine(PlanEngine):
    """Its first reply's one step claims 1e11 drafted tokens: numbers no engine should send."""

    def stream(self, messages, params, control):
        if self.messages_seen:
            yield from super().stream(messages, params, control)
            return
        self.messages_seen.append(list(messages))
        yield Step((1,), (Source.RECOVERED,), " w1", k=4, draft_count=10**11, exact=False)
        from spectui.core.events import Done

        yield Done("stop")


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(lambda: RaisingEngine(MemoryError()), id="memory-error"),
        pytest.param(lambda: RaisingEngine(RecursionError("maximum recursion depth exceeded")), id="recursion-error"),
        pytest.param(lambda: AbsurdEngine([None, None]), id="absurd-step"),
    ],
)
async def test_an_engine_failure_ends_one_reply_and_the_chat_goes_on(make_app, engine):
    engine = engine()
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "first")
        await reply_done(pilot)
        failed = app.chat_screen.query(ReplyView).last()
        assert failed.finish_reason == "error"
        note = str(failed.note.render())
        assert "\n" not in note.strip() and note.strip()
        await send(pilot, "second")  # the app is alive: the next reply streams
        await reply_done(pilot)
        assert app.chat_screen.query(ReplyView).last().finish_reason == "stop"
    assert app.return_code in (None, 0)
