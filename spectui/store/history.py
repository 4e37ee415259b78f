"""Chat history and per-step traces: the conversations, messages and steps a chat saves and reads back.

A reply that never finished is rebuilt from its committed steps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from spectui.core.errors import UsageError
from spectui.core.events import Source, Step
from spectui.store.database import SALVAGE_HINT, Database
from spectui.store.records import (
    Conversation,
    ConversationSummary,
    NoSuchConversation,
    SearchHit,
    StoredMessage,
    StoredStep,
    StoreError,
)
from spectui.store.schema import SEARCH, SEARCH_COUNT, SEARCH_VERSION, SHOWN, match_query, require_fts5, snippet_parts


LIST_LIMIT = 200  # rows a list or a search shows unless asked for more (they say how many there are)


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


class Store(Database):
    """The history: conversations, their messages and each reply's steps. Database holds the
    connection (read_only, wait_for_lock); this says what is written and read through it."""

    # conversations and messages

    def new_conversation(self, settings: dict, title: str = "") -> int:
        now = time.time()
        return self._insert(
            "INSERT INTO conversations (title, created, updated, settings) VALUES (?, ?, ?, ?)",
            (title, now, now, json.dumps(settings)),
        )

    def add_message(
        self, conversation_id: int, role: str, content: str, settings: dict | None = None
    ) -> int:
        now = time.time()
        finish = None if role == "assistant" else "stop"
        message_id = self._insert(
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

    def retitle_conversation(self, conversation_id: int, old: str | None, title: str) -> None:
        """The title a chat gave, `old`, now `title` (its first message edited); a title the
        user gave since stays (None for `old`: whatever it is)."""
        if old is None:
            self._write("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))
        else:
            self._write("UPDATE conversations SET title = ? WHERE id = ? AND title = ?", (title, conversation_id, old))

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

    def search(self, text: str, limit: int | None = LIST_LIMIT) -> list[SearchHit]:
        """Conversations whose messages or title hold every word of `text` (as prefixes),
        the newest `limit` of them (None: all)."""
        query = self._search_query(text)
        if not query:
            return []
        rows = self._read(SEARCH, {"query": query, "limit": -1 if limit is None else limit})
        return [SearchHit(row[0], row[1], row[2], row[3], row[4], snippet_parts(row[5])) for row in rows]

    def count_matches(self, text: str) -> int:
        """How many conversations `search(text, None)` would list."""
        query = self._search_query(text)
        return self._read(SEARCH_COUNT, {"query": query})[0][0] if query else 0

    def _search_query(self, text: str) -> str:
        query = match_query(text)
        if query:
            require_fts5()
            if self.version < SEARCH_VERSION:
                raise StoreError(f"history {self.path} is not indexed for search yet: open it writable once")
        return query

    def list_conversations(self, limit: int | None = LIST_LIMIT) -> list[ConversationSummary]:
        """The newest `limit` conversations (None: all)."""
        return self._summaries("GROUP BY c.id ORDER BY c.updated DESC, c.id DESC LIMIT ?", (-1 if limit is None else limit,))

    def count_conversations(self) -> int:
        return self._read("SELECT COUNT(*) FROM conversations")[0][0]

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

    def replies_at_greedy(self) -> int:
        """Finished replies sampled at T = 0 (what `spectui advise` can replay), shown ones only."""
        rows = self._read(
            "SELECT COUNT(*) FROM messages m WHERE m.role = 'assistant' AND m.finish_reason IN ('stop', 'length')"
            f" AND json_valid(m.settings) AND json_extract(m.settings, '$.temperature') = 0 AND {SHOWN}"
        )
        return int(rows[0][0])

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
