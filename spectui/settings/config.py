"""The user's config file: defaults for `spectui chat`, key remapping, the theme.

TOML in platformdirs' user config dir (SPECTUI_CONFIG_DIR overrides it). A bad file is a
one-line error that names the file and the line, never a traceback. Stdlib + platformdirs.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from spectui.core.errors import UsageError
from spectui.core.files import (
    SETTINGS_FILE_LIMIT,
    FileTooLarge,
    NotAFile,
    WouldOverwrite,
    read_capped,
    write_user_file,
)
from spectui.settings.checks import OptionError
from spectui.settings.keymap import clash, key_problem, screens, split_keys
from spectui.settings.options import EngineOptions, EngineSettings, engine_options_from_values
from spectui.settings.table import config_settings

CONFIG_FILE_NAME = "config.toml"

# Binding id -> default keys (comma-separated alternatives, Textual key names).
# Function, ctrl and editing keys (Enter, Shift+Tab) only: printable keys belong to the message box.
DEFAULT_KEYS: dict[str, str] = {
    "k_down": "f5,ctrl+down",
    "k_up": "f6,ctrl+up",
    "k_auto": "f9",
    "temperature_down": "f7",
    "temperature_up": "f8",
    "engine_info": "f3",
    "ghosts": "ctrl+g",
    "markdown": "ctrl+r",
    "compare": "f4",
    "rerun": "r",
    "sweep": "s",
    "swap_method": "m",
    "cancel": "escape",
    "new_chat": "ctrl+n",
    "trim": "ctrl+o",
    "history": "f2",
    "history_search": "slash", "history_rename": "r", "history_delete": "d", "history_more": "m",
    "help": "f1",
    "theme": "ctrl+t",
    "screenshot": "ctrl+s",
    "send": "enter",
    "newline": "shift+enter,ctrl+j",
    "pick_reply": "shift+tab",
    "copy_reply": "ctrl+l",
    "copy_code": "ctrl+f",
    "regenerate": "f10",
    "regenerate_live": "ctrl+f10",
    "continue_reply": "ctrl+f9",
    "thinking": "ctrl+f7",
    "edit_last": "f12",
    "system_prompt": "ctrl+f12",
    "model": "f11,ctrl+f11",
    "stats": "ctrl+f5",  # not Ctrl+F3: xterm sends it as a cursor position report
    "advise": "ctrl+f2",  # F1-F12 are taken; beside F2's history, which it replays
}

KEY_DESCRIPTIONS: dict[str, str] = {
    "k_down": "k −1",
    "k_up": "k +1",
    "k_auto": "adaptive k on / off",
    "temperature_down": "T −0.1",
    "temperature_up": "T +0.1",
    "engine_info": "engine info",
    "ghosts": "show rejected drafts",
    "markdown": "Markdown / tokens",
    "compare": "compare view (closes it too)",
    "rerun": "compare: run both again",
    "sweep": "compare: sweep k = 0..8",
    "swap_method": "compare: draft model / prompt lookup",
    "cancel": "cancel the reply",
    "new_chat": "new chat",
    "trim": "resend without the oldest turns (after a too-long chat)",
    "history": "history",
    "history_search": "history: search", "history_rename": "history: rename", "history_delete": "history: delete",
    "history_more": "history: list 200 more",
    "help": "help",
    "theme": "next theme",
    "screenshot": "save a screenshot",
    "send": "send the message",
    "newline": "new line; Ctrl+J works in every terminal",
    "pick_reply": "pick a reply to copy (↑ ↓ move, Esc back)",
    "copy_reply": "copy the picked reply, else the last (plain text)",
    "copy_code": "copy a reply's last code block (again: the one before)",
    "regenerate": "regenerate the last reply as made (its k, T, seed)",
    "regenerate_live": "regenerate it with the current k, T and a new seed",
    "continue_reply": "continue the last reply where it stopped (a cap, Esc, an edit)",
    "thinking": "thinking on / off (a model whose template has the switch)",
    "edit_last": "edit the last message; sending it replaces that turn (on a picked reply: edit that reply)",
    "system_prompt": "edit this chat's system prompt",
    "model": "change model, draft, method, heads or engine",
    "stats": "hide / show the stats panel",
    "advise": "which drafter and k pay for your chats (replayed), and apply it",
}


class ConfigError(UsageError):
    """The config file cannot be used as it is."""


_IN_FILE = {setting.name: setting for setting in config_settings()}  # the file's keys, the chat's way


@dataclass(frozen=True)
class ChatConfig(EngineSettings):
    """Everything `spectui chat` takes from the config file: the engine settings (declared once,
    in EngineSettings), k as the file and the command line say it, then the chat's own settings
    and the keys (tests/test_settings_declared.py holds them to the table). CLI options override it."""

    k: int | str = 4  # a number or "auto"
    # None: a chat's reply may fill what the model's context leaves (engines never read a ChatConfig's)
    max_tokens: int | None = None  # pyright: ignore[reportIncompatibleVariableOverride]  # the chat's default is unset, not 512
    system: str | None = None
    baseline_server: str | None = None
    theme: str = "dark"
    ghosts: bool = False
    keys: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_KEYS))

    def with_overrides(self, **values: object) -> "ChatConfig":
        """CLI options win; None means 'not given on the command line'."""
        given = {name: value for name, value in values.items() if value is not None}
        unknown = set(given) - {f.name for f in fields(self)}
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        merged = replace(self, **{name: _IN_FILE[name].checked(value) if name in _IN_FILE else value
                                  for name, value in given.items()})
        check_values(merged)
        return merged


def config_dir() -> Path:
    override = os.environ.get("SPECTUI_CONFIG_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("spectui"))


def config_path() -> Path:
    return config_dir() / CONFIG_FILE_NAME


_ACCESS_ADVICE = "check its permissions, or set SPECTUI_CONFIG_DIR to a folder of your own"


def load_config(path: Path | None = None) -> ChatConfig:
    """The config file's settings over the defaults; a missing file is the defaults."""
    path = path or config_path()
    try:
        data = read_capped(path, SETTINGS_FILE_LIMIT)
    except FileNotFoundError:
        return ChatConfig()
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder, not a config file: move it away (spectui config init writes one)") from None
    except (NotAFile, FileTooLarge) as error:
        raise ConfigError(f"{path}: {error.strerror}: move it away (spectui config init writes one)") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read it ({error.strerror or error}): {_ACCESS_ADVICE}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigError(
            f"{path} line {line}: not UTF-8 text (byte 0x{data[error.start]:02x}): save it as UTF-8, "
            "or start again with spectui config init --force"
        ) from None
    return parse_config(text, str(path))


def write_config(path: Path, text: str, force: bool = False) -> None:
    """`spectui config init`: write the file, refusing to overwrite one unless forced."""
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a config file: move it away first")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_user_file(path, text, overwrite=force)  # a regular file only, replaced atomically
    except WouldOverwrite:
        raise ConfigError(f"{path} exists (use --force to overwrite)") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot write it ({error.strerror or error}): {_ACCESS_ADVICE}") from None


def parse_config(text: str, where: str = CONFIG_FILE_NAME) -> ChatConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{where}: {_toml_message(error, text)}") from None

    values: dict = {}
    keys = dict(DEFAULT_KEYS)
    remapped: set[str] = set()
    for name, value in data.items():
        line = _line_of(text, name)
        if name == "keys":
            if not isinstance(value, dict):
                raise ConfigError(f"{where} line {line}: [keys] must be a table")
            keys.update(_check_keys(value, text, where))
            remapped = set(value)
            continue
        if name not in _IN_FILE:
            known = ", ".join([*_IN_FILE, "keys"])
            raise ConfigError(f"{where} line {line}: unknown setting {name!r} (known: {known})")
        setting = _IN_FILE[name]
        expected = setting.toml_types()
        # bool is an int to Python; a TOML true is never a valid k.
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            type_name = " or ".join(t.__name__ for t in expected)
            raise ConfigError(f"{where} line {line}: {name} must be {type_name}, got {value!r}")
        if float in expected and not isinstance(value, str):
            value = float(value)
        try:
            values[name] = setting.checked(value)
        except OptionError as error:
            raise ConfigError(f"{where} line {line}: {error}") from None

    _check_clashes(keys, remapped, text, where)
    config = replace(ChatConfig(), keys=keys, **values)
    try:
        engine_options(config)  # the rules between settings
    except OptionError as error:
        raise ConfigError(f"{where} line {_line_of(text, error.setting)}: {error}") from None
    return config


def engine_options(config: ChatConfig) -> EngineOptions:
    return engine_options_from_values({name: getattr(config, name) for name in _IN_FILE})


def check_values(config: ChatConfig) -> None:
    """Each setting by its rule, then the rules between them: the command line's."""
    for setting in _IN_FILE.values():
        setting.checked(getattr(config, setting.name))
    engine_options(config)


def _check_keys(table: dict, text: str, where: str) -> dict[str, str]:
    checked = {}
    for action, keys in table.items():
        line = _line_of(text, action)
        if action not in DEFAULT_KEYS:
            raise ConfigError(
                f"{where} line {line}: unknown key action {action!r} (known: {', '.join(DEFAULT_KEYS)})"
            )
        if not isinstance(keys, str) or not split_keys(keys):
            raise ConfigError(f"{where} line {line}: keys.{action} must be a key name such as \"f6\"")
        checked[action] = ",".join(split_keys(keys))
        in_chat = action in screens(DEFAULT_KEYS)["chat"]
        for key in split_keys(keys):
            problem = key_problem(key, types_into_box=in_chat)
            if problem is not None:
                raise ConfigError(f"{where} line {line}: keys.{action}: {problem}")
    return checked


def _check_clashes(keys: dict[str, str], remapped: set[str], text: str, where: str) -> None:
    """Two actions of one screen on one key: Textual would run only one of them, silently."""
    found = clash(keys, DEFAULT_KEYS, remapped)
    if found is not None:
        action, key, other, screen = found
        raise ConfigError(f"{where} line {_line_of(text, action)}: keys.{action}: {key!r} is already {other} "
                          f"on the {screen} screen; give one of them another key")


def _toml_message(error: tomllib.TOMLDecodeError, text: str) -> str:
    # Python 3.11's message ends "(at line 3, column 5)" or "(at end of document)":
    # turn it into our "line 3: ..." form.
    message = str(error)
    match = re.search(r"\(at line (\d+), column \d+\)$", message)
    if match:
        return f"line {match.group(1)}: {message[: match.start()].strip()}"
    match = re.search(r"\(at end of document\)$", message)
    if match:
        last_line = max(1, len(text.rstrip("\n").splitlines()))
        return f"line {last_line}: {message[: match.start()].strip()} (at the end of the file)"
    return message


def _line_of(text: str, key: str) -> int:
    """The first line that assigns `key` (or opens a [key] table); 1 if none is found."""
    pattern = re.compile(rf"^\s*(\[\s*{re.escape(key)}\s*\]|\"?{re.escape(key)}\"?\s*=)")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return 1


def example_config(default_target: str, default_draft: str) -> str:
    """A commented config file: every setting with its help and its default."""
    shown = {"model": default_target, "draft": default_draft}
    lines = [
        "# spectui chat's config: every setting is optional; command-line options override these.",
        "# (generate, bench and compare --table/--json take theirs from the command line only.)",
        "# Uncomment a line to change it.",
    ]
    for setting in config_settings():
        value = shown.get(setting.name, setting.default if setting.default is not None else setting.example)
        live = " It changes live in the app (keys below)." if setting.live else ""
        lines += ["", *textwrap.wrap(setting.help + live, 88, initial_indent="# ", subsequent_indent="# "),
                  f"# {setting.name} = {_toml_value(value)}"]
    lines += ["", "[keys]                  # Textual key names; several keys separated by commas"]
    lines += [f"# {action} = \"{keys}\"" for action, keys in DEFAULT_KEYS.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # TOML: a literal string keeps JSON's quotes readable; a basic string otherwise
        return f"'{value}'" if '"' in value and "'" not in value else json.dumps(value)
    return repr(value)
