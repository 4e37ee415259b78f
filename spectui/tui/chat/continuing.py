"""The last reply continued in place (`/continue`, its key): the model is given the
conversation with the reply so far as an unfinished assistant message (an "assistant
prefix", spectui.engines.prompt.chat_prompt_ids) and its tokens join the same reply view,
history row and transcript entry. No new turn: the reply is one message that stopped and went on.

The chat screen takes ReplyActions as a mixin (the screen is at its size cap): the keys that
act on the last reply, shown in the footer only where they act (Textual's check_action), and
handlers that run beside the screen's own (Textual calls a base class's handler too): stray
keys back to the box, a starter's k given back, a switched engine's figures started anew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from spectui.core.events import GenerationParams
from textual import events

from spectui.tui.chat.budget import binding_cap, reply_budget
from spectui.tui.chat.keep_focus import stray_key
from spectui.tui.chat.thinking import has_switch, set_thinking
from spectui.host.messages import EngineReady
from spectui.tui.keys import ACTIONS
from spectui.tui.messages import HostEvent, ReplyEnded
from spectui.tui.session import SessionTracker
from spectui.tui.widgets.conversation import ReplyView

if TYPE_CHECKING:  # the screen holds its helpers: a type-only import, no cycle when the code runs
    from spectui.tui.chat.transcript import Entry
    from spectui.tui.screens.chat import ChatScreen

# A reply that ended on its own has nothing to continue; one cut at a cap, cancelled,
# failed, interrupted or edited by the user has.
ENDED_ON_ITS_OWN = "stop"
K_ACTIONS = frozenset({ACTIONS[name][0] for name in ("k_down", "k_up", "k_auto")})


def reply_so_far(entry: Entry) -> tuple[int, int]:
    """(tokens, steps) of a reply before it is continued: its row's steps are numbered on from there."""
    stats = entry.stats
    return int(stats.get("reply_tokens", stats.get("num_tokens", 0)) or 0), int(stats.get("reply_steps", stats.get("num_steps", 0)) or 0)


def why_not(screen: ChatScreen) -> str | None:
    """Why the last reply cannot be continued now; None when it can."""
    if screen.replies.current is not None or screen.prompt.waiting is not None:
        return "A reply is streaming; Esc cancels it."
    entry = screen.transcript.last("assistant")
    if entry is None or not screen.query(ReplyView):
        return "No reply to continue yet."
    if entry.finish_reason == ENDED_ON_ITS_OWN:
        return "The last reply ended on its own: nothing to continue (edit it, /edit, and it continues from the edit)."
    if screen.host.engine is None:
        return "The engine is not ready yet."
    return None


def continue_last(screen: ChatScreen) -> None:
    """Continue the last reply where it stopped, or say why not."""
    problem = why_not(screen)
    if problem is not None:
        screen.notify(problem)
        return
    entry = screen.transcript.last("assistant")
    assert entry is not None and screen.host.engine is not None, "why_not found both"
    messages = [*screen.transcript.messages[:-1], {"role": "assistant", "content": entry.content}]
    context, cap = screen.host.engine.context_length, screen.config.max_tokens
    seed = entry.settings.get("seed", screen.config.seed)
    params = GenerationParams(max_tokens=reply_budget(cap, context), top_p=screen.config.top_p, seed=seed,
                              truncate=screen.transcript.truncating, thinking=screen.turns.thinking)
    view = screen.query(ReplyView).last()
    screen.replies.start(messages, params, entry.row, screen.show_ghosts, screen.host.live.values, entry.settings,
                         cap=binding_cap(cap, context), view=view, earlier=reply_so_far(entry))
    screen.refresh_bar()
    screen.refresh_panels()


class ReplyActions:
    """The chat screen's actions on its last reply (a mixin: the screen is at its size cap)."""

    def action_continue_reply(self) -> None:
        continue_last(cast("ChatScreen", self))

    def action_edit_reply(self) -> None:
        """The edit key on a picked reply: that reply's text into the box (the last one only)."""
        screen = cast("ChatScreen", self)
        focused = screen.focused
        screen.turns.reply_edit.start(focused if isinstance(focused, ReplyView) else None)

    def on_host_event(self, message: HostEvent) -> None:
        """Textual calls this beside the screen's own handler (base classes' handlers run too):
        an engine that loaded or switched may have a thinking switch, or none. A switched
        model or backend starts its figures anew: "vs plain" and every cost were timed on
        the one before (after a switch to SmolLM2 the summary read ×2.62 over the old one's steps)."""
        screen = cast("ChatScreen", self)
        if isinstance(message.event, EngineReady) and message.event.swapped_to is not None:
            screen.session = SessionTracker()
            screen.refresh_panels()
        screen.refresh_bindings()

    def footer_hidden(self) -> frozenset[str]:
        """Actions the footer leaves out though their keys still answer: no k keys where the
        engine runs its own k (a server: F5/F6/F9 were offered; pressed, they say why not)."""
        return K_ACTIONS if cast("ChatScreen", self).host.k_from_engine else frozenset()

    def on_key(self, event: events.Key) -> None:
        """A key from the conversation that nothing took goes back to the message box
        (spectui.tui.chat.keep_focus); runs before the bindings, which see the rest."""
        if stray_key(cast("ChatScreen", self), event):
            event.stop()
            event.prevent_default()

    def on_reply_ended(self, message: ReplyEnded) -> None:
        """Beside the screen's own handler (as on_host_event): a starter's k ends with its reply."""
        cast("ChatScreen", self).welcome.reply_ended(message.reply_id)

    def action_toggle_thinking(self) -> None:
        set_thinking(cast("ChatScreen", self))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer shows the continue and thinking keys only where they act."""
        if action == "continue_reply":
            return why_not(cast("ChatScreen", self)) is None
        if action == "toggle_thinking":
            return has_switch(cast("ChatScreen", self))
        return True
