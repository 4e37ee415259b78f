"""The thinking switch (`/think on|off`, its key): where the model's chat template has one
(Qwen3's `enable_thinking`, Capabilities.thinking_switch), the next replies think or answer
at once. Where no template has it, the key is not shown and `/think` says why."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the screen holds its helpers: a type-only import, no cycle when the code runs
    from spectui.tui.screens.chat import ChatScreen

NO_SWITCH = "This model's chat template has no thinking switch (Qwen3-style enable_thinking): it thinks as it is made to."


def has_switch(screen: ChatScreen) -> bool:
    capabilities = screen.host.capabilities
    return capabilities is not None and capabilities.thinking_switch


def parse_think(text: str, now: bool) -> bool:
    """`/think`'s argument: on or off; nothing turns it the other way. ValueError says why not."""
    word = text.strip().lower()
    if not word:
        return not now
    if word in ("on", "off"):
        return word == "on"
    raise ValueError(f"/think takes on or off, not {text.strip()[:40]!r}")


def set_thinking(screen: ChatScreen, text: str = "") -> None:
    """Turn the switch as `text` says (nothing: the other way), or say why not."""
    if not has_switch(screen):
        screen.notify(NO_SWITCH, severity="warning")
        return
    turns = screen.turns
    try:
        turns.thinking = parse_think(text, turns.thinking)
    except ValueError as error:
        screen.notify(str(error), severity="warning")
        return
    screen.notify("Thinking on: the next replies think first" if turns.thinking
                  else "Thinking off: the next replies answer at once")
