"""What the chat's keys do: the chat screen's bindings and actions, and which of them the
footer shows. The chat screen (spectui.tui.screens.chat) builds the parts declared here and
reacts to the engine and the replies; this half only turns keys (and the `/` commands that do
what a key does, ActionWanted) into changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import events
from textual.binding import Binding
from textual.screen import Screen

import spectui.tui.screens.chat_dialogs as dialogs
from spectui.chat_session.changes import has_thinking_switch
from spectui.chat_session.session import ChatSession
from spectui.tui.chat.commands import ChatCommands
from spectui.tui.chat.conversation_view import ConversationView
from spectui.tui.chat.copying import ReplyCopier
from spectui.tui.chat.keep_focus import stray_key
from spectui.tui.chat.panel_place import PanelPlace
from spectui.tui.chat.message_box import MessageBox
from spectui.tui.chat.replies import Replies
from spectui.tui.chat.turns import Turns
from spectui.tui.keys import ACTIONS, chat_bindings
from spectui.tui.messages import ActionWanted
from spectui.tui.widgets.conversation import ReplyView
from spectui.tui.widgets.stats_panel import StatsPanel

if TYPE_CHECKING:
    from spectui.host.host import EngineHost

K_ACTIONS = frozenset({ACTIONS[name][0] for name in ("k_down", "k_up", "k_auto")})


class ChatKeys(Screen):
    """The keys' half of the chat screen: the parts below are the screen's (built in its __init__)."""

    BINDINGS = chat_bindings() + [Binding("n", "find_next(1)", show=False), Binding("N", "find_next(-1)", show=False)]
    host: EngineHost
    session: ChatSession
    conversation: ConversationView
    box: MessageBox
    stats_panel: StatsPanel
    panels: PanelPlace
    replies: Replies
    copier: ReplyCopier
    commands: ChatCommands
    turns: Turns
    show_ghosts: bool
    markdown: bool
    refresh_bar: Callable[[], None]
    redraw: Callable[[], None]
    compared: Callable[[float, str], None]

    async def on_action_wanted(self, message: ActionWanted) -> None:
        await self.run_action(message.action)

    def on_key(self, event: events.Key) -> None:
        """A key from the conversation that nothing took goes back to the message box
        (spectui.tui.chat.keep_focus); runs before the bindings, which see the rest."""
        if stray_key(self.focused, event, self.box, self.session.reply is not None, self.conversation.finder):
            event.stop()
            event.prevent_default()

    # the live settings

    def action_k(self, delta: int) -> None:
        self.host.keys.step_k(delta)

    def action_toggle_auto_k(self) -> None:
        self.host.keys.toggle_auto(self.stats_panel.data.theory)

    def action_temperature(self, direction: int) -> None:
        self.host.keys.step_temperature(direction)

    def action_toggle_thinking(self) -> None:
        self.turns.set_thinking()

    # the turns

    def action_cancel(self) -> None:
        if self.session.replies.cancel():
            self.refresh_bar()
        else:
            self.turns.stop_editing()

    def action_regenerate(self, as_made: bool) -> None:
        self.turns.regenerate(as_made)

    def action_edit_last(self) -> None:
        self.turns.edit_last()

    def action_resend_trimmed(self) -> None:
        self.turns.resend_trimmed()

    def action_continue_reply(self) -> None:
        self.turns.continue_last()

    def action_edit_reply(self) -> None:
        """The edit key on a picked reply: that reply's text into the box (the last one only)."""
        focused = self.focused
        self.turns.edit_reply(focused if isinstance(focused, ReplyView) else None)

    def action_new_chat(self) -> None:
        self.turns.start_over()
        self.conversation.welcome.show()
        self.redraw()
        self.box.focus()

    # what the conversation shows

    def action_toggle_ghosts(self) -> None:
        self.show_ghosts = not self.show_ghosts
        self.replies.show_ghosts(self.show_ghosts)
        if self.show_ghosts and self.host.engine is not None and self.host.engine.info.method == "none":
            self.notify("This engine drafts nothing, so there are no rejected drafts to show.")
        self.refresh_bar()

    def action_toggle_stats(self) -> None:
        note = self.panels.toggle(self.size.width)
        if note:
            self.notify(note)

    def action_toggle_markdown(self) -> None:
        self.markdown = not self.markdown
        self.replies.show_markdown(self.markdown)
        if self.markdown and self.session.reply is not None:
            self.notify("The streaming reply stays as tokens until it ends.")
        self.refresh_bar()

    def action_copy(self, what: str) -> None:
        self.copier.copy_code() if what == "code" else self.copier.copy_reply()

    def action_pick_reply(self, step: int = -1) -> None:
        if not self.copier.pick(step):
            self.box.focus()

    def action_focus_prompt(self) -> None:
        self.box.focus()

    def action_find_next(self, step: int) -> None:
        self.conversation.finder.step(step)

    # the screens over the chat

    def action_system_prompt(self) -> None:
        self.run_worker(dialogs.choose_system_prompt(self, self.session), group="dialogs")

    def action_model(self) -> None:
        self.run_worker(dialogs.choose_model(self, self.session), group="dialogs")

    def action_engine_info(self) -> None:
        dialogs.open_engine_info(self, self.session)

    def action_compare(self) -> None:
        dialogs.compare_last_prompt(self, self.session, self.session.reply is not None, self.compared)

    # which keys the footer shows

    def footer_hidden(self) -> frozenset[str]:
        """Actions the footer leaves out though their keys still answer: no k keys where the
        engine runs its own k (a server: F5/F6/F9 were offered; pressed, they say why not)."""
        return K_ACTIONS if self.host.k_from_engine else frozenset()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer shows the continue and thinking keys only where they act."""
        if action == "continue_reply":
            return self.turns.continue_problem is None
        if action == "toggle_thinking":
            return has_thinking_switch(self.host)
        return True
