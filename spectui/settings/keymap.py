"""The [keys] table's rules: which names are keys, which actions share a screen, and what a
remapped key must not do (be no key at all, take another action's key on the same screen,
or type into the message box). Stdlib only: the names follow Textual's, and
tests/tui/test_tui_keymap.py keeps the two in step.
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Collection

MODIFIERS = ("ctrl", "alt", "shift", "super", "meta", "hyper")
# Modifiers under which a character key is still typed into a text box (Shift+A is "A").
TYPING_MODIFIERS = {"shift", "alt"}
NAMED_KEYS = frozenset(
    ["escape", "enter", "tab", "space", "backspace", "delete", "insert", "home", "end",
     "pageup", "pagedown", "up", "down", "left", "right"]
    + [f"f{number}" for number in range(1, 25)]
)
# Textual's short names for a few characters (textual.keys.KEY_NAME_REPLACEMENTS).
_SHORT_NAMES = {"solidus": "slash", "reverse_solidus": "backslash", "commercial_at": "at",
                "hyphen_minus": "minus", "plus_sign": "plus", "low_line": "underscore"}


def character_key_name(character: str) -> str:
    """Textual's name for the key that types `character`: 'a', '7', 'plus', 'full_stop'."""
    if character.isalnum():
        return character
    name = unicodedata.name(character).lower().replace(" ", "_").replace("-", "_")
    return _SHORT_NAMES.get(name, name)


# The keys a keyboard types, by Textual's name (a literal "+" or "/" is that key too).
CHARACTER_KEYS = frozenset(character_key_name(c) for c in string.digits + string.ascii_lowercase + string.punctuation) | {
    "space"} | set(string.punctuation) - {","}

# Which actions are bound on which screen (the app's own keys act on every screen): two
# actions of one screen may not share a key. The keys each screen keeps for itself are
# listed with them.
APP_LEVEL = ("help", "history", "theme", "screenshot")
COMPARE_ONLY = ("rerun", "sweep", "swap_method")
HISTORY_PREFIX = "history_"  # history_search, history_rename, ...: the history list's own keys
COMPARE = ("compare", "k_down", "k_up", "temperature_down", "temperature_up", *COMPARE_ONLY, "cancel")
FIXED_KEYS = {"ctrl+p": "the command palette's key", "ctrl+q": "quit's key"}
SCREEN_KEYS = {
    "compare": {"q": "the key that closes the compare view"},
    "history": {"escape": "history's back key", "enter": "history's open key"},
}


def screens(action_ids: Collection[str]) -> dict[str, tuple[str, ...]]:
    """Screen -> the actions bound on it. The chat (with its message box) has every action
    but the compare view's and the history list's own."""
    history = tuple(i for i in action_ids if i.startswith(HISTORY_PREFIX))
    chat = tuple(i for i in action_ids if i not in COMPARE_ONLY + history)
    return {"chat": chat, "compare": COMPARE + APP_LEVEL, "history": history + APP_LEVEL}


def key_problem(key: str, types_into_box: bool) -> str | None:
    """Why `key` (one Textual key name) cannot be used, or None. `types_into_box`: the key
    acts on the chat screen, where a printable key would go into the message box."""
    *modifiers, base = key.split("+") if key != "+" else ["+"]
    if not base and modifiers:  # "ctrl++": the key is plus itself
        modifiers, base = modifiers[:-1], "+"
    unknown = [m for m in modifiers if m not in MODIFIERS]
    if unknown or len(set(modifiers)) != len(modifiers):
        return f"{key!r} is not a key: modifiers are {', '.join(MODIFIERS)}, each once"
    if base not in NAMED_KEYS and base not in CHARACTER_KEYS:
        return f"{key!r} is not a key: use Textual's names such as f6, ctrl+up, escape, ctrl+g"
    printable = base in CHARACTER_KEYS and set(modifiers) <= TYPING_MODIFIERS
    if types_into_box and printable:
        return f"{key!r} would type into the message box: use a function key (f1-f12) or a ctrl+ key"
    return None


def clash(keys: dict[str, str], action_ids: Collection[str], remapped: set[str]) -> tuple[str, str, str, str] | None:
    """The first (action, key, what else has that key, screen) where two things on one screen
    share a key. The action named is one the config file remapped (`remapped`), so the
    message points at a line the user wrote."""
    for screen, ids in screens(action_ids).items():
        owners = {**FIXED_KEYS, **SCREEN_KEYS.get(screen, {})}
        for action in sorted(ids, key=lambda a: a in remapped):  # defaults first, stable
            for key in split_keys(keys[action]):
                other = owners.get(key)
                if other is not None and other != f"keys.{action}'s key":
                    return action, key, other, screen
                owners[key] = f"keys.{action}'s key"
    return None


def split_keys(keys: str) -> list[str]:
    return [key.strip() for key in keys.split(",") if key.strip()]
