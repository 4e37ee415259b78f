"""What the message box's `/` commands do in the chat (the table and the parsing are
spectui.core.commands). A command never reaches the model; each calls the action its key
calls where one exists (new chat, model, system prompt), so a command and a key never differ.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from textual.widget import Widget

from spectui.core.attachments import at_paths, estimate_tokens
from spectui.core.commands import Command, Literal, Unknown, help_lines, parse, parse_k, parse_temperature
from spectui.core.errors import SpectuiError
from spectui.core.events import TEMPERATURE_MAX
from spectui.tui.chat.attached import AttachedFiles, Sent
from spectui.tui.chat.budget import context_line, parse_max
from spectui.tui.chat.continuing import continue_last
from spectui.tui.chat.thinking import set_thinking
from spectui.tui.chat.find import Finder
from spectui.tui.chat.save_flow import save_reply
from spectui.tui.chat.transcript import Entry
from spectui.tui.widgets.attachment import AttachmentView

if TYPE_CHECKING:  # the screen holds its helpers: a type-only import, no cycle when the code runs
    from spectui.tui.app import SpectuiApp
    from spectui.tui.screens.chat import ChatScreen


class ChatCommands:
    """screen: the chat screen; files: this chat's attached files; finder: `/find`'s matches."""

    def __init__(self, screen: ChatScreen) -> None:
        self.screen = screen
        self.files = AttachedFiles()
        self.finder = Finder(screen)
        self.cwd: str | None = None  # where relative paths start (None: the process's folder)
        self.confirming: str | None = None  # a message whose @path files a server would get, asked once

    def intercept(self, typed: str) -> str | None:
        """The text to send as a message, or None when the box held a command (done here)."""
        parsed = parse(typed)
        if parsed is None:
            return typed  # its @path files are read once the message is accepted (Turns.submit)
        if isinstance(parsed, Literal):
            return parsed.text
        if isinstance(parsed, Unknown):
            self.screen.notify(parsed.message, severity="warning")
            return None  # the line stays in the box, to be put right
        self.screen.prompt.clear()
        command, message = file_then_message(parsed)
        self.run(command)
        return message

    def run(self, command: Command) -> None:
        getattr(self, f"do_{command.name}")(command)

    def say(self, lines: list[str], error: bool = False) -> None:
        """Lines for the conversation (not for the model): a note under the last turn."""
        if lines:
            self.screen.scroll.note("\n".join(lines), error=error)

    # files

    def attach(self, patterns: list[str]) -> None:
        self.say(self.files.attach(patterns, self.cwd))
        over = self.context_note()
        if over:
            self.screen.notify(over, severity="warning", timeout=10)
            self.say([over], error=True)

    def mentioned(self, text: str) -> list[str]:
        """The message's `@path` words that name a file or folder here."""
        return [path for path in at_paths(text) if (Path(self.cwd or ".") / path).expanduser().exists()]

    def attach_mentioned(self, text: str) -> None:
        mentioned = self.mentioned(text)
        if mentioned:
            self.attach(mentioned)

    def may_send_mentioned(self, text: str) -> bool:
        """A message whose `@path` files would leave this machine (a server engine) goes only
        when sent a second time as it is: the first Enter says where they would go."""
        engine, config = self.screen.host.engine, self.screen.config
        remote = engine.info.name == "server" if engine is not None else config.engine == "server"  # still loading
        mentioned = self.mentioned(text)
        if not remote or not mentioned or self.confirming == text:
            self.confirming = None
            return True
        self.confirming = text
        names = ", ".join(mentioned)
        where = engine.info.device if engine is not None else config.server
        self.say([f"{names} would go to the server at {where} with this message: "
                  f"Enter again sends them; edit the message to keep them here"], error=True)
        return False

    def context_note(self) -> str | None:
        """One line when the chat with its waiting files would not fit the model's context."""
        engine = self.screen.host.engine
        context = engine.context_length if engine is not None else None
        if context is None or not self.files.pending:
            return None
        used = sum(estimate_tokens(entry.content) for entry in self.screen.transcript.entries) + self.files.pending_tokens()
        if used < context:
            return None
        return (f"With the files waiting, the chat is ≈{used:,} tokens; the model holds {context:,}: "
                f"≈{used - context + 1:,} too many. /drop a file or /clear for a new chat.")

    def compose(self, text: str, before: Widget | None = None) -> tuple[str, list]:
        """The user's turn with the waiting files, each shown as a folded block (before `before`,
        a message already shown while it waited), and those files."""
        self.say(self.files.refresh())
        content, files = self.files.compose(text)
        for attachment in files:
            view = AttachmentView(attachment, f"≈{attachment.estimated_tokens:,} tokens")
            if before is not None:
                self.screen.scroll.mount(view, before=before)
            else:
                self.screen.scroll.mount(view)
        return content, files

    def take_back_files(self, entry: Entry | None) -> None:
        """An edited turn is sent again: its files go with it, their blocks shown anew."""
        files = self.files.resend(entry) if entry is not None else []
        for view in self.screen.query(AttachmentView):
            if view.attachment in files:
                view.remove()

    def do_file(self, command: Command) -> None:
        if not command.args:
            self.screen.notify("/file takes one or more paths (globs too): /file src/*.py", severity="warning")
        else:
            self.attach(command.args)

    def do_files(self, command: Command) -> None:
        self.say(self.files.listing())

    def do_drop(self, command: Command) -> None:
        if not command.rest:
            self.screen.notify("/drop takes a file's name: /files lists them", severity="warning")
            return
        dropped, line = self.files.drop(command.rest)
        if isinstance(dropped, Sent):
            self.screen.transcript.rewrite(dropped.entry)
            for view in self.screen.query(AttachmentView):
                if view.attachment is dropped.attachment:
                    view.remove()
        self.say([line], error=dropped is None)

    def do_save(self, command: Command) -> None:
        save_reply(self.screen, command.args, self.cwd)

    # the chat

    def do_help(self, command: Command) -> None:
        self.say(["Commands (a line that starts with / is never sent; // sends one slash):", *help_lines()])

    def do_find(self, command: Command) -> None:
        self.finder.find(command.rest)

    def do_clear(self, command: Command) -> None:
        self.screen.action_new_chat()

    def do_model(self, command: Command) -> None:
        self.screen.action_model()

    def do_system(self, command: Command) -> None:
        self.screen.action_system_prompt()

    def do_advise(self, command: Command) -> None:
        cast("SpectuiApp", self.screen.app).action_advise()  # what its key does

    def do_k(self, command: Command) -> None:
        host = self.screen.host
        try:
            k = parse_k(command.rest)
        except ValueError as error:
            self.screen.notify(str(error), severity="warning")
            return
        if isinstance(k, str):  # "auto", the one word parse_k takes
            if host.live.auto:
                self.screen.notify("Adaptive k is already on")
            else:
                self.screen.action_toggle_auto_k()
        elif k == host.live.k and host.live.auto:
            host.live.update(auto=False)
        else:
            host.keys.step_k(k - host.live.k)  # the k keys' checks: an engine that fixes k says so

    def do_continue(self, command: Command) -> None:
        continue_last(self.screen)

    def do_edit(self, command: Command) -> None:
        self.screen.turns.reply_edit.start()

    def do_think(self, command: Command) -> None:
        set_thinking(self.screen, command.rest)

    def do_max(self, command: Command) -> None:
        screen = self.screen
        try:
            cap = parse_max(command.rest)
        except ValueError as error:
            screen.notify(str(error), severity="warning")
            return
        screen.config = replace(screen.config, max_tokens=cap)
        self.say([f"Replies stop at {cap:,} tokens from now on." if cap is not None
                  else "Replies may fill what the model's context leaves from now on."])

    def do_ctx(self, command: Command) -> None:
        screen = self.screen
        engine, last = screen.host.engine, screen.last_reply
        used, approximate = None, False
        if last is not None and last.done is not None and last.done.prompt_token_ids:
            used = len(last.done.prompt_token_ids) + last.clock.num_tokens  # what the model's cache held
        elif screen.transcript.entries:
            used, approximate = sum(estimate_tokens(entry.content) for entry in screen.transcript.entries), True
        self.say([context_line(used, engine.context_length if engine is not None else None,
                               screen.config.max_tokens, approximate)])

    def do_t(self, command: Command) -> None:
        try:
            temperature = parse_temperature(command.rest)
        except ValueError as error:
            self.screen.notify(str(error), severity="warning")
            return
        if temperature > TEMPERATURE_MAX:
            self.screen.notify(f"T stays within 0..{TEMPERATURE_MAX:g}: set to {TEMPERATURE_MAX:g}")
        self.screen.host.live.update(temperature=round(min(temperature, TEMPERATURE_MAX), 2))

    def do_export(self, command: Command) -> None:
        screen, app = self.screen, cast("SpectuiApp", self.screen.app)  # the app the chat screen runs in
        app.wait_for_history()  # the chat's rows may still wait in the history's queue
        conversation_id = screen.transcript.conversation_id
        if app.store is None or conversation_id is None:
            screen.notify("Nothing to export yet: the chat is saved once its first message is sent"
                          if app.store is not None else "History is off: there is no stored chat to export.")
            return
        folder = Path(command.rest).expanduser() if command.rest else app.export_dir
        try:
            written = app.export_conversation(conversation_id, folder)
        except (SpectuiError, OSError) as error:
            why = (error.strerror or str(error)) if isinstance(error, OSError) else str(error)
            screen.notify(f"Not exported to {folder}: {why}", severity="error")
            return
        self.say(["Exported this chat:", *(str(path) for path in written)])


def file_then_message(command: Command) -> tuple[Command, str | None]:
    """`/file PATH…` on the first line and a request below it (the first screen's suggestion):
    the files are attached and the lines below go to the model with them."""
    if command.name != "file" or "\n" not in command.rest:
        return command, None
    paths, _, message = command.rest.partition("\n")
    return Command(command.name, paths.strip()), message.strip() or None
