"""Chat history and per-step traces in SQLite.

records: what is read back, and the errors; schema: the tables, their upgrades and the search
SQL; database: where the file lives and its one locked connection; history: Store, the
conversations, messages and steps; salvaging: what still reads of a damaged file; export:
Markdown, JSON and the JSONL trace; write_queue: the chat's writes on a thread of their
own, so a lock held elsewhere never freezes the UI. The modules import each other, never this face.
"""

from spectui.store.database import data_folder, default_store_path
from spectui.store.export import APPROXIMATE_NOTE, export_json, export_markdown, export_trace_jsonl
from spectui.store.history import LIST_LIMIT, Store, open_existing, open_for_search
from spectui.store.records import (
    Conversation,
    ConversationSummary,
    NoSuchConversation,
    SearchHit,
    StoredMessage,
    StoredStep,
    StoreError,
)
from spectui.store.salvaging import Salvaged, salvage
from spectui.store.schema import SCHEMA_VERSION, fts5_available
from spectui.store.write_queue import HistoryQueue, RowId

__all__ = [
    "APPROXIMATE_NOTE",
    "LIST_LIMIT",
    "SCHEMA_VERSION",
    "Conversation",
    "ConversationSummary",
    "HistoryQueue",
    "NoSuchConversation",
    "RowId",
    "Salvaged",
    "SearchHit",
    "Store",
    "StoreError",
    "StoredMessage",
    "StoredStep",
    "data_folder",
    "default_store_path",
    "export_json",
    "export_markdown",
    "export_trace_jsonl",
    "fts5_available",
    "open_existing",
    "open_for_search",
    "salvage",
]
