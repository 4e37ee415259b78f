"""The history file's tables, how an older file is brought up to them, and the search SQL."""

from __future__ import annotations

import functools
import sqlite3

from spectui.store.records import StoreError

# The tables of schema 1, one statement each (run one by one inside the upgrade's transaction).
TABLES = (
    """CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}'
)""",
    """CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    finish_reason TEXT,            -- NULL while a reply streams (or if the app died)
    error TEXT,
    settings TEXT NOT NULL DEFAULT '{}',
    stats TEXT NOT NULL DEFAULT '{}'
)""",
    """CREATE TABLE IF NOT EXISTS steps (
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
)""",
    """CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id)",
)

# Schema 2: full-text search over message contents and titles. External-content FTS5 tables:
# the index holds tokens only and snippet() reads the text from messages and conversations,
# so nothing is stored twice (a contentless table cannot make a snippet). Triggers keep the
# index in step with every insert, update and delete, whoever writes (a chat, salvage, rm).
TOKENIZER = "unicode61 remove_diacritics 2"


def search_index(index: str, table: str, column: str) -> tuple[str, ...]:
    """An external-content FTS5 index over table.column and the triggers that keep it in step;
    what an older spectui saved is indexed now, in the same transaction."""
    forget = f"INSERT INTO {index} ({index}, rowid, {column}) VALUES ('delete', old.id, old.{column});"
    learn = f"INSERT INTO {index} (rowid, {column}) VALUES (new.id, new.{column});"
    return (
        f"CREATE VIRTUAL TABLE {index} USING fts5({column}, content='{table}', content_rowid='id', tokenize='{TOKENIZER}')",
        f"CREATE TRIGGER {index}_insert AFTER INSERT ON {table} BEGIN\n    {learn}\nEND",
        f"CREATE TRIGGER {index}_update AFTER UPDATE OF {column} ON {table} BEGIN\n    {forget}\n    {learn}\nEND",
        f"CREATE TRIGGER {index}_delete AFTER DELETE ON {table} BEGIN\n    {forget}\nEND",
        f"INSERT INTO {index} ({index}) VALUES ('rebuild')",
    )


SEARCH_TABLES = search_index("message_search", "messages", "content") + search_index("title_search", "conversations", "title")

# PRAGMA user_version of the history file -> the statements that bring the one before it
# there. 0 is a new file (or one from before versions were kept): its tables are made.
# A file written by a newer spectui may hold what this one does not understand: it is
# refused (named, one line) rather than altered.
UPGRADES: dict[int, tuple[str, ...]] = {1: TABLES, 2: SEARCH_TABLES}
SCHEMA_VERSION = max(UPGRADES)
SEARCH_VERSION = 2


def upgrade(db: sqlite3.Connection, version: int) -> None:
    """The statements that bring a file at `version` to SCHEMA_VERSION, in the caller's transaction."""
    for step in range(version + 1, SCHEMA_VERSION + 1):
        for statement in UPGRADES[step]:
            db.execute(statement)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


@functools.cache
def fts5_available() -> bool:
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE probe USING fts5(text)")
        return True
    except sqlite3.OperationalError:  # "no such module: fts5"
        return False
    finally:
        db.close()


def require_fts5() -> None:
    if not fts5_available():
        raise StoreError(
            f"this Python's sqlite3 (SQLite {sqlite3.sqlite_version}) was built without FTS5, which spectui's "
            "history needs for search: use a Python whose sqlite3 has it (most builds do), or chat with --no-history"
        )


# snippet() marks the matched words with these; private-use code points, which chat text
# does not hold, so the marks can be found again (SearchHit.snippet splits on them).
MATCH_START, MATCH_END = "\ue000", "\ue001"
SNIPPET_TOKENS = 12  # words of context a snippet keeps around the match


def snippet_parts(marked: str) -> tuple[tuple[str, bool], ...]:
    parts = []
    for index, chunk in enumerate(marked.split(MATCH_START)):
        matched, _, rest = chunk.partition(MATCH_END) if index else ("", "", chunk)
        parts += [(text, flag) for text, flag in ((matched, True), (rest, False)) if text]
    return tuple(parts)


def match_query(text: str) -> str:
    """What a user typed as an FTS5 query: every word required, each a prefix (so the list
    narrows as they type). Quoting each word keeps FTS5's syntax (AND, NEAR, *, :, quotes,
    parentheses) plain text: any input is a valid query."""
    return " ".join('"' + word.replace('"', '""') + '"*' for word in text.split())


# A message the chat shows: not a turn replaced by regenerate or edit (marked superseded in
# its stats, spectui.chat_session.transcript). Search, counts and exports leave the others out.
# CASE, not AND: SQLite does not promise to skip json_extract on a row whose JSON is damaged.
SHOWN = "(CASE WHEN json_valid(m.stats) THEN coalesce(json_extract(m.stats, '$.superseded'), 0) ELSE 0 END) = 0"


# One row per conversation, newest first like the list it filters, with the snippet of its
# best match (by FTS5's rank); a message's match is preferred to the title's.
# How many conversations SEARCH would list with no limit ("showing 200 of 5,001").
SEARCH_COUNT = f"""
SELECT COUNT(*) FROM (
    SELECT m.conversation_id FROM message_search JOIN messages m ON m.id = message_search.rowid
    WHERE message_search MATCH :query AND {SHOWN}
    UNION
    SELECT title_search.rowid FROM title_search WHERE title_search MATCH :query
) hits JOIN conversations c ON c.id = hits.conversation_id
"""

SEARCH = f"""
WITH hits (conversation_id, from_title, score, snippet) AS (
    SELECT m.conversation_id, 0, message_search.rank,
           snippet(message_search, 0, '{MATCH_START}', '{MATCH_END}', '…', {SNIPPET_TOKENS})
    FROM message_search JOIN messages m ON m.id = message_search.rowid
    WHERE message_search MATCH :query AND {SHOWN}
    UNION ALL
    SELECT title_search.rowid, 1, title_search.rank, highlight(title_search, 0, '{MATCH_START}', '{MATCH_END}')
    FROM title_search WHERE title_search MATCH :query
), best AS (
    SELECT conversation_id, snippet,
           row_number() OVER (PARTITION BY conversation_id ORDER BY from_title, score) AS place
    FROM hits
)
SELECT c.id, c.title, c.created, c.updated,
       (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id AND {SHOWN}), best.snippet
FROM best JOIN conversations c ON c.id = best.conversation_id
WHERE best.place = 1
ORDER BY c.updated DESC, c.id DESC
LIMIT :limit
"""
