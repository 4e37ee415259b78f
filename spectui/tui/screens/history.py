"""History: past conversations; Enter opens one, E exports it (Markdown + trace JSONL)."""

from __future__ import annotations

import time
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from spectui.store import Store, export_markdown, export_trace_jsonl


def write_exports(store: Store, conversation_id: int, folder: Path) -> tuple[Path, Path]:
    conversation = store.load_conversation(conversation_id)
    folder.mkdir(parents=True, exist_ok=True)
    markdown = folder / f"spectui-chat-{conversation_id}.md"
    trace = folder / f"spectui-chat-{conversation_id}.trace.jsonl"
    markdown.write_text(export_markdown(conversation), encoding="utf-8")
    with trace.open("w", encoding="utf-8") as out:
        for line in export_trace_jsonl(conversation):
            out.write(line + "\n")
    return markdown, trace


class HistoryScreen(Screen):
    BINDINGS = [
        Binding("escape,f2", "app.pop_screen", "back"),
        Binding("enter", "open", "open", priority=True),
        Binding("e", "export", "export .md + .jsonl"),
    ]
    DEFAULT_CSS = """
    HistoryScreen { background: $background; }
    HistoryScreen .title { text-style: bold; color: $primary; padding: 0 1; background: $panel; }
    HistoryScreen DataTable { height: 1fr; }
    HistoryScreen #empty { padding: 1 2; color: $text-muted; }
    """

    def __init__(self, store: Store, export_dir: Path) -> None:
        super().__init__()
        self.store = store
        self.export_dir = export_dir

    def compose(self) -> ComposeResult:
        yield Static("History", classes="title")
        table = DataTable(cursor_type="row", zebra_stripes=True, id="conversations")
        yield table
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("id", "updated", "messages", "title")
        for summary in self.store.list_conversations():
            updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(summary.updated))
            table.add_row(str(summary.id), updated, str(summary.num_messages), summary.title or "–", key=str(summary.id))
        if not table.row_count:
            self.mount(Static("No conversations yet.", id="empty"), before=table)
        table.focus()

    def _selected_id(self) -> int | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        row_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return int(row_key.value)

    def action_open(self) -> None:
        conversation_id = self._selected_id()
        if conversation_id is None:
            return
        self.dismiss(conversation_id)  # the app shows it in the chat

    def action_export(self) -> None:
        conversation_id = self._selected_id()
        if conversation_id is None:
            return
        markdown, trace = write_exports(self.store, conversation_id, self.export_dir)
        self.notify(f"Wrote {markdown} and {trace}")
