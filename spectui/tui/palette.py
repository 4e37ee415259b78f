"""Every action of the screen at hand in Textual's command palette (Ctrl+P), with its keys.

The commands are the key table's (spectui.settings.config): each bound action of the
screen, the focused widget and the app appears under its description, with the keys that
run it now (as remapped), so the palette also teaches the keys. The chat's `/` commands are
there too: one that needs nothing more runs, one that needs an argument waits in the box for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from textual.app import App, SystemCommand
from textual.screen import Screen

from spectui.core.commands import COMMANDS, Command
from spectui.settings.config import KEY_DESCRIPTIONS
from spectui.tui.keys import ACTIONS, key_display
from spectui.tui.chat.commands import ChatCommands
from spectui.tui.chat.prompt import ChatPrompt


def palette_commands(app: App, screen: Screen, keys: dict[str, str]) -> Iterator[SystemCommand]:
    """One command per key-table action bound on `screen` (or its focused widget, or the app)."""
    seen: set[str] = set()
    for active in screen.active_bindings.values():
        binding_id = active.binding.id
        if binding_id not in ACTIONS or binding_id in seen:
            continue
        seen.add(binding_id)
        description = KEY_DESCRIPTIONS[binding_id]
        title = f"{description[:1].upper()}{description[1:]} · {key_display(keys[binding_id])}"
        yield SystemCommand(title, f"keys.{binding_id} in the config file",
                            partial(app.run_action, active.binding.action, active.node))
    yield from box_commands(screen)


def box_commands(screen: Screen) -> Iterator[SystemCommand]:
    """The message box's `/` commands, on a screen that has them (the chat)."""
    commands = getattr(screen, "commands", None)  # the chat screen's: no import of the screen here
    if not isinstance(commands, ChatCommands):
        return
    for spec in COMMANDS:
        needs_more = bool(spec.usage) and not spec.usage.startswith("[")
        run = partial(_into_box, screen, spec.name) if needs_more else partial(commands.run, Command(spec.name))
        yield SystemCommand(f"{spec.synopsis} · {spec.help}", "a command of the message box (/help lists them)", run)


def _into_box(screen: Screen, name: str) -> None:
    prompt = screen.query_one(ChatPrompt)
    prompt.value = f"/{name} "
    prompt.focus()
