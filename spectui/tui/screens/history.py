"""History: past conversations, filtered as you type by a search over all of them.

Enter opens one, E exports it (Markdown, JSON and the trace JSONL, into the data folder or a
folder typed in its place), R renames, D deletes (after a yes). Renames and deletes go through
the chat's history queue (spectui.store.write_queue): a lock another process holds never
freezes the screen; the list is drawn again once the change is written.
Titles and snippets come from models and files: shown through safe_line, as Text, never markup.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Static

from spectui.core.errors import SpectuiError, one_line
from spectui.core.files import ReadOnlyFile, check_user_file, write_user_file
from spectui.core.safe_text import safe_line
from spectui.settings.config import DEFAULT_KEYS
from spectui.core.safe_text import escaped_json
from spectui.store import LIST_LIMIT, ConversationSummary, HistoryQueue, SearchHit, Store, export_json, export_markdown, export_trace_jsonl
from spectui.tui.widgets.safe_fields import SafeInput

MATCH_STYLE = "bold reverse"
NO_TITLE = "–"


def export_paths(conversation_id: int, folder: Path) -> tuple[Path, Path, Path]:
    """Where the three exports of a conversation go in `folder`."""
    folder = folder.expanduser().resolve()
    stem = f"spectui-chat-{conversation_id}"
    return folder / f"{stem}.md", folder / f"{stem}.json", folder / f"{stem}.trace.jsonl"


def write_exports(
    store: Store, conversation_id: int, folder: Path, overwrite: bool = False
) -> tuple[Path, Path, Path]:
    """The conversation as Markdown and JSON, and its trace as JSONL, in `folder` (made if
    missing). Through the one safe writer: regular files only, an existing one replaced only
    with `overwrite` (the screen asks first), a full disk leaves no empty or cut file."""
    conversation = store.load_conversation(conversation_id)
    markdown, document, trace = export_paths(conversation_id, folder)
    for path in (markdown, document, trace):  # one read-only file (or a FIFO) among them: none written
        check_user_file(path, overwrite=overwrite)
    markdown.parent.mkdir(parents=True, exist_ok=True)
    write_user_file(markdown, export_markdown(conversation), overwrite=overwrite)
    write_user_file(document, escaped_json(export_json(conversation)), overwrite=overwrite)
    trace_lines = "".join(escaped_json(line) + "\n" for line in export_trace_jsonl(conversation))
    write_user_file(trace, trace_lines, overwrite=overwrite)
    return markdown, document, trace


def title_text(title: str) -> Text:
    return Text(safe_line(title) or NO_TITLE)


def snippet_text(hit: SearchHit) -> Text:
    return Text.assemble(*((safe_line(part), MATCH_STYLE if matched else "") for part, matched in hit.snippet))


class HistoryWritten(Message):
    """A queued rename or delete ran (or failed, said by the app's HistoryWatch): list again."""

    def __init__(self, keep: int | None) -> None:
        super().__init__()
        self.keep = keep


class HistoryScreen(Screen):
    """Dismissed with the id of the conversation to open in the chat, or None.
    open_id: the conversation the chat is writing to, which cannot be deleted from under it.
    writes: the chat's history queue, which renames and deletes go through (none: `store`
    writes them at once, for a store no chat writes to)."""

    BINDINGS = [
        Binding("escape", "back", "back"),
        Binding("f2", "app.pop_screen", show=False),
        Binding("enter", "open", "open", priority=True),
        Binding("e", "export", "export"),
        Binding(DEFAULT_KEYS["history_search"], "search", "search", id="history_search"),
        Binding(DEFAULT_KEYS["history_rename"], "rename", "rename", id="history_rename"),
        Binding(DEFAULT_KEYS["history_delete"], "delete", "delete", id="history_delete"),
        Binding("down", "results", show=False),  # from the search box down into the list
        Binding(DEFAULT_KEYS["history_more"], "more", "more", id="history_more"),
    ]
    DEFAULT_CSS = """
    HistoryScreen { background: $background; }
    HistoryScreen .title { text-style: bold; color: $primary; padding: 0 1; background: $panel; }
    HistoryScreen #search { margin: 0 1; }
    HistoryScreen DataTable { height: 1fr; }
    HistoryScreen #empty { padding: 1 2; color: $text-muted; }
    HistoryScreen #more { padding: 0 1; color: $warning; }
    """

    def __init__(self, store: Store, export_dir: Path, open_id: int | None = None,
                 writes: HistoryQueue | None = None) -> None:
        super().__init__()
        self.store = store
        self.writes = writes
        self.export_dir = export_dir
        self.open_id = open_id
        self.shown: dict[int, ConversationSummary] = {}  # by id, as listed
        self.limit = LIST_LIMIT  # the newest this many are listed; M lists LIST_LIMIT more

    def compose(self) -> ComposeResult:
        yield Static("History", classes="title")
        yield SafeInput(placeholder="search all conversations (/)", id="search")
        yield Static("", id="empty")
        yield Static("", id="more")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="conversations")
        yield Footer()

    def on_mount(self) -> None:
        self.show_matches("")
        self.table.focus()

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    @property
    def search_box(self) -> Input:
        return self.query_one("#search", Input)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input is self.search_box:
            self.show_matches(event.value)

    def show_matches(self, text: str, keep: int | None = None) -> None:
        """Every conversation (newest first), or those that match `text`; the cursor stays
        on `keep` when it is still listed."""
        try:
            rows = self.store.search(text, self.limit) if text.strip() else self.store.list_conversations(self.limit)
            total = len(rows) if len(rows) < self.limit else \
                self.store.count_matches(text) if text.strip() else self.store.count_conversations()
        except SpectuiError as error:
            self.notify(one_line(error), severity="error")
            return
        searching = bool(text.strip())
        more = self.query_one("#more", Static)
        more.update(Text(f"Showing the newest {len(rows):,} of {total:,}: {self.more_key} shows {LIST_LIMIT} more"))
        more.display = len(rows) < total
        table = self.table
        table.clear(columns=True)
        table.add_columns("id", "updated", "messages", "title", *(["match"] if searching else []))
        self.shown = {row.id: row for row in rows}
        for row in rows:
            updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.updated))
            cells = [str(row.id), updated, str(row.num_messages), title_text(row.title)]
            if searching:
                assert isinstance(row, SearchHit), "a search lists its hits"
                cells.append(snippet_text(row))
            table.add_row(*cells, key=str(row.id))
        if keep in self.shown:
            table.move_cursor(row=table.get_row_index(str(keep)))
        empty = self.query_one("#empty", Static)
        empty.update(Text(f"Nothing matches “{safe_line(text.strip())}”.") if searching else Text("No conversations yet."))
        empty.display = not rows

    def _selected_id(self) -> int | None:
        table = self.table
        if not table.row_count:
            return None
        row_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        assert row_key.value is not None, "every row is added with its conversation id as key"
        return int(row_key.value)

    def action_back(self) -> None:
        if self.search_box.has_focus:  # Esc leaves the search box first, then the screen
            self.search_box.value = ""
            self.table.focus()
        else:
            self.app.pop_screen()

    @property
    def more_key(self) -> str:
        """The key that lists more (the config file may remap it)."""
        first_key = getattr(self.app, "first_key", None)  # SpectuiApp's; a bare App in a test has none
        return first_key("history_more").upper() if first_key is not None else DEFAULT_KEYS["history_more"].upper()

    def action_more(self) -> None:
        self.limit += LIST_LIMIT
        self.show_matches(self.search_box.value, keep=self._selected_id())

    def action_search(self) -> None:
        self.search_box.focus()

    def action_results(self) -> None:
        self.table.focus()

    def action_open(self) -> None:
        conversation_id = self._selected_id()
        if conversation_id is None:
            return
        self.dismiss(conversation_id)  # the app shows it in the chat

    def action_export(self) -> None:
        """Asks where (the data folder, ready to accept or edit), then writes the three files."""
        conversation_id = self._selected_id()
        if conversation_id is None:
            return

        def export(folder: str | None) -> None:
            if folder is None or not folder.strip():
                return  # Esc, or nothing typed: nothing written
            there = [path for path in export_paths(conversation_id, Path(folder.strip())) if path.exists()]
            if not there:
                self._write_exports(conversation_id, Path(folder.strip()), overwrite=False)
                return
            question = Text.assemble(
                f"Replace {', '.join(path.name for path in there)} in ", Text(safe_line(str(there[0].parent))), "?"
            )

            def replace(yes: bool | None) -> None:
                if yes:
                    self._write_exports(conversation_id, Path(folder.strip()), overwrite=True)

            self.app.push_screen(DeleteDialog(question, yes="Replace (y)"), replace)

        self.app.push_screen(ExportDialog(conversation_id, self.export_dir), export)

    def _write_exports(self, conversation_id: int, folder: Path, overwrite: bool) -> None:
        try:
            markdown, document, trace = write_exports(self.store, conversation_id, folder, overwrite)
        except ReadOnlyFile as error:  # its own line names the file: not "ReadOnlyFile: …"
            self.notify(str(error), severity="error")
            return
        except (SpectuiError, OSError) as error:
            self.notify(one_line(error), severity="error")
            return
        self.notify(f"Wrote {markdown.name}, {document.name} and {trace.name} in {markdown.parent}", timeout=10)

    def action_rename(self) -> None:
        conversation_id = self._selected_id()
        if conversation_id is None:
            return

        def rename(title: str | None) -> None:
            if title is None or not title.strip():
                return  # Esc, or nothing typed: the title stays
            self._change("rename_conversation", (conversation_id, title), keep=conversation_id)

        self.app.push_screen(RenameDialog(self.shown[conversation_id].title), rename)

    def action_delete(self) -> None:
        conversation_id = self._selected_id()
        if conversation_id is None:
            return
        if conversation_id == self.open_id:
            self.notify(f"Conversation {conversation_id} is open in the chat: start a new chat before deleting it.",
                        severity="warning")
            return
        row = self.shown[conversation_id]
        question = Text.assemble(
            f"Delete conversation {conversation_id}, “", title_text(row.title),
            f"”, and its {row.num_messages} message(s)? This cannot be undone.",
        )

        def delete(confirmed: bool | None) -> None:
            if confirmed:
                self._change("delete_conversation", (conversation_id,), keep=self._neighbour(conversation_id))

        self.app.push_screen(DeleteDialog(question), delete)

    def _neighbour(self, conversation_id: int) -> int | None:
        """The row the cursor lands on once `conversation_id` is gone: the next, else the previous."""
        ids = list(self.shown)
        index = ids.index(conversation_id)
        rest = ids[index + 1 :] or ids[:index][-1:]
        return rest[0] if rest else None

    def _change(self, method: str, args: tuple, keep: int | None) -> None:
        """Queued behind the chat's writes (listed again when it ran); without a queue, now."""
        if self.writes is not None:
            getattr(self.writes, method)(*args, done=lambda: self.post_message(HistoryWritten(keep)))
            return
        try:
            getattr(self.store, method)(*args)
        except SpectuiError as error:
            self.notify(one_line(error), severity="error")
        self.show_matches(self.search_box.value, keep=keep)

    def on_history_written(self, message: HistoryWritten) -> None:
        self.show_matches(self.search_box.value, keep=message.keep)


class RenameDialog(ModalScreen[str | None]):
    """A conversation's new title: Enter saves it, Esc keeps the old one."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    RenameDialog { align: center middle; }
    RenameDialog > Vertical { width: 70; height: auto; padding: 1 2; background: $panel; border: round $primary; }
    """

    def __init__(self, title: str) -> None:
        super().__init__()
        self.old_title = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("New title (Enter saves, Esc cancels)")
            # Input shows text, never markup; controls are edited as their pictures.
            yield SafeInput(value=safe_line(self.old_title), id="title")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ExportDialog(ModalScreen[str | None]):
    """The folder to export into: Enter takes the one shown (or the one typed), Esc writes nothing."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    ExportDialog { align: center middle; }
    ExportDialog > Vertical { width: 90%; max-width: 100; height: auto; padding: 1 2; background: $panel; border: round $primary; }
    """

    def __init__(self, conversation_id: int, folder: Path) -> None:
        super().__init__()
        self.conversation_id = conversation_id
        self.folder = folder

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Export conversation {self.conversation_id} (.md, .json, .trace.jsonl) into this folder "
                         "(Enter writes, Esc cancels)", markup=False)
            yield SafeInput(value=str(self.folder), id="folder")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class DeleteDialog(ModalScreen[bool]):
    """A yes/no question: Y or the button confirms; N, Esc or the other button does not.
    Also asks before an export replaces files (`yes` names the action)."""

    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n,escape", "answer(False)", "no")]
    DEFAULT_CSS = """
    DeleteDialog { align: center middle; }
    DeleteDialog > Vertical { width: 70; height: auto; padding: 1 2; background: $panel; border: round $error; }
    DeleteDialog Horizontal { height: auto; margin-top: 1; }
    DeleteDialog Button { margin-right: 2; }
    """

    def __init__(self, question: Text, yes: str = "Delete (y)") -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, id="question")
            with Horizontal():
                yield Button(self.yes_label, variant="error", id="yes")
                yield Button("Keep (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()  # Enter on the default keeps the conversation

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
