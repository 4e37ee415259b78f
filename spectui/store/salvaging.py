"""Salvage: copy what still reads of a damaged history into a new file."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from spectui.store.database import connect_read_only, store_error
from spectui.store.history import Store
from spectui.store.records import StoreError


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
