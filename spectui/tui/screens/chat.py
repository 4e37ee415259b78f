"""The chat screen: conversation and message box on the left, live panels on the right.

It arranges its parts and turns keys into changes: live settings and engine swaps go to
the engine host (spectui.host), replies to `Replies`, the conversation's rows to
`Transcript`, the copy keys to `ReplyCopier`. It hears the host through HostEvent
messages and redraws the bar and panels from what they say. A message sent while the
engine loads waits, and goes once the engine is ready. Regenerating or editing replaces
the last turn: on screen, in the transcript, and (superseded) in history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen

from spectui.core.events import Message
from spectui.host.messages import EngineFailed, EngineReady, LiveChanged, Notice
from spectui.measure.run import prompt_messages
from spectui.store import Conversation, HistoryQueue
import spectui.tui.screens.chat_dialogs as dialogs
from spectui.tui.chat.bar import bar_state
from spectui.tui.chat.commands import ChatCommands
from spectui.tui.chat.completion import CommandHints, complete_box
from spectui.tui.chat.continuing import ReplyActions
from spectui.tui.chat.copying import ReplyCopier
from spectui.tui.chat.panel_place import PanelPlace
from spectui.tui.chat.prompt import ChatPrompt
from spectui.tui.chat.replies import Replies
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.chat.transcript import Transcript
from spectui.tui.chat.turns import Turns
from spectui.tui.chat.welcome import Welcome
from spectui.tui.clipboard import copy_text
from spectui.tui.heap import collect_between_replies
from spectui.tui.keys import chat_bindings
from spectui.tui.messages import EngineRestarting, HostEvent, ReplyEnded, ShowConversation, StoreFailed
from spectui.tui.session import PanelData, ReplyTracker, SessionTracker, panel_data
from spectui.tui.widgets.param_bar import BarState, ParamBar
from spectui.tui.widgets.first_screen import FirstScreen
from spectui.tui.widgets.stats_panel import StatsPanel, SummaryLine
from spectui.tui.widgets.key_footer import KeyFooter
from spectui.tui.widgets.conversation import UserMessage

if TYPE_CHECKING:
    from spectui.host.host import EngineHost
    from spectui.settings.config import ChatConfig


CHAT_CSS = """
ChatScreen { layout: vertical; }
ChatScreen #body { height: 1fr; }
ChatScreen #main { width: 1fr; height: 1fr; }
ChatScreen #conversation { height: 1fr; padding: 0 1 1 1; scrollbar-size-vertical: 1; }
ChatScreen #prompt { margin: 0 1; border: round $primary 30%; background: $surface; }
ChatScreen #prompt:focus { border: heavy $accent; }
ChatScreen .-found { background: $warning 25%; }
"""


class ChatScreen(ReplyActions, Screen):
    BINDINGS = chat_bindings() + [Binding("n", "find_next(1)", show=False), Binding("N", "find_next(-1)", show=False)]
    DEFAULT_CSS = CHAT_CSS  # the layout: bar, conversation and box beside the stats panel

    def __init__(self, host: EngineHost, config: ChatConfig, store: HistoryQueue | None = None, *, conversation: Conversation | None = None,
                 compare_prompt: str | None = None, cursor_blink: bool = True) -> None:
        super().__init__()
        self.host, self.config, self._resume = host, config, conversation
        self.show_ghosts, self.markdown = config.ghosts, False
        self.compare_prompt = compare_prompt  # `spectui compare PROMPT`: the view opens once the engine is ready
        self.compare_after_reply: list[Message] | None = None  # F4 during a reply: the view opens once it ends
        self.session = SessionTracker()
        self.last_reply: ReplyTracker | None = None
        self.verify_slope: float | None = None  # v(k)'s slope the engine timed here (EngineReady)
        self.config_switching_to: ChatConfig | None = None  # the model screen's choice, while its engine loads
        self.scroll = ConversationScroll(id="conversation")
        self.prompt = ChatPrompt(config.keys, cursor_blink)
        self.param_bar = ParamBar(BarState(), id="params")
        self.stats_panel = StatsPanel(PanelData(host.live.k, host.live.temperature), id="stats")
        self.panels = PanelPlace(self.stats_panel, SummaryLine(id="summary-line"), self.scroll)
        self.transcript = Transcript(store, config.system, lambda text: self.notify(text, severity="warning"))
        self.replies = Replies(self, self.scroll, host, store, self.refresh_bar, self.refresh_panels, config.keys)
        self.copier = ReplyCopier(self, lambda text: copy_text(self.app, text))
        self.turns = Turns(self)
        self.welcome = Welcome(self)
        self.prompt.empty_tab = self.welcome.tab
        self.commands = ChatCommands(self)  # the box's / commands and this chat's files
        self.hints = CommandHints()
        self.prompt.complete = lambda text: complete_box(text, self.commands.cwd)
        self._unlisten = host.listen(lambda event: self.post_message(HostEvent(event)))

    def compose(self) -> ComposeResult:
        yield self.param_bar
        with Horizontal(id="body"):
            with Vertical(id="main"):
                yield self.scroll
                yield self.panels.summary_line
                yield self.hints
                yield self.prompt
            yield self.stats_panel
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.set_interval(1.0, self.tick, name="tick")
        if self._resume is not None:
            self.post_message(ShowConversation(self._resume))
        else:
            self.welcome.show()
        self.refresh_bar()
        self.prompt.focus()

    def on_unmount(self) -> None:
        self._unlisten()

    # what the bar and the panels show

    def refresh_bar(self) -> None:
        self.param_bar.show(bar_state(self.host, self.config, self.replies.current, self.prompt.waiting is not None,
                                      self.show_ghosts, self.markdown, self.turns.note))

    def refresh_panels(self) -> None:
        current, live = self.replies.current, self.host.live
        reply = current.tracker if current is not None else self.last_reply
        memory = self.host.read_memory(self.session.engine_stats)
        status = current.status if current is not None else "idle"
        reported = self.host.capabilities is None or self.host.capabilities.reports_speculation
        self.panels.show(panel_data(reply, self.session, live.k, live.temperature, self.host.clock(), memory, status,
                                    reported, draft_vocab_words(self.host)), self.verify_slope)

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
        self.scroll.engine_note(event)
        if isinstance(event, Notice):
            self.notify(event.text, severity=event.severity, timeout=event.timeout)
        elif isinstance(event, EngineReady):
            self._engine_ready(event)
        elif isinstance(event, EngineFailed):
            if event.swap_failed:
                self.config_switching_to = None  # the chat keeps the config it runs
            if event.swap_failed and self.host.engine is not None:
                self.send_waiting()  # the engine before goes on: a message that waited goes to it
            else:
                self.give_back_waiting()
        self.refresh_bar()
        if isinstance(event, LiveChanged):
            self.refresh_panels()

    def _engine_ready(self, event: EngineReady) -> None:
        collect_between_replies()
        if event.swapped_to is not None and self.config_switching_to is not None:
            self.config, self.config_switching_to = self.config_switching_to, None
        self.verify_slope = event.verify_slope
        self.send_waiting()
        self.welcome.engine_ready()
        if event.restart_note is None and self.compare_prompt is not None:
            prompt, self.compare_prompt = self.compare_prompt, None
            dialogs.open_compare(self, prompt_messages(prompt, self.transcript.system))  # never beside a reply

    # sending

    def on_chat_prompt_submitted(self, event: ChatPrompt.Submitted) -> None:
        self.turns.submit(event.text)

    def on_chat_prompt_paged(self, event: ChatPrompt.Paged) -> None:
        self.scroll.scroll_page_up() if event.direction < 0 else self.scroll.scroll_page_down()

    def on_first_screen_picked(self, event: FirstScreen.Picked) -> None:
        self.welcome.picked(event.suggestion)

    def on_text_area_changed(self) -> None:
        self.hints.show(self.prompt.text)

    def action_find_next(self, step: int) -> None:
        self.commands.finder.step(step)

    def send_waiting(self) -> None:
        waiting = self.prompt.take_waiting()
        if waiting is not None:
            self.send(waiting.text, waiting)

    def give_back_waiting(self) -> None:
        if self.prompt.give_back():
            self.notify("Your message did not go: it is back in the box.", severity="warning")

    def send(self, text: str, shown: UserMessage | None = None) -> None:
        """Send `text` as the user's message (`shown` already, if it waited for the engine)."""
        self.turns.send(text, shown)

    def action_regenerate(self, as_made: bool) -> None:
        self.turns.regenerate(as_made)

    def action_edit_last(self) -> None:
        self.turns.edit_last()

    # receiving

    def on_reply_ended(self, message: ReplyEnded) -> None:
        ended = self.replies.end(message, self.markdown)
        if ended is None:
            return
        self.transcript.add_reply(ended)
        if ended.tracker is None:
            return  # a reply left behind by a new chat: its row is all that is kept
        self.session.add_reply(ended.tracker)
        self.last_reply = ended.tracker
        if ended.finish_reason == "error":
            self.notify(f"The engine failed: {ended.error}", severity="error", timeout=8)
        self.refresh_bar()
        self.refresh_panels()
        self.call_after_refresh(collect_between_replies)
        self.call_after_refresh(dialogs.open_compare_after_reply, self)

    def on_engine_restarting(self, message: EngineRestarting) -> None:
        if self.replies.restarting(message):
            self.refresh_bar()

    def on_store_failed(self, message: StoreFailed) -> None:
        self.notify(f"History stopped saving steps: {message.error}", severity="warning")

    # keys

    def action_k(self, delta: int) -> None:
        self.host.keys.step_k(delta)

    def action_toggle_auto_k(self) -> None:
        self.host.keys.toggle_auto(self.stats_panel.data.theory)

    def action_temperature(self, direction: int) -> None:
        self.host.keys.step_temperature(direction)

    def action_cancel(self) -> None:
        if self.replies.cancel():
            self.refresh_bar()
        else:
            self.turns.stop_editing()

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
        if self.markdown and self.replies.current is not None:
            self.notify("The streaming reply stays as tokens until it ends.")
        self.refresh_bar()

    def action_resend_trimmed(self) -> None:
        self.turns.resend_trimmed()

    def action_copy(self, what: str) -> None:
        self.copier.copy_code() if what == "code" else self.copier.copy_reply()

    def action_pick_reply(self, step: int = -1) -> None:
        if not self.copier.pick(step):
            self.prompt.focus()

    def action_focus_prompt(self) -> None:
        self.prompt.focus()

    def action_new_chat(self) -> None:
        self.turns.start_over()
        self.welcome.show()
        self.refresh_bar()
        self.refresh_panels()
        self.prompt.focus()

    def action_system_prompt(self) -> None:
        dialogs.open_system_prompt(self)

    def action_model(self) -> None:
        dialogs.open_model(self)

    def action_engine_info(self) -> None:
        dialogs.open_engine_info(self)

    def action_compare(self) -> None:
        dialogs.compare_last_prompt(self)

    def compared(self, speedup: float, what: str) -> None:
        """The compare view measured a speedup over k = 0: the Theory panel shows it beside its prediction."""
        self.session.compared = (speedup, what)
        self.refresh_panels()

    # history

    def on_show_conversation(self, message: ShowConversation) -> None:
        """Replace what is shown with a stored conversation; new messages continue it."""
        self.turns.resume(message.conversation)
        self.call_after_refresh(self.scroll.scroll_end, animate=False)
        self.refresh_panels()


def draft_vocab_words(host: EngineHost) -> str:
    """The panel's draft vocabulary line: the running engine's (--vocab auto says there which
    rule it kept, after a reply), else the last ready one's."""
    info = host.engine.info if host.engine is not None else host.info
    return info.draft_vocab if info is not None else ""
