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
        ('history_search = "e"', "keys.history_search: 'e' is already history's export key on the history screen"),
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
                                   'model = "ctrl+f11"', 'help = "f1,ctrl+shift+h"'])
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
