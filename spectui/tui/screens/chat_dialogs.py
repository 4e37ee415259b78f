"""The screens the chat opens over itself (system prompt, model, engine info, the compare
view) and what it does with what they hand back. `chat` is the chat screen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectui.core.events import GenerationParams, Message
from spectui.tui.chat.budget import COMPARE_BUDGET

if TYPE_CHECKING:  # the chat screen opens these: a type-only import, no cycle when the code runs
    from spectui.models.registry import ModelPair
    from spectui.settings.config import ChatConfig
    from spectui.tui.screens.chat import ChatScreen


def open_system_prompt(chat: ChatScreen) -> None:
    from spectui.tui.screens.system_prompt import SystemPromptScreen

    def chosen(text: str | None) -> None:
        if text is not None:
            chat.transcript.set_system(text)
            chat.notify("System prompt set for this chat: the next reply follows it." if text else
                        "This chat has no system prompt now.")

    chat.app.push_screen(SystemPromptScreen(chat.transcript.system), chosen)


def open_model(chat: ChatScreen) -> None:
    """Another target, draft, method, heads or engine: the host swaps the engine (once nothing
    holds it), the conversation stays, and the next reply goes to the new engine."""
    from spectui.host.plan import plan_for
    from spectui.tui.screens.model import ModelScreen, describe

    def chosen(choice: tuple[ChatConfig, ModelPair | None] | None) -> None:
        if choice is None:
            return
        config, models = choice  # the config and the models it names, resolved by the screen
        if config != chat.config:
            chat.config_switching_to = config  # the chat's config once that engine is ready
            chat.host.swap(plan_for(config, models), describe(config))

    chat.app.push_screen(ModelScreen(chat.config), chosen)


def open_engine_info(chat: ChatScreen) -> None:
    from spectui.tui.screens.info import InfoScreen

    chat.app.push_screen(InfoScreen(chat.host, chat.session.engine_stats))


def compare_last_prompt(chat: ChatScreen) -> None:
    messages = chat.transcript.messages
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if last_user is None:
        chat.notify("Send a prompt first: the compare view runs the last one.")
    else:
        open_compare(chat, messages[: last_user + 1])


def open_compare(chat: ChatScreen, messages: list[Message]) -> None:
    from spectui.tui.screens.compare import CompareScreen

    if chat.host.engine is None:
        chat.notify("The engine is not ready yet.")
    elif chat.replies.current is not None:
        chat.compare_after_reply = list(messages)  # opened by open_compare_after_reply
        chat.notify("A reply is streaming; the compare view opens once it ends (Esc cancels it).")
    else:
        config = chat.config
        budget = config.max_tokens if config.max_tokens is not None else COMPARE_BUDGET
        params = GenerationParams(max_tokens=budget, top_p=config.top_p, seed=config.seed)
        chat.app.push_screen(CompareScreen(chat.host, list(messages), params, chat.compared))


def open_compare_after_reply(chat: ChatScreen) -> None:
    """The reply that F4 waited for has ended: the compare view opens now (a new chat forgets it)."""
    messages, chat.compare_after_reply = chat.compare_after_reply, None
    if messages is not None:
        open_compare(chat, messages)
