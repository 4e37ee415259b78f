"""The chat as a session, without Textual: the conversation (Transcript), its files
(AttachedFiles), what a submitted line means, what a reply is started with (sent, regenerated,
continued), the edit under way, and the figures of the finished replies. The chat screen
shows it: it mounts the widgets, asks the session what to do, and tells it what happened.

Regenerating or editing replaces the last turn in the transcript; its rows stay in history,
superseded (spectui.chat_session.transcript). Regenerate takes the k, T and seed the reply
was made with; its live variant takes the current k and T and a new seed (a new sample; the
seed is recorded, so that one can be made again).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.chat_session.attached import AttachedFiles
from spectui.chat_session.budget import binding_cap, reply_budget
from spectui.chat_session.meaning import Ask, KeepEdit, Meaning, Refuse, RunCommand, Send, Wait, file_then_message
from spectui.chat_session.reply import EndedReply, ReplyRequest
from spectui.chat_session.reply_settings import describe_values, engine_k, made_with, message_text, reply_settings
from spectui.chat_session.stats import ReplyTracker, SessionTracker
from spectui.chat_session.streaming import ReplyStreams, StreamingReply
from spectui.chat_session.transcript import Entry, Transcript, settings_record
from spectui.core.attachments import Attachment, at_paths
from spectui.core.commands import Literal, Unknown, parse
from spectui.core.events import GenerationParams, LiveValues, Message

if TYPE_CHECKING:
    from spectui.host.host import EngineHost
    from spectui.settings.config import ChatConfig
    from spectui.store import Conversation, HistoryQueue

EDITING_MESSAGE = "editing your last message: sending replaces that turn (Esc keeps it)"
EDITING_REPLY = "editing the last reply: Enter keeps the edit (then /continue goes on from it), Esc leaves it"
EDITED = "edited"  # the finish reason of a reply the user edited: it can be continued
# A reply that ended on its own has nothing to continue; one cut at a cap, cancelled,
# failed, interrupted or edited by the user has.
ENDED_ON_ITS_OWN = "stop"


def reply_so_far(entry: Entry) -> tuple[int, int]:
    """(tokens, steps) of a reply before it is continued: its row's steps are numbered on from there."""
    stats = entry.stats
    return int(stats.get("reply_tokens", stats.get("num_tokens", 0)) or 0), int(stats.get("reply_steps", stats.get("num_steps", 0)) or 0)


class ChatSession:
    """host: the engine host (its engine, live settings, state); config: the chat's (a model
    switch or /max replaces it); store: the chat's history writes; warn: a failed write's line.

    editing: "message" while the last message is back in the box (sending replaces its turn),
    "reply" while the last reply's text is (Enter keeps the edit), else None. replies: the
    reply in progress (`reply`) and those a new chat left behind. waiting: a message sent
    while the engine loads, which goes once it is ready (or back to the box if it fails)."""

    def __init__(self, host: EngineHost, config: ChatConfig, store: HistoryQueue | None, warn: Callable[[str], None]) -> None:
        self.host, self.config = host, config
        self.transcript = Transcript(store, config.system, warn)
        self.files = AttachedFiles()
        self.stats = SessionTracker()  # the finished replies' totals
        self.replies = ReplyStreams(host)  # the reply in progress, and those a new chat left behind
        self.last_reply: ReplyTracker | None = None
        self.thinking = True  # the template's switch, where it has one
        self.cwd: str | None = None  # where relative paths start (None: the process's folder)
        self.confirming: str | None = None  # a message whose @path files a server would get, asked once
        self.editing: str | None = None
        self.waiting: str | None = None
        self.verify_slope: float | None = None  # v(k)'s slope the engine timed (EngineReady)
        self.switching_to: ChatConfig | None = None  # the model screen's choice, while its engine loads
        self.compare_after_reply: list[Message] | None = None  # the compare view waits for this reply

    @property
    def reply(self) -> StreamingReply | None:
        """The reply in progress, if one streams."""
        return self.replies.current

    @property
    def turn_open(self) -> bool:
        """A reply streams, or a message waits for the engine: the last turn is not done yet."""
        return self.reply is not None or self.waiting is not None

    # what a line means

    def meaning(self, typed: str) -> Meaning:
        """The message box's Enter."""
        if self.editing == "reply":  # the box holds the reply's text, commands and all
            return KeepEdit(typed)
        text = message_text(typed)
        parsed = parse(text)
        if isinstance(parsed, Unknown):
            return Refuse(parsed.message, "warning")
        if parsed is None or isinstance(parsed, Literal):
            return self._message(parsed.text if parsed is not None else text)
        command, below = file_then_message(parsed)
        return RunCommand(command, self._message(below) if below is not None else None)

    def _message(self, text: str) -> Meaning:
        host = self.host
        if self.reply is not None:
            return Refuse("A reply is streaming; Esc cancels it.")
        if self.waiting is not None:
            return Refuse("A message already waits for the engine; this one stays in the box.")
        if host.state.failed and host.engine is None:
            return Refuse(f"No engine: {host.state.error}", "error")
        asked = self._ask_before_sending(text)
        if asked is not None:
            return asked
        return Wait(text) if host.engine is None else Send(text)

    def mentioned(self, text: str) -> list[str]:
        """The message's `@path` words that name a file or folder here."""
        return [path for path in at_paths(text) if (Path(self.cwd or ".") / path).expanduser().exists()]

    def _ask_before_sending(self, text: str) -> Ask | None:
        """A message whose `@path` files would leave this machine (a server engine) goes only
        when sent a second time as it is: the first Enter says where they would go."""
        engine, config = self.host.engine, self.config
        remote = engine.info.name == "server" if engine is not None else config.engine == "server"  # still loading
        mentioned = self.mentioned(text)
        if not remote or not mentioned or self.confirming == text:
            self.confirming = None
            return None
        self.confirming = text
        where = engine.info.device if engine is not None else config.server
        return Ask((f"{', '.join(mentioned)} would go to the server at {where} with this message: "
                    f"Enter again sends them; edit the message to keep them here",))

    # a turn

    def replace_last_turn(self) -> list[Attachment]:
        """The edited message goes instead of the last turn: both its entries leave the chat
        (their rows superseded) and its files wait again; returns those files."""
        self.editing = None
        self.transcript.drop_last("assistant")
        entry = self.transcript.drop_last("user")
        return self.files.resend(entry) if entry is not None else []

    def add_user(self, text: str, content: str, files: list[Attachment]) -> None:
        """The user's turn: `content` is `text` with its `files` (AttachedFiles.compose)."""
        host = self.host
        self.transcript.add_user(content, settings_record(host.info, self.config, host.live, engine_k(host)),
                                 title=text if files else None)
        self.files.mark_sent(files, self.transcript.entries[-1])

    def next_reply(self) -> ReplyRequest:
        """The reply to the message just added: the live values, the config's seed."""
        return self.reply_request(self.host.live.values, self.config.seed)

    def reply_request(self, values: LiveValues, seed: int | None) -> ReplyRequest:
        """A new reply to the chat as it stands; its history row opens here."""
        host = self.host
        settings = reply_settings(values, seed, host.info, engine_k(host), self.config.vocab)
        context = host.engine.context_length if host.engine is not None else None
        message_id = self.transcript.open_reply(settings)
        return ReplyRequest(self.transcript.messages, self._params(seed, context), message_id, values, settings,
                            binding_cap(self.config.max_tokens, context))

    def _params(self, seed: int | None, context: int | None) -> GenerationParams:
        return GenerationParams(max_tokens=reply_budget(self.config.max_tokens, context), top_p=self.config.top_p, seed=seed,
                                truncate=self.transcript.truncating, thinking=self.thinking)

    def busy(self, doing: str) -> str | None:
        """Why the last turn cannot be replaced now (to `doing`), if it cannot."""
        if self.turn_open:
            return f"Wait for the reply to end (Esc cancels it) before you {doing}."
        if self.transcript.last("assistant") is None or len(self.transcript.entries) < 2:
            return f"No reply to {doing} yet."
        return None

    def regenerate(self, as_made: bool) -> tuple[ReplyRequest, str]:
        """The last reply again (busy() found one): as it was made, or with the live values and
        a new seed; the old one leaves the chat. Returns the request and what to say of it."""
        live = self.host.live.values
        reply = self.transcript.last("assistant")
        assert reply is not None, "busy() found the reply to regenerate"
        values, seed, note = made_with(reply.settings, live, self.config.seed, self.host.info) if as_made \
            else (live, random.randrange(2**31), "")
        self.transcript.drop_last("assistant")
        return self.reply_request(values, seed), f"Regenerating the last reply with {describe_values(values, seed)}{note}"

    def why_not_continue(self, shown: bool) -> str | None:
        """Why the last reply cannot be continued now (shown: its view is on screen); None when it can."""
        if self.turn_open:
            return "A reply is streaming; Esc cancels it."
        entry = self.transcript.last("assistant")
        if entry is None or not shown:
            return "No reply to continue yet."
        if entry.finish_reason == ENDED_ON_ITS_OWN:
            return "The last reply ended on its own: nothing to continue (edit it, /edit, and it continues from the edit)."
        if self.host.engine is None:
            return "The engine is not ready yet."
        return None

    def continuation(self) -> ReplyRequest:
        """The last reply as an unfinished assistant message, to go on (why_not_continue found none)."""
        entry = self.transcript.last("assistant")
        engine = self.host.engine
        assert entry is not None and engine is not None, "why_not_continue found both"
        messages = [*self.transcript.messages[:-1], {"role": "assistant", "content": entry.content}]
        context = engine.context_length
        params = self._params(entry.settings.get("seed", self.config.seed), context)
        return ReplyRequest(messages, params, entry.row, self.host.live.values, entry.settings,
                            binding_cap(self.config.max_tokens, context), earlier=reply_so_far(entry),
                            before=entry.content, from_edit=bool(entry.stats.get("edited")))

    def keep_reply_edit(self, text: str) -> bool:
        """Enter while the reply is edited: the edit takes its place. False when it is gone."""
        self.editing = None
        return self.transcript.edit_reply(text, EDITED) is not None

    def reply_ended(self, ended: EndedReply) -> bool:
        """A reply ended: its row and entry; False for one left behind by a new chat."""
        self.transcript.add_reply(ended)
        if ended.tracker is None:
            return False
        self.stats.add_reply(ended.tracker)
        self.last_reply = ended.tracker
        return True

    # the chat

    @property
    def note(self) -> str:
        """What the bar says of an edit under way."""
        return {"message": EDITING_MESSAGE, "reply": EDITING_REPLY}.get(self.editing or "", "")

    def start_over(self) -> None:
        """A new chat: a reply in progress goes on in its thread, for its history row only."""
        self.replies.detach()
        self.editing = self.waiting = None  # the screen gave a waiting message back to the box first
        self.compare_after_reply = None  # the compare view's prompt belonged to the chat left behind
        self.transcript.start_over()
        self.files.reset()
        self.stats = SessionTracker()
        self.last_reply = None

    def resume(self, conversation: Conversation, trackers: list[ReplyTracker]) -> Iterator[str]:
        """A stored conversation continued (trackers: its replies'); the user's questions, oldest first."""
        self.start_over()
        self.transcript.resume(conversation)
        self.files.restore(self.transcript.entries)
        for tracker in trackers:
            self.stats.add_reply(tracker)
        self.last_reply = trackers[-1] if trackers else None
        return (self.files.question(entry) for entry in self.transcript.entries if entry.role == "user")

    def engine_switched(self) -> None:
        """Another model or backend: "vs plain", every cost and the last reply's figures (γ,
        tok/s, the panel's) were the one before's: the panels wait for this one's first reply."""
        self.stats = SessionTracker()
        self.last_reply = None
        if self.switching_to is not None:
            self.config, self.switching_to = self.switching_to, None
