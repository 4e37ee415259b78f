"""Pilot tests of the message box's `/` commands and of files in the conversation (issue 47):
`/file` then a question (the block on screen, in what the model is sent, in history, in the
export, in the suffix drafter's corpus), `/save` with its diff, `/find`, every command."""

from __future__ import annotations

import json
import os
import re

from spectui.core.events import Source
from spectui.engines.speculative.suffix import SuffixProposer
from spectui.settings.config import ChatConfig
from spectui.store import Store
from spectui.tui.chat.completion import CommandHints
from spectui.tui.palette import BoxCommands
from spectui.tui.widgets.attachment import AttachmentView
from spectui.tui.widgets.conversation import SystemNote, UserMessage

from fake_engines import PlanEngine, TextEngine, factory_for
from tui_helpers import notices, ready, reply_done, send, wait_for

SIZE = (110, 36)
T, D = Source.TARGET, Source.DRAFT
MODULE = "def parse_row(line):\n    cells = line.split(',')\n    return [cell.strip() for cell in cells]\n"
CODE_REPLY = [[("Here:\n", T)], [("```python\n", T)], [("def add(a, b):\n", D)], [("    return a + b\n", D)],
              [("```\n", T)]]


def notes(app) -> list[str]:
    return [str(note.render()) for note in app.chat_screen.query(SystemNote)]


def at(app, tmp_path):
    app.chat_screen.session.cwd = str(tmp_path)  # relative paths start in the test's folder
    return app


async def test_save_then_at_path_of_the_same_file_says_one_word(make_app, tmp_path):
    """Issue 59: a file attached, then /save'd with the reply's block that differs only by the
    newline at its end, then named again as @path: "changed (+0 −0 lines)", changed and
    unchanged at once. It says changed, and how: only its line endings."""
    (tmp_path / "x.py").write_text("x = 2")
    steps = [[("Here:\n", Source.TARGET)], [("```python\n", Source.TARGET)], [("x = 2\n", Source.TARGET)],
             [("```\n", Source.TARGET)]]
    app = make_app(factory_for(TextEngine(steps)))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        at(app, tmp_path)
        await send(pilot, "tidy @x.py")
        await reply_done(pilot)
        await send(pilot, "/save x.py")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SaveConfirmScreen")
        await pilot.press("y")
        await wait_for(pilot, lambda: notes(app)[-1].startswith("Saved "))
        assert (tmp_path / "x.py").read_text() == "x = 2\n"
        await send(pilot, "and now @x.py")
        await reply_done(pilot)
        said = notes(app)[-1]
        assert said == "x.py changed (only its line endings): the new version goes with your next message", said
        assert "+0 −0" not in "\n".join(notes(app))


async def test_a_file_goes_with_the_next_question_everywhere(make_app, tmp_path):
    (tmp_path / "rows.py").write_text(MODULE)
    engine = PlanEngine([None, 1])
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = at(app, tmp_path).chat_screen
        await send(pilot, "/file rows.py")
        assert chat.box.prompt.text == "" and engine.messages_seen == []  # a command is never sent
        assert any(note.startswith("Attached rows.py · 93 B") for note in notes(app)), notes(app)
        await send(pilot, "add type hints")
        await reply_done(pilot)
        # on screen: a folded block with the file's name, above the question
        view = chat.query_one(AttachmentView)
        assert view.collapsed and "rows.py · 93 B · 3 lines · sha256" in view.title
        children = list(chat.conversation.children)
        assert children.index(view) + 1 == children.index(chat.query_one(UserMessage))
        view.query_one("CollapsibleTitle").focus()
        await pilot.press("enter")
        assert not view.collapsed
        # to the model: the file's text in the user's turn, ahead of the question
        sent = engine.messages_seen[0][-1]["content"]
        assert sent.startswith("File rows.py · 93 B · 3 lines") and "```py\n" + MODULE + "```" in sent
        assert sent.endswith("\n\nadd type hints")
        # a follow-up keeps the first turn as it was: the cached prompt prefix stays valid
        await send(pilot, "and a docstring")
        await reply_done(pilot)
        assert engine.messages_seen[1][0]["content"] == sent
        assert engine.messages_seen[1][-1]["content"] == "and a docstring"
        await send(pilot, "/files")
        assert any(note.startswith("sent     File rows.py") for note in notes(app))
        await send(pilot, "/export")  # the app exports (ExportWanted) and the files' names come back
        await wait_for(pilot, lambda: any(note.startswith("Exported this chat") for note in notes(app)))
        conversation_id = chat.session.transcript.conversation_id
        exported = (tmp_path / "shots" / f"spectui-chat-{conversation_id}.md").read_text()
        assert MODULE in exported and "File rows.py" in exported
        document = json.loads((tmp_path / "shots" / f"spectui-chat-{conversation_id}.json").read_text())
        assert MODULE in document["messages"][0]["content"]
        assert document["title"] == "add type hints"  # the question, not the file's header
    store = Store(tmp_path / "history.sqlite3")
    conversation = store.load_conversation(conversation_id)
    store.close()
    assert conversation.messages[0].content == sent
    # resumed: the file is a folded block again, the question its own message, and it can be dropped
    app = make_app(factory_for(engine), resume=conversation)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await wait_for(pilot, lambda: bool(chat.query(AttachmentView)))
        assert chat.query_one(AttachmentView).text == MODULE
        assert chat.query(UserMessage).first().text == "add type hints"
        await send(pilot, "/drop rows.py")
        assert notes(app)[-1].startswith("Dropped rows.py from the chat")
        await send(pilot, "thanks")
        await reply_done(pilot)
        assert engine.messages_seen[-1][0]["content"] == "add type hints"


def test_the_suffix_drafter_drafts_from_an_attached_file():
    """What the chat sends (the file in the user's turn) is the prompt the suffix drafter
    indexes: a reply that starts retyping the file gets the file's next words as its draft."""
    from spectui.core.attachments import Attachment, message_with

    attachment = Attachment("rows.py", "/x/rows.py", len(MODULE), "0" * 64, MODULE)
    prompt = message_with([attachment], "add type hints")
    vocabulary: dict[str, int] = {}

    def ids(text: str) -> list[int]:
        return [vocabulary.setdefault(word, len(vocabulary)) for word in re.findall(r"\w+|[^\w\s]|\s+", text)]

    reply = ids("def parse_row(line: str) -> list[str]:\n    cells = line.split(',')")
    proposal = SuffixProposer(use_history=False).propose(ids(prompt) + reply, 4, 0.0, 1.0, None)
    words = {i: word for word, i in vocabulary.items()}
    assert [words[i] for i in proposal.drafted] == ["\n    ", "return", " ", "["]
    # without the file in the prompt there is nothing to copy from
    alone = SuffixProposer(use_history=False).propose(ids("add type hints") + reply, 4, 0.0, 1.0, None)
    assert "return" not in [words[i] for i in alone.drafted]


async def test_files_that_are_not_text_get_one_line_each_and_a_changed_file_says_what_changed(make_app, tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"\0\1")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "rows.py").write_text(MODULE)
    engine = PlanEngine([None])
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        at(app, tmp_path)
        await send(pilot, "/file blob.bin dir pipe missing.py *.rs")
        said = notes(app)[-1].splitlines()
        assert said == ["*.rs: no file matches", "blob.bin: a binary file, not attached",
                        "dir: a folder, not attached (name its files, or a glob such as dir/*.py)",
                        "pipe: a FIFO, not a regular file, not attached", "missing.py: no such file"]
        await send(pilot, "look at @rows.py please")
        await reply_done(pilot)
        assert engine.messages_seen[0][-1]["content"].endswith("\n\nlook at @rows.py please")
        await send(pilot, "/file rows.py")
        assert notes(app)[-1] == "rows.py is unchanged since it was attached"
        (tmp_path / "rows.py").write_text(MODULE.replace("cells", "parts") + "# end\n")
        await send(pilot, "/file rows.py")
        assert notes(app)[-1] == "rows.py changed (+3 −2 lines): the new version goes with your next message"
        await send(pilot, "/drop rows.py")
        assert notes(app)[-1] == "Dropped rows.py: it will not go with your next message"
        await send(pilot, "/drop rows.py")  # the version already sent: out of its turn
        assert notes(app)[-1].startswith("Dropped rows.py from the chat")
        assert app.chat_screen.session.transcript.entries[0].content == "look at @rows.py please"
        assert not app.chat_screen.query(AttachmentView)


async def test_a_file_that_does_not_fit_the_context_says_by_how_much(make_app, tmp_path):
    (tmp_path / "big.py").write_text("x = 1\n" * 400)  # 2,400 chars: about 600 tokens

    class SmallContext(PlanEngine):
        context_length = 256

    app = make_app(factory_for(SmallContext([None])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        at(app, tmp_path)
        await send(pilot, "/file big.py")
        warning = next(n for n in notices(app) if "too many" in n)
        assert "the model holds 256" in warning and "/drop" in warning


async def test_save_shows_the_diff_asks_and_keeps_a_backup(make_app, tmp_path):
    target = tmp_path / "add.py"
    target.write_text("def add(a, b):\n    return a - b\n")
    os.mkfifo(tmp_path / "pipe")
    app = make_app(factory_for(TextEngine(CODE_REPLY)))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        at(app, tmp_path)
        await send(pilot, "/save add.py")
        assert "No reply to save from yet." in notices(app)
        await send(pilot, "write add")
        await reply_done(pilot)
        await send(pilot, "/save pipe")
        assert notes(app)[-1] == "pipe: a FIFO, not a regular file; nothing written"
        await send(pilot, "/save add.py 2")
        assert "The last reply has 1 code block, no block 2." in notices(app)
        await send(pilot, "/save add.py")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SaveConfirmScreen")
        diff = str(app.screen.query_one("#save-diff").render())
        assert "-    return a - b" in diff and "+    return a + b" in diff
        await pilot.press("n")
        assert target.read_text() == "def add(a, b):\n    return a - b\n"
        assert notes(app)[-1].endswith("kept as it was, nothing written")
        await send(pilot, "/save add.py")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SaveConfirmScreen")
        await pilot.press("y")
        assert target.read_text() == "def add(a, b):\n    return a + b\n"
        assert (tmp_path / "add.py.bak").read_text() == "def add(a, b):\n    return a - b\n"
        assert notes(app)[-1].startswith(f"Saved {target}") and "add.py.bak" in notes(app)[-1]
        await send(pilot, "/save new.py")  # a new file: written at once
        assert (tmp_path / "new.py").read_text() == "def add(a, b):\n    return a + b\n"


async def test_save_of_a_block_the_reply_never_closed_warns_and_asks_even_for_a_new_file(make_app, tmp_path):
    cut_reply = CODE_REPLY[:-1]  # stopped at max tokens inside the block: no closing fence
    app = make_app(factory_for(TextEngine(cut_reply)))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        at(app, tmp_path)
        await send(pilot, "write add")
        await reply_done(pilot)
        await send(pilot, "/save new.py")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SaveConfirmScreen")
        assert "the file would be cut short" in str(app.screen.query_one("#save-warning").render())
        assert str(app.screen.query_one("#save-title").render()) == f"Write {tmp_path / 'new.py'}?"
        await pilot.press("escape")
        assert not (tmp_path / "new.py").exists()
        await send(pilot, "/save new.py")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SaveConfirmScreen")
        await pilot.press("y")
        assert (tmp_path / "new.py").read_text() == "def add(a, b):\n    return a + b\n"


async def test_enter_is_no_answer_to_the_save_question_and_a_link_is_named_by_its_target(make_app, tmp_path):
    """Issue 59 item 8: Enter, the key that sent `/save`, said yes to overwriting a link's target."""
    real = tmp_path / "real.py"
    real.write_text("x = 0\n")
    (tmp_path / "link.py").symlink_to(real)
    app = make_app(factory_for(TextEngine(CODE_REPLY)))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        at(app, tmp_path)
        await send(pilot, "write add")
        await reply_done(pilot)
        await send(pilot, "/save link.py")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SaveConfirmScreen")
        title = str(app.screen.query_one("#save-title").render())
        assert title == f"Overwrite {real} (through the link {tmp_path / 'link.py'})?"
        await pilot.press("enter")
        await pilot.pause()
        assert type(app.screen).__name__ == "SaveConfirmScreen" and real.read_text() == "x = 0\n"
        await pilot.press("y")
        assert real.read_text() == "def add(a, b):\n    return a + b\n" and (tmp_path / "link.py").is_symlink()
        assert notes(app)[-1].endswith(f"kept as {real}.bak") and (tmp_path / "real.py.bak").exists()


async def test_the_save_question_keeps_its_keys_in_view_over_a_long_diff_at_80x24(make_app, tmp_path):
    long_reply = [[("```python\n", T)], *([(f"x{i} = {i}\n", D)] for i in range(80)), [("```\n", T)]]
    (tmp_path / "long.py").write_text("x = 0\n")
    app = make_app(factory_for(TextEngine(long_reply)))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        at(app, tmp_path)
        await send(pilot, "write it")
        await reply_done(pilot)
        await send(pilot, "/save long.py")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SaveConfirmScreen")
        hint = app.screen.query_one("#save-hint")
        assert hint.region.height and hint.region.bottom <= 24, hint.region  # on screen, not pushed below it
        assert "N / Esc keeps the file" in str(hint.render())


async def test_unknown_commands_literal_slashes_and_the_settings_commands(make_app, monkeypatch):
    engine = PlanEngine([None])
    app = make_app(factory_for(engine), ChatConfig(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat, live = app.chat_screen, app.host.live
        await send(pilot, "/frobnicate")
        assert any(n.startswith("No command /frobnicate") for n in notices(app))
        assert chat.box.prompt.text == "/frobnicate" and engine.messages_seen == []  # not sent, left to put right
        await send(pilot, "//etc/hosts: what is it?")
        await reply_done(pilot)
        assert engine.messages_seen[0][-1]["content"] == "/etc/hosts: what is it?"
        await send(pilot, "/k 5")
        assert live.k == 5 and not live.auto
        await send(pilot, "/k auto")
        assert live.auto
        await send(pilot, "/k many")
        assert any("whole number" in n for n in notices(app))
        await send(pilot, "/t 0.7")
        assert live.temperature == 0.7
        await send(pilot, "/help")
        assert all(f"/{name}" in notes(app)[-1] for name in ("file", "files", "drop", "save", "find", "export"))
        await send(pilot, "/system")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SystemPromptScreen")
        await pilot.press("escape")
        await send(pilot, "/model")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ModelScreen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is chat)
        await send(pilot, "/clear")
        assert chat.session.transcript.entries == [] and not chat.query(UserMessage)


async def test_a_slash_pops_up_the_commands_and_tab_completes(make_app, tmp_path):
    (tmp_path / "rows.py").write_text(MODULE)
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = at(app, tmp_path).chat_screen
        chat.box.prompt.focus()
        hints = chat.query_one(CommandHints)  # the message box's
        await pilot.press("slash", "h")
        await wait_for(pilot, lambda: hints.display and "/help" in str(hints.render()))
        await pilot.press("tab")
        assert chat.box.prompt.text == "/help " and chat.box.prompt.has_focus
        chat.box.prompt.value = "/file ro"
        await pilot.press("tab")
        assert chat.box.prompt.text == "/file rows.py"
        chat.box.prompt.value = "explain @ro"
        await pilot.press("tab")
        assert chat.box.prompt.text == "explain @rows.py"
        chat.box.prompt.value = "hello"
        await pilot.pause()
        assert not hints.has_class("-open")


async def test_the_palette_offers_the_box_commands_as_the_chat_screens_own(make_app):
    """The chat screen's provider (its COMMANDS): a command that needs nothing more runs, one
    that takes a path waits in the box; the key actions stay the app's."""
    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        found = [hit.text async for hit in BoxCommands(chat).search("/file")]
        assert any(text is not None and text.startswith("/file PATH… · attach files") for text in found)
        assert not any(command.title.startswith("/") for command in app.get_system_commands(chat))
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        await pilot.press(*"/help")
        await pilot.pause(0.5)  # the palette searches in a worker
        await pilot.press("enter")  # the best match, highlighted
        await wait_for(pilot, lambda: app.screen is chat and any(note.startswith("Commands (") for note in notes(app)))
        assert chat.box.prompt.text == ""  # run, not typed
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        await pilot.press(*"/file PATH")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is chat and chat.box.prompt.text == "/file ")
        assert chat.box.prompt.has_focus


async def test_find_marks_and_scrolls_to_each_match_n_and_N_go_round(make_app):
    engine = PlanEngine([None, 1])
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        for question in ("first needle", "filler " * 200, "second NEEDLE", "filler " * 200):
            await send(pilot, question)
            await reply_done(pilot)
        await send(pilot, "/find needle")
        first, second = [m for m in chat.query(UserMessage) if "needle" in m.text.lower()]
        await pilot.pause()
        assert first.has_class("-found") and not second.has_class("-found")
        assert chat.conversation.scroll_y <= first.virtual_region.y <= chat.conversation.scroll_y + chat.conversation.size.height
        await pilot.press("n")
        await pilot.pause()
        assert second.has_class("-found") and not first.has_class("-found")
        assert chat.conversation.scroll_y <= second.virtual_region.y <= chat.conversation.scroll_y + chat.conversation.size.height
        await pilot.press("N")
        assert first.has_class("-found")
        await send(pilot, "/find haystack")
        assert "Not in this chat: haystack" in notices(app)


def marked_on_screen(app) -> list[str]:
    """The runs of text the screen draws on /find's colour for the match it went to."""
    warning = app.current_theme.to_color_system().generate()["warning"].lower()[:7]
    runs: list[str] = []
    for line in app.screen._compositor.render_update(full=True).strips:
        before = False  # the segment before this one was marked too
        for segment in (segment for strip in line for segment in strip if segment.text):
            bgcolor = segment.style.bgcolor if segment.style is not None else None
            on = bgcolor is not None and bgcolor.triplet is not None and bgcolor.triplet.hex == warning
            if on and before:
                runs[-1] += segment.text
            elif on:
                runs.append(segment.text)
            before = on
    return runs


async def test_find_marks_the_match_not_the_whole_message(make_app):
    """Issue 59: /find drew the whole message that held the match on the mark's colour; now
    only the match is marked, in a question and in a reply, and n moves the mark."""
    steps = [[(" the", Source.TARGET)], [(" reply", Source.DRAFT), (" has", Source.DRAFT)], [(" a", Source.BONUS)],
             [(" Needle", Source.RECOVERED)], [(" in", Source.TARGET)], [(" it", Source.TARGET)]]
    app = make_app(factory_for(TextEngine(steps)))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, "where is the needle in this question")
        await reply_done(pilot)
        await send(pilot, "/find needle")
        await pilot.pause()
        assert marked_on_screen(app) == ["needle"]
        question = chat.query_one(UserMessage)
        assert question.has_class("-found")
        await pilot.press("n")
        await pilot.pause()
        assert marked_on_screen(app) == ["Needle"]  # in the reply, across its tokens' colours
        await pilot.press("escape")
        await send(pilot, "/find zzz")
        await pilot.pause()
        assert marked_on_screen(app) == []
