"""The chat against a server that is not vLLM: the reply streams as target text and the panel
says what the server did not report."""

from __future__ import annotations

from fake_openai_server import FakeOpenAI, fake_server
from spectui.engines.server.engine import ServerEngine
from spectui.settings.config import ChatConfig
from spectui.tui.widgets.conversation import ReplyView
from spectui.tui.widgets.stats_panel import panel_lines
from tui_helpers import ready, reply_done, send, wait_for


def panel_text(app) -> str:
    lines = panel_lines(app.chat_screen.stats_panel.data, 40)
    return "\n".join("".join(part if isinstance(part, str) else part[0] for part in line) for line in lines)


async def test_a_plain_server_streams_and_the_panel_says_speculation_is_not_reported(make_app):
    fake = FakeOpenAI(reply="one two three four five six")
    with fake_server(fake) as url:
        app = make_app(lambda progress: ServerEngine(url), ChatConfig(engine="server", server=url))
        async with app.run_test(size=(110, 36)) as pilot:
            await ready(pilot)
            assert app.host.engine is not None, app.host.state.error
            # Said from the start, before any reply.
            await wait_for(pilot, lambda: "not reported by this server" in panel_text(app))
            await send(pilot, "count")
            await reply_done(pilot)
            view = app.chat_screen.query(ReplyView).last()
            kinds = {kind for line in view.token_view.rendered_lines() for _, kind in line}
            text, panel = view.token_view.text, panel_text(app)
    assert text == fake.reply
    assert kinds == {"target"}
    assert "not reported by this server" in panel


async def test_esc_ends_a_reply_whose_server_withholds_its_headers(make_app):
    # Issue 42: "cancelling" for 57 s, then "no data in time"; Ctrl+Q took 17 s.
    import time

    fake = FakeOpenAI(withhold_headers=True)
    with fake_server(fake) as url:
        app = make_app(lambda progress: ServerEngine(url, read_timeout=120), ChatConfig(engine="server", server=url))
        async with app.run_test(size=(110, 36)) as pilot:
            await ready(pilot)
            await send(pilot, "hello?")
            await wait_for(pilot, fake.chat_requests.is_set)
            pressed = time.monotonic()
            await pilot.press("escape")
            await reply_done(pilot)
            seconds = time.monotonic() - pressed
            ended = app.chat_screen.query(ReplyView).last().finish_reason
        fake.stop.set()
    assert ended == "cancelled"
    assert seconds < 2, f"Esc took {seconds:.1f} s"


async def test_quitting_while_the_server_withholds_its_headers_is_prompt(make_app):
    import time

    fake = FakeOpenAI(withhold_headers=True)
    with fake_server(fake) as url:
        app = make_app(lambda progress: ServerEngine(url, read_timeout=120), ChatConfig(engine="server", server=url))
        async with app.run_test(size=(110, 36)) as pilot:
            await ready(pilot)
            await send(pilot, "hello?")
            await wait_for(pilot, fake.chat_requests.is_set)
            pressed = time.monotonic()
            await pilot.press("ctrl+q")
        seconds = time.monotonic() - pressed
        fake.stop.set()
    assert app.host.engine is None  # closed: the reply's thread ended before the host's wait ran out
    assert seconds < 3, f"Ctrl+Q took {seconds:.1f} s"


async def test_a_server_chat_is_recorded_with_the_k_the_server_runs(make_app, tmp_path):
    # The chat's config says k 4; the server runs k 3 (its /metrics has three draft positions).
    # History and its export said k 4.
    from spectui.store import Store
    from spectui.store.export import export_markdown

    metrics = "vllm:spec_decode_num_drafts_total 0.0\n" + "".join(
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{p}"}} 0.0\n' for p in range(3))
    fake = FakeOpenAI(reply="one two three", metrics=metrics)
    with fake_server(fake) as url:
        config = ChatConfig(engine="server", server=url, k=4)
        app = make_app(lambda progress: ServerEngine(url), config)
        async with app.run_test(size=(110, 36)) as pilot:
            await ready(pilot)
            assert app.host.reported_k == 3, app.host.state.error
            await send(pilot, "count")
            await reply_done(pilot)
            conversation_id = app.chat_screen.session.transcript.conversation_id
    store = Store(tmp_path / "history.sqlite3")
    conversation = store.load_conversation(conversation_id)
    store.close()
    reply = conversation.messages[-1]
    assert conversation.settings["k"] == 3 and reply.settings["k"] == 3 and "auto_k" not in reply.settings
    markdown = export_markdown(conversation)
    assert "k 3" in markdown and "k 4" not in markdown
