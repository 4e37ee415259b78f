"""Where the history lives and its one connection: opened, upgraded, and shared under a lock.

Every step is committed as it arrives (WAL mode), so a crash loses at most the step in
flight. One connection guarded by a lock: the UI thread writes messages, the generation
thread writes steps.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from spectui.store.records import StoreError
from spectui.store.schema import SCHEMA_VERSION, require_fts5, upgrade


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


def data_folder(name: str) -> Path:
    """A folder beside the history (the user's data folder, or SPECTUI_DATA_DIR) for what the
    app writes on a key, exports and screenshots: never the working directory unasked."""
    return default_store_path().parent / name


class Database:
    """The history file's connection, which Store's reads and writes go through.
    read_only: for list, export and search: nothing is created or written.
    A writable one upgrades an older file to SCHEMA_VERSION as it opens.
    wait_for_lock: the chat's store: a write waits out another process's lock however long
    it lasts, so no turn is dropped from the middle of a saved conversation."""

    def __init__(self, path: Path | str, *, read_only: bool = False, wait_for_lock: bool = False) -> None:
        self.path = Path(path)
        self.wait_for_lock = wait_for_lock
        self._lock = threading.Lock()
        self._opened: sqlite3.Connection | None = None
        try:
            self._open(read_only)
        except BaseException as error:
            if self._opened is not None:
                self._opened.close()
            if isinstance(error, (sqlite3.Error, OSError)):
                raise store_error(path, error, opening=True) from None
            raise

    def _open(self, read_only: bool) -> None:
        if read_only:
            self._opened = connect_read_only(self.path)
        else:
            require_fts5()  # before the file is touched: the upgrade and the triggers need it
            if str(self.path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._opened = sqlite3.connect(
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
            upgrade(db, version)
        self.version = SCHEMA_VERSION

    @property
    def _db(self) -> sqlite3.Connection:
        assert self._opened is not None, "__init__ opens the connection or raises"
        return self._opened

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

    def _write(self, sql: str, args: Sequence = ()) -> int | None:
        return self._run(sql, args).lastrowid

    def _insert(self, sql: str, args: Sequence = ()) -> int:
        """An INSERT: the new row's id."""
        row_id = self._write(sql, args)
        assert row_id is not None, "an INSERT sets the cursor's lastrowid"
        return row_id

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
