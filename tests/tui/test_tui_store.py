"""History in SQLite: each step committed as it arrives, resume, exports."""

from __future__ import annotations

import json
import sqlite3

import pytest

from spectui.core.events import Source, Step
from spectui.store import Store, StoreError, export_markdown, export_trace_jsonl


def step(i, sources=(Source.DRAFT, Source.RECOVERED)):
    ids = tuple(range(i * 10, i * 10 + len(sources)))
    return Step(ids, tuple(sources), f"<{i}>", drafted=ids[:-1] + (999,), k=2, draft_seconds=0.1, verify_seconds=0.2, method="draft")


def test_wal_mode_and_each_step_is_committed_at_once(tmp_path):
    path = tmp_path / "h.sqlite3"
    store = Store(path)
    conversation = store.new_conversation({"k": 2})
    store.add_message(conversation, "user", "hi there\nsecond line")
    reply = store.add_message(conversation, "assistant", "")
    store.add_step(reply, 0, step(0), ["a", "b"], " ghost", 0.25)
    # Another connection (another process after a crash) sees the step already.
    other = sqlite3.connect(path)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert other.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == 1
    other.close()
    store.add_step(reply, 1, step(1), ["c", "d"], "", 0.5)
    # The app "dies" here: no finish_message. A new Store rebuilds the reply from its steps.
    reopened = Store(path)
    loaded = reopened.load_conversation(conversation)
    assert loaded.title == "hi there"
    assistant = loaded.messages[1]
    assert assistant.finish_reason == "interrupted"
    assert assistant.content == "<0><1>"
    assert [s.step for s in assistant.steps] == [step(0), step(1)]
    assert assistant.steps[0].pieces == ("a", "b") and assistant.steps[0].ghost == " ghost"
    store.close()
    reopened.close()


def test_finish_list_latest_and_exports(tmp_path):
    store = Store(tmp_path / "h.sqlite3")
    first = store.new_conversation({"k": 4, "engine": "embedded"})
    store.add_message(first, "user", "old")
    second = store.new_conversation({"k": 4})
    store.add_message(second, "user", "Explain **this**")
    reply = store.add_message(second, "assistant", "", settings={"k": 5, "temperature": 0.2, "auto_k": True})
    store.add_step(reply, 0, step(0), ["<", "0>"], "", 0.1)
    store.finish_message(reply, "<0>", "cancelled", None, {"gamma": 0.5, "tau": 1.5, "tokens_per_s": 12.0})
    assert store.latest_conversation_id() == second
    summaries = store.list_conversations()
    assert [s.id for s in summaries] == [second, first]
    assert summaries[0].num_messages == 2
    conversation = store.load_conversation(second)
    markdown = export_markdown(conversation)
    assert "# Explain **this**" in markdown
    assert "## user\n\nExplain **this**" in markdown
    assert "_k auto · T 0.20 · γ 0.50 · τ 1.50 · 12.0 tok/s · ended: cancelled_" in markdown  # this reply's settings
    lines = [json.loads(line) for line in export_trace_jsonl(conversation)]
    assert len(lines) == 1
    assert lines[0]["sources"] == ["draft", "recovered"] and lines[0]["num_accepted"] == 1
    assert lines[0]["drafted"] == [0, 999] and lines[0]["pieces"] == ["<", "0>"]
    store.set_setting("theme", "light")
    assert store.get_setting("theme") == "light" and store.get_setting("nope", "x") == "x"
    with pytest.raises(StoreError, match="no conversation 99"):
        store.load_conversation(99)
    store.close()


def test_unopenable_path_is_a_one_line_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot open history"):
        Store(blocker / "sub" / "h.sqlite3")


def test_replace_steps_swaps_a_replys_steps_in_one_go(tmp_path):
    from dataclasses import replace

    from spectui.store import StoredStep

    store = Store(tmp_path / "h.sqlite3")
    conversation = store.new_conversation({})
    reply = store.add_message(conversation, "assistant", "")
    counted = replace(step(0), drafted=(), draft_count=1)  # vLLM: counts, not ids
    store.add_step(reply, 0, counted, ["a", "b"], "", 0.1)
    store.add_step(reply, 1, step(1), ["c", "d"], "", 0.2)
    recoloured = replace(counted, sources=(Source.DRAFT, Source.BONUS))
    store.replace_steps(reply, [StoredStep(recoloured, ("a", "b"), "", 0.1), StoredStep(step(1), ("c", "d"), "", 0.2)])
    loaded = store.load_steps(reply)
    assert [s.step for s in loaded] == [recoloured, step(1)]
    assert loaded[0].step.num_drafted == 1 and loaded[0].arrived == 0.1
    with pytest.raises(StoreError, match="FOREIGN KEY"):  # no such message: rolled back, the store stays usable
        store.replace_steps(reply + 99, [StoredStep(step(2), ("e", "f"), "", 0.3)])
    store.replace_steps(reply, [StoredStep(step(2), ("e", "f"), "", 0.3)])
    assert [s.step for s in store.load_steps(reply)] == [step(2)]
    store.close()


def test_a_history_from_a_newer_spectui_is_refused_untouched(tmp_path):
    import sqlite3

    from spectui.store import SCHEMA_VERSION, Store, StoreError

    path = tmp_path / "history.sqlite3"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError) as caught:
        Store(path)
    message = str(caught.value)
    assert "newer spectui" in message and str(path) in message and "\n" not in message
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
    db.close()


def test_a_tree_step_keeps_its_node_count_and_chains_stay_as_they_were(tmp_path):
    from dataclasses import replace

    path = tmp_path / "h.sqlite3"
    store = Store(path)
    conversation = store.new_conversation({})
    reply = store.add_message(conversation, "assistant", "")
    tree = replace(step(1), tree_nodes=14, method="medusa")
    store.add_step(reply, 0, step(0), ["a", "b"], "", 0.1)
    store.add_step(reply, 1, tree, ["c", "d"], "", 0.2)
    assert [s.step for s in store.load_steps(reply)] == [step(0), tree]
    # A chain's row is what it always was (a plain list of ids), so any spectui reads it.
    db = sqlite3.connect(path)
    stored = [json.loads(row[0]) for row in db.execute("SELECT drafted FROM steps ORDER BY idx")]
    db.close()
    assert stored == [[0, 999], {"tree_nodes": 14, "ids": [10, 999]}]
    lines = [json.loads(line) for line in export_trace_jsonl(store.load_conversation(conversation))]
    assert [line["tree_nodes"] for line in lines] == [None, 14]
    store.close()
