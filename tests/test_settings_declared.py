"""The engine settings are written out once, in EngineSettings, which EngineOptions and ChatConfig
extend (a type checker and a reader see them); the settings table stays the one source of names,
types and defaults. These tests keep the two in step: a field added, dropped, retyped or given
another default fails here, and so does a field declared again in both classes."""

from __future__ import annotations

import typing
from dataclasses import MISSING, dataclass, fields

from spectui.settings.config import ChatConfig
from spectui.settings.options import EngineOptions, EngineSettings
from spectui.settings.table import BY_NAME, Setting, config_settings, engine_settings


def field_type(setting: Setting, keeps_text: bool) -> object:
    """The type a setting's field holds: its kind, None too when it has no default ("not set").
    A setting also given as text (k = "auto") holds that text too where `keeps_text` (ChatConfig,
    as the file and the command line say it); EngineOptions holds what it reads as (auto_k)."""
    kind = setting.kind | str if keeps_text and setting.parse is not None else setting.kind
    return kind if setting.default is not None else kind | None


def mismatches(cls: type, settings: list[Setting], own: tuple[str, ...], keeps_text: bool = False) -> list[str]:
    """How `cls`'s fields differ from the settings (in their order), then its `own` fields."""
    declared = fields(cls)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in declared]
    expected_names = [setting.name for setting in settings] + list(own)
    problems = [] if names == expected_names else [f"fields {names} != {expected_names}"]
    by_name = {f.name: f for f in declared}
    for setting in settings:
        declared_field = by_name.get(setting.name)
        if declared_field is None:
            continue  # named above
        expected = field_type(setting, keeps_text)
        if hints[setting.name] != expected:
            problems.append(f"{setting.name}: type {hints[setting.name]} != {expected}")
        default = declared_field.default
        if default is MISSING or type(default) is not type(setting.default) or default != setting.default:
            problems.append(f"{setting.name}: default {default!r} != {setting.default!r}")
    return problems


def but_k(settings: list[Setting]) -> list[Setting]:
    return [setting for setting in settings if setting.name != "k"]


def test_engine_settings_declare_the_engine_settings_but_k():
    assert mismatches(EngineSettings, but_k(engine_settings()), own=()) == []


def test_engine_options_declare_the_engine_settings():
    assert mismatches(EngineOptions, [*but_k(engine_settings()), BY_NAME["k"]], own=("auto_k",)) == []


def test_chat_config_declares_the_config_settings_at_the_chats_defaults():
    in_engine = {setting.name for setting in engine_settings()}
    config = config_settings()
    declared = [*but_k([s for s in config if s.name in in_engine]), *[s for s in config if s.name == "k"],
                *[s for s in config if s.name not in in_engine]]
    assert mismatches(ChatConfig, declared, own=("keys",), keeps_text=True) == []


def own_fields(cls: type) -> set[str]:
    return set(cls.__dict__.get("__annotations__", {}))


def test_each_engine_setting_is_declared_once():
    """Only k is written in both (a number in EngineOptions, the text "auto" too in ChatConfig):
    every other engine setting comes from EngineSettings."""
    assert own_fields(EngineOptions) & own_fields(ChatConfig) == {"k"}
    assert issubclass(EngineOptions, EngineSettings) and issubclass(ChatConfig, EngineSettings)


def test_the_check_sees_a_dropped_field_a_wrong_type_and_a_wrong_default():
    @dataclass(frozen=True)
    class Drifted:
        model: str = "qwen"  # the table: str | None = None
        method: str = "draft"  # the table's default is "auto"
        k: int = 4  # as given, the table also takes "auto": int | str
        # temperature dropped

    settings = [BY_NAME[name] for name in ("model", "method", "k", "temperature")]
    assert mismatches(Drifted, settings, own=(), keeps_text=True) == [
        "fields ['model', 'method', 'k'] != ['model', 'method', 'k', 'temperature']",
        f"model: type {str} != {str | None}",
        "model: default 'qwen' != None",
        "method: default 'draft' != 'auto'",
        f"k: type {int} != {int | str}",
    ]


def test_a_default_of_another_type_is_a_mismatch():
    """0 == 0.0 and 1 == True in Python: the check compares the defaults' types too."""

    @dataclass(frozen=True)
    class Drifted:
        temperature: float = 0  # an int where the table has 0.0
        history_drafting: bool = 1  # an int where the table has True

    settings = [BY_NAME["temperature"], BY_NAME["history_drafting"]]
    assert mismatches(Drifted, settings, own=()) == [
        "temperature: default 0 != 0.0",
        "history_drafting: default 1 != True",
    ]
