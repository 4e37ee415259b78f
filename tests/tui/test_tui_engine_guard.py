"""The chat's own guard: whatever an engine raises or sends, one reply ends with a line and
the chat goes on (issue 42: a server's 1e11 drafted tokens once took the whole app down)."""

from __future__ import annotations

import pytest

from spectui.core.events import Done, Source, Step
from spectui.tui.widgets.conversation import ReplyView

from fake_engines import PlanEngine, factory_for
from tui_helpers import ready, reply_done, send

SIZE = (110, 36)


def raising_engine(error: BaseException) -> PlanEngine:
    """Streams a step, then raises `error` in the first reply; later replies stream whole."""
    return PlanEngine([None, None], raise_after=1, error=error, failing_replies=1)


def absurd_engine() -> PlanEngine:
    """Its first reply's one step claims 1e11 drafted tokens: numbers no engine should send."""
    absurd = Step((1,), (Source.RECOVERED,), " w1", k=4, draft_count=10**11, exact=False)
    return PlanEngine([None, None], replayed=[[absurd, Done("stop")]])


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(lambda: raising_engine(MemoryError()), id="memory-error"),
        pytest.param(lambda: raising_engine(RecursionError("maximum recursion depth exceeded")), id="recursion-error"),
        pytest.param(lambda: absurd_engine(), id="absurd-step"),
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
