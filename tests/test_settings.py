"""The settings table: each setting declared once, and one rule per value wherever it comes from."""

from __future__ import annotations

import math
import re
from dataclasses import fields

import pytest
from typer.testing import CliRunner

from spectui.cli.app import app
from spectui.core.events import K_MAX, TEMPERATURE_MAX, Control
from spectui.settings.checks import OptionError, check_k_list, check_temperature_list, parse_k
from spectui.settings.config import ChatConfig, ConfigError, example_config, parse_config
from spectui.settings.options import EngineOptions
from spectui.settings.table import COMMANDS, CONFIG, LIVE, SETTINGS, config_settings, settings_for

BAD_TEMPERATURES = [math.inf, -math.inf, math.nan, 1e9, TEMPERATURE_MAX + 0.01, -0.1]


def test_each_setting_is_declared_once_and_makes_both_records():
    names = [setting.name for setting in SETTINGS]
    assert len(names) == len(set(names))
    engine = [setting.name for setting in SETTINGS if setting.in_engine]
    # (their order: tests/test_settings_declared.py)
    assert sorted(f.name for f in fields(EngineOptions)) == sorted([*engine, "auto_k"])
    assert sorted(f.name for f in fields(ChatConfig)) == sorted([*(setting.name for setting in config_settings()), "keys"])
    assert EngineOptions().max_tokens == 512  # one default for generate and compare (issue 40)
    assert ChatConfig().max_tokens is None  # a chat's reply may fill what the context leaves (issue 59)


def test_flags_are_unique_within_each_command():
    for command in COMMANDS:
        flags = [flag for setting in settings_for(command) for flag in setting.flags]
        assert len(flags) == len(set(flags)), command


def test_every_choice_is_in_its_help():
    for setting in SETTINGS:
        for command in (*COMMANDS, CONFIG):
            variant = setting.for_command(command)
            for choice in variant.choices:
                assert re.search(rf"\b{choice}\b", variant.help), (setting.name, command, choice)


def test_k_and_temperature_are_the_live_settings():
    assert LIVE == ("k", "temperature")


@pytest.mark.parametrize("given, expected", [
    (0, (0, False)), (K_MAX, (K_MAX, False)), ("7", (7, False)), (" Auto ", (4, True)), ("auto", (4, True)),
])
def test_parse_k_takes_a_number_or_auto(given, expected):
    assert parse_k(given) == expected


@pytest.mark.parametrize("given", [-1, K_MAX + 1, "17", "1.5", "", "four", True, 2.0, None])
def test_parse_k_refuses_the_rest_in_one_wording(given):
    with pytest.raises(OptionError, match=rf"^k must be from 0 to {K_MAX} or auto, got "):
        parse_k(given)


@pytest.mark.parametrize("temperature", BAD_TEMPERATURES)
def test_a_bad_temperature_is_refused_everywhere(temperature):
    text = repr(temperature)  # TOML and float() read inf, -inf and nan as Python writes them
    with pytest.raises(ValueError, match="temperature must be from 0 to 2"):
        Control(temperature=temperature)  # what a key press goes through
    control = Control()
    with pytest.raises(ValueError):
        control.live.update(temperature=temperature)
    with pytest.raises(OptionError, match="temperature must be from 0 to 2"):
        EngineOptions.checked(temperature=temperature)
    with pytest.raises(OptionError, match="temperature must be from 0 to 2"):
        ChatConfig().with_overrides(temperature=temperature)
    with pytest.raises(ConfigError, match="line 2: temperature must be from 0 to 2"):
        parse_config(f"k = 4\ntemperature = {text}\n")
    with pytest.raises(OptionError, match="temperature must be from 0 to 2"):
        check_temperature_list(f"0,{text}")


@pytest.mark.parametrize("value", ["inf", "1e9", "nan", "2.5", "-0.5"])
def test_generate_refuses_a_bad_temperature_before_anything_loads(value, monkeypatch):
    monkeypatch.setattr("spectui.cli.generate.run_generate", lambda *a, **k: pytest.fail("the engine was built"))
    result = CliRunner().invoke(app, ["generate", "hi", "-t", value])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("spectui: error: temperature must be from 0 to 2, got ")


def test_the_largest_temperature_is_accepted_everywhere():
    assert Control(temperature=TEMPERATURE_MAX).temperature == TEMPERATURE_MAX
    assert EngineOptions.checked(temperature=TEMPERATURE_MAX).temperature == TEMPERATURE_MAX
    assert parse_config("temperature = 2\n").temperature == 2.0
    assert check_temperature_list("0, 2") == [0.0, 2.0]


@pytest.mark.parametrize("command", ["generate", "compare", "chat"])
@pytest.mark.parametrize("value", ["0", "-5"])
def test_max_tokens_must_be_positive_on_every_command(command, value, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setattr("spectui.cli.chat.run_chat", lambda *a, **k: pytest.fail("the app opened"))
    arguments = [command, *(["hi", "--table"] if command == "compare" else ["hi"] if command == "generate" else [])]
    result = CliRunner().invoke(app, [*arguments, "--max-tokens", value])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"spectui: error: max_tokens must be > 0, got {value}"


def test_the_config_file_checks_max_tokens_too():
    with pytest.raises(ConfigError, match="line 1: max_tokens must be > 0, got 0"):
        parse_config("max_tokens = 0\n")


def test_k_lists_use_the_one_k_rule():
    assert check_k_list("8, 0,auto,4,4") == ([0, 4, 8], True)
    assert check_k_list("auto") == ([], True)
    for text in ("0,17", "2,x", ",", "1.5"):
        with pytest.raises(OptionError, match="--k takes a comma list of k from 0 to 16 or auto"):
            check_k_list(text)


def test_every_example_line_of_the_config_file_is_valid_on_its_own():
    text = example_config("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
    settings_part, keys_part = text.split("\n[keys]")
    assignments = [line[2:] for line in settings_part.splitlines() if re.match(r"# [a-z_]+ = ", line)]
    assert [line.split(" = ")[0] for line in assignments] == [setting.name for setting in config_settings()]
    for line in assignments:
        name = line.split(" = ")[0]
        extra = 'method = "medusa"\n' if name == "heads" else ""  # heads go with medusa or eagle
        config = parse_config(f"{extra}{line}\n")
        assert getattr(config, name) is not None, line
    parse_config("[keys]" + keys_part.replace("\n# ", "\n"))


def test_a_chat_default_does_not_leak_into_the_engines():
    def default(command: str, name: str):
        return {setting.name: setting.default for setting in settings_for(command)}[name]

    # One reply budget for generate and compare (issue 40); the chat's is what the context leaves
    # (issue 59); bench's own variant stays its own.
    assert (default("generate", "max_tokens"), default("chat", "max_tokens"), default("bench", "max_tokens")) == (512, None, None)
