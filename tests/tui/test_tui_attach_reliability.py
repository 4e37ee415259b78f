"""Attached files under hostile use (issue 59 item 8): `@path` read once and only for a
message that is accepted, a server engine asks before a file leaves the machine, a glob past
the cap attaches nothing, `page[1].txt` is a file and not a glob, a file changed after
`/file` is sent as it is now and said so."""

from __future__ import annotations

import threading

from spectui.settings.config import ChatConfig
from spectui.tui.widgets.conversation import SystemNote

from fake_engines import PlanEngine, fake_info, factory_for
from tui_helpers import notices, ready, reply_done, send, wait_for

SIZE = (110, 36)


def notes(app) -> list[str]:
    return [str(note.render()) for note in app.chat_screen.query(SystemNote)]


def at(app, tmp_path):
    app.chat_screen.session.cwd = str(tmp_path)
    return app


async def test_an_at_path_of_a_refused_message_is_not_attached_and_each_is_read_once(make_app, tmp_path):
    (tmp_path / "secret.txt").write_text("the password\n")
    (tmp_path / "notes.txt").write_text("a note\n")
    engine = PlanEngine([None, None, None], gated=True)
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = at(app, tmp_path).chat_screen
        await send(pilot, "first question")
        await wait_for(pilot, lambda: chat.session.reply is not None)
        await send(pilot, "what is in @secret.txt")
        assert "A reply is streaming; Esc cancels it." in notices(app)
        assert chat.session.files.pending == [] and not any("secret" in note for note in notes(app))
        engine.release(5)
        await reply_done(pilot)
        await send(pilot, "now read @notes.txt")
        await reply_done(pilot)
        sent = engine.messages_seen[-1][-1]["content"]
        assert "the password" not in sent and "a note" in sent
        assert sum(note.count("Attached notes.txt") for note in notes(app)) == 1, notes(app)


async def test_an_at_path_for_a_server_engine_goes_only_when_sent_twice(make_app, tmp_path):
    (tmp_path / "secret.txt").write_text("the password\n")
    engine = PlanEngine([None])
    engine.info = fake_info("server", "draft", engine.info.capabilities, device="gpu-box")
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = at(app, tmp_path).chat_screen
        await send(pilot, "summarise @secret.txt")
        assert engine.messages_seen == [] and chat.box.prompt.text == "summarise @secret.txt"
        assert notes(app)[-1].startswith("secret.txt would go to the server at gpu-box with this message")
        assert chat.session.files.pending == []
        await send(pilot, "summarise @secret.txt")
        await reply_done(pilot)
        assert "the password" in engine.messages_seen[-1][-1]["content"]


async def test_an_at_path_asks_too_while_a_server_engine_is_still_loading(make_app, tmp_path):
    (tmp_path / "secret.txt").write_text("the password\n")
    release = threading.Event()
    engine = PlanEngine([None])

    def slow_factory(progress):
        release.wait(10)
        return engine

    app = make_app(slow_factory, ChatConfig(engine="server", server="http://gpu-box:8000"))
    async with app.run_test(size=SIZE) as pilot:
        chat = at(app, tmp_path).chat_screen
        await send(pilot, "summarise @secret.txt")
        assert chat.session.waiting is None and chat.session.files.pending == []
        assert notes(app)[-1].startswith("secret.txt would go to the server at http://gpu-box:8000")
        await send(pilot, "summarise @secret.txt")
        assert chat.session.waiting is not None and len(chat.session.files.pending) == 1
        release.set()
        await ready(pilot)
        await reply_done(pilot)
        assert "the password" in engine.messages_seen[-1][-1]["content"]


async def test_a_glob_past_the_cap_attaches_nothing_and_says_how_many_matched(make_app, tmp_path):
    for index in range(201):
        (tmp_path / f"f{index:03}.txt").write_text("x\n")
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = at(app, tmp_path).chat_screen
        await send(pilot, "/file *.txt")
        assert notes(app)[-1].startswith("201 files match, 402 B: at most 200 files and 4 MB go with one message")
        assert chat.session.files.pending == []
        await send(pilot, "/file f00*.txt")  # 10 files: under the cap
        assert len(chat.session.files.pending) == 10
        await send(pilot, "/file f1*.txt")  # 100 more: still under
        await send(pilot, "/file f0*.txt")  # the 10 again and 90 new: 200 in all
        assert len(chat.session.files.pending) == 200
        await send(pilot, "/file f200.txt")  # the 201st, with the 200 waiting
        assert "(with the 200 already waiting)" in notes(app)[-1] and len(chat.session.files.pending) == 200


async def test_a_file_whose_name_looks_like_a_glob_is_attached_by_file_and_at_path(make_app, tmp_path):
    (tmp_path / "page[1].txt").write_text("page one\n")
    (tmp_path / "page1.txt").write_text("not this one\n")
    engine = PlanEngine([None])
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = at(app, tmp_path).chat_screen
        await send(pilot, "/file page[1].txt")
        assert [a.name for a in chat.session.files.pending] == ["page[1].txt"]
        chat.session.files.reset()
        await send(pilot, "read @page[1].txt")
        await reply_done(pilot)
        sent = engine.messages_seen[-1][-1]["content"]
        assert "page one" in sent and "not this one" not in sent


async def test_a_file_changed_after_file_goes_as_it_is_now_and_says_so(make_app, tmp_path):
    target = tmp_path / "rows.py"
    target.write_text("a = 1\n")
    engine = PlanEngine([None])
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        at(app, tmp_path)
        await send(pilot, "/file rows.py")
        target.write_text("a = 1\nb = 2\n")
        await send(pilot, "explain")
        await reply_done(pilot)
        assert "b = 2" in engine.messages_seen[-1][-1]["content"]
        assert any(note.startswith("rows.py changed since it was attached (+1 −0 lines)") for note in notes(app)), notes(app)
