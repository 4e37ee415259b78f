"""`spectui history`: shown safely, read without writing (read-only folders, a chat holding the
lock), one line for every failure, and a damaged file salvaged into a new one."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spectui.cli.app import app as cli
from spectui.core.events import Source, Step
from spectui.store import Store, StoreError, salvage

ATTACK = "\x1b]0;pwned\x07\x1b[2J\x9b31m\x7f"
OBEYED = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(folder))
    return folder


def history(*args: str):
    return CliRunner().invoke(cli, ["history", *args])


def save_conversation(store: Store, title_text: str, reply_text: str, filler: str = "") -> int:
    conversation_id = store.new_conversation({"model": "m" + ATTACK})
    store.add_message(conversation_id, "user", title_text + filler)
    reply = store.add_message(conversation_id, "assistant", "", settings={"k": 4})
    step = Step((1, 2), (Source.DRAFT, Source.BONUS), reply_text, pieces=(reply_text[:1], reply_text[1:]))
    store.add_step(reply, 0, step, [reply_text[:1], reply_text[1:]], "", 0.1)
    store.finish_message(reply, reply_text + filler, "error", error="server: " + ATTACK)
    return conversation_id


def test_list_and_export_show_controls_and_the_trace_keeps_them_exact(data_dir):
    store = Store(data_dir / "history.sqlite3")
    conversation_id = save_conversation(store, "title " + ATTACK, "reply " + ATTACK)
    store.close()

    listed = history("list")
    assert listed.exit_code == 0 and "title ␛]0;pwned␇␛[2J\\x9b31m␡" in listed.stdout
    assert not OBEYED.search(listed.stdout.replace("\n", ""))
    markdown = history("export", str(conversation_id))
    assert markdown.exit_code == 0 and "reply ␛]0;pwned" in markdown.stdout
    assert not OBEYED.search(markdown.stdout.replace("\n", ""))
    trace = history("export", str(conversation_id), "--format", "jsonl")
    assert trace.exit_code == 0 and not OBEYED.search(trace.stdout.replace("\n", ""))
    assert json.loads(trace.stdout)["text"] == "reply " + ATTACK  # the same value, escaped
    assert json.loads(history("list", "--json").stdout)["title"] == "title " + ATTACK


def test_export_to_a_missing_folder_is_one_line(data_dir, tmp_path):
    store = Store(data_dir / "history.sqlite3")
    conversation_id = save_conversation(store, "hi", "there")
    store.close()
    result = history("export", str(conversation_id), "-o", str(tmp_path / "missing" / "x.md"))
    assert result.exit_code != 0 and result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.strip().splitlines() == [
        f"spectui: error: cannot write {tmp_path / 'missing' / 'x.md'}: No such file or directory"
    ]


def test_listing_creates_nothing_where_nothing_was_saved(data_dir):
    result = history("list")
    assert result.exit_code == 0 and result.stdout == ""
    assert list(data_dir.iterdir()) == []
    exported = history("export", "1")
    assert exported.exit_code != 0 and "no history at" in exported.stderr


def test_reading_does_not_wait_for_a_chat_that_is_writing(data_dir):
    path = data_dir / "history.sqlite3"
    store = Store(path)
    conversation_id = save_conversation(store, "kept", "reply")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a chat in the middle of saving a step
    writer.execute("UPDATE conversations SET title = 'in flight' WHERE id = ?", (conversation_id,))
    try:
        listed = history("list")
        exported = history("export", str(conversation_id))
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        store.close()
    assert listed.exit_code == 0 and "kept" in listed.stdout, listed.output
    assert exported.exit_code == 0 and "reply" in exported.stdout


def test_an_exclusive_lock_is_waited_for_then_named(data_dir, monkeypatch):
    import spectui.store.database

    path = data_dir / "history.sqlite3"
    store = Store(path)
    save_conversation(store, "kept", "reply")
    store.close()
    monkeypatch.setattr(spectui.store.database, "LOCK_WAIT_S", 0.3)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = history("list")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code != 0
    [line] = result.stderr.strip().splitlines()
    assert "locked by another process" in line and str(path) in line


def read_only_run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """`spectui history ...` with `folder` read-only: a read-only bind mount where this runs as
    root (which ignores file modes), the folder's mode elsewhere."""
    command = [sys.executable, "-c", "from spectui.cli.app import main; main()", "history", *args]
    env = {**os.environ, "SPECTUI_DATA_DIR": str(folder)}
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        finally:
            folder.chmod(0o755)
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
    probe = subprocess.run(["unshare", "-m", "sh", "-c", script, str(folder), "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot make a read-only folder here (root without mount namespaces)")
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(folder), *command], env=env, capture_output=True, text=True, timeout=120
    )


def test_history_reads_from_a_read_only_folder(data_dir):
    store = Store(data_dir / "history.sqlite3")
    conversation_id = save_conversation(store, "from a read-only disk", "the reply")
    store.close()
    assert sorted(path.name for path in data_dir.iterdir()) == ["history.sqlite3"]  # WAL folded in on close
    listed = read_only_run(data_dir, "list")
    assert listed.returncode == 0, listed.stderr
    assert "from a read-only disk" in listed.stdout
    exported = read_only_run(data_dir, "export", str(conversation_id))
    assert exported.returncode == 0 and "the reply" in exported.stdout, exported.stderr


# --- a damaged file --------------------------------------------------------------------------

PAGE = 4096
MARKER = "DAMAGED-PAGE-MARKER"


def damaged_history(path: Path) -> tuple[list[int], int]:
    """Three conversations; the page holding the second one's messages overwritten.
    Each message is big enough to sit on a page of its own."""
    store = Store(path)
    filler = "x" * 3000
    ids = [
        save_conversation(store, "first", "reply one", filler),
        save_conversation(store, "second\n" + MARKER, "reply two", filler),
        save_conversation(store, "third", "reply three", filler),
    ]
    store.close()
    data = bytearray(path.read_bytes())
    offsets = [match.start() for match in re.finditer(MARKER.encode(), data)]
    assert len(offsets) == 1, "the marker is on one page, of the messages table"
    page = offsets[0] // PAGE
    assert page > 0
    data[page * PAGE : (page + 1) * PAGE] = b"\xff" * PAGE
    path.write_bytes(bytes(data))
    return ids, ids[1]


def test_a_damaged_history_is_one_line_and_salvage_copies_what_reads(data_dir, tmp_path):
    path = data_dir / "history.sqlite3"
    ids, damaged_id = damaged_history(path)
    before = path.read_bytes()

    exported = history("export", str(damaged_id))
    assert exported.exit_code != 0 and not isinstance(exported.exception, sqlite3.Error)
    [line] = exported.stderr.strip().splitlines()
    assert line.startswith(f"spectui: error: history {path} is damaged") and "spectui history salvage" in line
    good = history("export", str(ids[0]))
    assert good.exit_code == 0 and "reply one" in good.stdout  # the rest still reads

    target = tmp_path / "salvaged.sqlite3"
    result = history("salvage", "-o", str(target))
    assert result.exit_code == 0, result.output
    assert "salvaged 2 conversation(s) whole" in result.stdout and f"in part ({damaged_id})" in result.stdout
    assert path.read_bytes() == before  # the damaged file is left as it was

    salvaged = Store(target, read_only=True)
    assert sorted(summary.id for summary in salvaged.list_conversations()) == ids
    first = salvaged.load_conversation(ids[0])
    assert [m.content for m in first.messages] == ["first" + "x" * 3000, "reply one" + "x" * 3000]
    assert first.messages[1].steps[0].step.text == "reply one"
    assert first.messages[1].error == "server: " + ATTACK  # copied byte for byte
    salvaged.close()
    again = history("salvage", "-o", str(target))
    assert again.exit_code != 0 and "exists" in again.stderr


def test_salvage_keeps_the_messages_of_conversations_whose_headers_were_lost(tmp_path):
    path = tmp_path / "h.sqlite3"
    store = Store(path)
    ids = [save_conversation(store, f"title {n}", f"reply {n}", "x" * 3000) for n in range(3)]
    store.close()
    data = bytearray(path.read_bytes())
    page = data.index(b"title 1") // PAGE  # the conversations table's one page
    data[page * PAGE : (page + 1) * PAGE] = b"\xff" * PAGE
    path.write_bytes(bytes(data))
    result = salvage(path, tmp_path / "out.sqlite3")
    assert (result.conversations, result.partial, result.lost) == (0, tuple(ids), ())
    copy = Store(tmp_path / "out.sqlite3", read_only=True)
    for n, conversation_id in enumerate(ids):
        conversation = copy.load_conversation(conversation_id)
        assert conversation.title == "(salvaged)"
        assert [m.content for m in conversation.messages] == [f"title {n}" + "x" * 3000, f"reply {n}" + "x" * 3000]
    copy.close()


def test_salvage_of_an_undamaged_file_copies_everything(tmp_path):
    source = tmp_path / "h.sqlite3"
    store = Store(source)
    ids = [save_conversation(store, f"c{n}", f"r{n}") for n in range(3)]
    store.set_setting("theme", "light")
    store.close()
    result = salvage(source, tmp_path / "out.sqlite3")
    assert (result.conversations, result.partial, result.lost) == (3, (), ())
    copy = Store(tmp_path / "out.sqlite3", read_only=True)
    original = Store(source, read_only=True)
    for conversation_id in ids:
        assert copy.load_conversation(conversation_id) == original.load_conversation(conversation_id)
    assert copy.get_setting("theme") == "light"
    copy.close()
    original.close()


def test_a_row_that_does_not_read_is_named(tmp_path):
    path = tmp_path / "h.sqlite3"
    store = Store(path)
    conversation_id = save_conversation(store, "hi", "there")
    store._write("UPDATE messages SET stats = 'not json' WHERE role = 'assistant'")
    with pytest.raises(StoreError, match=f"conversation {conversation_id} holds a record that does not read"):
        store.load_conversation(conversation_id)
    store.close()
