"""History search (SQLite FTS5), the upgrade of older files to it, rename and delete: in the
store and as `spectui history search/rename/rm`."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from typer.testing import CliRunner

from spectui.cli.app import app as cli
from spectui.core.errors import UsageError
from spectui.core.events import Source, Step
from spectui.store import (
    SCHEMA_VERSION,
    NoSuchConversation,
    Store,
    StoreError,
    open_for_search,
)

from test_history_files import ATTACK, OBEYED, read_only_run

# The tables as spectui wrote them before search (schema 1), copied from spectui/store.py at
# 0a2b2e8: what a user's history file holds when this spectui first opens it.
SCHEMA_1 = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    finish_reason TEXT,            -- NULL while a reply streams (or if the app died)
    error TEXT,
    settings TEXT NOT NULL DEFAULT '{}',
    stats TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS steps (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    arrived REAL NOT NULL,         -- seconds since the reply started, as the UI saw it
    token_ids TEXT NOT NULL,
    sources TEXT NOT NULL,
    pieces TEXT NOT NULL,          -- per-token text as shown
    ghost TEXT NOT NULL,           -- the rejected drafts' text
    text TEXT NOT NULL,
    drafted TEXT NOT NULL,
    k INTEGER NOT NULL,
    temperature REAL NOT NULL,
    draft_seconds REAL NOT NULL,
    verify_seconds REAL NOT NULL,
    exact INTEGER NOT NULL,
    method TEXT NOT NULL,
    PRIMARY KEY (message_id, idx)
);
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
"""

# (title, updated, [(role, content, finish_reason)]) of an old file, oldest first.
OLD_CONVERSATIONS = [
    ("recursion question", 1_700_000_000.0, [
        ("user", "How do I write fibonacci recursively?", "stop"),
        ("assistant", "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)", "stop"),
    ]),
    ("", 1_700_000_100.0, [("user", "Résumé of the meeting, please", "stop")]),
    ("streaming died", 1_700_000_200.0, [
        ("user", "tell me about quicksort", "stop"),
        ("assistant", "", None),  # the app stopped mid-reply: its text is in the steps only
    ]),
]


def old_history(path, version: int = 1) -> None:
    """A history file as the previous spectui left it: schema 1 tables, rows and a step."""
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1)
    for title, updated, messages in OLD_CONVERSATIONS:
        conversation = db.execute(
            "INSERT INTO conversations (title, created, updated, settings) VALUES (?, ?, ?, ?)",
            (title, updated - 50, updated, json.dumps({"k": 4})),
        ).lastrowid
        for role, content, finish in messages:
            message = db.execute(
                "INSERT INTO messages (conversation_id, role, content, created, finish_reason) VALUES (?, ?, ?, ?, ?)",
                (conversation, role, content, updated, finish),
            ).lastrowid
            if role == "assistant":
                db.execute(
                    "INSERT INTO steps VALUES (?, 0, 0.1, '[1, 2]', '[\"draft\", \"bonus\"]', '[\"a\", \"b\"]', '',"
                    " 'ab', '[1]', 4, 0.0, 0.01, 0.02, 1, 'draft')",
                    (message,),
                )
    db.execute("INSERT INTO settings VALUES ('theme', 'light')")
    db.execute(f"PRAGMA user_version = {version}")
    db.commit()
    db.close()


def user_version(path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def index_in_step(store: Store) -> None:
    """FTS5's own check that each external-content index matches its table row for row."""
    for table in ("message_search", "title_search"):
        store._write(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")


def save(store: Store, question: str, answer: str) -> int:
    conversation = store.new_conversation({})
    store.add_message(conversation, "user", question)
    reply = store.add_message(conversation, "assistant", "")
    store.add_step(reply, 0, Step((1,), (Source.TARGET,), answer[:1]), [answer[:1]], "", 0.1)
    store.finish_message(reply, answer, "stop")
    return conversation


@pytest.mark.parametrize("version", [0, 1])  # 0: a file from before spectui kept a version
def test_an_older_history_opens_with_every_conversation_and_is_searchable(tmp_path, version):
    path = tmp_path / "history.sqlite3"
    old_history(path, version)
    before = Store(path, read_only=True)
    ids = [summary.id for summary in before.list_conversations()]
    loaded = [before.load_conversation(conversation_id) for conversation_id in ids]
    before.close()
    assert len(ids) == len(OLD_CONVERSATIONS)

    store = Store(path)  # a chat opening it: upgraded here
    assert user_version(path) == SCHEMA_VERSION
    assert [store.load_conversation(conversation_id) for conversation_id in ids] == loaded  # nothing lost
    assert store.get_setting("theme") == "light"
    found = store.search("fibonacci")
    assert [hit.id for hit in found] == [ids[-1]]  # the oldest conversation
    assert ("fibonacci", True) in found[0].snippet
    assert [hit.id for hit in store.search("resume")] == [ids[1]]  # diacritics folded
    assert [hit.id for hit in store.search("recursion")] == [ids[-1]]  # its title
    index_in_step(store)
    # New rows are indexed as they are written.
    new = save(store, "what about quicksort pivots?", "median of three")
    assert [hit.id for hit in store.search("quicksort")] == [new, ids[0]]  # newest first
    store.close()
    Store(path).close()  # a second open changes nothing
    assert user_version(path) == SCHEMA_VERSION


def test_an_upgrade_that_fails_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    import spectui.store.schema

    path = tmp_path / "history.sqlite3"
    old_history(path)
    failing = {**spectui.store.schema.UPGRADES, 2: spectui.store.schema.UPGRADES[2] + ("SELECT no_such_function()",)}
    monkeypatch.setattr(spectui.store.schema, "UPGRADES", failing)
    with pytest.raises(StoreError) as caught:
        Store(path)
    assert "\n" not in str(caught.value)
    assert user_version(path) == 1
    db = sqlite3.connect(path)
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert "message_search" not in tables and not any(name.startswith("message_search") for name in tables)
    assert db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 5
    db.close()


def test_the_index_follows_finish_rename_and_delete(tmp_path):
    store = Store(tmp_path / "history.sqlite3")
    kept = save(store, "a question about tokenizers", "byte pair encoding merges")
    gone = save(store, "how do quokkas sleep", "quokkas nap in the shade")
    assert store.search("merges")[0].id == kept  # the finished reply's text, not the streaming ''
    store.rename_conversation(kept, "  BPE notes  ")
    assert store.load_conversation(kept).title == "BPE notes"
    assert [hit.id for hit in store.search("bpe")] == [kept] and store.search("tokenizers")[0].id == kept
    with pytest.raises(UsageError):
        store.rename_conversation(kept, "   ")
    with pytest.raises(NoSuchConversation) as unknown:
        store.rename_conversation(99, "x")
    assert unknown.value.exit_code == 2

    store.delete_conversation(gone)
    assert store.search("quokkas") == []
    with pytest.raises(StoreError, match=f"no conversation {gone}"):
        store.load_conversation(gone)
    counts = store._read(
        "SELECT (SELECT COUNT(*) FROM messages WHERE conversation_id = ?),"
        " (SELECT COUNT(*) FROM steps WHERE message_id NOT IN (SELECT id FROM messages)),"
        " (SELECT COUNT(*) FROM message_search WHERE message_search MATCH 'quokkas'),"
        " (SELECT COUNT(*) FROM title_search WHERE title_search MATCH 'quokkas')",
        (gone,),
    )
    assert counts == [(0, 0, 0, 0)]
    index_in_step(store)
    with pytest.raises(NoSuchConversation):
        store.delete_conversation(gone)
    assert [summary.id for summary in store.list_conversations()] == [kept]  # the other one untouched
    store.close()


@pytest.mark.parametrize("typed", ['def foo(', '"', "NEAR(a b)", "a* OR b", "title:x", "^", "-x", "AND", "("])
def test_anything_typed_is_a_valid_search(tmp_path, typed):
    store = Store(tmp_path / "history.sqlite3")
    conversation = save(store, "def foo(bar): NEAR AND title:x", "ok")
    assert [hit.id for hit in store.search(typed)] in ([], [conversation])  # FTS5's syntax is plain text
    assert [hit.id for hit in store.search("def foo(")] == [conversation]
    assert store.search("   ") == []
    store.close()


def test_without_fts5_the_history_is_one_line_and_untouched(tmp_path, monkeypatch):
    import spectui.store.schema

    path = tmp_path / "history.sqlite3"
    old_history(path)
    before = path.read_bytes()
    monkeypatch.setattr(spectui.store.schema, "fts5_available", lambda: False)
    with pytest.raises(StoreError) as caught:
        Store(path)
    message = str(caught.value)
    assert "without FTS5" in message and "\n" not in message
    assert path.read_bytes() == before
    reader = Store(path, read_only=True)  # list and export still read it
    assert len(reader.list_conversations()) == 3
    with pytest.raises(StoreError, match="without FTS5"):
        reader.search("fibonacci")
    reader.close()


def test_this_python_has_fts5():
    from spectui.store import fts5_available

    assert fts5_available()


# --- the command line -------------------------------------------------------------------------


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(folder))
    return folder


def history(*args: str, answer: str | None = None):
    return CliRunner().invoke(cli, ["history", *args], input=answer)


def test_search_on_the_command_line_finds_an_old_conversation(data_dir):
    path = data_dir / "history.sqlite3"
    old_history(path)
    result = history("search", "fib")  # a file from the previous spectui: indexed once, then searched
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert re.match(r"\s+1  \d{4}-\d\d-\d\d \d\d:\d\d  recursion question  — ", line)
    assert re.search(r"»fib(onacci)?«", line)
    assert user_version(path) == SCHEMA_VERSION
    [record] = [json.loads(line) for line in history("search", "fib", "--json").stdout.splitlines()]
    assert record["id"] == 1 and record["title"] == "recursion question" and record["num_messages"] == 2
    matched = [record["snippet"][start:end] for start, end in record["matches"]]
    assert matched and all(word in ("fib", "fibonacci") for word in matched)
    two_words = history("search", "meeting", "résumé")
    assert two_words.exit_code == 0 and two_words.stdout.startswith("    2  ")
    assert history("search", "nothing-like-this").stdout == ""


def test_search_shows_controls_as_pictures(data_dir):
    store = Store(data_dir / "history.sqlite3")
    save(store, "title " + ATTACK, "the needle " + ATTACK)
    store.close()
    result = history("search", "needle")
    assert result.exit_code == 0 and "»needle« ␛]0;pwned␇" in result.stdout
    assert not OBEYED.search(result.stdout.replace("\n", ""))
    assert "title ␛]0;pwned␇" in result.stdout
    record = json.loads(history("search", "needle", "--json").stdout)
    assert record["snippet"] == "the needle " + ATTACK  # the same value, escaped in the JSON


def test_search_where_nothing_was_saved_creates_nothing(data_dir):
    assert history("search", "x").stdout == ""
    assert list(data_dir.iterdir()) == []


def test_search_beside_a_chat_that_is_writing(data_dir):
    path = data_dir / "history.sqlite3"
    store = Store(path)
    conversation = save(store, "the kept question", "reply")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a chat in the middle of saving a step
    writer.execute("UPDATE conversations SET title = 'in flight' WHERE id = ?", (conversation,))
    try:
        result = history("search", "kept")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        store.close()
    assert result.exit_code == 0 and "the kept question" in result.stdout, result.output


def test_search_from_a_read_only_folder(data_dir):
    store = Store(data_dir / "history.sqlite3")
    save(store, "from a read-only disk", "the needle reply")
    store.close()
    searched = read_only_run(data_dir, "search", "needle")
    assert searched.returncode == 0, searched.stderr
    assert "from a read-only disk" in searched.stdout and "»needle«" in searched.stdout


def test_rename_on_the_command_line(data_dir):
    store = Store(data_dir / "history.sqlite3")
    conversation = save(store, "old name", "reply")
    store.close()
    result = history("rename", str(conversation), "[/x] new name")
    assert result.exit_code == 0 and result.stdout.strip() == f"conversation {conversation} is now “[/x] new name”"
    assert json.loads(history("list", "--json").stdout)["title"] == "[/x] new name"
    assert history("search", "new", "--json").stdout.count("\n") == 1
    unknown = history("rename", "42", "x")
    assert unknown.exit_code == 2
    assert unknown.stderr.strip().splitlines() == [
        f"spectui: error: no conversation 42 in {data_dir / 'history.sqlite3'} (see spectui history list)"
    ]
    blank = history("rename", str(conversation), " ")
    assert blank.exit_code == 2 and "cannot be empty" in blank.stderr


def test_rm_asks_first_and_deletes_everything_of_the_conversation(data_dir):
    path = data_dir / "history.sqlite3"
    store = Store(path)
    kept = save(store, "keep me", "kept reply")
    doomed = save(store, "delete me", "doomed reply")
    store.close()

    declined = history("rm", str(doomed), answer="n\n")
    assert declined.exit_code == 1 and f"Delete conversation {doomed}, “delete me”, and its 2 message(s)?" in declined.stderr
    no_answer = history("rm", str(doomed), answer="")
    assert no_answer.exit_code == 1 and "kept conversation" in no_answer.stderr
    assert len(history("list").stdout.splitlines()) == 2

    confirmed = history("rm", str(doomed), answer="y\n")
    assert confirmed.exit_code == 0  # (the runner echoes the typed answer to stdout, as a terminal would)
    assert confirmed.stdout.splitlines()[-1] == f"deleted conversation {doomed}"
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM messages WHERE conversation_id = ?", (doomed,)).fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == 1  # the kept reply's
    db.close()
    assert history("search", "doomed").stdout == "" and "keep me" in history("search", "kept").stdout

    unknown = history("rm", str(doomed), "--yes")
    assert unknown.exit_code == 2
    assert unknown.stderr.strip().splitlines() == [
        f"spectui: error: no conversation {doomed} in {path} (see spectui history list)"
    ]
    forced = history("rm", str(kept), "--yes")
    assert forced.exit_code == 0 and history("list").stdout == ""


def test_rm_where_nothing_was_saved_creates_nothing(data_dir):
    result = history("rm", "3", "--yes")
    assert result.exit_code == 2 and result.stderr.strip().startswith("spectui: error: no conversation 3: no history at")
    assert list(data_dir.iterdir()) == []


def test_open_for_search_names_a_file_it_cannot_index(tmp_path, monkeypatch):
    import spectui.store.schema

    path = tmp_path / "history.sqlite3"
    old_history(path)
    monkeypatch.setattr(spectui.store.schema, "fts5_available", lambda: False)
    with pytest.raises(StoreError, match="search index is built once"):
        open_for_search(path)
    assert user_version(path) == 1
