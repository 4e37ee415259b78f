"""The config file's [keys] table is checked on load: a name that is no key, a key two actions
of one screen share, a key that would type into the message box: one line naming the entry."""

from __future__ import annotations

import string

import pytest

from spectui.settings.config import DEFAULT_KEYS, ConfigError, parse_config
from spectui.settings.keymap import CHARACTER_KEYS, key_problem, screens


@pytest.mark.parametrize(
    "entry, expected",
    [
        ('k_up = "ctrl+banana"', "keys.k_up: 'ctrl+banana' is not a key"),
        ('k_up = "f6,hyper+super+hyper+x"', "keys.k_up: 'hyper+super+hyper+x' is not a key"),
        ('history = "f1"', "keys.history: 'f1' is already keys.help's key on the chat screen"),
        ('k_up = "f9"', "keys.k_up: 'f9' is already keys.k_auto's key on the chat screen"),
        ('k_down = "ctrl+p"', "keys.k_down: 'ctrl+p' is already the command palette's key"),
        ('history_search = "enter"', "keys.history_search: 'enter' is already history's open key on the history screen"),
        ('history_search = "d"', "keys.history_search: 'd' is already keys.history_delete's key on the history screen"),
        ('k_up = "plus,f6"', "keys.k_up: 'plus' would type into the message box"),
        ('help = "shift+h"', "keys.help: 'shift+h' would type into the message box"),
        ('new_chat = "alt+n"', "keys.new_chat: 'alt+n' would type into the message box"),
    ],
)
def test_a_bad_key_entry_is_one_line_naming_it(entry, expected):
    with pytest.raises(ConfigError) as caught:
        parse_config(f"k = 2\n[keys]\n{entry}\n", "config.toml")
    message = str(caught.value)
    assert message.startswith("config.toml line 3: ") and expected in message and "\n" not in message


@pytest.mark.parametrize("entry", ['rerun = "x"', 'history_search = "question_mark"', 'k_up = "f20,ctrl+k"',
                                   'model = "ctrl+f4"', 'help = "f1,ctrl+shift+h"'])
def test_good_remaps_pass(entry):
    parse_config(f"[keys]\n{entry}\n")


def test_the_defaults_pass_their_own_checks():
    assert parse_config("").keys == DEFAULT_KEYS


def test_a_bad_key_stops_chat_with_one_line_and_exit_code_2(tmp_path, monkeypatch, capsys):
    from spectui.cli.app import main

    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    (tmp_path / "config.toml").write_text('[keys]\nk_up = "ctrl+banana"\n')
    monkeypatch.setattr("sys.argv", ["spectui", "chat", "--engine", "scripted"])
    monkeypatch.setattr("spectui.tui.app.SpectuiApp.run", lambda *args, **kwargs: None)  # never a live TUI here
    with pytest.raises(SystemExit) as exited:
        main()
    lines = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and len(lines) == 1 and "keys.k_up: 'ctrl+banana' is not a key" in lines[0]


def test_every_key_textual_names_is_a_key_here():
    from textual.keys import Keys, _character_to_key

    named = [key.value for key in Keys if not key.value.startswith("<") and key.value not in ("return", "ctrl-at")]
    assert [key for key in named if key_problem(key, types_into_box=False)] == []
    typed = {_character_to_key(c) for c in string.ascii_lowercase + string.digits + string.punctuation}
    assert typed - CHARACTER_KEYS == set()


def test_the_screens_here_are_the_screens_the_app_binds():
    from spectui.tui.keys import PROMPT, app_bindings, chat_bindings, compare_bindings

    def ids(bindings):
        return {binding.id for binding in bindings}

    assert ids(chat_bindings()) | set(PROMPT) | ids(app_bindings()) == set(screens(DEFAULT_KEYS)["chat"])
    assert ids(compare_bindings()) | ids(app_bindings()) == set(screens(DEFAULT_KEYS)["compare"])


# How xterm (and tmux, and most terminals after it) sends a key: F1-F4 and the arrows as
# CSI 1;<modifier> <letter>, F5-F12 as CSI <code>;<modifier> ~, Ctrl+letter as one byte.
_MODIFIER_CODES = {"shift": 1, "alt": 2, "ctrl": 4}
_FINAL_LETTERS = {"f1": "P", "f2": "Q", "f3": "R", "f4": "S", "up": "A", "down": "B", "right": "C", "left": "D"}
_TILDE_CODES = {"f5": 15, "f6": 17, "f7": 18, "f8": 19, "f9": 20, "f10": 21, "f11": 23, "f12": 24}


def xterm_bytes(key: str) -> str | None:
    *modifiers, base = key.split("+")
    if modifiers == ["ctrl"] and len(base) == 1 and base.isalpha():
        return chr(ord(base) - 96)
    if any(m not in _MODIFIER_CODES for m in modifiers):
        return None
    code = 1 + sum(_MODIFIER_CODES[m] for m in modifiers)
    if base in _FINAL_LETTERS:
        return f"\x1b[1;{code}{_FINAL_LETTERS[base]}" if modifiers else f"\x1bO{_FINAL_LETTERS[base]}"
    if base in _TILDE_CODES:
        return f"\x1b[{_TILDE_CODES[base]};{code}~" if modifiers else f"\x1b[{_TILDE_CODES[base]}~"
    return None


@pytest.mark.parametrize("action", list(DEFAULT_KEYS))
def test_every_default_key_arrives_as_itself_from_an_xterm_style_terminal(action):
    """Ctrl+F3 is sent as ESC [1;5R, which is also a cursor position report: Textual takes it
    as one, so a key there never arrives."""
    from textual._xterm_parser import XTermParser

    for key in DEFAULT_KEYS[action].split(","):
        sent = xterm_bytes(key)
        if sent is not None:
            events = list(XTermParser().feed(sent))
            assert [getattr(event, "key", type(event).__name__) for event in events] == [key], (action, key, sent)
