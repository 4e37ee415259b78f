"""The replies a user's history holds, as drafting material for suffix decoding.

Read-only: the history file is opened with SQLite's read-only mode, never created nor
migrated here (spectui.store owns it). Only finished assistant replies are read, newest
first; each is tokenized with the engine's tokenizer, whatever model wrote it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

# The most recent replies read at start: enough to hold a user's recurring code and
# formats, few enough that indexing them takes well under a second.
HISTORY_REPLIES = 500


def stored_replies(path: Path, limit: int = HISTORY_REPLIES) -> list[str]:
    """Finished assistant replies in a history file, newest first ([] if there is none)."""
    if not Path(path).is_file():
        return []
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        rows = connection.execute(
            "SELECT content FROM messages WHERE role = 'assistant' AND finish_reason IN ('stop', 'length')"
            " AND content != '' ORDER BY id DESC LIMIT ?",
            (limit,),
        ).fetchall()
    except sqlite3.Error:  # a file that is not (yet) a spectui history drafts from nothing
        return []
    finally:
        connection.close()
    return [content for (content,) in rows]


def suffix_proposer(tokenizer: Any, use_history: bool, history_path: Path | None = None):
    """Suffix decoding over the conversation, and over the stored replies when use_history."""
    from spectui.engines.speculative.suffix import SuffixProposer

    history: list[list[int]] = []
    if use_history:
        if history_path is None:
            from spectui.store import default_store_path

            history_path = default_store_path()
        texts = stored_replies(history_path)
        if texts:
            history = tokenizer(texts[::-1], add_special_tokens=False)["input_ids"]  # oldest first
    return SuffixProposer(history, use_history=use_history)
