"""Hostile input in the message box (issue 59 item 8): `/k ²` and `/k` with 5,000 digits showed
Python's int() errors; a 100 KB `/file` argument echoed ~1,000 lines and a 200 KB `/find` a
toast over half the screen; a file name with a newline broke its block's header, so a resumed
chat lost it from `/files` and `/drop`."""

from __future__ import annotations

from spectui.core.commands import parse_k
from spectui.tui.widgets.conversation import SystemNote

from fake_engines import PlanEngine, factory_for
from tui_helpers import notices, ready, reply_done, send

SIZE = (110, 36)


def notes(app) -> list[str]:
    return [str(note.render()) for note in app.chat_screen.query(SystemNote)]


def test_k_takes_ascii_digits_and_says_so_in_one_short_line():
    for typed in ("²", "٣", "9" * 5000, "1" * 7):
        try:
            parse_k(typed)
        except ValueError as error:
            assert str(error).startswith("/k takes a whole number from 0 or auto, not ") and len(str(error)) < 140
            assert "int()" not in str(error) and "base 10" not in str(error)
        else:
            raise AssertionError(f"/k {typed[:10]} was taken")
    assert parse_k("12") == 12


async def test_long_arguments_are_echoed_cut_to_one_short_line(make_app, tmp_path):
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.chat_screen.session.cwd = str(tmp_path)
        await send(pilot, "/k ²")
        assert notices(app)[-1] == "/k takes a whole number from 0 or auto, not '²'"
        await send(pilot, "/k " + "9" * 5000)
        assert "(5,000 characters)" in notices(app)[-1] and len(notices(app)[-1]) < 140
        await send(pilot, "/file " + "x" * 100_000)
        assert notes(app)[-1].endswith("… (100,000 characters): cannot read it (File name too long)") and len(notes(app)[-1]) < 250
        await send(pilot, "/find " + "y" * 200_000)
        assert notices(app)[-1].startswith("Not in this chat: yyy") and len(notices(app)[-1]) < 140


async def test_a_file_name_with_a_newline_keeps_its_header_and_stays_droppable_after_resume(make_app, tmp_path):
    (tmp_path / "a\nb.txt").write_text("two words\n")
    engine = PlanEngine([None])
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        chat.session.cwd = str(tmp_path)
        await send(pilot, "/file a?b.txt")
        assert notes(app)[-1].startswith("Attached a␊b.txt · 10 B")
        await send(pilot, "what is it")
        await reply_done(pilot)
        assert engine.messages_seen[-1][-1]["content"].startswith("File a␊b.txt · 10 B · 1 lines · sha256 ")
        app.wait_for_history()
        conversation = app.store.load_conversation(chat.session.transcript.conversation_id)
        chat.turns.resume(conversation)
        await pilot.pause()
        await send(pilot, "/files")
        assert notes(app)[-1].startswith("sent     File a␊b.txt · 10 B"), notes(app)
        await send(pilot, "/drop a b.txt")
        assert notes(app)[-1].startswith("Dropped a␊b.txt from the chat"), notes(app)
