"""History says what the chat shows: the turns that regenerate and edit replaced stay in the
file but out of search, counts and every export; the JSON export; each reply's settings."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from spectui.cli.app import app as cli
from spectui.core.events import Source, Step
from spectui.store import Store, export_json, export_markdown, export_trace_jsonl


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(folder))
    return folder


def history(*args: str):
    return CliRunner().invoke(cli, ["history", *args])


def reply(store: Store, conversation_id: int, text: str, settings: dict, superseded: bool = False) -> int:
    row = store.add_message(conversation_id, "assistant", "", settings=settings)
    store.add_step(row, 0, Step((1,), (Source.TARGET,), text, k=settings.get("k", 4)), [text], "", 0.1)
    store.finish_message(row, text, "stop", stats={"superseded": True} if superseded else {})
    return row


def replaced_turns(store: Store) -> int:
    """A chat as F10, Ctrl+F10 and F12 leave it: two replaced replies, a replaced question
    (with its reply); the chat shows one question about Paris and its answer."""
    conversation_id = store.new_conversation({"k": 4, "temperature": 0.0})
    store.add_message(conversation_id, "user", "hello")
    reply(store, conversation_id, "first greeting", {"k": 4, "temperature": 0.0, "seed": 1}, superseded=True)
    reply(store, conversation_id, "second greeting", {"k": 4, "temperature": 0.0, "seed": 1}, superseded=True)
    reply(store, conversation_id, "third greeting", {"k": 6, "temperature": 0.7, "seed": 9, "method": "ngram"})
    question = store.add_message(conversation_id, "user", "tell me about rome")
    store.finish_message(question, "tell me about rome", "stop", stats={"superseded": True})
    reply(store, conversation_id, "rome is old", {"k": 6, "temperature": 0.7, "seed": 9}, superseded=True)
    store.add_message(conversation_id, "user", "tell me about paris")
    reply(store, conversation_id, "paris is big", {"k": 2, "temperature": 0.5, "seed": 3, "method": "draft"})
    return conversation_id


def test_exports_leave_the_replaced_turns_out(tmp_path):
    store = Store(tmp_path / "h.sqlite3")
    conversation = store.load_conversation(replaced_turns(store))
    markdown = export_markdown(conversation)
    assert markdown.count("## assistant") == 2 and markdown.count("## user") == 2
    assert "rome" not in markdown and "first greeting" not in markdown and "second greeting" not in markdown
    assert "third greeting" in markdown and "paris is big" in markdown
    trace = [json.loads(line) for line in export_trace_jsonl(conversation)]
    assert [line["text"] for line in trace] == ["third greeting", "paris is big"]
    document = json.loads(export_json(conversation))
    assert [m["content"] for m in document["messages"]] == [
        "hello", "third greeting", "tell me about paris", "paris is big"]
    store.close()


def test_search_and_counts_leave_the_replaced_turns_out(tmp_path):
    store = Store(tmp_path / "h.sqlite3")
    conversation_id = replaced_turns(store)
    assert store.search("rome") == []
    assert store.search("greeting")[0].snippet_text.startswith("third")
    [hit] = store.search("paris")
    assert hit.num_messages == 4
    assert store.list_conversations()[0].num_messages == 4
    assert store.conversation_summary(conversation_id).num_messages == 4
    store.close()


def test_a_row_whose_stats_do_not_read_still_counts_and_lists(tmp_path):
    store = Store(tmp_path / "h.sqlite3")
    conversation_id = store.new_conversation({})
    row = store.add_message(conversation_id, "user", "kept")
    store._write("UPDATE messages SET stats = 'not json' WHERE id = ?", (row,))
    assert store.list_conversations()[0].num_messages == 1
    assert store.search("kept")[0].num_messages == 1
    store.close()


def test_the_command_line_says_what_the_chat_shows(data_dir):
    store = Store(data_dir / "history.sqlite3")
    conversation_id = replaced_turns(store)
    store.close()
    assert history("search", "rome").stdout == ""
    assert " 4 msgs " in history("list").stdout
    exported = history("export", str(conversation_id))
    assert exported.exit_code == 0 and exported.stdout.count("## assistant") == 2 and "rome" not in exported.stdout


def test_each_reply_says_the_settings_it_was_made_with(tmp_path):
    store = Store(tmp_path / "h.sqlite3")
    markdown = export_markdown(store.load_conversation(replaced_turns(store)))
    assert "_started with k 4, temperature 0.0_" in markdown
    assert "_k 6 · T 0.70 · ngram · seed 9_" in markdown
    assert "_k 2 · T 0.50 · draft · seed 3_" in markdown
    store.close()


def test_json_export_on_the_command_line(data_dir, tmp_path):
    store = Store(data_dir / "history.sqlite3")
    conversation_id = replaced_turns(store)
    store.close()
    result = history("export", str(conversation_id), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["id"] == conversation_id and document["settings"] == {"k": 4, "temperature": 0.0}
    replies = [m for m in document["messages"] if m["role"] == "assistant"]
    assert [(m["settings"]["k"], m["settings"]["seed"]) for m in replies] == [(6, 9), (2, 3)]
    out = tmp_path / "chat.json"
    assert history("export", str(conversation_id), "-f", "json", "-o", str(out)).exit_code == 0
    assert json.loads(out.read_text())["messages"][-1]["content"] == "paris is big"
