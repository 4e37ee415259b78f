"""Key bindings by id, so the config file's [keys] table can remap any of them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from textual.binding import Binding

from spectui.settings.config import DEFAULT_KEYS, KEY_DESCRIPTIONS
from spectui.settings.keymap import APP_LEVEL, COMPARE, COMPARE_ONLY

# id -> (action, footer label)
ACTIONS: dict[str, tuple[str, str]] = {
    "help": ("app.help", "help"),
    "history": ("app.history", "history"),
    "engine_info": ("engine_info", "info"),
    "compare": ("compare", "compare"),
    "rerun": ("rerun", "rerun"),
    "sweep": ("sweep", "sweep k"),
    "swap_method": ("swap_method", "method"),
    "k_down": ("k(-1)", "k−"),
    "k_up": ("k(1)", "k+"),
    "k_auto": ("toggle_auto_k", "k auto"),
    "temperature_down": ("temperature(-1)", "T−"),
    "temperature_up": ("temperature(1)", "T+"),
    "ghosts": ("toggle_ghosts", "ghosts"),
    "markdown": ("toggle_markdown", "md"),
    "cancel": ("cancel", "cancel"),
    "new_chat": ("new_chat", "new"),
    "trim": ("resend_trimmed", "trim"),
    "theme": ("app.next_theme", "theme"),
    "screenshot": ("app.screenshot", "shot"),
    "send": ("send", "send"),
    "newline": ("newline", "newline"),
    "pick_reply": ("pick_reply", "pick"),
    "copy_reply": ("copy('reply')", "copy"),
    "copy_code": ("copy('code')", "code"),
    "regenerate": ("regenerate(True)", "regen"),
    "regenerate_live": ("regenerate(False)", "regen live"),
    "continue_reply": ("continue_reply", "continue"),
    "thinking": ("toggle_thinking", "think"),
    "edit_last": ("edit_last", "edit"),
    "system_prompt": ("system_prompt", "system"),
    "model": ("model", "model"),
    "stats": ("toggle_stats", "stats"),
    "advise": ("app.advise", "advise"),
}
PROMPT = ("send", "newline")  # the message box's own keys, shown while it has the focus
# Kept off the footer (help and the Ctrl+P palette list them): said elsewhere (Enter sends:
# the message box says so), useful only at a moment the screen names (a chat over the
# context), or rarer than the footer's width allows.
HIDDEN = ("send", "trim", "pick_reply", "regenerate_live", "system_prompt", "model", "advise")

# What the footer shows first when it cannot show everything (a group: all or none).
FOOTER_PRIORITY = (
    ("help",), ("history",), ("rerun",), ("sweep",), ("swap_method",), ("k_down", "k_up"), ("k_auto",),
    ("compare",), ("continue_reply",), ("thinking",), ("temperature_down", "temperature_up"), ("engine_info",), ("cancel",),
    ("markdown",),
    ("ghosts",), ("regenerate",), ("edit_last",), ("copy_reply",), ("copy_code",), ("new_chat",),
    ("stats",), ("newline",), ("theme",), ("screenshot",),
)


def bindings(ids: Iterable[str]) -> list[Binding]:
    return [
        Binding(DEFAULT_KEYS[i], ACTIONS[i][0], ACTIONS[i][1], id=i, tooltip=KEY_DESCRIPTIONS[i], show=i not in HIDDEN)
        for i in ids
    ]


def chat_bindings() -> list[Binding]:
    return bindings([i for i in ACTIONS if i not in APP_LEVEL + COMPARE_ONLY + PROMPT])


def prompt_bindings() -> list[Binding]:
    return bindings(PROMPT)


# The compare view's footer labels where they differ from the chat's: its key closes the view.
COMPARE_LABELS = {"compare": "close"}


def compare_bindings() -> list[Binding]:
    return [replace(binding, description=COMPARE_LABELS.get(binding.id or "", binding.description))
            for binding in bindings(COMPARE)]


def app_bindings() -> list[Binding]:
    return bindings([i for i in ACTIONS if i in APP_LEVEL])


def remapped(keys: dict[str, str]) -> dict[str, str]:
    """The keys that differ from the bindings' own (DEFAULT_KEYS), for Textual's keymap:
    Textual applies the keymap to the focused chain on every key press, at a cost quadratic
    in the bindings (about 3 ms a key with all of them: a long typed paste took minutes)."""
    return {binding_id: key for binding_id, key in keys.items() if key != DEFAULT_KEYS.get(binding_id)}


def key_display(keys: str) -> str:
    """'f5,ctrl+down' -> 'F5 / Ctrl+Down', for the help screen."""
    shown = []
    for key in keys.split(","):
        parts = [p for p in key.strip().split("+") if p]
        named = [{"escape": "Esc", "ctrl": "Ctrl", "alt": "Alt", "shift": "Shift"}.get(p, p.capitalize()) for p in parts]
        shown.append("+".join(named))
    return " / ".join(shown)
