"""`history list` and `history search` with more conversations than they show (issue 59 item 8):
they said nothing of the rest. Now a line on stderr says how many there are and how to see
more (--limit N, --all)."""

from __future__ import annotations

import sqlite3

from typer.testing import CliRunner

from spectui.cli.app import app as cli
from spectui.store import Store

MANY = 203


def many_conversations(folder) -> None:
    """MANY conversations, each with one user message that holds 'needle' (written in one go)."""
    folder.mkdir()
    Store(folder / "history.sqlite3").close()
    db = sqlite3.connect(folder / "history.sqlite3")
    with db:
        for index in range(MANY):
            conversation = db.execute("INSERT INTO conversations (title, created, updated, settings) VALUES (?, ?, ?, '{}')",
                                      (f"chat {index}", index, index)).lastrowid
            db.execute("INSERT INTO messages (conversation_id, role, content, created) VALUES (?, 'user', ?, ?)",
                       (conversation, f"needle number {index}", index))
    db.close()


def test_history_list_and_search_say_how_many_they_leave_out(tmp_path, monkeypatch):
    many_conversations(tmp_path / "data")
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path / "data"))
    runner = CliRunner()
    listed = runner.invoke(cli, ["history", "list"])
    assert listed.exit_code == 0 and len(listed.stdout.splitlines()) == 200
    assert listed.stderr.strip() == f"showing the newest 200 of {MANY} conversations: --limit N or --all shows more"
    assert "chat 202" in listed.stdout.splitlines()[0]
    every = runner.invoke(cli, ["history", "list", "--all"])
    assert len(every.stdout.splitlines()) == MANY and every.stderr == ""
    assert len(runner.invoke(cli, ["history", "list", "--limit", "5"]).stdout.splitlines()) == 5
    found = runner.invoke(cli, ["history", "search", "needle"])
    assert found.exit_code == 0 and len(found.stdout.splitlines()) == 200, found.output
    assert f"showing the newest 200 of {MANY} conversations that match" in found.stderr
    assert len(runner.invoke(cli, ["history", "search", "--all", "needle"]).stdout.splitlines()) == MANY
    one = runner.invoke(cli, ["history", "search", "number", "150"])  # a search under the limit says nothing more
    assert one.stderr == "" and len(one.stdout.splitlines()) == 1
