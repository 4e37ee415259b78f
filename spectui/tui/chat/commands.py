"""What the message box's `/` commands do in the chat (the table and the parsing are
spectui.core.commands; what a line means, ChatSession.meaning). A command never reaches the
model. One that a key also does asks the chat screen to run that key's action (ActionWanted,
KEY_COMMANDS names it), so a command and a key never differ; `/advise` and `/export` ask the
app (ActionWanted, ExportWanted); the rest change the session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.widget import Widget

import spectui.chat_session.changes as changes
from spectui.chat_session.session import ChatSession
from spectui.chat_session.attached import Sent
from spectui.core.attachments import Attachment
from spectui.core.commands import Command, help_lines, parse_k, parse_temperature
from spectui.core.events import TEMPERATURE_MAX
from spectui.tui.chat.conversation_view import ConversationView
from spectui.tui.chat.save_flow import save_reply
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.messages import ActionWanted, ExportWanted
from spectui.tui.widgets.attachment import AttachmentView

# The commands that do what a key does, and the chat screen's action each runs (ChatKeys).
KEY_COMMANDS = {"clear": "new_chat", "model": "model", "system": "system_prompt", "continue": "continue_reply",
                "edit": "edit_reply"}
AUTO_K = "toggle_auto_k"  # `/k auto`: what the adaptive-k key does


def show_file_views(scroll: ConversationScroll, files: list[Attachment], before: Widget | None = None) -> None:
    """Each file of a turn as a folded block (before `before`, a message shown while it waited)."""
    for attachment in files:
        view = AttachmentView(attachment, f"≈{attachment.estimated_tokens:,} tokens")
        if before is not None:
            scroll.mount(view, before=before)
        else:
            scroll.mount(view)


def remove_file_views(scroll: ConversationScroll, files: list[Attachment]) -> None:
    for view in scroll.query(AttachmentView):
        if view.attachment in files:  # equal, not the same: a resumed chat's blocks are read twice
            view.remove()


class ChatCommands:
    """session: the chat; scroll: the conversation view, where commands answer (`/find` with
    its finder) and whence they ask the screen (or the app) for what a key does."""

    def __init__(self, session: ChatSession, scroll: ConversationView) -> None:
        self.session, self.scroll = session, scroll
        self.handlers: dict[str, Callable[[Command], None]] = {
            "file": self.do_file, "files": self.do_files, "drop": self.do_drop, "save": self.do_save,
            "help": self.do_help, "find": self.do_find, "k": self.do_k, "think": self.do_think, "max": self.do_max,
            "ctx": self.do_ctx, "t": self.do_t, "export": self.do_export, "advise": self.do_advise,
        }

    def run(self, command: Command) -> None:
        if command.name in KEY_COMMANDS:
            self.scroll.post_message(ActionWanted(KEY_COMMANDS[command.name]))  # the screen runs its key's action
        else:
            self.handlers[command.name](command)

    def say(self, lines: list[str], error: bool = False) -> None:
        """Lines for the conversation (not for the model): a note under the last turn."""
        if lines:
            self.scroll.note("\n".join(lines), error=error)

    def warn(self, text: str) -> None:
        self.scroll.notify(text, severity="warning")

    # files

    def attach(self, patterns: list[str]) -> None:
        self.say(self.session.files.attach(patterns, self.session.cwd))
        over = changes.context_note(self.session)
        if over:
            self.scroll.notify(over, severity="warning", timeout=10)
            self.say([over], error=True)

    def attach_mentioned(self, text: str) -> None:
        mentioned = self.session.mentioned(text)
        if mentioned:
            self.attach(mentioned)

    def do_file(self, command: Command) -> None:
        if not command.args:
            self.warn("/file takes one or more paths (globs too): /file src/*.py")
        else:
            self.attach(command.args)

    def do_files(self, command: Command) -> None:
        self.say(self.session.files.listing())

    def do_drop(self, command: Command) -> None:
        if not command.rest:
            self.warn("/drop takes a file's name: /files lists them")
            return
        dropped, line = changes.drop_file(self.session, command.rest)
        if isinstance(dropped, Sent):
            for view in self.scroll.query(AttachmentView):
                if view.attachment is dropped.attachment:
                    view.remove()
        self.say([line], error=dropped is None)

    def do_save(self, command: Command) -> None:
        save_reply(self.session, self.scroll, command.args)

    # the chat

    def do_help(self, command: Command) -> None:
        self.say(["Commands (a line that starts with / is never sent; // sends one slash):", *help_lines()])

    def do_find(self, command: Command) -> None:
        self.scroll.finder.find(command.rest)

    def do_k(self, command: Command) -> None:
        host = self.session.host
        try:
            k = parse_k(command.rest)
        except ValueError as error:
            self.warn(str(error))
            return
        if isinstance(k, str):  # "auto", the one word parse_k takes
            if host.live.auto:
                self.scroll.notify("Adaptive k is already on")
            else:
                self.scroll.post_message(ActionWanted(AUTO_K))
        elif k == host.live.k and host.live.auto:
            host.live.update(auto=False)
        else:
            host.keys.step_k(k - host.live.k)  # the k keys' checks: an engine that fixes k says so

    def do_think(self, command: Command) -> None:
        try:
            self.scroll.notify(changes.set_thinking(self.session, command.rest))
        except ValueError as error:
            self.warn(str(error))

    def do_max(self, command: Command) -> None:
        try:
            self.say([changes.set_max(self.session, command.rest)])
        except ValueError as error:
            self.warn(str(error))

    def do_ctx(self, command: Command) -> None:
        self.say([changes.context_used(self.session)])

    def do_t(self, command: Command) -> None:
        try:
            temperature = parse_temperature(command.rest)
        except ValueError as error:
            self.warn(str(error))
            return
        if temperature > TEMPERATURE_MAX:
            self.scroll.notify(f"T stays within 0..{TEMPERATURE_MAX:g}: set to {TEMPERATURE_MAX:g}")
        self.session.host.live.update(temperature=round(min(temperature, TEMPERATURE_MAX), 2))

    def do_advise(self, command: Command) -> None:
        self.scroll.post_message(ActionWanted("app.advise"))  # what its key does

    def do_export(self, command: Command) -> None:
        """The app exports (it holds the history); the written files' names come back here."""
        transcript = self.session.transcript
        folder = Path(command.rest).expanduser() if command.rest else None
        self.scroll.app.post_message(ExportWanted(lambda: transcript.conversation_id, folder,
                                              lambda written: self.say(["Exported this chat:", *map(str, written)])))
