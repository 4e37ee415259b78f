"""The chat screen: conversation and message box on the left, live panels on the right.

It shows a ChatSession (spectui.chat_session: the conversation, what a line means, what a
reply is started with) and turns keys into changes: live settings and engine swaps go to
the engine host (spectui.host), the turns to `Turns`, replies to `Replies`, the copy keys
to `ReplyCopier`. It composes widgets that own their parts: the conversation view (its
scroll, `/find`, the first screen's card) and the message box (its hints, completion and
recall), which say what happened with their own messages. It hears the host through
HostEvent messages and redraws the bar and panels from what they say; a `/` command that
does what a key does arrives as ActionWanted, one picked in the palette (the screen's
provider, BoxCommands) as CommandWanted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from spectui.chat_session.session import ChatSession
from spectui.chat_session.stats import PanelData, panel_data
from spectui.host.messages import EngineFailed, EngineReady, LiveChanged, Notice
from spectui.measure.run import prompt_messages
from spectui.store import Conversation, HistoryQueue
import spectui.tui.screens.chat_dialogs as dialogs
from spectui.tui.chat.bar import bar_state
from spectui.tui.screens.chat_keys import ChatKeys
from spectui.tui.chat.commands import ChatCommands
from spectui.tui.chat.conversation_view import ConversationView
from spectui.tui.chat.copying import ReplyCopier
from spectui.tui.chat.message_box import MessageBox
from spectui.tui.chat.panel_place import PanelPlace
from spectui.tui.chat.replies import Replies
from spectui.tui.chat.turns import TurnParts, Turns
from spectui.tui.clipboard import copy_text
from spectui.tui.heap import collect_between_replies
from spectui.tui.messages import CommandWanted, EngineRestarting, HostEvent, ReplyEnded, ShowConversation, StoreFailed
from spectui.tui.palette import BoxCommands
from spectui.tui.widgets.param_bar import BarState, ParamBar
from spectui.tui.widgets.stats_panel import StatsPanel, SummaryLine
from spectui.tui.widgets.key_footer import KeyFooter

if TYPE_CHECKING:
    from spectui.host.host import EngineHost
    from spectui.settings.config import ChatConfig


CHAT_CSS = """
ChatScreen { layout: vertical; }
ChatScreen #body { height: 1fr; }
ChatScreen #main { width: 1fr; height: 1fr; }
ChatScreen #conversation { height: 1fr; padding: 0 1 1 1; scrollbar-size-vertical: 1; }
ChatScreen #prompt { border: round $primary 30%; background: $surface; }
ChatScreen #prompt:focus { border: heavy $accent; }
"""


class ChatScreen(ChatKeys):
    DEFAULT_CSS = CHAT_CSS  # the layout: bar, conversation and box beside the stats panel
    COMMANDS = {BoxCommands}  # the palette offers the box's `/` commands here (the keys are the app's)

    def __init__(self, host: EngineHost, config: ChatConfig, store: HistoryQueue | None = None, *, conversation: Conversation | None = None,
                 compare_prompt: str | None = None, cursor_blink: bool = True) -> None:
        super().__init__()
        self.host, self._resume = host, conversation
        self.session = ChatSession(host, config, store, lambda text: self.notify(text, severity="warning"))
        self.show_ghosts, self.markdown = config.ghosts, False
        self.compare_prompt = compare_prompt  # `spectui compare PROMPT`: the view opens once the engine is ready
        self.param_bar = ParamBar(BarState(), id="params")
        self.stats_panel = StatsPanel(PanelData(host.live.k, host.live.temperature), id="stats")
        self.conversation = ConversationView(self.session, lambda: self.stats_panel.data, lambda: self.session.replies.next_id)
        self.box = MessageBox(config.keys, lambda: self.session.cwd, self.conversation.welcome.tab, cursor_blink)
        self.panels = PanelPlace(self.stats_panel, SummaryLine(id="summary-line"), self.conversation)
        self.replies = Replies(self, self.conversation, self.session, store, self.refresh_bar, self.refresh_panels, config.keys)
        self.copier = ReplyCopier(self, lambda text: copy_text(self.app, text))
        self.commands = ChatCommands(self.session, self.conversation)  # the box's / commands
        self.turns = Turns(self.session, TurnParts(self.conversation, self.box, self.replies, self.redraw,
                                                   lambda: self.show_ghosts), self.commands)
        self._unlisten = host.listen(lambda event: self.post_message(HostEvent(event)))

    def compose(self) -> ComposeResult:
        yield self.param_bar
        with Horizontal(id="body"):
            with Vertical(id="main"):
                yield self.conversation
                yield self.panels.summary_line
                yield self.box
            yield self.stats_panel
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.set_interval(1.0, self.tick, name="tick")
        if self._resume is not None:
            self.post_message(ShowConversation(self._resume))
        else:
            self.conversation.welcome.show()
        self.refresh_bar()
        self.box.focus()

    def on_unmount(self) -> None:
        self._unlisten()

    # what the bar and the panels show

    def refresh_bar(self) -> None:
        self.param_bar.show(bar_state(self.host, self.session.config, self.session.reply, self.session.waiting is not None,
                                      self.show_ghosts, self.markdown, self.session.note))

    def refresh_panels(self) -> None:
        current, live, session = self.session.reply, self.host.live, self.session
        reply = current.tracker if current is not None else session.last_reply
        memory = self.host.read_memory(session.stats.engine_stats)
        status = current.status if current is not None else "idle"
        reported = self.host.capabilities is None or self.host.capabilities.reports_speculation
        self.panels.show(panel_data(reply, session.stats, live.k, live.temperature, self.host.clock(), memory, status,
                                    reported, draft_vocab_words(self.host), session.verify_slope), session.verify_slope)

    def redraw(self) -> None:
        self.refresh_bar()
        self.refresh_panels()

    def tick(self) -> None:
        """Once a second: the panels' clocks and memory, and a loading engine's seconds."""
        self.refresh_panels()
        if self.host.state.loading:
            self.refresh_bar()

    def on_resize(self, event: events.Resize) -> None:
        self.panels.place(event.size.width)

    # what the engine host says

    def on_host_event(self, message: HostEvent) -> None:
        event = message.event
        self.conversation.engine_note(event)
        if isinstance(event, Notice):
            self.notify(event.text, severity=event.severity, timeout=event.timeout)
        elif isinstance(event, EngineReady):
            self._engine_ready(event)
        elif isinstance(event, EngineFailed):
            if event.swap_failed:
                self.session.switching_to = None  # the chat keeps the config it runs
            if event.swap_failed and self.host.engine is not None:
                self.turns.send_waiting()  # the engine before goes on: a message that waited goes to it
            else:
                self.turns.give_back_waiting()
        self.refresh_bar()
        if isinstance(event, LiveChanged):
            self.refresh_panels()
        self.refresh_bindings()  # an engine that loaded or switched may have a thinking switch, or none

    def _engine_ready(self, event: EngineReady) -> None:
        collect_between_replies()
        if event.swapped_to is not None:  # a switched model starts its figures anew
            self.session.engine_switched()
            self.refresh_panels()
        self.session.verify_slope = event.verify_slope
        self.turns.send_waiting()
        self.conversation.welcome.engine_ready()
        if event.restart_note is None and self.compare_prompt is not None:
            prompt, self.compare_prompt = self.compare_prompt, None
            dialogs.open_compare(self, self.session, prompt_messages(prompt, self.session.transcript.system), False,
                                 self.compared)  # never beside a reply

    # sending

    def on_message_box_submitted(self, event: MessageBox.Submitted) -> None:
        self.turns.submit(event.text)

    def on_message_box_paged(self, event: MessageBox.Paged) -> None:
        self.conversation.scroll_page_up() if event.direction < 0 else self.conversation.scroll_page_down()

    def on_command_wanted(self, message: CommandWanted) -> None:
        self.commands.run(message.command)  # picked in the palette

    def on_conversation_view_suggested(self, event: ConversationView.Suggested) -> None:
        self.box.fill(event.text)  # a first screen's suggestion

    # receiving

    def on_reply_ended(self, message: ReplyEnded) -> None:
        self.conversation.welcome.reply_ended(message.reply_id)  # a starter's k ends with its reply
        ended = self.replies.end(message, self.markdown)
        if ended is None or not self.session.reply_ended(ended):
            return  # not this chat's, or left behind by a new chat: its row is all that is kept
        if ended.finish_reason == "error":
            self.notify(f"The engine failed: {ended.error}", severity="error", timeout=8)
        self.redraw()
        self.call_after_refresh(collect_between_replies)
        self.call_after_refresh(dialogs.open_compare_after_reply, self, self.session, self.compared)

    def on_engine_restarting(self, message: EngineRestarting) -> None:
        if self.replies.restarting(message):
            self.refresh_bar()

    def on_store_failed(self, message: StoreFailed) -> None:
        self.notify(f"History stopped saving steps: {message.error}", severity="warning")

    def on_show_conversation(self, message: ShowConversation) -> None:
        """Replace what is shown with a stored conversation; new messages continue it."""
        self.turns.resume(message.conversation)
        self.call_after_refresh(self.conversation.scroll_end, animate=False)
        self.refresh_panels()

    def compared(self, speedup: float, what: str) -> None:
        """The compare view measured a speedup over k = 0: the Theory panel shows it beside its prediction."""
        self.session.stats.compared = (speedup, what)
        self.refresh_panels()

def draft_vocab_words(host: EngineHost) -> str:
    """The panel's draft vocabulary line: the running engine's (--vocab auto says there which
    rule it kept, after a reply), else the last ready one's."""
    info = host.engine.info if host.engine is not None else host.info
    return info.draft_vocab if info is not None else ""
