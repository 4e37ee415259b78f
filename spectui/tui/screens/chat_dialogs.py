"""The screens the chat opens over itself (system prompt, model, engine info, the compare
view) and what it does with what they hand back. `screen` opens them (and says what
happened); `session` is the chat they read and change. A dialog that hands something back
is awaited (push_screen_wait) in a worker of the screen's (ChatKeys runs them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.screen import Screen

from spectui.chat_session.budget import COMPARE_BUDGET
from spectui.chat_session.session import ChatSession
from spectui.core.events import GenerationParams, Message

if TYPE_CHECKING:
    from spectui.models.registry import ModelPair
    from spectui.settings.config import ChatConfig

Compared = Callable[[float, str], None]  # the compare view's measured speedup, and what it ran


async def choose_system_prompt(screen: Screen, session: ChatSession) -> None:
    from spectui.tui.screens.system_prompt import SystemPromptScreen

    text = await screen.app.push_screen_wait(SystemPromptScreen(session.transcript.system))
    if text is not None:
        session.transcript.set_system(text)
        screen.notify("System prompt set for this chat: the next reply follows it." if text else
                      "This chat has no system prompt now.")


async def choose_model(screen: Screen, session: ChatSession) -> None:
    """Another target, draft, method, heads or engine: the host swaps the engine (once nothing
    holds it), the conversation stays, and the next reply goes to the new engine."""
    from spectui.host.plan import plan_for
    from spectui.tui.screens.model import ModelScreen, describe

    choice: tuple[ChatConfig, ModelPair | None] | None = await screen.app.push_screen_wait(ModelScreen(session.config))
    if choice is None:
        return
    config, models = choice  # the config and the models it names, resolved by the screen
    if config != session.config:
        session.switching_to = config  # the chat's config once that engine is ready
        session.host.swap(plan_for(config, models), describe(config))


def open_engine_info(screen: Screen, session: ChatSession) -> None:
    from spectui.tui.screens.info import InfoScreen

    screen.app.push_screen(InfoScreen(session.host, session.stats.engine_stats))


def compare_last_prompt(screen: Screen, session: ChatSession, replying: bool, compared: Compared) -> None:
    messages = session.transcript.messages
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if last_user is None:
        screen.notify("Send a prompt first: the compare view runs the last one.")
    else:
        open_compare(screen, session, messages[: last_user + 1], replying, compared)


def open_compare(screen: Screen, session: ChatSession, messages: list[Message], replying: bool, compared: Compared) -> None:
    """replying: a reply streams (the view waits for it to end: open_compare_after_reply)."""
    from spectui.tui.screens.compare import CompareScreen

    if session.host.engine is None:
        screen.notify("The engine is not ready yet.")
    elif replying:
        session.compare_after_reply = list(messages)  # opened by open_compare_after_reply
        screen.notify("A reply is streaming; the compare view opens once it ends (Esc cancels it).")
    else:
        config = session.config
        budget = config.max_tokens if config.max_tokens is not None else COMPARE_BUDGET
        params = GenerationParams(max_tokens=budget, top_p=config.top_p, seed=config.seed)
        screen.app.push_screen(CompareScreen(session.host, list(messages), params, compared))


def open_compare_after_reply(screen: Screen, session: ChatSession, compared: Compared) -> None:
    """The reply that F4 waited for has ended: the compare view opens now (a new chat forgets it)."""
    messages, session.compare_after_reply = session.compare_after_reply, None
    if messages is not None:
        open_compare(screen, session, messages, False, compared)
