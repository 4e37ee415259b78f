"""The message box's commands, attached files and `/save`, as pure functions (issue 47)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spectui.core import attachments, commands, saving
from spectui.core.commands import Command, Literal, Unknown


# ---------------------------------------------------------------- commands


def test_a_slash_line_is_a_command_and_the_rest_its_arguments():
    assert commands.parse("hello /k 3") is None
    assert commands.parse("/k 3") == Command("k", "3")
    assert commands.parse("  /FIND  two words ") == Command("find", "two words")
    assert commands.parse("/file 'a b.py' c.py").args == ["a b.py", "c.py"]
    assert commands.parse("/file 'unbalanced.py").args == ["'unbalanced.py"]
    assert commands.parse("/help") == Command("help", "")


def test_an_unknown_command_and_a_literal_slash():
    unknown = commands.parse("/frobnicate now")
    assert unknown == Unknown("frobnicate")
    assert "/frobnicate" in unknown.message and "/help" in unknown.message
    assert commands.parse("//etc/hosts is a file") == Literal("/etc/hosts is a file")


def test_every_command_is_in_the_table_and_in_help():
    names = {spec.name for spec in commands.COMMANDS}
    assert names == {"help", "file", "files", "drop", "save", "clear", "model", "k", "t", "system", "export", "find",
                     "advise", "continue", "edit", "think", "max", "ctx"}
    lines = commands.help_lines()
    assert len(lines) == len(names) and all(line.startswith("/") for line in lines)


def test_every_command_has_a_handler_and_a_line_in_docs_commands():
    """A command added to the table gets its handler (a do_ method in ChatCommands' table, or a
    key's action of the chat screen's, named in KEY_COMMANDS) and its docs line (CONTRIBUTING.md)."""
    import re
    from pathlib import Path
    from unittest.mock import MagicMock

    from spectui.tui.chat.commands import AUTO_K, KEY_COMMANDS, ChatCommands
    from spectui.tui.screens.chat_keys import ChatKeys

    names = [spec.name for spec in commands.COMMANDS]
    handlers = ChatCommands(MagicMock(), MagicMock()).handlers
    assert [name for name in names if name not in handlers and name not in KEY_COMMANDS] == []
    assert set(handlers) & set(KEY_COMMANDS) == set()  # one way to run each
    assert (set(handlers) | set(KEY_COMMANDS)) - set(names) == set()  # no handler left behind by a command taken out
    assert [action for action in [*KEY_COMMANDS.values(), AUTO_K] if not callable(getattr(ChatKeys, f"action_{action}", None))] == []
    docs = (Path(__file__).resolve().parents[1] / "docs" / "commands.md").read_text()
    documented = set(re.findall(r"`/([a-z]+)[ `]", docs))
    assert [name for name in names if name not in documented] == []


def test_the_list_and_tab_follow_what_is_typed():
    assert [spec.name for spec in commands.matching("/fi")] == ["file", "files", "find"]
    assert len(commands.matching("/")) == len(commands.COMMANDS)
    assert commands.matching("/file x") == [] and commands.matching("hello") == []
    assert commands.complete("/fi") is None  # file, files, find: nothing in common past "fi"
    assert commands.complete("/he") == "/help "
    assert commands.complete("/fil") == "/file"  # file and files
    assert commands.complete("/zz") is None


def test_k_t_and_save_arguments():
    assert commands.parse_k(" 4 ") == 4 and commands.parse_k("AUTO") == "auto"
    with pytest.raises(ValueError, match="whole number"):
        commands.parse_k("-1")
    assert commands.parse_temperature("0.7") == 0.7
    for bad in ("hot", "-1", "nan"):
        with pytest.raises(ValueError):
            commands.parse_temperature(bad)
    assert commands.parse_save(["out.py"]) == ("out.py", None)
    assert commands.parse_save(["out.py", "2"]) == ("out.py", 2)
    for bad in ([], ["a", "0"], ["a", "x"], ["a", "1", "2"]):
        with pytest.raises(ValueError):
            commands.parse_save(bad)


# ---------------------------------------------------------------- attachments


def test_a_file_is_named_sized_hashed_and_fenced(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    return '```'\n")
    attachment = attachments.read_attachment("m.py", tmp_path)
    assert attachment.size == 26 and attachment.num_lines == 2 and len(attachment.sha256) == 64
    block = attachments.block(attachment)
    assert block.startswith("File m.py · 26 B · 2 lines · sha256 ")
    assert "\n````py\ndef f():\n" in block and block.endswith("\n````")  # longer than the file's own fence
    message = attachments.message_with([attachment], "add type hints")
    assert message.startswith(block) and message.endswith("\n\nadd type hints")
    assert attachments.without(message, attachment) == "add type hints"


def test_what_is_not_a_text_file_gets_one_line(tmp_path, monkeypatch):
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9")
    (tmp_path / "big.txt").write_bytes(b"x" * (attachments.ATTACHMENT_LIMIT + 1))
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe")
    monkeypatch.setattr(attachments, "read_capped", _counting_reader := _CountingReader())
    lines = {name: attachments.read_attachment(name, tmp_path)
             for name in ("blob.bin", "latin.txt", "big.txt", "folder", "pipe", "missing.py")}
    assert lines == {
        "blob.bin": "blob.bin: a binary file, not attached",
        "latin.txt": "latin.txt: not UTF-8 text (a binary file?), not attached",
        "big.txt": "big.txt: larger than 512 KB, not attached",
        "folder": "folder: a folder, not attached (name its files, or a glob such as folder/*.py)",
        "pipe": "pipe: a FIFO, not a regular file, not attached",
        "missing.py": "missing.py: no such file",
    }
    assert _counting_reader.limits == {attachments.ATTACHMENT_LIMIT}  # nothing is read past the cap
    assert attachments.read_attachment("/dev/zero").endswith("not attached")


class _CountingReader:
    def __init__(self) -> None:
        self.limits: set[int] = set()

    def __call__(self, path, limit):
        from spectui.core.files import read_capped

        self.limits.add(limit)
        return read_capped(path, limit)


def test_globs_expand_sorted_once_and_a_pattern_that_names_nothing_says_so(tmp_path):
    for name in ("b.py", "a.py", "c.txt"):
        (tmp_path / name).write_text(name)
    paths, problems = attachments.expand(["*.py", "a.py", "*.rs", "c.txt"], tmp_path)
    assert paths == ["a.py", "b.py", "c.txt"]
    assert problems == ["*.rs: no file matches"]


def test_changed_lines_and_at_paths(tmp_path):
    assert attachments.changed_lines("a\nb\nc\n", "a\nB\nc\nd\n") == (2, 1)
    assert attachments.at_paths("look at @src/m.py, and @b.txt. mail@host") == ["src/m.py", "b.txt"]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "setup.cfg").write_text("")
    assert attachments.path_completions("s", tmp_path) == ["setup.cfg", "src/"]
    assert attachments.path_completions("src/m", tmp_path) == ["src/main.py"]


# ---------------------------------------------------------------- /save


def test_save_shows_the_diff_and_keeps_the_old_file(tmp_path):
    target = tmp_path / "add.py"
    target.write_text("def add(a, b):\n    return a - b\n")
    plan = saving.plan_save("add.py", "def add(a, b):\n    return a + b", tmp_path)
    assert "-    return a - b\n+    return a + b\n" in plan.diff
    line = saving.save(plan)
    assert line.startswith(f"Saved {target}") and "add.py.bak" in line
    assert target.read_text() == "def add(a, b):\n    return a + b\n"
    assert (tmp_path / "add.py.bak").read_text() == "def add(a, b):\n    return a - b\n"
    saving.save(saving.plan_save("add.py", "x = 1", tmp_path))  # the backup is the file just before
    assert (tmp_path / "add.py.bak").read_text() == "def add(a, b):\n    return a + b\n"


def test_save_never_follows_into_a_fifo_or_a_device(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    assert saving.plan_save("pipe", "x", tmp_path) == "pipe: a FIFO, not a regular file; nothing written"
    assert saving.plan_save("/dev/null", "x").startswith("/dev/null: a device")
    link = tmp_path / "link.py"
    link.symlink_to("/dev/null")
    assert saving.plan_save("link.py", "x", tmp_path) == "link.py: a device, not a regular file; nothing written"
    plan = saving.SavePlan(tmp_path / "pipe", "x\n", "")  # a FIFO put there after the plan was made
    assert saving.save(plan).startswith(f"{tmp_path / 'pipe'}: not written (a FIFO")


def test_save_through_a_link_names_the_real_file_and_the_backup_that_exists(tmp_path):
    """Issue 59 item 8: the question named the link, the result a backup that did not exist."""
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "passwd.copy"
    real.write_text("root:x:0:0\n")
    (tmp_path / "link_copy").symlink_to(real)
    plan = saving.plan_save("link_copy", "x = 1", tmp_path)
    assert isinstance(plan, saving.SavePlan) and plan.path == real
    assert plan.title == f"{real} (through the link {tmp_path / 'link_copy'})"
    line = saving.save(plan)
    assert line.endswith(f"the old file kept as {real}.bak"), line
    assert (tmp_path / "link_copy").is_symlink() and real.read_text() == "x = 1\n"
    assert (tmp_path / "real" / "passwd.copy.bak").read_text() == "root:x:0:0\n"
    assert not (tmp_path / "link_copy.bak").exists()
    (tmp_path / "dangling").symlink_to(tmp_path / "real" / "new.py")  # never a new file where a link points
    assert saving.plan_save("dangling", "x", tmp_path) == \
        f"dangling: a link to nothing ({tmp_path / 'real' / 'new.py'}); nothing written"
    assert not (tmp_path / "real" / "new.py").exists()


def test_save_refuses_a_read_only_file(tmp_path):
    target = tmp_path / "locked.py"
    target.write_text("x = 0\n")
    target.chmod(0o444)
    assert saving.plan_save("locked.py", "x = 1", tmp_path) == \
        "locked.py: read-only (mode 0444); nothing written (make it writable first)"
    plan = saving.SavePlan(target, "x = 1\n", "x = 0\n")  # made read-only after the question
    assert saving.save(plan) == f"{target}: not written (read-only, mode 0444)"
    assert target.read_text() == "x = 0\n" and not (tmp_path / "locked.py.bak").exists()


# ---------------------------------------------------------------- -f on the command line


def test_generate_f_puts_the_files_ahead_of_the_prompt_and_a_bad_one_is_one_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from spectui.cli.app import app

    seen = []
    monkeypatch.setattr("spectui.cli.generate.run_generate", lambda options, prompt, **kw: seen.append(prompt) or 0)
    (tmp_path / "a.py").write_text("A = 1\n")
    (tmp_path / "b.py").write_text("B = 2\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["generate", "-f", "a.py", "--file", "b.py", "explain"])
    assert result.exit_code == 0, result.output
    blocks = [attachments.block(attachments.read_attachment(name)) for name in ("a.py", "b.py")]
    assert seen == [f"{blocks[0]}\n\n{blocks[1]}\n\nexplain"]
    os.mkfifo(tmp_path / "pipe")
    result = CliRunner().invoke(app, ["generate", "-f", "pipe", "-f", "*.rs", "explain"])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(seen) == 1 and len(lines) == 1
    assert "*.rs: no file matches" in lines[0] and "pipe: a FIFO" in lines[0]


def test_a_stored_turn_gives_back_its_files_and_question(tmp_path):
    (tmp_path / "a.py").write_text("A = '```'\n")
    (tmp_path / "b.txt").write_text("no newline at the end")
    files = [attachments.read_attachment(name, tmp_path) for name in ("a.py", "b.txt")]
    content = attachments.message_with(files, "compare them\n\nFile x · 1 B · 1 lines · sha256 0123456789ab")
    found, question = attachments.split_blocks(content)
    assert question == "compare them\n\nFile x · 1 B · 1 lines · sha256 0123456789ab"
    assert [(a.name, a.text, a.short_hash) for a, _ in found] == [
        ("a.py", "A = '```'\n", files[0].short_hash), ("b.txt", "no newline at the end\n", files[1].short_hash)]
    assert [shown for _, shown in found] == [attachments.block(f) for f in files]
    assert attachments.without(content, found[1][0], found[1][1]).startswith(attachments.block(files[0]) + "\n\ncompare")
    assert attachments.split_blocks("just a question") == ([], "just a question")


def test_a_file_command_with_a_request_below_attaches_then_sends_the_request():
    """The first screen's suggestion: `/file PATH` on its first line, the request below it."""
    from spectui.chat_session.meaning import file_then_message

    command = commands.parse("/file /tmp/csv_tools.py\nadd type hints to this module,\nkeep the rest")
    assert isinstance(command, Command)
    assert file_then_message(command) == (Command("file", "/tmp/csv_tools.py"),
                                           "add type hints to this module,\nkeep the rest")
    assert file_then_message(Command("file", "a.py b.py")) == (Command("file", "a.py b.py"), None)
    system = Command("system", "line one\nline two")  # other commands keep their lines
    assert file_then_message(system) == (system, None)


def test_an_existing_name_wins_over_its_glob_and_the_glob_cap_counts_bytes(tmp_path, monkeypatch):
    """Issue 59 item 8: `page[1].txt` was read as a glob; a `**` glob had no total cap."""
    from typer.testing import CliRunner

    from spectui.cli.app import app

    (tmp_path / "page[1].txt").write_text("page one\n")
    assert attachments.expand(["page[1].txt"], tmp_path) == (["page[1].txt"], [])
    seen = []
    monkeypatch.setattr("spectui.cli.generate.run_generate", lambda options, prompt, **kw: seen.append(prompt) or 0)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["generate", "-f", "page[1].txt", "explain"])
    assert result.exit_code == 0 and "page one" in seen[0], result.output
    for index in range(9):  # 9 files of 500 KB: under the file count, over 4 MB
        (tmp_path / f"big{index}.txt").write_text("x" * 500 * 1024)
    assert attachments.expand(["big*.txt"], tmp_path) == ([], [
        "9 files match, 4.4 MB: at most 200 files and 4 MB go with one message, so nothing was attached (name fewer)"])
    result = CliRunner().invoke(app, ["generate", "-f", "big*.txt", "explain"])
    assert result.exit_code == 2 and "9 files match" in result.stderr and len(seen) == 1


def test_a_glob_still_walking_folders_past_its_time_is_refused(tmp_path, monkeypatch):
    """Issue 59 item 8: `/**/*.xyz` walks the whole disk while the chat waits."""
    import threading

    walked = threading.Event()

    def slow_walk(pattern, root_dir=None, recursive=False):
        walked.wait(10)  # folders with no match, for as long as the test holds it
        yield "late.txt"

    monkeypatch.setattr(attachments.glob, "iglob", slow_walk)
    monkeypatch.setattr(attachments, "GLOB_SECONDS", 0.05)
    try:
        assert attachments.expand(["/**/*.xyz"], tmp_path) == ([], [
            "/**/*.xyz: still walking folders after 0.05 s, so nothing was attached (name a narrower glob)"])
    finally:
        walked.set()


def test_every_command_is_in_the_commands_page():
    page = (Path(__file__).parent.parent / "docs" / "commands.md").read_text()
    missing = [spec.name for spec in commands.COMMANDS if f"`/{spec.name}" not in page and f", `/{spec.name}" not in page]
    assert missing == []
