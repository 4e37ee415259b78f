"""An API key reaches the server and nothing else: not history, exports, screenshots or output."""

from __future__ import annotations

import pytest

from spectui.settings.config import ChatConfig
from spectui.engines.server.engine import api_key_for, build_server_engine, read_api_key_file
from spectui.core.errors import UsageError
from spectui.settings.options import EngineOptions
from spectui.store import Store, export_markdown, export_trace_jsonl

from test_server_units import replay_server
from tui_helpers import ready, reply_done, send, wait_for

SECRET = "sk-test-6f1e9c2d-never-written"


def test_the_key_file_is_read_and_its_errors_never_show_the_key(tmp_path, monkeypatch):
    key_file = tmp_path / "key"
    key_file.write_text(f"  {SECRET}\n")
    assert read_api_key_file(str(key_file)) == SECRET
    two_lines = tmp_path / "two"
    two_lines.write_text(f"{SECRET}\nsecond line\n")
    with pytest.raises(UsageError) as caught:
        read_api_key_file(str(two_lines))
    assert str(caught.value) == f"--api-key-file {two_lines}: expected one line holding the key"
    with pytest.raises(UsageError, match=r"cannot read it \(No such file or directory\)"):
        read_api_key_file(str(tmp_path / "missing"))

    monkeypatch.setenv("SPECTUI_API_KEY", "from-env")
    assert api_key_for(EngineOptions(api_key="given", api_key_file=str(key_file))) == "given"
    assert api_key_for(EngineOptions(api_key_file=str(key_file))) == SECRET
    assert api_key_for(EngineOptions()) == "from-env"


async def test_the_key_goes_to_the_server_and_into_no_file_the_chat_writes(make_app, tmp_path, capfd):
    key_file = tmp_path / "key"
    key_file.write_text(SECRET)
    authorizations = []
    with replay_server(on_request=lambda handler: authorizations.append(handler.headers.get("Authorization"))) as url:
        config = ChatConfig(engine="server", server=url, api_key_file=str(key_file))

        def factory(progress):
            return build_server_engine(EngineOptions(engine="server", server=url, api_key_file=str(key_file)), progress)

        app = make_app(factory, config)
        async with app.run_test(size=(110, 36)) as pilot:
            await ready(pilot)
            assert app.host.engine is not None, app.host.state.error
            await send(pilot, "hello")
            await reply_done(pilot)
            await pilot.press(app.first_key("screenshot"))
            await wait_for(pilot, lambda: list((tmp_path / "shots").glob("*.svg")))
            conversation_id = app.chat_screen.session.transcript.conversation_id

    assert authorizations and set(authorizations) == {f"Bearer {SECRET}"}
    store = Store(tmp_path / "history.sqlite3")
    conversation = store.load_conversation(conversation_id)
    assert any(m.role == "assistant" and m.content for m in conversation.messages), "a reply was saved"
    written = {
        "export": export_markdown(conversation),
        "trace": "\n".join(export_trace_jsonl(conversation)),
        "settings": repr(conversation.settings),
    }
    store.close()
    for path in [*tmp_path.glob("history.sqlite3*"), *(tmp_path / "shots").glob("*")]:
        written[path.name] = path.read_bytes().decode("utf-8", errors="replace")
    output = capfd.readouterr()
    written["output"] = output.out + output.err
    assert [name for name, text in written.items() if SECRET in text] == []
    assert "hello" in written["export"]  # the check reads real content


async def test_a_key_in_the_server_url_is_sent_and_shown_nowhere(make_app, tmp_path, capfd):
    import base64

    authorizations = []
    with replay_server(on_request=lambda handler: authorizations.append(handler.headers.get("Authorization"))) as url:
        keyed = url.replace("http://", f"http://me:{SECRET}@")
        config = ChatConfig(engine="server", server=keyed)
        progress_lines = []

        def factory(progress):
            def seen(stage, done, total):
                progress_lines.append(stage)
                progress(stage, done, total)

            return build_server_engine(EngineOptions(engine="server", server=keyed), seen)

        app = make_app(factory, config)
        async with app.run_test(size=(110, 36)) as pilot:
            await ready(pilot)
            assert app.host.engine is not None, app.host.state.error
            await send(pilot, "hello")
            await reply_done(pilot)
            await pilot.press(app.first_key("screenshot"))
            await wait_for(pilot, lambda: list((tmp_path / "shots").glob("*.svg")))

    expected = "Basic " + base64.b64encode(f"me:{SECRET}".encode()).decode()
    assert authorizations and set(authorizations) == {expected}
    assert progress_lines and all(SECRET not in line for line in progress_lines)
    written = {path.name: path.read_bytes().decode("utf-8", errors="replace")
               for path in [*tmp_path.glob("history.sqlite3*"), *(tmp_path / "shots").glob("*")]}
    output = capfd.readouterr()
    written["output"] = output.out + output.err
    assert [name for name, text in written.items() if SECRET in text] == []
