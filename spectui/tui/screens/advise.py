"""Advise: `spectui advise`'s table in the chat. The saved replies of the whole history (or of
this chat: t) replayed at T = 0 for every copy drafter and k, charged at this machine's
measured costs, in a worker thread with its progress shown; the recommendation; and `a`, shown
only where it acts, to run the recommended method and k in this chat and keep them in the
config file. The numbers come from spectui.advise (spectui.tui.advise_work calls it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, ProgressBar, Static

from spectui.core.errors import SpectuiError, one_line
from spectui.core.safe_text import safe_text
from spectui.core.words import counted
from spectui.tui.advise_work import Choice, apply_problem, config_for, kept_values, method_changes, recommended, run_advice

if TYPE_CHECKING:
    from spectui.advise.advice import Advice
    from spectui.chat_session.session import ChatSession

HISTORY, THIS_CHAT = "the whole history", "this chat"
HEADERS = ("drafter", "k", "speed vs k 0", "vs llama.cpp", "γ", "τ", "coloured")
COUNTS = ("replies", "tokens")  # only where the arms differ: costs_text says them otherwise (100 columns hold the rest)
PREDICTED = ("Predicted: your saved replies replayed at T = 0 (exact acceptance), charged at this "
             "machine's measured costs; no reply is run again.")


class Cancelled(Exception):
    """The screen closed: its worker stops at the next progress report."""


class AdviseProgress(Message):
    def __init__(self, what: str, done: int, total: int) -> None:
        super().__init__()
        self.what, self.done, self.total = what, done, total


class AdviseDone(Message):
    """again: the error was the machine's costs not measured, which the r key measures again."""

    def __init__(self, scope: str, advice: Advice | None, error: str | None, again: bool = False) -> None:
        super().__init__()
        self.scope, self.advice, self.error, self.again = scope, advice, error, again


class AdviseScreen(ModalScreen):
    BINDINGS = [
        Binding("escape,q", "close", "close"),
        Binding("t", "toggle_scope", "history / this chat"),
        Binding("a", "apply", "apply it"),
        Binding("r", "measure_again", "measure again"),
    ]
    DEFAULT_CSS = """
    AdviseScreen { align: center middle; }
    AdviseScreen > Vertical {
        width: 104; max-width: 100%; height: auto; max-height: 100%; padding: 0 2;
        background: $panel; border: round $primary;
    }
    AdviseScreen .title { text-style: bold; color: $primary; }
    AdviseScreen .muted { color: $text-muted; }
    AdviseScreen #advise-table { height: auto; max-height: 24; margin: 1 0 0 0; }
    AdviseScreen #advise-recommendation { text-style: bold; margin-top: 1; }
    AdviseScreen ProgressBar { margin: 0; }
    """

    def __init__(self, chat: ChatSession, history: Path) -> None:
        super().__init__()
        self.chat, self.history = chat, history
        self.scope = HISTORY
        self.results: dict[str, Advice | str] = {}  # scope -> its advice, or why there is none
        self.applied: Choice | None = None
        self.again: set[str] = set()  # scopes whose costs were not measured (a busy machine): r tries again
        self.closed = threading.Event()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Advise · which drafter and k pay for your chats", classes="title")
            yield Static(Content(PREDICTED), classes="muted", id="advise-predicted")
            yield Static("", id="advise-scope")
            yield Static("", id="advise-status")
            yield ProgressBar(show_eta=False, id="advise-progress")
            table: DataTable = DataTable(id="advise-table", cursor_type="none", zebra_stripes=False)
            yield table
            yield Static("", classes="muted", id="advise-costs")
            yield Static("", id="advise-recommendation")
            yield Static("", classes="muted", id="advise-apply")
        yield Footer()

    def on_mount(self) -> None:
        self.show_scope()

    def on_unmount(self) -> None:
        self.closed.set()  # the app quits with the screen open: a measurement stops too

    @property
    def advice(self) -> Advice | None:
        result = self.results.get(self.scope)
        return None if isinstance(result, str) else result

    @property
    def choice(self) -> Choice | None:
        advice = self.advice
        return recommended(advice) if advice is not None else None

    # the work

    def show_scope(self) -> None:
        """What the scope shows: its advice when computed, else a worker computes it."""
        other = THIS_CHAT if self.scope == HISTORY else HISTORY
        self.query_one("#advise-scope", Static).update(Content(f"Replies of {self.scope} · t: {other}"))
        if self.scope in self.results:
            self.show_result()
            return
        conversation = self.chat.transcript.conversation_id if self.scope == THIS_CHAT else None
        if self.scope == THIS_CHAT and conversation is None:
            self.results[self.scope] = "This chat has no saved reply yet: t shows the whole history."
            self.show_result()
            return
        for line in ("#advise-costs", "#advise-recommendation", "#advise-apply"):
            self.say(line, "")
        self.show_rows(None)
        self.progress("reading your chats", 0, 0)
        self.run_worker(partial(self.compute, self.scope, conversation), thread=True, group="advise")

    def compute(self, scope: str, conversation: int | None) -> None:
        """In a worker thread: the advice, posted back (a closed screen stops it at the next report)."""
        def report(what: str, done: int, total: int) -> None:
            if self.closed.is_set():
                raise Cancelled
            self.post_message(AdviseProgress(what, done, total))

        from spectui.advise.measure import NotMeasured

        try:
            advice = run_advice(self.chat.config.model, self.history, self.history.parent, conversation, report,
                                self.chat.host)
        except Cancelled:
            return
        except NotMeasured as error:  # in the chat's words: what can be done here, not a command-line flag
            again = " r measures again, once the machine is quiet." if error.again else ""
            self.post_message(AdviseDone(scope, None, f"{error.reason}.{again}", error.again))
            return
        except (SpectuiError, OSError) as error:
            self.post_message(AdviseDone(scope, None, str(error)))
            return
        except Exception as error:  # a library's own failure: one line on the screen, the chat goes on
            self.post_message(AdviseDone(scope, None, f"advise failed: {one_line(error)}"))
            return
        self.post_message(AdviseDone(scope, advice, None))

    def progress(self, what: str, done: int, total: int) -> None:
        status = self.query_one("#advise-status", Static)
        status.update(Content(safe_text(what)))
        status.display = True
        bar = self.query_one("#advise-progress", ProgressBar)
        bar.display = True
        bar.update(total=total or None, progress=done)

    def on_advise_progress(self, message: AdviseProgress) -> None:
        if message.total == 0 or self.scope not in self.results:
            self.progress(message.what, message.done, message.total)

    def on_advise_done(self, message: AdviseDone) -> None:
        self.results[message.scope] = message.advice if message.advice is not None else message.error or ""
        (self.again.add if message.again else self.again.discard)(message.scope)
        if message.scope == self.scope:
            self.show_result()

    # what it shows

    def show_result(self) -> None:
        result = self.results[self.scope]
        self.query_one("#advise-progress", ProgressBar).display = False
        advice = None if isinstance(result, str) else result
        status = self.query_one("#advise-status", Static)
        status.update(Content(safe_text(result) if isinstance(result, str) else ""))
        status.display = isinstance(result, str)  # a line only while it says something
        self.show_rows(advice)
        self.say("#advise-costs", costs_text(advice) if advice is not None else "")
        self.say("#advise-recommendation", safe_text(advice.recommendation()) if advice is not None else "")
        self.show_apply()

    def say(self, selector: str, text: str) -> None:
        """A line of the screen, taking no room while it says nothing."""
        line = self.query_one(selector, Static)
        line.update(Content(text))
        line.display = bool(text)

    def show_rows(self, advice: Advice | None) -> None:
        table = self.query_one("#advise-table", DataTable)
        table.clear(columns=True)
        table.display = advice is not None
        if advice is None:
            return
        best, arms = advice.best, [advice.baseline, *advice.arms]
        counts = arms_differ(advice)
        table.add_columns(*HEADERS, *(COUNTS if counts else ()))
        for arm in arms:
            style = "bold green" if arm is best and arm.speedup > 1 else ""
            cells = (arm.drafter or "plain", str(arm.k), f"×{arm.speedup:.2f}", number(advice.vs_llamacpp(arm), "×{:.2f}"),
                     number(arm.gamma), number(arm.tau), f"{arm.coloured_share:.0%}",
                     *((str(arm.replies), f"{arm.tokens:,}") if counts else ()))
            table.add_row(*(Text(cell, style=style, justify="left" if i == 0 else "right") for i, cell in enumerate(cells)))

    def show_apply(self) -> None:
        self.say("#advise-apply", self.apply_words())
        self.refresh_bindings()

    def apply_words(self) -> str:
        choice = self.choice
        if self.applied is not None:
            return f"Applied: {self.applied.words}, kept in your config file for the next chat."
        if choice is None:
            return ""
        problem = apply_problem(choice, self.chat.host, self.chat.config)
        if problem is not None:
            return problem
        return f"a: run {choice.words} in this chat, and keep it in your config file."

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "measure_again":
            return self.scope in self.again
        if action == "apply":  # shown only where it acts
            choice = self.choice
            return (self.applied is None and choice is not None
                    and apply_problem(choice, self.chat.host, self.chat.config) is None)
        return True

    # keys

    def action_toggle_scope(self) -> None:
        self.scope = THIS_CHAT if self.scope == HISTORY else HISTORY
        self.show_scope()

    def action_measure_again(self) -> None:
        if self.scope in self.again:
            self.again.discard(self.scope)
            del self.results[self.scope]
            self.show_scope()
            self.refresh_bindings()

    def action_apply(self) -> None:
        choice = self.choice
        if choice is None or apply_problem(choice, self.chat.host, self.chat.config) is not None:
            return
        self.applied = choice
        apply_choice(self.chat, choice, self.app.notify)
        self.show_apply()

    def action_close(self) -> None:
        self.closed.set()
        self.dismiss()


def number(value: float | None, shape: str = "{:.2f}") -> str:
    return "–" if value is None else shape.format(value)


def arms_differ(advice: Advice) -> bool:
    """Whether the arms rest on different replies or tokens (each row then says its own)."""
    return len({(arm.replies, arm.tokens) for arm in (advice.baseline, *advice.arms)}) > 1


def costs_text(advice: Advice) -> str:
    costs = advice.costs
    widths = ", ".join(f"v({rows}) {value:.2f}" for rows, value in sorted(costs.verify.items()))
    piece = f", verify in pieces of {costs.piece}" if costs.piece else ""
    left = ", ".join(f"{count} {why}" for why, count in advice.selection.skipped.items())
    base = advice.baseline
    rests = "" if arms_differ(advice) else f"Every row: {counted(base.replies, 'reply', 'replies')}, {counted(base.tokens, 'token', thousands=True)}. "
    return safe_text(f"{rests}Costs of {costs.model} on {costs.backend}: plain step {costs.plain_seconds * 1000:.1f} ms at "
                     f"{costs.context_tokens} tokens, {widths}{piece}" + (f"\nLeft out: {left}" if left else ""))


def apply_choice(chat: ChatSession, choice: Choice, notify: Callable[..., None]) -> None:
    """Run `choice` in the chat: k (or adaptive k) through the live settings; another method (or
    its settings) by the engine switch the model screen makes. Kept in the config file for the next chat."""
    from spectui.engines.factory import models_to_run
    from spectui.host.plan import plan_for
    from spectui.settings.config_edit import keep_settings
    from spectui.tui.screens.model import describe

    host, wanted = chat.host, config_for(choice, chat.config)
    switch = method_changes(choice, host, chat.config)
    if choice.k == "auto":
        host.live.update(auto=True)
    else:
        host.keys.set_k(int(choice.k))
    if switch:
        chat.switching_to = wanted  # the chat's config once that engine is ready
        host.swap(plan_for(wanted, models_to_run(wanted.engine, wanted.model, wanted.draft)), describe(wanted))
    else:
        chat.config = wanted
    try:
        path = keep_settings(kept_values(choice))
    except SpectuiError as error:  # ConfigError: the file could not be read, checked or written
        notify(f"Applied {choice.words} to this chat; not kept for the next: {error}", severity="warning", timeout=10)
        return
    notify(f"Applied {choice.words}; kept in {path} for the next chat.")
