"""Every action of the screen at hand in Textual's command palette (Ctrl+P), with its keys.

The commands are the key table's (spectui.settings.config): each bound action of the
screen, the focused widget and the app appears under its description, with the keys that
run it now (as remapped), so the palette also teaches the keys (the app's system commands).
The chat's `/` commands are the chat screen's own provider (`BoxCommands`, in its COMMANDS):
one that needs nothing more runs, one that needs an argument waits in the box for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.app import App, SystemCommand
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import Screen

from spectui.core.commands import COMMANDS, Command
from spectui.settings.config import KEY_DESCRIPTIONS
from spectui.tui.keys import ACTIONS, key_display
from spectui.tui.chat.message_box import MessageBox
from spectui.tui.messages import CommandWanted

BOX_HELP = "a command of the message box (/help lists them)"


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


class BoxCommands(Provider):
    """The message box's `/` commands, for a screen that holds the box (the chat's COMMANDS):
    one that needs an argument goes into the box to be finished, the others ask the screen
    to run them (CommandWanted)."""

    def commands(self) -> Iterator[tuple[str, Callable[[], object]]]:
        """(title, what picking it does) for each command."""
        for spec in COMMANDS:
            needs_more = bool(spec.usage) and not spec.usage.startswith("[")
            run = partial(self._into_box, spec.name) if needs_more else \
                partial(self.screen.post_message, CommandWanted(Command(spec.name)))
            yield f"{spec.synopsis} · {spec.help}", run

    async def discover(self) -> Hits:
        for title, run in self.commands():
            yield DiscoveryHit(title, run, help=BOX_HELP)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, run in self.commands():
            if (score := matcher.match(title)) > 0:
                yield Hit(score, matcher.highlight(title), run, text=title, help=BOX_HELP)

    def _into_box(self, name: str) -> None:
        self.screen.query_one(MessageBox).fill(f"/{name} ")
