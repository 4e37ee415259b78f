"""Chat history and per-step traces in SQLite.

Every step is committed as it arrives (WAL mode), so a crash loses at most the step in
flight; a reply that never finished is rebuilt from its steps. One connection guarded
by a lock: the UI thread writes messages, the generation thread writes steps.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from spectui.core.errors import SpectuiError, UsageError
from spectui.core.events import Source, Step
from spectui.core.reasoning import split_reasoning
from spectui.core.record import step_record
from spectui.core.safe_text import safe_text

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
SEARCH_TABLES = (
    f"CREATE VIRTUAL TABLE message_search USING fts5(content, content='messages', content_rowid='id', tokenize='{TOKENIZER}')",
    f"CREATE VIRTUAL TABLE title_search USING fts5(title, content='conversations', content_rowid='id', tokenize='{TOKENIZER}')",
    """CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN
    INSERT INTO message_search (rowid, content) VALUES (new.id, new.content);
END""",
    """CREATE TRIGGER message_search_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO message_search (message_search, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO message_search (rowid, content) VALUES (new.id, new.content);
END""",
    """CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN
    INSERT INTO message_search (message_search, rowid, content) VALUES ('delete', old.id, old.content);
END""",
    """CREATE TRIGGER title_search_insert AFTER INSERT ON conversations BEGIN
    INSERT INTO title_search (rowid, title) VALUES (new.id, new.title);
END""",
    """CREATE TRIGGER title_search_update AFTER UPDATE OF title ON conversations BEGIN
    INSERT INTO title_search (title_search, rowid, title) VALUES ('delete', old.id, old.title);
    INSERT INTO title_search (rowid, title) VALUES (new.id, new.title);
END""",
    """CREATE TRIGGER title_search_delete AFTER DELETE ON conversations BEGIN
    INSERT INTO title_search (title_search, rowid, title) VALUES ('delete', old.id, old.title);
END""",
    # What an older spectui saved is indexed now, in the same transaction.
    "INSERT INTO message_search (message_search) VALUES ('rebuild')",
    "INSERT INTO title_search (title_search) VALUES ('rebuild')",
)

# PRAGMA user_version of the history file -> the statements that bring the one before it
# there. 0 is a new file (or one from before versions were kept): its tables are made.
# A file written by a newer spectui may hold what this one does not understand: it is
# refused (named, one line) rather than altered.
UPGRADES: dict[int, tuple[str, ...]] = {1: TABLES, 2: SEARCH_TABLES}
SCHEMA_VERSION = max(UPGRADES)
SEARCH_VERSION = 2


class StoreError(SpectuiError):
    """The history database cannot be opened or has no such conversation."""


class NoSuchConversation(StoreError):
    """An id given to rename or delete that the history does not hold: a usage error."""

    exit_code = 2


@dataclass(frozen=True)
class StoredStep:
    step: Step
    pieces: tuple[str, ...]
    ghost: str
    arrived: float


@dataclass
class StoredMessage:
    id: int
    role: str
    content: str
    finish_reason: str | None = None
    error: str | None = None
    settings: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    steps: list[StoredStep] = field(default_factory=list)


@dataclass
class Conversation:
    id: int
    title: str
    created: float
    updated: float
    settings: dict
    messages: list[StoredMessage]


@dataclass(frozen=True)
class ConversationSummary:
    id: int
    title: str
    created: float
    updated: float
    num_messages: int


# snippet() marks the matched words with these; private-use code points, which chat text
# does not hold, so the marks can be found again (SearchHit.snippet splits on them).
MATCH_START, MATCH_END = "\ue000", "\ue001"
SNIPPET_TOKENS = 12  # words of context a snippet keeps around the match


@dataclass(frozen=True)
class SearchHit(ConversationSummary):
    """A conversation that matched, with its best match's snippet as (text, matched) parts."""

    snippet: tuple[tuple[str, bool], ...]

    @property
    def snippet_text(self) -> str:
        return "".join(text for text, _ in self.snippet)


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


def default_store_path() -> Path:
    override = os.environ.get("SPECTUI_DATA_DIR")
    if override:
        base = Path(override).expanduser()
    else:
        import platformdirs

        base = Path(platformdirs.user_data_dir("spectui"))
    return base / "history.sqlite3"


# How long a command waits for another process's write (a chat saving a step) to finish.
LOCK_WAIT_S = 5.0
SALVAGE_HINT = "`spectui history salvage` copies the conversations that still read into a new file"


def store_error(path: Path | str, error: BaseException, opening: bool = False) -> StoreError:
    """An SQLite or OS error on the history file as one line that says what to do."""
    name = getattr(error, "sqlite_errorname", "") or ""
    text = str(error)
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "malformed" in text or "not a database" in text:
        return StoreError(f"history {path} is damaged ({text}): {SALVAGE_HINT}")
    if name.startswith("SQLITE_BUSY") or "locked" in text:
        return StoreError(
            f"history {path} stayed locked by another process (a running spectui?) for {LOCK_WAIT_S:.0f} s: "
            "try again when it is done, or chat with --no-history"
        )
    if name.startswith("SQLITE_READONLY"):
        return StoreError(f"history {path} is read-only here: make it writable, or chat with --no-history")
    if name == "SQLITE_FULL":
        return StoreError(f"history {path}: the disk is full: free some space, or chat with --no-history")
    if name == "SQLITE_CANTOPEN" and not _writable_folder(Path(path).parent):
        return StoreError(
            f"cannot open history {path}: its folder is read-only here ({text}): make it writable, "
            "set SPECTUI_DATA_DIR to a folder of your own, or chat with --no-history"
        )
    reason = error.strerror if isinstance(error, OSError) and error.strerror else text
    return StoreError(f"{'cannot open history' if opening else 'history'} {path}: {reason}")


def _is_busy(error: sqlite3.Error) -> bool:
    return (getattr(error, "sqlite_errorname", "") or "").startswith("SQLITE_BUSY") or "locked" in str(error)


def _writable_folder(folder: Path) -> bool:
    """access(2) says EROFS even to root on a read-only mount; a missing folder is made."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return os.access(folder, os.W_OK)


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that never writes, so it works from a read-only folder and beside a
    chat that is writing: WAL readers do not wait for writers."""
    if not path.is_file():
        raise StoreError(f"no history at {path} yet: spectui chat saves conversations there")
    uri = path.resolve().as_uri()
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=LOCK_WAIT_S, check_same_thread=False)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as error:
        if getattr(error, "sqlite_errorname", "") != "SQLITE_CANTOPEN":
            db.close()
            raise
        # A WAL file read where its -shm cannot be made (a read-only folder): nobody can be
        # writing it there, so it can be read as it lies.
        db.close()
        db = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, check_same_thread=False)
    return db


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


# A message the chat shows: not a turn replaced by regenerate or edit (marked superseded in
# its stats, spectui.tui.chat.transcript). Search, counts and exports leave the others out.
# CASE, not AND: SQLite does not promise to skip json_extract on a row whose JSON is damaged.
SHOWN = "(CASE WHEN json_valid(m.stats) THEN coalesce(json_extract(m.stats, '$.superseded'), 0) ELSE 0 END) = 0"


# One row per conversation, newest first like the list it filters, with the snippet of its
# best match (by FTS5's rank); a message's match is preferred to the title's.
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


def open_for_search(path: Path) -> Store:
    """A read-only store that can search. A file saved before search existed is indexed
    once first (a writable open upgrades it, as the next chat would)."""
    store = Store(path, read_only=True)
    if store.version >= SEARCH_VERSION:
        return store
    store.close()
    try:
        Store(path).close()
    except StoreError as error:
        raise StoreError(f"{error} (its search index is built once, which writes the file)") from None
    return Store(path, read_only=True)


def open_existing(path: Path, conversation_id: int) -> Store:
    """A writable store to change `conversation_id` in (rename, rm): a history that is not
    there is not created; the id is unknown."""
    if not path.is_file():
        raise NoSuchConversation(f"no conversation {conversation_id}: no history at {path} yet")
    return Store(path)


class Store:
    """read_only: for list, export and search: nothing is created or written.
    A writable store upgrades an older file to SCHEMA_VERSION as it opens.
    wait_for_lock: the chat's store: a write waits out another process's lock however long
    it lasts, so no turn is dropped from the middle of a saved conversation."""

    def __init__(self, path: Path | str, *, read_only: bool = False, wait_for_lock: bool = False) -> None:
        self.path = Path(path)
        self.wait_for_lock = wait_for_lock
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            self._open(read_only)
        except BaseException as error:
            if self._db is not None:
                self._db.close()
            if isinstance(error, (sqlite3.Error, OSError)):
                raise store_error(path, error, opening=True) from None
            raise

    def _open(self, read_only: bool) -> None:
        if read_only:
            self._db = connect_read_only(self.path)
        else:
            require_fts5()  # before the file is touched: the upgrade and the triggers need it
            if str(self.path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path), check_same_thread=False, isolation_level=None, timeout=LOCK_WAIT_S
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL: an app crash loses nothing committed; only power loss can.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
        # a byte that is not UTF-8 in a title (a file written by another tool) reads as U+FFFD
        # instead of stopping every list: "Could not decode to UTF-8 column 'title'"
        self._db.text_factory = lambda data: data.decode("utf-8", errors="replace")
        self.version = self._db.execute("PRAGMA user_version").fetchone()[0]
        self._refuse_newer(self.version)
        if read_only and self.version == 0 and not self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'conversations'"
        ).fetchone():  # a file from before spectui kept a version has the table
            raise StoreError(
                f"history {self.path} holds no conversations (an empty file, never set up): "
                "spectui chat sets it up, or remove it"
            )
        if not read_only and self.version < SCHEMA_VERSION:
            self._upgrade()

    def _upgrade(self) -> None:
        """One transaction: stopped midway (a crash, a full disk) the file stays as it was.
        The version is read again under the write lock, as another spectui may have
        upgraded the file meanwhile."""
        with self._transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            self._refuse_newer(version)
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in UPGRADES[step]:
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self.version = SCHEMA_VERSION

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"history {self.path} was written by a newer spectui (schema {version}, this one reads "
                f"{SCHEMA_VERSION}): upgrade spectui, or start afresh with --no-history"
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _run(self, sql: str, args: Sequence | dict = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._execute_waiting(sql, args)  # autocommit: one statement, one commit

    def _execute_waiting(self, sql: str, args: Sequence | dict = ()) -> sqlite3.Cursor:
        """Each try waits LOCK_WAIT_S in SQLite's busy handler; with wait_for_lock, then again."""
        waits = 0
        while True:
            try:
                return self._db.execute(sql, args)
            except sqlite3.Error as error:
                if not (self.wait_for_lock and _is_busy(error)):
                    raise store_error(self.path, error) from None
                waits += 1
                self.lock_waited(waits)

    def lock_waited(self, waits: int) -> None:
        """Called after each LOCK_WAIT_S spent waiting for another process's lock (tests watch it)."""

    def _write(self, sql: str, args: Sequence = ()) -> int:
        return self._run(sql, args).lastrowid

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """Statements that stand or fall together."""
        with self._lock:
            db = self._db
            try:
                self._execute_waiting("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    if db.in_transaction:  # SQLite rolls back by itself after some errors
                        db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            except sqlite3.Error as error:
                raise store_error(self.path, error) from None

    def _read(self, sql: str, args: Sequence | dict = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as error:
                raise store_error(self.path, error) from None

    # conversations and messages

    def new_conversation(self, settings: dict, title: str = "") -> int:
        now = time.time()
        return self._write(
            "INSERT INTO conversations (title, created, updated, settings) VALUES (?, ?, ?, ?)",
            (title, now, now, json.dumps(settings)),
        )

    def add_message(
        self, conversation_id: int, role: str, content: str, settings: dict | None = None
    ) -> int:
        now = time.time()
        finish = None if role == "assistant" else "stop"
        message_id = self._write(
            "INSERT INTO messages (conversation_id, role, content, created, finish_reason, settings)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (conversation_id, role, content, now, finish, json.dumps(settings or {})),
        )
        self._write("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
        if role == "user":
            self._write(
                "UPDATE conversations SET title = ? WHERE id = ? AND title = ''",
                (content.strip().splitlines()[0][:80] if content.strip() else "", conversation_id),
            )
        return message_id

    def add_step(
        self,
        message_id: int,
        index: int,
        step: Step,
        pieces: Sequence[str],
        ghost: str,
        arrived: float,
    ) -> None:
        self._write(INSERT_STEP, _step_row(message_id, index, step, pieces, ghost, arrived))

    def replace_steps(self, message_id: int, steps: Sequence[StoredStep]) -> None:
        """A reply's steps again, all at once: the engine's final record recoloured it
        (same tokens, other sources), and history must show what the screen shows."""
        rows = [_step_row(message_id, index, s.step, s.pieces, s.ghost, s.arrived) for index, s in enumerate(steps)]
        with self._transaction() as db:
            db.execute("DELETE FROM steps WHERE message_id = ?", (message_id,))
            db.executemany(INSERT_STEP, rows)

    def finish_message(
        self,
        message_id: int,
        content: str,
        finish_reason: str,
        error: str | None = None,
        stats: dict | None = None,
    ) -> None:
        self._write(
            "UPDATE messages SET content = ?, finish_reason = ?, error = ?, stats = ? WHERE id = ?",
            (content, finish_reason, error, json.dumps(stats or {}, default=str), message_id),
        )

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        title = title.strip()
        if not title:
            raise UsageError("a conversation's title cannot be empty")
        if not self._run("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id)).rowcount:
            raise self._unknown(conversation_id)

    def delete_conversation(self, conversation_id: int) -> None:
        """The conversation, its messages and their steps, all at once; the triggers take
        its search rows with them."""
        with self._transaction() as db:
            own = "SELECT id FROM messages WHERE conversation_id = ?"
            db.execute(f"DELETE FROM steps WHERE message_id IN ({own})", (conversation_id,))
            db.execute("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))
            if not db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,)).rowcount:
                raise self._unknown(conversation_id)  # rolled back: nothing was deleted

    def _unknown(self, conversation_id: int) -> NoSuchConversation:
        return NoSuchConversation(f"no conversation {conversation_id} in {self.path} (see spectui history list)")

    # reading

    def search(self, text: str, limit: int = 200) -> list[SearchHit]:
        """Conversations whose messages or title hold every word of `text` (as prefixes)."""
        query = match_query(text)
        if not query:
            return []
        require_fts5()
        if self.version < SEARCH_VERSION:
            raise StoreError(f"history {self.path} is not indexed for search yet: open it writable once")
        rows = self._read(SEARCH, {"query": query, "limit": limit})
        return [SearchHit(*row[:5], snippet_parts(row[5])) for row in rows]

    def list_conversations(self, limit: int = 200) -> list[ConversationSummary]:
        return self._summaries("GROUP BY c.id ORDER BY c.updated DESC, c.id DESC LIMIT ?", (limit,))

    def conversation_summary(self, conversation_id: int) -> ConversationSummary:
        found = self._summaries("WHERE c.id = ? GROUP BY c.id", (conversation_id,))
        if not found:
            raise self._unknown(conversation_id)
        return found[0]

    def _summaries(self, where: str, args: Sequence) -> list[ConversationSummary]:
        rows = self._read(
            "SELECT c.id, c.title, c.created, c.updated, COUNT(m.id) FROM conversations c"
            f" LEFT JOIN messages m ON m.conversation_id = c.id AND {SHOWN} {where}",
            args,
        )
        return [ConversationSummary(*row) for row in rows]

    def latest_conversation_id(self) -> int | None:
        rows = self._read("SELECT id FROM conversations ORDER BY updated DESC, id DESC LIMIT 1")
        return rows[0][0] if rows else None

    def load_conversation(self, conversation_id: int) -> Conversation:
        try:
            return self._load_conversation(conversation_id)
        except (ValueError, TypeError, KeyError) as error:  # a row whose JSON or source names do not read
            raise StoreError(
                f"history {self.path}: conversation {conversation_id} holds a record that does not read "
                f"({type(error).__name__}: {error}): {SALVAGE_HINT}"
            ) from None

    def _load_conversation(self, conversation_id: int) -> Conversation:
        rows = self._read(
            "SELECT id, title, created, updated, settings FROM conversations WHERE id = ?",
            (conversation_id,),
        )
        if not rows:
            raise self._unknown(conversation_id)  # a usage error, as in rename and rm
        cid, title, created, updated, settings = rows[0]
        messages = [
            StoredMessage(mid, role, content, finish, error, json.loads(msettings), json.loads(stats))
            for mid, role, content, finish, error, msettings, stats in self._read(
                "SELECT id, role, content, finish_reason, error, settings, stats FROM messages"
                " WHERE conversation_id = ? ORDER BY id",
                (cid,),
            )
        ]
        for message in messages:
            if message.role == "assistant":
                message.steps = self.load_steps(message.id)
                if message.finish_reason is None:
                    # The app stopped mid-reply: the committed steps are the reply.
                    message.content = "".join(s.step.text for s in message.steps)
                    message.finish_reason = "interrupted"
        return Conversation(cid, title, created, updated, json.loads(settings), messages)

    def load_steps(self, message_id: int) -> list[StoredStep]:
        rows = self._read(
            "SELECT arrived, token_ids, sources, pieces, ghost, text, drafted, k, temperature,"
            " draft_seconds, verify_seconds, exact, method FROM steps WHERE message_id = ? ORDER BY idx",
            (message_id,),
        )
        steps = []
        for arrived, ids, sources, pieces, ghost, text, drafted, k, temp, t_draft, t_verify, exact, method in rows:
            step = Step(
                token_ids=tuple(json.loads(ids)),
                sources=tuple(Source(s) for s in json.loads(sources)),
                text=text,
                **drafted_fields(drafted),
                k=k,
                temperature=temp,
                draft_seconds=t_draft,
                verify_seconds=t_verify,
                exact=bool(exact),
                method=method,
            )
            steps.append(StoredStep(step, tuple(json.loads(pieces)), ghost, arrived))
        return steps

    # settings (key/value, e.g. the last theme)

    def get_setting(self, key: str, default: str | None = None) -> str | None:
        rows = self._read("SELECT value FROM settings WHERE key = ?", (key,))
        return rows[0][0] if rows else default

    def set_setting(self, key: str, value: str) -> None:
        self._write(
            "INSERT INTO settings (key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


APPROXIMATE_NOTE = "colours approximate (the server did not say which tokens were drafts)"  # γ stays exact when it sent counts
INSERT_STEP = "INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def _step_row(message_id: int, index: int, step: Step, pieces: Sequence[str], ghost: str, arrived: float) -> tuple:
    return (
        message_id, index, arrived,
        json.dumps(list(step.token_ids)),
        json.dumps([source.value for source in step.sources]),
        json.dumps(list(pieces)),
        ghost,
        step.text,
        drafted_json(step),
        step.k, step.temperature, step.draft_seconds, step.verify_seconds,
        int(step.exact), step.method,
    )


# salvage


CONVERSATION_COLUMNS = "id, title, created, updated, settings"
MESSAGE_COLUMNS = "id, conversation_id, role, content, created, finish_reason, error, settings, stats"
STEP_COLUMNS = (
    "message_id, idx, arrived, token_ids, sources, pieces, ghost, text, drafted, k, temperature,"
    " draft_seconds, verify_seconds, exact, method"
)
MAX_PROBED_IDS = 1_000_000  # ids tried one by one when a scan of the table breaks


@dataclass(frozen=True)
class Salvaged:
    path: Path
    conversations: int  # copied whole
    partial: tuple[int, ...]  # ids copied in part: some messages or steps did not read
    lost: tuple[int, ...]  # ids seen but nothing of them read


def salvage(source: Path | str, target: Path | str) -> Salvaged:
    """Copy every conversation of a damaged history that still reads into a new file.

    SQLite's own `.recover` lives in the sqlite3 shell, which many machines lack; this
    reads row by row instead, keeps what reads byte for byte (ids included) and counts
    what does not. Rows on a damaged page are lost; the rest of their conversation is kept.
    """
    source, target = Path(source), Path(target)
    if target.exists():
        raise StoreError(f"{target} exists: name a new file for the salvaged history")
    try:
        damaged = connect_read_only(source)
    except sqlite3.Error as error:  # the header or the table list: salvage has nothing to go on
        raise StoreError(
            f"history {source} cannot be salvaged ({error}): not even its list of tables reads, so no "
            "conversation in it can be found; move it aside, and spectui chat starts a new one"
        ) from None
    # written under another name, then renamed: a full disk leaves no empty file behind
    partial_file = target.with_name(target.name + ".partial")
    try:
        result = _salvage_into(damaged, partial_file)
        os.replace(partial_file, target)
    except (StoreError, OSError) as error:
        _remove_database(partial_file)
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise StoreError(f"salvage wrote nothing to {target}: {reason}") from None
    finally:
        damaged.close()
    return replace(result, path=target)


def _salvage_into(damaged: sqlite3.Connection, target: Path) -> Salvaged:
    fresh = Store(target)
    copied, partial, lost = 0, [], []
    try:
        for conversation_id in sorted(_conversation_ids(damaged)):
            whole = _copy_conversation(damaged, fresh._db, conversation_id)
            if whole is None:
                lost.append(conversation_id)
            elif whole:
                copied += 1
            else:
                partial.append(conversation_id)
        settings, _ = _readable_rows(damaged, "SELECT key, value FROM settings")
        fresh._db.executemany("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", settings)
    except sqlite3.Error as error:  # the new file, not the damaged one (full disk, ...)
        raise store_error(target, error) from None
    finally:
        fresh.close()
    return Salvaged(target, copied, tuple(partial), tuple(lost))


def _remove_database(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            leftover.unlink()
        except OSError:  # not there, or not ours to remove: the error already said what failed
            pass


def _readable_rows(db: sqlite3.Connection, sql: str, args: Sequence = ()) -> tuple[list[tuple], bool]:
    """The rows that read before the first damaged page, and whether that was all of them."""
    rows: list[tuple] = []
    try:
        for row in db.execute(sql, args):
            rows.append(row)
    except sqlite3.DatabaseError:
        return rows, False
    return rows, True


def _conversation_ids(db: sqlite3.Connection) -> set[int]:
    """Ids from the conversations table and from the messages that name one; where a scan
    breaks, every id up to the largest seen is tried on its own (a lookup may avoid the
    damaged page that stopped the scan)."""
    own, own_whole = _readable_rows(db, "SELECT id FROM conversations ORDER BY id")
    named, named_whole = _readable_rows(db, "SELECT DISTINCT conversation_id FROM messages")
    ids = {row[0] for row in own + named if isinstance(row[0], int)}
    if own_whole and named_whole:
        return ids
    largest = max(ids, default=0)
    for table, column in (("conversations", "id"), ("messages", "conversation_id")):
        rows, _ = _readable_rows(db, f"SELECT max({column}) FROM {table}")
        if rows and isinstance(rows[0][0], int):
            largest = max(largest, rows[0][0])
    for candidate in range(1, min(largest, MAX_PROBED_IDS) + 1):
        if candidate not in ids:
            rows, _ = _readable_rows(db, "SELECT id FROM conversations WHERE id = ?", (candidate,))
            ids.update(row[0] for row in rows)
    return ids


def _copy_conversation(damaged: sqlite3.Connection, fresh: sqlite3.Connection, conversation_id: int) -> bool | None:
    """True: copied whole; False: in part; None: nothing of it read."""
    header, header_read = _readable_rows(
        damaged, f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
    )
    messages, messages_read = _readable_rows(
        damaged, f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
    )
    if not header and not messages:
        return None
    whole = header_read and messages_read and bool(header)
    if not header:  # its row was on the damaged page: keep the messages under a plain header
        now = time.time()
        header = [(conversation_id, "(salvaged)", now, now, "{}")]
    fresh.execute("BEGIN")
    fresh.execute(_insert("conversations", CONVERSATION_COLUMNS), header[0])
    fresh.executemany(_insert("messages", MESSAGE_COLUMNS), messages)
    for message in messages:
        steps, steps_read = _readable_rows(
            damaged, f"SELECT {STEP_COLUMNS} FROM steps WHERE message_id = ? ORDER BY idx", (message[0],)
        )
        whole = whole and steps_read
        fresh.executemany(_insert("steps", STEP_COLUMNS), steps)
    fresh.execute("COMMIT")
    return whole


def _insert(table: str, columns: str) -> str:
    placeholders = ", ".join("?" for _ in columns.split(","))
    return f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"


# export


def drafted_json(step: Step) -> str:
    """The drafted ids, or {"count": n} from an engine that reports counts only (vLLM), with
    "accepted" when the reply stopped inside the step's accepted drafts and "tree_nodes" for a
    tree step. Keys in this one column rather than new ones keep every history file readable
    both ways: an old row has none of them, an older spectui ignores the ones it does not know."""
    counts: dict = {}
    if step.draft_count is not None and not step.drafted:
        counts["count"] = step.draft_count
    if step.accepted_count is not None:
        counts["accepted"] = step.accepted_count
    if step.tree_nodes is not None:
        counts["tree_nodes"] = step.tree_nodes
    if not counts:
        return json.dumps(list(step.drafted))
    counts.setdefault("ids", list(step.drafted))
    return json.dumps(counts)


def drafted_fields(stored: str) -> dict:
    value = json.loads(stored)
    if not isinstance(value, dict):
        return {"drafted": tuple(value)}
    fields: dict = {"drafted": tuple(value.get("ids", ()))}
    if "count" in value:
        fields["draft_count"] = int(value["count"])
    if "accepted" in value:
        fields["accepted_count"] = int(value["accepted"])
    if "tree_nodes" in value:
        fields["tree_nodes"] = int(value["tree_nodes"])
    return fields


def data_folder(name: str) -> Path:
    """A folder beside the history (the user's data folder, or SPECTUI_DATA_DIR) for what the
    app writes on a key, exports and screenshots: never the working directory unasked."""
    return default_store_path().parent / name


def is_superseded(message: StoredMessage) -> bool:
    return bool(message.stats.get("superseded"))


def shown_messages(conversation: Conversation) -> list[StoredMessage]:
    """The messages the chat shows: every export leaves out the turns that regenerate or
    edit replaced (they stay in the file, as SHOWN leaves them out of search and counts)."""
    return [message for message in conversation.messages if not is_superseded(message)]


def export_markdown(conversation: Conversation) -> str:
    """The conversation as Markdown to read or share: what the model wrote is shown with its
    control characters made visible (the trace in JSONL keeps the text exact). The header
    holds what the chat started with; each reply's own settings follow it (keys change them)."""
    lines = [f"# {conversation.title or f'Conversation {conversation.id}'}", ""]
    settings = conversation.settings
    if settings:
        described = ", ".join(f"{key} {value}" for key, value in settings.items() if value is not None)
        lines += [f"_started with {described}_", ""]
    for message in shown_messages(conversation):
        lines.append(f"## {message.role}")
        lines.append("")
        reasoning, answer = split_reasoning(message.content) if message.role == "assistant" else ("", message.content)
        if reasoning:  # apart from the answer, folded where Markdown is rendered
            lines += ["<details><summary>reasoning</summary>", "", reasoning, "", "</details>", ""]
        lines.append(answer)
        if message.role == "assistant":
            note = _reply_note(message)
            if note:
                lines += ["", f"_{note}_"]
        lines.append("")
    return safe_text("\n".join(lines))


def _reply_note(message: StoredMessage) -> str:
    # The settings this reply ran with: keys change k and T mid-chat, so the header's are not its.
    parts = []
    if message.settings.get("auto_k"):
        parts.append("k auto")
    elif "k" in message.settings:
        parts.append(f"k {message.settings['k']}")
    if "temperature" in message.settings:
        parts.append(f"T {message.settings['temperature']:.2f}")
    if message.settings.get("method"):
        parts.append(str(message.settings["method"]))
    if message.settings.get("seed") is not None:
        parts.append(f"seed {message.settings['seed']}")
    gamma = message.stats.get("gamma")
    tau = message.stats.get("tau")
    speed = message.stats.get("tokens_per_s")
    if gamma is not None:
        parts.append(f"γ {gamma:.2f}")
    if tau is not None:
        parts.append(f"τ {tau:.2f}")
    if speed:
        parts.append(f"{speed:.1f} tok/s")
    if message.stats.get("colours_approximate"):
        parts.append(APPROXIMATE_NOTE)
    if message.finish_reason not in (None, "stop"):
        parts.append(f"ended: {message.finish_reason}" + (f" ({message.error})" if message.error else ""))
    return " · ".join(parts)


def export_trace_jsonl(conversation: Conversation) -> Iterator[str]:
    """One JSON object per step of every reply, in order: spectui.core.record's step record
    with the pieces as shown, and where the step sits."""
    for message in shown_messages(conversation):
        for index, stored in enumerate(message.steps):
            step = replace(stored.step, pieces=stored.pieces, rejected_text=stored.ghost)
            yield json.dumps(
                {
                    "conversation_id": conversation.id,
                    "message_id": message.id,
                    "step": index,
                    "arrived": stored.arrived,
                    **step_record(step),
                },
                ensure_ascii=False,
            )


def reply_parts(message: StoredMessage) -> dict:
    """A message's content; a reply's reasoning apart from its answer (the trace keeps the text whole)."""
    if message.role != "assistant":
        return {"content": message.content}
    reasoning, answer = split_reasoning(message.content)
    return {"content": answer, **({"reasoning": reasoning} if reasoning else {})}


def export_json(conversation: Conversation) -> str:
    """The conversation as one JSON document: what the chat shows, each message with its
    settings (k, T, method, seed of each reply) and stats; the per-step trace is the JSONL."""
    messages = [
        {
            "id": message.id,
            "role": message.role,
            **reply_parts(message),
            **({"finish_reason": message.finish_reason} if message.role == "assistant" else {}),
            **({"error": message.error} if message.error else {}),
            **({"settings": message.settings} if message.settings else {}),
            **({"stats": message.stats} if message.stats else {}),
        }
        for message in shown_messages(conversation)
    ]
    document = {
        "id": conversation.id,
        "title": conversation.title,
        "created": conversation.created,
        "updated": conversation.updated,
        "settings": conversation.settings,
        "messages": messages,
    }
    return json.dumps(document, ensure_ascii=False, indent=2, default=str) + "\n"
