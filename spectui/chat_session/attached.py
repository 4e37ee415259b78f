"""The files of one chat: those waiting for the next message (`pending`) and those already
sent in a turn (`sent`). `/file` and `@path` add, `/files` lists, `/drop` takes one out.

A file joins the next user turn, ahead of the question (spectui.core.attachments): earlier
turns never change by attaching, so the engine's cached prompt prefix stays valid. Only
`/drop` of a file already sent rewrites its turn, and says that the next reply reads the
chat again from there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from spectui.core.attachments import (
    Attachment, block, change_words, estimate_tokens, expand, message_with, over_cap, read_attachment, size_text, split_blocks, without,
)
from spectui.chat_session.transcript import Entry


@dataclass
class Sent:
    attachment: Attachment
    entry: Entry  # the transcript's entry of the turn that carries it
    shown: str  # the block's text in that turn


def token_words(count: int) -> str:
    return f"≈{count:,} tokens"


class AttachedFiles:
    def __init__(self) -> None:
        self.pending: list[Attachment] = []
        self.sent: list[Sent] = []

    def reset(self) -> None:
        self.pending, self.sent = [], []

    def latest(self, path: str) -> Attachment | None:
        """The newest version of the file at `path` in this chat (waiting or sent)."""
        versions = [a for a in self.pending if a.path == path] + [s.attachment for s in self.sent if s.attachment.path == path]
        return versions[0] if versions else None

    def attach(self, patterns: list[str], cwd: str | None = None) -> list[str]:
        """Read the files the patterns name into the next message: one line per file
        (attached, changed, unchanged, or why not)."""
        paths, lines = expand(patterns, cwd)
        base = Path(cwd) if cwd is not None else Path.cwd()
        named = {str((base / path).resolve()) for path in paths}
        others = [a for a in self.pending if a.path not in named]  # a file attached again replaces itself
        over = over_cap(paths, base, (len(others), sum(a.size for a in others))) if others else None
        if over is not None:
            return [over]
        for name in paths:
            read = read_attachment(name, cwd)
            lines.append(read if isinstance(read, str) else self._add(read))
        return lines

    def _add(self, attachment: Attachment) -> str:
        before = self.latest(attachment.path)
        described = f"{attachment.name} · {size_text(attachment.size)} · {token_words(attachment.estimated_tokens)}"
        if before is not None and before.sha256 == attachment.sha256:
            return f"{attachment.name} is unchanged since it was attached"
        if before is not None and before in self.pending:
            self.pending[self.pending.index(before)] = attachment
        else:
            self.pending.append(attachment)
        if before is None:
            return f"Attached {described}: it goes with your next message"
        return f"{attachment.name} changed ({change_words(before.text, attachment.text)}): the new version goes with your next message"

    def refresh(self) -> list[str]:
        """The waiting files read again as the message goes: one that changed since `/file`
        goes as it is now, and a line says so (a file gone or unreadable goes as attached)."""
        lines = []
        for index, attached in enumerate(self.pending):
            now = read_attachment(attached.path)
            if isinstance(now, str):
                lines.append(f"{attached.name} cannot be read again ({now.partition(': ')[2]}): "
                             f"it goes as it was attached")
            elif now.sha256 != attached.sha256:
                self.pending[index] = replace(now, name=attached.name)
                lines.append(f"{attached.name} changed since it was attached ({change_words(attached.text, now.text)}): "
                             f"the version sent is the one on disk now")
        return lines

    def compose(self, text: str) -> tuple[str, list[Attachment]]:
        """The user's turn with the waiting files in it, and those files (no longer waiting)."""
        files, self.pending = self.pending, []
        return message_with(files, text), files

    def mark_sent(self, files: list[Attachment], entry: Entry) -> None:
        self.sent.extend(Sent(attachment, entry, block(attachment)) for attachment in files)

    def restore(self, entries: Sequence[Entry]) -> None:
        """A resumed chat: the files its stored user turns carry."""
        for entry in entries:
            if entry.role == "user":
                self.sent.extend(Sent(a, entry, shown) for a, shown in split_blocks(entry.content)[0])

    def of_turn(self, entry: Entry) -> list[Attachment]:
        return [s.attachment for s in self.sent if s.entry is entry]

    def question(self, entry: Entry) -> str:
        """What the user wrote in a turn, its files' blocks taken out (to edit it)."""
        content = entry.content
        for sent in self.sent:
            if sent.entry is entry:
                content = without(content, sent.attachment, sent.shown)
        return content

    def resend(self, entry: Entry) -> list[Attachment]:
        """An edited turn replaces `entry`: its files wait again, ahead of any attached since."""
        files = self.of_turn(entry)
        self.sent = [s for s in self.sent if s.entry is not entry]
        self.pending = files + [a for a in self.pending if a.path not in {f.path for f in files}]
        return files

    def find(self, name: str) -> Attachment | Sent | None:
        """The file called `name` (its name as attached, or the file's own name): waiting first."""
        def named(attachment: Attachment) -> bool:
            plain = attachment.name.replace("\u240a", " ")  # a newline in the name, typed as a space
            return name in (attachment.name, attachment.name.rsplit("/", 1)[-1], plain, plain.rsplit("/", 1)[-1])

        waiting = next((a for a in self.pending if named(a)), None)
        return waiting if waiting is not None else next((s for s in reversed(self.sent) if named(s.attachment)), None)

    def drop(self, name: str) -> tuple[Attachment | Sent | None, str]:
        """Take the file out: a waiting one simply, a sent one out of its turn's text."""
        found = self.find(name)
        if found is None:
            return None, f"No file {name} in this chat (/files lists them)"
        if isinstance(found, Attachment):
            self.pending.remove(found)
            return found, f"Dropped {found.name}: it will not go with your next message"
        self.sent.remove(found)
        found.entry.content = without(found.entry.content, found.attachment, found.shown)
        return found, (f"Dropped {found.attachment.name} from the chat: the next reply reads the chat again "
                       f"from that turn (its cached prompt cannot be reused)")

    def listing(self) -> list[str]:
        if not self.pending and not self.sent:
            return ["No files in this chat: /file PATH… attaches some (globs too), or @path in a message"]
        lines = [f"sent     {s.attachment.header()} · {token_words(s.attachment.estimated_tokens)}" for s in self.sent]
        lines += [f"waiting  {a.header()} · {token_words(a.estimated_tokens)}" for a in self.pending]
        return lines

    def pending_tokens(self) -> int:
        return sum(estimate_tokens(message_with([a], "")) for a in self.pending)
